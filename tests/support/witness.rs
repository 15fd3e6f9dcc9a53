//! The archive's own execution witness of a stored block, run back statelessly: the same roots
//! as the header, and no node that the run does without.

#![allow(unreachable_pub, dead_code)]
use loupe::chain::ChainSpec;
use loupe::storage::Database;
use loupe::witness::{build_witness, parse_execution_witness, run_block, stored_block};

/// What one block's round trip gave.
#[derive(Debug, Default, Clone, Copy)]
pub struct Trip {
    /// Nodes in the witness.
    pub nodes: usize,
    /// Codes in the witness.
    pub codes: usize,
}

/// Builds block `n`'s witness from the archive as `debug_executionWitness` serves it (its
/// JSON), runs the block on it statelessly and checks the run against the stored header. With
/// `minimal`, each node is then dropped in turn and the run must fail without it.
pub fn round_trip(db: &Database, spec: &ChainSpec, n: u64, minimal: bool) -> Result<Trip, String> {
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let built = build_witness(&r, spec, n, None).map_err(|e| format!("block {n}: build: {e}"))?;
    let json = serde_json::to_value(&built.witness).map_err(|e| e.to_string())?;
    let witness = parse_execution_witness(json).map_err(|e| format!("block {n}: parse: {e}"))?;
    let (block, _) = stored_block(&r, n).map_err(|e| e.to_string())?;
    let out = run_block(spec, &witness, &block).map_err(|e| format!("block {n}: run: {e}"))?;
    if out.state_root != block.header.state_root {
        return Err(format!("block {n}: root {} is not the header's", out.state_root));
    }
    let stored = r.receipts(n).map_err(|e| e.to_string())?.unwrap_or_default();
    if stored != out.receipts {
        return Err(format!("block {n}: the stateless receipts differ from the stored ones"));
    }
    if minimal {
        for hash in witness.nodes.keys() {
            let mut less = witness.clone();
            less.remove_node(hash);
            if run_block(spec, &less, &block).is_ok() {
                return Err(format!("block {n}: node {hash} is not needed, yet in the witness"));
            }
        }
    }
    Ok(Trip { nodes: witness.nodes.len(), codes: witness.codes.len() })
}
