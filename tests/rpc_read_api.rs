//! The read methods around `trace_call` (issue 11), each checked against an independent truth on
//! the execution-apis fixture chain: geth's recorded answers (also where the fixture only checks
//! the shape), header roots (raw receipts and transactions rebuild `receiptsRoot` and
//! `transactionsRoot`), and second paths through other methods (logs against block receipts,
//! fee history against headers and receipts, the tip rule re-derived from full blocks, storage
//! values against `eth_getStorageAt`). Filters are polled while blocks arrive. Receipts, logs and
//! fee history are checked again on generated blocks of 40 transactions each.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// `common` (split fixture blocks) and `support` (the shared node) both load the fixture locator.
#![allow(clippy::duplicate_mod)]

use crate::common;
use crate::support;

use std::collections::BTreeSet;
use std::sync::Arc;

use alloy_consensus::proofs::ordered_trie_root_with_encoder;
use alloy_primitives::{B256, Bytes, keccak256};
use serde_json::{Value, json};
use support::Node;

fn hex(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn node() -> Option<Node> {
    Node::start(|_| {})
}

fn head(n: &Node) -> u64 {
    hex(&n.call("eth_blockNumber", json!([])).unwrap()) as u64
}

/// Every log of blocks `from..=to`, from `eth_getBlockReceipts`.
fn receipt_logs(n: &Node, from: u64, to: u64) -> Vec<Value> {
    let mut out = Vec::new();
    for b in from..=to {
        let receipts = n.call("eth_getBlockReceipts", json!([format!("{b:#x}")])).unwrap();
        for r in receipts.as_array().unwrap() {
            out.extend(r["logs"].as_array().unwrap().iter().cloned());
        }
    }
    out
}

/// A server over its own database (the shared fixture node cannot grow), stopped when dropped.
struct Served {
    url: String,
    server: Option<loupe::rpc::RpcServer>,
    rt: tokio::runtime::Runtime,
}

impl Served {
    fn start(
        db: Arc<loupe::storage::Database>,
        spec: loupe::chain::ChainSpec,
        tweak: impl FnOnce(&mut loupe::rpc::RpcConfig),
    ) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut config =
            loupe::rpc::RpcConfig { addr: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
        tweak(&mut config);
        let server = rt.block_on(loupe::rpc::start(db, spec, config)).unwrap();
        Self { url: format!("http://{}/", server.addr), server: Some(server), rt }
    }

    /// `Ok(result)` or `Err(error object)`.
    fn try_call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let v: Value = reqwest::blocking::Client::new()
            .post(&self.url)
            .json(&body)
            .send()
            .unwrap()
            .json()
            .unwrap();
        match v.get("error") {
            Some(e) => Err(e.clone()),
            None => Ok(v["result"].clone()),
        }
    }

    /// A call that must succeed.
    fn call(&self, method: &str, params: Value) -> Value {
        self.try_call(method, params.clone()).unwrap_or_else(|e| panic!("{method} {params}: {e}"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.stop());
        }
    }
}

/// The dev chain with its sample history in a fresh datadir: database, spec, head.
fn dev_chain(
    tmp: &tempfile::TempDir,
) -> (Arc<loupe::storage::Database>, loupe::chain::ChainSpec, u64) {
    let db = loupe::storage::Database::open(tmp.path()).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
    let tip = loupe::dev::build_sample_history(&db, &spec).unwrap();
    (Arc::new(db), spec, tip)
}

#[test]
fn get_logs_equals_the_receipts_for_every_address_and_topic() {
    let Some(n) = node() else { return };
    let tip = head(&n);
    let all = receipt_logs(&n, 0, tip);
    assert!(all.len() > 10, "the fixture chain has logs");
    let got = n.call("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest"}])).unwrap();
    assert_eq!(got.as_array().unwrap(), &all);
    let addresses: BTreeSet<String> =
        all.iter().map(|l| l["address"].as_str().unwrap().to_string()).collect();
    for a in &addresses {
        let want: Vec<&Value> = all.iter().filter(|l| l["address"] == json!(a)).collect();
        let got = n.call("eth_getLogs", json!([{"fromBlock": "earliest", "address": a}])).unwrap();
        assert_eq!(got.as_array().unwrap().iter().collect::<Vec<_>>(), want, "address {a}");
    }
    for pos in 0..4 {
        let topics: BTreeSet<String> = all
            .iter()
            .filter_map(|l| l["topics"].get(pos).map(|t| t.as_str().unwrap().to_string()))
            .collect();
        for t in topics {
            let want: Vec<&Value> =
                all.iter().filter(|l| l["topics"].get(pos) == Some(&json!(t))).collect();
            let mut filter = vec![Value::Null; pos];
            filter.push(json!([t]));
            let got =
                n.call("eth_getLogs", json!([{"fromBlock": "0x0", "topics": filter}])).unwrap();
            assert_eq!(got.as_array().unwrap().iter().collect::<Vec<_>>(), want, "topic {pos} {t}");
        }
    }
    // A topic no log has, and an address no log has: nothing.
    let none = n
        .call("eth_getLogs", json!([{"fromBlock": "0x0", "topics": [[B256::repeat_byte(7)]]}]))
        .unwrap();
    assert_eq!(none, json!([]));
    // By block hash: the block's logs.
    let b = all[0]["blockHash"].clone();
    let want: Vec<&Value> = all.iter().filter(|l| l["blockHash"] == b).collect();
    let got = n.call("eth_getLogs", json!([{"blockHash": b}])).unwrap();
    assert_eq!(got.as_array().unwrap().iter().collect::<Vec<_>>(), want);
}

