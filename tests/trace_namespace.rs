//! The Parity trace namespace (issue 12) over every transaction and block of the fixture chain
//! (proof-of-work up to block 35, so with rewards and ommers) and the dev chain, each method
//! checked against another path to the same truth: stored state before and after each block
//! (state diffs applied by the test), receipts (status, gas), the struct logger and
//! `callTracer` (refunds, output), revm's intrinsic-gas rule, and a filter the test applies
//! itself to `trace_block`'s output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use alloy_evm::FromRecoveredTx;
use alloy_primitives::U256;
use loupe::chain::ChainSpec;
use loupe::storage::Database;
use revm::context::TxEnv;
use serde_json::{Value, json};
use support::{Node, dev_chain};

/// A served chain with its database (for headers and transactions the checks need).
struct Served {
    node: Node,
    db: Arc<Database>,
    spec: ChainSpec,
    name: &'static str,
    _dir: Option<tempfile::TempDir>,
}

impl Served {
    fn ok(&self, method: &str, params: Value) -> Value {
        self.node
            .call(method, params.clone())
            .unwrap_or_else(|e| panic!("{}: {method} {params}: {e}", self.name))
    }

    fn head(&self) -> u64 {
        hex(&self.ok("eth_blockNumber", json!([]))) as u64
    }

    /// Every transaction: (block, index, hash).
    fn transactions(&self) -> Vec<(u64, usize, String)> {
        let mut out = Vec::new();
        for b in 0..=self.head() {
            let block = self.ok("eth_getBlockByNumber", json!([tag(b), false]));
            for (i, h) in block["transactions"].as_array().unwrap().iter().enumerate() {
                out.push((b, i, h.as_str().unwrap().to_string()));
            }
        }
        out
    }
}

