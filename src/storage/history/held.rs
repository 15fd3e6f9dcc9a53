//! History rows a write transaction holds until an epoch's close or its commit, and how they
//! are written: in key order, an epoch's rows through one cursor when its range is still empty.
//!
//! A block's history rows (`epoch ++ key ++ block`) land at random places in the open epoch's
//! range, so written as they come the B-tree splits its leaves in half, and the epoch's close
//! then took them out and put them back to pack them (`storage::history::index`). Held until the close,
//! an epoch whose rows were all written by one transaction goes in once, in key order, through
//! one cursor: its leaves come out as full as the close's packing makes them, and the close
//! only indexes it. An epoch that already holds rows (of an earlier commit: a follower's
//! blocks, an import group that began inside it, a flush of held rows part way) has those taken
//! out by its close and merged with the held ones ([`pack_epoch`]), so every closed epoch ends
//! packed and only an earlier commit's rows are written twice.

use std::collections::BTreeMap;

use redb::{ReadableTable, Table};

use crate::storage::history::keys::{epochs_bounds, row_block, row_epoch};
use crate::storage::{StorageError, StorageResult};

/// A history row held in memory: its key and value.
pub(in crate::storage) type HistoryRow<const H: usize> = ([u8; H], Vec<u8>);

/// The held rows of one history table whose keys are `H` bytes.
#[derive(Debug, Default)]
pub(in crate::storage) struct HeldRows<const H: usize> {
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
    pub(in crate::storage) fn record<T: ReadableTable<&'static [u8; H], &'static [u8]>>(
        &mut self,
        table: &T,
        key: &[u8; H],
        old: &[u8],
    ) -> StorageResult<bool> {
        self.record_with(key, old, |key| Ok(table.get(key)?.is_some()))
    }

    /// [`HeldRows::record`] with the table's read as `written`, which says whether the table
    /// has a row at a key; called only where the table may have one.
    pub(in crate::storage) fn record_with(
        &mut self,
        key: &[u8; H],
        old: &[u8],
        written: impl FnOnce(&[u8; H]) -> StorageResult<bool>,
    ) -> StorageResult<bool> {
        if self.rows.contains_key(key) {
            return Ok(false);
        }
        if self.written_through.is_some_and(|b| b >= row_block(key)) && written(key)? {
            return Ok(false);
        }
        self.rows.insert(*key, old.to_vec());
        Ok(true)
    }

    /// Rows held.
    pub(in crate::storage) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Takes out the rows of the epochs below `epoch`, in key order.
    pub(in crate::storage) fn take_below(&mut self, epoch: u32) -> Vec<HistoryRow<H>> {
        let (from, _) = epochs_bounds::<H>(epoch, epoch);
        let keep = self.rows.split_off(&from);
        let taken = std::mem::replace(&mut self.rows, keep);
        self.note_written(taken.keys().map(row_block).max());
        taken.into_iter().collect()
    }

    /// Takes out every row, in key order.
    pub(in crate::storage) fn take_all(&mut self) -> Vec<HistoryRow<H>> {
        self.take_below(u32::MAX)
    }

    fn note_written(&mut self, block: Option<u64>) {
        self.written_through = self.written_through.max(block);
    }
}

/// The held history rows of the epochs that a move of the head closes, taken out before the
/// close (`Writer::flush_before_close`) for it to write ([`crate::storage::history::index::follow_head`]).
#[derive(Debug, Default)]
pub(in crate::storage) struct ClosingRows {
    /// Of [`crate::storage::tables::HASHED_ACCOUNT_HISTORY`], in key order.
    pub(in crate::storage) accounts: Vec<HistoryRow<44>>,
    /// Of [`crate::storage::tables::HASHED_STORAGE_HISTORY`], in key order.
    pub(in crate::storage) slots: Vec<HistoryRow<76>>,
    /// Of [`crate::storage::tables::ACCOUNT_TRIE_HISTORY`], in key order.
    pub(in crate::storage) account_nodes: Vec<HistoryRow<45>>,
    /// Of [`crate::storage::tables::STORAGE_TRIE_HISTORY`], in key order.
    pub(in crate::storage) storage_nodes: Vec<HistoryRow<77>>,
}

/// The rows of `rows` (in key order) that belong to `epoch`.
pub(in crate::storage) fn rows_of<const H: usize>(
    rows: &[HistoryRow<H>],
    epoch: u32,
) -> &[HistoryRow<H>] {
    let lo = rows.partition_point(|(k, _)| row_epoch(k) < epoch);
    let hi = rows.partition_point(|(k, _)| row_epoch(k) <= epoch);
    &rows[lo..hi]
}

