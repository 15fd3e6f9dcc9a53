//! Byte layouts of keys and values; see [`super::tables`].

use std::borrow::Cow;

use alloy_consensus::{Eip658Value, Receipt, ReceiptEnvelope, ReceiptWithBloom, TxType};
use alloy_primitives::{Address, B256, KECCAK256_EMPTY, Log, U256, keccak256};
use alloy_rlp::{Decodable, Encodable};

use super::StorageError;
use super::history::epochs::Epochs;

/// An account as stored: what revm's `AccountInfo` holds, minus the code itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredAccount {
    /// Transaction count / creation nonce.
    pub nonce: u64,
    /// Balance in wei.
    pub balance: U256,
    /// Keccak of the code, [`KECCAK256_EMPTY`] for none.
    pub code_hash: B256,
}

impl StoredAccount {
    /// Encodes into the fixed 72-byte layout.
    pub fn encode(&self) -> [u8; 72] {
        let mut out = [0u8; 72];
        out[..8].copy_from_slice(&self.nonce.to_be_bytes());
        out[8..40].copy_from_slice(&self.balance.to_be_bytes::<32>());
        out[40..].copy_from_slice(self.code_hash.as_slice());
        out
    }

    /// Decodes the 72-byte layout.
    pub fn decode(b: &[u8; 72]) -> Self {
        let mut nonce = [0u8; 8];
        nonce.copy_from_slice(&b[..8]);
        Self {
            nonce: u64::from_be_bytes(nonce),
            balance: U256::from_be_slice(&b[8..40]),
            code_hash: B256::from_slice(&b[40..]),
        }
    }

    /// Whether the account has code.
    pub fn has_code(&self) -> bool {
        self.code_hash != KECCAK256_EMPTY && self.code_hash != B256::ZERO
    }
}

/// Longest [`HashedAccount`] row: the stamp with its length, flags, address, nonce and balance
/// with their lengths, code hash and storage root.
const HASHED_ACCOUNT_MAX: usize = 1 + 8 + 1 + 20 + 1 + 8 + 1 + 32 + 32 + 32;

/// Flag of a [`HashedAccount`] row: the code hash follows (absent: [`KECCAK256_EMPTY`]).
const HAS_CODE_HASH: u8 = 1;
/// Flag of a [`HashedAccount`] row: the storage root follows (absent: the empty root).
const HAS_STORAGE_ROOT: u8 = 2;

/// An account as the state trie sees it: [`StoredAccount`] plus the root of its storage trie,
/// and the address it belongs to (the preimage of its key, so that the state can be listed by
/// address without a table of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashedAccount {
    /// The account's address; its keccak is the row's key.
    pub address: Address,
    /// The account fields.
    pub account: StoredAccount,
    /// Root of the account's storage trie (the empty root for no storage).
    pub storage_root: B256,
}

/// An encoded [`HashedAccount`], on the stack.
#[derive(Debug, Clone, Copy)]
pub struct EncodedAccount {
    buf: [u8; HASHED_ACCOUNT_MAX],
    len: usize,
}

impl EncodedAccount {
    /// The row's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// `bytes` without their leading zeros, after a length byte.
    fn push_trimmed(&mut self, bytes: &[u8]) {
        let from = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
        self.push(&[(bytes.len() - from) as u8]);
        self.push(&bytes[from..]);
    }
}

impl HashedAccount {
    /// Encodes a row: the stamp (the block that wrote it, see [`row_stamp`]), then flags,
    /// address (20), nonce and balance, the stamp, nonce and balance each as a length byte and
    /// their big-endian bytes without leading zeros, then the code hash unless it is
    /// [`KECCAK256_EMPTY`] and the storage root unless it is the empty root. Most accounts are
    /// plain: about 35 bytes instead of 124 in the fixed layout of format 6.
    pub fn encode(&self, stamp: u64) -> EncodedAccount {
        let mut out = EncodedAccount { buf: [0u8; HASHED_ACCOUNT_MAX], len: 0 };
        out.push_trimmed(&stamp.to_be_bytes());
        let code = self.account.code_hash != KECCAK256_EMPTY;
        let storage = self.storage_root != alloy_trie::EMPTY_ROOT_HASH;
        out.push(&[(u8::from(code) * HAS_CODE_HASH) | (u8::from(storage) * HAS_STORAGE_ROOT)]);
        out.push(self.address.as_slice());
        out.push_trimmed(&self.account.nonce.to_be_bytes());
        out.push_trimmed(&self.account.balance.to_be_bytes::<32>());
        if code {
            out.push(self.account.code_hash.as_slice());
        }
        if storage {
            out.push(self.storage_root.as_slice());
        }
        out
    }

