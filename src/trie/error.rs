//! Trie-layer errors.

use crate::storage::StorageError;

/// Errors from computing, checking or proving the state trie.
#[derive(Debug, thiserror::Error)]
pub enum TrieError {
    /// Reading or writing the database failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A stored trie row does not decode.
    #[error("corrupt row in {table} at key 0x{key}: {detail}")]
    CorruptNode {
        /// Table name.
        table: &'static str,
        /// The row's key, hex.
        key: String,
        /// What was wrong.
        detail: String,
    },
    /// `verify` found a stored value that differs from the one rebuilt from the state.
    #[error("{what} at {location}: stored {stored}, rebuilt {expected}")]
    Mismatch {
        /// Which kind of value (a node, a storage root, the state root).
        what: &'static str,
        /// Where: trie, owner account and nibble path.
        location: String,
        /// The stored value (a hash).
        stored: String,
        /// The value rebuilt from the state tables (a hash).
        expected: String,
    },
    /// The block asked for is not stored.
    #[error("block {0} is not stored")]
    UnknownBlock(u64),
    /// The datadir keeps trie history for the unwind window only, and the block is below it.
    #[error(
        "proofs at block {block} are not kept: this datadir was initialised with \
         `--proof-history window`, which keeps trie history for the unwind window only \
         (proofs from block {from} on)"
    )]
    ProofsNotKept {
        /// The block asked for.
        block: u64,
        /// The oldest block with proofs.
        from: u64,
    },
    /// The block was imported in a commit group whose state root was checked once, at the
    /// group's last block, and is older than the last such block.
    #[error(
        "proofs at block {block} are not kept: blocks up to {from} were imported with one state \
         root per commit group (`loupe import --state-root group`, the default in a \
         `--proof-history window` datadir); proofs from block {from} on"
    )]
    ProofsGrouped {
        /// The block asked for.
        block: u64,
        /// The oldest block with proofs.
        from: u64,
    },
    /// The datadir starts at an anchor block and holds only the state of a witness there and
    /// after (`import::anchor`), without the full trie that proofs and state roots need.
    #[error(
        "this datadir holds only the state of a witness (it starts at anchor block {anchor}), not the full state trie that {what} needs"
    )]
    Anchored {
        /// The anchor block.
        anchor: u64,
        /// What was asked.
        what: &'static str,
    },
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for TrieError {
            fn from(e: $t) -> Self { Self::Storage(StorageError::from(redb::Error::from(e))) }
        }
    )*};
}
from_redb!(redb::TableError, redb::StorageError);
