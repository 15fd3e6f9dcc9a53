//! [`WitnessError`]: why a witness could not be read, or a block not executed or verified from it.

use alloy_primitives::{Address, B256};

use crate::evm::EvmError;

/// Why stateless execution failed. Each message names what is missing or wrong.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// A trie node the run needs is not in the witness.
    #[error("trie node {hash} is missing from the witness (needed to {needed_for})")]
    MissingNode {
        /// keccak256 of the missing node's RLP.
        hash: B256,
        /// What the node was needed for (the account or slot being read or written).
        needed_for: String,
    },
    /// A node of the witness does not decode as a trie node.
    #[error("trie node {hash} of the witness does not decode: {message}")]
    BadNode {
        /// keccak256 of the node.
        hash: B256,
        /// The decoder's complaint.
        message: String,
    },
    /// An account leaf or storage value in the trie does not decode.
    #[error("the trie value of {what} does not decode: {message}")]
    BadValue {
        /// The account or slot.
        what: String,
        /// The decoder's complaint.
        message: String,
    },
    /// Code the run needs is not in the witness.
    #[error("code {hash} is missing from the witness")]
    MissingCode {
        /// keccak256 of the code.
        hash: B256,
    },
    /// An ancestor header the run needs (BLOCKHASH, or the parent) is not in the witness.
    #[error("the header of block {number} is missing from the witness")]
    MissingHeader {
        /// Its block number.
        number: u64,
    },
    /// A value computed from the witness differs from the block's header (or the parent's).
    #[error("{what} mismatch: header has {expected}, execution gives {got}")]
    Mismatch {
        /// What was compared (`gas used`, `receipts root`, `state root`, …).
        what: &'static str,
        /// The header's value.
        expected: String,
        /// The computed value.
        got: String,
    },
    /// A transaction's signature does not recover.
    #[error("transaction {index}: sender does not recover: {message}")]
    Signature {
        /// Index in the block.
        index: usize,
        /// Why.
        message: String,
    },
    /// The block's execution failed.
    #[error("execution: {0}")]
    Execution(#[from] EvmError),
    /// The post-state trie could not be updated (other than for a missing node).
    #[error("updating the trie for {what}: {message}")]
    Trie {
        /// The account or slot being written.
        what: String,
        /// What the trie said.
        message: String,
    },
    /// A witness or block file is not of a format loupe reads, or is malformed.
    #[error("{format}: {message}")]
    Format {
        /// The format being read.
        format: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The witness file holds no block and none was given.
    #[error("no block: the witness file holds none, give one with --block")]
    NoBlock,
    /// An account read returned data for a different address than asked (a bad proof).
    #[error("proof of {address}: {message}")]
    BadProof {
        /// The proved account.
        address: Address,
        /// What is wrong.
        message: String,
    },
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Reading the archive failed (building a witness).
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// Proving the touched keys at the parent failed, or the datadir keeps no proofs there.
    #[error(transparent)]
    Proof(#[from] crate::trie::TrieError),
    /// The block asked for is not stored.
    #[error("block {0} is not stored")]
    UnknownBlock(u64),
    /// Block 0 has no parent state to witness.
    #[error("the genesis block has no execution witness: it is not executed")]
    Genesis,
    /// Executing a stored block on its parent's stored state failed (building a witness).
    #[error("block {number}: {message}")]
    Archive {
        /// The block.
        number: u64,
        /// What went wrong.
        message: String,
    },
    /// The time allowed passed.
    #[error("timeout after {0:?}")]
    Timeout(std::time::Duration),
    /// This thread's cancellation flag was set.
    #[error("cancelled")]
    Cancelled,
}

impl revm::database::DBErrorMarker for WitnessError {}

impl WitnessError {
    /// A format error.
    pub(crate) fn format(format: &'static str, message: impl std::fmt::Display) -> Self {
        Self::Format { format, message: message.to_string() }
    }
}
