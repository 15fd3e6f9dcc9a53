//! The storage side of the trie-history stage (`trie::stage`): where it stands, and the
//! per-block trie history and storage roots it writes in place of what a grouped import
//! recorded at each epoch's end.
//!
//! A bulk import into a datadir that keeps trie history at every block checks one state root
//! per epoch: its trie-history rows for those blocks are written under each epoch's last block
//! (the trie is exact there), and its account rows keep the storage root of the epoch's start
//! until that end. The blocks it imported so are `(staged_to, grouped_to]`
//! ([`meta::TRIE_HISTORY_TO`], [`meta::GROUP_ROOT_AT`]). The stage takes them a range at a time
//! (never across an epoch), recomputes every block's tries from the state history, and
//! [`Writer::adopt_staged`] replaces the range's trie-history rows with per-block ones and
//! gives the account rows their per-block storage roots: the history then reads as if every
//! block's root had been stored at import. The freeze of history epochs waits for it
//! (`segments::freeze`).

use std::collections::BTreeMap;

use alloy_primitives::B256;
use redb::{ReadableTable, Table};

use super::index::{set_bits, stamp_replaced};
use super::keys::{Epochs, epoch_bit, history_epochs, index_key, row_block, row_key, run_of};
use super::nodes::{FULL_ROW_EVERY, NodeRow, encode_node_row, node_row};
use crate::storage::codec::account::{HashedAccount, row_stamp};
use crate::storage::codec::u64_value;
use crate::storage::tables::{self, meta};
use crate::storage::{StorageError, StorageResult, Writer};

/// Where the trie-history stage stands in a datadir whose bulk imports checked state roots per
/// epoch ([`meta::GROUP_ROOT_AT`] set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrieStage {
    /// Every block up to this one has its own trie history.
    pub staged_to: u64,
    /// The blocks after `staged_to` up to this one wait for the stage (none when equal). The
    /// trie is exact at each of them that ends an epoch, and at this one.
    pub grouped_to: u64,
    /// The block whose header state root the stage found to differ from its state's root:
    /// `(block, the header's root, the computed one)`. The stage stops there.
    pub failed: Option<(u64, B256, B256)>,
}

impl TrieStage {
    /// Reads it from `meta`: `None` when no import checked roots per group.
    pub fn read(
        meta: &impl ReadableTable<&'static str, &'static [u8]>,
    ) -> StorageResult<Option<Self>> {
        let get = |key| -> StorageResult<Option<u64>> {
            meta.get(key)?.map(|v| u64_value("meta", v.value())).transpose()
        };
        let Some(grouped_to) = get(meta::GROUP_ROOT_AT)? else { return Ok(None) };
        let staged_to = get(meta::TRIE_HISTORY_TO)?.unwrap_or(grouped_to).min(grouped_to);
        let failed = match meta.get(meta::TRIE_STAGE_FAILED)? {
            Some(v) => {
                let b = v.value();
                if b.len() != 72 {
                    return Err(StorageError::Corrupt {
                        table: "meta",
                        detail: format!("trie_stage_failed of {} bytes, want 72", b.len()),
                    });
                }
                let block = u64_value("meta", &b[..8])?;
                Some((block, B256::from_slice(&b[8..40]), B256::from_slice(&b[40..])))
            }
            None => None,
        };
        Ok(Some(Self { staged_to, grouped_to, failed }))
    }

    /// Whether blocks wait for the stage.
    pub fn pending(&self) -> bool {
        self.staged_to < self.grouped_to
    }

    /// Whether the trie history is exact at `block`: every block outside the waiting ones,
    /// and the waiting ones that end an epoch (their root was checked and stored).
    pub fn exact_at(&self, block: u64, epochs: Epochs) -> bool {
        block <= self.staged_to
            || block >= self.grouped_to
            || epochs.of(block) != epochs.of(block.saturating_add(1))
    }
}

