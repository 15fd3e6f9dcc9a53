//! The incremental walk: rebuild a trie's root from its stored branch nodes, re-hashing only
//! the parts under changed keys.
//!
//! The walk feeds alloy-trie's `HashBuilder` one ordered stream that covers every key of the
//! trie exactly once: a stored subtree hash (`add_branch`) wherever a stored node says a child
//! is a branch with a known hash and no changed key lies under it, and the leaves themselves
//! everywhere else. Branch hashes do not depend on where the branch sits, so a reused subtree
//! stays valid when the structure above it changes (an extension grows or shrinks); leaves and
//! extensions do, which is why only branch children are ever skipped. The builder re-emits every
//! branch it computes; every stored node the walk opened and the builder did not re-emit is
//! removed (a collapsed branch). The design follows reth's walker (`crates/trie/trie`) and the
//! notes in `../shared/research/state_root_incremental.md`.

use alloy_primitives::B256;
use alloy_trie::{BranchNodeCompact, HashBuilder, Nibbles};

use super::TrieError;
use super::codec::{lower_key, upper_key};

/// Where the walk finds stored branch nodes.
pub(crate) trait NodeSource {
    /// The first stored node whose path is at or after `from` in nibble order. The walk only
    /// uses a node whose path starts with `within`, so a source may return `None` instead of a
    /// node outside it (a historical source does, to bound its scan).
    fn seek(
        &mut self,
        from: &Nibbles,
        within: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError>;

    /// The stored node at exactly `path`. The default seeks; sources with a cheaper point read
    /// (every historical source) override it.
    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        Ok(self.seek(path, path)?.filter(|(p, _)| p == path).map(|(_, n)| n))
    }
}

/// A node source with no nodes: a full rebuild from the leaves.
#[derive(Debug)]
pub(crate) struct NoNodes;

impl NodeSource for NoNodes {
    fn seek(
        &mut self,
        _: &Nibbles,
        _: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        Ok(None)
    }
}

/// Callback for each leaf: its key and RLP-encoded value.
pub(crate) type LeafFn<'f> = dyn FnMut(&B256, &[u8]) -> Result<(), TrieError> + 'f;

/// Where the walk finds leaves: the hashed state, in key order.
pub(crate) trait LeafSource {
    /// Calls `f` for every leaf with `from <= key < to` (`to = None`: to the end), in order.
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError>;
}

/// The keys that changed since the stored nodes were written (inserted, updated or deleted).
#[derive(Debug, Clone, Default)]
pub(crate) struct PrefixSet {
    keys: Vec<B256>,
    all: bool,
}

impl PrefixSet {
    /// A set of changed keys (any order, duplicates allowed).
    pub(crate) fn new(mut keys: Vec<B256>) -> Self {
        keys.sort_unstable();
        keys.dedup();
        Self { keys, all: false }
    }

    /// Everything changed: no stored hash may be reused.
    pub(crate) fn all() -> Self {
        Self { keys: Vec::new(), all: true }
    }

    /// Whether a changed key starts with `prefix`.
    pub(crate) fn contains(&self, prefix: &Nibbles) -> bool {
        if self.all {
            return true;
        }
        let lo = lower_key(prefix);
        let i = self.keys.partition_point(|k| *k < lo);
        // The first key at or after the prefix's lowest key starts with the prefix if any does;
        // compared packed: the prefix's whole bytes, then its odd nibble.
        let (whole, odd) = (prefix.len() / 2, prefix.len() % 2 == 1);
        self.keys
            .get(i)
            .is_some_and(|k| k[..whole] == lo[..whole] && (!odd || k[whole] >> 4 == lo[whole] >> 4))
    }
}

/// Receives the branch nodes the builder emits, in batches, instead of collecting them.
pub(crate) type NodeSink<'s> = dyn FnMut(Nibbles, BranchNodeCompact) -> Result<(), TrieError> + 's;

/// What a walk produced.
#[derive(Debug, Default)]
pub(crate) struct WalkOutput {
    /// The trie's root hash.
    pub(crate) root: B256,
    /// Branch nodes to store (empty when a sink took them).
    pub(crate) updates: Vec<(Nibbles, BranchNodeCompact)>,
    /// Stored nodes that no longer exist.
    pub(crate) removed: Vec<Nibbles>,
    /// The nodes on the paths to the proof targets, when asked for.
    pub(crate) proof: alloy_trie::proof::ProofNodes,
}

/// Emitted nodes are handed to a sink in batches of this size, so a full rebuild of a large
/// trie holds a bounded number of nodes in memory.
const SINK_BATCH: usize = 4096;

struct Walk<'a, 's, N, L> {
    nodes: &'a mut N,
    leaves: &'a mut L,
    changed: &'a PrefixSet,
    hb: HashBuilder,
    /// Lower bound of the leaves not yet fed; `None` once the key space is exhausted.
    pos: Option<B256>,
    visited: Vec<Nibbles>,
    sink: Option<&'a mut NodeSink<'s>>,
}