/// A topic position is null, a hash or an array of hashes: a nested array (`[[[T]]]`), a short
/// hash or a number is -32602 naming the position (and the item within it) and saying what a
/// position takes, in `eth_getLogs` and `eth_newFilter` alike; a valid filter still answers.
#[test]
fn a_malformed_topic_is_named_by_its_position() {
    let Some(n) = node() else { return };
    let t = format!("{:#x}", B256::repeat_byte(7));
    let cases = [
        (json!([[[t]]]), "topics[0][0]"),
        (json!([null, [t, [t]]]), "topics[1][1]"),
        (json!([null, null, "0x12"]), "topics[2]"),
        (json!([5]), "topics[0]"),
        (json!([[t, {}]]), "topics[0][1]"),
    ];
    for (topics, position) in cases {
        for method in ["eth_getLogs", "eth_newFilter"] {
            let e = n.call(method, json!([{"topics": topics}])).unwrap_err();
            assert_eq!(e["code"], json!(-32602), "{method} {topics}: {e}");
            let msg = e["message"].as_str().unwrap();
            assert!(msg.contains(&format!("{position}:")), "{method} {topics}: {msg}");
            assert!(msg.contains("null, a 32-byte hash or an array"), "{method} {topics}: {msg}");
            assert!(!msg.contains("u8"), "{method} {topics}: {msg}");
        }
    }
    assert_eq!(n.call("eth_getLogs", json!([{"topics": [null, [t]]}])).unwrap(), json!([]));
}

