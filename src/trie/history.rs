//! The trie and the hashed state as they were after an old block: node and leaf sources for
//! proofs at any stored block.
//!
//! Every versioned table pairs a current table (`key → value`) with a history table
//! (`epoch ++ key ++ block → value before that block`, with its epoch index; `storage::history::lookup`),
//! as the account history does: the value after block N is that of the first history entry
//! after N, else the current one. A key that did not
//! exist then has an empty value. Listing the keys of a range at N merges the
//! keys of both tables and keeps those that existed at N. Trie-node history rows may be deltas
//! against the next version (`storage::history::nodes`), resolved here.

use crate::storage::history::keys::{
    index_entity, index_key, index_run, row_block, row_entity, row_key, run_epochs,
};
use crate::storage::history::lookup::SnapshotHistory;
use crate::storage::history::nodes::{FULL_ROW_EVERY, NodeRow, node_row, resolve_node_row};
use alloy_primitives::B256;
use alloy_trie::{BranchNodeCompact, Nibbles};
use redb::{ReadOnlyTable, Value};

use super::TrieError;
use super::codec::{concat, pack_path};
use super::db::{account_leaf, decode_row, storage_leaf};
use super::later::Kept;
use super::walk::{LeafFn, LeafSource, NodeSource};
use crate::storage::TrieTables;
use crate::storage::segments::Kind;

fn present(bytes: &[u8]) -> Option<Vec<u8>> {
    (!bytes.is_empty()).then(|| bytes.to_vec())
}

/// Adds one to a big-endian key; `None` past the largest key.
pub(crate) fn successor<const K: usize>(key: &[u8; K]) -> Option<[u8; K]> {
    let mut out = *key;
    for b in out.iter_mut().rev() {
        if *b == 0xff {
            *b = 0;
        } else {
            *b += 1;
            return Some(out);
        }
    }
    None
}

/// Subtracts one from a big-endian key; `None` below the smallest key.
fn predecessor<const K: usize>(key: &[u8; K]) -> Option<[u8; K]> {
    let mut out = *key;
    for b in out.iter_mut().rev() {
        if *b == 0 {
            *b = 0xff;
        } else {
            *b -= 1;
            return Some(out);
        }
    }
    None
}

/// A key and its value.
pub(crate) type Entry<const K: usize> = ([u8; K], Vec<u8>);

/// Callback of [`Versioned::scan`] for each key and its value.
pub(crate) type KeyFn<'f, const K: usize> =
    dyn FnMut(&[u8; K], &[u8]) -> Result<(), TrieError> + 'f;

/// A current table and its history, read as of the end of `block`.
#[derive(Clone, Copy)]
pub(crate) struct Versioned<
    't,
    const K: usize,
    const H: usize,
    const I: usize,
    V1: Value + 'static,
    V2: Value + 'static,
> {
    current: &'t ReadOnlyTable<&'static [u8; K], V1>,
    history: SnapshotHistory<'t, H, I, V2>,
    block: u64,
    /// History rows are trie nodes, whole or deltas (`storage::history::nodes`).
    node_rows: bool,
    /// Current rows carry a stamp (`storage::codec::account::row_stamp`; the hashed state).
    stamped: bool,
    /// For a stamped table, every key changed after the block with its value then
    /// (`later.rs`): the answer without a history read.
    later: Option<Kept<'t, K>>,
}

