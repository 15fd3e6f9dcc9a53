//! Freezing: the history rows of closed epochs behind the unwind window, and the block data of
//! the same epochs, move out of the B-tree into segment files, in the write transaction that
//! moves the head past them (merging them is `merge`'s).

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::dictionary::{DICT_SAMPLES, freeze_dictionary};
use super::merge::merge_due;
use super::{Entry, Kind, Manifest, SegmentWriter, Store, TxnFiles};
use crate::storage::history::keys::{Epochs, entity_first_key, epochs_bounds, history_epochs};
use crate::storage::tables::{self, meta};
use crate::storage::{StorageError, StorageResult};

/// A row as a segment keeps it: a receipts row plain (its own zstd frame undone: the segment's
/// blocks are compressed with a dictionary, which does better across rows), any other as is.
pub fn segment_value(kind: Kind, value: &[u8]) -> StorageResult<std::borrow::Cow<'_, [u8]>> {
    if kind == Kind::Receipts {
        return crate::storage::codec::receipts::plain_receipts_row(value)
            .map_err(|e| StorageError::Corrupt { table: "receipts", detail: e.to_string() });
    }
    if kind == Kind::AccessLists {
        return crate::storage::access_list::plain_access_list_row(value)
            .map_err(|e| StorageError::Corrupt { table: "access_lists", detail: e.to_string() });
    }
    Ok(std::borrow::Cow::Borrowed(value))
}

/// What rows of a byte-keyed table a freeze takes: its epochs, and the first and last keys.
trait RowRange<const H: usize> {
    fn bounds(&self) -> ((u32, u32), [u8; H], [u8; H]);
}

/// History rows of epochs `first..=last` (keys begin with the epoch).
struct EpochRange(u32, u32);

impl<const H: usize> RowRange<H> for EpochRange {
    fn bounds(&self) -> ((u32, u32), [u8; H], [u8; H]) {
        let (lo, hi) = epochs_bounds(self.0, self.1);
        ((self.0, self.1), lo, hi)
    }
}

/// The transactions rows of blocks `from..=to`, with the epochs they are in.
struct BlockKeys((u32, u32), (u64, u64));

impl RowRange<12> for BlockKeys {
    fn bounds(&self) -> ((u32, u32), [u8; 12], [u8; 12]) {
        let (from, to) = self.1;
        (
            self.0,
            crate::storage::codec::tx::tx_key(from, 0),
            crate::storage::codec::tx::tx_key(to, u32::MAX),
        )
    }
}

/// Moves the rows of `kind` in `range` from the B-tree into a new segment; the entry, `None`
/// if there were none.
fn freeze_rows<const H: usize>(
    txn: &WriteTransaction,
    def: TableDefinition<'_, &'static [u8; H], &'static [u8]>,
    store: &Store,
    manifest: &Manifest,
    pending: &TxnFiles,
    kind: Kind,
    range: impl RowRange<H>,
) -> StorageResult<Option<Entry>> {
    let mut table = txn.open_table(def)?;
    let ((first, last), lo, hi) = range.bounds();
    let mut entry = Entry { kind, first, last, rows: 0, bytes: 0, crc: 0 };
    let mut dictionary = freeze_dictionary(store, manifest, kind, || {
        let mut samples = Vec::new();
        for item in table.range::<&[u8; H]>(&lo..=&hi)?.take(DICT_SAMPLES) {
            samples.push(segment_value(kind, item?.1.value())?.into_owned());
        }
        Ok(samples)
    })?;
    let mut writer: Option<SegmentWriter> = None;
    for item in table.range::<&[u8; H]>(&lo..=&hi)? {
        let (k, v) = item?;
        let w = match &mut writer {
            Some(w) => w,
            None => {
                pending.created(entry.file_name());
                let dictionary = std::mem::take(&mut dictionary);
                writer.insert(SegmentWriter::create(&store.path(&entry), dictionary)?)
            }
        };
        if kind.is_entity_first() {
            // One epoch's rows: entity-first order is the table's.
            w.push(&entity_first_key(k.value()), &segment_value(kind, v.value())?)?;
        } else {
            w.push(k.value(), &segment_value(kind, v.value())?)?;
        }
    }
    let Some(w) = writer else { return Ok(None) };
    let written = w.finish_file(&pending.unsynced)?;
    (entry.rows, entry.bytes, entry.crc) = (written.rows, written.bytes, written.crc);
    table.retain_in::<&[u8; H], _>(&lo..=&hi, |_, _| false)?;
    Ok(Some(entry))
}