#[test]
fn logs_limits_name_the_flag_and_the_node_keeps_serving() {
    let Some(n) = Node::start(|c| {
        c.max_logs_range = 10;
        c.max_logs = 3;
    }) else {
        return;
    };
    let e = n.call("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "0xa"}])).unwrap_err();
    assert_eq!(e["code"], json!(-32005), "{e}");
    assert!(e["message"].as_str().unwrap().contains("--rpc.max-logs-range"), "{e}");
    assert!(e["message"].as_str().unwrap().contains("11 blocks"), "{e}");
    let tip = head(&n);
    let all = receipt_logs(&n, 0, tip);
    // Find a 10-block window with more than 3 logs.
    let window = (0..=tip - 9)
        .find(|s| {
            all.iter().filter(|l| (*s..*s + 10).contains(&(hex(&l["blockNumber"]) as u64))).count()
                > 3
        })
        .expect("a busy window");
    let e = n
        .call(
            "eth_getLogs",
            json!([{"fromBlock": format!("{window:#x}"), "toBlock": format!("{:#x}", window + 9)}]),
        )
        .unwrap_err();
    assert_eq!(e["code"], json!(-32005), "{e}");
    assert!(e["message"].as_str().unwrap().contains("--rpc.max-logs"), "{e}");
    assert!(n.call("eth_blockNumber", json!([])).is_ok());
}

/// A log filter lists at most `--rpc.max-filter-addresses` addresses and
/// `--rpc.max-filter-topics` alternatives per topic position: one more is refused with -32602
/// naming the flag, by `eth_getLogs` and `eth_newFilter` alike; a full list holding one real
/// item among made-up ones matches exactly the logs the real item matches alone.
#[test]
fn log_filter_lists_are_limited_and_a_full_list_matches_as_its_real_item() {
    const MAX: usize = 50;
    let Some(n) = Node::start(|c| {
        c.max_filter_addresses = MAX;
        c.max_filter_topics = MAX;
    }) else {
        return;
    };
    let all = receipt_logs(&n, 0, head(&n));
    let log = all.iter().find(|l| l["topics"].as_array().unwrap().len() >= 2).expect("a log");
    let fake = |i: usize, len: usize| format!("0x{:0len$x}", 0xdead_0000 + i, len = len);
    let mut addresses: Vec<Value> = (1..MAX).map(|i| json!(fake(i, 40))).collect();
    addresses.push(log["address"].clone());
    let alone = n.call("eth_getLogs", json!([{"fromBlock": "0x0", "address": log["address"]}]));
    let listed = n.call("eth_getLogs", json!([{"fromBlock": "0x0", "address": addresses}]));
    assert_eq!(listed.unwrap(), alone.unwrap());
    let mut topics: Vec<Value> = (1..MAX).map(|i| json!(fake(i, 64))).collect();
    topics.insert(MAX / 2, log["topics"][1].clone());
    let alone =
        n.call("eth_getLogs", json!([{"fromBlock": "0x0", "topics": [null, log["topics"][1]]}]));
    let listed = n.call("eth_getLogs", json!([{"fromBlock": "0x0", "topics": [null, topics]}]));
    assert_eq!(listed.unwrap(), alone.unwrap());

    addresses.push(json!(fake(MAX, 40)));
    topics.push(json!(fake(MAX, 64)));
    for method in ["eth_getLogs", "eth_newFilter"] {
        let e = n.call(method, json!([{"fromBlock": "0x0", "address": addresses}])).unwrap_err();
        assert_eq!(e["code"], json!(-32602), "{e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("51 addresses") && msg.contains("--rpc.max-filter-addresses"), "{e}");
        let e = n.call(method, json!([{"topics": [null, null, topics]}])).unwrap_err();
        assert_eq!(e["code"], json!(-32602), "{e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("topics[2]: 51 alternatives"), "{e}");
        assert!(msg.contains("--rpc.max-filter-topics"), "{e}");
    }
}

/// A state override set names at most `--rpc.max-override-accounts` accounts and gives at most
/// `--rpc.max-override-slots` slots: within both it applies (the call reads the balance it set),
/// one more is refused with -32602 naming the flag, by every method that takes overrides
/// (`eth_simulateV1` counting all its blocks' sets together).
#[test]
fn state_override_sets_are_limited_by_accounts_and_slots() {
    let Some(n) = Node::start(|c| {
        c.max_override_accounts = 3;
        c.max_override_slots = 4;
    }) else {
        return;
    };
    // SELFBALANCE PUSH0 MSTORE PUSH1 32 PUSH0 RETURN: the account's own balance.
    let target = "0x00000000000000000000000000000000000c0ffe";
    let call = json!({"to": target});
    let slot = |i: u64| format!("{:#066x}", i);
    let mut set = serde_json::Map::new();
    set.insert(
        target.into(),
        json!({"code": "0x475f5260205ff3", "balance": "0x1234",
               "stateDiff": {slot(1): slot(1), slot(2): slot(2)}}),
    );
    set.insert(format!("0x{:040x}", 0xbeef_0001u64), json!({"state": {slot(3): slot(3)}}));
    set.insert(format!("0x{:040x}", 0xbeef_0002u64), json!({"balance": "0x1"}));
    let within = Value::Object(set.clone());
    let balance = n.call("eth_call", json!([call, "latest", within])).unwrap();
    assert_eq!(balance, json!(slot(0x1234)));

    let mut accounts = set.clone();
    accounts.insert(format!("0x{:040x}", 0xbeef_0009u64), json!({"balance": "0x1"}));
    let mut slots = set;
    slots[target]["stateDiff"][slot(4)] = json!(slot(4));
    slots[target]["stateDiff"][slot(5)] = json!(slot(5));
    for (over, flag, what) in [
        (Value::Object(accounts), "--rpc.max-override-accounts", "4 accounts"),
        (Value::Object(slots), "--rpc.max-override-slots", "5 storage slots"),
    ] {
        let sim_blocks: Vec<Value> = over
            .as_object()
            .unwrap()
            .iter()
            .map(|(a, o)| json!({"stateOverrides": {a.clone(): o.clone()}, "calls": []}))
            .collect();
        let asks = [
            ("eth_call", json!([call, "latest", over])),
            ("eth_estimateGas", json!([call, "latest", over])),
            ("eth_createAccessList", json!([call, "latest", over])),
            ("trace_call", json!([call, ["trace"], "latest", over])),
            ("debug_traceCall", json!([call, "latest", {"stateOverrides": over}])),
            ("eth_simulateV1", json!([{"blockStateCalls": sim_blocks}, "latest"])),
        ];
        for (method, params) in asks {
            let e = n.call(method, params).unwrap_err();
            assert_eq!(e["code"], json!(-32602), "{method}: {e}");
            let msg = e["message"].as_str().unwrap();
            assert!(msg.contains(what) && msg.contains(flag), "{method}: {e}");
        }
    }
    assert!(n.call("eth_blockNumber", json!([])).is_ok());
}

/// A scan past its deadline (`--rpc.evm-timeout`, here 1 ns) stops at its next block and
/// answers -32000 naming the deadline and its flag: `eth_getLogs`, `eth_getFilterLogs`,
/// `eth_feeHistory`; a point read, which scans nothing, still answers.
#[test]
fn scans_past_their_deadline_answer_a_query_timeout_naming_the_flag() {
    let Some(n) = Node::start(|c| c.call_timeout = std::time::Duration::from_nanos(1)) else {
        return;
    };
    let id = n.call("eth_newFilter", json!([{"fromBlock": "0x0"}])).unwrap();
    let asks = [
        ("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest"}])),
        ("eth_getFilterLogs", json!([id])),
        ("eth_feeHistory", json!(["0x4", "latest", [50]])),
    ];
    for (method, params) in asks {
        let e = n.call(method, params).unwrap_err();
        assert_eq!(e["code"], json!(-32000), "{method}: {e}");
        assert_eq!(e["message"], json!("query timeout after 1ns (--rpc.evm-timeout)"), "{method}");
    }
    assert!(head(&n) > 0);
}

/// A log query whose answer is over `--rpc.max-response-size` is refused with -32008 naming
/// the limit (counted while the query scans), and one within it is answered.
#[test]
fn a_log_query_over_the_response_limit_is_refused() {
    let Some(full) = node() else { return };
    let all = json!([{"fromBlock": "0x0", "toBlock": "latest"}]);
    let size = full.call("eth_getLogs", all.clone()).unwrap().to_string().len() as u32;
    let Some(n) = Node::start(|c| c.max_response_body = size / 2) else { return };
    let e = n.call("eth_getLogs", all).unwrap_err();
    assert_eq!(e["code"], json!(-32008), "{e}");
    assert_eq!(e["message"], json!(format!("response is over the limit of {} bytes", size / 2)));
    let one = json!([{"fromBlock": "0x0", "toBlock": "0x1"}]);
    assert_eq!(n.call("eth_getLogs", one.clone()), full.call("eth_getLogs", one));
}

