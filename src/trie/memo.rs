//! Memoised leaf reads for the trie-history stage: a range's walks read the same subtrees' leaves
//! as of the range's last block again and again, block after block, and those never change.
//!
//! The stage (`stage.rs`) walks each block of a range over the leaves after the range's last
//! block with the block's own values laid over them (`overlay::Merged`). The base below the
//! overlay is one fixed snapshot for the whole range, so a leaf range read once answers every
//! later walk that asks for the same range: the walk's leaf ranges are a branch child's key span,
//! the same from block to block while the stored nodes above it stand. Read through the history
//! tables, each leaf costs several B-tree seeks (`history::Versioned::next`); on the 1,000-block
//! proxy those reads were 86 % of the stage's time, most of them repeats (docs/benchmarks).
//! No crate memoises a `LeafSource`; this is the trait of `walk.rs`.

use std::collections::HashMap;

use alloy_primitives::B256;

use super::TrieError;
use super::walk::{LeafFn, LeafSource};

/// The leaves of one key span: key and RLP value, in order.
type Leaves = Vec<(B256, Vec<u8>)>;

/// The memo's bound in bytes it holds: past it the memo starts over (every answer stays
/// exact; only repeats cost again). Ranges built at once share it ([`LeafMemo::bounded`]).
pub(super) const MEMO_BYTES: usize = 192 << 20;

/// A span's bytes besides its leaves: the map's key, entry and the list's header.
const SPAN_OVERHEAD: usize = 96 + 24;
/// A leaf's bytes besides its value's: its key and the value's header.
const LEAF_OVERHEAD: usize = 32 + 24;

/// Leaf spans already read from one fixed snapshot, by trie (`None`: the account trie; a
/// storage trie by its account's hashed address) and span.
#[derive(Debug)]
pub(super) struct LeafMemo {
    spans: HashMap<(Option<B256>, B256, Option<B256>), Leaves>,
    bytes: usize,
    /// The bound on `bytes`.
    bound: usize,
    /// Spans answered from the memo, and spans read: for the stage's debug log.
    pub(super) hits: u64,
    pub(super) misses: u64,
}

impl Default for LeafMemo {
    fn default() -> Self {
        Self::bounded(MEMO_BYTES)
    }
}

impl LeafMemo {
    /// An empty memo that keeps at most `bound` bytes of leaves.
    pub(super) fn bounded(bound: usize) -> Self {
        Self { spans: HashMap::new(), bytes: 0, bound, hits: 0, misses: 0 }
    }

    /// The bytes it holds, as it counts them against its bound.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `other`'s spans and counts (a memo of other tries, read from the same snapshot:
    /// the stage's storage tries walked in two parts), within the sum of both bounds.
    pub(super) fn absorb(&mut self, other: Self) {
        self.spans.extend(other.spans);
        self.bytes += other.bytes;
        self.bound += other.bound;
        self.hits += other.hits;
        self.misses += other.misses;
    }

    fn keep(&mut self, key: (Option<B256>, B256, Option<B256>), mut leaves: Leaves) {
        leaves.shrink_to_fit();
        // What the span holds in the allocator, not only its leaves' bytes: the map's entry,
        // and per leaf its key, its value's header and the value (which was about half of it
        // for slots: the bound undercounted what the memo took by up to 1.9x).
        let bytes =
            SPAN_OVERHEAD + leaves.iter().map(|(_, v)| LEAF_OVERHEAD + v.capacity()).sum::<usize>();
        if self.bytes + bytes > self.bound {
            self.spans.clear();
            self.bytes = 0;
        }
        self.bytes += bytes;
        self.spans.insert(key, leaves);
    }
}

/// A leaf source of one trie read through a [`LeafMemo`].
pub(super) struct Memoised<'m, L> {
    /// The source the memo stands in front of (one snapshot for the memo's whole life).
    pub(super) inner: L,
    /// The spans read so far.
    pub(super) memo: &'m mut LeafMemo,
    /// Which trie: `None` for the account trie, else the account's hashed address.
    pub(super) trie: Option<B256>,
}

impl<L: LeafSource> LeafSource for Memoised<'_, L> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let key = (self.trie, *from, to.copied());
        if let Some(leaves) = self.memo.spans.get(&key) {
            self.memo.hits += 1;
            for (k, v) in leaves {
                f(k, v)?;
            }
            return Ok(());
        }
        self.memo.misses += 1;
        let mut read = Leaves::new();
        self.inner.leaves(from, to, &mut |k, v| {
            read.push((*k, v.to_vec()));
            f(k, v)
        })?;
        self.memo.keep(key, read);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source over fixed leaves that counts its reads.
    struct Fixed {
        leaves: Vec<(B256, Vec<u8>)>,
        reads: usize,
    }

    impl LeafSource for Fixed {
        fn leaves(
            &mut self,
            from: &B256,
            to: Option<&B256>,
            f: &mut LeafFn<'_>,
        ) -> Result<(), TrieError> {
            self.reads += 1;
            for (k, v) in &self.leaves {
                if k >= from && to.is_none_or(|to| k < to) {
                    f(k, v)?;
                }
            }
            Ok(())
        }
    }

    fn collect(source: &mut impl LeafSource, from: u8, to: Option<u8>) -> Vec<(B256, Vec<u8>)> {
        let mut out = Vec::new();
        let to = to.map(B256::with_last_byte);
        source
            .leaves(&B256::with_last_byte(from), to.as_ref(), &mut |k, v| {
                out.push((*k, v.to_vec()));
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn a_span_read_twice_is_read_once_and_answers_the_same() {
        let leaves: Vec<_> = (0u8..40).map(|i| (B256::with_last_byte(i * 3), vec![i])).collect();
        let mut memo = LeafMemo::default();
        let mut plain = Fixed { leaves: leaves.clone(), reads: 0 };
        let fixed = Fixed { leaves, reads: 0 };
        let spans = [(0, Some(30)), (30, Some(90)), (0, Some(30)), (90, None), (30, Some(90))];
        let mut source = Memoised { inner: fixed, memo: &mut memo, trie: None };
        for (from, to) in spans {
            assert_eq!(collect(&mut source, from, to), collect(&mut plain, from, to));
        }
        assert_eq!(source.inner.reads, 3, "three distinct spans");
        assert_eq!((memo.hits, memo.misses), (2, 3));
    }

    #[test]
    fn tries_do_not_share_spans() {
        let mut memo = LeafMemo::default();
        let a = Fixed { leaves: vec![(B256::with_last_byte(1), vec![1])], reads: 0 };
        let b = Fixed { leaves: vec![(B256::with_last_byte(1), vec![2])], reads: 0 };
        let x = collect(&mut Memoised { inner: a, memo: &mut memo, trie: None }, 0, None);
        let y = collect(
            &mut Memoised { inner: b, memo: &mut memo, trie: Some(B256::repeat_byte(7)) },
            0,
            None,
        );
        assert_eq!((x[0].1.clone(), y[0].1.clone()), (vec![1], vec![2]));
    }
}
