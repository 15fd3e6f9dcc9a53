//! Stateless execution of a block from an execution witness: the trie nodes, code and ancestor
//! headers a block touches, read from geth/reth's `debug_executionWitness` JSON, geth's RLP
//! `ExtWitness`, a set of `eth_getProof` answers (zeth's host cache) or a nimbus-eth1 trie
//! dump, all normalised into one [`Witness`]; then [`run_block`] executes the block over it
//! ([`WitnessState`], a revm `DatabaseRef`) and checks gas, receipts, bloom and the post-state
//! root (computed over the partial trie, `root.rs`) against the header.
//!
//! A node that is needed but absent is an error naming its hash, never an absent account.
//!
//! The other way round, [`build_witness`] makes the witness of a stored block from the
//! archive's trie history (`archive.rs`), what `debug_executionWitness` serves.

mod archive;
mod block;
mod error;
mod ext;
mod json;
mod load;
mod nimbus;
mod nodes;
mod proofs;
mod record;
mod root;
mod run;
mod state;

use std::collections::HashMap;

use alloy_consensus::Header;
use alloy_primitives::{B256, Bytes, keccak256};

pub use archive::{Built, build_witness, stored_block};
pub use block::parse_block;
pub use error::WitnessError;
pub use ext::parse_ext_witness;
pub use json::parse_execution_witness;
pub use load::{Loaded, load_witness, read_witness_file};
pub use nimbus::parse_nimbus;
pub use proofs::{parse_proofs, parse_zeth};
pub use root::post_state_root;
pub use run::{StateReads, StatelessOutcome, run_block, run_block_with};
pub use state::WitnessState;

/// A block's execution witness, whatever format it came in.
#[derive(Debug, Clone, Default)]
pub struct Witness {
    /// Trie nodes (account and storage tries of the parent state) by keccak256 of their RLP.
    pub nodes: HashMap<B256, Bytes>,
    /// Contract code by keccak256.
    pub codes: HashMap<B256, Bytes>,
    /// Ancestor headers: the parent, and those BLOCKHASH reaches, in any order.
    pub headers: Vec<Header>,
    /// Preimages of the hashed keys (addresses and slots), where the format carries them.
    pub keys: Vec<Bytes>,
}

impl Witness {
    /// Adds a trie node, keyed by its hash (returned).
    pub fn add_node(&mut self, rlp: Bytes) -> B256 {
        let hash = keccak256(&rlp);
        self.nodes.insert(hash, rlp);
        hash
    }

    /// Adds code, keyed by its hash (returned).
    pub fn add_code(&mut self, code: Bytes) -> B256 {
        let hash = keccak256(&code);
        self.codes.insert(hash, code);
        hash
    }

    /// Removes the node with this hash (for tests that drop a node and run again).
    pub fn remove_node(&mut self, hash: &B256) -> Option<Bytes> {
        self.nodes.remove(hash)
    }

    /// The header with this hash, if the witness holds it.
    pub fn header_by_hash(&self, hash: B256) -> Option<&Header> {
        self.headers.iter().find(|h| h.hash_slow() == hash)
    }
}