#[test]
fn raw_receipts_and_transactions_rebuild_the_header_roots() {
    let Some(n) = node() else { return };
    for b in 0..=head(&n) {
        let tag = format!("{b:#x}");
        let block = n.call("eth_getBlockByNumber", json!([tag, false])).unwrap();
        let receipts: Vec<Bytes> =
            serde_json::from_value(n.call("debug_getRawReceipts", json!([tag])).unwrap()).unwrap();
        let root = ordered_trie_root_with_encoder(&receipts, |r, out| out.extend_from_slice(r));
        assert_eq!(json!(root), block["receiptsRoot"], "receipts root of block {b}");
        let mut txs = Vec::new();
        for h in block["transactions"].as_array().unwrap() {
            let raw: Bytes =
                serde_json::from_value(n.call("debug_getRawTransaction", json!([h])).unwrap())
                    .unwrap();
            assert_eq!(json!(keccak256(&raw)), *h, "hash of the raw transaction");
            let same = n.call("eth_getRawTransactionByHash", json!([h])).unwrap();
            assert_eq!(same, json!(raw));
            txs.push(raw);
        }
        let root = ordered_trie_root_with_encoder(&txs, |t, out| out.extend_from_slice(t));
        assert_eq!(json!(root), block["transactionsRoot"], "transactions root of block {b}");
        // The block's size is its RLP length.
        let raw: Bytes =
            serde_json::from_value(n.call("debug_getRawBlock", json!([tag])).unwrap()).unwrap();
        assert_eq!(hex(&block["size"]), raw.len() as u128, "size of block {b}");
    }
    assert_eq!(n.call("debug_getRawTransaction", json!([B256::ZERO])).unwrap(), Value::Null);
}

/// `eth_feeHistory` over the last 64 blocks against each block's header and receipts: base
/// fees, gas-used ratios, and each reward percentile re-derived from the receipts' tips and
/// gas used.
fn check_fee_history(n: &Node) {
    let tip = head(n);
    // Some blocks' tips are read (and kept) first, with other percentiles; the call checked
    // below then reads some blocks afresh and some kept, and a repeat reads all kept.
    let warm = n.call("eth_feeHistory", json!(["0x2", "latest", [10.0]])).unwrap();
    assert_eq!(warm["reward"].as_array().map(Vec::len), Some(2.min(tip as usize + 1)));
    let h = n
        .call("eth_feeHistory", json!(["0x40", "latest", [0.0, 25.0, 50.0, 90.0, 100.0]]))
        .unwrap();
    let again = n
        .call("eth_feeHistory", json!(["0x40", "latest", [0.0, 25.0, 50.0, 90.0, 100.0]]))
        .unwrap();
    assert_eq!(again, h, "the same call over kept tips");
    let oldest = hex(&h["oldestBlock"]) as u64;
    assert_eq!(oldest, tip.saturating_sub(0x3f));
    let base = h["baseFeePerGas"].as_array().unwrap();
    assert_eq!(base.len() as u64, tip - oldest + 2, "one more than blocks: the next block");
    for b in oldest..=tip {
        let i = (b - oldest) as usize;
        let block = n.call("eth_getBlockByNumber", json!([format!("{b:#x}"), true])).unwrap();
        let bf = block.get("baseFeePerGas").map_or(0, hex);
        assert_eq!(hex(&base[i]), bf, "base fee of {b}");
        let ratio = hex(&block["gasUsed"]) as f64 / hex(&block["gasLimit"]) as f64;
        assert!((h["gasUsedRatio"][i].as_f64().unwrap() - ratio).abs() < 1e-12);
        if b < tip {
            let next = n.call("eth_getBlockByNumber", json!([format!("{:#x}", b + 1), false]));
            let next_fee = next.unwrap().get("baseFeePerGas").map_or(0, hex);
            assert_eq!(hex(&base[i + 1]), next_fee, "next of {b}");
        }
        // Rewards: tips sorted, weighted by gas used, from the receipts.
        let receipts = n.call("eth_getBlockReceipts", json!([format!("{b:#x}")])).unwrap();
        let mut tips: Vec<(u128, u128)> = receipts
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (hex(&r["effectiveGasPrice"]) - bf, hex(&r["gasUsed"])))
            .collect();
        tips.sort();
        let reward = h["reward"][i].as_array().unwrap();
        for (k, p) in [0.0, 25.0, 50.0, 90.0, 100.0].iter().enumerate() {
            let want = if tips.is_empty() {
                0
            } else {
                let threshold = (hex(&block["gasUsed"]) as f64 * p / 100.0) as u128;
                let mut sum = 0;
                tips.iter()
                    .find(|(_, g)| {
                        sum += g;
                        sum >= threshold
                    })
                    .unwrap_or_else(|| tips.last().unwrap())
                    .0
            };
            assert_eq!(hex(&reward[k]), want, "block {b} percentile {p}");
        }
    }
}