impl<'t, const K: usize, const H: usize, const I: usize, V1, V2> Versioned<'t, K, H, I, V1, V2>
where
    V1: Value + 'static,
    V2: Value + 'static,
    for<'a> V1::SelfType<'a>: AsRef<[u8]>,
    for<'a> V2::SelfType<'a>: AsRef<[u8]>,
{
    /// A table of the hashed state, whose current rows carry a stamp.
    pub(crate) fn stamped(
        current: &'t ReadOnlyTable<&'static [u8; K], V1>,
        history: SnapshotHistory<'t, H, I, V2>,
        block: u64,
    ) -> Self {
        Self { current, history, block, node_rows: false, stamped: true, later: None }
    }

    /// A trie-node table, whose history rows may be deltas.
    pub(crate) fn nodes(
        current: &'t ReadOnlyTable<&'static [u8; K], V1>,
        history: SnapshotHistory<'t, H, I, V2>,
        block: u64,
    ) -> Self {
        Self { current, history, block, node_rows: true, stamped: false, later: None }
    }

    /// The same table read through `later`, which must hold every key of the table changed
    /// after the block, with its value then.
    pub(crate) fn with_later(self, later: Kept<'t, K>) -> Self {
        Self { later: Some(later), ..self }
    }

    fn current_value(&self, key: &[u8; K]) -> Result<Vec<u8>, TrieError> {
        Ok(self.current.get(key)?.map(|v| v.value().as_ref().to_vec()).unwrap_or_default())
    }

    /// The value of a stamped table's `key` after the block, given its current row (empty:
    /// none): the current row itself when its stamp says it was written by then.
    fn stamped_value(&self, key: &[u8; K], current: Vec<u8>) -> Result<Option<Vec<u8>>, TrieError> {
        let stamp = match current.is_empty() {
            true => None,
            false => Some(crate::storage::codec::account::row_stamp(&current, "current state")?),
        };
        Ok(match self.history.first_after::<K, H, I, V2>(key, self.block, stamp)? {
            Some((_, first)) => present(&first),
            None => (!current.is_empty()).then_some(current),
        })
    }

    /// The value of `key` after the block; `None` if it did not exist.
    pub(crate) fn get(&self, key: &[u8; K]) -> Result<Option<Vec<u8>>, TrieError> {
        if let Some(later) = self.later {
            return Ok(match later.get(key) {
                Some(then) => present(then),
                None => present(&self.current_value(key)?),
            });
        }
        if self.stamped {
            return self.stamped_value(key, self.current_value(key)?);
        }
        let Some((block, first)) =
            self.history.first_after::<K, H, I, V2>(key, self.block, None)?
        else {
            return Ok(present(&self.current_value(key)?));
        };
        if !self.node_rows {
            return Ok(present(&first));
        }
        // Deltas name only what differs from the next version: walk forward within the place
        // that holds the row (its epoch in the B-tree, or its segment file, where a node's rows
        // run on across the file's epochs) to a whole row (at most FULL_ROW_EVERY rows), else
        // hop once to the node's next version (its first row in a later place, which is whole,
        // or the current node), then resolve back.
        let corrupt = |detail: String| TrieError::CorruptNode {
            table: "trie node history",
            key: alloy_primitives::hex::encode(key),
            detail,
        };
        let epoch = self.history.epochs.of(block);
        // The rows after it in its place, as many as a walk to a whole row may take.
        let mut later: Vec<(u64, Vec<u8>)> = Vec::new();
        self.history.scan_node::<K, H, V2>(epoch, key, block.saturating_add(1), |k, v| {
            later.push((row_block(k), v.to_vec()));
            Ok(later.len() <= usize::from(FULL_ROW_EVERY))
        })?;
        let mut rows = later.into_iter();
        let mut chain = vec![first];
        let mut last_block = block;
        let mut next = Vec::new();
        while let Some(last) = chain.last()
            && matches!(node_row(last).map_err(corrupt)?, NodeRow::Delta { .. })
        {
            if chain.len() > usize::from(FULL_ROW_EVERY) {
                return Err(corrupt(format!(
                    "more than {FULL_ROW_EVERY} history rows without a whole node"
                )));
            }
            match rows.next() {
                Some((at, v)) => {
                    last_block = at;
                    chain.push(v);
                }
                None => {
                    next = match self.history.first_after::<K, H, I, V2>(key, last_block, None)? {
                        Some((at, row)) => {
                            if matches!(node_row(&row).map_err(corrupt)?, NodeRow::Delta { .. }) {
                                return Err(corrupt(format!(
                                    "the node's first row in its epoch or segment file (block {at}) is a delta"
                                )));
                            }
                            row
                        }
                        None => self.current_value(key)?,
                    };
                    break;
                }
            }
        }
        for row in chain.iter().rev() {
            next = resolve_node_row(row, &next).map_err(corrupt)?;
        }
        Ok(present(&next))
    }

    /// Calls `f` with every key in `from..=last` that existed after the block and its value,
    /// in key order: [`Self::next`] over a span, with one cursor per candidate table instead of
    /// three seeks per key, and a stamped table's current row taken from its cursor (most keys
    /// have not changed since the block: their value is that row, with no further read).
    pub(crate) fn scan(
        &self,
        from: &[u8; K],
        last: &[u8; K],
        f: &mut KeyFn<'_, K>,
    ) -> Result<(), TrieError> {
        if from > last {
            return Ok(());
        }
        if let Some(later) = self.later {
            return self.scan_later(later, from, last, f);
        }
        let mut current = self.current.range::<&[u8; K]>(from..=last)?;
        let mut next_current = || -> Result<Option<Entry<K>>, TrieError> {
            Ok(match current.next() {
                Some(item) => {
                    let (k, v) = item?;
                    Some((*k.value(), v.value().as_ref().to_vec()))
                }
                None => None,
            })
        };
        let (ilo, ihi): ([u8; I], [u8; I]) = (index_key(from, 0), index_key(last, u32::MAX));
        let mut indexed = self.history.index.range::<&[u8; I]>(&ilo..=&ihi)?;
        // Each index row: its key, and the epochs its run holds rows in.
        type IndexRow<const K: usize> = ([u8; K], u32, u64);
        let mut next_indexed = || -> Result<Option<IndexRow<K>>, TrieError> {
            Ok(match indexed.next() {
                Some(item) => {
                    let (k, bits) = item?;
                    let k = k.value();
                    Some((index_entity::<K, I>(k), index_run::<I>(k), bits.value()))
                }
                None => None,
            })
        };
        let open = self.history.open;
        let (hlo, hhi): ([u8; H], [u8; H]) =
            (row_key(open, from, 0), row_key(open, last, u64::MAX));
        let mut recent = self.history.rows.range::<&[u8; H]>(&hlo..=&hhi)?;
        let mut next_recent = || -> Result<Option<[u8; K]>, TrieError> {
            Ok(match recent.next() {
                Some(item) => Some(row_entity::<K, H>(item?.0.value())),
                None => None,
            })
        };
        // When the block ends its epoch, a key changed since has its first row after the block
        // in the next epoch's rows if it changed there: one more cursor, over that epoch's rows
        // of the span, answers those keys without a seek each (a scan of the trie-history
        // stage reads at the end of an epoch).
        let after = self.history.epochs.of(self.block.saturating_add(1));
        let rows_after = self.stamped
            && after != self.history.epochs.of(self.block)
            && after <= open
            && self.history.frozen.is_none_or(|(segments, _)| !segments.holds(after));
        let (alo, ahi): ([u8; H], [u8; H]) =
            (row_key(after, from, 0), row_key(after, last, u64::MAX));
        let mut later = match rows_after {
            true => Some(self.history.rows.range::<&[u8; H]>(&alo..=&ahi)?),
            false => None,
        };
        let mut next_later = || -> Result<Option<Entry<K>>, TrieError> {
            Ok(match later.as_mut().and_then(Iterator::next) {
                Some(item) => {
                    let (k, v) = item?;
                    Some((row_entity::<K, H>(k.value()), v.value().as_ref().to_vec()))
                }
                None => None,
            })
        };
        let (mut cur, mut idx, mut rec) = (next_current()?, next_indexed()?, next_recent()?);
        let mut first_later = next_later()?;
        loop {
            let heads = [cur.as_ref().map(|(k, _)| *k), idx.map(|(k, _, _)| k), rec];
            let Some(candidate) = heads.into_iter().flatten().min() else { return Ok(()) };
            // The key's first row in the next epoch, if it has one (the rows after it skipped).
            let mut changed_next = None;
            while let Some((k, row)) = first_later.take_if(|(k, _)| *k <= candidate) {
                if k == candidate && changed_next.is_none() {
                    changed_next = Some(row);
                }
                first_later = next_later()?;
            }
            // The closed epochs after the next one that hold rows of the key, from its index
            // rows (the first one, if any).
            let mut indexed_later = None;
            while let Some((_, run, bits)) = idx.filter(|(k, _, _)| *k == candidate) {
                if indexed_later.is_none() {
                    indexed_later = run_epochs(run, bits).find(|e| *e > after);
                }
                idx = next_indexed()?;
            }
            let value = match cur.take_if(|(k, _)| *k == candidate) {
                Some((_, row)) if self.stamped => {
                    cur = next_current()?;
                    match changed_next {
                        Some(before) => present(&before),
                        None if rows_after => {
                            self.value_after_next_epoch(&candidate, row, after, indexed_later)?
                        }
                        None => self.stamped_value(&candidate, row)?,
                    }
                }
                taken => {
                    if taken.is_some() {
                        cur = next_current()?;
                    }
                    self.get(&candidate)?
                }
            };
            while rec == Some(candidate) {
                rec = next_recent()?;
            }
            if let Some(value) = value {
                f(&candidate, &value)?;
            }
        }
    }

    /// [`Self::scan`] through `later`: the current rows, with the keys changed since the block
    /// taking their value then.
    fn scan_later(
        &self,
        later: Kept<'_, K>,
        from: &[u8; K],
        last: &[u8; K],
        f: &mut KeyFn<'_, K>,
    ) -> Result<(), TrieError> {
        let mut changed = later.span(from, last).peekable();
        for item in self.current.range::<&[u8; K]>(from..=last)? {
            let (k, v) = item?;
            let key = k.value();
            while let Some((c, then)) = changed.next_if(|(c, _)| *c < key) {
                if !then.is_empty() {
                    f(c, then)?;
                }
            }
            match changed.next_if(|(c, _)| *c == key) {
                Some((_, [])) => {}
                Some((c, then)) => f(c, then)?,
                None => f(key, v.value().as_ref())?,
            }
        }
        for (c, then) in changed {
            if !then.is_empty() {
                f(c, then)?;
            }
        }
        Ok(())
    }

    /// [`Self::stamped_value`] of a key known to have no row in epoch `after` (the one after
    /// the block's, which the block ends), given the first later closed epoch its index rows
    /// name: that epoch's first row, else the first of the epoch its current row was written
    /// in (which the index leaves out), with no seek into the epochs between.
    fn value_after_next_epoch(
        &self,
        key: &[u8; K],
        current: Vec<u8>,
        after: u32,
        indexed_later: Option<u32>,
    ) -> Result<Option<Vec<u8>>, TrieError> {
        if current.is_empty() {
            return self.stamped_value(key, current);
        }
        let stamp = crate::storage::codec::account::row_stamp(&current, "current state")?;
        if stamp <= self.block {
            return Ok(Some(current));
        }
        let written = self.history.epochs.of(stamp).min(self.history.open);
        let epoch = match indexed_later {
            Some(e) if e < written => e,
            _ => written,
        };
        if epoch <= after {
            return self.stamped_value(key, current);
        }
        match self.history.first_in::<K, H, V2>(epoch, key, 0)? {
            Some((_, row)) => Ok(present(&row)),
            None => self.stamped_value(key, current),
        }
    }

    /// The first key in `from..=last` that existed after the block, with its value.
    ///
    /// Candidates come from the current table, the epoch index (every key with a row in a
    /// closed epoch) and the open epoch's rows: every key that existed after the block is in
    /// one of them, since it either exists now or has a history row after the block.
    pub(crate) fn next(
        &self,
        from: &[u8; K],
        last: &[u8; K],
    ) -> Result<Option<Entry<K>>, TrieError> {
        let mut from = *from;
        while from <= *last {
            let cur = match self.current.range::<&[u8; K]>(&from..=last)?.next() {
                Some(item) => Some(*item?.0.value()),
                None => None,
            };
            let (ilo, ihi): ([u8; I], [u8; I]) = (index_key(&from, 0), index_key(last, u32::MAX));
            let indexed = match self.history.index.range::<&[u8; I]>(&ilo..=&ihi)?.next() {
                Some(item) => Some(index_entity::<K, I>(item?.0.value())),
                None => None,
            };
            let open = self.history.open;
            let (hlo, hhi): ([u8; H], [u8; H]) =
                (row_key(open, &from, 0), row_key(open, last, u64::MAX));
            let recent = match self.history.rows.range::<&[u8; H]>(&hlo..=&hhi)?.next() {
                Some(item) => Some(row_entity::<K, H>(item?.0.value())),
                None => None,
            };
            let Some(candidate) = [cur, indexed, recent].into_iter().flatten().min() else {
                return Ok(None);
            };
            if let Some(value) = self.get(&candidate)? {
                return Ok(Some((candidate, value)));
            }
            match successor(&candidate) {
                Some(next) => from = next,
                None => return Ok(None),
            }
        }
        Ok(None)
    }
}

