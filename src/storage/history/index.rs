//! Upkeep of the epoch indexes: for each history table, an index of the closed epochs that
//! hold rows of each key (`key ++ run → bitmap`; keys laid out in `storage::history::keys`,
//! read by `storage::history::lookup`): bits set when a stamped row is replaced, epochs
//! indexed and packed when the head closes them, and the check `verify --history` runs.
//!
//! For the hashed state (accounts and slots) the index leaves out the epoch of a key's current
//! row's stamp: the row names it. On a chain whose keys mostly change in one epoch only, that
//! is most of the index: each close used to set a bit for nearly every key the epoch changed,
//! at a random place in an index that grows with the chain. Now a key's epoch is indexed when a
//! later write replaces its row (or, for a key the epoch deleted, at the close).
//!
//! Every epoch below the head's is indexed, in the write transaction that moves the head into
//! a later epoch ([`follow_head`]); moving the head back (an unwind) removes the index of every
//! epoch that is open again, so a database that unwound and re-imported equals one that only
//! imported, row for row. Indexing reads the closed epoch's rows once, in key order, and sets
//! one bit per key: its cost depends on what the epoch changed, not on the chain. The same pass
//! packs the closed epoch's rows into full leaves (see [`pack_epoch`]): the rows are unchanged,
//! the space they take is not.
//!
//! One index row covers a run of [`EPOCHS_PER_RUN`](crate::storage::history::keys::EPOCHS_PER_RUN) epochs, because trie nodes near the root
//! change in nearly every epoch: with a row per key and epoch, the trie indexes had 12 to 16
//! times as many rows as keys, and each epoch's close dirtied pages across all of them
//! (BENCHMARKS.md, "Where the growth along the chain goes").

use redb::{ReadableTable, Table, TableDefinition, Value, WriteTransaction};

use crate::storage::history::held::{ClosingRows, HistoryRow, pack_epoch, rows_of, write_rows};
use crate::storage::history::keys::{
    Epochs, epoch_bit, index_entity, index_key, index_run, row_entity, row_epoch, row_key,
    run_epochs, run_of,
};
use crate::storage::history::lookup::SnapshotHistory;
use crate::storage::tables;
use crate::storage::{StorageError, StorageResult};

/// The index of a stamped history table (see the module documentation), as the writer keeps it.
pub type StampIndex<'t, const I: usize> = Table<'t, &'static [u8; I], u64>;

/// Sets or clears the bit of `epoch` in `key`'s index row; a row left with none is removed.
fn set_bit<const K: usize, const I: usize>(
    index: &mut StampIndex<'_, I>,
    key: &[u8; K],
    epoch: u32,
    on: bool,
) -> StorageResult<()> {
    let ik: [u8; I] = index_key(key, run_of(epoch));
    let bits = index.get(&ik)?.map_or(0, |v| v.value());
    let new = if on { bits | epoch_bit(epoch) } else { bits & !epoch_bit(epoch) };
    if new != bits {
        if new == 0 {
            index.remove(&ik)?;
        } else {
            index.insert(&ik, new)?;
        }
    }
    Ok(())
}

/// Clears the bit of `epoch` in `key`'s index row (the trie-history stage, when a node is left
/// with no row in an epoch).
pub fn clear_bit<const K: usize, const I: usize>(
    index: &mut StampIndex<'_, I>,
    key: &[u8; K],
    epoch: u32,
) -> StorageResult<()> {
    set_bit(index, key, epoch, false)
}

/// A write of block `block` replaced (or removed) `key`'s current row, stamped `old`: the epoch
/// of `old` is no longer named by a current row, so the index takes it (unless it is the
/// block's own epoch, or `old` is the genesis allocation, which has no rows).
pub fn stamp_replaced<const K: usize, const I: usize>(
    index: &mut StampIndex<'_, I>,
    epochs: Epochs,
    key: &[u8; K],
    old: u64,
    block: u64,
) -> StorageResult<()> {
    set_stamp_bit(index, epochs, key, (old, block), true)
}

/// The inverse of [`stamp_replaced`], for an unwind of block `block` that makes the row stamped
/// `old` current again.
pub fn stamp_restored<const K: usize, const I: usize>(
    index: &mut StampIndex<'_, I>,
    epochs: Epochs,
    key: &[u8; K],
    old: u64,
    block: u64,
) -> StorageResult<()> {
    set_stamp_bit(index, epochs, key, (old, block), false)
}