    /// Decodes a row of [`HashedAccount::encode`]; `table` names the table in an error.
    pub fn decode(b: &[u8], table: &'static str) -> Result<Self, StorageError> {
        let bad = |what: &str| StorageError::Corrupt {
            table,
            detail: format!("account row of {} bytes: {what}", b.len()),
        };
        let (_, rest) = trimmed::<8>(b).ok_or_else(|| bad("bad stamp"))?;
        let (&flags, rest) = rest.split_first().ok_or_else(|| bad("no flags"))?;
        if flags & !(HAS_CODE_HASH | HAS_STORAGE_ROOT) != 0 {
            return Err(bad("unknown flags"));
        }
        let (address, rest) = rest.split_at_checked(20).ok_or_else(|| bad("short address"))?;
        let (nonce, rest) = trimmed::<8>(rest).ok_or_else(|| bad("bad nonce"))?;
        let (balance, rest) = trimmed::<32>(rest).ok_or_else(|| bad("bad balance"))?;
        let (code_hash, rest) = if flags & HAS_CODE_HASH != 0 {
            let (h, rest) = rest.split_at_checked(32).ok_or_else(|| bad("short code hash"))?;
            (B256::from_slice(h), rest)
        } else {
            (KECCAK256_EMPTY, rest)
        };
        let (storage_root, rest) = if flags & HAS_STORAGE_ROOT != 0 {
            let (h, rest) = rest.split_at_checked(32).ok_or_else(|| bad("short storage root"))?;
            (B256::from_slice(h), rest)
        } else {
            (alloy_trie::EMPTY_ROOT_HASH, rest)
        };
        if !rest.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(Self {
            address: Address::from_slice(address),
            account: StoredAccount {
                nonce: u64::from_be_bytes(nonce),
                balance: U256::from_be_bytes(balance),
                code_hash,
            },
            storage_root,
        })
    }

    /// Decodes a history value: empty = did not exist.
    pub fn decode_history(b: &[u8]) -> Result<Option<Self>, StorageError> {
        if b.is_empty() {
            return Ok(None);
        }
        Self::decode(b, "hashed_account_history").map(Some)
    }

    /// The account leaf's value: RLP of the account with its storage root.
    pub fn trie_account(&self) -> alloy_trie::TrieAccount {
        alloy_trie::TrieAccount {
            nonce: self.account.nonce,
            balance: self.account.balance,
            storage_root: self.storage_root,
            code_hash: self.account.code_hash,
        }
    }
}

/// The stamp of a current row of `hashed_accounts` or `hashed_storage` (or of a saved one in
/// their history): the block whose changes wrote it, 0 for the genesis allocation. Both row
/// kinds start with it, as a length byte and its big-endian bytes without leading zeros.
///
/// The stamp serves the history lookup (`storage::history::epochs`): a key whose row was written at or
/// before block N has not changed since N, and the epoch index leaves out the epoch of each
/// key's stamp (the current row names it).
pub fn row_stamp(b: &[u8], table: &'static str) -> Result<u64, StorageError> {
    trimmed::<8>(b).map(|(s, _)| u64::from_be_bytes(s)).ok_or_else(|| StorageError::Corrupt {
        table,
        detail: format!("row of {} bytes has no stamp", b.len()),
    })
}

/// Longest [`hashed_storage`](super::tables::HASHED_STORAGE) row: the stamp with its length and
/// a 32-byte value.
const SLOT_ROW_MAX: usize = 1 + 8 + 32;

/// An encoded slot row, on the stack: the stamp ([`row_stamp`]) and the value, big-endian
/// without leading zeros (the rest of the row; never empty, the value is never zero).
#[derive(Debug, Clone, Copy)]
pub struct SlotRow {
    buf: [u8; SLOT_ROW_MAX],
    len: usize,
}

impl SlotRow {
    /// The row of `value` written by block `stamp`.
    pub fn new(stamp: u64, value: &U256) -> Self {
        let stamp = stamp.to_be_bytes();
        let stamp = &stamp[stamp.iter().position(|b| *b != 0).unwrap_or(8)..];
        let value = value.to_be_bytes::<32>();
        let value = &value[value.iter().position(|b| *b != 0).unwrap_or(32)..];
        let mut buf = [0u8; SLOT_ROW_MAX];
        buf[0] = stamp.len() as u8;
        buf[1..1 + stamp.len()].copy_from_slice(stamp);
        buf[1 + stamp.len()..1 + stamp.len() + value.len()].copy_from_slice(value);
        Self { buf, len: 1 + stamp.len() + value.len() }
    }

