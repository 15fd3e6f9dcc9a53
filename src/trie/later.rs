//! The hashed state after a stage range, kept for the next one: every key changed since, with
//! its value then, so the range's leaves are the current rows with those laid over them.
//!
//! The stage (`stage.rs`) reads the leaves of each range as after its last block. Through the
//! history tables (`history::Versioned::scan`) a key changed since costs a seek into a later
//! epoch's rows, and on a long chain whose hot keys change every few blocks that is most of the
//! keys a range reads: on the 10,000-block chain over 1M accounts the stage spent most of its
//! 49 ms a block in those seeks (docs/benchmarks/issue-62.md). After a bulk import the stage
//! runs ranges one after the other with nothing else writing the state, so those values are
//! read once instead: [`Later::build`] takes, for every key with a history row after a block,
//! its first such row (its value then) in one pass over the later epochs' rows in key order,
//! and [`Later::advance`] moves it past the next range with the values the range computes for
//! its own keys anyway (a key not changed in the range keeps its value). No crate keeps such a
//! versioned overlay over redb tables; this is the stage's own.

use super::TrieError;
use crate::storage::history::keys::{row_block, row_entity, row_key};
use crate::storage::history::lookup::SnapshotHistory;

/// Bytes an entry costs besides its value (key, box, allocation).
const ENTRY_OVERHEAD: usize = 32;

/// The keys of one stamped table changed after a block, each with its value after the block
/// (empty: it did not exist), in key order.
#[derive(Debug, Default)]
pub(crate) struct Changed<const K: usize> {
    rows: Vec<([u8; K], Box<[u8]>)>,
}

impl<const K: usize> Changed<K> {
    /// The key's value after the block if it changed since (empty: it did not exist then);
    /// `None`: it did not change, its current row is its value.
    pub(crate) fn get(&self, key: &[u8; K]) -> Option<&[u8]> {
        self.rows.binary_search_by(|(k, _)| k.cmp(key)).ok().map(|i| &*self.rows[i].1)
    }

    /// The changed keys in `from..=last`, in order.
    pub(crate) fn span(&self, from: &[u8; K], last: &[u8; K]) -> &[([u8; K], Box<[u8]>)] {
        let lo = self.rows.partition_point(|(k, _)| k < from);
        let hi = self.rows.partition_point(|(k, _)| k <= last);
        &self.rows[lo..hi.max(lo)]
    }

    /// How many keys it holds.
    #[allow(clippy::len_without_is_empty)]
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    fn bytes(&self) -> usize {
        self.rows.iter().map(|(_, v)| K + ENTRY_OVERHEAD + v.len()).sum()
    }

    /// Gives the keys of `values` (in key order) their value there: in place for the keys it
    /// holds (every key a later range changes had a row after the set's first block, so all of
    /// them, without the copy a merge makes of the whole set), merged for any other.
    fn replace(&mut self, values: Vec<([u8; K], Box<[u8]>)>) {
        let mut new = Vec::new();
        let mut at = 0;
        for (key, value) in values {
            match self.rows[at..].binary_search_by(|(k, _)| k.cmp(&key)) {
                Ok(i) => {
                    at += i;
                    self.rows[at].1 = value;
                }
                Err(i) => {
                    at += i;
                    new.push((key, value));
                }
            }
        }
        self.merge(new, true);
    }

    /// Merges `other` (in key order) in; for a key in both, `prefer_other` says whose value
    /// stays.
    fn merge(&mut self, other: Vec<([u8; K], Box<[u8]>)>, prefer_other: bool) {
        if other.is_empty() {
            return;
        }
        let mine = std::mem::take(&mut self.rows);
        let mut out = Vec::with_capacity(mine.len() + other.len());
        let (mut a, mut b) = (mine.into_iter().peekable(), other.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => break,
            };
            match next {
                std::cmp::Ordering::Less => out.extend(a.next()),
                std::cmp::Ordering::Greater => out.extend(b.next()),
                std::cmp::Ordering::Equal => {
                    let (x, y) = (a.next(), b.next());
                    out.extend(if prefer_other { y } else { x });
                }
            }
        }
        self.rows = out;
    }

    /// Every key with a history row after block `at` and the value of its first one: the
    /// rows of each later epoch in key order, earliest epoch first. `None` past `budget` bytes.
    fn build<const H: usize, const I: usize>(
        history: &SnapshotHistory<'_, H, I, &'static [u8]>,
        at: u64,
        budget: usize,
    ) -> Result<Option<Self>, TrieError> {
        let mut out = Self::default();
        let mut bytes = 0usize;
        let first = history.epochs.of(at.saturating_add(1));
        for epoch in first..=history.open.max(first) {
            let lo: [u8; H] = row_key(epoch, &[0u8; K], 0);
            let hi: [u8; H] = row_key(epoch, &[0xffu8; K], u64::MAX);
            let mut rows: Vec<([u8; K], Box<[u8]>)> = Vec::new();
            let mut over = false;
            history.scan::<H, &'static [u8]>(&lo, &hi, |k, v| {
                if row_block(k) <= at {
                    return Ok(true);
                }
                let key = row_entity::<K, H>(k);
                // Rows of a key run in block order: its first row in the epoch comes first.
                if rows.last().is_some_and(|(last, _)| *last == key) {
                    return Ok(true);
                }
                if out.get(&key).is_none() {
                    bytes += K + ENTRY_OVERHEAD + v.len();
                }
                rows.push((key, v.into()));
                over = bytes > budget;
                Ok(!over)
            })?;
            if over {
                return Ok(None);
            }
            // An earlier epoch's row is the first after `at`.
            out.merge(rows, false);
        }
        Ok(Some(out))
    }
}

