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

/// Entries a chunk holds after a split; a merge splits a chunk past twice this.
const CHUNK: usize = 4096;

/// A key and its value.
type Entry<const K: usize> = ([u8; K], Box<[u8]>);

/// The keys of one stamped table changed after a block, each with its value after the block
/// (empty: it did not exist), in key order.
///
/// Held as a run of sorted chunks of a few thousand entries rather than one array: adding an
/// epoch's keys rebuilds one chunk at a time, where a single array took a second copy of the
/// whole set for the moment of each merge (the peak RSS of the 10,000-block import), and a
/// lookup searches the chunks' first keys and then one chunk.
#[derive(Debug, Default)]
pub(crate) struct Changed<const K: usize> {
    /// Non-empty, each in key order, every key of one below every key of the next.
    chunks: Vec<Vec<Entry<K>>>,
    /// Each chunk's first key.
    firsts: Vec<[u8; K]>,
}

impl<const K: usize> Changed<K> {
    /// The chunk that holds `key` if any does: the last whose first key is at most `key`.
    fn chunk_of(&self, key: &[u8; K]) -> usize {
        self.firsts.partition_point(|f| f <= key).saturating_sub(1)
    }

    /// The key's value after the block if it changed since (empty: it did not exist then);
    /// `None`: it did not change, its current row is its value.
    pub(crate) fn get(&self, key: &[u8; K]) -> Option<&[u8]> {
        let chunk = self.chunks.get(self.chunk_of(key))?;
        chunk.binary_search_by(|(k, _)| k.cmp(key)).ok().map(|i| &*chunk[i].1)
    }

    /// The changed keys in `from..=last`, in order.
    pub(crate) fn span<'a>(
        &'a self,
        from: &[u8; K],
        last: &'a [u8; K],
    ) -> impl Iterator<Item = &'a Entry<K>> + use<'a, K> {
        let c = self.chunk_of(from);
        let head: &[Entry<K>] = match self.chunks.get(c) {
            Some(chunk) => &chunk[chunk.partition_point(|(k, _)| k < from)..],
            None => &[],
        };
        let rest = self.chunks.get(c + 1..).unwrap_or_default();
        head.iter().chain(rest.iter().flatten()).take_while(move |(k, _)| k <= last)
    }

    /// The set of `entries`, in key order.
    pub(crate) fn of(entries: Vec<Entry<K>>) -> Self {
        let mut c = Self::default();
        c.add(entries);
        c
    }

    /// How many keys it holds.
    #[allow(clippy::len_without_is_empty)]
    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// The bytes it holds, as [`Later::build`] counts them against its budget.
    pub(crate) fn bytes(&self) -> usize {
        self.chunks.iter().flatten().map(|(_, v)| K + ENTRY_OVERHEAD + v.len()).sum()
    }

    /// Gives the keys of `values` (in key order) their value there: in place for the keys it
    /// holds (every key a later range changes had a row after the set's first block, so all of
    /// them), added for any other.
    fn replace(&mut self, values: Vec<Entry<K>>) {
        let mut new = Vec::new();
        for (key, value) in values {
            let c = self.chunk_of(&key);
            match self
                .chunks
                .get_mut(c)
                .map(|chunk| (chunk.binary_search_by(|(k, _)| k.cmp(&key)), chunk))
            {
                Some((Ok(i), chunk)) => chunk[i].1 = value,
                _ => new.push((key, value)),
            }
        }
        self.add(new);
    }

    /// Adds `new`, in key order and holding none of its keys: each chunk that gains keys is
    /// rebuilt on its own (split past twice [`CHUNK`]), the others stay where they are.
    fn add(&mut self, new: Vec<Entry<K>>) {
        if new.is_empty() {
            return;
        }
        let old = std::mem::take(&mut self.chunks);
        let bounds = std::mem::take(&mut self.firsts);
        let mut new = new.into_iter().peekable();
        let mut out: Vec<Vec<Entry<K>>> = Vec::with_capacity(old.len() + 1);
        let count = old.len();
        for (i, chunk) in old.into_iter().enumerate() {
            // The new keys below the next chunk's first key belong here (the first chunk also
            // takes those below its own first key).
            let mut mine = Vec::new();
            while let Some(e) = new.next_if(|(k, _)| i + 1 == count || *k < bounds[i + 1]) {
                mine.push(e);
            }
            if mine.is_empty() {
                out.push(chunk);
                continue;
            }
            let mut merged = Vec::with_capacity(chunk.len() + mine.len());
            let (mut a, mut b) = (chunk.into_iter().peekable(), mine.into_iter().peekable());
            while let (Some((ka, _)), Some((kb, _))) = (a.peek(), b.peek()) {
                let e = if ka < kb { a.next() } else { b.next() };
                merged.extend(e);
            }
            merged.extend(a);
            merged.extend(b);
            Self::split_into(&mut out, merged);
        }
        // An empty set takes every key here.
        let rest: Vec<Entry<K>> = new.collect();
        if !rest.is_empty() {
            Self::split_into(&mut out, rest);
        }
        self.firsts = out.iter().filter_map(|c| c.first().map(|(k, _)| *k)).collect();
        self.chunks = out;
    }

    /// Pushes `entries` onto `out` as chunks of at most twice [`CHUNK`].
    fn split_into(out: &mut Vec<Vec<Entry<K>>>, mut entries: Vec<Entry<K>>) {
        while entries.len() > 2 * CHUNK {
            let rest = entries.split_off(CHUNK);
            entries.shrink_to_fit();
            out.push(std::mem::replace(&mut entries, rest));
        }
        out.push(entries);
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
            // The keys this epoch adds (an earlier epoch's row is the first after `at`).
            let mut rows: Vec<Entry<K>> = Vec::new();
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
                    rows.push((key, v.into()));
                }
                over = bytes > budget;
                Ok(!over)
            })?;
            if over {
                return Ok(None);
            }
            out.add(rows);
        }
        Ok(Some(out))
    }
}