    /// The row's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Decodes a slot row of [`SlotRow::new`]: its stamp and value. An empty row (a history row of
/// an unset slot) is stamp 0, value zero.
pub fn decode_slot(b: &[u8], table: &'static str) -> Result<(u64, U256), StorageError> {
    if b.is_empty() {
        return Ok((0, U256::ZERO));
    }
    let bad = || StorageError::Corrupt { table, detail: format!("slot row of {} bytes", b.len()) };
    let (stamp, rest) = trimmed::<8>(b).ok_or_else(bad)?;
    if rest.len() > 32 {
        return Err(bad());
    }
    Ok((u64::from_be_bytes(stamp), U256::from_be_slice(rest)))
}

/// A length byte and that many big-endian bytes, right-aligned in `N` bytes; the rest of `b`.
fn trimmed<const N: usize>(b: &[u8]) -> Option<([u8; N], &[u8])> {
    let (&len, rest) = b.split_first()?;
    let len = usize::from(len);
    if len > N {
        return None;
    }
    let (bytes, rest) = rest.split_at_checked(len)?;
    let mut out = [0u8; N];
    out[N - len..].copy_from_slice(bytes);
    Some((out, rest))
}

/// `keccak(address) ++ keccak(slot)`: key of [`super::tables::HASHED_STORAGE`].
pub fn hashed_storage_key(hashed_address: &B256, hashed_slot: &B256) -> [u8; 64] {
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(hashed_address.as_slice());
    k[32..].copy_from_slice(hashed_slot.as_slice());
    k
}

/// `epoch ++ keccak(address) ++ block`: key of [`super::tables::HASHED_ACCOUNT_HISTORY`].
pub fn hashed_account_history_key(epochs: Epochs, hashed_address: &B256, block: u64) -> [u8; 44] {
    epochs.history_key(&hashed_address.0, block)
}

/// `epoch ++ keccak(address) ++ keccak(slot) ++ block`: key of
/// [`super::tables::HASHED_STORAGE_HISTORY`].
pub fn hashed_storage_history_key(
    epochs: Epochs,
    hashed_address: &B256,
    hashed_slot: &B256,
    block: u64,
) -> [u8; 76] {
    epochs.history_key(&hashed_storage_key(hashed_address, hashed_slot), block)
}

/// `address ++ block BE`: the key of [`super::tables::TRACE_ADDRESSES`].
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

pub(crate) fn tx_key(block: u64, index: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&block.to_be_bytes());
    k[8..].copy_from_slice(&index.to_be_bytes());
    k
}

pub(crate) fn split_tx_key(k: &[u8; 12]) -> (u64, u32) {
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[..8]);
    let mut i = [0u8; 4];
    i.copy_from_slice(&k[8..]);
    (u64::from_be_bytes(b), u32::from_be_bytes(i))
}

