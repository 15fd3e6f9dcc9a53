//! History rows a write transaction holds until an epoch's close or its commit, and how they
//! are written: in key order, an epoch's rows through one cursor when its range is still empty.
//!
//! A block's history rows (`epoch ++ key ++ block`) land at random places in the open epoch's
//! range, so written as they come the B-tree splits its leaves in half, and the epoch's close
//! then took them out and put them back to pack them (`storage::epochs`). Held until the close,
//! an epoch whose rows were all written by one transaction goes in once, in key order, through
//! one cursor: its leaves come out as full as the close's packing makes them, and the close
//! only indexes it. An epoch that already holds rows (of an earlier commit: a follower's
//! blocks, or an import group that began inside it) gets its rows inserted one by one and is
//! packed by its close as before.

use std::collections::BTreeMap;

use redb::{ReadableTable, Table};

use super::epochs::{row_block, row_epoch};
use super::{StorageError, StorageResult};

/// A history row held in memory: its key and value.
pub(super) type HistoryRow<const H: usize> = ([u8; H], Vec<u8>);

/// The held rows of one history table whose keys are `H` bytes.
#[derive(Debug, Default)]
pub(super) struct HeldRows<const H: usize> {
    rows: BTreeMap<[u8; H], Vec<u8>>,
    /// The highest block of a row written out of this holder: a row of that block may be in
    /// the table already, so [`HeldRows::record`] looks there too.
    written_through: Option<u64>,
}

impl<const H: usize> HeldRows<H> {
    /// Holds `old` as the history row `key` unless this transaction has that row already (a
    /// second change of the same key in the same block keeps the first change's old value).
    /// Returns whether the row is new. `table` is read only for a block whose rows were partly
    /// written out already (a flush in the middle of a block).
    pub(super) fn record<T: ReadableTable<&'static [u8; H], &'static [u8]>>(
        &mut self,
        table: &T,
        key: &[u8; H],
        old: &[u8],
    ) -> StorageResult<bool> {
        if self.rows.contains_key(key) {
            return Ok(false);
        }
        if self.written_through.is_some_and(|b| b >= row_block(key)) && table.get(key)?.is_some() {
            return Ok(false);
        }
        self.rows.insert(*key, old.to_vec());
        Ok(true)
    }

    /// Rows held.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Takes out the rows of the epochs below `epoch`, in key order.
    pub(super) fn take_below(&mut self, epoch: u32) -> Vec<HistoryRow<H>> {
        let mut from = [0u8; H];
        from[..4].copy_from_slice(&epoch.to_be_bytes());
        let keep = self.rows.split_off(&from);
        let taken = std::mem::replace(&mut self.rows, keep);
        self.note_written(taken.keys().map(row_block).max());
        taken.into_iter().collect()
    }

    /// Takes out every row, in key order.
    pub(super) fn take_all(&mut self) -> Vec<HistoryRow<H>> {
        self.take_below(u32::MAX)
    }

    fn note_written(&mut self, block: Option<u64>) {
        self.written_through = self.written_through.max(block);
    }
}

/// The held history rows of the epochs that a move of the head closes, taken out before the
/// close (`Writer::flush_before_close`) for it to write ([`super::epochs::follow_head`]).
#[derive(Debug, Default)]
pub(super) struct ClosingRows {
    /// Of [`super::tables::HASHED_ACCOUNT_HISTORY`], in key order.
    pub(super) accounts: Vec<HistoryRow<44>>,
    /// Of [`super::tables::HASHED_STORAGE_HISTORY`], in key order.
    pub(super) slots: Vec<HistoryRow<76>>,
    /// Of [`super::tables::ACCOUNT_TRIE_HISTORY`], in key order.
    pub(super) account_nodes: Vec<HistoryRow<45>>,
    /// Of [`super::tables::STORAGE_TRIE_HISTORY`], in key order.
    pub(super) storage_nodes: Vec<HistoryRow<77>>,
}

/// The rows of `rows` (in key order) that belong to `epoch`.
pub(super) fn rows_of<const H: usize>(rows: &[HistoryRow<H>], epoch: u32) -> &[HistoryRow<H>] {
    let lo = rows.partition_point(|(k, _)| row_epoch(k) < epoch);
    let hi = rows.partition_point(|(k, _)| row_epoch(k) <= epoch);
    &rows[lo..hi]
}

