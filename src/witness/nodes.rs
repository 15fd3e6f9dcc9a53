//! [`TrieReader`]: looks keys up in the witness's partial tries, decoding each node once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use alloy_primitives::B256;
use alloy_rlp::Decodable;
use alloy_trie::EMPTY_ROOT_HASH;
use alloy_trie::Nibbles;
use alloy_trie::nodes::{RlpNode, TrieNode};

use super::{Witness, WitnessError};

/// Reads values from the tries whose nodes a [`Witness`] holds.
#[derive(Debug)]
pub(crate) struct TrieReader {
    witness: Arc<Witness>,
    decoded: RwLock<HashMap<B256, Arc<TrieNode>>>,
    /// Every node of the witness resolved so far, by reads and by the post-state root.
    used: std::sync::Mutex<HashSet<B256>>,
}

impl TrieReader {
    pub(crate) fn new(witness: Arc<Witness>) -> Self {
        Self { witness, decoded: RwLock::default(), used: Default::default() }
    }

    /// Notes that the node with this hash was resolved from the witness.
    pub(crate) fn note_used(&self, hash: B256) {
        if let Ok(mut used) = self.used.lock() {
            used.insert(hash);
        }
    }

    /// The witness's nodes resolved so far.
    pub(crate) fn used(&self) -> HashSet<B256> {
        self.used.lock().map(|u| u.clone()).unwrap_or_default()
    }

    pub(crate) fn witness(&self) -> &Witness {
        &self.witness
    }

    /// The node with this hash, decoded (once).
    fn node(
        &self,
        hash: B256,
        needed_for: &dyn Fn() -> String,
    ) -> Result<Arc<TrieNode>, WitnessError> {
        if let Some(n) = self.decoded.read().ok().and_then(|m| m.get(&hash).cloned()) {
            return Ok(n);
        }
        let rlp = self
            .witness
            .nodes
            .get(&hash)
            .ok_or_else(|| WitnessError::MissingNode { hash, needed_for: needed_for() })?;
        let node = Arc::new(
            TrieNode::decode(&mut rlp.as_ref())
                .map_err(|e| WitnessError::BadNode { hash, message: e.to_string() })?,
        );
        if let Ok(mut m) = self.decoded.write() {
            m.insert(hash, node.clone());
        }
        self.note_used(hash);
        Ok(node)
    }

    fn child(
        &self,
        child: &RlpNode,
        needed_for: &dyn Fn() -> String,
    ) -> Result<Arc<TrieNode>, WitnessError> {
        match child.as_hash() {
            Some(hash) => self.node(hash, needed_for),
            None => TrieNode::decode(&mut child.as_ref()).map(Arc::new).map_err(|e| {
                WitnessError::BadNode { hash: B256::ZERO, message: format!("embedded node: {e}") }
            }),
        }
    }

    /// The value at `key` (raw key bytes, hashed by the caller where the trie is secure) in
    /// the trie with root `root`, `None` if the trie proves it absent.
    pub(crate) fn get(
        &self,
        root: B256,
        key: &[u8],
        needed_for: &dyn Fn() -> String,
    ) -> Result<Option<Vec<u8>>, WitnessError> {
        if root == EMPTY_ROOT_HASH {
            return Ok(None);
        }
        let path = Nibbles::unpack(key);
        let mut at = 0usize;
        let mut node = self.node(root, needed_for)?;
        loop {
            let rest = path.slice(at..);
            let next = match &*node {
                TrieNode::EmptyRoot => return Ok(None),
                TrieNode::Leaf(leaf) => {
                    return Ok((leaf.key == rest).then(|| leaf.value.clone()));
                }
                TrieNode::Extension(ext) => {
                    if !rest.starts_with(&ext.key) {
                        return Ok(None);
                    }
                    at += ext.key.len();
                    self.child(&ext.child, needed_for)?
                }
                TrieNode::Branch(branch) => {
                    let Some(nibble) = rest.get(0) else {
                        // State tries hold no values in branches.
                        return Ok(None);
                    };
                    if !branch.state_mask.is_bit_set(nibble) {
                        return Ok(None);
                    }
                    let below = branch.state_mask.get() & ((1u16 << nibble) - 1);
                    let index = below.count_ones() as usize;
                    let Some(child) = branch.stack.get(index) else {
                        return Err(WitnessError::BadNode {
                            hash: root,
                            message: "branch with fewer children than its mask".into(),
                        });
                    };
                    at += 1;
                    self.child(child, needed_for)?
                }
            };
            node = next;
        }
    }
}