/// Moves the rows of the `u64`-keyed block table `def` for blocks `from..=to` into a new
/// segment (keys as 8 bytes big-endian); the entry, `None` if there were none.
#[allow(clippy::too_many_arguments)]
fn freeze_block_rows<V>(
    txn: &WriteTransaction,
    def: TableDefinition<'_, u64, V>,
    store: &Store,
    manifest: &Manifest,
    pending: &TxnFiles,
    kind: Kind,
    (first, last): (u32, u32),
    (from, to): (u64, u64),
    bytes: impl Fn(&V::SelfType<'_>) -> Vec<u8>,
) -> StorageResult<Option<Entry>>
where
    V: redb::Value + 'static,
{
    let mut table = txn.open_table(def)?;
    let mut entry = Entry { kind, first, last, rows: 0, bytes: 0, crc: 0 };
    let mut dictionary = freeze_dictionary(store, manifest, kind, || {
        let mut samples = Vec::new();
        for item in table.range(from..=to)?.take(DICT_SAMPLES) {
            samples.push(segment_value(kind, &bytes(&item?.1.value()))?.into_owned());
        }
        Ok(samples)
    })?;
    let mut writer: Option<SegmentWriter> = None;
    for item in table.range(from..=to)? {
        let (k, v) = item?;
        let w = match &mut writer {
            Some(w) => w,
            None => {
                pending.created(entry.file_name());
                let dictionary = std::mem::take(&mut dictionary);
                writer.insert(SegmentWriter::create(&store.path(&entry), dictionary)?)
            }
        };
        let value = bytes(&v.value());
        w.push(&k.value().to_be_bytes(), &segment_value(kind, &value)?)?;
    }
    let Some(w) = writer else { return Ok(None) };
    let written = w.finish_file(&pending.unsynced)?;
    (entry.rows, entry.bytes, entry.crc) = (written.rows, written.bytes, written.crc);
    table.retain_in(from..=to, |_, _| false)?;
    Ok(Some(entry))
}

/// Moves the trace-address index rows of blocks `from..=to` into a new segment, in the
/// table's (address) order; the entry, `None` if there were none. The table's keys are address
/// first, so the blocks' rows are found by one pass over it: it holds only the blocks not yet
/// frozen (the unwind window and the open epochs), so the pass costs what the window holds,
/// not what the chain does.
fn freeze_trace_rows(
    txn: &WriteTransaction,
    store: &Store,
    pending: &TxnFiles,
    (first, last): (u32, u32),
    (from, to): (u64, u64),
) -> StorageResult<Option<Entry>> {
    let kind = Kind::TraceAddresses;
    let mut table = txn.open_table(tables::TRACE_ADDRESSES)?;
    let frozen = |k: &[u8; 28]| {
        crate::storage::codec::tx::block_of_address_key(k).is_some_and(|b| (from..=to).contains(&b))
    };
    let mut entry = Entry { kind, first, last, rows: 0, bytes: 0, crc: 0 };
    let mut writer: Option<SegmentWriter> = None;
    for item in table.iter()? {
        let (k, _) = item?;
        let k = k.value();
        if !frozen(k) {
            continue;
        }
        let w = match &mut writer {
            Some(w) => w,
            None => {
                pending.created(entry.file_name());
                writer.insert(SegmentWriter::create(&store.path(&entry), Vec::new())?)
            }
        };
        w.push(k, &[])?;
    }
    let Some(w) = writer else { return Ok(None) };
    let written = w.finish_file(&pending.unsynced)?;
    (entry.rows, entry.bytes, entry.crc) = (written.rows, written.bytes, written.crc);
    table.retain(|k, ()| !frozen(k))?;
    Ok(Some(entry))
}

/// Freezes every closed epoch all of whose blocks, and the next epoch's first, are below the
/// oldest block the datadir keeps change lists for (so none of them can be unwound, and the
/// epoch cannot be reopened), then merges segments that are due.
/// Called wherever the head moves forward, after the move's epoch close and change pruning.
pub(crate) fn freeze_due(
    txn: &WriteTransaction,
    store: &Store,
    pending: &TxnFiles,
) -> StorageResult<()> {
    let epochs: Epochs = history_epochs(txn)?;
    let mut meta_table = txn.open_table(tables::META)?;
    let get =
        |t: &redb::Table<'_, &'static str, &'static [u8]>, key| -> StorageResult<Option<u64>> {
            t.get(key)?.map(|v| crate::storage::codec::u64_value("meta", v.value())).transpose()
        };
    let (Some(head), Some(floor)) =
        (get(&meta_table, meta::HEAD)?, get(&meta_table, meta::CHANGES_FROM)?)
    else {
        return Ok(());
    };
    // Epoch e covers blocks e·len ..= (e+1)·len - 1, and unwinding block (e+1)·len, the first
    // of the next, reopens it. It is frozen once that block too is below the floor (cannot be
    // unwound): (e+1)·len < floor, that is e < (floor - 1) / len.
    let due = u32::try_from(floor.saturating_sub(1) / epochs.len.max(1))
        .unwrap_or(u32::MAX)
        .min(epochs.of(head));
    let (frozen_to, blocks_frozen_to) = store.frozen_marks(&meta_table)?;
    // History waits for the trie-history stage: the epochs of blocks it has not reached keep
    // their rows in the B-tree, where it reads them and writes per-block ones in their place
    // (`storage::history::staged`). Block data does not wait.
    let block_due = due;
    let due = match crate::storage::history::staged::TrieStage::read(&meta_table)? {
        Some(stage) if stage.pending() => due.min(epochs.of(stage.staged_to + 1)),
        _ => due,
    };
    if due <= frozen_to && block_due <= blocks_frozen_to {
        return Ok(());
    }
    let mut manifest = Manifest::read(&meta_table)?;
    let started = std::time::Instant::now();
    let mut rows = 0;
    let (first, last) = (manifest.frozen_to, due.max(manifest.frozen_to + 1) - 1);
    if due > manifest.frozen_to {
        let drop_trie = super::ProofHistory::read(&meta_table)? == super::ProofHistory::Window;
        if drop_trie {
            rows += drop_trie_rows::<33, 45, 37>(
                txn,
                tables::ACCOUNT_TRIE_HISTORY,
                tables::ACCOUNT_TRIE_EPOCHS,
                first,
                last,
            )?;
            rows += drop_trie_rows::<65, 77, 69>(
                txn,
                tables::STORAGE_TRIE_HISTORY,
                tables::STORAGE_TRIE_EPOCHS,
                first,
                last,
            )?;
        }
        for kind in Kind::ALL.into_iter().filter(|k| !k.is_block_data()) {
            if drop_trie && matches!(kind, Kind::AccountTrieHistory | Kind::StorageTrieHistory) {
                continue;
            }
            // History is frozen an epoch to a file: each file's rows are then in entity-first
            // order as the table holds them, and merges sort them by key (trie history: and chain
            // each node's rows, `merge`).
            let spans: Vec<(u32, u32)> = if kind.is_entity_first() {
                (first..=last).map(|e| (e, e)).collect()
            } else {
                vec![(first, last)]
            };
            for (first, last) in spans {
                let entry = match kind {
                    Kind::AccountHistory => freeze_rows(
                        txn,
                        tables::HASHED_ACCOUNT_HISTORY,
                        store,
                        &manifest,
                        pending,
                        kind,
                        EpochRange(first, last),
                    )?,
                    Kind::StorageHistory => freeze_rows(
                        txn,
                        tables::HASHED_STORAGE_HISTORY,
                        store,
                        &manifest,
                        pending,
                        kind,
                        EpochRange(first, last),
                    )?,
                    Kind::AccountTrieHistory => freeze_rows(
                        txn,
                        tables::ACCOUNT_TRIE_HISTORY,
                        store,
                        &manifest,
                        pending,
                        kind,
                        EpochRange(first, last),
                    )?,
                    Kind::StorageTrieHistory => freeze_rows(
                        txn,
                        tables::STORAGE_TRIE_HISTORY,
                        store,
                        &manifest,
                        pending,
                        kind,
                        EpochRange(first, last),
                    )?,
                    _ => None,
                };
                if let Some(e) = entry {
                    rows += e.rows;
                    manifest.files.push(e);
                }
            }
        }
        manifest.frozen_to = due;
    }
    // Block data of the same epochs (a write transaction reads it through the segments too:
    // `BLOCKHASH`, the ommer rules' ancestors).
    if block_due > manifest.blocks_frozen_to {
        let (first, last) = (manifest.blocks_frozen_to, block_due - 1);
        let blocks = (u64::from(first) * epochs.len, (u64::from(last) + 1) * epochs.len - 1);
        let span = (first, last);
        let copy = |v: &&[u8]| v.to_vec();
        let entries = [
            freeze_block_rows(
                txn,
                tables::HEADERS,
                store,
                &manifest,
                pending,
                Kind::Headers,
                span,
                blocks,
                copy,
            )?,
            freeze_block_rows(
                txn,
                tables::CANONICAL,
                store,
                &manifest,
                pending,
                Kind::Canonical,
                span,
                blocks,
                |v: &&[u8; 32]| v.to_vec(),
            )?,
            freeze_block_rows(
                txn,
                tables::BODIES,
                store,
                &manifest,
                pending,
                Kind::Bodies,
                span,
                blocks,
                copy,
            )?,
            freeze_rows(
                txn,
                tables::TRANSACTIONS,
                store,
                &manifest,
                pending,
                Kind::Transactions,
                BlockKeys(span, blocks),
            )?,
            freeze_block_rows(
                txn,
                tables::RECEIPTS,
                store,
                &manifest,
                pending,
                Kind::Receipts,
                span,
                blocks,
                copy,
            )?,
            freeze_block_rows(
                txn,
                tables::ACCESS_LISTS,
                store,
                &manifest,
                pending,
                Kind::AccessLists,
                span,
                blocks,
                copy,
            )?,
        ];
        for e in entries.into_iter().flatten() {
            rows += e.rows;
            manifest.files.push(e);
        }
        manifest.blocks_frozen_to = block_due;
    }
    // The trace-address index of the same blocks (it trails the block data only in a datadir
    // from before it was frozen, whose first freeze then takes all of it below `block_due`).
    if block_due > manifest.trace_frozen_to {
        let (first, last) = (manifest.trace_frozen_to, block_due - 1);
        let blocks = (u64::from(first) * epochs.len, (u64::from(last) + 1) * epochs.len - 1);
        if let Some(e) = freeze_trace_rows(txn, store, pending, (first, last), blocks)? {
            rows += e.rows;
            manifest.files.push(e);
        }
        manifest.trace_frozen_to = block_due;
    }
    // The files above were renamed into the folder unsynced (`finish_file`): their syncs and
    // one of the folder for all of them, before the manifest that names them is written.
    pending.unsynced.sync(store.dir())?;
    for kind in Kind::ALL {
        merge_due(store, pending, &mut manifest, kind, false)?;
    }
    manifest.write(&mut meta_table)?;
    tracing::debug!(target: "storage", first, last, rows, ms = started.elapsed().as_millis() as u64, "froze history epochs (committed with the transaction)");
    Ok(())
}

