//! Transaction rows and block-keyed keys: the `block ++ index` key of a transaction, the
//! `address ++ block` key of the trace-address index, and the fee fields and hash read in place
//! from a stored transaction.

use alloy_primitives::{Address, B256};
use alloy_rlp::Decodable;

/// `address ++ block BE`: the key of [`crate::storage::tables::TRACE_ADDRESSES`].
pub(crate) fn address_block_key(address: &Address, block: u64) -> [u8; 28] {
    let mut k = [0u8; 28];
    k[..20].copy_from_slice(address.as_slice());
    k[20..].copy_from_slice(&block.to_be_bytes());
    k
}

/// The block of an [`address_block_key`] (`None`: not 28 bytes long).
pub(crate) fn block_of_address_key(key: &[u8]) -> Option<u64> {
    let block: [u8; 8] = key.get(20..28)?.try_into().ok()?;
    (key.len() == 28).then(|| u64::from_be_bytes(block))
}

/// What fee history and the tip oracle read of a stored transaction, walked in place in its
/// row (`sender ++ EIP-2718 bytes`) without decoding the rest of it: building a whole
/// `TxEnvelope` was 40 % of an `eth_feeHistory` (alloy has no partial decode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxFees {
    /// Recovered sender.
    pub sender: Address,
    /// `maxFeePerGas`, or the gas price of a legacy or EIP-2930 transaction.
    pub max_fee: u128,
    /// `maxPriorityFeePerGas`; `None` for a legacy or EIP-2930 transaction.
    pub max_priority: Option<u128>,
}

impl TxFees {
    /// The tip per gas paid above `base_fee` (`None` when the fee cap is under it): alloy's
    /// `Transaction::effective_tip_per_gas`.
    pub fn effective_tip(&self, base_fee: u64) -> Option<u128> {
        let fee = self.max_fee.checked_sub(u128::from(base_fee))?;
        Some(self.max_priority.map_or(fee, |p| fee.min(p)))
    }
}

/// The fee fields of a transactions row (`sender ++ EIP-2718 bytes`).
pub(crate) fn decode_tx_fees(row: &[u8]) -> Result<TxFees, alloy_rlp::Error> {
    let (sender, tx) = row.split_at_checked(20).ok_or(alloy_rlp::Error::InputTooShort)?;
    let sender = Address::from_slice(sender);
    let (&first, rest) = tx.split_first().ok_or(alloy_rlp::Error::InputTooShort)?;
    // The fields before the fees: legacy [nonce, gasPrice, ...]; EIP-2930 [chainId, nonce,
    // gasPrice, ...]; EIP-1559, 4844, 7702 [chainId, nonce, maxPriorityFee, maxFee, ...].
    let (mut buf, skip, dynamic) = match first {
        0xc0.. => (tx, 1, false),
        0x01 => (rest, 2, false),
        // A blob transaction stored with its sidecar: the transaction's own list is inside.
        0x03 => (blob_tx_body(tx)?.unwrap_or(rest), 2, true),
        0x02..=0x04 => (rest, 2, true),
        _ => return Err(alloy_rlp::Error::Custom("unknown transaction type")),
    };
    let list = alloy_rlp::Header::decode(&mut buf)?;
    if !list.list || list.payload_length > buf.len() {
        return Err(alloy_rlp::Error::UnexpectedString);
    }
    let mut fields = &buf[..list.payload_length];
    for _ in 0..skip {
        let item = alloy_rlp::Header::decode(&mut fields)?;
        fields = fields.get(item.payload_length..).ok_or(alloy_rlp::Error::InputTooShort)?;
    }
    let first_fee = u128::decode(&mut fields)?;
    if dynamic {
        let max_fee = u128::decode(&mut fields)?;
        Ok(TxFees { sender, max_fee, max_priority: Some(first_fee) })
    } else {
        Ok(TxFees { sender, max_fee: first_fee, max_priority: None })
    }
}

/// The hash of a transactions row's transaction and its length as an item of the block body's
/// list, without decoding it.
pub(crate) fn decode_tx_hash(row: &[u8]) -> Result<(B256, usize), alloy_rlp::Error> {
    let tx = row.get(20..).filter(|tx| !tx.is_empty()).ok_or(alloy_rlp::Error::InputTooShort)?;
    // A legacy transaction is an RLP list in the body; a typed one, its EIP-2718 bytes as an
    // RLP string.
    let len =
        if tx[0] >= 0xc0 { tx.len() } else { tx.len() + alloy_rlp::length_of_length(tx.len()) };
    let hash = match blob_tx_body(tx)? {
        // A blob transaction stored with its sidecar (as some upstreams' raw blocks carry it):
        // its hash covers the transaction alone.
        Some(body) => {
            let mut h = alloy_primitives::Keccak256::new();
            h.update([0x03]);
            h.update(body);
            h.finalize()
        }
        None => alloy_primitives::keccak256(tx),
    };
    Ok((hash, len))
}

