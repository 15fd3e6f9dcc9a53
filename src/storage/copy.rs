//! [`Database::copy_to`]: a consistent copy of the whole database into a new datadir, taken
//! from one read transaction while the node goes on serving and importing; and
//! [`Database::compact`], the same copy renamed over the original.
//!
//! A byte copy of a live redb file is not consistent (the header and free pages change under
//! it), so the copy re-inserts every entry of every table, in key order, into a fresh file.
//! redb has no table-to-table copy, hence this module.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle};

use super::tables::{self, meta};
use super::{DB_FILE, Database, StorageError, StorageResult, disk_bytes};

/// What [`Database::copy_to`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySummary {
    /// The head block of the copy (`None`: the database had no blocks).
    pub head: Option<u64>,
    /// The database file written.
    pub file: PathBuf,
    /// Tables copied.
    pub tables: usize,
    /// Entries copied, over all tables.
    pub entries: u64,
    /// Size of the new file in bytes.
    pub bytes: u64,
}

/// What [`Database::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactSummary {
    /// Disk space the database file took before, in bytes (allocated blocks: a redb file can
    /// be sparse).
    pub before: u64,
    /// Disk space the packed file takes, in bytes.
    pub after: u64,
    /// The packed copy that replaced it.
    pub copy: CopySummary,
}

/// Where [`Database::compact`] writes its copy, inside the datadir. A kill leaves it behind;
/// the next compaction removes it first.
pub const COMPACT_DIR: &str = "compact.tmp";

/// The page cache of the file a copy writes (and a compaction then packs): it is written or
/// read once, in order, so a small cache loses nothing and keeps memory bounded.
const COPY_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Gives `to` the permissions, and on Unix the owner and group, of `from`: a datadir compacted
/// by root keeps working for the service account that owns it.
fn same_owner_and_mode(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(from)?;
    std::fs::set_permissions(to, meta.permissions())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let new = std::fs::metadata(to)?;
        if (new.uid(), new.gid()) != (meta.uid(), meta.gid()) {
            std::os::unix::fs::chown(to, Some(meta.uid()), Some(meta.gid()))?;
        }
    }
    std::fs::File::open(to)?.sync_all()
}

/// The bytes of entries [`copy_table`]'s reader hands the inserting thread at a time.
const COPY_BATCH_BYTES: usize = 1 << 20;

/// One batch of a table's entries as their stored bytes: `buf` holds each key then its value,
/// `ends` where each ends.
#[derive(Default)]
struct CopyBatch {
    buf: Vec<u8>,
    ends: Vec<(usize, usize)>,
}

/// Copies one table's entries, in key order: a reader thread walks the source table and hands
/// the entries over in batches of their bytes while this thread inserts them, so that the
/// reads of the old file's pages and the writes of the new file's run on two cores (redb has no
/// bulk load, and a write transaction inserts on one thread).
fn copy_table<K: redb::Key + Sync + 'static, V: redb::Value + Sync + 'static>(
    from: &redb::ReadTransaction,
    to: &redb::WriteTransaction,
    def: TableDefinition<'_, K, V>,
) -> StorageResult<u64> {
    let source = from.open_table(def)?;
    let mut target = to.open_table(def)?;
    let (batches, arrived) = std::sync::mpsc::sync_channel::<StorageResult<CopyBatch>>(4);
    std::thread::scope(|s| {
        let source = &source;
        std::thread::Builder::new()
            .name("loupe-copy-read".into())
            .spawn_scoped(s, move || {
                let read = || -> StorageResult<()> {
                    let mut batch = CopyBatch::default();
                    for entry in source.iter()? {
                        let (k, v) = entry?;
                        batch.buf.extend_from_slice(K::as_bytes(&k.value()).as_ref());
                        let key_end = batch.buf.len();
                        batch.buf.extend_from_slice(V::as_bytes(&v.value()).as_ref());
                        batch.ends.push((key_end, batch.buf.len()));
                        if batch.buf.len() >= COPY_BATCH_BYTES
                            && batches.send(Ok(std::mem::take(&mut batch))).is_err()
                        {
                            return Ok(());
                        }
                    }
                    if !batch.ends.is_empty() {
                        let _ = batches.send(Ok(batch));
                    }
                    Ok(())
                };
                if let Err(e) = read() {
                    let _ = batches.send(Err(e));
                }
            })
            .map_err(|error| StorageError::Io { path: "(copy reader thread)".into(), error })?;
        // Returning early drops `arrived`, which stops the reader at its next batch.
        for batch in arrived {
            let batch = batch?;
            let mut start = 0;
            for &(key_end, end) in &batch.ends {
                target.insert(
                    K::from_bytes(&batch.buf[start..key_end]),
                    V::from_bytes(&batch.buf[key_end..end]),
                )?;
                start = end;
            }
        }
        Ok(source.len()?)
    })
}

