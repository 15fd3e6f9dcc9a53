//! Unwinding: [`Writer::unwind_head`] takes the head block back out of every table by walking
//! its change lists (`storage::history::changes`), and the depth of blocks that keep them.

use alloy_primitives::{Address, keccak256};
use redb::{ReadableTable, Table};

use super::Writer;
use crate::storage::codec::u64_value;
use crate::storage::history::changes::{
    ChangeKind, meta_u64, prune_changes, take_changes, unwind_depth,
};
use crate::storage::history::keys::Epochs;
use crate::storage::history::nodes::resolve_node_row;
use crate::storage::tables::{self, meta};
use crate::storage::{StorageError, StorageResult};

impl Writer {
    /// Keeps the change lists of the newest `depth` blocks from now on (at least 1), so that
    /// they can be unwound. Lists already removed do not come back: raising the depth takes
    /// effect as the head moves on. Lowering it applies at once: the lists that fell out of the
    /// window are removed and the epochs behind it frozen (`storage::segments`).
    pub fn set_unwind_depth(&self, depth: u64) -> StorageResult<()> {
        if depth == 0 {
            return Err(StorageError::Config("an unwind depth of 0 blocks".into()));
        }
        let head = {
            let mut m = self.txn.open_table(tables::META)?;
            m.insert(meta::UNWIND_DEPTH, depth.to_be_bytes().as_slice())?;
            meta_u64(&m, meta::HEAD)?
        };
        if let Some(head) = head {
            self.flush_deferred()?;
            prune_changes(&self.txn, head)?;
            self.freeze_due()?;
        }
        Ok(())
    }

    /// How many of the newest blocks keep their change lists.
    pub fn unwind_depth(&self) -> StorageResult<u64> {
        unwind_depth(&self.txn.open_table(tables::META)?)
    }
}

/// A current-table key and its history key for `block`.
fn row_keys<const K: usize, const H: usize>(
    epochs: Epochs,
    key: &[u8],
    block: u64,
) -> ([u8; K], [u8; H]) {
    let mut k = [0u8; K];
    k.copy_from_slice(key);
    (k, epochs.history_key(&k, block))
}

/// Puts back, for each key in `keys`, the trie node its history row saved for `block` (a
/// delta is resolved against the current node, which is the node after the block), and removes
/// that row. An empty old value (the node did not exist) removes the current row.
fn restore_nodes<const K: usize, const H: usize>(
    current: &mut Table<'_, &'static [u8; K], &'static [u8]>,
    history: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    keys: &[u8],
    (epochs, block): (Epochs, u64),
    table: &'static str,
) -> StorageResult<()> {
    for key in keys.chunks_exact(K) {
        let (k, h) = row_keys::<K, H>(epochs, key, block);
        let row = history
            .remove(&h)?
            .map(|v| v.value().to_vec())
            .ok_or_else(|| missing_history(table, block, key))?;
        let after = current.get(&k)?.map(|v| v.value().to_vec()).unwrap_or_default();
        let old = resolve_node_row(&row, &after)
            .map_err(|detail| StorageError::Corrupt { table, detail })?;
        if old.is_empty() {
            current.remove(&k)?;
        } else {
            current.insert(&k, old.as_slice())?;
        }
    }
    Ok(())
}

/// A stamped current table, its history and its epoch index, open for writing.
type StampedTables<'a, 't, const K: usize, const H: usize, const I: usize> = (
    &'a mut Table<'t, &'static [u8; K], &'static [u8]>,
    &'a mut Table<'t, &'static [u8; H], &'static [u8]>,
    &'a mut crate::storage::history::index::StampIndex<'t, I>,
);

