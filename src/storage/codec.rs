//! Byte layouts of keys and values; see [`super::tables`].

use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256};

use super::StorageError;

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

    /// Decodes a history value: empty = did not exist.
    pub(crate) fn decode_history(b: &[u8]) -> Result<Option<Self>, StorageError> {
        match b.len() {
            0 => Ok(None),
            72 => {
                let mut a = [0u8; 72];
                a.copy_from_slice(b);
                Ok(Some(Self::decode(&a)))
            }
            n => Err(StorageError::Corrupt {
                table: "account_history",
                detail: format!("value of {n} bytes"),
            }),
        }
    }

    /// Whether the account has code.
    pub fn has_code(&self) -> bool {
        self.code_hash != KECCAK256_EMPTY && self.code_hash != B256::ZERO
    }
}

/// An account as the state trie sees it: [`StoredAccount`] plus the root of its storage trie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashedAccount {
    /// The account fields.
    pub account: StoredAccount,
    /// Root of the account's storage trie (the empty root for no storage).
    pub storage_root: B256,
}

impl HashedAccount {
    /// Encodes into the fixed 104-byte layout.
    pub fn encode(&self) -> [u8; 104] {
        let mut out = [0u8; 104];
        out[..72].copy_from_slice(&self.account.encode());
        out[72..].copy_from_slice(self.storage_root.as_slice());
        out
    }

    /// Decodes the 104-byte layout.
    pub fn decode(b: &[u8; 104]) -> Self {
        let mut a = [0u8; 72];
        a.copy_from_slice(&b[..72]);
        Self { account: StoredAccount::decode(&a), storage_root: B256::from_slice(&b[72..]) }
    }

    /// Decodes a history value: empty = did not exist.
    pub fn decode_history(b: &[u8]) -> Result<Option<Self>, StorageError> {
        match <&[u8; 104]>::try_from(b) {
            Ok(a) => Ok(Some(Self::decode(a))),
            Err(_) if b.is_empty() => Ok(None),
            Err(_) => Err(StorageError::Corrupt {
                table: "hashed_account_history",
                detail: format!("value of {} bytes", b.len()),
            }),
        }
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

/// `keccak(address) ++ keccak(slot)`: key of [`super::tables::HASHED_STORAGE`].
pub fn hashed_storage_key(hashed_address: &B256, hashed_slot: &B256) -> [u8; 64] {
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(hashed_address.as_slice());
    k[32..].copy_from_slice(hashed_slot.as_slice());
    k
}

/// `keccak(address) ++ block`: key of [`super::tables::HASHED_ACCOUNT_HISTORY`].
pub fn hashed_account_history_key(hashed_address: &B256, block: u64) -> [u8; 40] {
    let mut k = [0u8; 40];
    k[..32].copy_from_slice(hashed_address.as_slice());
    k[32..].copy_from_slice(&block.to_be_bytes());
    k
}

/// `keccak(address) ++ keccak(slot) ++ block`: key of
/// [`super::tables::HASHED_STORAGE_HISTORY`].
pub fn hashed_storage_history_key(
    hashed_address: &B256,
    hashed_slot: &B256,
    block: u64,
) -> [u8; 72] {
    let mut k = [0u8; 72];
    k[..64].copy_from_slice(&hashed_storage_key(hashed_address, hashed_slot));
    k[64..].copy_from_slice(&block.to_be_bytes());
    k
}

pub(crate) fn storage_key(address: &Address, slot: &U256) -> [u8; 52] {
    let mut k = [0u8; 52];
    k[..20].copy_from_slice(address.as_slice());
    k[20..].copy_from_slice(&slot.to_be_bytes::<32>());
    k
}

/// `address ++ block BE`: the key of [`super::tables::ACCOUNT_HISTORY`] and of
/// [`super::tables::TRACE_ADDRESSES`].
pub(crate) fn account_history_key(address: &Address, block: u64) -> [u8; 28] {
    let mut k = [0u8; 28];
    k[..20].copy_from_slice(address.as_slice());
    k[20..].copy_from_slice(&block.to_be_bytes());
    k
}

pub(crate) fn storage_history_key(address: &Address, slot: &U256, block: u64) -> [u8; 60] {
    let mut k = [0u8; 60];
    k[..52].copy_from_slice(&storage_key(address, slot));
    k[52..].copy_from_slice(&block.to_be_bytes());
    k
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
        assert_eq!(StoredAccount::decode_history(&a.encode()).unwrap(), Some(a));
        assert_eq!(StoredAccount::decode_history(&[]).unwrap(), None);
        assert!(StoredAccount::decode_history(&[1, 2]).is_err());
    }

    #[test]
    fn history_keys_sort_by_block_within_entity() {
        let a = Address::repeat_byte(1);
        assert!(account_history_key(&a, 2) < account_history_key(&a, 256));
        let s = U256::from(5);
        assert!(storage_history_key(&a, &s, 9) < storage_history_key(&a, &s, 10));
        assert!(storage_history_key(&a, &s, u64::MAX) < storage_history_key(&a, &U256::from(6), 0));
        assert_eq!(split_tx_key(&tx_key(300, 7)), (300, 7));
    }
}
