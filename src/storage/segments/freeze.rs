//! Freezing and merging: the history rows of closed epochs behind the unwind window move into
//! segment files, in the write transaction that moves the head past them; segments of one kind
//! are merged eight at a time into larger ones.

use std::sync::Mutex;

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::{Entry, Kind, Manifest, SegmentWriter, Store};
use crate::storage::history::epochs::{Epochs, history_epochs};
use crate::storage::tables::{self, meta};
use crate::storage::{StorageError, StorageResult};

/// Rows a dictionary is trained on.
const DICT_SAMPLES: usize = 4096;
/// A trained dictionary's size.
const DICT_BYTES: usize = 64 * 1024;

/// Whether `kind`'s rows are compressed with a dictionary trained on them: transactions and
/// receipts, whose rows share much across blocks (addresses, selectors, log topics) but little
/// within one small block of rows.
fn trains(kind: Kind) -> bool {
    matches!(kind, Kind::Transactions | Kind::Receipts)
}

/// A dictionary for `kind` from its first rows (empty when the kind takes none, or there are
/// too few rows to train on).
fn dictionary_from(kind: Kind, samples: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    if !trains(kind) {
        return Vec::new();
    }
    let samples: Vec<Vec<u8>> = samples.take(DICT_SAMPLES).collect();
    super::file::train_dictionary(&samples, DICT_BYTES)
}

/// The dictionary a new segment of `kind` compresses with: `reuse`'s when that file has one,
/// else one trained on `samples` (none for a kind that takes none). A freeze passes the newest
/// file of its kind, a merge below [`RETRAIN_LEVEL`] its newest part, and a larger merge none.
fn dictionary_for(
    store: &Store,
    kind: Kind,
    reuse: Option<&Entry>,
    samples: impl FnOnce() -> StorageResult<Vec<Vec<u8>>>,
) -> StorageResult<Vec<u8>> {
    if !trains(kind) {
        return Ok(Vec::new());
    }
    if let Some(file) = reuse {
        let dictionary = store.segment(file)?.dictionary_bytes()?;
        if !dictionary.is_empty() {
            return Ok(dictionary);
        }
    }
    Ok(dictionary_from(kind, samples()?.into_iter()))
}

/// The dictionary a freeze of `kind` compresses with: the newest segment's of that kind when it
/// has one, else one trained on `samples`. Training took about a second of the writer's time
/// per kind and epoch, 15 % of an import's writer on the 10,000-block chain over 1M accounts
/// (BENCHMARKS.md, session 36). Merges into level [`RETRAIN_LEVEL`] train their own on rows
/// from across their parts, so a dictionary is at most that level's span older than the rows
/// it compresses.
fn freeze_dictionary(
    store: &Store,
    manifest: &Manifest,
    kind: Kind,
    samples: impl FnOnce() -> StorageResult<Vec<Vec<u8>>>,
) -> StorageResult<Vec<u8>> {
    let newest = manifest.files.iter().filter(|e| e.kind == kind).max_by_key(|e| e.first);
    dictionary_for(store, kind, newest, samples)
}

/// A row as a segment keeps it: a receipts row plain (its own zstd frame undone: the segment's
/// blocks are compressed with a dictionary, which does better across rows), any other as is.
pub fn segment_value(kind: Kind, value: &[u8]) -> StorageResult<std::borrow::Cow<'_, [u8]>> {
    if kind == Kind::Receipts {
        return crate::storage::codec::plain_receipts_row(value)
            .map_err(|e| StorageError::Corrupt { table: "receipts", detail: e.to_string() });
    }
    Ok(std::borrow::Cow::Borrowed(value))
}

/// A merge into a segment of this level or above (64 epochs and more: 8,192 blocks at the
/// default epoch length) trains a new dictionary; freezes and smaller merges take the newest
/// one of their kind.
const RETRAIN_LEVEL: u32 = 2;

