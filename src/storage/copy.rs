//! [`Database::copy_to`]: a consistent copy of the whole database into a new datadir, taken
//! from one read transaction while the node goes on serving and importing.
//!
//! A byte copy of a live redb file is not consistent (the header and free pages change under
//! it), so the copy re-inserts every entry of every table, in key order, into a fresh file.
//! redb has no table-to-table copy, hence this module.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle};

use super::tables::{self, meta};
use super::{DB_FILE, Database, StorageError, StorageResult};

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

/// Copies one table's entries, in key order.
fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &redb::ReadTransaction,
    to: &redb::WriteTransaction,
    def: TableDefinition<'_, K, V>,
) -> StorageResult<u64> {
    let source = from.open_table(def)?;
    let mut target = to.open_table(def)?;
    for entry in source.iter()? {
        let (k, v) = entry?;
        target.insert(k.value(), v.value())?;
    }
    Ok(source.len()?)
}

impl Database {
    /// Writes a consistent copy of this database to `dest` (a datadir that must not hold a
    /// database yet; it is created if needed), as of the last commit when the copy starts.
    /// Readers and the writer are not blocked. The file is written under a temporary name and
    /// renamed into place once durable, so an interrupted copy never looks like a datadir.
    pub fn copy_to(&self, dest: &Path) -> StorageResult<CopySummary> {
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
        let target = redb::Database::builder().set_cache_size(64 * 1024 * 1024).create(&tmp)?;
        let to = target.begin_write()?;
        let mut copied = Vec::new();
        let mut entries = 0;
        macro_rules! copy {
            ($($t:ident),* $(,)?) => {$(
                entries += copy_table(&from, &to, tables::$t)?;
                copied.push(tables::$t.name());
            )*};
        }
        copy!(
            HEADERS,
            CANONICAL,
            HASH_TO_NUMBER,
            BODIES,
            TRANSACTIONS,
            RECEIPTS,
            TX_LOOKUP,
            BYTECODES,
            PREIMAGES,
            HASHED_ACCOUNTS,
            HASHED_STORAGE,
            HASHED_ACCOUNT_HISTORY,
            HASHED_STORAGE_HISTORY,
            ACCOUNT_TRIE,
            STORAGE_TRIE,
            ACCOUNT_TRIE_HISTORY,
            STORAGE_TRIE_HISTORY,
            BLOCK_CHANGES,
            TRACE_ADDRESSES,
            META,
        );
        // A table added to the schema but not to the list above would be silently missing.
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
        assert_eq!(copy.tables, 20);
        drop(Database::open(&dir.path().join("c")).unwrap());
    }
}
