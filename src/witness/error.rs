//! Witness-layer errors.

use alloy_primitives::B256;

use crate::storage::StorageError;
use crate::trie::TrieError;

/// Errors from building or running an execution witness.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// Reading the archive failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Proving the touched keys failed (or the datadir keeps no proofs at that block).
    #[error(transparent)]
    Trie(#[from] TrieError),
    /// The block is not stored.
    #[error("block {0} is not stored")]
    UnknownBlock(u64),
    /// Block 0 has no parent state to witness.
    #[error("the genesis block has no execution witness: it is not executed")]
    Genesis,
    /// Executing the block on its parent's state failed.
    #[error("block {number}: {message}")]
    Execution {
        /// The block.
        number: u64,
        /// What the executor said.
        message: String,
    },
    /// A code the execution loaded could not be read.
    #[error("code {hash}: {message}")]
    Code {
        /// Its hash.
        hash: B256,
        /// Why.
        message: String,
    },
    /// The deadline passed (the time allowed).
    #[error("timeout after {0:?}")]
    Timeout(std::time::Duration),
    /// This thread's cancellation flag was set.
    #[error("cancelled")]
    Cancelled,
}