/// One trie node's history rows over a staged range, encoded as its versions arrive: each row
/// is the node before a block that changed it, whole or as a delta against the version after
/// it (`super::nodes`). Only the last change waits whole, since its row depends on whether the
/// range ends its epoch. A range's nodes near the root change at almost every block: held as
/// whole versions, two 128-block ranges at once of the 10,000-block chain over 1M accounts
/// peaked 120 MiB higher (docs/benchmarks/issue-62.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVersions {
    /// The rows of every change but the last, in block order.
    rows: Vec<(u64, Vec<u8>)>,
    /// The node before the last change (empty: absent).
    old: Vec<u8>,
    /// The last change: its block and the node after it (`None`: removed).
    last: Option<(u64, Option<Vec<u8>>)>,
    /// The run of deltas the last of `rows` ends ([`FULL_ROW_EVERY`] `- 1` before the first
    /// row, which is whole).
    run: u8,
}

impl NodeVersions {
    /// No change yet to a node that was `before` the range (empty: absent).
    pub fn new(before: Vec<u8>) -> Self {
        Self { rows: Vec::new(), old: before, last: None, run: FULL_ROW_EVERY - 1 }
    }

    /// Records that `block` (after every block recorded so far) set the node to `after`
    /// (`None`: removed).
    pub fn push(&mut self, block: u64, after: Option<Vec<u8>>) -> StorageResult<()> {
        // The change before this one is no longer the last: its row takes its final form.
        if let Some((previous, node)) = self.last.replace((block, after)) {
            let row = encode_node_row(&self.old, node.as_deref(), self.run).map_err(corrupt)?;
            self.run = delta_run(&row)?;
            self.rows.push((previous, row));
            self.old = node.unwrap_or_default();
        }
        Ok(())
    }

    /// The bytes it holds: its rows, the node before the last change and the node after it.
    pub fn bytes(&self) -> usize {
        let rows: usize = self.rows.iter().map(|(_, row)| 32 + row.capacity()).sum();
        let last = self.last.as_ref().and_then(|(_, n)| n.as_ref()).map_or(0, Vec::capacity);
        rows + self.old.capacity() + last
    }

    /// The node after the last change (`None`: absent, or no change yet).
    pub fn now(&self) -> Option<&[u8]> {
        self.last.as_ref().and_then(|(_, node)| node.as_deref())
    }

    /// Whether no block changed the node.
    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    /// The node's rows, in block order. The last is whole unless the range ends its epoch: rows
    /// of the epoch's later blocks (a follower's) continue the chain of deltas after it.
    fn rows(&self, ends_epoch: bool) -> StorageResult<Vec<(u64, std::borrow::Cow<'_, [u8]>)>> {
        let mut out: Vec<_> =
            self.rows.iter().map(|(b, row)| (*b, std::borrow::Cow::from(row.as_slice()))).collect();
        if let Some((block, after)) = &self.last {
            let run = if ends_epoch { self.run } else { FULL_ROW_EVERY - 1 };
            let row = encode_node_row(&self.old, after.as_deref(), run).map_err(corrupt)?;
            out.push((*block, row.into()));
        }
        Ok(out)
    }
}

/// The run of deltas a node history row ends (0: whole or absent).
fn delta_run(row: &[u8]) -> StorageResult<u8> {
    Ok(match node_row(row).map_err(corrupt)? {
        NodeRow::Delta { run, .. } => run,
        NodeRow::Whole(_) | NodeRow::Absent => 0,
    })
}

/// One account's storage roots over a staged range: the root before it, then the root after
/// each block of the range that changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootVersions {
    /// The root before the range's first block.
    pub before: B256,
    /// Each change, in block order.
    pub changes: Vec<(u64, B256)>,
}

impl RootVersions {
    /// The root after `block` (before the range for a block below it).
    fn after(&self, block: u64) -> B256 {
        self.changes.iter().rev().find(|(b, _)| *b <= block).map_or(self.before, |(_, r)| *r)
    }
}

