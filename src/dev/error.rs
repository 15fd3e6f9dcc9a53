//! [`DevError`]: why building the dev chain or generating a chain failed.

use crate::import::ImportError;

/// Why the dev chain could not be built, or a chain could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// Signing a dev transaction failed.
    #[error("signing a dev transaction: {0}")]
    Sign(String),
    /// Building a block failed.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// The generator's parameters are unusable.
    #[error("invalid generator setting: {0}")]
    Config(String),
    /// Reading or writing a file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A stored block that should exist is missing.
    #[error("block {0} is not stored")]
    MissingBlock(u64),
    /// A generated transaction did not end the way the generator meant it to (a bug in the
    /// generator's bookkeeping or gas limits).
    #[error(
        "block {block} transaction {index} ({kind}): expected {}, got {}",
        if *.expected_success { "success" } else { "a revert" },
        if *.expected_success { "a failure" } else { "success" }
    )]
    UnexpectedOutcome {
        /// Block number.
        block: u64,
        /// Index in the block.
        index: usize,
        /// What the transaction was meant to do.
        kind: &'static str,
        /// Whether it was meant to succeed.
        expected_success: bool,
    },
}

impl DevError {
    /// An [`DevError::Io`] error with its context.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }
}
