//! The history lookup: [`History`] answers "the first row of a key after block N" over a
//! history table and its epoch index, wherever the rows are (the B-tree or segment files).
//! Rows are keyed `epoch ++ key ++ block` (`storage::history::keys`); the index is kept by
//! `storage::history::index`.
//!
//! Keyed entity first (`key ++ block`), every history row a block writes lands beside that
//! key's older rows, at a random place in a table that grows with the chain, and once the table
//! has more leaves than a commit group has rows each row dirties a page of its own: a block's
//! import cost grew with the chain's length. With the epoch first, a block's rows land in the
//! open epoch's range, which holds at most one epoch of rows.
//!
//! The value of key K after block N is that of K's first history row after N:
//! 1. in the epoch of N+1, from N+1 on (one range seek);
//! 2. else in the first closed epoch after it that holds a row of K: one seek in the index
//!    (`K ++ run → bitmap`, one bit per epoch of a run of
//!    [`EPOCHS_PER_RUN`](crate::storage::history::keys::EPOCHS_PER_RUN)), then the first
//!    row of K in that epoch;
//! 3. else in the open epoch (the head's), which is not indexed yet;
//! 4. else K has not changed since N: the current table answers.
//!
//! For the hashed state (accounts and slots) the current row carries a stamp, the block that
//! wrote it (`codec::account::row_stamp`), and the index leaves out the epoch of that stamp: the row
//! names it. So a key whose stamp is at or before N needs no seek at all; otherwise its rows
//! after N end in the stamp's epoch, which is read when steps 1 and 2 find nothing.

use redb::{ReadableTable, Value};

use crate::storage::history::keys::{
    Epochs, index_key, index_run, row_block, row_epoch, row_key, run_epochs, run_of,
};
use crate::storage::segments::{Kind, Segments};
use crate::storage::{StorageError, StorageResult};

/// A segment row's key as the table's `H`-byte key (a corrupt file's key of another length is
/// named).
fn segment_key<const H: usize>(k: &[u8]) -> StorageResult<&[u8; H]> {
    <&[u8; H]>::try_from(k).map_err(|_| StorageError::Corrupt {
        table: "history segment",
        detail: format!("a key of {} bytes where {H} were due", k.len()),
    })
}

/// A history row: its block and value.
pub type Row = (u64, Vec<u8>);

/// The first row of `key` in `epoch` at or after block `from`.
pub fn first_in<const K: usize, const H: usize, V>(
    rows: &impl ReadableTable<&'static [u8; H], V>,
    epoch: u32,
    key: &[u8; K],
    from: u64,
) -> StorageResult<Option<Row>>
where
    V: Value + 'static,
    for<'a> V::SelfType<'a>: AsRef<[u8]>,
{
    let lo: [u8; H] = row_key(epoch, key, from);
    let hi: [u8; H] = row_key(epoch, key, u64::MAX);
    match rows.range::<&[u8; H]>(&lo..=&hi)?.next() {
        Some(item) => {
            let (k, v) = item?;
            Ok(Some((row_block(k.value()), v.value().as_ref().to_vec())))
        }
        None => Ok(None),
    }
}

/// The first closed epoch in `from..=to` that holds a row of `key`, from the index: the
/// lowest bit in range of the key's first index row at or after `from`'s run (and of the next
/// one, when that row's bits in range all lie below `from`).
pub fn indexed_epoch<const K: usize, const I: usize>(
    index: &impl ReadableTable<&'static [u8; I], u64>,
    key: &[u8; K],
    from: u32,
    to: u32,
) -> StorageResult<Option<u32>> {
    if from > to {
        return Ok(None);
    }
    let lo: [u8; I] = index_key(key, run_of(from));
    let hi: [u8; I] = index_key(key, run_of(to));
    for item in index.range::<&[u8; I]>(&lo..=&hi)? {
        let (k, v) = item?;
        let run = index_run(k.value());
        if let Some(epoch) = run_epochs(run, v.value()).find(|e| (from..=to).contains(e)) {
            return Ok(Some(epoch));
        }
    }
    Ok(None)
}

/// A history table of `H`-byte keys and `V` values with its `I`-byte epoch index, as a read
/// snapshot opens them.
pub type SnapshotHistory<'t, const H: usize, const I: usize, V> = History<
    't,
    redb::ReadOnlyTable<&'static [u8; H], V>,
    redb::ReadOnlyTable<&'static [u8; I], u64>,
>;