/// What the stage computed for blocks `from..=to`, all of one epoch: every trie node the blocks
/// changed, by key (the tables' keys: packed path, and account ++ packed path), and the storage
/// roots of the accounts whose storage changed.
#[derive(Debug, Clone, Default)]
pub struct StagedRange {
    /// The first block.
    pub from: u64,
    /// The last block.
    pub to: u64,
    /// Account-trie nodes.
    pub account_nodes: BTreeMap<[u8; 33], NodeVersions>,
    /// Storage-trie nodes.
    pub storage_nodes: BTreeMap<[u8; 65], NodeVersions>,
    /// Storage roots, by hashed address.
    pub storage_roots: BTreeMap<B256, RootVersions>,
    /// For a range that stops short of its epoch's end: the nodes the range did not change
    /// that have rows after it in the epoch, with the node as the range left it (empty:
    /// absent). A settle's row of such a node in the range goes; its next row may then be its
    /// first in the epoch, which must be whole.
    pub unchanged_account_nodes: BTreeMap<[u8; 33], Vec<u8>>,
    /// The same for storage-trie nodes.
    pub unchanged_storage_nodes: BTreeMap<[u8; 65], Vec<u8>>,
}

impl StagedRange {
    /// The bytes it holds, roughly: each node's versions and key, and a map entry's overhead.
    pub fn bytes(&self) -> usize {
        const ENTRY: usize = 48 + 24;
        let versions = |k: usize, v: &NodeVersions| k + ENTRY + v.bytes();
        let whole = |k: usize, v: &Vec<u8>| k + ENTRY + v.capacity();
        self.account_nodes.values().map(|v| versions(33, v)).sum::<usize>()
            + self.storage_nodes.values().map(|v| versions(65, v)).sum::<usize>()
            + self.storage_roots.values().map(|r| 32 + ENTRY + 40 * r.changes.len()).sum::<usize>()
            + self.unchanged_account_nodes.values().map(|v| whole(33, v)).sum::<usize>()
            + self.unchanged_storage_nodes.values().map(|v| whole(65, v)).sum::<usize>()
    }
}

fn corrupt(detail: String) -> StorageError {
    StorageError::Corrupt { table: "trie history stage", detail }
}

impl Writer {
    /// Where the trie-history stage stands, as this transaction sees it.
    pub fn trie_stage(&self) -> StorageResult<Option<TrieStage>> {
        TrieStage::read(&self.txn.open_table(tables::META)?)
    }

    /// Records that a bulk import checked one state root for blocks `from..=to`, at `to`
    /// ([`meta::GROUP_ROOT_AT`]): proofs at the blocks before `to` in the range wait for the
    /// trie-history stage in a datadir that keeps trie history at every block, and are not
    /// kept in one that keeps it for the unwind window. Unwinding stops at `to`. The blocks
    /// waiting for the stage are one range, from the block after [`meta::TRIE_HISTORY_TO`]: it
    /// starts at `from` when none waits, and otherwise grows to `to` (blocks that got their own
    /// root between the two are built again, to the same rows).
    pub fn set_group_root_at(&self, from: u64, to: u64) -> StorageResult<()> {
        let stage = self.trie_stage()?;
        let mut m = self.txn.open_table(tables::META)?;
        if crate::storage::segments::ProofHistory::read(&m)?
            == crate::storage::segments::ProofHistory::All
            && !stage.is_some_and(|s| s.pending())
        {
            let before = from.saturating_sub(1);
            m.insert(meta::TRIE_HISTORY_TO, before.to_be_bytes().as_slice())?;
        }
        m.insert(meta::GROUP_ROOT_AT, to.to_be_bytes().as_slice())?;
        Ok(())
    }

    /// Records that the stage found block `block`'s header state root to differ from the root
    /// of its state ([`meta::TRIE_STAGE_FAILED`]).
    pub fn set_trie_stage_failed(
        &self,
        block: u64,
        header: B256,
        computed: B256,
    ) -> StorageResult<()> {
        let mut value = Vec::with_capacity(72);
        value.extend_from_slice(&block.to_be_bytes());
        value.extend_from_slice(header.as_slice());
        value.extend_from_slice(computed.as_slice());
        self.txn.open_table(tables::META)?.insert(meta::TRIE_STAGE_FAILED, value.as_slice())?;
        Ok(())
    }