/// [`restore_nodes`] for the stamped tables (accounts and slots), whose history saves an empty
/// value for a key that did not exist; a saved row is checked to decode (`check`) before it
/// becomes current again, and the epoch index gives back the epoch its stamp names
/// (`storage::history::index::stamp_restored`).
fn restore_stamped<const K: usize, const H: usize, const I: usize>(
    tables: StampedTables<'_, '_, K, H, I>,
    keys: &[u8],
    (epochs, block): (Epochs, u64),
    table: &'static str,
    check: fn(&[u8], &'static str) -> StorageResult<()>,
) -> StorageResult<()> {
    let (current, history, index) = tables;
    for key in keys.chunks_exact(K) {
        let (k, h) = row_keys::<K, H>(epochs, key, block);
        let old = history
            .remove(&h)?
            .map(|v| v.value().to_vec())
            .ok_or_else(|| missing_history(table, block, key))?;
        if old.is_empty() {
            current.remove(&k)?;
        } else {
            check(&old, table)?;
            let stamp = crate::storage::codec::account::row_stamp(&old, table)?;
            crate::storage::history::index::stamp_restored(index, epochs, &k, stamp, block)?;
            current.insert(&k, old.as_slice())?;
        }
    }
    Ok(())
}

impl Writer {
    /// Takes the head block out of the database: its block data, the state changes it made
    /// (current state, history and trie nodes, from the change index) and the markers, which
    /// drop to the parent (safe and finalized no higher than it). Returns the new head.
    /// Nothing is visible to readers until [`Writer::commit`], so an unwind and the import of a
    /// new branch can share one commit. Genesis cannot be unwound.
    pub fn unwind_head(&mut self) -> StorageResult<u64> {
        self.flush_deferred()?;
        self.prune_held_changes()?;
        self.forget_last_block();
        let head = self.head()?.ok_or(StorageError::Unwind("the database has no blocks"))?;
        if head == 0 {
            return Err(StorageError::Unwind("genesis cannot be unwound"));
        }
        let txn = &self.txn;
        {
            let m = txn.open_table(tables::META)?;
            if let Some(root_at) = meta_u64(&m, meta::GROUP_ROOT_AT)?.filter(|g| head <= *g) {
                return Err(StorageError::UnwindGrouped { block: head, root_at });
            }
            if let Some(floor) = meta_u64(&m, meta::CHANGES_FROM)?.filter(|f| head < *f) {
                return Err(StorageError::UnwindTooDeep {
                    block: head,
                    floor,
                    depth: unwind_depth(&m)?,
                });
            }
        }
        let epochs = self.epochs()?;
        let mut lists = Vec::with_capacity(ChangeKind::ALL.len());
        {
            let mut changes = txn.open_table(tables::BLOCK_CHANGES)?;
            for kind in ChangeKind::ALL {
                lists.push(take_changes(&mut changes, head, kind)?);
            }
        }
        let [hashed_accounts, hashed_storage, account_trie, storage_trie, trace_addresses] =
            <[Vec<u8>; 5]>::try_from(lists).map_err(|_| StorageError::Unwind("change kinds"))?;
        {
            let mut index = txn.open_table(tables::TRACE_ADDRESSES)?;
            for a in trace_addresses.chunks_exact(20) {
                let key =
                    crate::storage::codec::tx::address_block_key(&Address::from_slice(a), head);
                index.remove(&key)?;
            }
        }
        restore_stamped(
            (
                &mut txn.open_table(tables::HASHED_ACCOUNTS)?,
                &mut txn.open_table(tables::HASHED_ACCOUNT_HISTORY)?,
                &mut txn.open_table(tables::HASHED_ACCOUNT_EPOCHS)?,
            ),
            &hashed_accounts,
            (epochs, head),
            "hashed_account_history",
            |row, table| {
                crate::storage::codec::account::HashedAccount::decode(row, table).map(drop)
            },
        )?;
        restore_stamped(
            (
                &mut txn.open_table(tables::HASHED_STORAGE)?,
                &mut txn.open_table(tables::HASHED_STORAGE_HISTORY)?,
                &mut txn.open_table(tables::HASHED_STORAGE_EPOCHS)?,
            ),
            &hashed_storage,
            (epochs, head),
            "hashed_storage_history",
            |row, table| crate::storage::codec::account::decode_slot(row, table).map(drop),
        )?;
        restore_nodes(
            &mut txn.open_table(tables::ACCOUNT_TRIE)?,
            &mut txn.open_table(tables::ACCOUNT_TRIE_HISTORY)?,
            &account_trie,
            (epochs, head),
            "account_trie_history",
        )?;
        restore_nodes(
            &mut txn.open_table(tables::STORAGE_TRIE)?,
            &mut txn.open_table(tables::STORAGE_TRIE_HISTORY)?,
            &storage_trie,
            (epochs, head),
            "storage_trie_history",
        )?;

        // Block data.
        {
            let hash = txn.open_table(tables::CANONICAL)?.remove(head)?.map(|v| *v.value());
            if let Some(hash) = hash {
                txn.open_table(tables::HASH_TO_NUMBER)?.remove(&hash)?;
            }
            txn.open_table(tables::HEADERS)?.remove(head)?;
            txn.open_table(tables::BODIES)?.remove(head)?;
            txn.open_table(tables::RECEIPTS)?.remove(head)?;
            txn.open_table(tables::ACCESS_LISTS)?.remove(head)?;
            let mut txs = txn.open_table(tables::TRANSACTIONS)?;
            let mut lookup = txn.open_table(tables::TX_LOOKUP)?;
            let from = crate::storage::codec::tx::tx_key(head, 0);
            let to = crate::storage::codec::tx::tx_key(head, u32::MAX);
            let mut keys = Vec::new();
            for item in txs.range::<&[u8; 12]>(&from..=&to)? {
                let (k, v) = item?;
                // sender (20) ++ EIP-2718 bytes, whose keccak is the transaction hash.
                let bytes = v.value();
                if bytes.len() > 20 {
                    lookup.remove(&keccak256(&bytes[20..]).0)?;
                }
                keys.push(*k.value());
            }
            for k in keys {
                txs.remove(&k)?;
            }
        }
        let parent = head - 1;
        let mut m = txn.open_table(tables::META)?;
        let read = |m: &Table<'_, &str, &[u8]>, key: &str| -> StorageResult<u64> {
            Ok(m.get(key)?.map(|v| u64_value("meta", v.value())).transpose()?.unwrap_or(0))
        };
        let safe = read(&m, meta::SAFE)?.min(parent);
        let finalized = read(&m, meta::FINALIZED)?.min(parent);
        m.insert(meta::HEAD, parent.to_be_bytes().as_slice())?;
        m.insert(meta::SAFE, safe.to_be_bytes().as_slice())?;
        m.insert(meta::FINALIZED, finalized.to_be_bytes().as_slice())?;
        drop(m);
        // An epoch the head moves back into is open again: its index goes.
        crate::storage::history::index::follow_head(
            txn,
            epochs,
            Some(head),
            parent,
            &Default::default(),
        )?;
        self.unwound = true;
        Ok(parent)
    }
}

fn missing_history(table: &'static str, block: u64, key: &[u8]) -> StorageError {
    StorageError::Corrupt {
        table,
        detail: format!(
            "change index of block {block} names key {} with no history row",
            alloy_primitives::hex::encode(key)
        ),
    }
}