/// The transaction list inside a type-3 transaction in its network form
/// (`0x03 ++ rlp([tx, blobs, commitments, proofs])`); `None` for any other transaction.
pub(crate) fn blob_tx_body(tx: &[u8]) -> Result<Option<&[u8]>, alloy_rlp::Error> {
    let Some((0x03, mut rest)) = tx.split_first().map(|(t, r)| (*t, r)) else { return Ok(None) };
    let outer = alloy_rlp::Header::decode(&mut rest)?;
    if !outer.list || rest.first().is_none_or(|b| *b < 0xc0) {
        return Ok(None);
    }
    let start = rest;
    let inner = alloy_rlp::Header::decode(&mut rest)?;
    let used = start.len() - rest.len() + inner.payload_length;
    start.get(..used).map(Some).ok_or(alloy_rlp::Error::InputTooShort)
}

/// `block BE ++ index BE`: the key of [`crate::storage::tables::TRANSACTIONS`].
pub(crate) fn tx_key(block: u64, index: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&block.to_be_bytes());
    k[8..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The block and index of a [`tx_key`].
pub(crate) fn split_tx_key(k: &[u8; 12]) -> (u64, u32) {
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[..8]);
    let mut i = [0u8; 4];
    i.copy_from_slice(&k[8..]);
    (u64::from_be_bytes(b), u32::from_be_bytes(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::history::keys::{
        Epochs, hashed_account_history_key, hashed_storage_history_key,
    };

    #[test]
    fn history_keys_sort_by_block_within_entity() {
        let a = Address::repeat_byte(1);
        assert!(address_block_key(&a, 2) < address_block_key(&a, 256));
        assert_eq!(block_of_address_key(&address_block_key(&a, 256)), Some(256));
        assert_eq!(block_of_address_key(&[0; 27]), None);
        let (h, s) = (B256::repeat_byte(1), B256::repeat_byte(5));
        let e = Epochs { len: 4 };
        assert!(hashed_account_history_key(e, &h, 2) < hashed_account_history_key(e, &h, 3));
        // Epoch first: any key of an earlier epoch sorts before the next epoch.
        let other = B256::repeat_byte(0);
        assert!(hashed_account_history_key(e, &h, 3) < hashed_account_history_key(e, &other, 4));
        assert!(
            hashed_storage_history_key(e, &h, &s, 9) < hashed_storage_history_key(e, &h, &s, 10)
        );
        let next = B256::repeat_byte(6);
        assert!(
            hashed_storage_history_key(e, &h, &s, 11) < hashed_storage_history_key(e, &h, &next, 8)
        );
        assert_eq!(split_tx_key(&tx_key(300, 7)), (300, 7));
    }
}

#[cfg(test)]
mod tx_row_tests {
    use alloy_consensus::{
        Signed, Transaction, TxEip1559, TxEip2930, TxEip4844, TxEip4844Variant,
        TxEip4844WithSidecar, TxEip7702, TxEnvelope, TxLegacy,
    };
    use alloy_eips::{Decodable2718, Encodable2718};
    use alloy_primitives::{Address, Signature, U256};
    use alloy_rlp::Encodable;

    use super::{decode_tx_fees, decode_tx_hash};

    /// Transactions of all five types with fees from zero to the largest, as stored rows
    /// (`sender ++ EIP-2718 bytes`).
    fn rows() -> Vec<(Address, TxEnvelope, Vec<u8>)> {
        let sig = |n: u64| Signature::new(U256::from(n), U256::from(n + 1), n.is_multiple_of(2));
        let fees: [(u128, u128); 5] = [
            (0, 0),
            (7, 3),
            (1_000_000_000, 2_000_000_000),
            (30_000_000_000, 1),
            (u128::MAX, u128::MAX),
        ];
        let mut out = Vec::new();
        for (i, &(a, b)) in fees.iter().enumerate() {
            let n = i as u64;
            let to = alloy_primitives::TxKind::Call(Address::repeat_byte(i as u8 + 1));
            let input: alloy_primitives::Bytes = vec![i as u8; i * 40].into();
            let txs = [
                TxEnvelope::Legacy(Signed::new_unhashed(
                    TxLegacy {
                        chain_id: Some(1),
                        nonce: n,
                        gas_price: a,
                        gas_limit: 21_000,
                        to,
                        input: input.clone(),
                        ..Default::default()
                    },
                    sig(n),
                )),
                TxEnvelope::Eip2930(Signed::new_unhashed(
                    TxEip2930 {
                        chain_id: 1,
                        nonce: n,
                        gas_price: b,
                        gas_limit: 50_000,
                        to,
                        input: input.clone(),
                        ..Default::default()
                    },
                    sig(n + 10),
                )),
                TxEnvelope::Eip1559(Signed::new_unhashed(
                    TxEip1559 {
                        chain_id: 1,
                        nonce: n,
                        max_fee_per_gas: a,
                        max_priority_fee_per_gas: b,
                        gas_limit: 90_000,
                        to,
                        input: input.clone(),
                        ..Default::default()
                    },
                    sig(n + 20),
                )),
                TxEnvelope::Eip4844(Signed::new_unhashed(
                    TxEip4844 {
                        chain_id: 1,
                        nonce: n,
                        max_fee_per_gas: b,
                        max_priority_fee_per_gas: a,
                        max_fee_per_blob_gas: 3,
                        blob_versioned_hashes: vec![Default::default(); i + 1],
                        input: input.clone(),
                        ..Default::default()
                    }
                    .into(),
                    sig(n + 30),
                )),
                TxEnvelope::Eip7702(Signed::new_unhashed(
                    TxEip7702 {
                        chain_id: 1,
                        nonce: n,
                        max_fee_per_gas: a.max(b),
                        max_priority_fee_per_gas: a.min(b),
                        gas_limit: 60_000,
                        input,
                        ..Default::default()
                    },
                    sig(n + 40),
                )),
            ];
            // A blob transaction stored with its sidecar (network form), as an upstream's raw
            // block may carry it.
            let sidecar = alloy_eips::eip4844::BlobTransactionSidecar {
                blobs: vec![Default::default(); 1],
                commitments: vec![Default::default(); 1],
                proofs: vec![Default::default(); 1],
            };
            let with_sidecar = TxEip4844WithSidecar {
                tx: TxEip4844 { chain_id: 1, nonce: n, max_fee_per_gas: a, ..Default::default() },
                sidecar: alloy_eips::eip7594::BlobTransactionSidecarVariant::Eip4844(sidecar),
            };
            let with_sidecar = TxEnvelope::Eip4844(Signed::new_unhashed(
                TxEip4844Variant::TxEip4844WithSidecar(with_sidecar),
                sig(n + 50),
            ));
            for tx in txs.into_iter().chain([with_sidecar]) {
                let sender = Address::repeat_byte(0xa0 + i as u8);
                let mut row = sender.to_vec();
                tx.encode_2718(&mut row);
                out.push((sender, tx, row));
            }
        }
        out
    }

    #[test]
    fn fees_read_in_place_equal_the_decoded_transaction() {
        for (sender, tx, row) in rows() {
            let fees = decode_tx_fees(&row).unwrap();
            assert_eq!(fees.sender, sender);
            assert_eq!(fees.max_fee, tx.max_fee_per_gas(), "{tx:?}");
            assert_eq!(fees.max_priority, tx.max_priority_fee_per_gas(), "{tx:?}");
            for base_fee in [0, 1, 7, 1_000_000_000, 29_999_999_999, u64::MAX] {
                assert_eq!(fees.effective_tip(base_fee), tx.effective_tip_per_gas(base_fee));
            }
            // A cut row is an error, never a panic or a wrong answer.
            for cut in 0..row.len() {
                if let Ok(f) = decode_tx_fees(&row[..cut]) {
                    assert_eq!(f, fees, "a row cut at {cut} read other fees");
                }
            }
        }
        assert!(decode_tx_fees(&[0; 20]).is_err());
        let mut unknown = vec![0u8; 20];
        unknown.extend([0x7e, 0xc1, 0x80]);
        assert!(decode_tx_fees(&unknown).is_err());
    }

    #[test]
    fn hash_and_length_read_from_the_row_equal_the_decoded_transaction() {
        let rows = rows();
        assert!(
            rows.iter().any(|(_, _, row)| matches!(super::blob_tx_body(&row[20..]), Ok(Some(_))))
        );
        for (_, tx, row) in rows {
            let (hash, len) = decode_tx_hash(&row).unwrap();
            // alloy hashes its own encoding of the transaction, not these bytes.
            let decoded = TxEnvelope::decode_2718(&mut &row[20..]).unwrap();
            assert_eq!(hash, *decoded.tx_hash());
            assert_eq!(hash, *tx.tx_hash());
            assert_eq!(len, tx.length(), "{tx:?}");
        }
        assert!(decode_tx_hash(&[0; 20]).is_err());
    }
}
