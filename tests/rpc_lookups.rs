//! Transaction lookups over the whole fixture chain: the three ways to name a transaction
//! (block number + index, block hash + index, transaction hash) and the block object agree, and
//! past-the-end / unknown references, tags and leading zeros behave as `behaviour.md` §2 says.
//! Each transaction's receipt, read alone, equals its entry in the block's receipts.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::Node;

const BY_NUM: &str = "eth_getTransactionByBlockNumberAndIndex";
const BY_BLOCK_HASH: &str = "eth_getTransactionByBlockHashAndIndex";
const BY_HASH: &str = "eth_getTransactionByHash";
const HEAD: u64 = 54;

fn q(n: u64) -> String {
    format!("{n:#x}")
}

fn ok(node: &Node, method: &str, params: Value) -> Value {
    node.call(method, params.clone()).unwrap_or_else(|e| panic!("{method}({params}) failed: {e}"))
}

/// One stored transaction as the storage layer sees it.
#[derive(Debug)]
struct Tx {
    block: u64,
    index: u32,
    block_hash: String,
    hash: String,
    sender: String,
}

/// Every block's (number, hash, tx count) and every transaction, read from storage.
fn stored() -> (Vec<(u64, String, u32)>, Vec<Tx>) {
    let chain = support::chain().unwrap();
    let r = chain.db.begin_read().unwrap();
    let mut blocks = Vec::new();
    let mut txs = Vec::new();
    for n in 0..=HEAD {
        let count = r.transaction_count(n).unwrap().unwrap_or_else(|| panic!("block {n} missing"));
        let block_hash = r.canonical_hash(n).unwrap().unwrap().to_string();
        for i in 0..count {
            let t = r.transaction(n, i).unwrap().unwrap_or_else(|| panic!("tx {n}/{i} missing"));
            txs.push(Tx {
                block: n,
                index: i,
                block_hash: block_hash.clone(),
                hash: t.tx.tx_hash().to_string(),
                sender: t.sender.to_string().to_lowercase(),
            });
        }
        blocks.push((n, block_hash, count));
    }
    assert!(r.transaction_count(HEAD + 1).unwrap().is_none(), "block {} stored", HEAD + 1);
    (blocks, txs)
}

#[test]
fn every_transaction_is_the_same_object_by_all_lookups() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (blocks, txs) = stored();
    assert!(!txs.is_empty());
    let mut types = BTreeSet::new();
    let mut full_blocks = std::collections::HashMap::new();
    for (n, hash, count) in &blocks {
        let full = ok(&node, "eth_getBlockByNumber", json!([q(*n), true]));
        let light = ok(&node, "eth_getBlockByNumber", json!([q(*n), false]));
        assert_eq!(full["hash"], json!(hash), "block {n}");
        assert_eq!(full["transactions"].as_array().unwrap().len(), *count as usize, "block {n}");
        assert_eq!(light["transactions"].as_array().unwrap().len(), *count as usize, "block {n}");
        assert_eq!(
            ok(&node, "eth_getBlockTransactionCountByNumber", json!([q(*n)])),
            json!(q(u64::from(*count)))
        );
        let receipts = ok(&node, "eth_getBlockReceipts", json!([q(*n)]));
        full_blocks.insert(*n, (full, light, receipts));
    }
    let mut logs_seen = 0;
    for t in &txs {
        let at = format!("block {} tx {} ({})", t.block, t.index, t.hash);
        let i = q(u64::from(t.index));
        let a = ok(&node, BY_NUM, json!([q(t.block), i]));
        let b = ok(&node, BY_BLOCK_HASH, json!([t.block_hash, i]));
        let c = ok(&node, BY_HASH, json!([t.hash]));
        assert!(a.is_object(), "{at}: {a}");
        assert_eq!(a, b, "{at}: by number+index vs by block hash+index");
        assert_eq!(a, c, "{at}: by number+index vs by hash");
        // The object is about the stored transaction.
        assert_eq!(a["hash"], json!(t.hash), "{at}");
        assert_eq!(a["blockHash"], json!(t.block_hash), "{at}");
        assert_eq!(a["blockNumber"], json!(q(t.block)), "{at}");
        assert_eq!(a["transactionIndex"], json!(i), "{at}");
        assert_eq!(a["from"], json!(t.sender), "{at}");
        // A second path: the block's transaction list.
        let (full, light, receipts) = &full_blocks[&t.block];
        assert_eq!(full["transactions"][t.index as usize], a, "{at}: block object differs");
        // The receipt by hash (read alone) is the block's receipt at that index (read whole).
        let receipt = ok(&node, "eth_getTransactionReceipt", json!([t.hash]));
        assert_eq!(receipt["transactionHash"], json!(t.hash), "{at}");
        assert_eq!(receipts[t.index as usize], receipt, "{at}: receipt differs from the block's");
        logs_seen += receipt["logs"].as_array().unwrap().len();
        assert_eq!(light["transactions"][t.index as usize], json!(t.hash), "{at}");
        assert_eq!(full["timestamp"], a["blockTimestamp"], "{at}");
        types.insert(a["type"].as_str().unwrap().to_string());
    }
    // The fixture chain holds every transaction type (README): all five were looked up.
    let want: BTreeSet<String> = ["0x0", "0x1", "0x2", "0x3", "0x4"].map(String::from).into();
    assert_eq!(types, want, "transaction types seen");
    assert!(logs_seen > 10, "receipts with logs were compared: {logs_seen}");
    println!("{} transactions in {} blocks: all lookups agree", txs.len(), blocks.len());
}