    /// Writes what the stage computed for `range` in place of the grouped import's rows of those
    /// blocks, moves the stage's marker past it, and freezes the epochs that then may be.
    /// Returns `false`, writing nothing, when the stage is no longer at `range.from - 1`
    /// (another run took the range).
    pub fn adopt_staged(&self, range: &StagedRange) -> StorageResult<bool> {
        let Some(stage) = self.trie_stage()? else { return Ok(false) };
        if !stage.pending() || stage.staged_to + 1 != range.from || range.to > stage.grouped_to {
            return Ok(false);
        }
        let epochs = history_epochs(&self.txn)?;
        let epoch = epochs.of(range.from);
        if epochs.of(range.to) != epoch || range.to < range.from {
            return Err(corrupt(format!(
                "staged range {}..={} is not within one epoch",
                range.from, range.to
            )));
        }
        // The last rows of a range that stops short of its epoch's end are whole: rows of the
        // epoch's later blocks (a follower's) continue the chain of deltas after them.
        let ends_epoch = epochs.of(range.to + 1) != epoch;
        let head = self.head()?.unwrap_or(range.to);
        let closed = epoch < epochs.of(head);
        replace_node_rows::<33, 45, 37>(
            &mut self.txn.open_table(tables::ACCOUNT_TRIE_HISTORY)?,
            &mut self.txn.open_table(tables::ACCOUNT_TRIE_EPOCHS)?,
            epoch,
            range,
            &range.account_nodes,
            (ends_epoch, closed),
        )?;
        whole_first_rows::<33, 45>(
            &mut self.txn.open_table(tables::ACCOUNT_TRIE_HISTORY)?,
            epoch,
            range.to,
            &range.unchanged_account_nodes,
        )?;
        replace_node_rows::<65, 77, 69>(
            &mut self.txn.open_table(tables::STORAGE_TRIE_HISTORY)?,
            &mut self.txn.open_table(tables::STORAGE_TRIE_EPOCHS)?,
            epoch,
            range,
            &range.storage_nodes,
            (ends_epoch, closed),
        )?;
        whole_first_rows::<65, 77>(
            &mut self.txn.open_table(tables::STORAGE_TRIE_HISTORY)?,
            epoch,
            range.to,
            &range.unchanged_storage_nodes,
        )?;
        self.correct_storage_roots(epochs, range, closed)?;
        // Past the last grouped block every block has its own history (a follower's).
        let staged_to = if range.to >= stage.grouped_to { head.max(range.to) } else { range.to };
        self.txn
            .open_table(tables::META)?
            .insert(meta::TRIE_HISTORY_TO, staged_to.to_be_bytes().as_slice())?;
        self.freeze_due_now()?;
        Ok(true)
    }