/// Removes the trie-history rows of epochs `first..=last` and their bits in the epoch index
/// (`--proof-history window`); returns the rows removed.
fn drop_trie_rows<const K: usize, const H: usize, const I: usize>(
    txn: &WriteTransaction,
    rows_def: TableDefinition<'_, &'static [u8; H], &'static [u8]>,
    index_def: TableDefinition<'_, &'static [u8; I], u64>,
    first: u32,
    last: u32,
) -> StorageResult<u64> {
    use crate::storage::history::keys::{epoch_bit, index_key, row_entity, row_epoch, run_of};
    let ((_, _), lo, hi) = <EpochRange as RowRange<H>>::bounds(&EpochRange(first, last));
    let mut rows = txn.open_table(rows_def)?;
    let mut named: std::collections::BTreeMap<[u8; I], u64> = std::collections::BTreeMap::new();
    let mut count = 0u64;
    for item in rows.range::<&[u8; H]>(&lo..=&hi)? {
        let (k, _) = item?;
        let k = k.value();
        let (epoch, key) = (row_epoch(k), row_entity::<K, H>(k));
        *named.entry(index_key::<K, I>(&key, run_of(epoch))).or_default() |= epoch_bit(epoch);
        count += 1;
    }
    rows.retain_in::<&[u8; H], _>(&lo..=&hi, |_, _| false)?;
    let mut index = txn.open_table(index_def)?;
    for (key, bits) in named {
        let left = index.get(&key)?.map(|v| v.value() & !bits);
        match left {
            Some(0) => {
                index.remove(&key)?;
            }
            Some(left) => {
                index.insert(&key, left)?;
            }
            None => {}
        }
    }
    Ok(count)
}