/// Sets or clears the bit of `old`'s epoch, unless that is `block`'s epoch or `old` is 0.
fn set_stamp_bit<const K: usize, const I: usize>(
    index: &mut StampIndex<'_, I>,
    epochs: Epochs,
    key: &[u8; K],
    (old, block): (u64, u64),
    on: bool,
) -> StorageResult<()> {
    match stamped_epoch(epochs, old, block) {
        Some(epoch) => set_bit(index, key, epoch, on),
        None => Ok(()),
    }
}

/// The epoch whose index bit a change at `block` of a row stamped `old` concerns: `None` for the
/// genesis stamp (0) and for a stamp in `block`'s own epoch, which the current row names.
fn stamped_epoch(epochs: Epochs, old: u64, block: u64) -> Option<u32> {
    let epoch = epochs.of(old);
    (old != 0 && epoch != epochs.of(block)).then_some(epoch)
}

/// The index bit [`stamp_replaced`] would set, as `(index key, bit)`, for a writer that sets
/// them later with [`set_bits`]; `None` when it would set none.
pub fn replaced_bit<const K: usize, const I: usize>(
    epochs: Epochs,
    key: &[u8; K],
    old: u64,
    block: u64,
) -> Option<([u8; I], u64)> {
    let epoch = stamped_epoch(epochs, old, block)?;
    Some((index_key(key, run_of(epoch)), epoch_bit(epoch)))
}

/// Sets the bits of [`replaced_bit`], sorted by key first, so that each index row is read and
/// written once and each page is visited once.
pub fn set_bits<const I: usize>(
    index: &mut StampIndex<'_, I>,
    mut bits: Vec<([u8; I], u64)>,
) -> StorageResult<()> {
    bits.sort_unstable_by_key(|(k, _)| *k);
    let mut rows = bits.into_iter().peekable();
    while let Some((key, mut add)) = rows.next() {
        while let Some((_, more)) = rows.next_if(|(k, _)| *k == key) {
            add |= more;
        }
        let old = index.get(&key)?.map_or(0, |v| v.value());
        if old | add != old {
            index.insert(&key, old | add)?;
        }
    }
    Ok(())
}

/// Keeps the epoch indexes in step with a head that moves from `old` to `new`: indexes every
/// epoch that closes, and removes the index of every epoch that opens again (only an unwind,
/// which has removed the rows above `new`, moves the head back).
///
/// `held` are the history rows the transaction held for the epochs below the new head's
/// (`storage::history::held`): each closing epoch's are written by its close, the others (none,
/// as the head only moves forward past blocks it has stored) first.
pub(in crate::storage) fn follow_head(
    txn: &WriteTransaction,
    epochs: Epochs,
    old: Option<u64>,
    new: u64,
    held: &ClosingRows,
) -> StorageResult<()> {
    let (from, to) = (old.map_or(0, |o| epochs.of(o)), epochs.of(new));
    let outside = |epoch: u32| epoch < from || epoch >= to;
    write_where(txn, tables::HASHED_ACCOUNT_HISTORY, &held.accounts, outside)?;
    write_where(txn, tables::HASHED_STORAGE_HISTORY, &held.slots, outside)?;
    write_where(txn, tables::ACCOUNT_TRIE_HISTORY, &held.account_nodes, outside)?;
    write_where(txn, tables::STORAGE_TRIE_HISTORY, &held.storage_nodes, outside)?;
    for epoch in from..to {
        index_all(txn, epochs, epoch, true, held)?;
    }
    for epoch in (to..from).rev() {
        index_all(txn, epochs, epoch, false, held)?;
    }
    Ok(())
}

/// Writes the rows of `rows` whose epoch `pick` accepts.
fn write_where<const H: usize>(
    txn: &WriteTransaction,
    def: TableDefinition<'_, &'static [u8; H], &'static [u8]>,
    rows: &[HistoryRow<H>],
    pick: impl Fn(u32) -> bool,
) -> StorageResult<()> {
    let picked: Vec<HistoryRow<H>> =
        rows.iter().filter(|(k, _)| pick(row_epoch(k))).cloned().collect();
    if picked.is_empty() {
        return Ok(());
    }
    write_rows(&mut txn.open_table(def)?, &picked, "history")
}