/// The keys of one table changed after a block as a range reads them: the keys the range
/// itself changed (`over`, with their values after it) laid over a set that stands at the
/// block before the range, so that a second range can be built beside the first from the
/// same set without moving it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kept<'t, const K: usize> {
    /// The range's own keys, which win.
    pub(crate) over: Option<&'t Changed<K>>,
    /// The set.
    pub(crate) set: &'t Changed<K>,
}

impl<'t, const K: usize> Kept<'t, K> {
    /// [`Changed::get`] through both.
    pub(crate) fn get(&self, key: &[u8; K]) -> Option<&'t [u8]> {
        self.over.and_then(|o| o.get(key)).or_else(|| self.set.get(key))
    }

    /// [`Changed::span`] through both, in key order.
    pub(crate) fn span<'a>(
        &self,
        from: &[u8; K],
        last: &'a [u8; K],
    ) -> impl Iterator<Item = (&'a [u8; K], &'a [u8])> + use<'a, 't, K>
    where
        't: 'a,
    {
        let set: &'a Changed<K> = self.set;
        let mut over =
            self.over.map(|o: &'a Changed<K>| o.span(from, last)).into_iter().flatten().peekable();
        let mut set = set.span(from, last).peekable();
        std::iter::from_fn(move || {
            let next = match (over.peek(), set.peek()) {
                (Some((a, _)), Some((b, _))) if a == b => {
                    set.next();
                    over.next()
                }
                (Some((a, _)), Some((b, _))) if a > b => set.next(),
                (Some(_), _) => over.next(),
                (None, _) => set.next(),
            };
            next.map(|(k, v)| (k, &**v))
        })
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
    pub(crate) fn advance(&mut self, to: u64, accounts: Vec<Entry<32>>, slots: Vec<Entry<64>>) {
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

    fn entry(k: u8, v: &[u8]) -> Entry<1> {
        ([k], v.into())
    }

    fn keys<const K: usize>(c: &Changed<K>) -> Vec<[u8; K]> {
        c.chunks.iter().flatten().map(|(k, _)| *k).collect()
    }

    #[test]
    fn added_keys_keep_key_order_and_replaced_values_stay_in_place() {
        let mut c = Changed::<1>::default();
        c.add(vec![entry(1, b"a"), entry(3, b"c"), entry(5, b"e")]);
        c.add(vec![entry(2, b"B"), entry(6, b"F")]);
        assert_eq!(keys(&c), vec![[1], [2], [3], [5], [6]]);
        c.replace(vec![entry(0, b"Z"), entry(3, b"C"), entry(5, b""), entry(9, b"N")]);
        assert_eq!(c.get(&[0]), Some(&b"Z"[..]));
        assert_eq!(c.get(&[9]), Some(&b"N"[..]));
        assert_eq!(c.get(&[3]), Some(&b"C"[..]));
        assert_eq!(c.get(&[5]), Some(&b""[..]));
        assert_eq!(c.get(&[4]), None);
        let span: Vec<u8> = c.span(&[2], &[5]).map(|(k, _)| k[0]).collect();
        assert_eq!(span, vec![2, 3, 5]);
        assert_eq!(keys(&c), vec![[0], [1], [2], [3], [5], [6], [9]]);
        assert_eq!(c.span(&[7], &[8]).count(), 0);
        assert_eq!(Changed::<1>::default().span(&[0], &[255]).count(), 0);
    }

    /// Many chunks: keys added in interleaved batches, as epochs add them, read back as a
    /// sorted map holds them (the second path), through `get`, `span` and `len`.
    #[test]
    fn chunks_split_and_answer_as_one_sorted_map() {
        let mut c = Changed::<2>::default();
        let mut model = std::collections::BTreeMap::new();
        for round in 0..5u16 {
            // Every fifth key in this round, so each batch lands in every chunk.
            let batch: Vec<Entry<2>> = (0..(6 * CHUNK / 5) as u16)
                .map(|i| i * 5 + round)
                .map(|k| (k.to_be_bytes(), k.to_le_bytes().as_slice().into()))
                .collect();
            for (k, v) in &batch {
                model.insert(*k, v.clone());
            }
            c.add(batch);
            assert!(c.chunks.iter().all(|ch| !ch.is_empty() && ch.len() <= 2 * CHUNK));
            assert_eq!(c.len(), model.len());
        }
        assert!(c.chunks.len() > 2, "{} chunks", c.chunks.len());
        assert_eq!(keys(&c), model.keys().copied().collect::<Vec<_>>());
        for probe in [0u16, 1, 4, 4095, 4096, 8191, 9000, 12_000, u16::MAX] {
            let k = probe.to_be_bytes();
            assert_eq!(c.get(&k), model.get(&k).map(|v| &**v), "key {probe}");
        }
        let (from, last) = (3000u16.to_be_bytes(), 20_000u16.to_be_bytes());
        let span: Vec<[u8; 2]> = c.span(&from, &last).map(|(k, _)| *k).collect();
        let want: Vec<[u8; 2]> = model.range(from..=last).map(|(k, _)| *k).collect();
        assert_eq!(span, want);
        // Replacing every value in place keeps the layout.
        let chunks = c.chunks.len();
        c.replace(model.keys().map(|k| (*k, Box::from(&b"x"[..]))).collect());
        assert_eq!(c.chunks.len(), chunks);
        assert!(c.chunks.iter().flatten().all(|(_, v)| &**v == b"x"));
    }
}