pub(crate) fn u64_value(table: &'static str, b: &[u8]) -> Result<u64, StorageError> {
    let arr: [u8; 8] = b.try_into().map_err(|_| StorageError::Corrupt {
        table,
        detail: format!("{} bytes, want 8", b.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}

/// First byte of a receipts row stored without blooms. A row written before (an RLP list of
/// whole receipt envelopes) starts with a list header, 0xc0 or above, so both are told apart and
/// old rows stay readable.
const RECEIPTS_WITHOUT_BLOOMS: u8 = 0;

/// First byte of a receipts row stored without blooms and compressed: then the length of the
/// RLP list (u32 BE) and the list compressed with zstd, with its content checksum. Logs repeat
/// addresses, topics and the zero bytes of padded words, so a block's receipts take about a
/// third of the bytes (BENCHMARKS.md, session 28).
const RECEIPTS_ZSTD: u8 = 1;

/// A list at most this long is stored uncompressed (a zstd frame has a few bytes of its own).
const RECEIPTS_COMPRESS_FROM: usize = 128;

/// zstd's fastest level: higher ones gained 3 % on a generated chain's receipts.
const RECEIPTS_ZSTD_LEVEL: i32 = 1;

/// The longest RLP list a compressed receipts row may claim (a block's receipts are bounded by
/// its gas; this bounds the memory a corrupt row can ask for).
const MAX_RECEIPTS_LIST: usize = 256 << 20;

/// A receipt's status (or post-state root), cumulative gas and logs.
fn fields(r: &ReceiptEnvelope) -> (Eip658Value, u64, &[Log]) {
    match r.as_receipt() {
        Some(inner) => (inner.status, inner.cumulative_gas_used, inner.logs.as_slice()),
        None => (Eip658Value::Eip658(r.status()), r.cumulative_gas_used(), r.logs()),
    }
}

/// Encodes a block's receipts for [`super::tables::RECEIPTS`]: each as the RLP list
/// `[type, status or post-state root, cumulative gas, logs]`, without its 256-byte bloom, which
/// is a function of its logs and is recomputed when read (most of a receipt's bytes otherwise).
/// Lists longer than [`RECEIPTS_COMPRESS_FROM`] bytes are stored compressed ([`RECEIPTS_ZSTD`]).
pub(crate) fn encode_receipts(receipts: &[ReceiptEnvelope], out: &mut Vec<u8>) {
    let start = out.len();
    encode_receipts_list(receipts, out);
    let list = &out[start + 1..];
    if list.len() <= RECEIPTS_COMPRESS_FROM {
        return;
    }
    let Ok(length) = u32::try_from(list.len()) else { return };
    // With zstd's checksum of the content, so that a damaged row is an error, not other
    // receipts. Compression does not fail on a buffer in memory; if it did, the row stays plain.
    let packed = zstd::bulk::Compressor::new(RECEIPTS_ZSTD_LEVEL).and_then(|mut c| {
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        c.compress(list)
    });
    if let Ok(packed) = packed {
        out.truncate(start);
        out.push(RECEIPTS_ZSTD);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&packed);
    }
}

/// [`RECEIPTS_WITHOUT_BLOOMS`] and the RLP list of the receipts without blooms.
fn encode_receipts_list(receipts: &[ReceiptEnvelope], out: &mut Vec<u8>) {
    out.push(RECEIPTS_WITHOUT_BLOOMS);
    let lengths: Vec<usize> = receipts
        .iter()
        .map(|r| {
            let (status, gas, logs) = fields(r);
            (r.tx_type() as u8).length()
                + status.length()
                + gas.length()
                + alloy_rlp::list_length(logs)
        })
        .collect();
    let payload: usize = lengths.iter().map(|l| l + alloy_rlp::length_of_length(*l)).sum();
    alloy_rlp::Header { list: true, payload_length: payload }.encode(out);
    for (r, length) in receipts.iter().zip(lengths) {
        let (status, gas, logs) = fields(r);
        alloy_rlp::Header { list: true, payload_length: length }.encode(out);
        (r.tx_type() as u8).encode(out);
        status.encode(out);
        gas.encode(out);
        alloy_rlp::encode_list(logs, out);
    }
}

/// Decodes a row of [`super::tables::RECEIPTS`], of any layout, each bloom computed from its
/// receipt's logs.
pub(crate) fn decode_receipts(mut bytes: &[u8]) -> Result<Vec<ReceiptEnvelope>, alloy_rlp::Error> {
    match receipts_list(bytes)? {
        Some(list) => {
            let mut hashes = BloomHashes::default();
            receipt_items(&list)?.map(|item| decode_receipt_item(item?, &mut hashes)).collect()
        }
        None => Vec::<ReceiptEnvelope>::decode(&mut bytes),
    }
}

/// The cumulative gas of each receipt of a row of [`super::tables::RECEIPTS`]; logs are skipped
/// over, and no receipt is built (`eth_feeHistory`).
pub(crate) fn decode_cumulative_gas(bytes: &[u8]) -> Result<Vec<u64>, alloy_rlp::Error> {
    let Some(list) = receipts_list(bytes)? else {
        return Ok(decode_receipts(bytes)?.iter().map(|r| r.cumulative_gas_used()).collect());
    };
    receipt_items(&list)?.map(|item| skip_to_logs(&mut item?)).collect()
}

/// One receipt of a block, with what its RPC object needs from the receipts before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptInBlock {
    /// The receipt, its bloom computed from its logs.
    pub receipt: ReceiptEnvelope,
    /// Cumulative gas of the receipt before it (0 for the first): its gas used is the difference.
    pub gas_before: u64,
    /// Logs of the receipts before it: the block-wide index of its first log.
    pub logs_before: u64,
}

/// Decodes receipt `index` of a row of [`super::tables::RECEIPTS`]. The receipts before it are
/// only skipped over (their cumulative gas read and their logs counted), so no other receipt is
/// built and no other bloom computed. `None`: the block has fewer receipts.
pub(crate) fn decode_receipt_at(
    bytes: &[u8],
    index: usize,
) -> Result<Option<ReceiptInBlock>, alloy_rlp::Error> {
    let Some(list) = receipts_list(bytes)? else {
        // Rows of the oldest layout (whole envelopes) are decoded whole.
        let all = decode_receipts(bytes)?;
        let gas_before =
            index.checked_sub(1).and_then(|i| all.get(i)).map_or(0, |r| r.cumulative_gas_used());
        let logs_before = all.iter().take(index).map(|r| r.logs().len() as u64).sum();
        return Ok(all.into_iter().nth(index).map(|receipt| ReceiptInBlock {
            receipt,
            gas_before,
            logs_before,
        }));
    };
    let mut items = receipt_items(&list)?;
    let (mut gas_before, mut logs_before) = (0, 0);
    for _ in 0..index {
        let Some(mut item) = items.next().transpose()? else { return Ok(None) };
        gas_before = skip_to_logs(&mut item)?;
        logs_before += count_items(&mut item)?;
        if !item.is_empty() {
            return Err(alloy_rlp::Error::Custom("trailing bytes in a receipt"));
        }
    }
    let Some(item) = items.next().transpose()? else { return Ok(None) };
    let receipt = decode_receipt_item(item, &mut BloomHashes::default())?;
    Ok(Some(ReceiptInBlock { receipt, gas_before, logs_before }))
}

/// A log that [`decode_matching_logs`] kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogInBlock {
    /// Index of its transaction in the block.
    pub tx_index: u32,
    /// Its index among all the block's logs.
    pub log_index: u64,
    /// The log.
    pub log: Log,
}

/// What [`decode_matching_logs`] asks of each log: its address and topics.
pub type LogKeep<'k> = dyn Fn(&Address, &[B256]) -> bool + 'k;