/// A node over a generated chain of 4 blocks of 40 mixed transactions (tips differ; token
/// transfers, swaps and creations log), on its own database.
fn generated_node(tmp: &std::path::Path) -> Node {
    let out = tmp.join("gen");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 200, 4);
    config.txs_per_block = Some(40);
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let db = loupe::storage::Database::open(&tmp.join("db")).unwrap();
    let genesis = std::fs::read_to_string(out.join("genesis.json")).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).unwrap();
    loupe::import::import_files(&db, &spec, &[out.join("chain.rlp")]).unwrap();
    Node::serve(Arc::new(db), spec, |_| {})
}

#[test]
fn receipts_logs_and_fee_history_agree_on_blocks_of_many_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let n = generated_node(tmp.path());
    let tip = head(&n);
    let mut logs = 0;
    for b in 1..=tip {
        let tag = format!("{b:#x}");
        let block = n.call("eth_getBlockByNumber", json!([tag, false])).unwrap();
        let hashes = block["transactions"].as_array().unwrap();
        assert!(hashes.len() >= 32, "block {b}");
        let receipts = n.call("eth_getBlockReceipts", json!([tag])).unwrap();
        // Each receipt read alone equals the block's entry (gas used, log indexes, fees).
        for (i, h) in hashes.iter().enumerate() {
            let receipt = n.call("eth_getTransactionReceipt", json!([h])).unwrap();
            assert_eq!(receipt, receipts[i], "block {b} receipt {i}");
        }
        // The block's logs, whole and narrowed to each address, equal the receipts' logs.
        let all = receipt_logs(&n, b, b);
        logs += all.len();
        let got = n.call("eth_getLogs", json!([{"fromBlock": tag, "toBlock": tag}])).unwrap();
        assert_eq!(got.as_array().unwrap(), &all, "block {b}");
        let addresses: BTreeSet<&str> =
            all.iter().map(|l| l["address"].as_str().unwrap()).collect();
        for a in addresses {
            let want: Vec<&Value> = all.iter().filter(|l| l["address"] == json!(a)).collect();
            let filter = json!([{"fromBlock": tag, "toBlock": tag, "address": a}]);
            let got = n.call("eth_getLogs", filter).unwrap();
            assert_eq!(got.as_array().unwrap().iter().collect::<Vec<_>>(), want, "{b} {a}");
        }
    }
    assert!(logs > 20, "the generated blocks log: {logs}");
    check_fee_history(&n);
}

#[test]
fn fee_history_agrees_with_headers_and_receipts() {
    let Some(n) = node() else { return };
    check_fee_history(&n);
    let e = n.call("eth_feeHistory", json!(["0x2", "latest", [50.0, 10.0]])).unwrap_err();
    assert_eq!(e["code"], json!(-32602), "{e}");
}

#[test]
fn gas_price_and_tip_follow_the_documented_rule() {
    let Some(n) = node() else { return };
    let tip = head(&n);
    let mut samples = Vec::new();
    for b in tip.saturating_sub(19)..=tip {
        let block = n.call("eth_getBlockByNumber", json!([format!("{b:#x}"), true])).unwrap();
        let bf = block.get("baseFeePerGas").map_or(0, hex);
        let miner = block["miner"].clone();
        let mut tips: Vec<u128> = block["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["from"] != miner)
            .map(|t| {
                let cap = t.get("maxFeePerGas").map_or_else(|| hex(&t["gasPrice"]), hex);
                let prio = t.get("maxPriorityFeePerGas").map_or(u128::MAX, hex);
                (cap - bf).min(prio)
            })
            .filter(|t| *t >= 2)
            .collect();
        tips.sort();
        samples.extend(tips.into_iter().take(3));
    }
    samples.sort();
    let want = if samples.is_empty() {
        1_000_000_000
    } else {
        samples[(samples.len() - 1) * 60 / 100].min(500_000_000_000)
    };
    assert_eq!(hex(&n.call("eth_maxPriorityFeePerGas", json!([])).unwrap()), want);
    let latest = n.call("eth_getBlockByNumber", json!(["latest", false])).unwrap();
    let next_base = hex(&n.call("eth_baseFee", json!([])).unwrap());
    let fh = n.call("eth_feeHistory", json!(["0x1", "latest"])).unwrap();
    assert_eq!(hex(&fh["baseFeePerGas"][1]), next_base, "two paths to the next base fee");
    assert!(hex(&latest["baseFeePerGas"]) > 0);
    assert_eq!(hex(&n.call("eth_gasPrice", json!([])).unwrap()), want + next_base);
}

#[test]
fn estimates_and_access_lists_match_geth_and_the_estimate_is_tight() {
    let Some(n) = node() else { return };
    let fx = support::fixtures().unwrap();
    // The recorded geth answers, compared exactly (also where the fixture checks only shape).
    for method in ["eth_estimateGas", "eth_createAccessList"] {
        for entry in std::fs::read_dir(fx.join(method)).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let mut req = None;
            for line in text.lines() {
                if let Some(r) = line.strip_prefix(">> ") {
                    req = Some(serde_json::from_str::<Value>(r).unwrap());
                } else if let Some(r) = line.strip_prefix("<< ") {
                    let want: Value = serde_json::from_str(r).unwrap();
                    let got = n.request(req.as_ref().unwrap());
                    match want.get("result") {
                        Some(w) => assert_eq!(got["result"], *w, "{method}: {req:?}"),
                        None => assert_eq!(got["error"]["code"], want["error"]["code"]),
                    }
                }
            }
        }
    }
    // Tight: the call succeeds with the estimate, and fails 1.5% lower.
    let call = json!({"from": "0x0102030000000000000000000000000000000000", "input": "0xff01",
        "to": "0x17e7eedce4ac02ef114a7ed9fe6e2f33feba1667"});
    let est = hex(&n.call("eth_estimateGas", json!([call])).unwrap()) as u64;
    let with = |gas: u64| {
        let mut c = call.clone();
        c["gas"] = json!(format!("{gas:#x}"));
        n.call("eth_call", json!([c, "latest"]))
    };
    assert!(with(est).is_ok());
    let lower = est - est * 15 / 1000 - 1;
    assert!(
        with(lower).is_err()
            || n.call("eth_estimateGas", json!([{"gas": format!("{lower:#x}")}])).is_ok()
    );
    // Over the allowance: a clear error naming the gas.
    let mut c = call.clone();
    c["gas"] = json!("0x5221");
    let e = n.call("eth_estimateGas", json!([c])).unwrap_err();
    assert!(
        e["message"].as_str().unwrap().contains("gas required exceeds allowance (21025)"),
        "{e}"
    );
}

