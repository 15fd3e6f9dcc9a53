//! `debug_executionWitness` from the archive (issue 61): for every block of the dev chain, the
//! execution-apis chain and a generated chain, the witness loupe builds from its trie history
//! re-executes statelessly to the header's roots and the stored receipts, holds no node the run
//! does without (each dropped in turn makes the run fail), and an anchored datadir built from
//! it (`loupe witness serve`'s) traces the block byte for byte as the archive does. The
//! consensus suites' valid chains get the same round trip in `tests/consensus.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use loupe::chain::ChainSpec;
use loupe::storage::Database;
use loupe::witness::build_witness;
use serde_json::json;
use support::witness::{round_trip, traces_match};
use support::{Node, dev_chain};

/// Every block from 1 to the head round-trips; `minimal` picks the blocks whose every node is
/// dropped in turn. Returns the blocks with transactions.
fn every_block(db: &Database, spec: &ChainSpec, minimal: impl Fn(u64) -> bool) -> Vec<u64> {
    let r = db.begin_read().unwrap();
    let head = r.head().unwrap().unwrap();
    let mut with_txs = Vec::new();
    for n in 1..=head {
        let trip = round_trip(db, spec, n, minimal(n)).unwrap_or_else(|e| panic!("{e}"));
        assert!(trip.nodes > 0, "block {n}: an empty witness");
        if r.transaction_count(n).unwrap().unwrap_or(0) > 0 {
            with_txs.push(n);
        }
    }
    with_txs
}

/// The traces of `blocks` from anchored datadirs built from the archive's witnesses of them
/// equal the archive's own, byte for byte ([`traces_match`]).
fn traces_from_the_witness(
    db: &Arc<Database>,
    spec: &ChainSpec,
    blocks: &[u64],
    struct_logs: bool,
) {
    for &n in blocks {
        traces_match(db, spec, n, struct_logs).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn dev_chain_witnesses_reexecute_and_trace_as_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let with_txs = every_block(&db, &spec, |_| true);
    assert!(!with_txs.is_empty());
    traces_from_the_witness(&db, &spec, &with_txs, true);
}

#[test]
fn execution_apis_witnesses_reexecute_and_trace_as_the_archive() {
    let Some(chain) = support::chain() else { return };
    let with_txs = every_block(&chain.db, &chain.spec, |_| true);
    traces_from_the_witness(&chain.db, &chain.spec, &with_txs, true);
}

#[test]
fn generated_chain_witnesses_reexecute() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 500, 8);
    config.seed = 7;
    config.gas_limit = 5_000_000;
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let db = Database::open(&tmp.path().join("node")).unwrap();
    let genesis = std::fs::read_to_string(out.join("genesis.json")).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).unwrap();
    loupe::import::import_files(&db, &spec, &[out.join("chain.rlp")]).unwrap();
    let db = Arc::new(db);
    // Every node of the first and last blocks is dropped in turn.
    let with_txs = every_block(&db, &spec, |n| n == 1 || n == 8);
    assert_eq!(with_txs.len(), 8);
    traces_from_the_witness(&db, &spec, &[with_txs[0], with_txs[7]], false);
}

/// Over RPC: the witness of a stored block, the genesis refused, an unknown block not found.
#[test]
fn served_over_rpc() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, tip) = dev_chain(dir.path());
    let node = Node::serve(db.clone(), spec.clone(), |_| {});
    let by_number = node.call("debug_executionWitness", json!([format!("{tip:#x}")])).unwrap();
    let hash = db.begin_read().unwrap().canonical_hash(tip).unwrap().unwrap();
    let by_hash = node.call("debug_executionWitnessByBlockHash", json!([hash])).unwrap();
    assert_eq!(by_number, by_hash);
    let built = build_witness(&db.begin_read().unwrap(), &spec, tip, None).unwrap();
    assert_eq!(by_number, serde_json::to_value(&built.witness).unwrap());
    let e = node.call("debug_executionWitness", json!(["0x0"])).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("genesis"), "{e}");
    let e = node.call("debug_executionWitness", json!([format!("{:#x}", tip + 1)])).unwrap_err();
    assert_eq!(e["message"], "header not found", "{e}");
    let e = node.call("debug_executionWitness", json!(["pending"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
}