/// Writes `rows` (in key order, no key twice) into `table`, each epoch's with
/// [`write_epoch`].
pub(in crate::storage) fn write_rows<const H: usize>(
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

/// Whether `table` holds no row of `epoch`: one range step.
pub(in crate::storage) fn epoch_is_empty<
    const H: usize,
    T: ReadableTable<&'static [u8; H], &'static [u8]>,
>(
    table: &T,
    epoch: u32,
) -> StorageResult<bool> {
    let (lo, hi) = epochs_bounds::<H>(epoch, epoch);
    Ok(table.range::<&[u8; H]>(&lo..=&hi)?.next().is_none())
}

/// Writes rows of one epoch (in key order, no key twice) into `table`. If the table holds no
/// row of that epoch yet, they go in through one cursor, which fills each leaf before it
/// starts the next; otherwise each row is inserted (replacing a row with the same key), and
/// the epoch's close packs them later ([`pack_epoch`]).
pub(in crate::storage) fn write_epoch<const H: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    rows: &[HistoryRow<H>],
    name: &'static str,
) -> StorageResult<()> {
    let Some((first, _)) = rows.first() else { return Ok(()) };
    let epoch = row_epoch(first);
    if !epoch_is_empty(table, epoch)? {
        for (key, value) in rows {
            table.insert(key, value.as_slice())?;
        }
        return Ok(());
    }
    cursor_write(table, rows.iter().map(|(k, v)| (k, v.as_slice())), name, epoch, |_| Ok(()))
}

/// Rows of a closing epoch taken out of the table per batch by [`pack_epoch`]: bounds the
/// memory a close holds (at most this many rows, some hundred bytes each) whatever the epoch
/// changed.
const PACK_BATCH: usize = 16_384;