/// The largest 33-byte path key under `prefix`: the prefix followed by `f` nibbles, length 64.
pub(crate) fn last_path_key(prefix: &Nibbles) -> [u8; 33] {
    let mut full = *prefix;
    while full.len() < 64 {
        full.push(0xf);
    }
    pack_path(&full)
}

/// Account-trie nodes after a block.
pub(crate) struct AccountNodesAt<'t>(
    pub(crate) Versioned<'t, 33, 45, 37, &'static [u8], &'static [u8]>,
);

impl NodeSource for AccountNodesAt<'_> {
    fn seek(
        &mut self,
        from: &Nibbles,
        within: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        let Some((key, value)) = self.0.next(&pack_path(from), &last_path_key(within))? else {
            return Ok(None);
        };
        decode_row("account_trie", &key, &value).map(Some)
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key = pack_path(path);
        match self.0.get(&key)? {
            Some(value) => Ok(Some(decode_row("account_trie", &key, &value)?.1)),
            None => Ok(None),
        }
    }
}

/// One account's storage-trie nodes after a block.
pub(crate) struct StorageNodesAt<'t> {
    pub(crate) nodes: Versioned<'t, 65, 77, 69, &'static [u8], &'static [u8]>,
    pub(crate) account: B256,
}

impl NodeSource for StorageNodesAt<'_> {
    fn seek(
        &mut self,
        from: &Nibbles,
        within: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        let lo: [u8; 65] = concat(&self.account, &pack_path(from));
        let hi: [u8; 65] = concat(&self.account, &last_path_key(within));
        let Some((key, value)) = self.nodes.next(&lo, &hi)? else { return Ok(None) };
        decode_row("storage_trie", &key, &value).map(Some)
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key: [u8; 65] = concat(&self.account, &pack_path(path));
        match self.nodes.get(&key)? {
            Some(value) => Ok(Some(decode_row("storage_trie", &key, &value)?.1)),
            None => Ok(None),
        }
    }
}