/// The logs of a row of [`super::tables::RECEIPTS`] that `keep` accepts, in order. The other
/// logs are only skipped over (their address and topics read in place, their data never
/// copied), and no receipt is built.
pub(crate) fn decode_matching_logs(
    bytes: &[u8],
    keep: &LogKeep<'_>,
) -> Result<Vec<LogInBlock>, alloy_rlp::Error> {
    let mut out = Vec::new();
    let mut log_index = 0u64;
    let Some(list) = receipts_list(bytes)? else {
        // Rows of the oldest layout (whole envelopes) are decoded whole.
        for (tx_index, receipt) in (0u32..).zip(decode_receipts(bytes)?) {
            for log in receipt.logs() {
                if keep(&log.address, log.topics()) {
                    out.push(LogInBlock { tx_index, log_index, log: log.clone() });
                }
                log_index += 1;
            }
        }
        return Ok(out);
    };
    for (tx_index, item) in (0u32..).zip(receipt_items(&list)?) {
        let mut item = item?;
        skip_to_logs(&mut item)?;
        let mut logs = list_payload(&mut item, "logs are not an RLP list")?;
        if !item.is_empty() {
            return Err(alloy_rlp::Error::Custom("trailing bytes in a receipt"));
        }
        while !logs.is_empty() {
            let whole = logs;
            let mut fields = list_payload(&mut logs, "log is not an RLP list")?;
            let address = Address::decode(&mut fields)?;
            let mut raw = list_payload(&mut fields, "log topics are not an RLP list")?;
            // LOG0..LOG4: at most four topics.
            let mut topics = [B256::ZERO; 4];
            let mut n = 0;
            while !raw.is_empty() {
                let slot = topics
                    .get_mut(n)
                    .ok_or(alloy_rlp::Error::Custom("log has more than four topics"))?;
                *slot = B256::decode(&mut raw)?;
                n += 1;
            }
            if keep(&address, &topics[..n]) {
                let log = Log::decode(&mut &whole[..whole.len() - logs.len()])?;
                out.push(LogInBlock { tx_index, log_index, log });
            }
            log_index += 1;
        }
    }
    Ok(out)
}

/// Reads a receipt's payload up to its logs: skips its type and status and returns its
/// cumulative gas, leaving `item` at the logs.
fn skip_to_logs(item: &mut &[u8]) -> Result<u64, alloy_rlp::Error> {
    u8::decode(item)?;
    Eip658Value::decode(item)?;
    u64::decode(item)
}

/// Takes the RLP list at the start of `bytes` off it and returns its payload.
fn list_payload<'b>(
    bytes: &mut &'b [u8],
    what: &'static str,
) -> Result<&'b [u8], alloy_rlp::Error> {
    let header = alloy_rlp::Header::decode(bytes)?;
    if !header.list || bytes.len() < header.payload_length {
        return Err(alloy_rlp::Error::Custom(what));
    }
    let (payload, rest) = bytes.split_at(header.payload_length);
    *bytes = rest;
    Ok(payload)
}

/// The RLP list of receipts without blooms that a row of either newer layout holds, decompressed
/// where it is stored compressed; `None` for a row of the oldest layout (whole envelopes).
fn receipts_list(bytes: &[u8]) -> Result<Option<Cow<'_, [u8]>>, alloy_rlp::Error> {
    match bytes.first() {
        Some(&RECEIPTS_WITHOUT_BLOOMS) => Ok(Some(Cow::Borrowed(&bytes[1..]))),
        Some(&RECEIPTS_ZSTD) => {
            let Some((length, packed)) = bytes[1..].split_first_chunk::<4>() else {
                return Err(alloy_rlp::Error::Custom("compressed receipts row is truncated"));
            };
            let length = u32::from_be_bytes(*length) as usize;
            if length > MAX_RECEIPTS_LIST {
                return Err(alloy_rlp::Error::Custom("compressed receipts row claims too much"));
            }
            let list = zstd::bulk::decompress(packed, length)
                .map_err(|_| alloy_rlp::Error::Custom("receipts row does not decompress"))?;
            if list.len() != length {
                return Err(alloy_rlp::Error::Custom(
                    "receipts row decompresses to another length",
                ));
            }
            Ok(Some(Cow::Owned(list)))
        }
        _ => Ok(None),
    }
}

/// A receipts row in its plain layout ([`RECEIPTS_WITHOUT_BLOOMS`] and the list), its zstd
/// frame undone where it has one; a row of the oldest layout as it is.
pub(crate) fn plain_receipts_row(row: &[u8]) -> Result<Cow<'_, [u8]>, alloy_rlp::Error> {
    match (row.first(), receipts_list(row)?) {
        (Some(&RECEIPTS_ZSTD), Some(list)) => {
            let mut out = Vec::with_capacity(list.len() + 1);
            out.push(RECEIPTS_WITHOUT_BLOOMS);
            out.extend_from_slice(&list);
            Ok(Cow::Owned(out))
        }
        _ => Ok(Cow::Borrowed(row)),
    }
}

/// The payload of each receipt in the RLP list of receipts without blooms.
fn receipt_items(
    mut list: &[u8],
) -> Result<impl Iterator<Item = Result<&[u8], alloy_rlp::Error>>, alloy_rlp::Error> {
    let header = alloy_rlp::Header::decode(&mut list)?;
    if !header.list || list.len() != header.payload_length {
        return Err(alloy_rlp::Error::Custom("receipts row is not one RLP list"));
    }
    Ok(std::iter::from_fn(move || {
        if list.is_empty() {
            return None;
        }
        let item = alloy_rlp::Header::decode(&mut list).and_then(|h| {
            if !h.list || list.len() < h.payload_length {
                return Err(alloy_rlp::Error::Custom("receipt is not an RLP list"));
            }
            let (item, rest) = list.split_at(h.payload_length);
            list = rest;
            Ok(item)
        });
        if item.is_err() {
            list = &[];
        }
        Some(item)
    }))
}

