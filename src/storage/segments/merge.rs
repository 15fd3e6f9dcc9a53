//! Merging segments: files of one kind and level are merged eight at a time into one of the
//! next level, on a thread of their own, and a later write transaction adopts the result.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::WriteTransaction;

use super::dictionary::{DICT_SAMPLES, dictionary_for};
use super::{Entry, Job, Kind, Manifest, Segment, SegmentWriter, Store, TxnFiles};
use crate::storage::history::keys::{BLOCK_BYTES, EPOCH_BYTES};
use crate::storage::tables;
use crate::storage::{StorageError, StorageResult};

/// A merge into a segment of this level or above (64 epochs and more: 8,192 blocks at the
/// default epoch length) trains a new dictionary; freezes and smaller merges take the newest
/// one of their kind.
pub(super) const RETRAIN_LEVEL: u32 = 2;

/// Segments of one level merged at a time.
pub(crate) const MERGE_FAN_IN: usize = 8;
/// A merged segment covers at most this many epochs (512k blocks at the default epoch length,
/// about reth's static-file span).
pub(crate) const MAX_SPAN: u32 = 4096;
/// Nor more bytes than this.
const MAX_MERGED_BYTES: u64 = 4 << 30;

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

/// Replaces `parts` with `merged` in `manifest`; the parts' files are removed after the next
/// durable commit.
fn adopt(manifest: &mut Manifest, pending: &TxnFiles, parts: &[Entry], merged: Entry) {
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
pub(super) fn merge_due(
    store: &Store,
    pending: &TxnFiles,
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
    pending: &TxnFiles,
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
    pending: &TxnFiles,
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
    const TAIL: usize = EPOCH_BYTES + BLOCK_BYTES;
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
    use super::super::dictionary::samples;
    use super::*;

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
        let settle = |store: &Store, pending: &TxnFiles, manifest: &mut Manifest| {
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
            let pending = TxnFiles::default();
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
        settle(&store, &TxnFiles::default(), &mut manifest);
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
        merge_due(&store, &TxnFiles::default(), &mut manifest, kind, false).unwrap();
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
        let pending = TxnFiles::default();
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
                    let key: [u8; 45] = crate::storage::history::keys::row_key(e, &entity(n), *b);
                    w.push(&crate::storage::history::keys::entity_first_key(&key), &row).unwrap();
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
