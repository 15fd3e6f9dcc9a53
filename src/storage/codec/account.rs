//! Account and slot rows: the plain account ([`StoredAccount`]), the hashed state's rows
//! ([`HashedAccount`], [`SlotRow`]) with their stamps, and the hashed-storage key.

use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256};

use crate::storage::StorageError;

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
/// The stamp serves the history lookup (`storage::history::lookup`): a key whose row was written at or
/// before block N has not changed since N, and the epoch index leaves out the epoch of each
/// key's stamp (the current row names it).
pub fn row_stamp(b: &[u8], table: &'static str) -> Result<u64, StorageError> {
    trimmed::<8>(b).map(|(s, _)| u64::from_be_bytes(s)).ok_or_else(|| StorageError::Corrupt {
        table,
        detail: format!("row of {} bytes has no stamp", b.len()),
    })
}

/// Longest [`hashed_storage`](crate::storage::tables::HASHED_STORAGE) row: the stamp with its length and
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

/// `keccak(address) ++ keccak(slot)`: key of [`crate::storage::tables::HASHED_STORAGE`].
pub fn hashed_storage_key(hashed_address: &B256, hashed_slot: &B256) -> [u8; 64] {
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(hashed_address.as_slice());
    k[32..].copy_from_slice(hashed_slot.as_slice());
    k
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
}
