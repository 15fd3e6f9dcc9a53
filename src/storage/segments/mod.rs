//! Frozen history: closed epochs behind the unwind window, moved out of the B-tree into
//! immutable segment files (`file`), one per kind and run of epochs, merged into larger ones
//! in bounded steps (`merge`); `freeze` moves the rows out.
//!
//! The live files are named by a manifest kept in `meta` and committed in the same write
//! transaction that removes their rows from the B-tree, so a reader's snapshot sees each row in
//! exactly one place: in the B-tree if its epoch is at or above the snapshot's `frozen_to`, in
//! the segment covering its epoch otherwise. On open, any file the manifest does not name (a
//! segment whose commit never happened, one a merge replaced) is removed. Files a merge
//! replaces are removed after the next durable commit, never before: a crash rolls the
//! manifest back to the last durable commit, which may still name them.

mod dictionary;
pub mod file;
pub mod freeze;
pub mod merge;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use file::{Block, BlockCache, BlockWeight};
pub use file::{Segment, SegmentWriter, Written};

use super::history::keys::{
    BLOCK_BYTES, EPOCH_BYTES, Epochs, entity_first_key, history_key_into, key_epoch,
};
use super::{StorageError, StorageResult};

/// The folder of a datadir's segment files.
pub const SEGMENTS_DIR: &str = "segments";
/// Memory for decoded segment blocks, shared by every reader.
const BLOCK_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// What a segment holds: the rows of one history table, one table of block data (keyed by
/// block number, big-endian, first), or the trace-address index (keyed by address first).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `hashed_account_history_e`.
    AccountHistory,
    /// `hashed_storage_history_e`.
    StorageHistory,
    /// `account_trie_history_e`.
    AccountTrieHistory,
    /// `storage_trie_history_e`.
    StorageTrieHistory,
    /// `headers`.
    Headers,
    /// `canonical`.
    Canonical,
    /// `bodies`.
    Bodies,
    /// `transactions`.
    Transactions,
    /// `receipts`.
    Receipts,
    /// `access_lists`.
    AccessLists,
    /// `trace_addresses` (`address ++ block`), frozen with the block data of the same epochs
    /// ([`Manifest::trace_frozen_to`]). Unlike the other kinds, a file's rows are in address
    /// order, so a lookup reads every file whose epochs it covers, and a merge interleaves its
    /// parts.
    TraceAddresses,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Self; 11] = [
        Self::AccountHistory,
        Self::StorageHistory,
        Self::AccountTrieHistory,
        Self::StorageTrieHistory,
        Self::Headers,
        Self::Canonical,
        Self::Bodies,
        Self::Transactions,
        Self::Receipts,
        Self::AccessLists,
        Self::TraceAddresses,
    ];

    /// Whether its files are keyed by address first rather than by epoch or block: the rows
    /// of one file are not one contiguous range of the table's keys.
    pub const fn is_address_first(self) -> bool {
        matches!(self, Self::TraceAddresses)
    }

    /// Whether its files keep the history rows of one entity (a trie node, an account, a slot)
    /// together: keyed `entity ++ epoch ++ block` ([`entity_first_key`]) rather than the table's
    /// `epoch ++ entity ++ block`, so that an entity's rows across a file's epochs are
    /// neighbours, and so are those of neighbouring entities: a proof at an old block reads
    /// its sibling leaves, and a node's path, from a few blocks of a file rather than one per
    /// epoch they last changed in. Such files are frozen an epoch each (one epoch's rows in
    /// entity-first order are the table's) and merged by key. Reads here see the table's key
    /// order within an epoch.
    pub const fn is_entity_first(self) -> bool {
        matches!(
            self,
            Self::AccountTrieHistory
                | Self::StorageTrieHistory
                | Self::AccountHistory
                | Self::StorageHistory
        )
    }

    /// Whether its files' rows of one trie node are chained as one run of deltas across the
    /// file's epochs (`storage::history::nodes`): entity-first trie history, which a merge
    /// chains (`merge::merge`).
    pub const fn is_node_first(self) -> bool {
        matches!(self, Self::AccountTrieHistory | Self::StorageTrieHistory)
    }

    /// Whether it holds block data (frozen behind [`Manifest::blocks_frozen_to`]).
    pub const fn is_block_data(self) -> bool {
        matches!(
            self,
            Self::Headers
                | Self::Canonical
                | Self::Bodies
                | Self::Transactions
                | Self::Receipts
                | Self::AccessLists
        )
    }

    /// The name in file names and statistics.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AccountHistory => "account-history",
            Self::StorageHistory => "storage-history",
            Self::AccountTrieHistory => "account-trie-history",
            Self::StorageTrieHistory => "storage-trie-history",
            Self::Headers => "headers",
            Self::Canonical => "canonical",
            Self::Bodies => "bodies",
            Self::Transactions => "transactions",
            Self::Receipts => "receipts",
            Self::AccessLists => "access-lists",
            Self::TraceAddresses => "trace-addresses",
        }
    }
}

