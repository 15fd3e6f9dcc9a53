//! The walk's node and leaf sources over storage's redb tables, current or as of an old block.

use alloy_primitives::B256;
use alloy_trie::{BranchNodeCompact, Nibbles};
use redb::ReadableTable;

use super::TrieError;
use super::codec::{concat, decode_node, pack_path, unpack_path};
use super::walk::{LeafFn, LeafSource, NodeSource};
use crate::storage::HashedAccount;

/// Key type of a table, for `ReadableTable` bounds.
pub(crate) type K<const N: usize> = &'static [u8; N];

fn corrupt_node(table: &'static str, key: &[u8], detail: String) -> TrieError {
    TrieError::CorruptNode { table, key: alloy_primitives::hex::encode(key), detail }
}

/// Decodes one stored row of a trie table whose keys are `owner (0 or 32 bytes) ++ path`.
pub(crate) fn decode_row(
    table: &'static str,
    key: &[u8],
    value: &[u8],
) -> Result<(Nibbles, BranchNodeCompact), TrieError> {
    let mut p = [0u8; 33];
    p.copy_from_slice(&key[key.len() - 33..]);
    let path = unpack_path(&p).map_err(|d| corrupt_node(table, key, d))?;
    let node = decode_node(value).map_err(|d| corrupt_node(table, key, d))?;
    Ok((path, node))
}

/// The account trie's stored nodes.
pub(crate) struct AccountNodes<'t, T>(pub(crate) &'t T);

impl<T: ReadableTable<K<33>, &'static [u8]>> NodeSource for AccountNodes<'_, T> {
    fn seek(
        &mut self,
        from: &Nibbles,
        _: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        let key = pack_path(from);
        let Some(item) = self.0.range::<&[u8; 33]>(&key..)?.next() else { return Ok(None) };
        let (k, v) = item?;
        decode_row("account_trie", k.value(), v.value()).map(Some)
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key = pack_path(path);
        match self.0.get(&key)? {
            Some(v) => Ok(Some(decode_row("account_trie", &key, v.value())?.1)),
            None => Ok(None),
        }
    }
}

/// One account's storage trie nodes.
pub(crate) struct StorageNodes<'t, T> {
    pub(crate) table: &'t T,
    pub(crate) account: B256,
}

impl<T: ReadableTable<K<65>, &'static [u8]>> NodeSource for StorageNodes<'_, T> {
    fn seek(
        &mut self,
        from: &Nibbles,
        _: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        let key: [u8; 65] = concat(&self.account, &pack_path(from));
        let end: [u8; 65] = concat(&self.account, &[0xff; 33]);
        let Some(item) = self.table.range::<&[u8; 65]>(&key..=&end)?.next() else {
            return Ok(None);
        };
        let (k, v) = item?;
        decode_row("storage_trie", k.value(), v.value()).map(Some)
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key: [u8; 65] = concat(&self.account, &pack_path(path));
        match self.table.get(&key)? {
            Some(v) => Ok(Some(decode_row("storage_trie", &key, v.value())?.1)),
            None => Ok(None),
        }
    }
}

/// Decodes a hashed-account row read as bytes (from the current table or the history-aware
/// sources), naming the account when it does not decode.
pub(crate) fn decode_account(row: &[u8], hashed: &B256) -> Result<HashedAccount, TrieError> {
    HashedAccount::decode(row, "hashed_accounts").map_err(|e| TrieError::CorruptNode {
        table: "hashed_accounts",
        key: hashed.to_string(),
        detail: e.to_string(),
    })
}

/// RLP of the account leaf of row `row` under `hashed`.
pub(crate) fn account_leaf(row: &[u8], hashed: &B256, buf: &mut Vec<u8>) -> Result<(), TrieError> {
    let account = decode_account(row, hashed)?;
    buf.clear();
    alloy_rlp::Encodable::encode(&account.trie_account(), buf);
    Ok(())
}

/// RLP of the storage leaf of slot row `row` (`storage::SlotRow`).
pub(crate) fn storage_leaf(row: &[u8], buf: &mut Vec<u8>) -> Result<(), TrieError> {
    let (_, value) = crate::storage::decode_slot(row, "hashed_storage")?;
    buf.clear();
    alloy_rlp::Encodable::encode(&value, buf);
    Ok(())
}

/// The current hashed accounts.
pub(crate) struct AccountLeaves<'t, T>(pub(crate) &'t T);

impl<T: ReadableTable<K<32>, &'static [u8]>> LeafSource for AccountLeaves<'_, T> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let range = match to {
            Some(to) => self.0.range::<&[u8; 32]>(&from.0..&to.0)?,
            None => self.0.range::<&[u8; 32]>(&from.0..)?,
        };
        let mut buf = Vec::with_capacity(128);
        for item in range {
            let (k, v) = item?;
            let hashed = B256::from(*k.value());
            account_leaf(v.value(), &hashed, &mut buf)?;
            f(&hashed, &buf)?;
        }
        Ok(())
    }
}

/// One account's current hashed storage.
pub(crate) struct StorageLeaves<'t, T> {
    pub(crate) table: &'t T,
    pub(crate) account: B256,
}

impl<T: ReadableTable<K<64>, &'static [u8]>> LeafSource for StorageLeaves<'_, T> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let lo: [u8; 64] = concat(&self.account, from.as_slice());
        let range = match to {
            Some(to) => {
                let hi: [u8; 64] = concat(&self.account, to.as_slice());
                self.table.range::<&[u8; 64]>(&lo..&hi)?
            }
            None => {
                let hi: [u8; 64] = concat(&self.account, &[0xff; 32]);
                self.table.range::<&[u8; 64]>(&lo..=&hi)?
            }
        };
        let mut buf = Vec::with_capacity(40);
        for item in range {
            let (k, v) = item?;
            storage_leaf(v.value(), &mut buf)?;
            f(&B256::from_slice(&k.value()[32..]), &buf)?;
        }
        Ok(())
    }
}
