//! Property test of the incremental walk against a from-scratch build, on an in-memory node
//! and leaf store with structured keys (long shared prefixes, neighbours that differ in the
//! last nibble, deep leaves short enough to be inlined).

use std::collections::BTreeMap;

use alloy_primitives::{B256, U256, keccak256};
use alloy_trie::{BranchNodeCompact, Nibbles};
use proptest::prelude::*;

use super::TrieError;
use super::overlay::Merged;
use super::walk::{LeafFn, LeafSource, NoNodes, NodeSource, PrefixSet, walk};

struct MemNodes<'a>(&'a BTreeMap<Nibbles, BranchNodeCompact>);

impl NodeSource for MemNodes<'_> {
    fn seek(
        &mut self,
        from: &Nibbles,
        _: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        Ok(self.0.range(*from..).next().map(|(p, n)| (*p, n.clone())))
    }
}

struct MemLeaves<'a>(&'a BTreeMap<B256, Vec<u8>>);

impl LeafSource for MemLeaves<'_> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let range: Box<dyn Iterator<Item = _>> = match to {
            Some(to) => Box::new(self.0.range(*from..*to)),
            None => Box::new(self.0.range(*from..)),
        };
        for (k, v) in range {
            f(k, v)?;
        }
        Ok(())
    }
}

/// Keys in groups sharing 0, 1, 2, 5, 20, 40, 62 and 63 leading nibbles.
fn key_pool(seed: u64) -> Vec<B256> {
    let mut keys = Vec::new();
    for (g, shared) in [0usize, 1, 2, 5, 20, 40, 62, 63].into_iter().enumerate() {
        let base = Nibbles::unpack(keccak256(seed_bytes(seed, g as u64, u64::MAX)));
        for j in 0..6u64 {
            let tail = Nibbles::unpack(keccak256(seed_bytes(seed, g as u64, j)));
            let mut nibbles = base.slice(..shared);
            nibbles.extend(&tail.slice(shared..));
            let mut key = B256::ZERO;
            nibbles.pack_to(&mut key.0);
            keys.push(key);
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn seed_bytes(a: u64, b: u64, c: u64) -> [u8; 24] {
    let mut out = [0u8; 24];
    out[..8].copy_from_slice(&a.to_be_bytes());
    out[8..16].copy_from_slice(&b.to_be_bytes());
    out[16..].copy_from_slice(&c.to_be_bytes());
    out
}

/// One change: key index, and `None` to delete or a value (small values make short leaves).
type Op = (usize, Option<u64>);

fn step_strategy() -> impl Strategy<Value = (bool, Vec<Op>)> {
    (
        prop::bool::weighted(0.03),
        prop::collection::vec(
            (
                0usize..64,
                prop_oneof![2 => Just(None), 3 => (0u64..4).prop_map(Some), 1 => any::<u64>().prop_map(Some)],
            ),
            1..12,
        ),
    )
}

fn normalized(
    nodes: impl IntoIterator<Item = (Nibbles, BranchNodeCompact)>,
) -> BTreeMap<Nibbles, BranchNodeCompact> {
    nodes
        .into_iter()
        .map(|(p, mut n)| {
            n.root_hash = None;
            (p, n)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// 100 cases × 100 steps: after every step the incremental root equals a from-scratch
    /// build, and the stored nodes equal the from-scratch build's nodes; the step laid over
    /// the previous state as an overlay (`eth_simulateV1`'s roots) gives the same root.
    #[test]
    fn incremental_walk_equals_full_build(
        seed in any::<u64>(),
        steps in prop::collection::vec(step_strategy(), 100),
    ) {
        let pool = key_pool(seed);
        let mut leaves: BTreeMap<B256, Vec<u8>> = BTreeMap::new();
        let mut nodes: BTreeMap<Nibbles, BranchNodeCompact> = BTreeMap::new();
        let mut values: BTreeMap<B256, U256> = BTreeMap::new();
        for (clear_all, ops) in steps {
            // The same step as an overlay on the stored nodes and leaves, nothing written.
            let mut overlay: BTreeMap<B256, Option<Vec<u8>>> = BTreeMap::new();
            if clear_all {
                overlay.extend(leaves.keys().map(|k| (*k, None)));
            }
            for (i, value) in &ops {
                let v = value.map(|v| alloy_rlp::encode(U256::from(v) + U256::from(1)));
                overlay.insert(pool[i % pool.len()], v);
            }
            let over_root = walk(
                &mut MemNodes(&nodes),
                &mut Merged { base: Some(MemLeaves(&leaves)), over: &overlay },
                &PrefixSet::new(overlay.keys().copied().collect()),
                None,
            )
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .root;
            let mut changed = Vec::new();
            if clear_all {
                changed.extend(leaves.keys().copied());
                leaves.clear();
                values.clear();
            }
            for (i, value) in ops {
                let key = pool[i % pool.len()];
                changed.push(key);
                match value {
                    Some(v) => {
                        let v = U256::from(v) + U256::from(1);
                        leaves.insert(key, alloy_rlp::encode(v));
                        values.insert(key, v);
                    }
                    None => {
                        leaves.remove(&key);
                        values.remove(&key);
                    }
                }
            }
            let out = walk(&mut MemNodes(&nodes), &mut MemLeaves(&leaves), &PrefixSet::new(changed), None)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for path in &out.removed {
                nodes.remove(path);
            }
            for (path, node) in out.updates {
                nodes.insert(path, node);
            }
            let full = walk(&mut NoNodes, &mut MemLeaves(&leaves), &PrefixSet::all(), None)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(out.root, full.root);
            prop_assert_eq!(normalized(nodes.clone()), normalized(full.updates));
            // An independent root: alloy-trie's storage-root reference over the same pairs.
            let reference = alloy_trie::root::storage_root_unsorted(values.iter().map(|(k, v)| (*k, *v)));
            prop_assert_eq!(out.root, reference);
            prop_assert_eq!(over_root, reference, "overlay root");
        }
    }
}

proptest! {
    /// `PrefixSet::contains` (packed comparison) agrees with the definition: some changed key's
    /// nibbles start with the prefix. Keys share leading bytes often, so prefixes hit and miss
    /// at every length, odd and even.
    #[test]
    fn prefix_set_contains_exactly_the_prefixes_of_its_keys(
        keys in prop::collection::vec((0u8..3, any::<[u8; 2]>()), 0..12),
        probe in (0u8..3, any::<[u8; 2]>(), 0usize..7),
    ) {
        let key = |(first, rest): (u8, [u8; 2])| {
            let mut k = B256::ZERO;
            k[0] = first;
            k[1..3].copy_from_slice(&rest);
            k
        };
        let keys: Vec<B256> = keys.into_iter().map(key).collect();
        let set = PrefixSet::new(keys.clone());
        let (first, rest, len) = probe;
        let nibbles = Nibbles::unpack(key((first, rest)));
        let prefix = nibbles.slice(..len);
        let want = keys.iter().any(|k| Nibbles::unpack(k).starts_with(&prefix));
        prop_assert_eq!(set.contains(&prefix), want);
    }
}