/// Which trie history a datadir keeps, chosen at init (`--proof-history`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProofHistory {
    /// Trie nodes at every block, frozen with the rest of the history: `eth_getProof` at any
    /// block.
    #[default]
    All,
    /// Trie nodes only for the unwind window: dropped, not frozen, as their epochs leave it.
    /// `eth_getProof` below the window answers an error naming this choice.
    Window,
}

impl ProofHistory {
    /// The name `--proof-history` takes and the datadir records.
    pub const fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Window => "window",
        }
    }

    /// The choice called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "all" => Some(Self::All),
            "window" => Some(Self::Window),
            _ => None,
        }
    }

    /// The choice recorded in `meta` (absent: [`ProofHistory::All`]).
    pub fn read(
        meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
    ) -> StorageResult<Self> {
        match meta.get(super::tables::meta::PROOF_HISTORY)? {
            None => Ok(Self::All),
            Some(v) => {
                std::str::from_utf8(v.value()).ok().and_then(Self::from_name).ok_or_else(|| {
                    StorageError::Corrupt { table: "meta", detail: "unknown proof history".into() }
                })
            }
        }
    }
}

impl std::fmt::Display for ProofHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One live segment file, as the manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// What it holds.
    pub kind: Kind,
    /// The first epoch it covers.
    pub first: u32,
    /// The last epoch it covers.
    pub last: u32,
    /// Rows.
    pub rows: u64,
    /// File length.
    pub bytes: u64,
    /// crc32 of the whole file.
    pub crc: u32,
}

impl Entry {
    /// The file's name.
    pub fn file_name(&self) -> String {
        format!("{}-{:08}-{:08}.seg", self.kind.name(), self.first, self.last)
    }
}

/// The live segment files and the first epochs not frozen (`meta.segments`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// History rows of epochs below this one are in segments, the others in the B-tree.
    pub frozen_to: u32,
    /// Block data of the blocks of epochs below this one are in segments (`frozen_to` so far;
    /// kept apart so that the two may part).
    #[serde(default)]
    pub blocks_frozen_to: u32,
    /// The trace-address index rows of the blocks of epochs below this one are in segments
    /// (absent in a manifest written before they were frozen: none are).
    #[serde(default)]
    pub trace_frozen_to: u32,
    /// The files, by kind, in epoch order.
    pub files: Vec<Entry>,
}
impl Manifest {
    /// Whether it names a file whose key order changed after storage format `format` (11: trie
    /// and state history, 12: state history), which this version cannot read.
    pub fn has_reordered_files_since(&self, format: u64) -> bool {
        self.files.iter().any(|e| match e.kind {
            Kind::AccountHistory | Kind::StorageHistory => format < 13,
            Kind::AccountTrieHistory | Kind::StorageTrieHistory => format < 12,
            _ => false,
        })
    }

    /// The manifest stored in `meta` (empty if none).
    pub fn read(
        meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
    ) -> StorageResult<Self> {
        match meta.get(super::tables::meta::SEGMENTS)? {
            Some(v) => Self::decode(v.value()),
            None => Ok(Self::default()),
        }
    }