/// The fixture chain (when fixtures are present) and the dev chain.
fn chains(tweak: impl Fn(&mut loupe::rpc::RpcConfig) + Copy) -> Vec<Served> {
    let mut out = Vec::new();
    if let Some(node) = Node::start(tweak) {
        let chain = support::chain().unwrap();
        out.push(Served {
            node,
            db: chain.db.clone(),
            spec: chain.spec.clone(),
            name: "fixture",
            _dir: None,
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let node = Node::serve(db.clone(), spec.clone(), tweak);
    out.push(Served { node, db, spec, name: "dev", _dir: Some(dir) });
    out
}

fn hex(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().unwrap_or_else(|| panic!("{v}")).trim_start_matches("0x"), 16)
        .unwrap()
}

fn big(v: &Value) -> U256 {
    v.as_str().map_or(U256::ZERO, |s| s.parse().unwrap())
}

fn tag(b: u64) -> String {
    format!("{b:#x}")
}

const LOCALIZATION: [&str; 4] =
    ["blockHash", "blockNumber", "transactionHash", "transactionPosition"];

#[test]
fn trace_transaction_is_the_replay_localized_and_trace_get_picks_its_entries() {
    for c in chains(|_| {}) {
        let txs = c.transactions();
        assert!(txs.len() >= 8, "{}: {} transactions", c.name, txs.len());
        for (b, i, h) in &txs {
            let block = c.ok("eth_getBlockByNumber", json!([tag(*b), false]));
            let traces = c.ok("trace_transaction", json!([h]));
            let traces = traces.as_array().unwrap();
            let replay = c.ok("trace_replayTransaction", json!([h, ["trace"]]));
            let replayed = replay["trace"].as_array().unwrap();
            assert_eq!(traces.len(), replayed.len(), "{} tx {h}", c.name);
            assert!(!traces.is_empty(), "{} tx {h}: no traces", c.name);
            for (k, (t, r)) in traces.iter().zip(replayed).enumerate() {
                assert_eq!(t["blockHash"], block["hash"]);
                assert_eq!(t["blockNumber"], json!(b));
                assert_eq!(t["transactionHash"], json!(h));
                assert_eq!(t["transactionPosition"], json!(i));
                let mut bare = t.clone();
                for key in LOCALIZATION {
                    bare.as_object_mut().unwrap().remove(key);
                }
                assert_eq!(&bare, r, "{} tx {h} trace {k}", c.name);
                assert_eq!(&c.ok("trace_get", json!([h, [tag(k as u64)]])), t);
            }
            let past = tag(traces.len() as u64);
            assert_eq!(c.ok("trace_get", json!([h, [past]])), Value::Null);
        }
        let unknown = format!("0x{}", "ab".repeat(32));
        assert_eq!(c.ok("trace_transaction", json!([unknown])), Value::Null);
    }
}

#[test]
fn trace_block_is_its_transactions_traces_then_the_rewards() {
    for c in chains(|_| {}) {
        let mut rewarded = 0;
        for b in 0..=c.head() {
            let block = c.ok("eth_getBlockByNumber", json!([tag(b), false]));
            let got = c.ok("trace_block", json!([tag(b)]));
            let got = got.as_array().unwrap();
            let mut want: Vec<Value> = Vec::new();
            for h in block["transactions"].as_array().unwrap() {
                want.extend(c.ok("trace_transaction", json!([h])).as_array().unwrap().clone());
            }
            assert_eq!(&got[..want.len().min(got.len())], &want[..], "{} block {b}", c.name);
            let rewards = &got[want.len()..];
            let pre_merge = hex(&block["difficulty"]) != 0;
            if !pre_merge || b == 0 {
                assert!(rewards.is_empty(), "{} block {b}: rewards after the merge", c.name);
                continue;
            }
            rewarded += 1;
            let uncles = block["uncles"].as_array().unwrap().len();
            assert_eq!(rewards.len(), 1 + uncles, "{} block {b}", c.name);
            assert_eq!(rewards[0]["action"]["author"], block["miner"]);
            assert_eq!(rewards[0]["action"]["rewardType"], json!("block"));
            for (k, r) in rewards.iter().enumerate() {
                assert_eq!(r["type"], json!("reward"));
                assert_eq!(r["blockHash"], block["hash"]);
                assert_eq!(r["transactionHash"], Value::Null);
                if k > 0 {
                    assert_eq!(r["action"]["rewardType"], json!("uncle"));
                    let uncle = c.ok(
                        "eth_getUncleByBlockNumberAndIndex",
                        json!([tag(b), tag(k as u64 - 1)]),
                    );
                    assert_eq!(r["action"]["author"], uncle["miner"]);
                }
            }
        }
        if c.name == "fixture" {
            assert!(rewarded >= 30, "fixture chain: {rewarded} rewarded blocks");
        }
    }
}

/// An account's balance, nonce and code, and the slots seen, as the test applies diffs.
type Tracked = BTreeMap<String, (BTreeMap<&'static str, Value>, BTreeMap<String, Value>)>;

/// Contracts the block's system calls write to.
const SYSTEM_CONTRACTS: [&str; 4] = [
    "0x000f3df6d732807ef1319fb7b8bb8522d0beac02",
    "0x0000f90827f1c53a10cb7a02335b175320002935",
    "0x00000961ef480eb55e80d19ad83579a64c007002",
    "0x0000bbddc7ce488642fb579f8b00f3a590007251",
];

/// Applies one Parity delta (`=`, `+`, `-`, `*`) to `current`, checking its `from`.
fn apply(delta: &Value, current: &mut Value, what: &str) {
    if delta == "=" {
        return;
    }
    let (kind, body) = delta.as_object().unwrap().iter().next().unwrap();
    match kind.as_str() {
        "+" => *current = body.clone(),
        "-" => {
            assert_eq!(norm(current), norm(body), "{what}: removed value");
            *current = Value::Null;
        }
        "*" => {
            assert_eq!(norm(current), norm(&body["from"]), "{what}: from");
            *current = body["to"].clone();
        }
        other => panic!("{what}: delta kind {other}"),
    }
}

/// A diff value as a comparable string (numbers as U256, absent as zero, code as is).
fn norm(v: &Value) -> String {
    match v.as_str() {
        None => "0".into(),
        Some(s) if s.len() > 66 || s == "0x" => s.to_string(),
        Some(s) => s.parse::<U256>().map_or_else(|_| s.to_string(), |n| n.to_string()),
    }
}

#[test]
fn replayed_state_diffs_take_each_block_from_its_parent_state_to_its_own() {
    for c in chains(|_| {}) {
        let mut checked = 0;
        for b in 1..=c.head() {
            let block = c.ok("eth_getBlockByNumber", json!([tag(b), false]));
            let parent = tag(b - 1);
            let load = |a: &str| -> BTreeMap<&'static str, Value> {
                BTreeMap::from([
                    ("balance", c.ok("eth_getBalance", json!([a, parent]))),
                    ("nonce", c.ok("eth_getTransactionCount", json!([a, parent]))),
                    ("code", c.ok("eth_getCode", json!([a, parent]))),
                ])
            };
            let mut state = Tracked::new();
            let replays = c.ok("trace_replayBlockTransactions", json!([tag(b), ["stateDiff"]]));
            for (i, r) in replays.as_array().unwrap().iter().enumerate() {
                assert_eq!(r["transactionHash"], block["transactions"][i]);
                for (address, diff) in r["stateDiff"].as_object().unwrap() {
                    let entry = state
                        .entry(address.clone())
                        .or_insert_with(|| (load(address), BTreeMap::new()));
                    for field in ["balance", "nonce", "code"] {
                        let what = format!("{} block {b} tx {i} {address} {field}", c.name);
                        apply(&diff[field], entry.0.get_mut(field).unwrap(), &what);
                    }
                    for (slot, delta) in diff["storage"].as_object().unwrap() {
                        let current = entry.1.entry(slot.clone()).or_insert_with(|| {
                            c.ok("eth_getStorageAt", json!([address, slot, parent]))
                        });
                        let what = format!("{} block {b} tx {i} {address} slot {slot}", c.name);
                        apply(delta, current, &what);
                    }
                }
            }
            // What no diff shows: the block's rewards and withdrawals.
            let mut credits: BTreeMap<String, U256> = BTreeMap::new();
            for t in c.ok("trace_block", json!([tag(b)])).as_array().unwrap() {
                if t["type"] == "reward" {
                    let a = t["action"]["author"].as_str().unwrap().to_string();
                    *credits.entry(a).or_default() += big(&t["action"]["value"]);
                }
            }
            for w in block["withdrawals"].as_array().into_iter().flatten() {
                let a = w["address"].as_str().unwrap().to_string();
                *credits.entry(a).or_default() += big(&w["amount"]) * U256::from(1_000_000_000u64);
            }
            for (a, credit) in credits {
                let entry = state.entry(a.clone()).or_insert_with(|| (load(&a), BTreeMap::new()));
                let balance = big(&entry.0["balance"]) + credit;
                entry.0.insert("balance", json!(format!("{balance:#x}")));
            }
            let at = tag(b);
            for (address, (fields, slots)) in &state {
                let now = |m: &str| c.ok(m, json!([address, at]));
                let what = format!("{} block {b} {address}", c.name);
                assert_eq!(
                    norm(&fields["balance"]),
                    norm(&now("eth_getBalance")),
                    "{what} balance"
                );
                assert_eq!(
                    norm(&fields["nonce"]),
                    norm(&now("eth_getTransactionCount")),
                    "{what} nonce"
                );
                let code = fields["code"].as_str().unwrap_or("0x");
                assert_eq!(code, now("eth_getCode").as_str().unwrap(), "{what} code");
                // Their storage also changes in the block's system calls, which no
                // transaction's diff shows (EIP-4788, EIP-2935, EIP-7002, EIP-7251).
                if SYSTEM_CONTRACTS.contains(&address.as_str()) {
                    continue;
                }
                for (slot, value) in slots {
                    let stored = c.ok("eth_getStorageAt", json!([address, slot, at]));
                    assert_eq!(norm(value), norm(&stored), "{what} slot {slot}");
                }
            }
            if !state.is_empty() {
                checked += 1;
            }
        }
        assert!(checked >= 10, "{}: {checked} blocks checked", c.name);
    }
}

#[test]
fn replayed_transactions_match_their_receipts_in_status_output_and_gas() {
    for c in chains(|_| {}) {
        let r = c.db.begin_read().unwrap();
        let (mut failed, mut gas_checked) = (0, 0);
        for (b, i, h) in c.transactions() {
            let receipt = c.ok("eth_getTransactionReceipt", json!([h]));
            let replay = c.ok("trace_replayTransaction", json!([h, ["trace"]]));
            let root = &replay["trace"][0];
            let call = c.ok("debug_traceTransaction", json!([h, {"tracer": "callTracer"}]));
            // Before Byzantium a receipt has no status: the call tracer says.
            let ok = match receipt.get("status") {
                Some(s) => s == "0x1",
                None => call.get("error").is_none(),
            };
            assert_eq!(root.get("error").is_none(), ok, "{} tx {h}: {root}", c.name);
            failed += usize::from(!ok);
            // Output: the same as the call tracer's.
            let output = call.get("output").cloned().unwrap_or_else(|| json!("0x"));
            assert_eq!(replay["output"], output, "{} tx {h}: output", c.name);
            // Gas: the root frame's gas plus intrinsic gas, less refunds, is the receipt's.
            let Some(exec) = root["result"]["gasUsed"].as_str() else { continue };
            let exec = hex(&json!(exec)) as u64;
            let header = r.header(b).unwrap().unwrap();
            let stored = r.transaction(b, i as u32).unwrap().unwrap();
            let spec = loupe::evm::block_env(&c.spec, &header).cfg_env.spec;
            let tx_env = TxEnv::from_recovered_tx(&stored.tx, stored.sender);
            let intrinsic = revm::context_interface::cfg::gas::calculate_initial_tx_gas_for_tx(
                &tx_env, spec, None,
            );
            let spent = exec + intrinsic.initial_regular_gas + intrinsic.initial_state_gas;
            let used = hex(&receipt["gasUsed"]) as u64;
            let logs = c.ok("debug_traceTransaction", json!([h, {"disableStorage": true}]));
            let max_refund = logs["structLogs"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s.get("refund").map(|v| v.as_u64().unwrap()))
                .max()
                .unwrap_or(0)
                // EIP-7702: an authority that already exists refunds 12,500 of its 25,000.
                + 12_500 * alloy_consensus::Transaction::authorization_list(&stored.tx).map_or(0, |l| l.len() as u64);
            let quotient =
                if spec.is_enabled_in(revm::primitives::hardfork::SpecId::LONDON) { 5 } else { 2 };
            let what = format!("{} tx {h}: exec {exec} + intrinsic, receipt {used}", c.name);
            if used == intrinsic.floor_gas && used > spent {
                continue;
            }
            if max_refund == 0 {
                assert_eq!(used, spent, "{what}");
            } else {
                assert!(
                    used <= spent && used >= spent - max_refund.min(spent / quotient),
                    "{what}"
                );
            }
            gas_checked += 1;
        }
        assert!(gas_checked >= 8, "{}: {gas_checked} gas checks", c.name);
        if c.name == "fixture" {
            assert!(failed >= 1, "the fixture chain has failed transactions");
        }
    }
}

#[test]
fn call_many_sees_earlier_calls_and_changes_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let node = Node::serve(db, spec, |_| {});
    let ok = |m: &str, p: Value| node.call(m, p.clone()).unwrap_or_else(|e| panic!("{m} {p}: {e}"));
    // The sample Counter: adds one to slot 0 and returns the new value.
    let counter = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
    let from = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
    let before = big(&ok("eth_getStorageAt", json!([counter, "0x0", "latest"])));
    let call = json!({"from": from, "to": counter});
    for _ in 0..1000 {
        let out = ok(
            "trace_callMany",
            json!([[[call, ["trace", "stateDiff"]], [call, ["trace"]]], "latest"]),
        );
        let out = out.as_array().unwrap();
        assert_eq!(big(&out[0]["output"]), before + U256::from(1));
        // The read of slot 0 by the second call sees the first call's write.
        assert_eq!(big(&out[1]["output"]), before + U256::from(2));
        let slot = &out[0]["stateDiff"][counter]["storage"];
        assert_eq!(slot.as_object().unwrap().len(), 1, "{slot}");
        assert_eq!(out[1]["stateDiff"], Value::Null);
    }
    assert_eq!(big(&ok("eth_getStorageAt", json!([counter, "0x0", "latest"]))), before);
    let once = ok("trace_call", json!([call, ["trace"], "latest"]));
    assert_eq!(big(&once["output"]), before + U256::from(1));

    // A signed transaction traced raw equals the same fields through trace_callMany.
    use alloy_consensus::{SignableTransaction, TxEip1559};
    use alloy_eips::eip2718::Encodable2718;
    use alloy_signer::SignerSync;
    let signer = loupe::dev::dev_signers().remove(1);
    let tx = TxEip1559 {
        chain_id: loupe::dev::DEV_CHAIN_ID,
        nonce: hex(&ok("eth_getTransactionCount", json!([from, "latest"]))) as u64,
        gas_limit: 100_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: counter.parse::<alloy_primitives::Address>().unwrap().into(),
        value: U256::from(7),
        access_list: Default::default(),
        input: Default::default(),
    };
    let sig = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    let raw = alloy_consensus::TxEnvelope::from(tx.clone().into_signed(sig)).encoded_2718();
    let raw = format!("0x{}", alloy_primitives::hex::encode(raw));
    let types = json!(["trace", "stateDiff"]);
    let traced = ok("trace_rawTransaction", json!([raw, types]));
    let fields = json!({
        "from": signer.address(), "to": counter, "gas": tag(tx.gas_limit), "value": "0x7",
        "maxFeePerGas": tag(tx.max_fee_per_gas as u64),
        "maxPriorityFeePerGas": tag(tx.max_priority_fee_per_gas as u64),
        "nonce": tag(tx.nonce), "chainId": tag(tx.chain_id), "type": "0x2", "accessList": [],
        "input": "0x",
    });
    let many = ok("trace_callMany", json!([[[fields, types]], "latest"]));
    assert_eq!(traced, many[0]);
    assert_eq!(big(&traced["output"]), before + U256::from(1));
    let bad = node.call("trace_rawTransaction", json!(["0x02ff", ["trace"]])).unwrap_err();
    assert!(bad["message"].as_str().unwrap().contains("rawTransaction"), "{bad}");
}

/// The test's own filter over `trace_block` output: `from` and `to` as OpenEthereum defines
/// them per action type.
fn ends(t: &Value) -> (Option<String>, Option<String>) {
    let s = |v: &Value| v.as_str().map(str::to_string);
    let a = &t["action"];
    match t["type"].as_str().unwrap() {
        "call" => (s(&a["from"]), s(&a["to"])),
        "create" => (s(&a["from"]), s(&t["result"]["address"])),
        "suicide" => (s(&a["address"]), s(&a["refundAddress"])),
        "reward" => (None, s(&a["author"])),
        other => panic!("trace type {other}"),
    }
}

#[test]
fn trace_filter_equals_a_filter_over_trace_block() {
    for c in chains(|_| {}) {
        let head = c.head();
        let all: Vec<Value> = (0..=head)
            .flat_map(|b| c.ok("trace_block", json!([tag(b)])).as_array().unwrap().clone())
            .collect();
        assert_eq!(
            c.ok("trace_filter", json!([{"fromBlock": "0x0", "toBlock": "latest"}])),
            json!(all)
        );
        let mut froms: BTreeMap<String, usize> = BTreeMap::new();
        let mut tos: BTreeMap<String, usize> = BTreeMap::new();
        for t in &all {
            let (f, to) = ends(t);
            if let Some(f) = f {
                *froms.entry(f).or_default() += 1;
            }
            if let Some(to) = to {
                *tos.entry(to).or_default() += 1;
            }
        }
        let busiest =
            |m: &BTreeMap<String, usize>| m.iter().max_by_key(|(_, n)| **n).unwrap().0.clone();
        let (from, to) = (busiest(&froms), busiest(&tos));
        let mut pairs: BTreeMap<(String, String), usize> = BTreeMap::new();
        for t in &all {
            if let (Some(f), Some(to)) = ends(t) {
                *pairs.entry((f, to)).or_default() += 1;
            }
        }
        let (pair_from, pair_to) = pairs.iter().max_by_key(|(_, n)| **n).unwrap().0.clone();
        // OpenEthereum's rule (and the default mode): both sets must match, an empty set
        // matches anything; `union`: either.
        let cases: [(&str, Vec<&String>, Vec<&String>); 4] = [
            ("intersection", vec![&from], vec![]),
            ("intersection", vec![], vec![&to]),
            ("intersection", vec![&pair_from], vec![&pair_to]),
            ("union", vec![&from], vec![&to]),
        ];
        for (mode, fa, ta) in cases {
            let want: Vec<&Value> = all
                .iter()
                .filter(|t| {
                    let (f, to) = ends(t);
                    let fm = fa.is_empty() || f.as_ref().is_some_and(|f| fa.contains(&f));
                    let tm = ta.is_empty() || to.as_ref().is_some_and(|to| ta.contains(&to));
                    match (mode, fa.is_empty(), ta.is_empty()) {
                        ("union", false, false) => fm || tm,
                        _ => fm && tm,
                    }
                })
                .collect();
            assert!(want.len() >= 3, "{}: {} matches for {fa:?} {ta:?}", c.name, want.len());
            let mut filter = json!({"fromBlock": "earliest", "toBlock": "latest", "fromAddress": fa, "toAddress": ta});
            if mode == "union" {
                filter["mode"] = json!(mode);
            }
            let got = c.ok("trace_filter", json!([filter]));
            assert_eq!(
                got.as_array().unwrap().iter().collect::<Vec<_>>(),
                want,
                "{} {filter}",
                c.name
            );
            let mut paged = filter.clone();
            paged["after"] = json!(1);
            paged["count"] = json!(2);
            let got = c.ok("trace_filter", json!([paged]));
            assert_eq!(
                got.as_array().unwrap().iter().collect::<Vec<_>>(),
                want[1..3],
                "{} {paged}",
                c.name
            );
        }
    }
}

#[test]
fn trace_filter_limits_are_named_and_the_node_keeps_serving() {
    for c in chains(|cfg| {
        cfg.max_trace_filter_range = 5;
        cfg.max_trace_filter_results = 3;
    }) {
        let whole = json!([{"fromBlock": "0x0", "toBlock": "latest"}]);
        let e = c.node.call("trace_filter", whole).unwrap_err();
        assert_eq!(e["code"], json!(-32005), "{e}");
        assert!(e["message"].as_str().unwrap().contains("--trace.max-filter-range"), "{e}");
        let busy = (1..=c.head())
            .rev()
            .find(|b| c.ok("trace_block", json!([tag(*b)])).as_array().unwrap().len() > 3);
        let b = busy.unwrap_or_else(|| panic!("{}: no block with more than 3 traces", c.name));
        let one = json!([{"fromBlock": tag(b), "toBlock": tag(b)}]);
        let e = c.node.call("trace_filter", one).unwrap_err();
        assert!(e["message"].as_str().unwrap().contains("--trace.max-filter-results"), "{e}");
        let paged = json!([{"fromBlock": tag(b), "toBlock": tag(b), "count": 3}]);
        assert_eq!(c.ok("trace_filter", paged).as_array().unwrap().len(), 3);
        assert!(c.head() > 0);
    }
}

/// `trace_filter`'s `fromAddress` and `toAddress` list at most `--rpc.max-filter-addresses`
/// addresses each: a full list matches as its one real address alone, one more is refused with
/// -32602 naming the flag.
#[test]
fn trace_filter_address_lists_are_limited_naming_the_flag() {
    const MAX: usize = 20;
    for c in chains(|cfg| cfg.max_filter_addresses = MAX) {
        let head = c.head();
        let block = (1..=head)
            .find(|b| c.ok("trace_block", json!([tag(*b)]))[0]["action"]["from"].is_string())
            .unwrap_or_else(|| panic!("{}: no block with a call trace", c.name));
        let trace = c.ok("trace_block", json!([tag(block)]))[0].clone();
        let from = trace["action"]["from"].as_str().unwrap();
        let mut list: Vec<Value> =
            (1..MAX).map(|i| json!(format!("0x{:040x}", 0xdead_0000 + i))).collect();
        list.push(json!(from));
        let range = |addresses: Value| json!([{"fromBlock": tag(block), "toBlock": tag(block), "fromAddress": addresses}]);
        let alone = c.ok("trace_filter", range(json!([from])));
        assert!(!alone.as_array().unwrap().is_empty(), "{}", c.name);
        assert_eq!(c.ok("trace_filter", range(json!(list))), alone, "{}", c.name);
        list.push(json!(format!("0x{:040x}", 0xdead_ffff_u64)));
        for key in ["fromAddress", "toAddress"] {
            let e = c.node.call("trace_filter", json!([{key: list}])).unwrap_err();
            assert_eq!(e["code"], json!(-32602), "{e}");
            let msg = e["message"].as_str().unwrap();
            assert!(msg.contains(key) && msg.contains("21 addresses"), "{e}");
            assert!(msg.contains("--rpc.max-filter-addresses"), "{e}");
        }
    }
}

#[test]
fn the_trace_address_index_covers_every_traced_address_and_unwinds_with_its_block() {
    for c in chains(|_| {}) {
        let head = c.head();
        let r = c.db.begin_read().unwrap();
        assert_eq!(r.trace_index_from().unwrap(), Some(0), "{}", c.name);
        let mut named: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for b in 0..=head {
            for t in c.ok("trace_block", json!([tag(b)])).as_array().unwrap() {
                let (from, to) = ends(t);
                for a in [from, to].into_iter().flatten() {
                    named.entry(a).or_default().push(b);
                }
            }
        }
        assert!(named.len() >= 5, "{}: {} addresses", c.name, named.len());
        for (a, blocks) in &named {
            let address: alloy_primitives::Address = a.parse().unwrap();
            let indexed = r.blocks_touching(&address, 0, head).unwrap();
            for b in blocks {
                assert!(indexed.contains(b), "{}: {a} traced in block {b}, not indexed", c.name);
            }
        }
        drop(r);
        if c.name != "dev" {
            continue;
        }
        // Unwinding the head takes its index rows with it.
        let last = named.iter().find(|(_, b)| b.contains(&head)).map(|(a, _)| a.clone());
        let last: alloy_primitives::Address =
            last.expect("the head block has traces").parse().unwrap();
        let mut w = c.db.begin_write().unwrap();
        w.unwind_head().unwrap();
        w.commit(true).unwrap();
        let r = c.db.begin_read().unwrap();
        assert!(!r.blocks_touching(&last, head, head).unwrap().contains(&head));
    }
}

#[test]
fn a_block_replayed_on_several_cores_traces_as_on_one() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gen");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 200, 4);
    config.txs_per_block = Some(40);
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let db = Database::open(&tmp.path().join("db")).unwrap();
    let genesis = std::fs::read_to_string(out.join("genesis.json")).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).unwrap();
    loupe::import::import_files(&db, &spec, &[out.join("chain.rlp")]).unwrap();
    let db = Arc::new(db);
    // Four workers, one busy with the request: the block splits into up to four parts.
    let split = Node::serve(db.clone(), spec.clone(), |c| c.workers = 4);
    let single = Node::serve(db, spec, |c| c.workers = 1);
    for b in 1..=4u64 {
        let block = single.call("eth_getBlockByNumber", json!([tag(b), false])).unwrap();
        assert!(block["transactions"].as_array().unwrap().len() >= 32, "block {b}");
        for (m, p) in [
            ("trace_block", json!([tag(b)])),
            ("trace_replayBlockTransactions", json!([tag(b), ["trace", "stateDiff"]])),
        ] {
            let one = single.call(m, p.clone()).unwrap();
            assert_eq!(split.call(m, p).unwrap(), one, "{m} block {b}");
        }
    }
}