#[test]
fn storage_values_equal_storage_at_and_small_methods_answer() {
    let Some(n) = node() else { return };
    let contract = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";
    let slots: Vec<String> = (0..5).map(|i| format!("{:#066x}", i)).collect();
    for b in ["0x2", "0x10", "latest"] {
        let got = n.call("eth_getStorageValues", json!([{contract: slots}, b])).unwrap();
        for (i, s) in slots.iter().enumerate() {
            let one = n.call("eth_getStorageAt", json!([contract, s, b])).unwrap();
            assert_eq!(got[contract][i], one, "slot {s} at {b}");
        }
        // Slots written short, as clients write them for eth_getStorageAt (found by the soak).
        let short: Vec<String> = (0..5).map(|i| format!("{i:#x}")).collect();
        let got_short = n.call("eth_getStorageValues", json!([{contract: short}, b])).unwrap();
        assert_eq!(got_short, got, "short slots at {b}");
    }
    let e = n.call("eth_getStorageValues", json!([{contract: ["0xzz"]}, "latest"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("\"0xzz\""), "{e}");
    let data = Bytes::from_static(b"loupe");
    assert_eq!(n.call("web3_sha3", json!([data])).unwrap(), json!(keccak256(&data)));
    assert_eq!(n.call("eth_accounts", json!([])).unwrap(), json!([]));
    assert_eq!(n.call("net_listening", json!([])).unwrap(), json!(false));
    assert_eq!(n.call("net_peerCount", json!([])).unwrap(), json!("0x0"));
    // Post-merge blocks have no ommers.
    assert_eq!(n.call("eth_getUncleCountByBlockNumber", json!(["0x5"])).unwrap(), json!("0x0"));
    assert_eq!(
        n.call("eth_getUncleByBlockNumberAndIndex", json!(["0x5", "0x0"])).unwrap(),
        Value::Null
    );
    assert_eq!(n.call("eth_getUncleCountByBlockNumber", json!(["0x999"])).unwrap(), Value::Null);
}

#[test]
fn filters_report_blocks_and_logs_as_they_arrive() {
    let Some(fx) = common::Fixture::load() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(loupe::storage::Database::open(tmp.path()).unwrap());
    let (spec, _) = loupe::import::init_genesis(&db, &fx.genesis_text).unwrap();
    for b in &fx.blocks[..20] {
        loupe::import::import_block(&db, &spec, &b.block, false).unwrap();
    }
    let node = Served::start(db.clone(), spec.clone(), |c| c.max_filters = 3);
    let call = |m: &str, p: Value| node.try_call(m, p);
    let blocks = call("eth_newBlockFilter", json!([])).unwrap();
    let logs = call("eth_newFilter", json!([{}])).unwrap();
    assert_eq!(call("eth_getFilterChanges", json!([blocks])).unwrap(), json!([]));
    for b in &fx.blocks[20..35] {
        loupe::import::import_block(&db, &spec, &b.block, false).unwrap();
    }
    let hashes = call("eth_getFilterChanges", json!([blocks])).unwrap();
    let want: Vec<Value> = fx.blocks[20..35].iter().map(|b| json!(b.hash)).collect();
    assert_eq!(hashes.as_array().unwrap(), &want);
    assert_eq!(call("eth_getFilterChanges", json!([blocks])).unwrap(), json!([]), "nothing new");
    let got = call("eth_getFilterChanges", json!([logs])).unwrap();
    let direct = call("eth_getLogs", json!([{"fromBlock": "0x15", "toBlock": "0x23"}])).unwrap();
    assert_eq!(got, direct, "the filter's changes are the new blocks' logs");
    assert!(!direct.as_array().unwrap().is_empty());
    // The filter's own criteria over the whole chain.
    let all = call("eth_getFilterLogs", json!([logs])).unwrap();
    assert_eq!(all, call("eth_getLogs", json!([{}])).unwrap());
    // Bounded: a third is fine, a fourth is refused with the flag named.
    call("eth_newBlockFilter", json!([])).unwrap();
    let e = call("eth_newBlockFilter", json!([])).unwrap_err();
    assert_eq!(e["code"], json!(-32005));
    assert!(e["message"].as_str().unwrap().contains("--rpc.max-filters"), "{e}");
    assert_eq!(call("eth_uninstallFilter", json!([blocks])).unwrap(), json!(true));
    assert_eq!(call("eth_uninstallFilter", json!([blocks])).unwrap(), json!(false));
    let e = call("eth_getFilterChanges", json!([blocks])).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("filter not found"), "{e}");
}

#[test]
fn move_precompile_to_address_moves_ecrecover_for_calls_and_traces() {
    use alloy_signer::SignerSync;
    let Some(n) = node() else { return };
    let signer = loupe::dev::dev_signers().remove(0);
    let digest = keccak256(b"loupe moves precompiles");
    let sig = signer.sign_hash_sync(&digest).unwrap();
    let mut input = digest.to_vec();
    input.extend_from_slice(&[0u8; 31]);
    input.push(27 + u8::from(sig.v()));
    input.extend_from_slice(&sig.r().to_be_bytes::<32>());
    input.extend_from_slice(&sig.s().to_be_bytes::<32>());
    let input = Bytes::from(input);
    let recovered = json!(format!("0x{:0>64}", alloy_primitives::hex::encode(signer.address())));
    let ecrec = "0x0000000000000000000000000000000000000001";
    let moved = "0x00000000000000000000000000000000000000e1";
    let call = |to: &str| json!({"to": to, "input": input});
    let overrides = json!({ ecrec: { "movePrecompileToAddress": moved } });
    // Without the override: ecrecover at 0x01, nothing at the new address.
    assert_eq!(n.call("eth_call", json!([call(ecrec), "latest"])).unwrap(), recovered);
    assert_eq!(n.call("eth_call", json!([call(moved), "latest"])).unwrap(), json!("0x"));
    // With it: the precompile answers at the new address, and 0x01 is an empty account.
    let at_new = n.call("eth_call", json!([call(moved), "latest", overrides])).unwrap();
    assert_eq!(at_new, recovered);
    let at_old = n.call("eth_call", json!([call(ecrec), "latest", overrides])).unwrap();
    assert_eq!(at_old, json!("0x"));
    let traced =
        n.call("trace_call", json!([call(moved), ["trace"], "latest", overrides])).unwrap();
    assert_eq!(traced["output"], recovered);
    // The old address can take code in the same override: an ordinary contract there.
    let with_code =
        json!({ ecrec: { "movePrecompileToAddress": moved, "code": "0x60aa60005260206000f3" } });
    let answered = n.call("eth_call", json!([call(ecrec), "latest", with_code])).unwrap();
    assert_eq!(answered, json!(format!("0x{:0>64}", "aa")));
    // A move onto itself (an account the same overrides name), or of an account that is no
    // precompile, is refused, in geth's words.
    let e = n
        .call(
            "eth_call",
            json!([call(moved), "latest", { ecrec: { "movePrecompileToAddress": ecrec } }]),
        )
        .unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("is already overridden"), "{e}");
    let e = n
        .call(
            "eth_call",
            json!([call(moved), "latest", { moved: { "movePrecompileToAddress": ecrec } }]),
        )
        .unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("not a precompile"), "{e}");
}