/// Segments of one level merged at a time.
pub(crate) const MERGE_FAN_IN: usize = 8;
/// A merged segment covers at most this many epochs (512k blocks at the default epoch length,
/// about reth's static-file span).
pub(crate) const MAX_SPAN: u32 = 4096;
/// Nor more bytes than this.
const MAX_MERGED_BYTES: u64 = 4 << 30;

/// Segment files a write transaction created and replaced: the created ones are removed if it
/// is dropped, the replaced ones after it commits durably.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    files: Mutex<(Vec<String>, Vec<String>)>,
    committed: std::sync::atomic::AtomicBool,
}

impl Pending {
    fn created(&self, name: String) {
        self.files.lock().unwrap_or_else(|e| e.into_inner()).0.push(name);
    }

    fn replaced(&self, name: String) {
        self.files.lock().unwrap_or_else(|e| e.into_inner()).1.push(name);
    }

    /// After the commit: the replaced files wait for a durable commit.
    pub(crate) fn committed(&self, store: &Store, durable: bool) {
        self.committed.store(true, std::sync::atomic::Ordering::Relaxed);
        let (_, replaced) =
            std::mem::take(&mut *self.files.lock().unwrap_or_else(|e| e.into_inner()));
        store.retire(replaced);
        if durable {
            store.durable();
        }
    }

    /// When the transaction is dropped uncommitted: removes what it created.
    pub(crate) fn abandon(&self, store: &Store) {
        if self.committed.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let (created, _) =
            std::mem::take(&mut *self.files.lock().unwrap_or_else(|e| e.into_inner()));
        for name in created {
            store.discard(&name);
        }
    }
}

/// What rows of a byte-keyed table a freeze takes: its epochs, and the first and last keys.
trait RowRange<const H: usize> {
    fn bounds(&self) -> ((u32, u32), [u8; H], [u8; H]);
}

/// History rows of epochs `first..=last` (keys begin with the epoch).
struct EpochRange(u32, u32);