/// Skips the RLP list at the start of `bytes` and returns how many items it holds.
fn count_items(bytes: &mut &[u8]) -> Result<u64, alloy_rlp::Error> {
    let mut items = list_payload(bytes, "logs are not an RLP list")?;
    let mut n = 0;
    while !items.is_empty() {
        let h = alloy_rlp::Header::decode(&mut items)?;
        if items.len() < h.payload_length {
            return Err(alloy_rlp::Error::Custom("log is cut short"));
        }
        items = &items[h.payload_length..];
        n += 1;
    }
    Ok(n)
}

/// The keccak of each log address and topic seen so far in one receipts row, for the blooms:
/// a block's logs repeat a few addresses and event signatures (and often holders), and a bloom
/// costs one keccak per address and topic, a quarter of an `eth_getBlockReceipts`.
#[derive(Default)]
struct BloomHashes {
    addresses: alloy_primitives::map::AddressMap<B256>,
    topics: alloy_primitives::map::B256Map<B256>,
}

impl BloomHashes {
    /// The bloom of `logs`: alloy's `logs_bloom`, with the hashes kept.
    fn bloom(&mut self, logs: &[Log]) -> alloy_primitives::Bloom {
        let mut bloom = alloy_primitives::Bloom::ZERO;
        for log in logs {
            let a = *self.addresses.entry(log.address).or_insert_with(|| keccak256(log.address));
            bloom.accrue(alloy_primitives::BloomInput::Hash(a));
            for topic in log.topics() {
                let t = *self.topics.entry(*topic).or_insert_with(|| keccak256(topic));
                bloom.accrue(alloy_primitives::BloomInput::Hash(t));
            }
        }
        bloom
    }
}