/// Checks that the epoch `index` of `rows` names exactly the closed epochs (below `open`) that
/// hold rows of each key, leaving out, for a stamped table (`current` given), the epoch of the
/// key's current row's stamp: every other (key, closed epoch) of the rows has its bit set, and
/// no other bit is. For a stamped table it also checks that no key has rows after its stamp's
/// epoch, and that each stamp names a row (the key's history row of that very block). Returns
/// the (key, epoch) pairs checked. One pass over the rows with a point read or two per (key,
/// epoch), and one over the current rows: for `verify --history`.
pub fn check_index<const K: usize, const H: usize, const I: usize, V, C>(
    history: &SnapshotHistory<'_, H, I, V>,
    table: &'static str,
    current: Option<&C>,
) -> StorageResult<u64>
where
    V: Value + 'static,
    for<'a> V::SelfType<'a>: AsRef<[u8]>,
    C: ReadableTable<&'static [u8; K], &'static [u8]>,
{
    let corrupt = |detail: String| StorageError::Corrupt { table, detail };
    let hex = |key: &[u8]| alloy_primitives::hex::encode(key);
    let stamp_epoch = |key: &[u8; K]| -> StorageResult<Option<(u64, u32)>> {
        let Some(current) = current else { return Ok(None) };
        match current.get(key)? {
            Some(row) => {
                let stamp =
                    crate::storage::codec::account::row_stamp(row.value(), "current state")?;
                Ok((stamp > 0).then(|| (stamp, history.epochs.of(stamp))))
            }
            None => Ok(None),
        }
    };
    let mut checked = 0u64;
    let mut last: Option<(u32, [u8; K])> = None;
    history.for_each_key::<H, V>(|k| {
        let (epoch, key) = (row_epoch(k), row_entity::<K, H>(k));
        if last == Some((epoch, key)) {
            return Ok(());
        }
        last = Some((epoch, key));
        let named = stamp_epoch(&key)?;
        if let Some((stamp, e)) = named
            && epoch > e
        {
            return Err(corrupt(format!(
                "key {} has rows in epoch {epoch}, after its current row's stamp {stamp}",
                hex(&key)
            )));
        }
        if epoch >= history.open || named.is_some_and(|(_, e)| e == epoch) {
            return Ok(());
        }
        let bits = history.index.get(&index_key::<K, I>(&key, run_of(epoch)))?.map(|v| v.value());
        if bits.unwrap_or(0) & epoch_bit(epoch) == 0 {
            return Err(corrupt(format!(
                "key {} has rows in closed epoch {epoch} but the index does not name it",
                hex(&key)
            )));
        }
        checked += 1;
        Ok(())
    })?;
    if let Some(current) = current {
        for item in current.iter()? {
            let (k, v) = item?;
            let key = *k.value();
            let stamp = crate::storage::codec::account::row_stamp(v.value(), "current state")?;
            if stamp > 0
                && history
                    .get::<H, V>(&row_key::<K, H>(history.epochs.of(stamp), &key, stamp))?
                    .is_none()
            {
                return Err(corrupt(format!(
                    "the current row of key {} is stamped {stamp}, but that block has no history row of it",
                    hex(&key)
                )));
            }
        }
    }
    let mut named = 0u64;
    for item in history.index.iter()? {
        let (k, v) = item?;
        let (ik, bits) = (*k.value(), v.value());
        let key: [u8; K] = index_entity(&ik);
        if bits == 0 {
            return Err(corrupt(format!(
                "index row for key {} and run {} names no epoch",
                hex(&key),
                index_run(&ik)
            )));
        }
        named += u64::from(bits.count_ones());
    }
    if named != checked {
        // Find one to name: an open epoch, the current row's, or one that holds no row of the key.
        for item in history.index.iter()? {
            let (k, v) = item?;
            let (ik, bits) = (*k.value(), v.value());
            let key: [u8; K] = index_entity(&ik);
            for epoch in run_epochs(index_run(&ik), bits) {
                let why = if epoch >= history.open {
                    "which is open"
                } else if stamp_epoch(&key)?.is_some_and(|(_, e)| e == epoch) {
                    "which its current row names"
                } else if history.first_in::<K, H, V>(epoch, &key, 0)?.is_none() {
                    "which holds no row of it"
                } else {
                    continue;
                };
                return Err(corrupt(format!(
                    "the index names epoch {epoch} for key {}, {why}",
                    hex(&key)
                )));
            }
        }
        return Err(corrupt(format!("the index names {named} epochs where {checked} were due")));
    }
    Ok(checked)
}

