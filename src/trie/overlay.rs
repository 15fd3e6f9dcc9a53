//! [`overlay_state_root`]: the state root of an in-memory change set laid over a stored block,
//! without writing anything (simulated blocks of `eth_simulateV1`).
//!
//! The walk is the incremental one, over the trie as it was after the block (`history`), with
//! the overlay's keys as the changed set and its leaves merged into the stored ones. Cost grows
//! with the overlay's size times the trie depth, not with the state size or the block's age.

use std::collections::BTreeMap;
use std::ops::Bound;

use alloy_primitives::{B256, U256, keccak256};
use alloy_trie::EMPTY_ROOT_HASH;
use revm::database::BundleState;

use super::TrieError;
use super::history::{self, AccountLeavesAt, AccountNodesAt, StorageLeavesAt, StorageNodesAt};
use super::walk::{LeafFn, LeafSource, NoNodes, PrefixSet, walk};
use crate::storage::Reader;
use crate::storage::codec::account::{HashedAccount, StoredAccount};

/// New leaf values by hashed key (RLP-encoded); `None` deletes the leaf.
pub(super) type Overlay = BTreeMap<B256, Option<Vec<u8>>>;

/// A leaf source with an overlay merged in: overlay keys replace or delete stored ones.
pub(super) struct Merged<'o, L> {
    /// The stored leaves; `None` when there are none to read (a wiped storage).
    pub(super) base: Option<L>,
    /// The new leaves.
    pub(super) over: &'o Overlay,
}

impl<L: LeafSource> LeafSource for Merged<'_, L> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let upper = match to {
            Some(to) => Bound::Excluded(*to),
            None => Bound::Unbounded,
        };
        let mut over = self.over.range((Bound::Included(*from), upper)).peekable();
        if let Some(base) = self.base.as_mut() {
            base.leaves(from, to, &mut |key, value| {
                while let Some((k, v)) = over.next_if(|(k, _)| *k < key) {
                    if let Some(v) = v {
                        f(k, v)?;
                    }
                }
                match over.next_if(|(k, _)| *k == key) {
                    Some((k, Some(v))) => f(k, v),
                    Some((_, None)) => Ok(()),
                    None => f(key, value),
                }
            })?;
        }
        for (k, v) in over {
            if let Some(v) = v {
                f(k, v)?;
            }
        }
        Ok(())
    }
}

fn rlp<T: alloy_rlp::Encodable>(value: &T) -> Vec<u8> {
    let mut buf = Vec::new();
    value.encode(&mut buf);
    buf
}

/// The state root after `block` with `bundle`'s accounts and storage laid over it. `bundle`
/// holds changes relative to the state after `block` (revm's bundle of an execution that
/// started there): an account's `info` is its new value (`None`: deleted), a destroyed account's
/// storage is only what the bundle lists.
pub fn overlay_state_root(
    reader: &Reader,
    block: u64,
    bundle: &BundleState,
) -> Result<B256, TrieError> {
    if let Some(anchor) = reader.anchor() {
        return Err(TrieError::Anchored { anchor, what: "a state root over a simulation" });
    }
    let t = reader.trie_tables();
    let at = history::at(t, block);
    let mut accounts = Overlay::new();
    for (address, account) in &bundle.state {
        let hashed = keccak256(address);
        let Some(info) = &account.info else {
            accounts.insert(hashed, None);
            continue;
        };
        let wiped = account.was_destroyed();
        let stored_root = match at.accounts.get(&hashed.0)? {
            Some(row) if !wiped => super::db::decode_account(&row, &hashed)?.storage_root,
            _ => EMPTY_ROOT_HASH,
        };
        let slots: Overlay = account
            .storage
            .iter()
            .map(|(slot, value)| {
                let key = keccak256(slot.to_be_bytes::<32>());
                let v = value.present_value;
                (key, (v != U256::ZERO).then(|| rlp(&v)))
            })
            .collect();
        let storage_root = if slots.is_empty() {
            stored_root
        } else if wiped || stored_root == EMPTY_ROOT_HASH {
            let mut leaves = Merged::<StorageLeavesAt<'_>> { base: None, over: &slots };
            walk(&mut NoNodes, &mut leaves, &PrefixSet::all(), None)?.root
        } else {
            let changed = PrefixSet::new(slots.keys().copied().collect());
            let mut nodes = StorageNodesAt { nodes: at.storage_nodes, account: hashed };
            let mut leaves = Merged {
                base: Some(StorageLeavesAt { slots: at.slots, account: hashed }),
                over: &slots,
            };
            walk(&mut nodes, &mut leaves, &changed, None)?.root
        };
        let leaf = HashedAccount {
            address: *address,
            account: StoredAccount {
                nonce: info.nonce,
                balance: info.balance,
                code_hash: info.code_hash,
            },
            storage_root,
        };
        accounts.insert(hashed, Some(rlp(&leaf.trie_account())));
    }
    let changed = PrefixSet::new(accounts.keys().copied().collect());
    let mut leaves = Merged { base: Some(AccountLeavesAt(at.accounts)), over: &accounts };
    Ok(walk(&mut AccountNodesAt(at.account_nodes), &mut leaves, &changed, None)?.root)
}
