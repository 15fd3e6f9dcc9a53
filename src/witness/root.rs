//! [`post_state_root`]: the state root after a block, computed over the witness's partial tries.
//!
//! The tries are updated with `eth_trie` (trin's Merkle-Patricia trie), which resolves nodes by
//! hash from a store (here the witness's nodes, plus the ones it writes) and fails naming the
//! hash of a node it needs but cannot find: e.g. the sibling a branch collapses into when a
//! key is deleted. Embedded (< 32-byte) nodes need no lookup.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use alloy_primitives::{Address, B256, U256, keccak256};
use alloy_trie::{EMPTY_ROOT_HASH, TrieAccount};
use eth_trie::{EthTrie, Trie, TrieError};
use revm::database::states::{PlainStorageChangeset, StateChangeset};
use revm::state::AccountInfo;

use super::state::WitnessState;
use super::{Witness, WitnessError};

/// The witness's nodes and the nodes written by the update, by hash.
struct NodeDb<'a> {
    state: &'a WitnessState,
    witness: &'a Witness,
    written: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
}

impl eth_trie::DB for NodeDb<'_> {
    type Error = Infallible;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        if let Some(v) = self.written.lock().ok().and_then(|w| w.get(key).cloned()) {
            return Ok(Some(v));
        }
        let Ok(hash) = B256::try_from(key) else { return Ok(None) };
        let node = self.witness.nodes.get(&hash).map(|v| v.to_vec());
        if node.is_some() {
            self.state.note_used(hash);
        }
        Ok(node)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> Result<(), Self::Error> {
        if let Ok(mut w) = self.written.lock() {
            w.insert(key.to_vec(), value);
        }
        Ok(())
    }

    fn remove(&self, _key: &[u8]) -> Result<(), Self::Error> {
        // The witness's nodes stay: an intermediate root (pre-Byzantium) starts again from
        // the parent's root.
        Ok(())
    }

    fn flush(&self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The state root of the parent state (the witness state's parent header's root) with
/// `changes` applied.
pub fn post_state_root(
    state: &WitnessState,
    changes: &StateChangeset,
) -> Result<B256, WitnessError> {
    let db = Arc::new(NodeDb { state, witness: state.witness(), written: Mutex::default() });
    let mut touched: BTreeMap<
        Address,
        (Option<&Option<AccountInfo>>, Option<&PlainStorageChangeset>),
    > = BTreeMap::new();
    for (address, info) in &changes.accounts {
        touched.entry(*address).or_default().0 = Some(info);
    }
    for storage in &changes.storage {
        touched.entry(storage.address).or_default().1 = Some(storage);
    }
    // Writes first, then deletions, each in key order: a branch that loses a child and gains
    // another then never collapses on the way, so the sibling it would collapse into is needed
    // only where the block's changes leave it alone (geth orders them the same way), and the
    // nodes a run needs do not depend on the order of the changes.
    let mut writes: Vec<(B256, Vec<u8>, Address)> = Vec::new();
    let mut deletes: Vec<(B256, Address)> = Vec::new();
    for (address, (info, storage)) in touched {
        let key = keccak256(address);
        let post = match info {
            Some(Some(info)) => Some((info.nonce, info.balance, info.code_hash)),
            Some(None) => None,
            // Storage changed, the account did not.
            None => state.trie_account(address)?.map(|a| (a.nonce, a.balance, a.code_hash)),
        };
        let Some((nonce, balance, code_hash)) = post else {
            deletes.push((key, address));
            continue;
        };
        let wiped = storage.is_some_and(|s| s.wipe_storage);
        let base = if wiped { EMPTY_ROOT_HASH } else { state.storage_root(address)? };
        let storage_root = match storage {
            Some(s) if !s.storage.is_empty() || wiped => {
                storage_root(&db, address, base, &s.storage)?
            }
            _ => base,
        };
        let account = TrieAccount { nonce, balance, storage_root, code_hash };
        writes.push((key, alloy_rlp::encode(account), address));
    }
    writes.sort_unstable();
    deletes.sort_unstable();
    let mut accounts = open(&db, state.parent().state_root, "update the account trie")?;
    for (key, value, address) in &writes {
        let needed_for = || format!("write account {address}");
        accounts.insert(key.as_slice(), value).map_err(|e| trie_error(e, &needed_for))?;
    }
    for (key, address) in &deletes {
        let needed_for = || format!("delete account {address}");
        accounts.remove(key.as_slice()).map_err(|e| trie_error(e, &needed_for))?;
    }
    accounts.root_hash().map_err(|e| trie_error(e, &|| "hash the account trie".into()))
}

/// The root of `address`'s storage trie from `base` with `slots` written.
fn storage_root(
    db: &Arc<NodeDb<'_>>,
    address: Address,
    base: B256,
    slots: &[(U256, U256)],
) -> Result<B256, WitnessError> {
    // Writes first, then deletions, in key order (see `post_state_root`).
    let mut ordered: Vec<(bool, B256, &U256, &U256)> = slots
        .iter()
        .map(|(slot, value)| (value.is_zero(), keccak256(B256::from(*slot)), slot, value))
        .collect();
    ordered.sort_unstable_by_key(|(delete, key, _, _)| (*delete, *key));
    let mut trie = open(db, base, &format!("update the storage of {address}"))?;
    for (delete, key, slot, value) in ordered {
        let needed_for = || format!("write slot {slot:#x} of {address}");
        if delete {
            trie.remove(key.as_slice()).map_err(|e| trie_error(e, &needed_for))?;
        } else {
            trie.insert(key.as_slice(), &alloy_rlp::encode(value))
                .map_err(|e| trie_error(e, &needed_for))?;
        }
    }
    trie.root_hash().map_err(|e| trie_error(e, &|| format!("hash the storage of {address}")))
}

/// The trie with root `root` over `db`.
fn open<'a>(
    db: &Arc<NodeDb<'a>>,
    root: B256,
    needed_for: &str,
) -> Result<EthTrie<NodeDb<'a>>, WitnessError> {
    if root == EMPTY_ROOT_HASH {
        return Ok(EthTrie::new(db.clone()));
    }
    EthTrie::from(db.clone(), root).map_err(|e| match e {
        TrieError::InvalidStateRoot => {
            WitnessError::MissingNode { hash: root, needed_for: needed_for.to_string() }
        }
        other => trie_error(other, &|| needed_for.to_string()),
    })
}

fn trie_error(e: TrieError, needed_for: &dyn Fn() -> String) -> WitnessError {
    match e {
        TrieError::MissingTrieNode { node_hash, .. } => {
            WitnessError::MissingNode { hash: node_hash, needed_for: needed_for() }
        }
        other => WitnessError::Trie { what: needed_for(), message: format!("{other:?}") },
    }
}