/// Decodes one receipt's payload: `[type, status or post-state root, cumulative gas, logs]`.
fn decode_receipt_item(
    mut item: &[u8],
    hashes: &mut BloomHashes,
) -> Result<ReceiptEnvelope, alloy_rlp::Error> {
    let ty = TxType::try_from(u8::decode(&mut item)?)
        .map_err(|_| alloy_rlp::Error::Custom("unknown receipt type"))?;
    let receipt = Receipt {
        status: Eip658Value::decode(&mut item)?,
        cumulative_gas_used: u64::decode(&mut item)?,
        logs: Vec::<Log>::decode(&mut item)?,
    };
    if !item.is_empty() {
        return Err(alloy_rlp::Error::Custom("trailing bytes in a receipt"));
    }
    let bloom = hashes.bloom(&receipt.logs);
    debug_assert_eq!(bloom, receipt.bloom_slow());
    Ok(ReceiptEnvelope::from_typed(ty, ReceiptWithBloom::new(receipt, bloom)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_round_trip() {
        let a = StoredAccount {
            nonce: 7,
            balance: U256::from(1234567u64),
            code_hash: B256::repeat_byte(3),
        };
        assert_eq!(StoredAccount::decode(&a.encode()), a);
        let h = HashedAccount {
            address: Address::repeat_byte(9),
            account: a,
            storage_root: B256::repeat_byte(4),
        };
        assert_eq!(HashedAccount::decode_history(h.encode(9).as_slice()).unwrap(), Some(h));
        assert_eq!(row_stamp(h.encode(9).as_slice(), "t").unwrap(), 9);
        assert_eq!(HashedAccount::decode_history(&[]).unwrap(), None);
        assert!(HashedAccount::decode_history(&[1, 2]).is_err());
        // Plain accounts leave out the code hash and the storage root; zero and the largest
        // values round-trip; a zero code hash (never written by the EVM) is kept as it is.
        for (nonce, balance, code_hash, storage_root) in [
            (0, U256::ZERO, KECCAK256_EMPTY, alloy_trie::EMPTY_ROOT_HASH),
            (u64::MAX, U256::MAX, B256::ZERO, B256::repeat_byte(1)),
            (1, U256::from(1u64) << 255, KECCAK256_EMPTY, B256::repeat_byte(2)),
        ] {
            let h = HashedAccount {
                address: Address::repeat_byte(5),
                account: StoredAccount { nonce, balance, code_hash },
                storage_root,
            };
            let row = h.encode(nonce);
            assert_eq!(HashedAccount::decode(row.as_slice(), "t").unwrap(), h);
            assert_eq!(row_stamp(row.as_slice(), "t").unwrap(), nonce);
            // Every truncation and an extra byte are refused.
            for cut in 0..row.as_slice().len() {
                assert!(HashedAccount::decode(&row.as_slice()[..cut], "t").is_err());
            }
            let mut long = row.as_slice().to_vec();
            long.push(0);
            assert!(HashedAccount::decode(&long, "t").is_err());
        }
        let plain = HashedAccount {
            address: Address::repeat_byte(5),
            account: StoredAccount {
                nonce: 3,
                balance: U256::from(10u64).pow(U256::from(18u64)),
                code_hash: KECCAK256_EMPTY,
            },
            storage_root: alloy_trie::EMPTY_ROOT_HASH,
        };
        assert_eq!(plain.encode(300).as_slice().len(), 3 + 1 + 20 + 2 + 9);
    }

    #[test]
    fn slot_rows_round_trip() {
        for (stamp, value) in
            [(0, U256::from(1u64)), (300, U256::MAX), (u64::MAX, U256::from(7u64) << 100)]
        {
            let row = SlotRow::new(stamp, &value);
            assert_eq!(decode_slot(row.as_slice(), "t").unwrap(), (stamp, value));
            assert_eq!(row_stamp(row.as_slice(), "t").unwrap(), stamp);
        }
        assert_eq!(SlotRow::new(0, &U256::from(1u64)).as_slice(), [0, 1]);
        assert_eq!(decode_slot(&[], "t").unwrap(), (0, U256::ZERO));
        assert!(decode_slot(&[9, 1], "t").is_err());
        let mut long = vec![0u8];
        long.extend([1u8; 33]);
        assert!(decode_slot(&long, "t").is_err());
    }

    /// Receipts of every type, with and without logs, pre- and post-Byzantium.
    fn sample_receipts() -> Vec<ReceiptEnvelope> {
        let log = |n: u8, topics: usize| {
            Log::new_unchecked(
                Address::repeat_byte(n),
                (0..topics).map(|t| B256::repeat_byte(n + t as u8)).collect(),
                vec![n; n as usize * 7].into(),
            )
        };
        let receipt = |status, gas, logs: Vec<Log>| {
            let r = Receipt { status, cumulative_gas_used: gas, logs };
            ReceiptWithBloom::new(r.clone(), r.bloom_slow())
        };
        vec![
            ReceiptEnvelope::Legacy(receipt(
                Eip658Value::PostState(B256::repeat_byte(9)),
                21_000,
                vec![],
            )),
            ReceiptEnvelope::Legacy(receipt(Eip658Value::Eip658(true), 50_000, vec![log(1, 0)])),
            ReceiptEnvelope::Eip2930(receipt(Eip658Value::Eip658(false), 80_000, vec![log(2, 4)])),
            ReceiptEnvelope::Eip1559(receipt(
                Eip658Value::Eip658(true),
                1 << 40,
                vec![log(3, 1), log(4, 3)],
            )),
            ReceiptEnvelope::Eip4844(receipt(
                Eip658Value::Eip658(true),
                2_000_000,
                vec![log(5, 2)],
            )),
            ReceiptEnvelope::Eip7702(receipt(Eip658Value::Eip658(true), 2_100_000, vec![])),
        ]
    }

    #[test]
    fn receipts_round_trip_without_their_blooms_and_old_rows_still_read() {
        let receipts = sample_receipts();
        let mut row = Vec::new();
        encode_receipts(&receipts, &mut row);
        assert_eq!(decode_receipts(&row).unwrap(), receipts);
        let mut whole = Vec::new();
        receipts.encode(&mut whole);
        assert!(row.len() + 256 * receipts.len() <= whole.len() + 1, "blooms are not stored");
        // A row of the earlier layout: the RLP list of whole envelopes.
        assert_eq!(decode_receipts(&whole).unwrap(), receipts);
        // Cumulative gas alone, from each layout.
        let gas: Vec<u64> = receipts.iter().map(|r| r.cumulative_gas_used()).collect();
        assert_eq!(decode_cumulative_gas(&row).unwrap(), gas);
        assert_eq!(decode_cumulative_gas(&whole).unwrap(), gas);
        let mut packed = Vec::new();
        encode_receipts(&transfer_receipts(200), &mut packed);
        assert_eq!(packed[0], RECEIPTS_ZSTD);
        let gas: Vec<u64> =
            transfer_receipts(200).iter().map(|r| r.cumulative_gas_used()).collect();
        assert_eq!(decode_cumulative_gas(&packed).unwrap(), gas);
        assert!(decode_cumulative_gas(&packed[..packed.len() - 1]).is_err());
        // An empty block and a truncated row.
        let mut empty = Vec::new();
        encode_receipts(&[], &mut empty);
        assert_eq!(decode_receipts(&empty).unwrap(), vec![]);
        assert!(decode_receipts(&row[..row.len() - 1]).is_err());
    }

    /// A block of token transfers: each receipt one `Transfer` log from one of a few tokens,
    /// between pseudo-random holders, as a generated or a real chain has them.
    fn transfer_receipts(n: u64) -> Vec<ReceiptEnvelope> {
        let transfer = B256::repeat_byte(0xdd);
        let holder =
            |i: u64| B256::left_padding_from(&alloy_primitives::keccak256(i.to_be_bytes())[..20]);
        (0..n)
            .map(|i| {
                let log = Log::new_unchecked(
                    Address::repeat_byte(1 + (i % 3) as u8),
                    vec![transfer, holder(i), holder(i + 1000)],
                    U256::from(i * 1_000_003).to_be_bytes::<32>().to_vec().into(),
                );
                let r = Receipt {
                    status: Eip658Value::Eip658(i % 17 != 0),
                    cumulative_gas_used: 52_000 * (i + 1),
                    logs: vec![log],
                };
                ReceiptEnvelope::Eip1559(ReceiptWithBloom::new(r.clone(), r.bloom_slow()))
            })
            .collect()
    }

    #[test]
    fn a_block_of_receipts_is_stored_compressed_and_reads_back_whole() {
        let receipts = transfer_receipts(200);
        let mut row = Vec::new();
        encode_receipts(&receipts, &mut row);
        let mut plain = Vec::new();
        encode_receipts_list(&receipts, &mut plain);
        assert_eq!(row[0], RECEIPTS_ZSTD);
        assert_eq!(u32::from_be_bytes(row[1..5].try_into().unwrap()) as usize, plain.len() - 1);
        // The holders' addresses are random; the rest repeats.
        assert!(row.len() * 10 < plain.len() * 6, "{} bytes from {}", row.len(), plain.len());
        assert_eq!(decode_receipts(&row).unwrap(), receipts);
        // A plain row (as written before, or for a short list) still reads.
        assert_eq!(decode_receipts(&plain).unwrap(), receipts);
        let mut short = Vec::new();
        encode_receipts(&transfer_receipts(0), &mut short);
        assert_eq!(short, vec![RECEIPTS_WITHOUT_BLOOMS, 0xc0]);

        // Corrupt rows are errors, never a panic or a wrong answer.
        let mut bad = row.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        assert!(decode_receipts(&bad).is_err_and(|e| e.to_string().len() > 3));
        let mut longer = row.clone();
        longer[1..5].copy_from_slice(&(plain.len() as u32).to_be_bytes());
        assert!(decode_receipts(&longer).is_err());
        let mut huge = row.clone();
        huge[1..5].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_receipts(&huge).is_err());
        assert!(decode_receipts(&row[..4]).is_err());
        assert!(decode_receipts(&row[..row.len() - 3]).is_err());
    }

    /// What [`decode_receipt_at`] must give for receipt `i`, computed from the whole list.
    fn expected_at(receipts: &[ReceiptEnvelope], i: usize) -> Option<ReceiptInBlock> {
        receipts.get(i).map(|r| ReceiptInBlock {
            receipt: r.clone(),
            gas_before: i.checked_sub(1).map_or(0, |p| receipts[p].cumulative_gas_used()),
            logs_before: receipts[..i].iter().map(|r| r.logs().len() as u64).sum(),
        })
    }

    /// Blocks of receipts for the partial reads: the samples, a compressed block, an empty one,
    /// and a mixed block (several logs per receipt, so log counts add up across receipts).
    fn partial_read_blocks() -> [Vec<ReceiptEnvelope>; 4] {
        [
            sample_receipts(),
            transfer_receipts(200),
            vec![],
            [sample_receipts(), transfer_receipts(9)].concat(),
        ]
    }

    /// A block's receipts in the three row layouts: as written now (compressed when long), a
    /// plain list without blooms, and whole envelopes (the oldest).
    fn row_layouts(receipts: &[ReceiptEnvelope]) -> [Vec<u8>; 3] {
        let mut row = Vec::new();
        encode_receipts(receipts, &mut row);
        let mut plain = Vec::new();
        encode_receipts_list(receipts, &mut plain);
        let mut whole = Vec::new();
        alloy_rlp::encode_list(receipts, &mut whole);
        [row, plain, whole]
    }

    #[test]
    fn one_receipt_read_alone_equals_its_entry_in_the_whole_block() {
        for receipts in &partial_read_blocks() {
            let [row, plain, whole] = row_layouts(receipts);
            for layout in [&row, &plain, &whole] {
                for i in 0..=receipts.len() + 1 {
                    assert_eq!(
                        decode_receipt_at(layout, i).unwrap(),
                        expected_at(receipts, i),
                        "receipt {i} of {}",
                        receipts.len()
                    );
                }
            }
            // A damaged row is an error for every receipt whose read reaches the damage.
            if row.len() > 8 {
                let last = receipts.len() - 1;
                assert!(decode_receipt_at(&row[..row.len() - 2], last).is_err());
                assert!(decode_receipt_at(&plain[..plain.len() - 2], last).is_err());
            }
        }
    }

    #[test]
    fn matching_logs_equal_a_filter_over_the_whole_receipts() {
        let keeps: [&LogKeep<'_>; 5] = [
            &|_, _| true,
            &|_, _| false,
            &|a, _| *a == Address::repeat_byte(2),
            &|_, t| t.get(1) == Some(&B256::repeat_byte(5)),
            &|a, t| *a == Address::repeat_byte(1) && t.len() == 3,
        ];
        for receipts in &partial_read_blocks() {
            let [row, plain, whole] = row_layouts(receipts);
            for (k, keep) in keeps.iter().enumerate() {
                let mut want = Vec::new();
                let mut log_index = 0;
                for (tx_index, r) in (0u32..).zip(receipts) {
                    for log in r.logs() {
                        if keep(&log.address, log.topics()) {
                            want.push(LogInBlock { tx_index, log_index, log: log.clone() });
                        }
                        log_index += 1;
                    }
                }
                for layout in [&row, &plain, &whole] {
                    assert_eq!(decode_matching_logs(layout, keep).unwrap(), want, "filter {k}");
                }
                // On the mixed block every narrowing filter keeps some logs, not all.
                if receipts.len() == 15 && k >= 2 {
                    assert!(!want.is_empty() && (want.len() as u64) < log_index, "filter {k}");
                }
            }
            if row.len() > 8 {
                assert!(decode_matching_logs(&row[..row.len() - 2], &|_, _| true).is_err());
                assert!(decode_matching_logs(&plain[..plain.len() - 2], &|_, _| false).is_err());
            }
        }
    }

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
