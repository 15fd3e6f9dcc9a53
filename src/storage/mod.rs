//! Embedded archive database (redb): blocks, receipts, current state and state history.
//!
//! Every table is described in [`tables`] and in `docs/design.md`. Writes go through one
//! [`Writer`] (one redb write transaction per block, so a block is stored whole or not at all);
//! reads go through a [`Reader`] snapshot, and [`StateAt`] answers state queries "as of the end
//! of block N" for the EVM.

mod access_list;
mod anchor;
mod cache;
pub mod codec;
mod copy;
mod error;
pub mod history;
mod node_writes;
mod read;
mod root_oracle;
pub mod segments;
mod snapshot;
mod state;
mod stats;
pub mod tables;
mod write;

use std::path::Path;

use redb::ReadableDatabase;

use history::keys::Epochs;

pub use copy::{COMPACT_DIR, CompactSummary, CopySummary};
pub use error::{StorageError, StorageResult};
pub use node_writes::{NodeWrites, TRIE_NODES_CAP, TrieNodes};
pub use read::{Reader, StoredTransaction};
pub use root_oracle::{FullRecompute, state_root_of};
pub use snapshot::{BlockMarkers, TrieTables};
pub use state::{StateAt, StateDump};
pub use stats::{DatabaseStats, SegmentStats, TableStats};
pub use write::{Writer, WriterState};

/// Name of the database file inside a datadir.
pub const DB_FILE: &str = "loupe.redb";
/// The page cache [`Database::open`] gives the database: 256 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 256 * 1024 * 1024;