fn index_all(
    txn: &WriteTransaction,
    epochs: Epochs,
    epoch: u32,
    add: bool,
    held: &ClosingRows,
) -> StorageResult<()> {
    let close = Close { epochs, epoch, add };
    close.one::<32, 44, 36>(
        txn,
        tables::HASHED_ACCOUNT_HISTORY,
        tables::HASHED_ACCOUNT_EPOCHS,
        Some(tables::HASHED_ACCOUNTS),
        rows_of(&held.accounts, epoch),
    )?;
    close.one::<64, 76, 68>(
        txn,
        tables::HASHED_STORAGE_HISTORY,
        tables::HASHED_STORAGE_EPOCHS,
        Some(tables::HASHED_STORAGE),
        rows_of(&held.slots, epoch),
    )?;
    close.one::<33, 45, 37>(
        txn,
        tables::ACCOUNT_TRIE_HISTORY,
        tables::ACCOUNT_TRIE_EPOCHS,
        None,
        rows_of(&held.account_nodes, epoch),
    )?;
    close.one::<65, 77, 69>(
        txn,
        tables::STORAGE_TRIE_HISTORY,
        tables::STORAGE_TRIE_EPOCHS,
        None,
        rows_of(&held.storage_nodes, epoch),
    )
}

/// The close (`add`) or reopening of one epoch.
#[derive(Clone, Copy)]
struct Close {
    epochs: Epochs,
    epoch: u32,
    add: bool,
}

