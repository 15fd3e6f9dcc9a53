//! Errors raised while reading a chain definition.

/// Why a `genesis.json` could not be turned into a [`crate::chain::ChainSpec`].
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The file could not be read.
    #[error("cannot read genesis file {path}: {error}")]
    Read {
        /// The path given.
        path: String,
        /// The underlying I/O error.
        error: std::io::Error,
    },
    /// The file is not a valid genesis (of geth's or Besu's dialect).
    #[error("genesis file {path} is not a valid genesis.json: {error}")]
    Parse {
        /// The path given.
        path: String,
        /// What serde said.
        error: serde_json::Error,
    },
    /// The file is JSON of a genesis, but says one field twice with two values (in two
    /// spellings), or has a value loupe cannot read.
    #[error("genesis file {path}: {message}")]
    Dialect {
        /// The path given.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The merge is configured in a way loupe cannot place at a block.
    #[error(
        "genesis sets terminalTotalDifficulty {ttd} without mergeNetsplitBlock: loupe needs \
         mergeNetsplitBlock to know the first proof-of-stake block"
    )]
    MergeBlockUnknown {
        /// The configured terminal total difficulty.
        ttd: alloy_primitives::U256,
    },
    /// A built-in network's genesis is broken (a build problem, never the user's input).
    #[error("{message}")]
    Embedded {
        /// What was wrong.
        message: String,
    },
}

impl ChainError {
    /// The same error naming the file at `path` (errors of a text read name `<json>`).
    pub fn at(self, path: &std::path::Path) -> Self {
        let path = path.display().to_string();
        match self {
            Self::Parse { error, .. } => Self::Parse { path, error },
            Self::Dialect { message, .. } => Self::Dialect { path, message },
            other => other,
        }
    }
}
