//! [`NodeWrites`]: the trie-node changes of one write transaction, held in memory and written at
//! its commit in key order, the current rows and their history rows.
//!
//! The nodes near the root change in every block, so a group of blocks in one transaction wrote
//! them once per block, and each write also sought the node's newest history row (its delta
//! run). Held here, each current row is written once per transaction, the history rows of one
//! node are encoded one after the other without a seek, and every table takes its rows in key
//! order. The trie's walk reads through [`NodeWrites::get`] and [`NodeWrites::range`], so within
//! the transaction it sees the nodes as changed.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use redb::{Table, WriteTransaction};

use super::StorageResult;
use super::history::held::{HistoryRow, epoch_is_empty, write_rows};
use super::history::keys::Epochs;
use super::history::nodes::{FULL_ROW_EVERY, encode_history_row};
use super::tables;

/// The changed nodes of one trie table whose keys are `K` bytes (history keys `H` bytes:
/// `epoch ++ key ++ block`).
#[derive(Debug, Default)]
pub struct NodeWrites<const K: usize> {
    /// Every node the transaction changed, as it now is (`None`: removed).
    current: BTreeMap<[u8; K], Option<Vec<u8>>>,
    /// The node before each block that changed it (empty: absent), by key and block.
    before: BTreeMap<([u8; K], u64), Vec<u8>>,
}

impl<const K: usize> NodeWrites<K> {
    /// The node at `key` if this transaction changed it (`Some(None)`: it removed it).
    pub fn get(&self, key: &[u8; K]) -> Option<Option<&[u8]>> {
        self.current.get(key).map(|node| node.as_deref())
    }

    /// The nodes this transaction changed with keys in `from..=to`, in key order.
    pub fn range<'a>(
        &'a self,
        from: &[u8; K],
        to: &[u8; K],
    ) -> impl Iterator<Item = (&'a [u8; K], Option<&'a [u8]>)> + 'a {
        self.current.range(*from..=*to).map(|(k, node)| (k, node.as_deref()))
    }

    /// Records that `block` sets the node at `key` to `node` (`None`: removes it). `stored`
    /// reads the node the table holds, called only if this transaction has not changed it yet.
    /// Returns whether this is the block's first change of the node (its history row is new).
    pub fn put(
        &mut self,
        key: &[u8; K],
        block: u64,
        node: Option<Vec<u8>>,
        stored: impl FnOnce() -> StorageResult<Option<Vec<u8>>>,
    ) -> StorageResult<bool> {
        // The node now is replaced in place (no copy): most changes are of nodes near the root,
        // which the transaction holds already.
        let old = match self.current.entry(*key) {
            Entry::Occupied(mut e) => std::mem::replace(e.get_mut(), node),
            Entry::Vacant(e) => {
                let old = stored()?;
                e.insert(node);
                old
            }
        };
        Ok(match self.before.entry((*key, block)) {
            Entry::Vacant(e) => {
                e.insert(old.unwrap_or_default());
                true
            }
            // Changed earlier in this block: the row keeps the node before the block.
            Entry::Occupied(_) => false,
        })
    }

    /// History rows held.
    pub fn len(&self) -> usize {
        self.before.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.before.is_empty()
    }

    /// Encodes the history rows of the versions in epochs below `below` (`u32::MAX`: all),
    /// takes those versions out and returns the rows in key order (`table` names the history
    /// table in errors). A node's rows in one epoch follow one another, so only its first
    /// needs the table's newest row before it, and none does in an epoch the table holds no
    /// row of.
    pub(super) fn take_history<const H: usize>(
        &mut self,
        epochs: Epochs,
        below: u32,
        history: &Table<'_, &'static [u8; H], &'static [u8]>,
        table: &'static str,
    ) -> StorageResult<Vec<HistoryRow<H>>> {
        let mut rows = Vec::new();
        // Whether the table holds no row of an epoch, asked once per epoch.
        let mut empty: Vec<(u32, bool)> = Vec::new();
        // The previous row encoded: its node's key, epoch and run.
        let mut prev: Option<([u8; K], u32, u8)> = None;
        let mut versions = self.before.iter().peekable();
        while let Some(((key, block), old)) = versions.next() {
            // The node after this block: the next version's `before`, or the node now.
            let after = match versions.peek() {
                Some(((next, _), next_old)) if next == key => {
                    (!next_old.is_empty()).then_some(next_old.as_slice())
                }
                _ => self.current.get(key).and_then(|n| n.as_deref()),
            };
            let epoch = epochs.of(*block);
            if epoch >= below {
                continue;
            }
            let mut run = prev.filter(|(k, e, _)| k == key && *e == epoch).map(|(_, _, run)| run);
            if run.is_none() {
                let empty = match empty.iter().find(|(e, _)| *e == epoch) {
                    Some((_, empty)) => *empty,
                    None => {
                        let is_empty = epoch_is_empty(history, epoch)?;
                        empty.push((epoch, is_empty));
                        is_empty
                    }
                };
                if empty {
                    run = Some(FULL_ROW_EVERY - 1);
                }
            }
            let hkey: [u8; H] = epochs.history_key(key, *block);
            let (row, run) = encode_history_row(history, table, &hkey, old, after, run)?;
            rows.push((hkey, row));
            prev = Some((*key, epoch, run));
        }
        self.before.retain(|(_, block), _| epochs.of(*block) >= below);
        rows.sort_unstable_by_key(|row| row.0);
        Ok(rows)
    }

    /// Writes every current row into `current`, and stops holding those of nodes with no
    /// version left (see [`NodeWrites::take_history`]): later reads find them in the table.
    pub(super) fn write_current(
        &mut self,
        current: &mut Table<'_, &'static [u8; K], &'static [u8]>,
    ) -> StorageResult<()> {
        for (key, node) in &self.current {
            match node {
                Some(node) => current.insert(key, node.as_slice())?,
                None => current.remove(key)?,
            };
        }
        let before = &self.before;
        self.current.retain(|key, _| before.range((*key, 0)..=(*key, u64::MAX)).next().is_some());
        Ok(())
    }
}