/// Writes `rows` (in key order, no key twice) into `table`, each epoch's with
/// [`write_epoch`].
pub(super) fn write_rows<const H: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    rows: &[HistoryRow<H>],
    name: &'static str,
) -> StorageResult<()> {
    let mut rest = rows;
    while let Some((first, _)) = rest.first() {
        let epoch = row_epoch(first);
        let end = rest.partition_point(|(k, _)| row_epoch(k) == epoch);
        write_epoch(table, &rest[..end], name)?;
        rest = &rest[end..];
    }
    Ok(())
}

/// Writes rows of one epoch (in key order, no key twice) into `table`. If the table holds no
/// row of that epoch yet, they go in through one cursor, which fills each leaf before it
/// starts the next, and this returns `true`: the table's rows of the epoch are then exactly
/// `rows`, packed. Otherwise each row is inserted (replacing a row with the same key) and this
/// returns `false`.
pub(super) fn write_epoch<const H: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    rows: &[HistoryRow<H>],
    name: &'static str,
) -> StorageResult<bool> {
    let Some((first, _)) = rows.first() else { return Ok(false) };
    let epoch = row_epoch(first);
    let mut lo = [0u8; H];
    lo[..4].copy_from_slice(&epoch.to_be_bytes());
    let mut hi = [0xffu8; H];
    hi[..4].copy_from_slice(&epoch.to_be_bytes());
    if table.range::<&[u8; H]>(&lo..=&hi)?.next().is_some() {
        for (key, value) in rows {
            table.insert(key, value.as_slice())?;
        }
        return Ok(false);
    }
    let mut cursor = table.lower_bound_mut(std::ops::Bound::Included(first))?;
    for (key, value) in rows {
        cursor.insert_before(key, value.as_slice()).map_err(|e| StorageError::Corrupt {
            table: name,
            detail: format!("writing the rows of epoch {epoch}: {e}"),
        })?;
    }
    cursor.close()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::epochs::row_key;

    #[test]
    fn rows_split_by_epoch_and_a_partly_written_block_is_looked_up() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("db")).unwrap();
        let def = crate::storage::tables::HASHED_ACCOUNT_HISTORY;
        let w = db.begin_write().unwrap();
        let mut table = w.open_table(def).unwrap();
        let mut held = HeldRows::<44>::default();
        let key = |epoch: u32, k: u8, block: u64| -> [u8; 44] { row_key(epoch, &[k; 32], block) };
        assert!(held.record(&table, &key(1, 5, 9), b"a").unwrap());
        assert!(!held.record(&table, &key(1, 5, 9), b"b").unwrap(), "the first old value wins");
        assert!(held.record(&table, &key(0, 7, 3), b"c").unwrap());
        assert!(held.record(&table, &key(2, 1, 17), b"d").unwrap());
        let below = held.take_below(2);
        assert_eq!(below.iter().map(|(k, _)| row_epoch(k)).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(rows_of(&below, 1), &below[1..]);
        assert!(rows_of(&below, 2).is_empty());
        write_rows(&mut table, &below, "test").unwrap();
        // Block 9's rows went out: a second change of the same key in block 9 is seen in the
        // table, a change of another key is not.
        assert!(!held.record(&table, &key(1, 5, 9), b"e").unwrap());
        assert!(held.record(&table, &key(1, 6, 9), b"f").unwrap());
        assert_eq!(held.len(), 2);
        // Epoch 1 holds a row now, so another of its rows is inserted, not cursor-written.
        let rest = held.take_all();
        assert!(!write_epoch(&mut table, rows_of(&rest, 1), "test").unwrap());
        assert!(write_epoch(&mut table, rows_of(&rest, 2), "test").unwrap());
        let got: Vec<_> =
            table.iter().unwrap().map(|r| r.unwrap().1.value().to_vec()).collect::<Vec<_>>();
        assert_eq!(got, [b"c".to_vec(), b"a".to_vec(), b"f".to_vec(), b"d".to_vec()]);
    }
}
