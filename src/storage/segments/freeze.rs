//! Freezing and merging: the history rows of closed epochs behind the unwind window move into
//! segment files, in the write transaction that moves the head past them; segments of one kind
//! are merged eight at a time into larger ones.

use std::collections::HashMap;
use std::sync::Mutex;

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Entry, Kind, Manifest, Segment, SegmentWriter, Store};
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
    kind: Kind,
    reuse: Option<&Segment>,
    samples: impl FnOnce() -> StorageResult<Vec<Vec<u8>>>,
) -> StorageResult<Vec<u8>> {
    if !trains(kind) {
        return Ok(Vec::new());
    }
    if let Some(file) = reuse {
        let dictionary = file.dictionary_bytes()?;
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
    if !trains(kind) {
        return Ok(Vec::new());
    }
    let newest = newest.map(|e| store.segment(e)).transpose()?;
    dictionary_for(kind, newest.as_deref(), samples)
}

/// A row as a segment keeps it: a receipts row plain (its own zstd frame undone: the segment's
/// blocks are compressed with a dictionary, which does better across rows), any other as is.
pub fn segment_value(kind: Kind, value: &[u8]) -> StorageResult<std::borrow::Cow<'_, [u8]>> {
    if kind == Kind::Receipts {
        return crate::storage::codec::plain_receipts_row(value)
            .map_err(|e| StorageError::Corrupt { table: "receipts", detail: e.to_string() });
    }
    if kind == Kind::AccessLists {
        return crate::storage::access_list::plain_access_list_row(value)
            .map_err(|e| StorageError::Corrupt { table: "access_lists", detail: e.to_string() });
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
        if kind.is_entity_first() {
            // One epoch's rows: entity-first order is the table's.
            w.push(&super::entity_first_key(k.value()), &segment_value(kind, v.value())?)?;
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
    // History waits for the trie-history stage: the epochs of blocks it has not reached keep
    // their rows in the B-tree, where it reads them and writes per-block ones in their place
    // (`storage::history::staged`). Block data does not wait.
    let block_due = due;
    let due = match crate::storage::TrieStage::read(&meta_table)? {
        Some(stage) if stage.pending() => due.min(epochs.of(stage.staged_to + 1)),
        _ => due,
    };
    if due <= manifest.frozen_to && block_due <= manifest.blocks_frozen_to {
        return Ok(());
    }
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

/// How much lower a merge's thread runs than the writer, in nice steps: a merge is work the
/// writer need not wait for, so it takes a core only when the writer leaves one.
const MERGE_NICE: i32 = 5;

/// A merge running on a thread of its own: its parts, its file's name, and the thread, which
/// returns the merged file's entry.
struct Job {
    parts: Vec<Entry>,
    name: String,
    handle: std::thread::JoinHandle<StorageResult<Entry>>,
}

/// Merges running off the writer's thread, one at a time ([`Store`] holds them). A
/// later write transaction adopts a finished one ([`merge_due`]): its file replaces its parts
/// in the manifest that transaction commits, if they are all still live.
#[derive(Default)]
pub(crate) struct Merges {
    jobs: Mutex<HashMap<Kind, Job>>,
    cancel: Arc<AtomicBool>,
}

impl std::fmt::Debug for Merges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merges").finish_non_exhaustive()
    }
}

impl Merges {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Kind, Job>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `kind`'s merge, taken out if it has finished (or, with `wait`, whenever there is one).
    fn take(&self, kind: Kind, wait: bool) -> Option<Job> {
        let mut jobs = self.lock();
        match jobs.get(&kind) {
            Some(job) if wait || job.handle.is_finished() => jobs.remove(&kind),
            _ => None,
        }
    }

    /// Whether any merge runs: one at a time, since every kind reaches a level at the same
    /// epoch, and ten merges at once held 100 MiB more at the import's peak.
    fn busy(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Stops every merge and removes what they wrote: the store is going away, and no write
    /// transaction adopted them.
    pub(crate) fn cancel_all(&self, store: &Store) {
        self.cancel.store(true, Ordering::Relaxed);
        for (_, job) in self.lock().drain() {
            let _ = job.handle.join();
            store.discard(&job.name);
        }
    }
}

/// Replaces `parts` with `merged` in `manifest`; the parts' files are removed after the next
/// durable commit.
fn adopt(manifest: &mut Manifest, pending: &Pending, parts: &[Entry], merged: Entry) {
    manifest.files.retain(|e| !parts.contains(e));
    manifest.files.push(merged);
    manifest.files.sort_by_key(|e| (e.kind, e.first));
    for p in parts {
        pending.replaced(p.file_name());
    }
}

/// While [`MERGE_FAN_IN`] consecutive segments of `kind` share a level, merges them into one
/// (a bounded step: at most that many files, at most [`MAX_SPAN`] epochs and 4 GiB), the
/// oldest such run first.
///
/// A merge runs on a thread of its own, one at a time, so the writer does not wait
/// for it (a 64-epoch merge of the 10,000-block chain took the writer 10 s): a later call
/// adopts its file once it has finished, then starts the next one due. With `wait` it waits
/// for a running merge instead, and runs the ones due on this thread, so that everything due
/// is merged when it returns (the end of an import: [`settle`]). A merge that fails leaves its
/// parts as they are, named in a warning.
fn merge_due(
    store: &Store,
    pending: &Pending,
    manifest: &mut Manifest,
    kind: Kind,
    wait: bool,
) -> StorageResult<()> {
    loop {
        if let Some(job) = store.merges.take(kind, wait) {
            match job.handle.join() {
                Ok(Ok(merged)) if job.parts.iter().all(|p| manifest.files.contains(p)) => {
                    pending.created(job.name);
                    adopt(manifest, pending, &job.parts, merged);
                    continue;
                }
                // Its parts are not all live: a dropped transaction made one of them.
                Ok(Ok(_)) => store.discard(&job.name),
                Ok(Err(e)) => {
                    tracing::warn!(target: "storage", kind = kind.name(), file = %job.name, "a segment merge failed; its parts stay as they are: {e}");
                    store.discard(&job.name);
                }
                Err(_) => {
                    tracing::warn!(target: "storage", kind = kind.name(), file = %job.name, "a segment merge's thread panicked; its parts stay as they are");
                    store.discard(&job.name);
                }
            }
        }
        // Waiting, another kind's running merge is joined at that kind's turn.
        if !wait && store.merges.busy() {
            return Ok(());
        }
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
        // The oldest run of that many files of one level, within the bounds: a merge adopted
        // late (after newer epochs were frozen) has newer files after it, so the run is not
        // always the newest files.
        let Some((tail, (first, last), bytes)) = of_kind.windows(MERGE_FAN_IN).find_map(|run| {
            let lv = level(&manifest.files[run[0]]);
            let (first, last) =
                (manifest.files[run[0]].first, manifest.files[run[MERGE_FAN_IN - 1]].last);
            let bytes: u64 = run.iter().map(|&i| manifest.files[i].bytes).sum();
            (run.iter().all(|&i| level(&manifest.files[i]) == lv)
                && last - first < MAX_SPAN
                && bytes <= MAX_MERGED_BYTES)
                .then_some((run, (first, last), bytes))
        }) else {
            return Ok(());
        };
        // A merge needs the room of its parts on disk until they are removed.
        if crate::storage::free_bytes(store.dir())
            .is_some_and(|free| free < bytes.saturating_mul(2))
        {
            tracing::warn!(target: "storage", kind = kind.name(), first, last, bytes, "not enough free disk space to merge segments; they stay as they are");
            return Ok(());
        }
        let parts: Vec<Entry> = tail.iter().map(|&i| manifest.files[i].clone()).collect();
        if wait {
            match merge(store, pending, kind, &parts) {
                Ok(merged) => adopt(manifest, pending, &parts, merged),
                Err(e) => {
                    tracing::warn!(target: "storage", kind = kind.name(), first, last, "a segment merge failed; its parts stay as they are: {e}");
                    return Ok(());
                }
            }
            continue;
        }
        let entry = merged_entry(kind, &parts)?;
        let segs = parts.iter().map(|p| store.segment(p)).collect::<StorageResult<Vec<_>>>()?;
        let (name, path) = (entry.file_name(), store.path(&entry));
        let cancel = store.merges.cancel.clone();
        let handle = std::thread::Builder::new()
            .name("loupe-merge".into())
            .spawn(move || {
                crate::storage::lower_thread_priority(MERGE_NICE);
                merge_files(entry, &segs, &path, &cancel)
            })
            .map_err(|e| StorageError::io(store.dir(), e))?;
        store.merges.lock().insert(kind, Job { parts, name, handle });
        return Ok(());
    }
}

/// Adopts every finished merge, waits for the running ones and runs every merge due, in the
/// write transaction `txn` (the end of an import, so that it leaves its segments merged).
pub(crate) fn settle(
    txn: &WriteTransaction,
    store: &Store,
    pending: &Pending,
) -> StorageResult<()> {
    let mut meta_table = txn.open_table(tables::META)?;
    let mut manifest = Manifest::read(&meta_table)?;
    let before = manifest.clone();
    for kind in Kind::ALL {
        merge_due(store, pending, &mut manifest, kind, true)?;
    }
    if manifest != before {
        manifest.write(&mut meta_table)?;
    }
    Ok(())
}

/// The entry of the file merging `parts` (consecutive, in epoch order), its rows yet unknown.
fn merged_entry(kind: Kind, parts: &[Entry]) -> StorageResult<Entry> {
    match (parts.first(), parts.last()) {
        (Some(a), Some(b)) => {
            Ok(Entry { kind, first: a.first, last: b.last, rows: 0, bytes: 0, crc: 0 })
        }
        _ => Err(StorageError::Config("a merge of no segments".into())),
    }
}

/// Writes one segment with the rows of `parts` (consecutive, in epoch order, so their rows,
/// keyed epoch or block first, are already in order one after another), on this thread.
pub(crate) fn merge(
    store: &Store,
    pending: &Pending,
    kind: Kind,
    parts: &[Entry],
) -> StorageResult<Entry> {
    let entry = merged_entry(kind, parts)?;
    let segs = parts.iter().map(|p| store.segment(p)).collect::<StorageResult<Vec<_>>>()?;
    pending.created(entry.file_name());
    let path = store.path(&entry);
    merge_files(entry, &segs, &path, &AtomicBool::new(false))
}

/// Writes `entry`'s file at `path` from its parts, opened as `segs`, and returns the entry with
/// its rows, length and checksum. `cancel` stops it between rows with an error (what it wrote
/// is then removed).
fn merge_files(
    mut entry: Entry,
    segs: &[Arc<Segment>],
    path: &Path,
    cancel: &AtomicBool,
) -> StorageResult<Entry> {
    let kind = entry.kind;
    // A merge into level [`RETRAIN_LEVEL`] or above trains its dictionary again, on rows from
    // across its parts; a smaller one keeps its newest part's.
    let reuse = segs.last().filter(|_| level(&entry) < RETRAIN_LEVEL);
    let dictionary = dictionary_for(kind, reuse.map(|s| &**s), || {
        let per_part = DICT_SAMPLES / segs.len().max(1);
        let mut samples = Vec::new();
        for s in segs {
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
    let go = || -> StorageResult<()> {
        match cancel.load(Ordering::Relaxed) {
            true => Err(StorageError::Config("segment merge cancelled".into())),
            false => Ok(()),
        }
    };
    let written = SegmentWriter::create(path, dictionary).and_then(|mut w| {
        if kind.is_node_first() {
            merge_nodes(segs, &mut w, CHAIN_ROWS, &go)?;
        } else if kind.is_address_first() || kind.is_entity_first() {
            merge_sorted(segs, &go, |key, value, _| w.push(key, value))?;
        } else {
            for s in segs {
                for b in 0..s.block_count() {
                    go()?;
                    let block = s.read_block(b)?;
                    for i in 0..block.len() {
                        let (k, v) = block.row(i);
                        w.push(k, v)?;
                    }
                }
            }
        }
        w.finish()
    });
    let written = match written {
        Ok(written) => written,
        Err(e) => {
            let _ = std::fs::remove_file(path.with_extension("tmp"));
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    (entry.rows, entry.bytes, entry.crc) = (written.rows, written.bytes, written.crc);
    tracing::debug!(target: "storage", kind = kind.name(), first = entry.first, last = entry.last, rows = entry.rows, "merged segments");
    Ok(entry)
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
    segs: &[Arc<Segment>],
    w: &mut SegmentWriter,
    chain_rows: usize,
    go: &impl Fn() -> StorageResult<()>,
) -> StorageResult<()> {
    /// Key bytes after a node-first key's node: epoch and block.
    const TAIL: usize = 12;
    let node_of = |k: &[u8]| k.len().saturating_sub(TAIL);
    // One node's rows: keys, values and the part each came from.
    let mut node: Vec<(Vec<u8>, Vec<u8>, usize)> = Vec::new();
    let mut current: Vec<u8> = Vec::new();
    merge_sorted(segs, go, |key, value, part| {
        let node_key = &key[..node_of(key)];
        if node_key != current.as_slice() {
            write_chained(&mut node, w, true)?;
            current.clear();
            current.extend_from_slice(node_key);
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

/// Calls `f` with every row of `segs` in key order, with the index of the part it came from,
/// for kinds whose files each hold keys of any range: a merge of sorted runs, reading one
/// decoded block of each part at a time (memory is the parts' count times a block, whatever
/// their size). Keys never repeat across parts: each row names its block, and the parts'
/// epochs are apart. Stops with `go`'s error.
fn merge_sorted(
    segs: &[Arc<Segment>],
    go: &impl Fn() -> StorageResult<()>,
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
    let mut cursors = Vec::with_capacity(segs.len());
    let mut heap = BinaryHeap::new();
    for (p, segment) in segs.iter().enumerate() {
        let segment = segment.clone();
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
        go()?;
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
    fn a_merge_runs_off_the_writers_thread_and_is_adopted_later_only_if_its_parts_are_live() {
        let kind = Kind::Transactions;
        // Calls merge_due until no merge of the kind runs.
        let settle = |store: &Store, pending: &Pending, manifest: &mut Manifest| {
            for _ in 0..1000 {
                merge_due(store, pending, manifest, kind, false).unwrap();
                if !store.merges.busy() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            panic!("the merge did not finish");
        };
        // Eight one-epoch files in a new store, their merge started.
        let started = || {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), &Manifest::default()).unwrap();
            let pending = Pending::default();
            let small = parts(&store, 1, &[]);
            let mut manifest = Manifest { files: small.clone(), ..Default::default() };
            merge_due(&store, &pending, &mut manifest, kind, false).unwrap();
            (dir, store, pending, small, manifest)
        };
        let (_dir, store, pending, small, mut manifest) = started();
        assert_eq!(manifest.files, small, "the call that starts a merge does not wait for it");
        assert!(store.merges.busy());
        settle(&store, &pending, &mut manifest);
        assert_eq!(manifest.files.len(), 1, "a later call adopted it");
        let merged = manifest.files[0].clone();
        assert_eq!((merged.first, merged.last, merged.rows), (0, 7, 8 * 600));
        assert!(store.path(&merged).exists());
        let (created, replaced) = pending.files.lock().unwrap().clone();
        assert_eq!(created, vec![merged.file_name()]);
        assert_eq!(replaced.len(), 8);

        // Eight files of one level with newer, smaller ones after them (a merge adopted after
        // more epochs were frozen): the eight still merge.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Manifest::default()).unwrap();
        let mut files = parts(&store, 8, &[]);
        let newer = Entry { kind, first: 64, last: 64, rows: 0, bytes: 0, crc: 0 };
        let mut w = SegmentWriter::create(&store.path(&newer), Vec::new()).unwrap();
        w.push(&u64::MAX.to_be_bytes(), b"row").unwrap();
        w.finish().unwrap();
        files.push(newer);
        let mut manifest = Manifest { files, ..Default::default() };
        settle(&store, &Pending::default(), &mut manifest);
        let spans: Vec<(u32, u32)> = manifest.files.iter().map(|e| (e.first, e.last)).collect();
        assert_eq!(spans, vec![(0, 63), (64, 64)]);

        // While another kind's merge runs, none starts; waiting (the end of an import), every
        // merge due runs.
        let (_dir, store, pending, _, mut manifest) = started();
        let other: Vec<Entry> = manifest
            .files
            .iter()
            .map(|e| {
                let moved = Entry { kind: Kind::Receipts, ..e.clone() };
                std::fs::copy(store.path(e), store.path(&moved)).unwrap();
                moved
            })
            .collect();
        manifest.files.extend(other);
        merge_due(&store, &pending, &mut manifest, Kind::Receipts, false).unwrap();
        assert_eq!(manifest.files.len(), 16, "one merge at a time");
        for k in [Kind::Receipts, kind] {
            merge_due(&store, &pending, &mut manifest, k, true).unwrap();
        }
        let spans: Vec<(Kind, u32, u32)> =
            manifest.files.iter().map(|e| (e.kind, e.first, e.last)).collect();
        assert_eq!(spans, vec![(kind, 0, 7), (Kind::Receipts, 0, 7)]);

        // A part that is no longer live when it finishes (a dropped transaction made it): the
        // merged file is removed and the manifest keeps the rest.
        let (_dir, store, pending, small, mut manifest) = started();
        manifest.files.pop();
        settle(&store, &pending, &mut manifest);
        assert_eq!(manifest.files, small[..7]);
        let name = merged_entry(kind, &small).unwrap();
        assert!(!store.path(&name).exists());

        // A store dropped while a merge runs removes what it wrote.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Manifest::default()).unwrap();
        let small = parts(&store, 1, &[]);
        let mut manifest = Manifest { files: small.clone(), ..Default::default() };
        merge_due(&store, &Pending::default(), &mut manifest, kind, false).unwrap();
        let path = store.path(&merged_entry(kind, &small).unwrap());
        drop(store);
        assert!(!path.exists() && !path.with_extension("tmp").exists());
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
                    w.push(&super::super::entity_first_key(&key), &row).unwrap();
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
            let segs: Vec<_> = parts.iter().map(|p| store.segment(p).unwrap()).collect();
            merge_nodes(&segs, &mut w, chain_rows, &|| Ok(())).unwrap();
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
