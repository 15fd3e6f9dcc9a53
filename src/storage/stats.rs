//! [`Database::stats`]: rows and bytes of every table, for `loupe db stats`.

use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};

use super::tables;
use super::{Database, StorageResult};

/// Rows and space of one table (redb's B-tree statistics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStats {
    /// The table's name in the file.
    pub name: &'static str,
    /// Rows.
    pub entries: u64,
    /// Levels of the B-tree, leaves included.
    pub height: u32,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Branch pages.
    pub branch_pages: u64,
    /// Bytes of keys and values.
    pub stored_bytes: u64,
    /// Bytes of page headers and offsets.
    pub metadata_bytes: u64,
    /// Bytes inside the table's pages that hold nothing (half-empty leaves).
    pub fragmented_bytes: u64,
}

impl TableStats {
    /// Bytes of the pages the table occupies: stored, metadata and fragmented together.
    pub fn occupied_bytes(&self) -> u64 {
        self.stored_bytes + self.metadata_bytes + self.fragmented_bytes
    }
}

/// What [`Database::stats`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseStats {
    /// The head block (`None`: no blocks yet).
    pub head: Option<u64>,
    /// Every table of the schema, in its order (`tables::for_each_table`).
    pub tables: Vec<TableStats>,
    /// Length of the database file in bytes; what no table occupies is free pages and
    /// redb's own bookkeeping.
    pub file_bytes: u64,
    /// Disk space the database file takes ([`super::disk_bytes`]): less than its length where
    /// the file system keeps the unwritten tail of a packed file as a hole.
    pub disk_bytes: u64,
    /// The frozen history's segment files, by kind: (kind, files, rows, bytes).
    pub segments: Vec<SegmentStats>,
    /// Epochs below this one are frozen.
    pub frozen_to: u32,
    /// Where the trie-history stage stands (`None`: no import checked roots per group).
    pub trie_stage: Option<super::history::staged::TrieStage>,
}

/// The segment files of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentStats {
    /// What they hold.
    pub kind: &'static str,
    /// Files.
    pub files: u64,
    /// Rows.
    pub rows: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

impl Database {
    /// The rows and bytes of every table as of the last commit. Reads every page of every
    /// table, so on a large database it takes as long as reading the file; readers and the
    /// writer go on meanwhile.
    pub fn stats(&self) -> StorageResult<DatabaseStats> {
        let txn = self.db.begin_read()?;
        let mut out = Vec::new();
        macro_rules! each {
            ($($t:ident),* $(,)?) => {$(
                let table = txn.open_table(tables::$t)?;
                let s = table.stats()?;
                out.push(TableStats {
                    name: tables::$t.name(),
                    entries: table.len()?,
                    height: s.tree_height(),
                    leaf_pages: s.leaf_pages(),
                    branch_pages: s.branch_pages(),
                    stored_bytes: s.stored_bytes(),
                    metadata_bytes: s.metadata_bytes(),
                    fragmented_bytes: s.fragmented_bytes(),
                });
            )*};
        }
        tables::for_each_table!(each);
        let meta = txn.open_table(tables::META)?;
        let manifest = super::segments::Manifest::read(&meta)?;
        let trie_stage = super::history::staged::TrieStage::read(&meta)?;
        drop(meta);
        drop(txn);
        let segments = super::segments::Kind::ALL
            .iter()
            .map(|kind| {
                let files: Vec<_> = manifest.of(*kind).collect();
                SegmentStats {
                    kind: kind.name(),
                    files: files.len() as u64,
                    rows: files.iter().map(|e| e.rows).sum(),
                    bytes: files.iter().map(|e| e.bytes).sum(),
                }
            })
            .collect();
        let head = self.begin_read()?.head()?;
        Ok(DatabaseStats {
            head,
            tables: out,
            file_bytes: self.file_size(),
            disk_bytes: self.disk_size(),
            segments,
            frozen_to: manifest.frozen_to,
            trie_stage,
        })
    }
}

#[cfg(test)]
mod tests {
    use redb::ReadableTable;

    use super::*;

    /// Every table of the file is listed, with the rows an iteration counts, and the pages of
    /// all tables fit in the file.
    #[test]
    fn every_table_is_listed_with_the_rows_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        let w = db.db.begin_write().unwrap();
        {
            let mut headers = w.open_table(tables::HEADERS).unwrap();
            for n in 0..5000u64 {
                headers.insert(n, [n as u8; 300].as_slice()).unwrap();
            }
        }
        w.commit().unwrap();
        let stats = db.stats().unwrap();
        let txn = db.db.begin_read().unwrap();
        let names: Vec<_> = txn.list_tables().unwrap().map(|t| t.name().to_string()).collect();
        assert_eq!(stats.tables.len(), names.len());
        for t in &stats.tables {
            assert!(names.iter().any(|n| n == t.name), "{} is not in the file", t.name);
        }
        let headers = stats.tables.iter().find(|t| t.name == "headers").unwrap();
        let counted = txn.open_table(tables::HEADERS).unwrap().iter().unwrap().count() as u64;
        assert_eq!((headers.entries, counted), (5000, 5000));
        assert!(headers.stored_bytes >= 5000 * 308, "{headers:?}");
        assert!(headers.height >= 2 && headers.branch_pages >= 1, "{headers:?}");
        let occupied: u64 = stats.tables.iter().map(TableStats::occupied_bytes).sum();
        assert!(occupied <= stats.file_bytes, "{occupied} > {}", stats.file_bytes);
    }
}
