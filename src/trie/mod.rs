//! The state trie: incremental state root over storage's hashed tables, proofs at any stored
//! block, and the full rebuild that checks both (`loupe verify`).
//!
//! Only branch nodes are stored (`account_trie`, `storage_trie`), each with the hashes of its
//! branch children; leaves come from the hashed state. A block's root re-hashes only the paths
//! under keys the block changed (`walk.rs`); see `docs/design.md` for tables and flows.

mod codec;
mod db;
mod error;
mod history;
mod later;
mod memo;
mod overlay;
mod proof;
mod root;
pub mod stage;
#[cfg(test)]
mod tests;
mod verify;
mod walk;
mod witness;

pub use error::TrieError;
pub use overlay::overlay_state_root;
pub use proof::{AccountProof, StorageProof, prove_account};
pub use root::{DeferredRoot, RootMode, build_state_root, settle_state_root, update_state_root};
pub use verify::{VerifyReport, verify, verify_history};
pub use witness::{Multiproof, NodesByPath, TrieOwner, node_at, prove_many};