/// Hashed accounts after a block.
pub(crate) struct AccountLeavesAt<'t>(
    pub(crate) Versioned<'t, 32, 44, 36, &'static [u8], &'static [u8]>,
);

impl LeafSource for AccountLeavesAt<'_> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        // `to` is exclusive: the last key is the one before it.
        let last = match to {
            Some(to) => match predecessor(&to.0) {
                Some(k) => k,
                None => return Ok(()),
            },
            None => [0xff; 32],
        };
        let mut buf = Vec::with_capacity(128);
        self.0.scan(&from.0, &last, &mut |key, value| {
            let hashed = B256::from(*key);
            account_leaf(value, &hashed, &mut buf)?;
            f(&hashed, &buf)
        })
    }
}

/// One account's hashed storage after a block.
pub(crate) struct StorageLeavesAt<'t> {
    pub(crate) slots: Versioned<'t, 64, 76, 68, &'static [u8], &'static [u8]>,
    pub(crate) account: B256,
}

impl LeafSource for StorageLeavesAt<'_> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let lo: [u8; 64] = concat(&self.account, from.as_slice());
        let last: [u8; 64] = match to {
            // `to` is exclusive; a key before this account's range ends the scan below.
            Some(to) => match predecessor(&concat::<64>(&self.account, to.as_slice())) {
                Some(k) => k,
                None => return Ok(()),
            },
            None => concat(&self.account, &[0xff; 32]),
        };
        let mut buf = Vec::with_capacity(40);
        self.slots.scan(&lo, &last, &mut |key, value| {
            storage_leaf(value, &mut buf)?;
            f(&B256::from_slice(&key[32..]), &buf)
        })
    }
}