/// Held trie-node changes are written after the block that brings them to this many history
/// rows, and by a block's own stores once they reach twice as many. A row holds up to two nodes
/// (before and now, up to 518 bytes each) and its key: about 600 bytes on the chains measured,
/// at most about 1.2 KiB.
pub const TRIE_NODES_CAP: usize = 1 << 17;

/// The trie-node changes a [`super::Writer`] holds ([`super::Writer::trie_nodes`]).
#[derive(Debug)]
pub struct TrieNodes {
    /// Of the account trie ([`tables::ACCOUNT_TRIE`]).
    pub account: NodeWrites<33>,
    /// Of the storage tries ([`tables::STORAGE_TRIE`]; keys `account ++ path`).
    pub storage: NodeWrites<65>,
    /// History rows held before [`TrieNodes::full`] (tests lower it to write often).
    cap: usize,
}

impl Default for TrieNodes {
    fn default() -> Self {
        Self { account: NodeWrites::default(), storage: NodeWrites::default(), cap: TRIE_NODES_CAP }
    }
}

impl TrieNodes {
    /// History rows held.
    pub fn len(&self) -> usize {
        self.account.len() + self.storage.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.account.is_empty() && self.storage.is_empty()
    }

    /// Sets the cap ([`TRIE_NODES_CAP`] by default); tests set a small one so that the held
    /// changes are written between and inside blocks all the time.
    pub fn set_cap(&mut self, rows: usize) {
        self.cap = rows.max(1);
    }

    /// Whether the changes should be written after the block that made them.
    pub fn full(&self) -> bool {
        self.len() >= self.cap
    }

    /// Whether a block's own stores should write them before going on: a block that deletes a
    /// large storage trie would otherwise hold all of its nodes.
    pub fn overfull(&self) -> bool {
        self.len() >= 2 * self.cap
    }

    /// Takes the held changes out, leaving none (and the cap).
    pub fn take(&mut self) -> Self {
        Self {
            account: std::mem::take(&mut self.account),
            storage: std::mem::take(&mut self.storage),
            cap: self.cap,
        }
    }

    /// Writes everything held into the trie tables of `txn`.
    pub(super) fn write(self, txn: &WriteTransaction) -> StorageResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        self.write_with(
            txn,
            &mut txn.open_table(tables::ACCOUNT_TRIE)?,
            &mut txn.open_table(tables::STORAGE_TRIE)?,
        )
    }

    /// [`TrieNodes::write`] for a caller that has the current trie tables open. Each epoch's
    /// history rows go in key order, through one cursor where the epoch has none yet
    /// (`storage::history::held`).
    pub fn write_with(
        mut self,
        txn: &WriteTransaction,
        account_trie: &mut Table<'_, &'static [u8; 33], &'static [u8]>,
        storage_trie: &mut Table<'_, &'static [u8; 65], &'static [u8]>,
    ) -> StorageResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let (account, storage) = self.take_below(txn, u32::MAX, account_trie, storage_trie)?;
        write_rows(
            &mut txn.open_table(tables::ACCOUNT_TRIE_HISTORY)?,
            &account,
            "account_trie_history",
        )?;
        write_rows(
            &mut txn.open_table(tables::STORAGE_TRIE_HISTORY)?,
            &storage,
            "storage_trie_history",
        )
    }

    /// Before an epoch's close: writes the current rows, and takes out the history rows of the
    /// versions in epochs below `below`, encoded and in key order (account trie, storage tries),
    /// for the close to write ([`super::history::index::follow_head`]). The versions of later epochs
    /// stay held, with the current rows of their nodes.
    pub(super) fn take_closing(
        &mut self,
        txn: &WriteTransaction,
        below: u32,
    ) -> StorageResult<(Vec<HistoryRow<45>>, Vec<HistoryRow<77>>)> {
        self.take_below(
            txn,
            below,
            &mut txn.open_table(tables::ACCOUNT_TRIE)?,
            &mut txn.open_table(tables::STORAGE_TRIE)?,
        )
    }

    fn take_below(
        &mut self,
        txn: &WriteTransaction,
        below: u32,
        account_trie: &mut Table<'_, &'static [u8; 33], &'static [u8]>,
        storage_trie: &mut Table<'_, &'static [u8; 65], &'static [u8]>,
    ) -> StorageResult<(Vec<HistoryRow<45>>, Vec<HistoryRow<77>>)> {
        let epochs = super::history::keys::history_epochs(txn)?;
        let account = self.account.take_history(
            epochs,
            below,
            &txn.open_table(tables::ACCOUNT_TRIE_HISTORY)?,
            "account_trie_history",
        )?;
        let storage = self.storage.take_history(
            epochs,
            below,
            &txn.open_table(tables::STORAGE_TRIE_HISTORY)?,
            "storage_trie_history",
        )?;
        self.account.write_current(account_trie)?;
        self.storage.write_current(storage_trie)?;
        Ok((account, storage))
    }
}
