//! EVM-layer errors.

/// Why a block could not be executed.
#[derive(Debug, thiserror::Error)]
pub enum EvmError {
    /// alloy-evm rejected or failed a transaction or a system call.
    #[error("transaction {index}: {message}")]
    Transaction {
        /// Index of the transaction in the block.
        index: usize,
        /// What the executor said.
        message: String,
    },
    /// Pre- or post-block changes (system calls, rewards, requests) failed.
    #[error("block-level execution: {0}")]
    Block(String),
    /// Computing an intermediate (pre-Byzantium) state root failed.
    #[error("intermediate state root after transaction {index}: {message}")]
    IntermediateRoot {
        /// Index of the transaction.
        index: usize,
        /// What failed.
        message: String,
    },
}
