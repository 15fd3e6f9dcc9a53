//! The walk's node and leaf sources over storage's redb tables, current or as of an old block.

use alloy_primitives::B256;
use alloy_trie::{BranchNodeCompact, Nibbles};
use redb::ReadableTable;

use super::TrieError;
use super::codec::{concat, decode_node, pack_path, unpack_path};
use super::walk::{LeafFn, LeafSource, NodeSource};
use crate::storage::NodeWrites;
use crate::storage::codec::account::HashedAccount;

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

/// The first node with a key in `from..=to`: of the stored ones in `table` and the changes the
/// transaction holds in `held`, the held one where both have the key.
fn seek_held<const N: usize, T: ReadableTable<K<N>, &'static [u8]>>(
    name: &'static str,
    table: &T,
    held: &NodeWrites<N>,
    from: &[u8; N],
    to: &[u8; N],
) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
    let first_held = held.range(from, to).find_map(|(k, node)| node.map(|node| (*k, node)));
    for item in table.range::<&[u8; N]>(from..=to)? {
        let (k, v) = item?;
        let k = k.value();
        if first_held.is_some_and(|(held_key, _)| held_key <= *k) {
            break;
        }
        // A stored node the transaction removed; one it changed sorts at or after the first
        // held node, where the loop has stopped.
        if held.get(k).is_some() {
            continue;
        }
        return decode_row(name, k, v.value()).map(Some);
    }
    first_held.map(|(k, node)| decode_row(name, &k, node)).transpose()
}

/// The node at `key`: as the transaction changed it, or else as stored in `table`.
fn get_held<const N: usize, T: ReadableTable<K<N>, &'static [u8]>>(
    name: &'static str,
    table: &T,
    held: &NodeWrites<N>,
    key: &[u8; N],
) -> Result<Option<BranchNodeCompact>, TrieError> {
    match held.get(key) {
        Some(Some(node)) => Ok(Some(decode_row(name, key, node)?.1)),
        Some(None) => Ok(None),
        None => match table.get(key)? {
            Some(v) => Ok(Some(decode_row(name, key, v.value())?.1)),
            None => Ok(None),
        },
    }
}

/// The account trie's current nodes in a write transaction.
pub(crate) struct AccountNodes<'t, T> {
    /// The stored nodes.
    pub(crate) table: &'t T,
    /// The changes the transaction holds ([`crate::storage::Writer::trie_nodes`]).
    pub(crate) held: &'t NodeWrites<33>,
}

impl<T: ReadableTable<K<33>, &'static [u8]>> NodeSource for AccountNodes<'_, T> {
    fn seek(
        &mut self,
        from: &Nibbles,
        _: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        seek_held("account_trie", self.table, self.held, &pack_path(from), &[0xff; 33])
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        get_held("account_trie", self.table, self.held, &pack_path(path))
    }
}

/// One account's current storage-trie nodes in a write transaction.
pub(crate) struct StorageNodes<'t, T> {
    /// The stored nodes of every account.
    pub(crate) table: &'t T,
    /// The changes the transaction holds ([`crate::storage::Writer::trie_nodes`]).
    pub(crate) held: &'t NodeWrites<65>,
    /// Whose storage trie.
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
        seek_held("storage_trie", self.table, self.held, &key, &end)
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key: [u8; 65] = concat(&self.account, &pack_path(path));
        get_held("storage_trie", self.table, self.held, &key)
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

/// RLP of the storage leaf of slot row `row` (`storage::codec::account::SlotRow`).
pub(crate) fn storage_leaf(row: &[u8], buf: &mut Vec<u8>) -> Result<(), TrieError> {
    let (_, value) = crate::storage::codec::account::decode_slot(row, "hashed_storage")?;
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use alloy_trie::TrieMask;
    use proptest::prelude::*;
    use redb::TableDefinition;

    use super::*;
    use crate::trie::codec::{encode_node, pack_path};

    const NODES: TableDefinition<'static, &'static [u8; 33], &'static [u8]> =
        TableDefinition::new("nodes");

    /// A valid node whose first hash tells versions apart.
    fn node(version: u8) -> Vec<u8> {
        encode_node(&BranchNodeCompact::new(
            TrieMask::new(0b11),
            TrieMask::new(0),
            TrieMask::new(0b1),
            vec![B256::repeat_byte(version)],
            None,
        ))
    }

    /// Paths in a small space, so that stored, changed and removed ones meet.
    fn path(i: u8) -> Nibbles {
        Nibbles::from_nibbles(&[i >> 4, i & 0xf, 3][..(1 + (i % 3) as usize)])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The walk's view through held changes equals the stored nodes with the changes
        /// applied, for every seek and point read: removed nodes vanish, changed ones read as
        /// changed, new ones appear in order.
        #[test]
        fn reads_through_held_changes_equal_the_changes_applied(
            stored in prop::collection::btree_set(any::<u8>(), 0..40),
            changes in prop::collection::vec((any::<u8>(), prop::option::of(1u8..200)), 0..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let db = redb::Database::create(dir.path().join("db")).unwrap();
            let txn = db.begin_write().unwrap();
            let mut table = txn.open_table(NODES).unwrap();
            let mut model = BTreeMap::new();
            for i in &stored {
                let key = pack_path(&path(*i));
                table.insert(&key, node(0).as_slice()).unwrap();
                model.insert(key, node(0));
            }
            let mut held = NodeWrites::<33>::default();
            for (block, (i, version)) in changes.iter().enumerate() {
                let key = pack_path(&path(*i));
                let new = version.map(node);
                let t = &table;
                held.put(&key, block as u64 / 4, new.clone(), || {
                    Ok(t.get(&key)?.map(|v| v.value().to_vec()))
                })
                .unwrap();
                match new {
                    Some(n) => model.insert(key, n),
                    None => model.remove(&key),
                };
            }
            let mut source = AccountNodes { table: &table, held: &held };
            for i in 0..=255u8 {
                let p = path(i);
                let key = pack_path(&p);
                let want = model.range(key..).next().map(|(k, v)| decode_row("t", k, v).unwrap());
                prop_assert_eq!(source.seek(&p, &p).unwrap(), want);
                let want = model.get(&key).map(|v| decode_row("t", &key, v).unwrap().1);
                prop_assert_eq!(source.get(&p).unwrap(), want);
            }
        }
    }
}