/// The hashed accounts and storage after block `at`, for the keys changed since.
#[derive(Debug)]
pub(crate) struct Later {
    /// The block the values are as after.
    pub(crate) at: u64,
    /// The head of the snapshot they were read from: a datadir whose head moved since has
    /// rows this does not hold.
    pub(crate) head: u64,
    pub(crate) accounts: Changed<32>,
    pub(crate) slots: Changed<64>,
}

/// The bound on a [`Later`]'s bytes: past it the stage reads through the history tables.
pub(crate) const LATER_BYTES: usize = 384 << 20;

impl Later {
    /// The keys changed after block `at` in `t`'s snapshot whose head is `head`, or `None`
    /// when they would take more than `budget` bytes.
    pub(crate) fn build(
        t: &crate::storage::TrieTables,
        at: u64,
        head: u64,
        budget: usize,
    ) -> Result<Option<Self>, TrieError> {
        let Some(accounts) = Changed::<32>::build(&t.account_history(), at, budget)? else {
            return Ok(None);
        };
        let rest = budget.saturating_sub(accounts.bytes());
        let Some(slots) = Changed::<64>::build(&t.storage_history(), at, rest)? else {
            return Ok(None);
        };
        Ok(Some(Self { at, head, accounts, slots }))
    }

    /// Moves the values past block `to`, given the value after `to` of every key with a history
    /// row in `at + 1..=to` (empty: it did not exist): the others have the same value after
    /// `to` as after `at`, since no row of theirs lies between.
    pub(crate) fn advance(
        &mut self,
        to: u64,
        accounts: Vec<([u8; 32], Box<[u8]>)>,
        slots: Vec<([u8; 64], Box<[u8]>)>,
    ) {
        self.accounts.replace(accounts);
        self.slots.replace(slots);
        self.at = to;
    }

    /// The bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.accounts.bytes() + self.slots.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: u8, v: &[u8]) -> ([u8; 1], Box<[u8]>) {
        ([k], v.into())
    }

    #[test]
    fn a_merge_keeps_key_order_and_the_preferred_value() {
        let mut c = Changed::<1> { rows: vec![entry(1, b"a"), entry(3, b"c"), entry(5, b"e")] };
        c.merge(vec![entry(2, b"B"), entry(3, b"C"), entry(6, b"F")], false);
        let keys: Vec<u8> = c.rows.iter().map(|(k, _)| k[0]).collect();
        assert_eq!(keys, vec![1, 2, 3, 5, 6]);
        c.merge(vec![entry(3, b"X")], false);
        assert_eq!(c.get(&[3]), Some(&b"c"[..]));
        c.replace(vec![entry(0, b"Z"), entry(3, b"C"), entry(5, b""), entry(9, b"N")]);
        assert_eq!(c.get(&[0]), Some(&b"Z"[..]));
        assert_eq!(c.get(&[9]), Some(&b"N"[..]));
        assert_eq!(c.get(&[3]), Some(&b"C"[..]));
        assert_eq!(c.get(&[5]), Some(&b""[..]));
        assert_eq!(c.get(&[4]), None);
        let span: Vec<u8> = c.span(&[2], &[5]).iter().map(|(k, _)| k[0]).collect();
        assert_eq!(span, vec![2, 3, 5]);
        let keys: Vec<u8> = c.rows.iter().map(|(k, _)| k[0]).collect();
        assert_eq!(keys, vec![0, 1, 2, 3, 5, 6, 9]);
        assert!(c.span(&[7], &[8]).is_empty());
    }
}
