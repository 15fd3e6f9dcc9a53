//! [`FollowError`]: what can go wrong while following an upstream, split into what is retried
//! ([`FollowError::is_transient`]) and what stops following.

use alloy_primitives::B256;

use crate::import::ImportError;
use crate::storage::StorageError;

/// Errors of the follower.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// `--upstream` is not a usable URL.
    #[error("--upstream {url}: {message}")]
    BadUpstreamUrl {
        /// The URL given.
        url: String,
        /// Why it is not usable.
        message: String,
    },
    /// The upstream could not be reached, timed out, or answered something unusable. Retried.
    #[error("upstream {url}: {message}")]
    Upstream {
        /// The upstream's URL.
        url: String,
        /// What failed.
        message: String,
    },
    /// The upstream serves another chain.
    #[error("the upstream serves another chain: its {what} is {upstream}, ours is {ours}")]
    WrongChain {
        /// `chain id` or `genesis hash`.
        what: &'static str,
        /// The upstream's value.
        upstream: String,
        /// The local value.
        ours: String,
    },
    /// The upstream's chain forked from ours deeper than `--follow.max-reorg`.
    #[error(
        "reorg deeper than --follow.max-reorg {max}: the upstream's block {number} is {theirs}, ours is {ours}, and no common block was found within {max} blocks of our head {head}"
    )]
    ReorgTooDeep {
        /// The limit.
        max: u64,
        /// Local head.
        head: u64,
        /// The deepest block compared.
        number: u64,
        /// The upstream's hash there.
        theirs: B256,
        /// Ours.
        ours: B256,
    },
    /// Something loupe cannot follow (e.g. a block shape the upstream cannot deliver exactly).
    #[error("{0}")]
    Unsupported(String),
    /// A block failed verification (or could not be stored); it was not stored.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// A strict datadir refused a block of anvil or hardhat for a rule they relax on purpose.
    #[error(
        "{error}; the upstream is {client}, which mines equal timestamps, lets its user set \
         the base fee and commits its transactions root to blob sidecars: this datadir's \
         header policy is strict, so follow it with a datadir initialised with \
         `--header-policy dev`"
    )]
    StrictPolicy {
        /// The refusal.
        error: ImportError,
        /// The upstream's client version.
        client: String,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl FollowError {
    /// Worth retrying (the upstream may recover); every other error stops following.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Upstream { .. } => true,
            // Retried until space is freed; the node serves what it has meanwhile.
            Self::Storage(e) => e.is_disk_full(),
            Self::Import(e) => {
                matches!(e.root(), ImportError::Storage(s) if s.is_disk_full())
            }
            _ => false,
        }
    }
}
