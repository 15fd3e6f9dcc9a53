//! [`prove_many`]: the trie nodes that prove many accounts and slots at one stored block, and
//! [`node_at`], one node by its place: what an execution witness is made of.
//!
//! A witness holds the nodes a stateless run resolves by hash. A node whose encoding is shorter
//! than 32 bytes is embedded in its parent and never resolved on its own, so it is left out;
//! a trie's root is always resolved by hash, and always kept.

use std::collections::BTreeMap;

use alloy_primitives::{B256, Bytes, keccak256};
use alloy_trie::{EMPTY_ROOT_HASH, Nibbles};

use super::TrieError;
use super::history::{self, AccountLeavesAt, AccountNodesAt, StorageLeavesAt, StorageNodesAt};
use super::walk::prove;
use crate::storage::Reader;

/// Which trie of a block's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrieOwner {
    /// The account trie.
    Accounts,
    /// The storage trie of the account with this hashed address.
    Storage(B256),
}

/// Nodes of one trie keyed by their place in it (nibble path from the root).
pub type NodesByPath = BTreeMap<Nibbles, Bytes>;

/// What [`prove_many`] found.
#[derive(Debug, Default)]
pub struct Multiproof {
    /// The nodes of each trie on the paths to its targets, with their places.
    pub tries: BTreeMap<TrieOwner, NodesByPath>,
}

impl Multiproof {
    /// Every node, each once.
    pub fn nodes(&self) -> impl Iterator<Item = &Bytes> {
        self.tries.values().flat_map(|t| t.values())
    }
}

/// Proves, after `block`, every account whose hashed address is a key of `targets` and, for
/// each, the hashed slots it maps to: one walk of the account trie for all accounts, one walk
/// of each storage trie for its slots. Each rebuilt root is checked against the header (or
/// the account's storage root) before anything is returned.
pub fn prove_many(
    reader: &Reader,
    block: u64,
    targets: &BTreeMap<B256, Vec<B256>>,
) -> Result<Multiproof, TrieError> {
    let state_root = checked_root(reader, block)?;
    let mut out = Multiproof::default();
    let accounts: Vec<B256> = targets.keys().copied().collect();
    let nodes = prove_in(reader, block, TrieOwner::Accounts, &accounts, state_root)?;
    out.tries.insert(TrieOwner::Accounts, nodes);
    let t = reader.trie_tables();
    let at = history::at(t, block);
    for (hashed, slots) in targets {
        if slots.is_empty() {
            continue;
        }
        let Some(row) = at.accounts.get(&hashed.0)? else { continue };
        let account = super::db::decode_account(&row, hashed)?;
        if account.storage_root == EMPTY_ROOT_HASH {
            continue;
        }
        let owner = TrieOwner::Storage(*hashed);
        let nodes = prove_in(reader, block, owner, slots, account.storage_root)?;
        out.tries.insert(owner, nodes);
    }
    Ok(out)
}

/// The node at `path` of trie `owner` after `block`, if there is one exactly there (a node
/// whose place is `path`, as a branch child is): the one a stateless run needs when a branch
/// above it collapses into it.
pub fn node_at(
    reader: &Reader,
    block: u64,
    owner: TrieOwner,
    path: &Nibbles,
) -> Result<Option<Bytes>, TrieError> {
    let root = match owner {
        TrieOwner::Accounts => checked_root(reader, block)?,
        TrieOwner::Storage(hashed) => {
            let at = history::at(reader.trie_tables(), block);
            let Some(row) = at.accounts.get(&hashed.0)? else { return Ok(None) };
            super::db::decode_account(&row, &hashed)?.storage_root
        }
    };
    // Any full key under `path` leads the walk through the node at `path`.
    let mut full = *path;
    while full.len() < 64 {
        full.push(0);
    }
    let mut key = B256::ZERO;
    full.pack_to(key.as_mut_slice());
    let nodes = prove_in(reader, block, owner, &[key], root)?;
    Ok(nodes.get(path).cloned())
}

/// The header's state root after `block`, refused where the datadir keeps no proofs.
fn checked_root(reader: &Reader, block: u64) -> Result<B256, TrieError> {
    let header = reader.header(block)?.ok_or(TrieError::UnknownBlock(block))?;
    if let Some(from) = reader.proofs_from().filter(|from| block < *from) {
        return Err(TrieError::ProofsNotKept { block, from });
    }
    super::stage::check_exact(reader, block)?;
    Ok(header.state_root)
}

/// The nodes on the paths to `keys` in trie `owner` after `block`, whose root must be `root`;
/// embedded nodes left out.
fn prove_in(
    reader: &Reader,
    block: u64,
    owner: TrieOwner,
    keys: &[B256],
    root: B256,
) -> Result<NodesByPath, TrieError> {
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    let at = history::at(reader.trie_tables(), block);
    let (out, location) = match owner {
        TrieOwner::Accounts => (
            prove(&mut AccountNodesAt(at.account_nodes), &mut AccountLeavesAt(at.accounts), &keys)?,
            format!("block {block}"),
        ),
        TrieOwner::Storage(account) => (
            prove(
                &mut StorageNodesAt { nodes: at.storage_nodes, account },
                &mut StorageLeavesAt { slots: at.slots, account },
                &keys,
            )?,
            format!("account with hashed address {account} at block {block}"),
        ),
    };
    if out.root != root {
        return Err(TrieError::Mismatch {
            what: "trie root rebuilt for a witness",
            location,
            stored: root.to_string(),
            expected: out.root.to_string(),
        });
    }
    Ok(out
        .proof
        .into_nodes_sorted()
        .into_iter()
        .filter(|(path, node)| path.is_empty() || node.len() >= 32)
        .inspect(|(path, node)| {
            debug_assert!(!path.is_empty() || keccak256(node) == root);
        })
        .collect())
}
