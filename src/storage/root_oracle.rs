//! [`FullRecompute`]: the state root rebuilt from the whole state listed by address, an oracle
//! the incremental trie (`src/trie`) is tested against. O(state) time and memory: for tests and
//! small chains only.

use alloy_primitives::{B256, keccak256};
use alloy_trie::TrieAccount;
use alloy_trie::root::{state_root_unsorted, storage_root_unhashed};

use super::{StateDump, StorageResult, Writer};

/// Rebuilds the whole trie from the state tables (listed by address and slot), in memory.
#[derive(Debug, Default, Clone, Copy)]
pub struct FullRecompute;

impl FullRecompute {
    /// Root of the state currently in `writer` (including its uncommitted changes).
    pub fn state_root(&self, writer: &Writer) -> StorageResult<B256> {
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