#[test]
fn dev_chain_block_sizes_are_their_rlp_lengths_and_genesis_lists_its_withdrawals() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, spec, tip) = dev_chain(&tmp);
    let node = Served::start(db, spec, |_| {});
    let call = |m: &str, p: Value| node.call(m, p);
    for b in 0..=tip {
        let tag = format!("{b:#x}");
        let block = call("eth_getBlockByNumber", json!([tag, false]));
        let raw: Bytes = serde_json::from_value(call("debug_getRawBlock", json!([tag]))).unwrap();
        assert_eq!(hex(&block["size"]), raw.len() as u128, "size of dev block {b}");
        // Shanghai from genesis: every block, genesis included, has a withdrawals list.
        assert!(block["withdrawals"].is_array(), "block {b}: {block}");
    }
}

#[test]
fn a_block_filter_after_a_reorg_reports_the_new_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, spec, tip) = dev_chain(&tmp);
    let node = Served::start(db.clone(), spec.clone(), |_| {});
    let call = |m: &str, p: Value| node.call(m, p);
    let filter = call("eth_newBlockFilter", json!([]));
    let build = || loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
    let first = [build(), build()];
    let hashes: Vec<Value> = first.iter().map(|b| json!(b.header.hash_slow())).collect();
    assert_eq!(call("eth_getFilterChanges", json!([filter])).as_array().unwrap(), &hashes);
    // Unwind the two new blocks and one of the history, then build a longer branch (empty
    // blocks, so its blocks differ from the removed ones by their parents and state).
    let mut w = db.begin_write().unwrap();
    for _ in 0..3 {
        w.unwind_head().unwrap();
    }
    w.commit(true).unwrap();
    let branch: Vec<Value> = (0..4).map(|_| json!(build().header.hash_slow())).collect();
    assert_eq!(call("eth_blockNumber", json!([])), json!(format!("{:#x}", tip + 3)));
    // The filter had reported up to tip+2; the newest it reported that is still canonical is
    // tip-1, so it reports the whole new branch from block tip on.
    assert_eq!(call("eth_getFilterChanges", json!([filter])).as_array().unwrap(), &branch);
    assert_eq!(call("eth_getFilterChanges", json!([filter])), json!([]));
}