impl Database {
    /// Rewrites the database file packed: a [`Database::copy_to`] into `COMPACT_DIR` inside the
    /// datadir, renamed over the file once durable. Inserted in key order, every B-tree leaf of
    /// the copy is full, where the pages of a database grown by imports are about half empty
    /// (history rows land all over each table, and a full leaf splits in two halves). Every
    /// row stays as it was. Needs free disk space for the copy and the datadir to itself: the
    /// handle is consumed, and a process that opens the datadir afterwards gets the new file.
    /// A kill at any moment leaves either the old file or the new one in place, never neither.
    pub fn compact(self) -> StorageResult<CompactSummary> {
        let io = |path: &Path, error| StorageError::Io { path: path.display().to_string(), error };
        let datadir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let work = datadir.join(COMPACT_DIR);
        match std::fs::symlink_metadata(&work) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&work).map_err(|e| io(&work, e))?,
            Ok(_) => std::fs::remove_file(&work).map_err(|e| io(&work, e))?,
            Err(_) => {}
        }
        let before = disk_bytes(&self.path).map_err(|e| io(&self.path, e))?;
        let packed = || -> StorageResult<CopySummary> {
            // The segment files stay where they are: the packed file names the same ones.
            let started = std::time::Instant::now();
            let copy = self.copy_inner(&work, false)?;
            let copied = started.elapsed();
            // The copy's leaves are full, but redb grows a file by doubling it, so the copy
            // ends in room its last pages did not fill. Where the file system keeps that tail
            // as a hole (it was only ever extended, never written), it takes no disk space and
            // the packed file is as small on disk as redb's own compaction would leave it, which
            // moves pages down into the room in a dozen commits (3.4 s after a 6.0 s copy on the
            // 1,000-block proxy, BENCHMARKS.md). Where the file system stores the tail, that
            // compaction gives it back.
            let tail_stored = disk_bytes(&copy.file).map_err(|e| io(&copy.file, e))? >= copy.bytes;
            if tail_stored {
                let mut builder = redb::Database::builder();
                builder.set_cache_size(COPY_CACHE_BYTES).open(&copy.file)?.compact()?;
            }
            tracing::debug!(
                copy_s = copied.as_secs_f64(),
                trim_s = (started.elapsed() - copied).as_secs_f64(),
                tail_stored,
                "packed copy written"
            );
            same_owner_and_mode(&self.path, &copy.file).map_err(|e| io(&copy.file, e))?;
            // Still open here, so no other process can have opened the old file meanwhile.
            std::fs::rename(&copy.file, &self.path).map_err(|e| io(&self.path, e))?;
            Ok(copy)
        };
        let copy = match packed() {
            Ok(copy) => copy,
            Err(e) => {
                // Best effort: the next compaction removes it too.
                let _ = std::fs::remove_dir_all(&work);
                return Err(e);
            }
        };
        // From here the packed file is in place: what fails now is reported, not undone.
        std::fs::File::open(&datadir).and_then(|d| d.sync_all()).map_err(|e| io(&datadir, e))?;
        let _ = std::fs::remove_dir_all(&work);
        let after = disk_bytes(&self.path).map_err(|e| io(&self.path, e))?;
        let bytes = std::fs::metadata(&self.path).map_err(|e| io(&self.path, e))?.len();
        let copy = CopySummary { file: self.path.clone(), bytes, ..copy };
        drop(self);
        Ok(CompactSummary { before, after, copy })
    }

    /// Gives the file's free pages back to the file system, every row left in place: redb's
    /// own compaction moves the pages at the end of the file into free ones and cuts the file.
    /// A bulk import's large commits leave a quarter to a third of its file as freed pages
    /// (BENCHMARKS.md, session 28); this takes them back without a copy, where
    /// [`Database::compact`] rewrites every row to pack the tables' pages too, and needs disk
    /// space for the copy. Consumes the handle (redb compacts only with no read open). A kill
    /// while it runs loses nothing committed; redb then repairs the file when it is next
    /// opened, which takes longer. Returns the disk space the file took before and after, in
    /// bytes.
    pub fn release_free_pages(self) -> StorageResult<(u64, u64)> {
        let io = |path: &Path, error| StorageError::Io { path: path.display().to_string(), error };
        let Self { mut db, path, snapshot, cache, segments, min_free: _ } = self;
        // The shared read snapshot holds a read transaction.
        drop((snapshot, cache, segments));
        let before = disk_bytes(&path).map_err(|e| io(&path, e))?;
        db.compact()?;
        drop(db);
        let after = disk_bytes(&path).map_err(|e| io(&path, e))?;
        Ok((before, after))
    }

    /// Writes a consistent copy of this database to `dest` (a datadir that must not hold a
    /// database yet; it is created if needed), as of the last commit when the copy starts.
    /// Readers and the writer are not blocked. The file is written under a temporary name and
    /// renamed into place once durable, so an interrupted copy never looks like a datadir.
    pub fn copy_to(&self, dest: &Path) -> StorageResult<CopySummary> {
        self.copy_inner(dest, true)
    }

    /// [`Database::copy_to`], with the segment files the copy's manifest names (hard links
    /// where the file system allows, else copies) when `segments` is set.
    fn copy_inner(&self, dest: &Path, segments: bool) -> StorageResult<CopySummary> {
        let io = |path: &Path, error| StorageError::Io { path: path.display().to_string(), error };
        std::fs::create_dir_all(dest).map_err(|e| io(dest, e))?;
        let file = dest.join(DB_FILE);
        if file.exists() {
            return Err(io(
                &file,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a database is already there",
                ),
            ));
        }
        let tmp = dest.join(format!("{DB_FILE}.copying"));
        if tmp.exists() {
            std::fs::remove_file(&tmp).map_err(|e| io(&tmp, e))?;
        }
        let from = self.db.begin_read()?;
        if segments {
            // Opened from the read transaction's manifest: a merge that replaces them meanwhile
            // cannot take them away (an open file is copied through its handle).
            let manifest = super::segments::Manifest::read(&from.open_table(tables::META)?)?;
            let dir = dest.join(super::segments::SEGMENTS_DIR);
            std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
            for entry in &manifest.files {
                let segment = self.segments.segment(entry)?;
                let to = dir.join(entry.file_name());
                if std::fs::hard_link(segment.path(), &to).is_err() {
                    segment.copy_to(&to)?;
                }
            }
        }
        let target = redb::Database::builder().set_cache_size(COPY_CACHE_BYTES).create(&tmp)?;
        let to = target.begin_write()?;
        let mut copied = Vec::new();
        let mut entries = 0;
        macro_rules! copy {
            ($($t:ident),* $(,)?) => {$(
                entries += copy_table(&from, &to, tables::$t)?;
                copied.push(tables::$t.name());
            )*};
        }
        tables::for_each_table!(copy);
        // A table in the file but not in `tables::for_each_table` would be silently missing.
        if let Some(missed) = from.list_tables()?.find(|t| !copied.contains(&t.name())) {
            return Err(StorageError::Corrupt {
                table: "(all)",
                detail: format!("table {} is not known to the copy", missed.name()),
            });
        }
        let head = from
            .open_table(tables::META)?
            .get(meta::HEAD)?
            .map(|v| super::codec::u64_value("meta", v.value()))
            .transpose()?;
        drop(from);
        to.commit()?;
        drop(target);
        std::fs::rename(&tmp, &file).map_err(|e| io(&file, e))?;
        std::fs::File::open(dest).and_then(|d| d.sync_all()).map_err(|e| io(dest, e))?;
        let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
        Ok(CopySummary { head, file, tables: copied.len(), entries, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_refuses_a_datadir_that_holds_a_database_and_opens_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&dir.path().join("a")).unwrap();
        let err = db.copy_to(&dir.path().join("a")).unwrap_err().to_string();
        assert!(err.contains("already there"), "{err}");
        drop(Database::open(&dir.path().join("b")).unwrap());
        let err = db.copy_to(&dir.path().join("b")).unwrap_err().to_string();
        assert!(err.contains("already there"), "{err}");
        let copy = db.copy_to(&dir.path().join("c")).unwrap();
        assert_eq!(copy.head, None);
        assert_eq!(copy.tables, 25);
        drop(Database::open(&dir.path().join("c")).unwrap());
    }
}