/// Computes the root of the trie whose leaves `leaves` lists, reusing the stored nodes of
/// `nodes` outside `changed`. With a `sink`, emitted nodes go there as they are completed.
pub(crate) fn walk<N: NodeSource, L: LeafSource>(
    nodes: &mut N,
    leaves: &mut L,
    changed: &PrefixSet,
    sink: Option<&mut NodeSink<'_>>,
) -> Result<WalkOutput, TrieError> {
    walk_with(nodes, leaves, changed, sink, HashBuilder::default().with_updates(true))
}

/// Proves `targets` (full keys): the walk re-hashes the paths to them (they are its changed
/// set, as alloy-trie's retainer only sees nodes the builder computes) and keeps their nodes.
pub(crate) fn prove<N: NodeSource, L: LeafSource>(
    nodes: &mut N,
    leaves: &mut L,
    targets: &[B256],
) -> Result<WalkOutput, TrieError> {
    let retainer =
        alloy_trie::proof::ProofRetainer::new(targets.iter().map(Nibbles::unpack).collect());
    let hb = HashBuilder::default().with_proof_retainer(retainer);
    walk_with(nodes, leaves, &PrefixSet::new(targets.to_vec()), None, hb)
}

fn walk_with<N: NodeSource, L: LeafSource>(
    nodes: &mut N,
    leaves: &mut L,
    changed: &PrefixSet,
    sink: Option<&mut NodeSink<'_>>,
    hb: HashBuilder,
) -> Result<WalkOutput, TrieError> {
    let mut w =
        Walk { nodes, leaves, changed, hb, pos: Some(B256::ZERO), visited: Vec::new(), sink };
    w.region(&Nibbles::default())?;
    w.fill(None)?;
    let root = w.hb.root();
    let proof = w.hb.take_proof_nodes();
    let (_, updated) = w.hb.split();
    let mut out = WalkOutput { root, proof, ..Default::default() };
    match w.sink {
        Some(sink) => {
            for (path, node) in updated {
                sink(path, node)?;
            }
            out.removed = w.visited;
        }
        None => {
            out.removed = w.visited.into_iter().filter(|p| !updated.contains_key(p)).collect();
            out.updates = updated.into_iter().collect();
            out.updates.sort_unstable_by_key(|a| a.0);
        }
    }
    Ok(out)
}

impl<N: NodeSource, L: LeafSource> Walk<'_, '_, N, L> {
    /// Walks every stored node under `prefix` that is not below another one.
    fn region(&mut self, prefix: &Nibbles) -> Result<(), TrieError> {
        // Usually the node is right at the prefix (a branch child, or the root): every other
        // stored node of the region is below it. Otherwise (an extension) search the region.
        if let Some(node) = self.nodes.get(prefix)? {
            return self.node(prefix, &node);
        }
        let mut from = *prefix;
        loop {
            let Some((path, node)) = self.nodes.seek(&from, prefix)? else { return Ok(()) };
            if !path.starts_with(prefix) {
                return Ok(());
            }
            self.node(&path, &node)?;
            match path.increment() {
                Some(next) => from = next,
                None => return Ok(()),
            }
        }
    }

    fn node(&mut self, path: &Nibbles, node: &BranchNodeCompact) -> Result<(), TrieError> {
        self.visited.push(*path);
        for nibble in 0..16u8 {
            let mut child = *path;
            child.push(nibble);
            if !node.state_mask.is_bit_set(nibble) {
                // No key under `child` existed when the node was stored, and none changed since:
                // its range holds no leaves, so a fill need not search it. (A fill of a range
                // with no leaves still reads: at an old block, every key that exists now or
                // changed later is a candidate to look up, one cold read or more each.)
                if self.pos == Some(lower_key(&child)) && !self.changed.contains(&child) {
                    self.pos = upper_key(&child);
                }
                continue;
            }
            if node.hash_mask.is_bit_set(nibble) && !self.changed.contains(&child) {
                let hash = node.hash_for_nibble(nibble);
                self.fill(Some(lower_key(&child)))?;
                self.hb.add_branch(child, hash, node.tree_mask.is_bit_set(nibble));
                self.pos = upper_key(&child);
            } else if node.tree_mask.is_bit_set(nibble) {
                self.region(&child)?;
            } else {
                // A leaf, or a sub-trie too small to be stored: its leaves now, so the empty
                // ranges of later children can be passed over.
                self.fill(upper_key(&child))?;
            }
        }
        Ok(())
    }

    /// Feeds the leaves from the current position up to `to` (exclusive; `None`: all).
    fn fill(&mut self, to: Option<B256>) -> Result<(), TrieError> {
        let Some(from) = self.pos else { return Ok(()) };
        if to == Some(from) {
            return Ok(());
        }
        let hb = &mut self.hb;
        let sink = &mut self.sink;
        let mut pending = 0usize;
        self.leaves.leaves(&from, to.as_ref(), &mut |key, value| {
            hb.add_leaf(Nibbles::unpack(key), value);
            pending += 1;
            if pending >= SINK_BATCH {
                pending = 0;
                if let (Some(sink), Some(updates)) =
                    (sink.as_mut(), hb.updated_branch_nodes.as_mut())
                {
                    for (path, node) in updates.drain() {
                        sink(path, node)?;
                    }
                }
            }
            Ok(())
        })?;
        self.pos = to;
        Ok(())
    }
}