/// `eth_simulateV1` replaying each dev-chain block's transactions as calls on its parent, with
/// the block's own environment as overrides, builds the same receipts: the receipts root, gas
/// used and logs bloom of the stored header (blocks with blob transactions are left out: blob
/// calls are not simulated yet).
#[test]
fn simulating_a_stored_block_rebuilds_its_receipts_and_state_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, spec, tip) = dev_chain(&tmp);
    let node = Served::start(db, spec, |_| {});
    let call = |m: &str, p: Value| node.call(m, p);
    let (mut checked, mut roots) = (0, 0);
    for b in 1..=tip {
        let block = call("eth_getBlockByNumber", json!([format!("{b:#x}"), true]));
        let txs = block["transactions"].as_array().unwrap();
        if txs.is_empty() || txs.iter().any(|t| t["type"] == json!("0x3")) {
            continue;
        }
        let keys = [
            "from",
            "to",
            "value",
            "input",
            "gas",
            "nonce",
            "gasPrice",
            "maxFeePerGas",
            "maxPriorityFeePerGas",
            "accessList",
            "authorizationList",
            "type",
            "chainId",
        ];
        let calls: Vec<Value> = txs
            .iter()
            .map(|t| {
                let mut c = serde_json::Map::new();
                for k in keys {
                    if let Some(v) = t.get(k).filter(|v| !v.is_null()) {
                        c.insert(k.to_string(), v.clone());
                    }
                }
                if t["type"] == json!("0x2") || t["type"] == json!("0x4") {
                    c.remove("gasPrice");
                }
                Value::Object(c)
            })
            .collect();
        let overrides = json!({
            "number": block["number"], "time": block["timestamp"], "gasLimit": block["gasLimit"],
            "feeRecipient": block["miner"], "prevRandao": block["mixHash"],
            "baseFeePerGas": block["baseFeePerGas"], "beaconRoot": block["parentBeaconBlockRoot"],
        });
        let payload = json!({"blockStateCalls": [{"blockOverrides": overrides, "calls": calls}],
            "validation": true});
        let sim = call("eth_simulateV1", json!([payload, format!("{:#x}", b - 1)]));
        let s = &sim[0];
        for k in ["receiptsRoot", "gasUsed", "logsBloom", "number", "timestamp"] {
            assert_eq!(s[k], block[k], "block {b}: {k}");
        }
        // The overlay's state root (the simulation's bundle laid over the trie at b - 1) is
        // the stored block's, unless withdrawals (which a simulation does not make) changed it.
        if block["withdrawals"].as_array().is_none_or(|w| w.is_empty()) {
            assert_eq!(s["stateRoot"], block["stateRoot"], "block {b}: stateRoot");
            roots += 1;
        }
        let receipts = call("eth_getBlockReceipts", json!([format!("{b:#x}")]));
        for (i, (c, r)) in
            s["calls"].as_array().unwrap().iter().zip(receipts.as_array().unwrap()).enumerate()
        {
            assert_eq!(c["status"], r["status"], "block {b} call {i}");
            assert_eq!(c["gasUsed"], r["gasUsed"], "block {b} call {i}");
            let data = |l: &Value| (l["address"].clone(), l["topics"].clone(), l["data"].clone());
            let ours: Vec<_> = c["logs"].as_array().unwrap().iter().map(data).collect();
            let theirs: Vec<_> = r["logs"].as_array().unwrap().iter().map(data).collect();
            assert_eq!(ours, theirs, "block {b} call {i} logs");
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} blocks simulated");
    assert!(roots >= 8, "only {roots} state roots compared");
}

/// A transaction object served before a reorg (and so kept in the transaction cache) is not
/// served for the block that replaces its block: the lookup by number and index answers the
/// new branch's block, which has no transactions.
#[test]
fn a_transaction_lookup_after_a_reorg_answers_the_new_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, spec, tip) = dev_chain(&tmp);
    let node = Served::start(db.clone(), spec.clone(), |_| {});
    let call = |m: &str, p: Value| node.call(m, p);
    let with_tx = (1..=tip)
        .rev()
        .find(|b| {
            call("eth_getBlockTransactionCountByNumber", json!([format!("{b:#x}")])) != json!("0x0")
        })
        .expect("the sample history has transactions");
    let at = json!([format!("{with_tx:#x}"), "0x0"]);
    let before = call("eth_getTransactionByBlockNumberAndIndex", at.clone());
    assert_eq!(before["blockNumber"], json!(format!("{with_tx:#x}")), "{before}");
    // Twice, so the second answer comes from the cache; it must equal the first.
    assert_eq!(call("eth_getTransactionByBlockNumberAndIndex", at.clone()), before);
    let mut w = db.begin_write().unwrap();
    for _ in with_tx..=tip {
        w.unwind_head().unwrap();
    }
    w.commit(true).unwrap();
    let build = || loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
    for _ in with_tx..=tip + 1 {
        build();
    }
    assert_eq!(call("eth_getTransactionByBlockNumberAndIndex", at), Value::Null);
    assert_eq!(call("eth_getTransactionByHash", json!([before["hash"]])), Value::Null);
}