    /// Gives the account history rows of `range` the storage roots the stage computed: each
    /// row of an account whose storage changed gets the root after the block before it, and a
    /// block that changed only the account's storage gets the row it would have had.
    fn correct_storage_roots(
        &self,
        epochs: Epochs,
        range: &StagedRange,
        closed: bool,
    ) -> StorageResult<()> {
        let mut history = self.txn.open_table(tables::HASHED_ACCOUNT_HISTORY)?;
        let mut current = self.txn.open_table(tables::HASHED_ACCOUNTS)?;
        let mut index = self.txn.open_table(tables::HASHED_ACCOUNT_EPOCHS)?;
        let epoch = epochs.of(range.from);
        for (account, roots) in &range.storage_roots {
            let rows = account_rows(&history, epoch, account, range.from, range.to)?;
            let had_rows_in_epoch =
                !account_rows(&history, epoch, account, 0, u64::MAX)?.is_empty();
            // Every block the account's row changed at, with the row after it where known.
            let mut blocks: BTreeMap<u64, Option<&[u8]>> =
                rows.iter().map(|(b, v)| (*b, Some(v.as_slice()))).collect();
            for (b, _) in &roots.changes {
                blocks.entry(*b).or_insert(None);
            }
            // The row template of the account as it was before each block: the value of the
            // next existing row at or after it (nothing changed the account's fields in between),
            // else the account after the range.
            let after_range = || -> StorageResult<Option<Vec<u8>>> {
                account_after(&history, &current, epochs, account, range.to)
            };
            let mut later: Option<Vec<u8>> = None;
            let mut written_at: Option<u64> = None;
            let mut out = Vec::new();
            for (&block, existing) in &blocks {
                let template = match existing {
                    Some(v) => v.to_vec(),
                    None => match rows.iter().find(|(b, _)| *b > block) {
                        Some((_, v)) => v.clone(),
                        None => match &later {
                            Some(v) => v.clone(),
                            None => {
                                let v = after_range()?.ok_or_else(|| {
                                    corrupt(format!(
                                        "account {account}'s storage root changed at block \
                                         {block} but the account is not found after it"
                                    ))
                                })?;
                                later = Some(v.clone());
                                v
                            }
                        },
                    },
                };
                if template.is_empty() {
                    // The account did not exist before the block: nothing to correct.
                    written_at = Some(block);
                    continue;
                }
                let mut row = HashedAccount::decode(&template, "hashed_account_history")?;
                row.storage_root = roots.after(block - 1);
                let stamp = match (existing, written_at) {
                    (Some(_), _) => row_stamp(&template, "hashed_account_history")?,
                    (None, Some(w)) => w,
                    (None, None) => row_stamp(&template, "hashed_account_history")?.min(block - 1),
                };
                out.push((block, row.encode(stamp).as_slice().to_vec()));
                written_at = Some(block);
            }
            for (block, value) in &out {
                let key: [u8; 44] = row_key(epoch, &account.0, *block);
                history.insert(&key, value.as_slice())?;
            }
            // A row in an epoch that held none of the account: the epoch index, or the
            // current row's stamp that names the epoch, must say so.
            if !had_rows_in_epoch && !out.is_empty() {
                let Some(now) = current.get(&account.0)?.map(|v| v.value().to_vec()) else {
                    continue;
                };
                let stamp = row_stamp(&now, "hashed_accounts")?;
                let last = out.last().map_or(range.to, |(b, _)| *b);
                if stamp < last {
                    let mut row = HashedAccount::decode(&now, "hashed_accounts")?;
                    row.storage_root = roots.after(range.to);
                    current.insert(&account.0, row.encode(last).as_slice())?;
                    stamp_replaced(&mut index, epochs, &account.0, stamp, last)?;
                } else if closed && epochs.of(stamp) != epoch {
                    set_bits(
                        &mut index,
                        vec![(index_key(&account.0, run_of(epoch)), epoch_bit(epoch))],
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// The rows of `account` in `epoch` with blocks in `from..=to`, in block order.
fn account_rows(
    history: &Table<'_, &'static [u8; 44], &'static [u8]>,
    epoch: u32,
    account: &B256,
    from: u64,
    to: u64,
) -> StorageResult<Vec<(u64, Vec<u8>)>> {
    let lo: [u8; 44] = row_key(epoch, &account.0, from);
    let hi: [u8; 44] = row_key(epoch, &account.0, to);
    let mut out = Vec::new();
    for item in history.range::<&[u8; 44]>(&lo..=&hi)? {
        let (k, v) = item?;
        out.push((row_block(k.value()), v.value().to_vec()));
    }
    Ok(out)
}

/// The account's row after block `after` (`None`: absent): its first history row after it in
/// the B-tree's epochs, else its current row. The epochs after a staged range are never frozen
/// (the freeze waits for the stage).
fn account_after(
    history: &Table<'_, &'static [u8; 44], &'static [u8]>,
    current: &Table<'_, &'static [u8; 32], &'static [u8]>,
    epochs: Epochs,
    account: &B256,
    after: u64,
) -> StorageResult<Option<Vec<u8>>> {
    let mut epoch = epochs.of(after + 1);
    loop {
        let lo: [u8; 44] = row_key(epoch, &account.0, after + 1);
        let hi: [u8; 44] = row_key(epoch, &account.0, u64::MAX);
        if let Some(item) = history.range::<&[u8; 44]>(&lo..=&hi)?.next() {
            let v = item?.1.value().to_vec();
            return Ok((!v.is_empty()).then_some(v));
        }
        // The next epoch with any row: the table's keys are epoch first.
        let next: [u8; 44] = row_key(epoch.saturating_add(1), &[0u8; 32], 0);
        match history.range::<&[u8; 44]>(&next..)?.next() {
            Some(item) => epoch = super::keys::row_epoch(item?.0.value()),
            None => break,
        }
    }
    Ok(current.get(&account.0)?.map(|v| v.value().to_vec()))
}

/// Replaces the history rows of `range`'s blocks in one trie-history table with the per-block
/// rows of `nodes`, and indexes the epoch for each node that has rows.
fn replace_node_rows<const K: usize, const H: usize, const I: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    index: &mut Table<'_, &'static [u8; I], u64>,
    epoch: u32,
    range: &StagedRange,
    nodes: &BTreeMap<[u8; K], NodeVersions>,
    (ends_epoch, closed): (bool, bool),
) -> StorageResult<()> {
    let lo: [u8; H] = row_key(epoch, &[0u8; K], 0);
    let hi: [u8; H] = row_key(epoch, &[0xffu8; K], u64::MAX);
    let blocks = range.from..=range.to;
    // The nodes whose rows go: a settle recorded every node its walk emitted, the stage only
    // those that changed, so some may be left with no row in the epoch.
    let mut dropped: Vec<[u8; K]> = Vec::new();
    for item in table.range::<&[u8; H]>(&lo..=&hi)? {
        let (k, _) = item?;
        let k = k.value();
        if blocks.contains(&row_block(k)) {
            let entity = super::keys::row_entity::<K, H>(k);
            if dropped.last() != Some(&entity) {
                dropped.push(entity);
            }
        }
    }
    table.retain_in::<&[u8; H], _>(&lo..=&hi, |k, _| !blocks.contains(&row_block(k)))?;
    let mut bits = Vec::with_capacity(nodes.len());
    for (key, versions) in nodes {
        if versions.is_empty() {
            continue;
        }
        bits.push((index_key::<K, I>(key, run_of(epoch)), epoch_bit(epoch)));
        for (block, row) in versions.rows(ends_epoch)? {
            let k: [u8; H] = row_key(epoch, key, block);
            table.insert(&k, &*row)?;
        }
    }
    // Only a closed epoch is indexed: the head's gets its bits when it closes.
    if !closed {
        return Ok(());
    }
    set_bits(index, bits)?;
    for key in dropped {
        let lo: [u8; H] = row_key(epoch, &key, 0);
        let hi: [u8; H] = row_key(epoch, &key, u64::MAX);
        if table.range::<&[u8; H]>(&lo..=&hi)?.next().is_none() {
            super::index::clear_bit::<K, I>(index, &key, epoch)?;
        }
    }
    Ok(())
}

/// For each node of `nodes` (unchanged by a range ending at `to`, with its value then): if its
/// first row left in `epoch` is after `to` and a delta, writes it whole (a node's first row in
/// an epoch is whole, so that a read never follows deltas out of the epoch).
fn whole_first_rows<const K: usize, const H: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    epoch: u32,
    to: u64,
    nodes: &BTreeMap<[u8; K], Vec<u8>>,
) -> StorageResult<()> {
    for (key, value) in nodes {
        let lo: [u8; H] = row_key(epoch, key, 0);
        let hi: [u8; H] = row_key(epoch, key, u64::MAX);
        let first = match table.range::<&[u8; H]>(&lo..=&hi)?.next() {
            Some(item) => {
                let (k, v) = item?;
                let delta = matches!(node_row(v.value()).map_err(corrupt)?, NodeRow::Delta { .. });
                (row_block(k.value()) > to && delta).then(|| *k.value())
            }
            None => None,
        };
        if let Some(k) = first {
            table.insert(&k, value.as_slice())?;
        }
    }
    Ok(())
}
