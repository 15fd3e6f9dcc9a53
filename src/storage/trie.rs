//! The state-root seam: one trait the importer calls, one implementation (full recompute).
//!
//! A full recompute costs O(state) per block, which is fine for test and dev chains. An
//! incremental trie (stored branch nodes, prefix sets) can implement [`StateRootCalculator`]
//! without touching the importer or the storage writer; [`FullRecompute`] stays as its oracle.

use alloy_primitives::{B256, keccak256};
use alloy_trie::TrieAccount;
use alloy_trie::root::{state_root_unsorted, storage_root_unhashed};

use super::{StateDump, StorageResult, Writer};

/// Computes the state root of the plain state as it stands inside a write transaction.
pub trait StateRootCalculator: std::fmt::Debug + Send + Sync {
    /// Root of the state currently in `writer` (including its uncommitted changes).
    fn state_root(&self, writer: &Writer) -> StorageResult<B256>;
}

/// Rebuilds the whole trie from the plain-state tables every time.
#[derive(Debug, Default, Clone, Copy)]
pub struct FullRecompute;

impl StateRootCalculator for FullRecompute {
    fn state_root(&self, writer: &Writer) -> StorageResult<B256> {
        Ok(state_root_of(&writer.current_state()?))
    }
}

/// State root of a full state: per account the storage trie over non-zero slots, then the
/// account trie keyed by `keccak(address)`.
pub fn state_root_of(state: &StateDump) -> B256 {
    state_root_unsorted(state.iter().map(|(address, (account, storage))| {
        let storage_root =
            storage_root_unhashed(storage.iter().map(|(slot, value)| (B256::from(*slot), *value)));
        (
            keccak256(address),
            TrieAccount {
                nonce: account.nonce,
                balance: account.balance,
                storage_root,
                code_hash: account.code_hash,
            },
        )
    }))
}