    /// The manifest whose stored form is `stored`.
    fn decode(stored: &[u8]) -> StorageResult<Self> {
        serde_json::from_slice(stored).map_err(|e| StorageError::Corrupt {
            table: "meta",
            detail: format!("segment manifest: {e}"),
        })
    }

    /// Stores it in `meta`.
    pub fn write(
        &self,
        meta: &mut redb::Table<'_, &'static str, &'static [u8]>,
    ) -> StorageResult<()> {
        let json = serde_json::to_vec(self).map_err(|e| StorageError::Corrupt {
            table: "meta",
            detail: format!("segment manifest: {e}"),
        })?;
        meta.insert(super::tables::meta::SEGMENTS, json.as_slice())?;
        Ok(())
    }

    /// The files of `kind`, in epoch order.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Entry> {
        self.files.iter().filter(move |e| e.kind == kind)
    }
}

/// A datadir's segment folder: its open files (shared by every snapshot), their decoded-block
/// cache, and the files waiting to be removed after the next durable commit.
pub struct Store {
    dir: PathBuf,
    open: Mutex<HashMap<String, Arc<Segment>>>,
    cache: BlockCache,
    next_id: AtomicU64,
    /// Replaced by a committed merge; removed once a durable commit makes that final.
    obsolete: Mutex<Vec<String>>,
    /// Merges running off the writer's thread (`merge::merge_due`).
    pub(crate) merges: Merges,
    /// The last manifest made into a view ([`Store::view_stored`]).
    last_view: Mutex<Option<LastView>>,
}

/// A datadir's files by kind, each with the first and last epoch it covers, in epoch order.
type ByKind = HashMap<Kind, Vec<(u32, u32, Arc<Segment>)>>;

/// The last manifest [`Store::view_stored`] decoded, as stored, and what it made of it. Every
/// read snapshot and every write transaction takes a view (a writer one per frozen block row
/// it reads), and decoding the manifest and naming its files took a third of an empty block's
/// import; the manifest changes only when a freeze or a merge commits.
struct LastView {
    stored: Vec<u8>,
    marks: [u32; 3],
    by_kind: Arc<ByKind>,
}

