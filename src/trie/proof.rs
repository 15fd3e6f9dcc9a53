//! [`prove_account`]: EIP-1186 account and storage proofs at any stored block.
//!
//! The proof walk is the incremental walk with the targets as its changed set and alloy-trie's
//! proof retainer on the builder, over the trie and hashed state as they were after the block
//! (`history`). Its root is checked against the block header before anything is returned.

use alloy_primitives::{Address, B256, Bytes, U256, keccak256};
use alloy_trie::{EMPTY_ROOT_HASH, Nibbles};

use super::TrieError;
use super::codec::concat;
use super::history::{self, AccountLeavesAt, AccountNodesAt, StorageLeavesAt, StorageNodesAt};
use super::walk::prove;
use crate::storage::Reader;
use crate::storage::codec::account::HashedAccount;

/// One storage slot's proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageProof {
    /// The slot as asked.
    pub slot: B256,
    /// Its value after the block (zero if unset).
    pub value: U256,
    /// Trie nodes from the storage root down to the slot (or to where it would be).
    pub proof: Vec<Bytes>,
}

/// An account's proof after one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountProof {
    /// The account (with its storage root), `None` if it did not exist.
    pub account: Option<HashedAccount>,
    /// Trie nodes from the state root down to the account (or to where it would be).
    pub account_proof: Vec<Bytes>,
    /// One proof per slot asked, in order.
    pub storage_proofs: Vec<StorageProof>,
}

fn nodes_to(proof: &alloy_trie::proof::ProofNodes, key: &B256) -> Vec<Bytes> {
    proof.matching_nodes_sorted(&Nibbles::unpack(key)).into_iter().map(|(_, node)| node).collect()
}

/// Proves `address` and `slots` after `block`, reading the trie as it was then. Cost grows with
/// the trie depth and the number of slots, not with the state size or the block's age.
pub fn prove_account(
    reader: &Reader,
    block: u64,
    address: Address,
    slots: &[B256],
) -> Result<AccountProof, TrieError> {
    if let Some(anchor) = reader.anchor() {
        return Err(TrieError::Anchored { anchor, what: "a proof" });
    }
    let header = reader.header(block)?.ok_or(TrieError::UnknownBlock(block))?;
    if let Some(from) = reader.proofs_from().filter(|from| block < *from) {
        return Err(TrieError::ProofsNotKept { block, from });
    }
    super::stage::check_exact(reader, block)?;
    let t = reader.trie_tables();
    let at = history::at(t, block);
    let hashed_address = keccak256(address);

    let out = prove(
        &mut AccountNodesAt(at.account_nodes),
        &mut AccountLeavesAt(at.accounts),
        &[hashed_address],
    )?;
    if out.root != header.state_root {
        return Err(TrieError::Mismatch {
            what: "state root rebuilt for a proof",
            location: format!("block {block}"),
            stored: header.state_root.to_string(),
            expected: out.root.to_string(),
        });
    }
    let account_proof = nodes_to(&out.proof, &hashed_address);
    let account = match at.accounts.get(&hashed_address.0)? {
        Some(row) => Some(super::db::decode_account(&row, &hashed_address)?),
        None => None,
    };

    let storage_root = account.map_or(EMPTY_ROOT_HASH, |a| a.storage_root);
    let hashed_slots: Vec<B256> = slots.iter().map(keccak256).collect();
    let mut storage_proofs = Vec::with_capacity(slots.len());
    let proof = if storage_root == EMPTY_ROOT_HASH || slots.is_empty() {
        None
    } else {
        let out = prove(
            &mut StorageNodesAt { nodes: at.storage_nodes, account: hashed_address },
            &mut StorageLeavesAt { slots: at.slots, account: hashed_address },
            &hashed_slots,
        )?;
        if out.root != storage_root {
            return Err(TrieError::Mismatch {
                what: "storage root rebuilt for a proof",
                location: format!("account {address} at block {block}"),
                stored: storage_root.to_string(),
                expected: out.root.to_string(),
            });
        }
        Some(out.proof)
    };
    for (slot, hashed) in slots.iter().zip(&hashed_slots) {
        let key: [u8; 64] = concat(&hashed_address, hashed.as_slice());
        let value = match at.slots.get(&key)? {
            Some(row) => crate::storage::codec::account::decode_slot(&row, "hashed_storage")?.1,
            None => U256::ZERO,
        };
        let proof = proof.as_ref().map(|p| nodes_to(p, hashed)).unwrap_or_default();
        storage_proofs.push(StorageProof { slot: *slot, value, proof });
    }
    Ok(AccountProof { account, account_proof, storage_proofs })
}