impl<const H: usize> RowRange<H> for EpochRange {
    fn bounds(&self) -> ((u32, u32), [u8; H], [u8; H]) {
        let mut lo = [0u8; H];
        lo[..4].copy_from_slice(&self.0.to_be_bytes());
        let mut hi = [0xffu8; H];
        hi[..4].copy_from_slice(&self.1.to_be_bytes());
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
            crate::storage::codec::tx_key(from, 0),
            crate::storage::codec::tx_key(to, u32::MAX),
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
    pending: &Pending,
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
        if kind.is_node_first() {
            // One epoch's rows: node-first order is the table's.
            w.push(&super::node_first_key(k.value()), v.value())?;
        } else {
            w.push(k.value(), &segment_value(kind, v.value())?)?;
        }
    }
    let Some(w) = writer else { return Ok(None) };
    let written = w.finish()?;
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
    pending: &Pending,
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
    let written = w.finish()?;
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
    pending: &Pending,
    (first, last): (u32, u32),
    (from, to): (u64, u64),
) -> StorageResult<Option<Entry>> {
    let kind = Kind::TraceAddresses;
    let mut table = txn.open_table(tables::TRACE_ADDRESSES)?;
    let frozen = |k: &[u8; 28]| {
        crate::storage::codec::block_of_address_key(k).is_some_and(|b| (from..=to).contains(&b))
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
    let written = w.finish()?;
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
    pending: &Pending,
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
    let mut manifest = Manifest::read(&meta_table)?;
    if due <= manifest.frozen_to {
        return Ok(());
    }
    let (first, last) = (manifest.frozen_to, due - 1);
    let started = std::time::Instant::now();
    let mut rows = 0;
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
        // Trie history is frozen an epoch to a file: each file's rows are then in node-first
        // order as the table holds them, and merges chain them (`merge`).
        let spans: Vec<(u32, u32)> = if kind.is_node_first() {
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
    // Block data of the same epochs (a write transaction reads it through the segments too:
    // `BLOCKHASH`, the ommer rules' ancestors).
    let block_due = due;
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
    for kind in Kind::ALL {
        merge_due(store, pending, &mut manifest, kind)?;
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
    use crate::storage::history::epochs::{epoch_bit, index_key, row_entity, row_epoch, run_of};
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

/// A segment's level: how many times [`MERGE_FAN_IN`] its span is.
fn level(e: &Entry) -> u32 {
    let mut span = e.last - e.first + 1;
    let mut level = 0;
    while span >= MERGE_FAN_IN as u32 {
        span /= MERGE_FAN_IN as u32;
        level += 1;
    }
    level
}

/// While the newest [`MERGE_FAN_IN`] segments of `kind` share a level, merges them into one
/// (a bounded step: at most that many files, at most [`MAX_SPAN`] epochs and 4 GiB).
fn merge_due(
    store: &Store,
    pending: &Pending,
    manifest: &mut Manifest,
    kind: Kind,
) -> StorageResult<()> {
    loop {
        let of_kind: Vec<usize> = manifest
            .files
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == kind)
            .map(|(i, _)| i)
            .collect();
        if of_kind.len() < MERGE_FAN_IN {
            return Ok(());
        }
        let tail = &of_kind[of_kind.len() - MERGE_FAN_IN..];
        let lv = level(&manifest.files[tail[0]]);
        let (first, last) =
            (manifest.files[tail[0]].first, manifest.files[tail[MERGE_FAN_IN - 1]].last);
        let bytes: u64 = tail.iter().map(|&i| manifest.files[i].bytes).sum();
        if tail.iter().any(|&i| level(&manifest.files[i]) != lv)
            || last - first + 1 > MAX_SPAN
            || bytes > MAX_MERGED_BYTES
        {
            return Ok(());
        }
        // A merge needs the room of its parts on disk until they are removed.
        if crate::storage::free_bytes(store.dir())
            .is_some_and(|free| free < bytes.saturating_mul(2))
        {
            tracing::warn!(target: "storage", kind = kind.name(), first, last, bytes, "not enough free disk space to merge segments; they stay as they are");
            return Ok(());
        }
        let parts: Vec<Entry> = tail.iter().map(|&i| manifest.files[i].clone()).collect();
        let merged = merge(store, pending, kind, &parts)?;
        manifest.files.retain(|e| !parts.contains(e));
        manifest.files.push(merged);
        manifest.files.sort_by_key(|e| (e.kind, e.first));
        for p in &parts {
            pending.replaced(p.file_name());
        }
    }
}

/// Writes one segment with the rows of `parts` (consecutive, in epoch order, so their rows,
/// keyed epoch or block first, are already in order one after another).
pub(crate) fn merge(
    store: &Store,
    pending: &Pending,
    kind: Kind,
    parts: &[Entry],
) -> StorageResult<Entry> {
    let (first, last) = match (parts.first(), parts.last()) {
        (Some(a), Some(b)) => (a.first, b.last),
        _ => return Err(StorageError::Config("a merge of no segments".into())),
    };
    let mut entry = Entry { kind, first, last, rows: 0, bytes: 0, crc: 0 };
    // A merge into level [`RETRAIN_LEVEL`] or above trains its dictionary again, on rows from
    // across its parts; a smaller one keeps its newest part's.
    let reuse = parts.last().filter(|_| level(&entry) < RETRAIN_LEVEL);
    let dictionary = dictionary_for(store, kind, reuse, || {
        let per_part = DICT_SAMPLES / parts.len().max(1);
        let mut samples = Vec::new();
        for part in parts {
            let s = store.segment(part)?;
            let mut taken = 0;
            for b in 0..s.block_count() {
                let block = s.read_block(b)?;
                for i in 0..block.len() {
                    samples.push(block.row(i).1.to_vec());
                    taken += 1;
                }
                if taken >= per_part {
                    break;
                }
            }
        }
        Ok(samples)
    })?;
    pending.created(entry.file_name());
    let mut w = SegmentWriter::create(&store.path(&entry), dictionary)?;
    if kind.is_node_first() {
        merge_nodes(store, parts, &mut w, CHAIN_ROWS)?;
    } else if kind.is_address_first() {
        merge_interleaved(store, parts, &mut w)?;
    } else {
        for part in parts {
            let s = store.segment(part)?;
            for b in 0..s.block_count() {
                let block = s.read_block(b)?;
                for i in 0..block.len() {
                    let (k, v) = block.row(i);
                    w.push(k, v)?;
                }
            }
        }
    }
    let written = w.finish()?;
    (entry.rows, entry.bytes, entry.crc) = (written.rows, written.bytes, written.crc);
    tracing::debug!(target: "storage", kind = kind.name(), first, last, rows = entry.rows, "merged segments");
    Ok(entry)
}

/// Writes the rows of `parts` to `w` in key order, for a kind whose files each hold keys of any
/// range: a merge of sorted runs, reading one decoded block of each part at a time (memory is
/// the parts' count times a block, whatever their size). Keys never repeat across parts: each
/// row names its block, and the parts' epochs are apart.
fn merge_interleaved(store: &Store, parts: &[Entry], w: &mut SegmentWriter) -> StorageResult<()> {
    merge_sorted(store, parts, |key, value, _| w.push(key, value))
}

/// Rows of one node a merge holds before, at the start of the node's rows in its next part, it
/// writes those before the newest part's start among them (a whole row, which the later rows
/// chain on from): memory stays bounded by this and one part's rows of a node, however wide
/// the merge.
const CHAIN_ROWS: usize = 8192;

/// Writes the trie-history rows of node-first `parts` to `w` in key order, one node's rows at
/// a time chained into one run of deltas across the parts (`storage::history::nodes::rechain`):
/// each part starts a node with a whole row, which the merged file needs only where a run
/// fills. At most about `chain_rows` of a node's rows are held (see [`CHAIN_ROWS`]).
fn merge_nodes(
    store: &Store,
    parts: &[Entry],
    w: &mut SegmentWriter,
    chain_rows: usize,
) -> StorageResult<()> {
    /// Key bytes after a node-first key's node: epoch and block.
    const TAIL: usize = 12;
    let node_of = |k: &[u8]| -> Vec<u8> { k[..k.len().saturating_sub(TAIL)].to_vec() };
    // One node's rows: keys, values and the part each came from.
    let mut node: Vec<(Vec<u8>, Vec<u8>, usize)> = Vec::new();
    let mut current: Vec<u8> = Vec::new();
    merge_sorted(store, parts, |key, value, part| {
        if node_of(key) != current {
            write_chained(&mut node, w, true)?;
            current = node_of(key);
        } else if node.len() >= chain_rows && node.last().is_some_and(|r| r.2 != part) {
            write_chained(&mut node, w, false)?;
        }
        node.push((key.to_vec(), value.to_vec(), part));
        Ok(())
    })?;
    write_chained(&mut node, w, true)
}

/// Writes the rows `node` holds of one node, chained up to the first row of the newest part
/// among them (`storage::history::nodes::rechain`): all of them when `all` (the node's last
/// rows: the rows of that part are written as they are), else only those before that row,
/// which stays held to start the next ones.
fn write_chained(
    node: &mut Vec<(Vec<u8>, Vec<u8>, usize)>,
    w: &mut SegmentWriter,
    all: bool,
) -> StorageResult<()> {
    let Some(last_part) = node.last().map(|r| r.2) else { return Ok(()) };
    let tail = node.iter().position(|r| r.2 == last_part).unwrap_or(0);
    let end = if all { node.len() } else { tail };
    if end == 0 {
        return Ok(());
    }
    let mut values: Vec<Vec<u8>> = node[..=tail].iter().map(|r| r.1.clone()).collect();
    crate::storage::history::nodes::rechain(&mut values, tail).map_err(|detail| {
        StorageError::Corrupt {
            table: "trie history segment",
            detail: format!("row {}: {detail}", alloy_primitives::hex::encode(&node[0].0)),
        }
    })?;
    for (i, (key, value, _)) in node[..end].iter().enumerate() {
        w.push(key, values.get(i).filter(|_| i < tail).unwrap_or(value))?;
    }
    node.drain(..end);
    Ok(())
}

/// Calls `f` with every row of `parts` in key order, with the index of the part it came from:
/// a merge of sorted runs, reading one decoded block of each part at a time.
fn merge_sorted(
    store: &Store,
    parts: &[Entry],
    mut f: impl FnMut(&[u8], &[u8], usize) -> StorageResult<()>,
) -> StorageResult<()> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    /// One part's read position: the file, its decoded block, the block's index and the row's,
    /// and which part it is.
    struct Cursor {
        segment: std::sync::Arc<super::Segment>,
        block: super::file::Block,
        b: usize,
        i: usize,
        /// The index of its part.
        part: usize,
    }
    impl Cursor {
        /// Moves to the next row; false at the file's end.
        fn advance(&mut self) -> StorageResult<bool> {
            self.i += 1;
            while self.i >= self.block.len() {
                self.b += 1;
                if self.b >= self.segment.block_count() {
                    return Ok(false);
                }
                self.block = self.segment.read_block(self.b)?;
                self.i = 0;
            }
            Ok(true)
        }
    }
    let mut cursors = Vec::with_capacity(parts.len());
    let mut heap = BinaryHeap::new();
    for (p, part) in parts.iter().enumerate() {
        let segment = store.segment(part)?;
        if segment.block_count() == 0 {
            continue;
        }
        let block = segment.read_block(0)?;
        if block.is_empty() {
            continue;
        }
        heap.push(Reverse((block.row(0).0.to_vec(), cursors.len())));
        cursors.push(Cursor { segment, block, b: 0, i: 0, part: p });
    }
    while let Some(Reverse((key, c))) = heap.pop() {
        let cursor = &mut cursors[c];
        f(&key, cursor.block.row(cursor.i).1, cursor.part)?;
        if cursor.advance()? {
            heap.push(Reverse((cursor.block.row(cursor.i).0.to_vec(), c)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Transaction-like rows: a few shared byte strings (addresses, selectors) and a counter.
    fn samples(n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let mut row = b"\xf8\x6b\x80\x84\x3b\x9a\xca\x00\x82\x52\x08\x94".to_vec();
                row.extend_from_slice(&[(i % 7) as u8; 20]);
                row.extend_from_slice(&i.to_be_bytes());
                row.extend_from_slice(&[0xa9, 0x05, 0x9c, 0xbb]);
                row.extend_from_slice(&[(i % 13) as u8; 32]);
                row
            })
            .collect()
    }

    #[test]
    fn a_freeze_takes_the_newest_dictionary_of_its_kind_and_trains_one_only_without() {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = Manifest::default();
        let store = Store::open(dir.path(), &manifest).unwrap();
        // No segment of the kind yet: trained on the samples.
        let mut asked = 0;
        let trained = freeze_dictionary(&store, &manifest, Kind::Transactions, || {
            asked += 1;
            Ok(samples(2000))
        })
        .unwrap();
        assert_eq!(asked, 1);
        assert!(!trained.is_empty(), "2,000 rows train a dictionary");
        // A kind that takes none never asks for samples.
        let none = freeze_dictionary(&store, &manifest, Kind::AccountHistory, || {
            unreachable!("account history is not trained")
        });
        assert!(none.unwrap().is_empty());
        // Two segments of the kind: the newer one's dictionary is taken, not trained again.
        for (first, dictionary) in [(0, Vec::new()), (1, trained.clone())] {
            let e =
                Entry { kind: Kind::Transactions, first, last: first, rows: 0, bytes: 0, crc: 0 };
            let mut w = SegmentWriter::create(&store.path(&e), dictionary).unwrap();
            for (i, row) in samples(100).iter().enumerate() {
                w.push(&(i as u64).to_be_bytes(), row).unwrap();
            }
            w.finish().unwrap();
            manifest.files.push(e);
        }
        let reused = freeze_dictionary(&store, &manifest, Kind::Transactions, || {
            unreachable!("the newest segment has a dictionary")
        })
        .unwrap();
        assert_eq!(reused, trained);
        // The newest without one (too few rows when it was frozen): trained again.
        let e = Entry { kind: Kind::Transactions, first: 2, last: 2, rows: 0, bytes: 0, crc: 0 };
        let mut w = SegmentWriter::create(&store.path(&e), Vec::new()).unwrap();
        w.push(b"k", b"v").unwrap();
        w.finish().unwrap();
        manifest.files.push(e);
        let mut asked = 0;
        let again = freeze_dictionary(&store, &manifest, Kind::Transactions, || {
            asked += 1;
            Ok(samples(10))
        });
        assert_eq!(asked, 1);
        assert!(again.unwrap().is_empty(), "10 rows are too few to train on");
    }

    /// Eight segments of `span` epochs each from epoch 0, every one compressed with `dictionary`.
    fn parts(store: &Store, span: u32, dictionary: &[u8]) -> Vec<Entry> {
        (0..MERGE_FAN_IN as u32)
            .map(|p| {
                let (first, last) = (p * span, p * span + span - 1);
                let e = Entry { kind: Kind::Transactions, first, last, rows: 0, bytes: 0, crc: 0 };
                let mut w = SegmentWriter::create(&store.path(&e), dictionary.to_vec()).unwrap();
                for (i, row) in samples(600).iter().enumerate() {
                    w.push(&(u64::from(p) << 32 | i as u64).to_be_bytes(), row).unwrap();
                }
                w.finish().unwrap();
                e
            })
            .collect()
    }

    #[test]
    fn a_small_merge_keeps_its_newest_parts_dictionary_and_a_large_one_trains_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Manifest::default()).unwrap();
        let old = super::super::file::train_dictionary(&samples(3000)[1000..], 8192);
        assert!(!old.is_empty());
        let pending = Pending::default();
        // Eight single epochs into one of 8 (level 1): the parts' dictionary, rows intact.
        let small = parts(&store, 1, &old);
        let merged = merge(&store, &pending, Kind::Transactions, &small).unwrap();
        assert_eq!(level(&merged), 1);
        assert_eq!(merged.rows, 8 * 600);
        assert_eq!(store.segment(&merged).unwrap().dictionary_bytes().unwrap(), old);
        // Eight of 8 epochs into one of 64 (level 2): trained again on the parts' rows.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Manifest::default()).unwrap();
        let large = parts(&store, 8, &old);
        let merged = merge(&store, &pending, Kind::Transactions, &large).unwrap();
        assert_eq!(level(&merged), 2);
        let trained = store.segment(&merged).unwrap().dictionary_bytes().unwrap();
        assert!(!trained.is_empty() && trained != old, "a dictionary of its own");
        let s = store.segment(&merged).unwrap();
        let rows: usize = (0..s.block_count()).map(|b| s.read_block(b).unwrap().len()).sum();
        assert_eq!(rows, 8 * 600);
    }

    /// A branch node whose second child hash is `v` (and, from version 40 on, with a third
    /// child), as stored trie rows are.
    fn version(v: u32) -> Vec<u8> {
        let third = v >= 40;
        let hash_mask: u16 = if third { 0b111 } else { 0b11 };
        let mut out = Vec::new();
        out.extend_from_slice(&hash_mask.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&hash_mask.to_be_bytes());
        out.extend_from_slice(&[1u8; 32]);
        let mut h = [0u8; 32];
        h[..4].copy_from_slice(&v.to_be_bytes());
        out.extend_from_slice(&h);
        if third {
            out.extend_from_slice(&[3u8; 32]);
        }
        out
    }

    #[test]
    fn a_merge_chains_each_nodes_trie_rows_across_its_parts_and_every_row_reads_as_before() {
        use crate::storage::history::nodes::{
            FULL_ROW_EVERY, NodeRow, encode_node_row, node_row, resolve_node_row,
        };
        // Two nodes over eight one-epoch parts of 10 blocks: `busy` changes at every block,
        // `quiet` at one block an epoch. A row at block b holds the node before b.
        let kind = Kind::AccountTrieHistory;
        let entity = |n: u8| [n; 33];
        let changes = |n: u8| -> Vec<u64> {
            if n == 1 { (1..80).collect() } else { (0..8).map(|e| e * 10 + 3).collect() }
        };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Manifest::default()).unwrap();
        let mut parts = Vec::new();
        let mut part_whole = 0;
        for e in 0..8u32 {
            let entry = Entry { kind, first: e, last: e, rows: 0, bytes: 0, crc: 0 };
            let mut w = SegmentWriter::create(&store.path(&entry), Vec::new()).unwrap();
            for n in [1u8, 2] {
                let blocks = changes(n);
                let mut prev_run = FULL_ROW_EVERY - 1;
                for (k, b) in blocks.iter().enumerate() {
                    if *b / 10 != u64::from(e) {
                        continue;
                    }
                    let (old, new) = (version(k as u32), version(k as u32 + 1));
                    let row = encode_node_row(&old, Some(&new), prev_run).unwrap();
                    prev_run = match node_row(&row).unwrap() {
                        NodeRow::Delta { run, .. } => run,
                        _ => {
                            part_whole += 1;
                            0
                        }
                    };
                    let key: [u8; 45] = crate::storage::history::epochs::row_key(e, &entity(n), *b);
                    w.push(&super::super::node_first_key(&key), &row).unwrap();
                }
            }
            let written = w.finish().unwrap();
            parts.push(Entry {
                rows: written.rows,
                bytes: written.bytes,
                crc: written.crc,
                ..entry
            });
        }
        for chain_rows in [usize::MAX, 2] {
            let out = Entry { kind, first: 0, last: 7, rows: 0, bytes: 0, crc: 0 };
            let path = dir.path().join(format!("merged-{chain_rows}.seg"));
            let mut w = SegmentWriter::create(&path, Vec::new()).unwrap();
            merge_nodes(&store, &parts, &mut w, chain_rows).unwrap();
            w.finish().unwrap();
            let merged = super::super::Segment::open(&path, 9).unwrap();
            let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for b in 0..merged.block_count() {
                let block = merged.read_block(b).unwrap();
                rows.extend((0..block.len()).map(|i| {
                    let (k, v) = block.row(i);
                    (k.to_vec(), v.to_vec())
                }));
            }
            let whole = rows
                .iter()
                .filter(|(_, v)| matches!(node_row(v).unwrap(), NodeRow::Whole(_)))
                .count();
            assert_eq!(rows.len(), 79 + 8, "{out:?}");
            // Eight parts start each node whole (16). Merged, `busy` needs one every 32 rows and
            // `quiet` one, plus each node's newest part's first row; held two rows at a time,
            // every part's start stays whole.
            assert_eq!(part_whole, 16);
            let due = if chain_rows == 2 { 16 } else { 3 + 1 + 2 };
            assert_eq!(whole, due, "chain_rows {chain_rows}");
            for n in [1u8, 2] {
                let of_node: Vec<&(Vec<u8>, Vec<u8>)> =
                    rows.iter().filter(|(k, _)| k[..33] == entity(n)).collect();
                let current = version(changes(n).len() as u32);
                for (k, _) in of_node.iter().enumerate() {
                    let mut j = k;
                    while j < of_node.len()
                        && matches!(node_row(&of_node[j].1).unwrap(), NodeRow::Delta { .. })
                    {
                        j += 1;
                    }
                    assert!(j - k < usize::from(FULL_ROW_EVERY));
                    let mut next = of_node.get(j).map_or_else(|| current.clone(), |r| r.1.clone());
                    for r in of_node[k..j].iter().rev() {
                        next = resolve_node_row(&r.1, &next).unwrap();
                    }
                    assert_eq!(
                        next,
                        version(k as u32),
                        "node {n} row {k}, chain_rows {chain_rows}"
                    );
                }
            }
        }
    }
}