impl Drop for Store {
    fn drop(&mut self) {
        let merges = std::mem::take(&mut self.merges);
        merges.cancel_all(self);
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens `datadir`'s segment folder for the datadir's committed `manifest`: removes every
    /// file the manifest does not name, and checks that each one it names is there, of its
    /// length.
    pub fn open(datadir: &Path, manifest: &Manifest) -> StorageResult<Self> {
        let dir = datadir.join(SEGMENTS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::io(&dir, e))?;
        let live: std::collections::HashSet<String> =
            manifest.files.iter().map(Entry::file_name).collect();
        for item in std::fs::read_dir(&dir).map_err(|e| StorageError::io(&dir, e))? {
            let item = item.map_err(|e| StorageError::io(&dir, e))?;
            let name = item.file_name().to_string_lossy().to_string();
            if !live.contains(&name) {
                tracing::info!(target: "storage", file = %name, "removing a segment file the manifest does not name");
                std::fs::remove_file(item.path()).map_err(|e| StorageError::io(&item.path(), e))?;
            }
        }
        let store = Self {
            dir,
            open: Mutex::new(HashMap::new()),
            cache: BlockCache::with_weighter(4096, BLOCK_CACHE_BYTES, BlockWeight),
            next_id: AtomicU64::new(1),
            obsolete: Mutex::new(Vec::new()),
            merges: Merges::default(),
            last_view: Mutex::new(None),
        };
        for entry in &manifest.files {
            let segment = store.segment(entry)?;
            if segment.bytes() != entry.bytes || segment.rows() != entry.rows {
                return Err(StorageError::SegmentCorrupt {
                    path: segment.path().display().to_string(),
                    detail: format!(
                        "{} bytes and {} rows; the manifest says {} and {}",
                        segment.bytes(),
                        segment.rows(),
                        entry.bytes,
                        entry.rows
                    ),
                });
            }
        }
        Ok(store)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `entry`'s file.
    pub fn path(&self, entry: &Entry) -> PathBuf {
        self.dir.join(entry.file_name())
    }

    /// `entry`'s file, opened once.
    pub fn segment(&self, entry: &Entry) -> StorageResult<Arc<Segment>> {
        let name = entry.file_name();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = open.get(&name) {
            return Ok(s.clone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let s = Arc::new(Segment::open(&self.dir.join(&name), id)?);
        open.insert(name, s.clone());
        Ok(s)
    }

    /// The segments a snapshot with `manifest` reads (under `proof_history`).
    pub fn view_with(
        self: &Arc<Self>,
        manifest: &Manifest,
        proof_history: ProofHistory,
    ) -> StorageResult<Segments> {
        let mut s = self.view(manifest)?;
        s.proof_history = proof_history;
        Ok(s)
    }

    /// The segments a snapshot with `manifest` reads.
    pub fn view(self: &Arc<Self>, manifest: &Manifest) -> StorageResult<Segments> {
        let mut by_kind: ByKind = HashMap::new();
        for e in &manifest.files {
            by_kind.entry(e.kind).or_default().push((e.first, e.last, self.segment(e)?));
        }
        for v in by_kind.values_mut() {
            v.sort_by_key(|s| s.0);
        }
        Ok(Segments {
            store: self.clone(),
            frozen_to: manifest.frozen_to,
            blocks_frozen_to: manifest.blocks_frozen_to,
            trace_frozen_to: manifest.trace_frozen_to,
            proof_history: ProofHistory::All,
            by_kind: Arc::new(by_kind),
        })
    }

    /// The segments a transaction whose `meta` table holds its manifest reads (under
    /// `proof_history`): the same as [`Manifest::read`] then [`Store::view_with`], decoded only
    /// when the stored manifest differs from the last one decoded.
    pub fn view_stored(
        self: &Arc<Self>,
        meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
        proof_history: ProofHistory,
    ) -> StorageResult<Segments> {
        let Some(stored) = meta.get(super::tables::meta::SEGMENTS)? else {
            return self.view_with(&Manifest::default(), proof_history);
        };
        let stored = stored.value();
        if let Some(last) = self.last_view().as_ref().filter(|l| l.stored == stored) {
            let [frozen_to, blocks_frozen_to, trace_frozen_to] = last.marks;
            return Ok(Segments {
                store: self.clone(),
                frozen_to,
                blocks_frozen_to,
                trace_frozen_to,
                proof_history,
                by_kind: last.by_kind.clone(),
            });
        }
        let view = self.view_with(&Manifest::decode(stored)?, proof_history)?;
        *self.last_view() = Some(LastView {
            stored: stored.to_vec(),
            marks: [view.frozen_to, view.blocks_frozen_to, view.trace_frozen_to],
            by_kind: view.by_kind.clone(),
        });
        Ok(view)
    }

    /// The first epoch whose history, and the first whose block data, is not frozen, as the
    /// manifest `meta` holds says: the last view's when it is of that manifest, without
    /// decoding it again.
    pub(crate) fn frozen_marks(
        &self,
        meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
    ) -> StorageResult<(u32, u32)> {
        let Some(stored) = meta.get(super::tables::meta::SEGMENTS)? else { return Ok((0, 0)) };
        let stored = stored.value();
        if let Some(last) = self.last_view().as_ref().filter(|l| l.stored == stored) {
            return Ok((last.marks[0], last.marks[1]));
        }
        let manifest = Manifest::decode(stored)?;
        Ok((manifest.frozen_to, manifest.blocks_frozen_to))
    }

    /// The last view [`Store::view_stored`] made; emptied whenever a file leaves the folder, so
    /// that no view outlives the files it names.
    fn last_view(&self) -> std::sync::MutexGuard<'_, Option<LastView>> {
        self.last_view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes files a committed merge replaced, to remove after the next durable commit.
    pub(crate) fn retire(&self, names: Vec<String>) {
        self.obsolete.lock().unwrap_or_else(|e| e.into_inner()).extend(names);
    }

    /// After a durable commit: removes the replaced files (readers that still hold them keep
    /// their open handles).
    pub(crate) fn durable(&self) {
        let names = std::mem::take(&mut *self.obsolete.lock().unwrap_or_else(|e| e.into_inner()));
        if !names.is_empty() {
            *self.last_view() = None;
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        for name in names {
            open.remove(&name);
            if let Err(e) = std::fs::remove_file(self.dir.join(&name)) {
                tracing::warn!(target: "storage", file = %name, "cannot remove a replaced segment file: {e}");
            }
        }
    }

    /// Removes a file no commit made live (a dropped write transaction's).
    pub(crate) fn discard(&self, name: &str) {
        *self.last_view() = None;
        self.open.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        let _ = std::fs::remove_file(self.dir.join(name));
    }

    fn block(&self, s: &Segment, i: usize) -> StorageResult<Arc<Block>> {
        let key = (s.id, i as u32);
        if let Some(b) = self.cache.get(&key) {
            return Ok(b);
        }
        let b = Arc::new(s.read_block(i)?);
        self.cache.insert(key, b.clone());
        Ok(b)
    }
}

/// The segments one snapshot reads.
#[derive(Debug, Clone)]
pub struct Segments {
    store: Arc<Store>,
    /// History of epochs below this one is read here.
    pub frozen_to: u32,
    /// Block data of epochs below this one is read here.
    pub blocks_frozen_to: u32,
    /// The trace-address index of the blocks of epochs below this one is read here.
    pub trace_frozen_to: u32,
    /// Whether trie history below `frozen_to` was dropped rather than frozen.
    pub proof_history: ProofHistory,
    by_kind: Arc<ByKind>,
}

impl Segments {
    /// No segments (a snapshot of a datadir that froze nothing).
    pub fn none(store: Arc<Store>) -> Self {
        Self {
            store,
            frozen_to: 0,
            blocks_frozen_to: 0,
            trace_frozen_to: 0,
            proof_history: ProofHistory::All,
            by_kind: Arc::new(HashMap::new()),
        }
    }

    /// Whether history rows of `epoch` are read here.
    pub fn holds(&self, epoch: u32) -> bool {
        epoch < self.frozen_to
    }

    /// The first block whose trie nodes are kept, when trie history below the window was
    /// dropped (`None`: every block's is kept).
    pub fn proofs_from(&self, epochs: Epochs) -> Option<u64> {
        (self.proof_history == ProofHistory::Window && self.frozen_to > 0)
            .then(|| u64::from(self.frozen_to) * epochs.len)
    }

    /// Whether block data of `epoch`'s blocks is read here.
    pub fn holds_blocks(&self, epoch: u32) -> bool {
        epoch < self.blocks_frozen_to
    }

    /// The segment of `kind` covering `epoch`.
    fn covering(&self, kind: Kind, epoch: u32) -> Option<&Arc<Segment>> {
        self.covering_entry(kind, epoch).map(|(_, _, s)| s)
    }

    /// The entry (first epoch, last epoch, file) of `kind` covering `epoch`.
    fn covering_entry(&self, kind: Kind, epoch: u32) -> Option<&(u32, u32, Arc<Segment>)> {
        let list = self.by_kind.get(&kind)?;
        let i = list.partition_point(|s| s.0 <= epoch).checked_sub(1)?;
        list.get(i).filter(|(_, last, _)| epoch <= *last)
    }

    /// Calls `f` with each row of `kind` whose key is in `lo..=hi` (both in one epoch), in key
    /// order, until it returns `false`. For an entity-first kind the range is best kept to one
    /// entity (as every read does): its rows of other entities are read past.
    pub fn scan(
        &self,
        kind: Kind,
        epoch: u32,
        lo: &[u8],
        hi: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> StorageResult<bool>,
    ) -> StorageResult<()> {
        let Some(s) = self.covering(kind, epoch) else { return Ok(()) };
        if !kind.is_entity_first() {
            return self.scan_in(s, lo, hi, &mut f).map(|_| ());
        }
        let mut key = Vec::new();
        self.scan_in(s, &entity_first_key(lo), &entity_first_key(hi), &mut |k, v| {
            history_key_into(k, &mut key);
            if key_epoch(&key) != Some(epoch) {
                return Ok(true);
            }
            f(&key, v)
        })
        .map(|_| ())
    }

    /// Calls `f` with the rows of one entity (a trie node, an account, a slot) of an
    /// entity-first `kind` from history key `from` on (`epoch ++ entity ++ block`) to the end of
    /// the file covering its epoch, across the file's later epochs, in block order, until it
    /// returns `false`. Other kinds: to the end of the epoch.
    pub fn scan_node(
        &self,
        kind: Kind,
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> StorageResult<bool>,
    ) -> StorageResult<()> {
        let Some(epoch) = key_epoch(from) else { return Ok(()) };
        let Some(s) = self.covering(kind, epoch) else { return Ok(()) };
        let node_end = from.len().saturating_sub(BLOCK_BYTES);
        if !kind.is_entity_first() {
            let mut hi = from.to_vec();
            hi[node_end..].fill(0xff);
            return self.scan_in(s, from, &hi, &mut f).map(|_| ());
        }
        let lo = entity_first_key(from);
        let mut hi = lo.clone();
        hi[node_end.saturating_sub(EPOCH_BYTES)..].fill(0xff);
        let mut key = Vec::new();
        self.scan_in(s, &lo, &hi, &mut |k, v| {
            history_key_into(k, &mut key);
            f(&key, v)
        })
        .map(|_| ())
    }

    /// The first and last epochs of the entity-first file of `kind` covering `epoch`, if one
    /// does ([`Kind::is_entity_first`]).
    pub fn entity_first_span(&self, kind: Kind, epoch: u32) -> Option<(u32, u32)> {
        if !kind.is_entity_first() {
            return None;
        }
        self.covering_entry(kind, epoch).map(|(first, last, _)| (*first, *last))
    }

    /// The first epoch of the file of `kind` covering `epoch`, if one does.
    pub fn file_of(&self, kind: Kind, epoch: u32) -> Option<u32> {
        self.covering_entry(kind, epoch).map(|(first, _, _)| *first)
    }

    /// Calls `f` with each row of the file `s` whose key is in `lo..=hi`, in key order, until
    /// it returns `false`; whether it never did.
    fn scan_in(
        &self,
        s: &Segment,
        lo: &[u8],
        hi: &[u8],
        f: &mut impl FnMut(&[u8], &[u8]) -> StorageResult<bool>,
    ) -> StorageResult<bool> {
        if s.block_count() == 0 {
            return Ok(true);
        }
        let mut b = s.block_for(lo);
        let mut block = self.store.block(s, b)?;
        let mut i = block.seek(lo);
        loop {
            if i >= block.len() {
                b += 1;
                if b >= s.block_count() {
                    return Ok(true);
                }
                block = self.store.block(s, b)?;
                i = 0;
                continue;
            }
            let (k, v) = block.row(i);
            if k > hi {
                return Ok(true);
            }
            if !f(k, v)? {
                return Ok(false);
            }
            i += 1;
        }
    }

    /// Calls `f` with each row of `kind` whose key is in `lo..=hi`, from every file that
    /// covers an epoch of `epochs`, file after file in epoch order (for the address-first
    /// kinds, whose every file may hold keys of any range).
    pub fn scan_files(
        &self,
        kind: Kind,
        epochs: std::ops::RangeInclusive<u32>,
        lo: &[u8],
        hi: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> StorageResult<()>,
    ) -> StorageResult<()> {
        for (first, last, s) in self.by_kind.get(&kind).into_iter().flatten() {
            if *last < *epochs.start() || *first > *epochs.end() {
                continue;
            }
            self.scan_in(s, lo, hi, &mut |k, v| f(k, v).map(|()| true))?;
        }
        Ok(())
    }

    /// The first row of `kind` in `lo..=hi` (both in `epoch`).
    pub fn first(
        &self,
        kind: Kind,
        epoch: u32,
        lo: &[u8],
        hi: &[u8],
    ) -> StorageResult<Option<(Vec<u8>, Vec<u8>)>> {
        let mut out = None;
        self.scan(kind, epoch, lo, hi, |k, v| {
            out = Some((k.to_vec(), v.to_vec()));
            Ok(false)
        })?;
        Ok(out)
    }

    /// Calls `f` with every row of `kind`, file after file in epoch order, each file's in its
    /// own order (an entity-first file's: entity, then block; keys given as the table has them).
    pub fn for_each(
        &self,
        kind: Kind,
        mut f: impl FnMut(&[u8], &[u8]) -> StorageResult<()>,
    ) -> StorageResult<()> {
        let mut key = Vec::new();
        for (_, _, s) in self.by_kind.get(&kind).into_iter().flatten() {
            for b in 0..s.block_count() {
                let block = self.store.block(s, b)?;
                for i in 0..block.len() {
                    let (k, v) = block.row(i);
                    f(self.table_key(kind, k, &mut key), v)?;
                }
            }
        }
        Ok(())
    }

    /// Calls `f` with every row of `kind`, the reverse of [`Segments::for_each`].
    pub fn for_each_rev(
        &self,
        kind: Kind,
        mut f: impl FnMut(&[u8], &[u8]) -> StorageResult<()>,
    ) -> StorageResult<()> {
        let mut key = Vec::new();
        for (_, _, s) in self.by_kind.get(&kind).into_iter().flatten().rev() {
            for b in (0..s.block_count()).rev() {
                let block = self.store.block(s, b)?;
                for i in (0..block.len()).rev() {
                    let (k, v) = block.row(i);
                    f(self.table_key(kind, k, &mut key), v)?;
                }
            }
        }
        Ok(())
    }

    /// A file's key as its table has it.
    fn table_key<'k>(&self, kind: Kind, key: &'k [u8], buf: &'k mut Vec<u8>) -> &'k [u8] {
        if kind.is_entity_first() {
            history_key_into(key, buf);
            buf
        } else {
            key
        }
    }

    /// The files, with their entries' kinds and ranges.
    pub fn files(&self) -> impl Iterator<Item = (Kind, u32, u32, &Arc<Segment>)> {
        self.by_kind.iter().flat_map(|(k, v)| v.iter().map(move |(f, l, s)| (*k, *f, *l, s)))
    }
}

/// Segment files a write transaction created and replaced: the created ones are removed if it
/// is dropped, the replaced ones after it commits durably.
#[derive(Debug, Default)]
pub(crate) struct TxnFiles {
    files: Mutex<(Vec<String>, Vec<String>)>,
    committed: std::sync::atomic::AtomicBool,
    /// The files a freeze wrote, synced together before its manifest is written.
    pub(super) unsynced: file::Unsynced,
}

impl TxnFiles {
    pub(super) fn created(&self, name: String) {
        self.files.lock().unwrap_or_else(|e| e.into_inner()).0.push(name);
    }

    pub(super) fn replaced(&self, name: String) {
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

/// A merge running on a thread of its own: its parts, its file's name, and the thread, which
/// returns the merged file's entry.
pub(super) struct Job {
    pub(super) parts: Vec<Entry>,
    pub(super) name: String,
    pub(super) handle: std::thread::JoinHandle<StorageResult<Entry>>,
}

/// Merges running off the writer's thread, one at a time ([`Store`] holds them). A
/// later write transaction adopts a finished one ([`merge::merge_due`]): its file replaces its parts
/// in the manifest that transaction commits, if they are all still live.
#[derive(Default)]
pub(crate) struct Merges {
    jobs: Mutex<HashMap<Kind, Job>>,
    pub(super) cancel: Arc<AtomicBool>,
}

impl std::fmt::Debug for Merges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merges").finish_non_exhaustive()
    }
}

impl Merges {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Kind, Job>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `kind`'s merge, taken out if it has finished (or, with `wait`, whenever there is one).
    pub(super) fn take(&self, kind: Kind, wait: bool) -> Option<Job> {
        let mut jobs = self.lock();
        match jobs.get(&kind) {
            Some(job) if wait || job.handle.is_finished() => jobs.remove(&kind),
            _ => None,
        }
    }

    /// Whether any merge runs: one at a time, since every kind reaches a level at the same
    /// epoch, and ten merges at once held 100 MiB more at the import's peak.
    pub(super) fn busy(&self) -> bool {
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