/// One history table with its epoch index, read in a snapshot whose head is in epoch `open`.
/// Rows of epochs below `frozen`'s `frozen_to` are read from its segments, the others from
/// `rows`.
pub struct History<'t, R, X> {
    /// The history rows still in the B-tree.
    pub rows: &'t R,
    /// The epoch index.
    pub index: &'t X,
    /// The datadir's epoch length.
    pub epochs: Epochs,
    /// The head's epoch: the one that is not indexed yet.
    pub open: u32,
    /// The snapshot's segments and the kind of this table's.
    pub frozen: Option<(&'t Segments, Kind)>,
}

impl<R, X> std::fmt::Debug for History<'_, R, X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("epochs", &self.epochs).field("open", &self.open).finish()
    }
}

impl<R, X> Clone for History<'_, R, X> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R, X> Copy for History<'_, R, X> {}

impl<'t, R, X> History<'t, R, X> {
    /// The segments that hold `epoch`'s rows, if they are frozen.
    fn frozen_at(&self, epoch: u32) -> Option<(&'t Segments, Kind)> {
        self.frozen.filter(|(s, _)| s.holds(epoch))
    }

    /// The first row of `key` in `epoch` at or after block `from`, from the segments or the
    /// B-tree, wherever the epoch is.
    pub fn first_in<const K: usize, const H: usize, V>(
        &self,
        epoch: u32,
        key: &[u8; K],
        from: u64,
    ) -> StorageResult<Option<Row>>
    where
        R: ReadableTable<&'static [u8; H], V>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        let Some((segments, kind)) = self.frozen_at(epoch) else {
            return first_in(self.rows, epoch, key, from);
        };
        let lo: [u8; H] = row_key(epoch, key, from);
        let hi: [u8; H] = row_key(epoch, key, u64::MAX);
        Ok(segments.first(kind, epoch, &lo, &hi)?.and_then(|(k, v)| {
            let k: [u8; H] = k.try_into().ok()?;
            Some((row_block(&k), v))
        }))
    }

    /// Calls `f` with each row in `lo..=hi` (keys of one epoch), in key order, until it
    /// returns `false`.
    pub fn scan<const H: usize, V>(
        &self,
        lo: &[u8; H],
        hi: &[u8; H],
        mut f: impl FnMut(&[u8; H], &[u8]) -> StorageResult<bool>,
    ) -> StorageResult<()>
    where
        R: ReadableTable<&'static [u8; H], V>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        let epoch = row_epoch(lo);
        if let Some((segments, kind)) = self.frozen_at(epoch) {
            return segments.scan(kind, epoch, lo, hi, |k, v| f(segment_key::<H>(k)?, v));
        }
        for item in self.rows.range::<&[u8; H]>(lo..=hi)? {
            let (k, v) = item?;
            if !f(k.value(), v.value().as_ref())? {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with the rows of `key` from block `from` of `epoch` on, to the end of the
    /// place that holds that epoch's rows, in block order, until it returns `false`: the
    /// epoch's end in the B-tree, or the end of the segment file covering it, whose rows of
    /// one entity run on across its later epochs
    /// ([`crate::storage::segments::Kind::is_entity_first`]).
    pub fn scan_node<const K: usize, const H: usize, V>(
        &self,
        epoch: u32,
        key: &[u8; K],
        from: u64,
        mut f: impl FnMut(&[u8; H], &[u8]) -> StorageResult<bool>,
    ) -> StorageResult<()>
    where
        R: ReadableTable<&'static [u8; H], V>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        let lo: [u8; H] = row_key(epoch, key, from);
        let Some((segments, kind)) = self.frozen_at(epoch) else {
            let hi: [u8; H] = row_key(epoch, key, u64::MAX);
            return self.scan::<H, V>(&lo, &hi, f);
        };
        segments.scan_node(kind, &lo, |k, v| f(segment_key::<H>(k)?, v))
    }

    /// Where `epoch`'s rows are kept, as a place whose rows of one trie node run as one chain
    /// (`storage::history::nodes`): `(true, first epoch)` of the segment file covering it, or
    /// `(false, epoch)` in the B-tree (or a file that keeps one epoch's rows apart).
    pub fn place(&self, epoch: u32) -> (bool, u32) {
        match self.frozen_at(epoch) {
            Some((segments, kind)) if kind.is_node_first() => {
                segments.file_of(kind, epoch).map_or((false, epoch), |first| (true, first))
            }
            _ => (false, epoch),
        }
    }

    /// The row at `key`, wherever its epoch is.
    pub fn get<const H: usize, V>(&self, key: &[u8; H]) -> StorageResult<Option<Vec<u8>>>
    where
        R: ReadableTable<&'static [u8; H], V>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        let mut out = None;
        self.scan(key, key, |_, v| {
            out = Some(v.to_vec());
            Ok(false)
        })?;
        Ok(out)
    }

    /// Calls `f` with every row, newest epochs first (the B-tree's, then the segments'), in
    /// reverse key order.
    pub fn for_each_row_rev<const H: usize, V>(
        &self,
        mut f: impl FnMut(&[u8; H], &[u8]) -> StorageResult<()>,
    ) -> StorageResult<()>
    where
        R: ReadableTable<&'static [u8; H], V>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        for item in self.rows.iter()?.rev() {
            let (k, v) = item?;
            f(k.value(), v.value().as_ref())?;
        }
        if let Some((segments, kind)) = self.frozen {
            segments.for_each_rev(kind, |k, v| f(segment_key::<H>(k)?, v))?;
        }
        Ok(())
    }

    /// Calls `f` with the key of every row, frozen ones first (their epochs are the older),
    /// in key order.
    pub fn for_each_key<const H: usize, V>(
        &self,
        mut f: impl FnMut(&[u8; H]) -> StorageResult<()>,
    ) -> StorageResult<()>
    where
        R: ReadableTable<&'static [u8; H], V>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        if let Some((segments, kind)) = self.frozen {
            segments.for_each(kind, |k, _| f(segment_key::<H>(k)?))?;
        }
        for item in self.rows.iter()? {
            f(item?.0.value())?;
        }
        Ok(())
    }

    /// The first row of `key` after block `after` (see the module documentation), `None` if
    /// the key has not changed since. `stamp` is the stamp of the key's current row when the
    /// table is stamped and the key exists (`None` otherwise, and for the trie tables).
    pub fn first_after<const K: usize, const H: usize, const I: usize, V>(
        &self,
        key: &[u8; K],
        after: u64,
        stamp: Option<u64>,
    ) -> StorageResult<Option<Row>>
    where
        R: ReadableTable<&'static [u8; H], V>,
        X: ReadableTable<&'static [u8; I], u64>,
        V: Value + 'static,
        for<'a> V::SelfType<'a>: AsRef<[u8]>,
    {
        if stamp.is_some_and(|s| s <= after) {
            return Ok(None);
        }
        let Some(from) = after.checked_add(1) else { return Ok(None) };
        let mut epoch = self.epochs.of(from);
        let file_end = self
            .frozen_at(epoch)
            .and_then(|(segments, kind)| segments.entity_first_span(kind, epoch))
            .map(|(_, last)| last);
        match file_end {
            // An entity-first file holds the key's rows of all its epochs together: its first
            // row from `from` on is the answer if it has one, and the index is needed only for
            // epochs after the file.
            Some(last_in_file) => {
                let mut found = None;
                self.scan_node::<K, H, V>(epoch, key, from, |k, v| {
                    found = Some((row_block(k), v.to_vec()));
                    Ok(false)
                })?;
                if found.is_some() {
                    return Ok(found);
                }
                epoch = last_in_file;
            }
            None => {
                if let Some(row) = self.first_in(epoch, key, from)? {
                    return Ok(Some(row));
                }
            }
        }
        if epoch >= self.open {
            return Ok(None);
        }
        let corrupt = |detail: String| StorageError::Corrupt {
            table: "history epoch index",
            detail: format!("{detail} (key {})", alloy_primitives::hex::encode(key)),
        };
        // The stamp's epoch is the key's last with rows, and the index leaves it out.
        let (last, hi) = match stamp.map(|s| self.epochs.of(s)) {
            Some(last) if last <= epoch => {
                return Err(corrupt(format!(
                    "the current row was written at block {} but epochs to {epoch} hold no row after {after}",
                    stamp.unwrap_or_default()
                )));
            }
            Some(last) => (last.min(self.open), last.min(self.open) - 1),
            None => (self.open, self.open - 1),
        };
        if let Some(later) = indexed_epoch(self.index, key, epoch + 1, hi)? {
            return match self.first_in(later, key, 0)? {
                Some(row) => Ok(Some(row)),
                None => Err(corrupt(format!("epoch {later} is indexed but holds no row of it"))),
            };
        }
        match self.first_in(last, key, 0)? {
            None if stamp.is_some() => {
                Err(corrupt(format!("the current row's epoch {last} holds no row of it")))
            }
            row => Ok(row),
        }
    }
}