#[test]
fn past_the_end_and_unknown_blocks_are_null() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (blocks, _) = stored();
    // Index == tx count, in every block (incl. empty ones), by number and by hash.
    for (n, hash, count) in &blocks {
        let i = q(u64::from(*count));
        assert_eq!(ok(&node, BY_NUM, json!([q(*n), i])), Value::Null, "block {n} index {i}");
        assert_eq!(ok(&node, BY_BLOCK_HASH, json!([hash, i])), Value::Null, "block {n} index {i}");
    }
    // Indexes past u32 (storage keys are u32): null, not an error, nor a wrapped-around tx.
    let (_, hash1, count1) = &blocks[1];
    assert!(*count1 > 0);
    for i in ["0x100000000", "0x100000001", "0xffffffff", "0xffffffffffffffff"] {
        assert_eq!(ok(&node, BY_NUM, json!(["0x1", i])), Value::Null, "index {i}");
        assert_eq!(ok(&node, BY_BLOCK_HASH, json!([hash1, i])), Value::Null, "index {i}");
    }
    // Unknown block numbers.
    for n in ["0x37", "0x38", "0xffffffff", "0xffffffffffffffff"] {
        assert_eq!(ok(&node, BY_NUM, json!([n, "0x0"])), Value::Null, "block {n}");
    }
    // Unknown block hashes.
    let zero = format!("0x{}", "00".repeat(32));
    let dead = format!("0x{}deadbeef", "00".repeat(28));
    for h in [zero, dead] {
        assert_eq!(ok(&node, BY_BLOCK_HASH, json!([h, "0x0"])), Value::Null, "hash {h}");
    }
}

#[test]
fn tags_resolve_to_the_recorded_blocks() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (blocks, _) = stored();
    let markers = support::chain().unwrap().db.begin_read().unwrap().markers().unwrap().unwrap();
    // headfcu.json: head = safe = finalized = 54.
    assert_eq!((markers.head, markers.safe, markers.finalized), (HEAD, HEAD, HEAD));
    for (tag, n) in
        [("latest", HEAD), ("pending", HEAD), ("safe", HEAD), ("finalized", HEAD), ("earliest", 0)]
    {
        let by_tag = ok(&node, "eth_getBlockByNumber", json!([tag, false]));
        assert_eq!(by_tag["number"], json!(q(n)), "{tag}");
        assert_eq!(by_tag, ok(&node, "eth_getBlockByNumber", json!([q(n), false])), "{tag}");
        // Every index of the block, and one past the end, answers as the explicit number does.
        let count = blocks[n as usize].2;
        if tag == "latest" {
            assert!(count > 0, "block {HEAD} has no transaction: the tag check would be vacuous");
        }
        for i in 0..=u64::from(count) {
            let want = ok(&node, BY_NUM, json!([q(n), q(i)]));
            assert_eq!(want.is_null(), i == u64::from(count), "{tag} index {i}");
            assert_eq!(ok(&node, BY_NUM, json!([tag, q(i)])), want, "{tag} index {i}");
        }
    }
}

#[test]
fn quantities_with_leading_zeros_are_accepted() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (blocks, _) = stored();
    let want = ok(&node, BY_NUM, json!(["0x1", "0x1"]));
    assert!(want.is_object());
    for (b, i) in
        [("0x01", "0x1"), ("0x1", "0x01"), ("0x0001", "0x0001"), ("0x00000000000000000001", "0x1")]
    {
        assert_eq!(ok(&node, BY_NUM, json!([b, i])), want, "[{b}, {i}]");
    }
    assert_eq!(ok(&node, BY_NUM, json!(["0x1", "0x00"])), ok(&node, BY_NUM, json!(["0x1", "0x0"])));
    assert_eq!(ok(&node, BY_BLOCK_HASH, json!([blocks[1].1, "0x01"])), want);
    // Hex digits in either case.
    let has_letter = |n: u64| format!("{n:x}").bytes().any(|b| b.is_ascii_alphabetic());
    let (n, _, _) = blocks.iter().find(|(n, _, c)| *c > 0 && has_letter(*n)).unwrap();
    let lower = ok(&node, BY_NUM, json!([q(*n), "0x0"]));
    let upper = format!("0x{n:X}");
    assert_eq!(ok(&node, BY_NUM, json!([upper, "0x0"])), lower, "block {upper}");
    // Leading zeros on a past-the-end index are still past the end.
    assert_eq!(ok(&node, BY_NUM, json!(["0x1", "0x000000000000000100000000"])), Value::Null);
}

/// Whole blocks and block receipts served from the block cache equal the same objects built
/// afresh by a node without one, block by block, by number and by hash, read twice (the second
/// read is a hit).
#[test]
fn cached_blocks_and_receipts_equal_those_built_afresh() {
    let Some(cached) = Node::start(|_| {}) else { return };
    let Some(fresh) = Node::start(|c| c.block_cache_bytes = 0) else { return };
    for n in 0..=HEAD {
        let want_hashes = ok(&fresh, "eth_getBlockByNumber", json!([q(n), false]));
        let want_full = ok(&fresh, "eth_getBlockByNumber", json!([q(n), true]));
        let want_receipts = ok(&fresh, "eth_getBlockReceipts", json!([q(n)]));
        let hash = want_hashes["hash"].clone();
        for _ in 0..2 {
            assert_eq!(ok(&cached, "eth_getBlockByNumber", json!([q(n), false])), want_hashes);
            assert_eq!(ok(&cached, "eth_getBlockByHash", json!([hash, false])), want_hashes);
            assert_eq!(ok(&cached, "eth_getBlockByNumber", json!([q(n), true])), want_full);
            assert_eq!(ok(&cached, "eth_getBlockByHash", json!([hash, true])), want_full);
            assert_eq!(ok(&cached, "eth_getBlockReceipts", json!([q(n)])), want_receipts);
            assert_eq!(ok(&cached, "eth_getBlockReceipts", json!([hash])), want_receipts);
        }
    }
}