/// The four versioned sources of a snapshot, after `block`.
pub(crate) fn at(t: &TrieTables, block: u64) -> Sources<'_> {
    Sources {
        account_nodes: Versioned::nodes(
            &t.account_trie,
            t.history(&t.account_trie_history, &t.account_trie_epochs, Kind::AccountTrieHistory),
            block,
        ),
        storage_nodes: Versioned::nodes(
            &t.storage_trie,
            t.history(&t.storage_trie_history, &t.storage_trie_epochs, Kind::StorageTrieHistory),
            block,
        ),
        accounts: Versioned::stamped(&t.hashed_accounts, t.account_history(), block),
        slots: Versioned::stamped(&t.hashed_storage, t.storage_history(), block),
    }
}

/// See [`at`].
#[derive(Clone, Copy)]
pub(crate) struct Sources<'t> {
    pub(crate) account_nodes: Versioned<'t, 33, 45, 37, &'static [u8], &'static [u8]>,
    pub(crate) storage_nodes: Versioned<'t, 65, 77, 69, &'static [u8], &'static [u8]>,
    pub(crate) accounts: Versioned<'t, 32, 44, 36, &'static [u8], &'static [u8]>,
    pub(crate) slots: Versioned<'t, 64, 76, 68, &'static [u8], &'static [u8]>,
}
