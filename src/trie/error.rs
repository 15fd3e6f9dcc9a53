//! Trie-layer errors.

use alloy_primitives::B256;

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
    /// The block was imported with one state root per epoch and the trie-history stage has
    /// not built its per-block history yet.
    #[error(
        "proofs at block {block} are not ready: blocks {first}..={grouped_to} were imported with \
         one state root per epoch, and the trie-history stage has built per-block history up to \
         block {staged_to} (proofs at every block up to it, at each epoch's last block, and from \
         block {grouped_to} on)",
        first = staged_to + 1
    )]
    ProofsStaging {
        /// The block asked for.
        block: u64,
        /// The stage's progress: every block up to it has proofs.
        staged_to: u64,
        /// The last block waiting for the stage.
        grouped_to: u64,
    },
    /// The trie-history stage found a block whose header state root is not the root of the
    /// state its execution left: the import checked that block's epoch by its last root only.
    #[error(
        "block {block}'s header state root {header} is not the root of its state {computed} \
         (found by the trie-history stage, which checks every block of an epoch imported with one \
         root check; the stage stops there)"
    )]
    StageRootMismatch {
        /// The block.
        block: u64,
        /// The header's state root.
        header: B256,
        /// The root of the block's state.
        computed: B256,
    },
    /// The trie-history stage was asked for something it cannot build.
    #[error("trie-history stage: {0}")]
    Stage(String),
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
