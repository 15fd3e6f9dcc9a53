//! `eth_getBlockAccessList` and `debug_getRawBlockAccessList` (issue 59) on the Amsterdam dev
//! chain, across its fork, with history epochs of 4 blocks and an unwind window of 4 so that
//! most blocks' access lists are read back from segment files: for every Amsterdam block the
//! JSON list (read back through alloy-eip7928's deserialiser) and the raw RLP both hash to the
//! header's `blockAccessListHash`, and encode to the same bytes; by hash as by number; before
//! Amsterdam both answer -32001 (execution-apis #851), and an unknown block or `pending` is
//! `null` (the raw getter: -32001).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use alloy_eip7928::AccountChanges;
use alloy_primitives::{B256, Bytes, keccak256};
use loupe::storage::Database;
use loupe::storage::history::keys::Epochs;
use serde_json::{Value, json};

/// Amsterdam from block 3 (the builder's blocks are 12 s apart from genesis at 0).
const AMSTERDAM_AT: u64 = 36;

#[test]
fn access_lists_hash_to_their_headers_from_the_btree_and_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 }).unwrap();
    let genesis = loupe::dev::amsterdam_dev_genesis_json(AMSTERDAM_AT);
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).unwrap();
    let w = db.begin_write().unwrap();
    w.set_unwind_depth(4).unwrap();
    w.commit(true).unwrap();
    let head = loupe::dev::build_sample_history(&db, &spec).unwrap();
    assert_eq!(head, 20);
    // Some blocks' lists are in segment files (else this test would read the B-tree only).
    let frozen = {
        let w = db.begin_write().unwrap();
        let m = loupe::storage::segments::Manifest::read(
            &w.transaction().open_table(loupe::storage::tables::META).unwrap(),
        )
        .unwrap();
        m.of(loupe::storage::segments::Kind::AccessLists).count()
    };
    assert!(frozen > 0, "no access list was frozen");
    let node = support::Node::serve(Arc::new(db), spec, |_| {});
    let mut amsterdam = 0;
    for n in 0..=head {
        let q = format!("{n:#x}");
        let block = node.call("eth_getBlockByNumber", json!([q, false])).unwrap();
        let by_number = node.call("eth_getBlockAccessList", json!([q]));
        let raw = node.call("debug_getRawBlockAccessList", json!([q]));
        let Some(expected) = block["blockAccessListHash"].as_str() else {
            assert!(n < 3, "block {n} has no blockAccessListHash");
            for (what, answer) in [("json", &by_number), ("raw", &raw)] {
                let err = answer.as_ref().unwrap_err();
                assert_eq!(err["code"], json!(-32001), "{what} at {n}: {err}");
                assert!(err["message"].as_str().unwrap().contains("before Amsterdam"), "{err}");
            }
            continue;
        };
        amsterdam += 1;
        let expected: B256 = expected.parse().unwrap();
        let list: Vec<AccountChanges> = serde_json::from_value(by_number.unwrap()).unwrap();
        assert_eq!(alloy_eip7928::compute_block_access_list_hash(&list), expected, "json at {n}");
        let raw: Bytes = serde_json::from_value(raw.unwrap()).unwrap();
        assert_eq!(keccak256(&raw), expected, "raw at {n}");
        let mut encoded = Vec::new();
        alloy_rlp::encode_list(&list, &mut encoded);
        assert_eq!(encoded, raw.to_vec(), "the JSON and the RLP at {n} are two lists");
        // Every account's system calls, at least EIP-2935's history contract, are in it.
        assert!(list.iter().any(|a| a.address == alloy_eips::eip2935::HISTORY_STORAGE_ADDRESS));
        let by_hash = node.call("eth_getBlockAccessList", json!([block["hash"]])).unwrap();
        let back: Vec<AccountChanges> = serde_json::from_value(by_hash).unwrap();
        assert_eq!(back, list, "by hash at {n}");
    }
    assert_eq!(amsterdam, head - 2);
    for unknown in [json!("0x3e8"), json!("pending"), json!(B256::repeat_byte(7))] {
        let answer = node.call("eth_getBlockAccessList", json!([unknown])).unwrap();
        assert_eq!(answer, Value::Null, "{unknown}");
        let err = node.call("debug_getRawBlockAccessList", json!([unknown])).unwrap_err();
        assert_eq!(err["code"], json!(-32001), "{unknown}: {err}");
    }
    let err = node.call("eth_getBlockAccessList", json!([])).unwrap_err();
    assert_eq!(err["code"], json!(-32602), "{err}");
}