/// Writes a closing epoch's rows packed: `held` (this epoch's held rows, in key order, no key
/// twice) merged with the rows the table has of the epoch already (an earlier commit's), all
/// put in key order through one cursor, a batch of the table's rows at a time. Calls `each`
/// with every key of the epoch, in key order. A held row replaces a table row with the same
/// key.
///
/// While an epoch is open its rows arrive in random key order, so the B-tree splits leaves in
/// half and leaves them about 60 % full; written in key order through one cursor, each leaf is
/// filled before the next one starts. When the table has no row of the epoch (one transaction
/// held them all) this is one empty range step and the held rows' cursor write; when it has
/// some, only they are taken out and put back, not the held rows too.
pub(in crate::storage) fn pack_epoch<const H: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    epoch: u32,
    held: &[HistoryRow<H>],
    name: &'static str,
    mut each: impl FnMut(&[u8; H]) -> StorageResult<()>,
) -> StorageResult<()> {
    let (lo, hi) = epochs_bounds::<H>(epoch, epoch);
    let mut held = held.iter().peekable();
    let mut from = std::ops::Bound::Included(lo);
    let mut batch: Vec<([u8; H], Vec<u8>)> = Vec::new();
    loop {
        batch.clear();
        for item in table
            .extract_from_if::<&[u8; H], _>(
                (from.as_ref(), std::ops::Bound::Included(&hi)),
                |_, _| true,
            )?
            .take(PACK_BATCH)
        {
            let (k, v) = item?;
            batch.push((*k.value(), v.value().to_vec()));
        }
        // The table has no row of the epoch up to the batch's last key now, nor after it once
        // the batch came back short: the held rows up to there join this batch.
        let last = (batch.len() == PACK_BATCH).then(|| batch.last().map(|(k, _)| *k)).flatten();
        let mut merged: Vec<(&[u8; H], &[u8])> = Vec::with_capacity(batch.len());
        let mut taken = batch.iter().peekable();
        loop {
            let take_held = match (held.peek(), taken.peek()) {
                (Some((h, _)), _) if last.is_some_and(|last| *h > last) => false,
                (Some((h, _)), Some((t, _))) => h <= t,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if take_held {
                let Some((k, v)) = held.next() else { break };
                if taken.peek().is_some_and(|(t, _)| t == k) {
                    taken.next();
                }
                merged.push((k, v.as_slice()));
            } else {
                let Some((k, v)) = taken.next() else { break };
                merged.push((k, v.as_slice()));
            }
        }
        if merged.is_empty() {
            break;
        }
        cursor_write(table, merged.into_iter(), name, epoch, &mut each)?;
        let Some(last) = last else { break };
        from = std::ops::Bound::Excluded(last);
    }
    Ok(())
}

/// Puts `rows` (in key order, all in a range of `table` that holds no row) through one cursor,
/// calling `each` with every key first.
fn cursor_write<'r, const H: usize>(
    table: &mut Table<'_, &'static [u8; H], &'static [u8]>,
    mut rows: impl Iterator<Item = (&'r [u8; H], &'r [u8])>,
    name: &'static str,
    epoch: u32,
    mut each: impl FnMut(&[u8; H]) -> StorageResult<()>,
) -> StorageResult<()> {
    let Some((first, value)) = rows.next() else { return Ok(()) };
    let mut cursor = table.lower_bound_mut(std::ops::Bound::Included(first))?;
    for (key, value) in std::iter::once((first, value)).chain(rows) {
        each(key)?;
        cursor.insert_before(key, value).map_err(|e| StorageError::Corrupt {
            table: name,
            detail: format!("writing the rows of epoch {epoch}: {e}"),
        })?;
    }
    cursor.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::history::keys::row_key;
    use redb::ReadableTableMetadata;

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
        assert!(!epoch_is_empty(&table, 1).unwrap());
        assert!(epoch_is_empty(&table, 2).unwrap());
        write_epoch(&mut table, rows_of(&rest, 1), "test").unwrap();
        write_epoch(&mut table, rows_of(&rest, 2), "test").unwrap();
        let got: Vec<_> =
            table.iter().unwrap().map(|r| r.unwrap().1.value().to_vec()).collect::<Vec<_>>();
        assert_eq!(got, [b"c".to_vec(), b"a".to_vec(), b"f".to_vec(), b"d".to_vec()]);
    }

    /// Rows of epoch `epoch` for keys `ks`, each valued by its key and a tag.
    fn rows(epoch: u32, ks: impl Iterator<Item = u32>, tag: u8) -> Vec<HistoryRow<44>> {
        ks.map(|k| {
            let mut entity = [0u8; 32];
            entity[..4].copy_from_slice(&k.to_be_bytes());
            (row_key(epoch, &entity, 7), vec![tag; 1 + (k % 90) as usize])
        })
        .collect()
    }

    #[test]
    fn a_closing_epoch_merges_its_held_rows_with_the_tables_and_comes_out_packed() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("db")).unwrap();
        let def = crate::storage::tables::HASHED_ACCOUNT_HISTORY;
        let w = db.begin_write().unwrap();
        // Epoch 3 as an earlier commit left it: every third key, in random order (so its
        // leaves are split half full), across more than one batch; its neighbours' rows too.
        let n = 3 * PACK_BATCH as u32 + 1_000;
        let mut before = rows(3, (0..n).filter(|k| k % 3 == 0), b'a');
        let mut shuffle = 0x9e37_79b9_u64;
        for i in (1..before.len()).rev() {
            shuffle = shuffle.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            before.swap(i, (shuffle >> 33) as usize % (i + 1));
        }
        let outside = [rows(2, 0..50, b'x'), rows(4, 0..50, b'y')].concat();
        // Held: the other keys, a few of the table's keys again (the held row wins), and keys
        // before the table's first and after its last.
        let held = rows(3, (0..n + 500).filter(|k| k % 3 != 0 || k % 1_000 == 0), b'b');
        {
            let mut table = w.open_table(def).unwrap();
            for (k, v) in before.iter().chain(&outside) {
                table.insert(k, v.as_slice()).unwrap();
            }
            let mut seen = Vec::new();
            pack_epoch(&mut table, 3, &held, "test", |k| {
                seen.push(*k);
                Ok(())
            })
            .unwrap();
            let mut want: BTreeMap<[u8; 44], Vec<u8>> = before.iter().cloned().collect();
            want.extend(held.iter().cloned());
            want.extend(outside.iter().cloned());
            let got: BTreeMap<[u8; 44], Vec<u8>> = table
                .iter()
                .unwrap()
                .map(|r| r.map(|(k, v)| (*k.value(), v.value().to_vec())).unwrap())
                .collect();
            assert_eq!(got.len(), want.len());
            assert!(got == want, "the epoch's rows are the table's and the held ones, held first");
            let epoch3: Vec<[u8; 44]> =
                want.keys().filter(|k| row_epoch(k) == 3).copied().collect();
            assert_eq!(seen, epoch3, "every key of the epoch once, in key order");
        }
        // As packed as the same rows written in one go into an empty table.
        let packed = w.open_table(def).unwrap().stats().unwrap().leaf_pages();
        let fresh_def: redb::TableDefinition<'_, &[u8; 44], &[u8]> =
            redb::TableDefinition::new("f");
        let fresh = {
            let mut t = w.open_table(fresh_def).unwrap();
            let all: Vec<HistoryRow<44>> = w
                .open_table(def)
                .unwrap()
                .iter()
                .unwrap()
                .map(|r| r.map(|(k, v)| (*k.value(), v.value().to_vec())).unwrap())
                .collect();
            cursor_write(&mut t, all.iter().map(|(k, v)| (k, v.as_slice())), "f", 0, |_| Ok(()))
                .unwrap();
            t.stats().unwrap().leaf_pages()
        };
        assert!(packed * 100 <= fresh * 103, "{packed} leaves merged, {fresh} written at once");
    }
}