/// Creates an empty database file under a temporary name and renames it into place, so that a
/// kill while redb writes a new file's header (magic number last) can never leave a `DB_FILE`
/// that redb refuses to open.
fn create_atomically(datadir: &Path, path: &Path) -> StorageResult<()> {
    let io = |error| StorageError::Io { path: datadir.display().to_string(), error };
    let tmp = datadir.join(format!("{DB_FILE}.creating"));
    if tmp.exists() {
        std::fs::remove_file(&tmp).map_err(io)?;
    }
    drop(redb::Database::create(&tmp)?);
    std::fs::rename(&tmp, path).map_err(io)?;
    // Make the rename itself durable.
    std::fs::File::open(datadir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

/// Handle to the archive database. Cheap to share behind an `Arc`; redb allows one writer and
/// any number of concurrent readers, each reading a consistent snapshot.
#[derive(Debug)]
pub struct Database {
    db: redb::Database,
    /// The database file.
    path: std::path::PathBuf,
    cache: std::sync::Arc<cache::BlockCache>,
    /// The segment files of the frozen history.
    segments: std::sync::Arc<segments::Store>,
    /// The shared snapshot and the commit generation it was taken at.
    snapshot: std::sync::RwLock<(u64, std::sync::Arc<snapshot::Snapshot>)>,
    /// Free bytes the datadir's file system must keep: a write transaction is refused below
    /// it ([`StorageError::DiskFull`]), before redb could run out of space mid-commit.
    min_free: std::sync::atomic::AtomicU64,
}

/// [`Database::set_min_free`]'s default: 64 MiB.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

/// Lowers the calling thread's scheduling priority by `steps` nice steps (Linux: niceness is
/// per thread), for work that should take a core only when the writer leaves one: the import's
/// threads ahead of it, segment merges. Best effort: where the call fails the thread runs at the
/// caller's priority, and nothing else changes.
pub fn lower_thread_priority(steps: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: both calls take plain integers and touch no memory of ours.
    unsafe {
        let tid = libc::gettid();
        let now = libc::getpriority(libc::PRIO_PROCESS as _, tid as libc::id_t);
        let _ = libc::setpriority(
            libc::PRIO_PROCESS as _,
            tid as libc::id_t,
            now.saturating_add(steps),
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = steps;
}

/// Free bytes of the file system holding `path` (for an unprivileged user), if the platform
/// tells them.
pub fn free_bytes(path: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a valid NUL-terminated path and `stat` is a plain struct that
        // statvfs fills in; nothing else is touched.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut stat) };
        // The field types differ between platforms (u32 on some).
        #[allow(clippy::useless_conversion)]
        let (avail, size) = (u64::from(stat.f_bavail), u64::from(stat.f_frsize));
        (rc == 0).then(|| avail.saturating_mul(size))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The disk space a file takes: its allocated blocks where the platform tells them, else its
/// length. A file redb extended but did not write to the end (a packed copy's tail) takes less
/// than its length on file systems that keep holes.
pub fn disk_bytes(path: &Path) -> std::io::Result<u64> {
    let meta = std::fs::metadata(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(meta.blocks() * 512)
    }
    #[cfg(not(unix))]
    Ok(meta.len())
}

impl Database {
    /// Opens the database in `datadir`, creating the directory, the file and all tables if they
    /// do not exist yet. After a crash, redb repairs the file here and the database opens at its
    /// last durable commit.
    pub fn open(datadir: &Path) -> StorageResult<Self> {
        Self::open_with_cache(datadir, DEFAULT_CACHE_BYTES)
    }

    /// [`Database::open`] with a page cache of `cache_bytes` (redb keeps up to that many bytes
    /// of the file's pages in memory; the node's RSS grows with the pages read and written
    /// until the cache is full).
    pub fn open_with_cache(datadir: &Path, cache_bytes: usize) -> StorageResult<Self> {
        Self::open_inner(datadir, cache_bytes, None)
    }

    /// [`Database::open`], creating a new datadir with history epochs of `epochs` (instead of
    /// [`history::keys::EPOCH_ENV`] or [`history::keys::DEFAULT_EPOCH_LEN`]); an existing datadir keeps its own.
    pub fn open_with_epochs(datadir: &Path, epochs: Epochs) -> StorageResult<Self> {
        Self::open_inner(datadir, DEFAULT_CACHE_BYTES, Some(epochs))
    }

    fn open_inner(
        datadir: &Path,
        cache_bytes: usize,
        epochs: Option<Epochs>,
    ) -> StorageResult<Self> {
        std::fs::create_dir_all(datadir)
            .map_err(|error| StorageError::Io { path: datadir.display().to_string(), error })?;
        let path = datadir.join(DB_FILE);
        if !path.exists() {
            create_atomically(datadir, &path)?;
        }
        let db = redb::Database::builder().set_cache_size(cache_bytes).create(&path)?;
        let cache = std::sync::Arc::new(cache::BlockCache::default());
        // The manifest as committed: before any write, which must find the files it names.
        let manifest = {
            let r = db.begin_read()?;
            match r.open_table(tables::META) {
                Ok(m) => {
                    let manifest = segments::Manifest::read(&m)?;
                    // Refused before its files are touched (`Writer::create_tables`).
                    let found = m.get(tables::meta::SCHEMA)?.map(|v| v.value().to_vec());
                    let found =
                        found.and_then(|v| <[u8; 8]>::try_from(v).ok()).map(u64::from_be_bytes);
                    if let Some(found @ (11 | 12)) = found
                        && manifest.has_reordered_files_since(found)
                    {
                        return Err(StorageError::Schema {
                            found,
                            supported: tables::SCHEMA_VERSION,
                        });
                    }
                    manifest
                }
                Err(redb::TableError::TableDoesNotExist(_)) => segments::Manifest::default(),
                Err(e) => return Err(e.into()),
            }
        };
        let segments = std::sync::Arc::new(segments::Store::open(datadir, &manifest)?);
        let w = Writer::new(db.begin_write()?, cache.clone(), segments.clone());
        w.create_tables(epochs)?;
        w.commit(true)?;
        let snap = std::sync::Arc::new(snapshot::Snapshot::open(db.begin_read()?, &segments)?);
        let generation = cache.generation();
        Ok(Self {
            db,
            path,
            cache,
            segments,
            snapshot: std::sync::RwLock::new((generation, snap)),
            min_free: std::sync::atomic::AtomicU64::new(DEFAULT_MIN_FREE_BYTES),
        })
    }

    /// The database file (inside its datadir).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the database file in bytes (0 if it cannot be read).
    pub fn file_size(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// Disk space the database file takes, in bytes ([`disk_bytes`]; 0 if it cannot be read).
    pub fn disk_size(&self) -> u64 {
        disk_bytes(&self.path).unwrap_or(0)
    }

    /// Starts a read snapshot.
    pub fn begin_read(&self) -> StorageResult<Reader> {
        // Generation first, then the snapshot: a snapshot is never older than its generation.
        let generation = self.cache.generation();
        {
            let current = self.snapshot.read().unwrap_or_else(|e| e.into_inner());
            if current.0 == generation {
                return Ok(Reader::new(current.1.clone(), self.cache.clone()));
            }
        }
        let snap =
            std::sync::Arc::new(snapshot::Snapshot::open(self.db.begin_read()?, &self.segments)?);
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = (generation, snap.clone());
        Ok(Reader::new(snap, self.cache.clone()))
    }

    /// Makes every commit so far durable, in a durable commit that first settles the segment
    /// merges ([`Writer::settle_segments`]: the end of an import leaves its segments merged).
    /// Allowed even when the disk is short of its reserve: without a merge it writes a few
    /// pages, and a merge needs twice its parts' size free or is left for later.
    pub fn make_durable(&self) -> StorageResult<()> {
        let w = Writer::new(self.db.begin_write()?, self.cache.clone(), self.segments.clone());
        w.settle_segments()?;
        w.commit(true)
    }

    /// Keeps `bytes` free on the datadir's file system: a write transaction that would start
    /// with less is refused ([`Database::begin_write`]).
    pub fn set_min_free(&self, bytes: u64) {
        self.min_free.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// [`StorageError::DiskFull`] naming the datadir when its file system has less free space
    /// than [`Database::set_min_free`] keeps.
    pub fn check_free_space(&self) -> StorageResult<()> {
        let reserve = self.min_free.load(std::sync::atomic::Ordering::Relaxed);
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        match free_bytes(dir) {
            Some(free) if free < reserve => Err(StorageError::DiskFull {
                path: dir.display().to_string(),
                error: std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!(
                        "{free} bytes free, under the {reserve} kept in reserve (--db.min-free-mb)"
                    ),
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Starts the (single) write transaction. Nothing is visible to readers until
    /// [`Writer::commit`]. Refused with [`StorageError::DiskFull`] when the datadir's file
    /// system is short of its reserve.
    pub fn begin_write(&self) -> StorageResult<Writer> {
        self.check_free_space()?;
        Ok(Writer::new(self.db.begin_write()?, self.cache.clone(), self.segments.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_of_another_format_version_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        drop(Database::open(dir.path()).unwrap());
        {
            let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
            let w = db.begin_write().unwrap();
            w.open_table(tables::META)
                .unwrap()
                .insert(tables::meta::SCHEMA, 99u64.to_be_bytes().as_slice())
                .unwrap();
            w.commit().unwrap();
        }
        let err = Database::open(dir.path()).unwrap_err();
        assert!(
            matches!(err, StorageError::Schema { found: 99, supported: tables::SCHEMA_VERSION }),
            "{err}"
        );
        assert!(err.to_string().contains("version 99"), "{err}");
    }

    /// A format 9 datadir (plain receipts rows) opens as the current format, its rows read as
    /// they were, and an older binary would then refuse it.
    #[test]
    fn a_format_9_database_opens_as_the_current_format() {
        let dir = tempfile::tempdir().unwrap();
        drop(Database::open(dir.path()).unwrap());
        let plain = [0x00u8, 0xc0];
        {
            let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
            let w = db.begin_write().unwrap();
            let mut m = w.open_table(tables::META).unwrap();
            m.insert(tables::meta::SCHEMA, 9u64.to_be_bytes().as_slice()).unwrap();
            drop(m);
            w.open_table(tables::RECEIPTS).unwrap().insert(3, plain.as_slice()).unwrap();
            w.commit().unwrap();
        }
        let db = Database::open(dir.path()).unwrap();
        assert_eq!(db.begin_read().unwrap().receipts(3).unwrap(), Some(vec![]));
        drop(db);
        let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_read().unwrap();
        let m = txn.open_table(tables::META).unwrap();
        let schema = m.get(tables::meta::SCHEMA).unwrap().unwrap().value().to_vec();
        assert_eq!(schema, tables::SCHEMA_VERSION.to_be_bytes());
    }

    /// A format 11 or 12 datadir opens as the current format unless it froze history whose
    /// segment files have had another key order since (11: trie and state history, 12: state
    /// history): that one is refused and left as it was.
    #[test]
    fn a_format_11_or_12_database_opens_unless_it_froze_history_since_reordered() {
        let set = |dir: &std::path::Path, format: u64, kind: Option<segments::Kind>| {
            let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
            let w = db.begin_write().unwrap();
            let mut m = w.open_table(tables::META).unwrap();
            m.insert(tables::meta::SCHEMA, format.to_be_bytes().as_slice()).unwrap();
            let mut manifest = segments::Manifest { frozen_to: 1, ..Default::default() };
            if let Some(kind) = kind {
                // A real (empty) file: the datadir opens only with every named file there.
                let mut entry =
                    segments::Entry { kind, first: 0, last: 0, rows: 0, bytes: 0, crc: 0 };
                let folder = dir.join(segments::SEGMENTS_DIR);
                std::fs::create_dir_all(&folder).unwrap();
                let written =
                    segments::SegmentWriter::create(&folder.join(entry.file_name()), Vec::new())
                        .unwrap()
                        .finish()
                        .unwrap();
                (entry.rows, entry.bytes, entry.crc) = (written.rows, written.bytes, written.crc);
                manifest.files.push(entry);
            }
            m.insert(tables::meta::SEGMENTS, serde_json::to_vec(&manifest).unwrap().as_slice())
                .unwrap();
            drop(m);
            w.commit().unwrap();
        };
        let schema = |dir: &std::path::Path| {
            let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
            let txn = db.begin_read().unwrap();
            let m = txn.open_table(tables::META).unwrap();
            let v = m.get(tables::meta::SCHEMA).unwrap().unwrap().value().to_vec();
            u64::from_be_bytes(v.try_into().unwrap())
        };
        use segments::Kind;
        for (format, kind, opens) in [
            (11, None, true),
            (11, Some(Kind::StorageTrieHistory), false),
            (11, Some(Kind::AccountHistory), false),
            (11, Some(Kind::Headers), true),
            (12, Some(Kind::Headers), true),
            (12, None, true),
            (12, Some(Kind::StorageTrieHistory), true),
            (12, Some(Kind::StorageHistory), false),
            (12, Some(Kind::AccountHistory), false),
        ] {
            let dir = tempfile::tempdir().unwrap();
            drop(Database::open(dir.path()).unwrap());
            set(dir.path(), format, kind);
            match Database::open(dir.path()) {
                Ok(db) => {
                    assert!(opens, "{format} {kind:?}");
                    drop(db);
                    assert_eq!(schema(dir.path()), tables::SCHEMA_VERSION);
                }
                Err(err) => {
                    assert!(!opens, "{format} {kind:?}: {err}");
                    assert!(
                        matches!(err, StorageError::Schema { found, .. } if found == format),
                        "{err}"
                    );
                    assert_eq!(schema(dir.path()), format);
                }
            }
        }
    }

    #[test]
    fn a_format_5_database_is_refused_and_left_alone() {
        // Format 5 kept history keyed `key ++ block`, in tables of other names and key types.
        let dir = tempfile::tempdir().unwrap();
        let old: redb::TableDefinition<'_, &[u8; 40], &[u8]> =
            redb::TableDefinition::new("hashed_account_history");
        {
            let db = redb::Database::create(dir.path().join(DB_FILE)).unwrap();
            let w = db.begin_write().unwrap();
            w.open_table(tables::META)
                .unwrap()
                .insert(tables::meta::SCHEMA, 5u64.to_be_bytes().as_slice())
                .unwrap();
            w.open_table(old).unwrap().insert(&[7u8; 40], [1u8, 2].as_slice()).unwrap();
            w.commit().unwrap();
        }
        let err = Database::open(dir.path()).unwrap_err();
        assert!(
            matches!(err, StorageError::Schema { found: 5, supported: tables::SCHEMA_VERSION }),
            "{err}"
        );
        let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_read().unwrap();
        let meta = txn.open_table(tables::META).unwrap();
        assert_eq!(
            meta.get(tables::meta::SCHEMA).unwrap().unwrap().value(),
            5u64.to_be_bytes().as_slice()
        );
        assert_eq!(txn.open_table(old).unwrap().get(&[7u8; 40]).unwrap().unwrap().value(), [1, 2]);
        // No table of the current format was added to it.
        let names: Vec<String> =
            txn.list_tables().unwrap().map(|t| redb::TableHandle::name(&t).to_string()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn the_head_moves_back_only_by_unwinding_and_epochs_are_positive() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 }).unwrap();
        let w = db.begin_write().unwrap();
        w.advance_head_with_markers(0, 0, 0).unwrap();
        w.advance_head(5).unwrap();
        w.advance_head(5).unwrap();
        let err = w.advance_head(3).unwrap_err();
        assert!(matches!(err, StorageError::HeadBack { head: 5, to: 3 }), "{err}");
        assert!(w.advance_head_with_markers(4, 4, 4).is_err());
        drop(w);
        let err = Database::open_with_epochs(&dir.path().join("b"), Epochs { len: 0 }).unwrap_err();
        assert!(err.to_string().contains("epoch of 0 blocks"), "{err}");
    }

    #[test]
    fn a_new_database_keeps_its_epoch_length() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        let r = db.begin_read().unwrap();
        let want = std::env::var(history::keys::EPOCH_ENV).ok().and_then(|v| v.parse().ok());
        assert_eq!(r.trie_tables().epochs.len, want.unwrap_or(history::keys::DEFAULT_EPOCH_LEN));
    }
}