impl Close {
    /// Sets (or clears) the bit of the epoch in the index row of every key with a row in it; a
    /// row left with no bit is removed. The rows come in key order, so the index rows are
    /// visited in order too. For a stamped table (`current` given), a key whose current row's
    /// stamp lies in the epoch gets no bit: that row names the epoch.
    ///
    /// Closing an epoch also writes its rows packed (`history::held::pack_epoch`): once closed
    /// they never change again (only an unwind removes some), so they are put in key order
    /// through one cursor, which writes full leaves where the open epoch's random-order inserts
    /// left them about 60 % full. The closed history takes about a third less space, and a
    /// read at an old block touches fewer pages.
    ///
    /// `held` are the epoch's rows that the transaction held (`storage::history::held`): merged
    /// with those an earlier commit wrote, so only the latter are taken out and put back.
    fn one<const K: usize, const H: usize, const I: usize>(
        self,
        txn: &WriteTransaction,
        rows: TableDefinition<'_, &'static [u8; H], &'static [u8]>,
        index: TableDefinition<'_, &'static [u8; I], u64>,
        current: Option<TableDefinition<'_, &'static [u8; K], &'static [u8]>>,
        held: &[HistoryRow<H>],
    ) -> StorageResult<()> {
        let Self { epochs, epoch, add } = self;
        let mut rows = txn.open_table(rows)?;
        let mut index = txn.open_table(index)?;
        let current = current.map(|c| txn.open_table(c)).transpose()?;
        let lo: [u8; H] = row_key(epoch, &[0u8; K], 0);
        let hi: [u8; H] = row_key(epoch, &[0xffu8; K], u64::MAX);
        let mut last: Option<[u8; K]> = None;
        let mut mark = |index: &mut StampIndex<'_, I>, key: [u8; K]| {
            if last == Some(key) {
                return Ok::<_, StorageError>(());
            }
            last = Some(key);
            if add && let Some(current) = &current {
                let named = match current.get(&key)? {
                    Some(row) => {
                        let stamp = crate::storage::codec::account::row_stamp(
                            row.value(),
                            "current state",
                        )?;
                        stamp > 0 && epochs.of(stamp) == epoch
                    }
                    None => false,
                };
                if named {
                    return Ok(());
                }
            }
            set_bit(index, &key, epoch, add)
        };
        if !add {
            for item in rows.range::<&[u8; H]>(&lo..=&hi)? {
                mark(&mut index, row_entity(item?.0.value()))?;
            }
            return Ok(());
        }
        pack_epoch(&mut rows, epoch, held, "history", |key| mark(&mut index, row_entity(key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::history::keys::EPOCHS_PER_RUN;
    use crate::storage::history::lookup::History;
    use crate::storage::tables::meta;
    use std::collections::BTreeMap;

    const E: u64 = 4;

    /// [`follow_head`] from `old` to `new` with no held rows, at the epochs `w`'s `meta` holds.
    fn follow(w: &WriteTransaction, old: Option<u64>, new: u64) {
        let epochs = crate::storage::history::keys::history_epochs(w).unwrap();
        follow_head(w, epochs, old, new, &Default::default()).unwrap();
    }

    /// A database with only the tables these tests use, epochs of [`E`] blocks.
    fn db() -> (tempfile::TempDir, redb::Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("t.redb")).unwrap();
        let w = db.begin_write().unwrap();
        w.open_table(tables::META)
            .unwrap()
            .insert(meta::HISTORY_EPOCH, E.to_be_bytes().as_slice())
            .unwrap();
        w.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
        w.open_table(tables::HASHED_STORAGE_HISTORY).unwrap();
        w.open_table(tables::HASHED_STORAGE_EPOCHS).unwrap();
        w.open_table(tables::ACCOUNT_TRIE_HISTORY).unwrap();
        w.open_table(tables::ACCOUNT_TRIE_EPOCHS).unwrap();
        w.open_table(tables::STORAGE_TRIE_HISTORY).unwrap();
        w.open_table(tables::STORAGE_TRIE_EPOCHS).unwrap();
        w.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
        w.open_table(tables::HASHED_ACCOUNTS).unwrap();
        w.open_table(tables::HASHED_STORAGE).unwrap();
        w.commit().unwrap();
        (dir, db)
    }

    fn index_rows(db: &redb::Database) -> Vec<([u8; 36], u64)> {
        let r = redb::ReadableDatabase::begin_read(db).unwrap();
        let t = r.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
        t.iter()
            .unwrap()
            .map(|i| {
                let (k, v) = i.unwrap();
                (*k.value(), v.value())
            })
            .collect()
    }

    /// The (key, epoch) pairs an index names.
    fn named(rows: &[([u8; 36], u64)]) -> usize {
        rows.iter().map(|(_, bits)| bits.count_ones() as usize).sum()
    }

    #[test]
    fn bits_set_later_in_key_order_equal_bits_set_at_once() {
        // Two indexes over the same replacements: one set as each happens (`stamp_replaced`),
        // one collected (`replaced_bit`) and set in one sorted pass (`set_bits`), with rows
        // that exist beforehand, repeated keys and runs, genesis stamps and same-epoch stamps.
        let (_dir, db) = db();
        let epochs = Epochs { len: E };
        let mut seed = 11u64;
        let mut rand = move |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let replacements: Vec<([u8; 32], u64, u64)> = (0..3000)
            .map(|_| {
                let key = [rand(40) as u8; 32];
                let block = 1 + rand(E * EPOCHS_PER_RUN as u64 * 3);
                (key, rand(block + 1), block)
            })
            .collect();
        let w = db.begin_write().unwrap();
        let ours: TableDefinition<'_, &[u8; 36], u64> = TableDefinition::new("deferred");
        let mut at_once = w.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
        let mut later = w.open_table(ours).unwrap();
        for (i, (key, _, _)) in replacements.iter().enumerate().take(20) {
            let row = index_key::<32, 36>(key, i as u32 % 3);
            at_once.insert(&row, 1u64 << i).unwrap();
            later.insert(&row, 1u64 << i).unwrap();
        }
        let mut bits = Vec::new();
        for (key, old, block) in &replacements {
            stamp_replaced(&mut at_once, epochs, key, *old, *block).unwrap();
            bits.extend(replaced_bit::<32, 36>(epochs, key, *old, *block));
        }
        assert!(bits.len() > 1000, "{}", bits.len());
        set_bits(&mut later, bits).unwrap();
        let rows = |t: &StampIndex<'_, 36>| -> Vec<([u8; 36], u64)> {
            t.iter().unwrap().map(|i| i.map(|(k, v)| (*k.value(), v.value())).unwrap()).collect()
        };
        assert_eq!(rows(&at_once), rows(&later));
        assert!(rows(&later).len() > 40);
    }

    /// Keys change at pseudo-random blocks, written as the writer writes them: the old current
    /// row (with its stamp) goes to history, the replaced stamp's epoch to the index, and the
    /// new row carries the block as its stamp. After every block, the value of every key after
    /// every N below the head equals the model's, and unwinding (rows restored, stamps given
    /// back to the index) leaves the current rows and the index as a database that only
    /// imported up to the same head. Epochs of [`E`] blocks over 41 blocks stay in one run of
    /// the index.
    #[test]
    fn reads_at_every_block_match_a_model_and_unwinding_restores_the_index() {
        model_run(E, 41, true);
    }

    /// The same over epochs of one block and 150 blocks: three runs of the index, so reads
    /// cross from one index row to the next.
    #[test]
    fn reads_across_index_runs_match_the_model() {
        assert!(150 > 2 * u64::from(EPOCHS_PER_RUN));
        model_run(1, 150, false);
    }

    fn current_rows(db: &redb::Database) -> Vec<([u8; 32], Vec<u8>)> {
        let r = redb::ReadableDatabase::begin_read(db).unwrap();
        let t = r.open_table(tables::HASHED_ACCOUNTS).unwrap();
        t.iter()
            .unwrap()
            .map(|i| {
                let (k, v) = i.unwrap();
                (*k.value(), v.value().to_vec())
            })
            .collect()
    }

    fn model_run(len: u64, head: u64, corrupt: bool) {
        use crate::storage::codec::account::{SlotRow, decode_slot, row_stamp};
        use alloy_primitives::U256;
        let (_dir, db) = db();
        let epochs = Epochs { len };
        if len != E {
            let w = db.begin_write().unwrap();
            w.open_table(tables::META)
                .unwrap()
                .insert(meta::HISTORY_EPOCH, len.to_be_bytes().as_slice())
                .unwrap();
            w.commit().unwrap();
        }
        let keys: Vec<[u8; 32]> = (0..7u8).map(|i| [i * 40; 32]).collect();
        // Keys 4 and 5 are in the genesis allocation (stamp 0); key 5 never changes.
        {
            let w = db.begin_write().unwrap();
            let mut current = w.open_table(tables::HASHED_ACCOUNTS).unwrap();
            for i in [4, 5] {
                current
                    .insert(&keys[i], SlotRow::new(0, &U256::from(1000 + i)).as_slice())
                    .unwrap();
            }
            drop(current);
            w.commit().unwrap();
        }
        // key → block → the value the block left (`None`: deleted).
        let mut model: BTreeMap<[u8; 32], BTreeMap<u64, Option<u64>>> = BTreeMap::new();
        for i in [4usize, 5] {
            model.entry(keys[i]).or_default().insert(0, Some(1000 + i as u64));
        }
        let value_after = |model: &BTreeMap<[u8; 32], BTreeMap<u64, Option<u64>>>, key, n| {
            model.get(key).and_then(|m| m.range(..=n).next_back()).and_then(|(_, v)| *v)
        };
        let mut seed = 11u64;
        let mut rand = move |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut state_at = BTreeMap::new();
        for block in 1..=head {
            let w = db.begin_write().unwrap();
            {
                let mut rows = w.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
                let mut current = w.open_table(tables::HASHED_ACCOUNTS).unwrap();
                let mut index = w.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
                // Key 0 changes every block, key 5 never; the rest now and then, keys 1 to 3
                // sometimes by deletion.
                for (i, key) in keys.iter().enumerate() {
                    let changes = match i {
                        0 => true,
                        5 => false,
                        _ => rand(5) == 0,
                    };
                    if !changes {
                        continue;
                    }
                    let deleted = (1..=3).contains(&i) && rand(3) == 0;
                    let value = (!deleted).then_some(block * 10 + i as u64);
                    let old = match value {
                        Some(v) => {
                            current.insert(key, SlotRow::new(block, &U256::from(v)).as_slice())
                        }
                        None => current.remove(key),
                    }
                    .unwrap()
                    .map(|v| v.value().to_vec());
                    if let Some(old) = &old {
                        let stamp = row_stamp(old, "t").unwrap();
                        stamp_replaced(&mut index, epochs, key, stamp, block).unwrap();
                    }
                    let k: [u8; 44] = epochs.history_key(key, block);
                    rows.insert(&k, old.unwrap_or_default().as_slice()).unwrap();
                    model.entry(*key).or_default().insert(block, value);
                }
            }
            follow(&w, Some(block - 1), block);
            w.commit().unwrap();
            state_at.insert(block, (index_rows(&db), current_rows(&db)));

            let r = redb::ReadableDatabase::begin_read(&db).unwrap();
            let rows = r.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
            let index = r.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
            let current = r.open_table(tables::HASHED_ACCOUNTS).unwrap();
            let h = History {
                rows: &rows,
                index: &index,
                epochs,
                open: epochs.of(block),
                frozen: None,
            };
            for key in &keys {
                let now = current.get(key).unwrap().map(|v| v.value().to_vec());
                let stamp = now.as_ref().map(|r| row_stamp(r, "t").unwrap());
                for n in 0..=block {
                    let row = match h.first_after::<32, 44, 36, &[u8]>(key, n, stamp).unwrap() {
                        Some((_, row)) => row,
                        None => now.clone().unwrap_or_default(),
                    };
                    let got =
                        (!row.is_empty()).then(|| decode_slot(&row, "t").unwrap().1.to::<u64>());
                    assert_eq!(
                        got,
                        value_after(&model, key, n),
                        "key {} after block {n} at head {block}",
                        key[0]
                    );
                }
            }
        }
        // Only closed epochs are indexed: one bit per key and epoch that holds its rows, but
        // for the epoch its current row's stamp names.
        let want: usize = (0..epochs.of(head))
            .map(|e| {
                keys.iter()
                    .filter(|k| {
                        let Some(m) = model.get(*k) else { return false };
                        let named = m.iter().next_back().filter(|(b, v)| **b > 0 && v.is_some());
                        m.keys().any(|b| *b > 0 && epochs.of(*b) == e)
                            && named.is_none_or(|(b, _)| epochs.of(*b) != e)
                    })
                    .count()
            })
            .sum();
        assert_eq!(named(&index_rows(&db)), want);
        assert!(want > 10, "only {want} indexed epochs");
        let check = |db: &redb::Database| {
            let r = redb::ReadableDatabase::begin_read(db).unwrap();
            let rows = r.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
            let index = r.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
            let current = r.open_table(tables::HASHED_ACCOUNTS).unwrap();
            let h =
                History { rows: &rows, index: &index, epochs, open: epochs.of(head), frozen: None };
            check_index::<32, 44, 36, &[u8], _>(&h, "t", Some(&current)).map_err(|e| e.to_string())
        };
        assert_eq!(check(&db), Ok(want as u64));
        if corrupt {
            // A missing bit, a bit for the open epoch, a bit for the epoch a current row names
            // and a row with no bit are each named.
            type Index<'a> = redb::Table<'a, &'static [u8; 36], u64>;
            let edit = |f: &dyn Fn(&mut Index<'_>)| {
                let w = db.begin_write().unwrap();
                f(&mut w.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap());
                w.commit().unwrap();
            };
            let (first, bits) = index_rows(&db)[0];
            let lowest = bits & bits.wrapping_neg();
            edit(&|t| {
                t.insert(&first, bits & !lowest).unwrap();
            });
            assert!(check(&db).unwrap_err().contains("does not name it"), "{:?}", check(&db));
            edit(&|t| {
                t.insert(&first, bits).unwrap();
            });
            assert_eq!(check(&db), Ok(want as u64));
            let open = epochs.of(head);
            let mut flips = vec![(keys[1], open, "which is open")];
            let stamped = current_rows(&db).into_iter().find_map(|(k, row)| {
                let stamp = row_stamp(&row, "t").unwrap();
                (stamp > 0 && epochs.of(stamp) < open).then(|| (k, epochs.of(stamp)))
            });
            let (key, epoch) = stamped.expect("a key whose stamp lies in a closed epoch");
            flips.push((key, epoch, "which its current row names"));
            for (key, epoch, why) in flips {
                let ik: [u8; 36] = index_key(&key, run_of(epoch));
                let before = index_rows(&db).into_iter().find(|(k, _)| *k == ik).map(|r| r.1);
                edit(&|t| {
                    t.insert(&ik, before.unwrap_or(0) | epoch_bit(epoch)).unwrap();
                });
                assert!(check(&db).unwrap_err().contains(why), "{why}: {:?}", check(&db));
                edit(&|t| {
                    match before {
                        Some(bits) => t.insert(&ik, bits).map(drop).unwrap(),
                        None => t.remove(&ik).map(drop).unwrap(),
                    };
                });
            }
            // A stamp that names no history row, and one older than the key's rows.
            let (key, row) = current_rows(&db)
                .into_iter()
                .find(|(k, _)| *k == keys[0])
                .expect("key 0 exists: it changes in every block");
            let (stamp, value) = decode_slot(&row, "t").unwrap();
            for (bad, why) in
                [(stamp + 1, "that block has no history row"), (1, "after its current row's stamp")]
            {
                let put = |row: &[u8]| {
                    let w = db.begin_write().unwrap();
                    w.open_table(tables::HASHED_ACCOUNTS).unwrap().insert(&key, row).unwrap();
                    w.commit().unwrap();
                };
                put(SlotRow::new(bad, &value).as_slice());
                assert!(check(&db).unwrap_err().contains(why), "{why}: {:?}", check(&db));
                put(&row);
            }
            assert_eq!(check(&db), Ok(want as u64));
            let empty: [u8; 36] = index_key(&[0xee; 32], 0);
            edit(&|t| {
                t.insert(&empty, 0).unwrap();
            });
            assert!(check(&db).unwrap_err().contains("names no epoch"), "{:?}", check(&db));
            edit(&|t| {
                t.remove(&empty).unwrap();
            });
            assert_eq!(check(&db), Ok(want as u64));
        }

        // Unwind block by block (rows and current rows first, then the head), comparing the
        // index and the current rows each time.
        for block in (2..=head).rev() {
            let w = db.begin_write().unwrap();
            {
                let mut rows = w.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
                let mut current = w.open_table(tables::HASHED_ACCOUNTS).unwrap();
                let mut index = w.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
                for key in &keys {
                    let k: [u8; 44] = epochs.history_key(key, block);
                    let Some(old) = rows.remove(&k).unwrap().map(|v| v.value().to_vec()) else {
                        continue;
                    };
                    if old.is_empty() {
                        current.remove(key).unwrap();
                    } else {
                        let stamp = row_stamp(&old, "t").unwrap();
                        stamp_restored(&mut index, epochs, key, stamp, block).unwrap();
                        current.insert(key, old.as_slice()).unwrap();
                    }
                }
            }
            follow(&w, Some(block), block - 1);
            w.commit().unwrap();
            let at = (index_rows(&db), current_rows(&db));
            assert_eq!(
                at,
                state_at[&(block - 1)],
                "index and current rows after unwinding {block}"
            );
        }
    }

    /// Closing an epoch packs its rows: a database whose epoch closed holds the same rows as
    /// one where it did not, in fewer leaves. Rows written in random key order leave leaves
    /// part empty; the close rewrites them full.
    #[test]
    fn closing_an_epoch_packs_its_rows_and_keeps_them() {
        use redb::ReadableTableMetadata;
        let epochs = Epochs { len: E };
        let (closed, open) = (db(), db());
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed
        };
        // Epoch 0 (blocks 0..E) and the first block of epoch 1, keys in random order.
        for block in 0..=E {
            let mut batch = vec![];
            for _ in 0..(if block == E { 300 } else { 5_000 }) {
                let mut key = [0u8; 32];
                for c in key.chunks_mut(8) {
                    c.copy_from_slice(&next().to_be_bytes());
                }
                batch.push((key, vec![block as u8; 20 + (next() % 40) as usize]));
            }
            for (db, close) in [(&closed.1, true), (&open.1, false)] {
                let w = db.begin_write().unwrap();
                {
                    let mut rows = w.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
                    for (key, value) in &batch {
                        let k: [u8; 44] = epochs.history_key(key, block);
                        rows.insert(&k, value.as_slice()).unwrap();
                    }
                }
                if close && block > 0 {
                    follow(&w, Some(block - 1), block);
                }
                w.commit().unwrap();
            }
        }
        let all = |db: &redb::Database| {
            let r = redb::ReadableDatabase::begin_read(db).unwrap();
            let t = r.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
            let rows: Vec<([u8; 44], Vec<u8>)> = t
                .iter()
                .unwrap()
                .map(|i| {
                    let (k, v) = i.unwrap();
                    (*k.value(), v.value().to_vec())
                })
                .collect();
            (rows, t.stats().unwrap().leaf_pages())
        };
        let ((packed, packed_leaves), (loose, loose_leaves)) = (all(&closed.1), all(&open.1));
        assert_eq!(packed.len(), 5_000 * E as usize + 300);
        assert!(packed == loose, "closing the epoch changed its rows");
        assert!(
            packed_leaves * 5 < loose_leaves * 4,
            "{packed_leaves} leaves after the close, {loose_leaves} without it"
        );
        // And every key of the closed epoch is indexed.
        assert_eq!(named(&index_rows(&closed.1)), 5_000 * E as usize);
    }

    #[test]
    fn an_index_row_without_rows_is_reported() {
        let (_dir, db) = db();
        let epochs = Epochs { len: E };
        let w = db.begin_write().unwrap();
        let key = [9u8; 32];
        w.open_table(tables::HASHED_ACCOUNT_EPOCHS)
            .unwrap()
            .insert(&index_key::<32, 36>(&key, run_of(1)), epoch_bit(1))
            .unwrap();
        w.commit().unwrap();
        let r = redb::ReadableDatabase::begin_read(&db).unwrap();
        let rows = r.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
        let index = r.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
        let h = History { rows: &rows, index: &index, epochs, open: 3, frozen: None };
        let err = h.first_after::<32, 44, 36, &[u8]>(&key, 2, None).unwrap_err();
        assert!(err.to_string().contains("epoch 1 is indexed"), "{err}");
    }
}
