//! geth-style tracing (`debug_traceTransaction`, `debug_traceBlockByNumber`/`ByHash`,
//! `debug_traceCall`) against independent truths: `trace_call` replays of the dev chain's sample
//! transactions, the execution-apis fixtures' expected struct logs, `eth_getBalance`, and
//! selectors computed here from function signatures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::{Address, U256, hex, keccak256};
use loupe::rpc::{RpcConfig, RpcServer};
use loupe::storage::Database;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Harness: the dev chain (genesis + 20-block sample history), served in-process
// ---------------------------------------------------------------------------------------------

/// A server over a freshly built dev chain in a temporary datadir.
struct Dev {
    url: String,
    client: reqwest::blocking::Client,
    server: Option<RpcServer>,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Dev {
    fn start(tweak: impl FnOnce(&mut RpcConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
        assert_eq!(loupe::dev::build_sample_history(&db, &spec).unwrap(), 20);
        let mut config = RpcConfig::default();
        tweak(&mut config);
        config.addr = "127.0.0.1:0".parse().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(loupe::rpc::start(Arc::new(db), spec, config)).unwrap();
        let url = format!("http://{}", server.addr);
        Self { url, client: reqwest::blocking::Client::new(), server: Some(server), rt, _dir: dir }
    }

    /// A server over `genesis` alone (no blocks after it).
    fn genesis_only(genesis: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        let (spec, _) = loupe::import::init_genesis(&db, genesis).unwrap();
        let config = RpcConfig { addr: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(loupe::rpc::start(Arc::new(db), spec, config)).unwrap();
        let url = format!("http://{}", server.addr);
        Self { url, client: reqwest::blocking::Client::new(), server: Some(server), rt, _dir: dir }
    }

    /// `Ok(result)` or `Err(error object)`.
    fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp: Value = self.client.post(&self.url).json(&body).send().unwrap().json().unwrap();
        match (resp.get("result"), resp.get("error")) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(e)) => Err(e.clone()),
            _ => panic!("malformed response {resp}"),
        }
    }

    /// The result; panics on an error.
    fn rpc(&self, method: &str, params: Value) -> Value {
        self.call(method, params.clone()).unwrap_or_else(|e| panic!("{method} {params}: error {e}"))
    }

    /// The error object; panics on a result.
    fn rpc_err(&self, method: &str, params: Value) -> Value {
        match self.call(method, params.clone()) {
            Ok(r) => panic!("{method} {params}: expected an error, got {r}"),
            Err(e) => e,
        }
    }

    fn block(&self, n: u64) -> Value {
        self.rpc("eth_getBlockByNumber", json!([q(n), true]))
    }

    fn balance(&self, a: &str, n: u64) -> U256 {
        u256(&self.rpc("eth_getBalance", json!([a, q(n)])))
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.rt.block_on(server.stop());
        }
    }
}

fn q(n: u64) -> String {
    format!("{n:#x}")
}

fn u256(v: &Value) -> U256 {
    v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}")).parse().unwrap()
}

fn addr(a: Address) -> String {
    format!("{a:#x}")
}

/// First four bytes of keccak256(signature), as `0x…` hex.
fn selector(signature: &str) -> String {
    format!("0x{}", hex::encode(&keccak256(signature.as_bytes())[..4]))
}

fn call_tracer() -> Value {
    json!({"tracer": "callTracer"})
}

/// The call object replaying `tx` (as `eth_getTransactionBy…` returns it): from, to, input,
/// value and the type-specific fields. No gas price: nothing is paid for gas, which changes
/// balances but no call frame.
fn call_of(tx: &Value) -> Value {
    let mut call = json!({"from": tx["from"], "input": tx["input"], "value": tx["value"]});
    if !tx["to"].is_null() {
        call["to"] = tx["to"].clone();
    }
    match tx["type"].as_str().unwrap() {
        "0x1" => call["accessList"] = tx["accessList"].clone(),
        "0x3" => {
            call["blobVersionedHashes"] = tx["blobVersionedHashes"].clone();
            call["maxFeePerBlobGas"] = tx["maxFeePerBlobGas"].clone();
        }
        "0x4" => call["authorizationList"] = tx["authorizationList"].clone(),
        _ => {}
    }
    call
}

// ---------------------------------------------------------------------------------------------
// callTracer vs trace_call
// ---------------------------------------------------------------------------------------------

/// What both trace shapes say about one frame: kind, from, to, value, input, output (when not
/// empty) and whether it failed. Hex strings are lower-cased.
#[derive(Debug, PartialEq, Eq)]
struct Frame {
    kind: String,
    from: String,
    to: String,
    value: U256,
    input: String,
    output: Option<String>,
    failed: bool,
}

fn lower(v: &Value) -> String {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}")).to_ascii_lowercase()
}

fn value_or_zero(v: &Value) -> U256 {
    if v.is_null() { U256::ZERO } else { u256(v) }
}

/// A callTracer tree flattened into Parity's addressing: `traceAddress` → frame.
fn flatten_call_frames(frame: &Value, at: Vec<usize>, out: &mut BTreeMap<Vec<usize>, Frame>) {
    let kind = lower(&frame["type"]);
    let output = frame.get("output").map(lower).filter(|o| o != "0x" && kind != "selfdestruct");
    out.insert(
        at.clone(),
        Frame {
            from: lower(&frame["from"]),
            to: lower(&frame["to"]),
            value: value_or_zero(&frame["value"]),
            input: frame.get("input").map_or_else(|| "0x".into(), lower),
            output,
            failed: frame.get("error").is_some(),
            kind,
        },
    );
    for (i, child) in frame["calls"].as_array().into_iter().flatten().enumerate() {
        let mut child_at = at.clone();
        child_at.push(i);
        flatten_call_frames(child, child_at, out);
    }
}

/// Parity's flat trace list as `traceAddress` → frame.
fn parity_frames(traces: &Value) -> BTreeMap<Vec<usize>, Frame> {
    let mut out = BTreeMap::new();
    for t in traces.as_array().unwrap() {
        let at: Vec<usize> = t["traceAddress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect();
        let (a, r) = (&t["action"], &t["result"]);
        let failed = t.get("error").is_some_and(|e| !e.is_null());
        // Empty output is no output (geth's callTracer leaves an empty `output` out).
        let output =
            |key: &str| r.get(key).filter(|v| !v.is_null()).map(lower).filter(|o| o != "0x");
        let frame = match t["type"].as_str().unwrap() {
            "call" => Frame {
                kind: lower(&a["callType"]),
                from: lower(&a["from"]),
                to: lower(&a["to"]),
                value: value_or_zero(&a["value"]),
                input: lower(&a["input"]),
                output: output("output"),
                failed,
            },
            "create" => Frame {
                kind: lower(&a["creationMethod"]),
                from: lower(&a["from"]),
                to: lower(&r["address"]),
                value: value_or_zero(&a["value"]),
                input: lower(&a["init"]),
                output: output("code"),
                failed,
            },
            "suicide" => Frame {
                kind: "selfdestruct".into(),
                from: lower(&a["address"]),
                to: lower(&a["refundAddress"]),
                value: value_or_zero(&a["balance"]),
                input: "0x".into(),
                output: None,
                failed,
            },
            other => panic!("unexpected trace type {other}: {t}"),
        };
        let subtraces = t["subtraces"].as_u64().unwrap() as usize;
        out.insert(at.clone(), frame);
        // Parity's subtraces count must agree with the addresses listed.
        let children = traces
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                let ca = c["traceAddress"].as_array().unwrap();
                ca.len() == at.len() + 1
                    && ca.iter().zip(&at).all(|(x, y)| x.as_u64() == Some(*y as u64))
            })
            .count();
        assert_eq!(children, subtraces, "subtraces of {t}");
    }
    out
}

/// Turns one `trace_call` state diff into state overrides layered over `overrides`: each
/// changed field takes its value after the call; a removed account gets emptied.
fn apply_state_diff(overrides: &mut serde_json::Map<String, Value>, diff: &Value) {
    let after = |d: &Value, removed: Value| -> Option<Value> {
        if let Some(c) = d.get("*") {
            Some(c["to"].clone())
        } else if let Some(v) = d.get("+") {
            Some(v.clone())
        } else if d.get("-").is_some() {
            Some(removed)
        } else {
            None // "="
        }
    };
    for (address, d) in diff.as_object().unwrap() {
        let entry = overrides.entry(address.clone()).or_insert_with(|| json!({}));
        let entry = entry.as_object_mut().unwrap();
        if d["balance"].get("-").is_some() {
            entry.clear();
            entry.insert("balance".into(), json!("0x0"));
            entry.insert("nonce".into(), json!("0x0"));
            entry.insert("code".into(), json!("0x"));
            entry.insert("state".into(), json!({}));
            continue;
        }
        if let Some(v) = after(&d["balance"], json!("0x0")) {
            entry.insert("balance".into(), v);
        }
        if let Some(v) = after(&d["nonce"], json!("0x0")) {
            entry.insert("nonce".into(), v);
        }
        if let Some(v) = after(&d["code"], json!("0x")) {
            entry.insert("code".into(), v);
        }
        let zero = json!(format!("0x{}", "0".repeat(64)));
        for (slot, change) in d["storage"].as_object().unwrap() {
            let v = after(change, zero.clone()).unwrap();
            let key = if entry.contains_key("state") { "state" } else { "stateDiff" };
            entry.entry(key).or_insert_with(|| json!({}))[slot] = v;
        }
    }
}

/// Transaction `index` of block `n` replayed with `trace_call` (`["trace"]`) on the state after
/// block `n − 1` plus the effects of the block's earlier transactions: those are replayed the
/// same way, one after the other, and their state diffs passed on as state overrides.
fn parity_replay(d: &Dev, n: u64, index: usize) -> Value {
    let txs = d.block(n)["transactions"].as_array().unwrap().clone();
    let mut overrides = serde_json::Map::new();
    for tx in &txs[..index] {
        let r = d.rpc(
            "trace_call",
            json!([
                call_of(tx),
                ["trace", "stateDiff"],
                q(n - 1),
                Value::Object(overrides.clone())
            ]),
        );
        apply_state_diff(&mut overrides, &r["stateDiff"]);
    }
    let params = json!([call_of(&txs[index]), ["trace"], q(n - 1), Value::Object(overrides)]);
    d.rpc("trace_call", params)["trace"].clone()
}

/// The acceptance test: for every sample transaction of the dev chain, `debug_traceTransaction`
/// with `callTracer` has the same call tree as the `trace_call` replay of that transaction
/// (same frames, call types, from/to, values, inputs, outputs, failures).
#[test]
fn call_tracer_matches_trace_call_for_every_sample_transaction() {
    let d = Dev::start(|_| {});
    let (mut checked, mut not_first, mut nested) = (0, 0, 0);
    for n in 1..=20u64 {
        let block = d.block(n);
        for (index, tx) in block["transactions"].as_array().unwrap().iter().enumerate() {
            let geth = d.rpc("debug_traceTransaction", json!([tx["hash"], call_tracer()]));
            let mut ours = BTreeMap::new();
            flatten_call_frames(&geth, vec![], &mut ours);
            let parity = parity_frames(&parity_replay(&d, n, index));
            assert_eq!(ours, parity, "block {n} tx {index}: callTracer {geth}");
            // The root is the transaction itself.
            let root = &ours[&vec![]];
            assert_eq!(root.from, lower(&tx["from"]), "block {n} tx {index}");
            assert_eq!(root.input, lower(&tx["input"]), "block {n} tx {index}");
            assert_eq!(root.value, u256(&tx["value"]), "block {n} tx {index}");
            if !tx["to"].is_null() {
                assert_eq!(root.to, lower(&tx["to"]), "block {n} tx {index}");
            }
            checked += 1;
            not_first += usize::from(index > 0);
            nested += usize::from(ours.len() > 1);
        }
    }
    // 1 + 2 + 1 + 2 + 1×6 + 2×10 sample transactions; the ones after the first in their block
    // (blocks 2, 4, 11..=20) need the earlier transactions' effects; some have nested frames.
    assert_eq!(checked, 32);
    assert_eq!(not_first, 12);
    assert!(nested >= 2, "nested call trees checked: {nested}");
}

/// The second transaction of block 4 (Prober's deploy) only lands at Prober's address if the
/// Stamp deploy before it in the block is replayed first (account 0's nonce).
#[test]
fn a_later_transaction_sees_the_earlier_ones_of_its_block() {
    let d = Dev::start(|_| {});
    let c = loupe::dev::sample_contracts();
    let tx = &d.block(4)["transactions"][1];
    let geth = d.rpc("debug_traceTransaction", json!([tx["hash"], call_tracer()]));
    assert_eq!(geth["type"], "CREATE");
    assert_eq!(lower(&geth["to"]), addr(c.prober));
}

/// `debug_traceBlockByNumber`/`ByHash` answer one `{txHash, result}` per transaction, each equal
/// to that transaction's `debug_traceTransaction`.
#[test]
fn block_traces_equal_transaction_traces() {
    let d = Dev::start(|_| {});
    for n in [2u64, 4, 6, 11] {
        let block = d.block(n);
        let by_number = d.rpc("debug_traceBlockByNumber", json!([q(n), call_tracer()]));
        let by_hash = d.rpc("debug_traceBlockByHash", json!([block["hash"], call_tracer()]));
        assert_eq!(by_number, by_hash, "block {n}");
        let txs = block["transactions"].as_array().unwrap();
        let entries = by_number.as_array().unwrap();
        assert_eq!(entries.len(), txs.len(), "block {n}");
        for (entry, tx) in entries.iter().zip(txs) {
            assert_eq!(entry["txHash"], tx["hash"]);
            let single = d.rpc("debug_traceTransaction", json!([tx["hash"], call_tracer()]));
            assert_eq!(entry["result"], single, "block {n} tx {}", tx["hash"]);
        }
    }
    // The struct logger too (the default tracer), for a block with two transactions.
    let by_number = d.rpc("debug_traceBlockByNumber", json!(["0xb"]));
    let second = &d.block(11)["transactions"][1];
    let single = d.rpc("debug_traceTransaction", json!([second["hash"]]));
    assert_eq!(by_number[1]["result"], single);
}

// ---------------------------------------------------------------------------------------------
// The struct logger against the execution-apis fixtures
// ---------------------------------------------------------------------------------------------

/// The `>>` requests and `<<` responses of a fixture `.io` file.
fn exchanges(path: &Path) -> Vec<(Value, Value)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut request = None;
    for line in text.lines() {
        if let Some(r) = line.strip_prefix(">>") {
            request = Some(serde_json::from_str(r.trim()).unwrap());
        } else if let Some(r) = line.strip_prefix("<<") {
            out.push((request.take().unwrap(), serde_json::from_str(r.trim()).unwrap()));
        }
    }
    out
}

/// The fixtures' struct logs are geth's output; they are only schema-checked by the conformance
/// runner (`speconly`), so they are compared exactly here: stack, memory, storage and
/// returnData encodings and which of them each option turns on.
#[test]
fn struct_logger_equals_the_fixtures() {
    let Some(node) = support::Node::start(|_| {}) else { return };
    let fx = support::fixtures().unwrap();
    let files = [
        "debug_traceTransaction/trace-contract-call.io",
        "debug_traceTransaction/trace-legacy-transfer.io",
        "debug_traceBlockByNumber/trace-block-with-transactions.io",
        "debug_traceBlockByNumber/trace-block-memory-encoding.io",
        "debug_traceBlockByNumber/trace-block-return-data-behavior.io",
        "debug_traceBlockByNumber/trace-block-storage-encoding.io",
        "debug_traceBlockByNumber/trace-block-storage-snapshot-timing.io",
        "debug_traceBlockByHash/trace-block-with-transactions.io",
    ];
    let mut compared = 0;
    for file in files {
        for (request, expected) in exchanges(&fx.join(file)) {
            let method = request["method"].as_str().unwrap();
            let got = node.call(method, request["params"].clone());
            let got = got.unwrap_or_else(|e| panic!("{file}: error {e}"));
            assert!(expected["result"] == got, "{file}: {got}");
            compared += 1;
        }
    }
    assert_eq!(compared, 9);
}

// ---------------------------------------------------------------------------------------------
// The other tracers
// ---------------------------------------------------------------------------------------------

/// prestateTracer in diffMode on value transfers: the balances before and after equal
/// `eth_getBalance` at the parent and at the block. Block 9 holds one transfer; in block 2 the
/// first transfer starts from the parent's state and the last one ends at the block's.
#[test]
fn prestate_diff_mode_balances_agree_with_eth_get_balance() {
    let d = Dev::start(|_| {});
    let diff = |hash: &Value| {
        let opts = json!({"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}});
        d.rpc("debug_traceTransaction", json!([hash, opts]))
    };
    let check = |side: &Value, at: u64| {
        let accounts = side.as_object().unwrap();
        assert!(!accounts.is_empty());
        for (a, state) in accounts {
            if let Some(b) = state.get("balance") {
                assert_eq!(u256(b), d.balance(a, at), "{a} at block {at}");
            }
        }
        accounts.len()
    };
    // Block 9: account 1 pays account 2 seven wei (the blob transaction), alone in its block.
    let [_, a1, a2] = <[Address; 3]>::try_from(loupe::dev::dev_accounts()).unwrap();
    let tx = &d.block(9)["transactions"][0];
    let r = diff(&tx["hash"]);
    check(&r["pre"], 8);
    check(&r["post"], 9);
    for a in [a1, a2] {
        assert!(r["pre"][addr(a)]["balance"].is_string(), "{a} in pre: {r}");
        assert!(r["post"][addr(a)]["balance"].is_string(), "{a} in post: {r}");
    }
    assert_eq!(
        d.balance(&addr(a2), 9) - d.balance(&addr(a2), 8),
        U256::from(7),
        "the transfer's value"
    );
    // The sender's nonce (a JSON number, as geth writes it) goes up by one; post lists changed
    // fields only.
    let nonce = |side: &str| r[side][addr(a1)]["nonce"].as_u64().unwrap();
    assert_eq!(nonce("post"), nonce("pre") + 1);
    // Block 2: two transfers.
    let txs = d.block(2)["transactions"].as_array().unwrap().clone();
    check(&diff(&txs[0]["hash"])["pre"], 1);
    check(&diff(&txs[1]["hash"])["post"], 2);
}

/// 4byteTracer on `Prober.probe(token, stamp, who)`: the selectors and argument sizes of the
/// root call, both `balanceOf(address)` calls (CALL and STATICCALL) and the DELEGATECALL of
/// `stamp(uint256)`.
/// prestateTracer as geth's prestate.go: `codeHash` is the keccak of the code `eth_getCode`
/// gives, for accounts with code only (kept under `disableCode`); an account empty before the
/// call is left out unless `includeEmpty` (then `{"balance": "0x0"}`), which `diffMode` refuses.
#[test]
fn prestate_tracer_code_hash_and_include_empty() {
    let d = Dev::start(|_| {});
    let [a0, ..] = <[Address; 3]>::try_from(loupe::dev::dev_accounts()).unwrap();
    let counter = addr(loupe::dev::COUNTER);
    let code = d.rpc("eth_getCode", json!([counter, "latest"]));
    let code_hash = format!("{:#x}", keccak256(hex::decode(code.as_str().unwrap()).unwrap()));
    let call = json!({"from": addr(a0), "to": counter});
    let trace = |call: &Value, config: Value| {
        let opts = json!({"tracer": "prestateTracer", "tracerConfig": config});
        d.rpc("debug_traceCall", json!([call, "latest", opts]))
    };
    let pre = trace(&call, json!({}));
    assert_eq!(pre[&counter]["codeHash"], code_hash, "{pre}");
    assert_eq!(pre[&counter]["code"], code);
    assert!(pre[addr(a0)].get("codeHash").is_none(), "an EOA has none: {pre}");
    let pre = trace(&call, json!({"disableCode": true}));
    assert_eq!(pre[&counter]["codeHash"], code_hash, "{pre}");
    assert!(pre[&counter].get("code").is_none(), "{pre}");
    let diff = trace(&call, json!({"diffMode": true}));
    assert_eq!(diff["pre"][&counter]["codeHash"], code_hash, "{diff}");
    assert!(diff["post"][&counter].get("codeHash").is_none(), "unchanged: {diff}");

    let empty = "0x000000000000000000000000000000000000cccc";
    let call = json!({"from": addr(a0), "to": empty});
    assert!(trace(&call, json!({})).get(empty).is_none());
    let pre = trace(&call, json!({"includeEmpty": true}));
    assert_eq!(pre[empty], json!({"balance": "0x0"}), "{pre}");
    let opts = json!({"tracer": "prestateTracer",
                      "tracerConfig": {"diffMode": true, "includeEmpty": true}});
    let e = d.rpc_err("debug_traceCall", json!([call, "latest", opts]));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("cannot use diffMode with includeEmpty"));
}

/// prestateTracer's diffMode on a create (init code `PUSH2 0x6001 PUSH1 0 MSTORE PUSH1 2 PUSH1 30
/// RETURN` deploys `0x6001`): the new account is not in `pre` (it was empty) and its `post` is
/// geth's `{"code": "0x6001", "codeHash": keccak256(0x6001), "nonce": 1}` (EIP-161's nonce; the
/// balance stays zero).
#[test]
fn prestate_diff_mode_of_a_create_has_the_new_code_hash() {
    let d = Dev::start(|_| {});
    let [a0, ..] = <[Address; 3]>::try_from(loupe::dev::dev_accounts()).unwrap();
    let call = json!({"from": addr(a0), "input": "0x6160016000526002601ef3"});
    let created = d.rpc("debug_traceCall", json!([call, "latest", call_tracer()]));
    let new = lower(&created["to"]);
    let opts = json!({"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}});
    let diff = d.rpc("debug_traceCall", json!([call, "latest", opts]));
    let hash = format!("{:#x}", keccak256([0x60, 0x01]));
    assert_eq!(
        diff["post"][&new],
        json!({"code": "0x6001", "codeHash": hash, "nonce": 1}),
        "{diff}"
    );
    assert!(diff["pre"].get(&new).is_none(), "{diff}");
}

#[test]
fn four_byte_tracer_counts_selectors() {
    let d = Dev::start(|_| {});
    let tx = &d.block(6)["transactions"][0];
    let r = d.rpc("debug_traceTransaction", json!([tx["hash"], {"tracer": "4byteTracer"}]));
    let expected = json!({
        format!("{}-96", selector("probe(address,address,address)")): 1,
        format!("{}-32", selector("balanceOf(address)")): 2,
        format!("{}-32", selector("stamp(uint256)")): 1,
    });
    assert_eq!(r, expected);
}

/// callTracer's options, flatCallTracer and noopTracer on the same nested transaction.
#[test]
fn call_tracer_options_flat_call_and_noop() {
    let d = Dev::start(|_| {});
    let probe = d.block(6)["transactions"][0]["hash"].clone();
    let full = d.rpc("debug_traceTransaction", json!([probe, call_tracer()]));
    assert_eq!(full["calls"].as_array().unwrap().len(), 3);
    let top = d.rpc(
        "debug_traceTransaction",
        json!([probe, {"tracer": "callTracer", "tracerConfig": {"onlyTopCall": true}}]),
    );
    assert!(top.get("calls").is_none_or(|c| c.as_array().unwrap().is_empty()), "{top}");
    assert_eq!(top["output"], full["output"]);

    // withLog: Token.transfer's Transfer(from, to, value) event on the root frame.
    let transfer = d.block(5)["transactions"][0].clone();
    let with_log = d.rpc(
        "debug_traceTransaction",
        json!([transfer["hash"], {"tracer": "callTracer", "tracerConfig": {"withLog": true}}]),
    );
    let logs = with_log["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 1, "{with_log}");
    let topic0 = format!("0x{}", hex::encode(keccak256("Transfer(address,address,uint256)")));
    assert_eq!(logs[0]["topics"][0], topic0);
    assert_eq!(lower(&logs[0]["address"]), lower(&transfer["to"]));
    let plain = d.rpc("debug_traceTransaction", json!([transfer["hash"], call_tracer()]));
    assert!(plain.get("logs").is_none(), "{plain}");

    // flatCallTracer: Parity's shape, one entry per frame, located in the block.
    let flat = d.rpc("debug_traceTransaction", json!([probe, {"tracer": "flatCallTracer"}]));
    let flat = flat.as_array().unwrap();
    assert_eq!(flat.len(), 4);
    assert!(flat.iter().all(|t| t["transactionHash"] == probe && t["blockNumber"] == 6));
    let parity = parity_frames(&parity_replay(&d, 6, 0));
    let mut ours = BTreeMap::new();
    flatten_call_frames(&full, vec![], &mut ours);
    assert_eq!(parity.len(), ours.len());
    assert_eq!(parity_frames(&Value::Array(flat.clone())), parity);

    let noop = d.rpc("debug_traceTransaction", json!([probe, {"tracer": "noopTracer"}]));
    assert_eq!(noop, json!({}));
}

/// flatCallTracer's root `gasUsed` is the receipt's (geth's `callTracer` frame, flattened), not
/// execution gas.
#[test]
fn flat_call_tracer_root_gas_is_the_receipts() {
    let d = Dev::start(|_| {});
    for n in [5, 6] {
        let hash = d.block(n)["transactions"][0]["hash"].clone();
        let receipt = d.rpc("eth_getTransactionReceipt", json!([hash]));
        let flat = d.rpc("debug_traceTransaction", json!([hash, {"tracer": "flatCallTracer"}]));
        assert_eq!(flat[0]["result"]["gasUsed"], receipt["gasUsed"], "block {n}: {flat}");
        let block = d.rpc("debug_traceBlockByNumber", json!([q(n), {"tracer": "flatCallTracer"}]));
        assert_eq!(block[0]["result"][0]["result"]["gasUsed"], receipt["gasUsed"]);
    }
}

/// flatCallTracer as geth's call_flat.go: CALLCODE and DELEGATECALL to a precompile shown, CALL
/// and STATICCALL to one hidden (unless `includePrecompiles`), geth's error strings (Parity's
/// with `convertParityErrors`: geth's table maps "invalid opcode: INVALID" to "Bad
/// instruction"), and a failed frame without `result`.
#[test]
fn flat_call_tracer_follows_geths_rules() {
    let d = Dev::start(|_| {});
    let [a0, ..] = <[Address; 3]>::try_from(loupe::dev::dev_accounts()).unwrap();
    let zeros5 = "6000".repeat(5);
    // CALLCODE(gas, 0x04, 0, 0, 0, 0, 0); CALL(gas, 0x04, ...); STATICCALL(gas, 0x02, 0, 0, 0,
    // 0); CALL(gas, 0xbbbb, ...) whose code is INVALID; STOP.
    let code = format!(
        "0x{zeros5}60045af250{zeros5}60045af150{}60025afa50{zeros5}61bbbb5af15000",
        "6000".repeat(4)
    );
    let target = "0x000000000000000000000000000000000000aaaa";
    let child = "0x000000000000000000000000000000000000bbbb";
    let overrides = json!({target: {"code": code}, child: {"code": "0xfe"}});
    let call = json!({"from": addr(a0), "to": target, "gas": "0x100000"});
    let trace = |config: Value| {
        let opts = json!({"tracer": "flatCallTracer", "tracerConfig": config,
                          "stateOverrides": overrides});
        d.rpc("debug_traceCall", json!([call, "latest", opts]))
    };
    let shown = |flat: &Value| -> Vec<(String, String)> {
        flat.as_array()
            .unwrap()
            .iter()
            .map(|t| (lower(&t["action"]["callType"]), lower(&t["action"]["to"])))
            .collect()
    };
    let p = |n: u8| format!("0x{n:040x}");
    let flat = trace(json!({}));
    assert_eq!(
        shown(&flat),
        [("call".into(), target.into()), ("callcode".into(), p(4)), ("call".into(), child.into())],
        "{flat}"
    );
    assert_eq!(flat[0]["subtraces"], 2);
    assert_eq!(flat[2]["traceAddress"], json!([1]));
    assert_eq!(flat[2]["error"], "invalid opcode: INVALID");
    assert!(flat[2]["result"].is_null(), "{flat}");
    let flat = trace(json!({"convertParityErrors": true}));
    assert_eq!(flat[2]["error"], "Bad instruction");
    let flat = trace(json!({"includePrecompiles": true}));
    assert_eq!(
        shown(&flat),
        [
            ("call".into(), target.into()),
            ("callcode".into(), p(4)),
            ("call".into(), p(4)),
            ("staticcall".into(), p(2)),
            ("call".into(), child.into())
        ],
        "{flat}"
    );
}

// ---------------------------------------------------------------------------------------------
// debug_traceCall
// ---------------------------------------------------------------------------------------------

/// `debug_traceCall` runs in `eth_call`'s environment: same output as `eth_call` and
/// `trace_call`, and its options carry state and block overrides.
#[test]
fn trace_call_agrees_with_eth_call_and_takes_overrides() {
    let d = Dev::start(|_| {});
    let [a0, ..] = <[Address; 3]>::try_from(loupe::dev::dev_accounts()).unwrap();
    let counter = addr(loupe::dev::COUNTER);
    let call = json!({"from": addr(a0), "to": counter});
    for block in ["0x5", "0xd", "latest"] {
        let eth = d.rpc("eth_call", json!([call, block]));
        let parity = d.rpc("trace_call", json!([call, ["trace"], block]));
        let geth = d.rpc("debug_traceCall", json!([call, block, call_tracer()]));
        assert_eq!(geth["output"], eth, "at {block}");
        assert_eq!(parity["output"], eth, "at {block}");
        // The struct logger's returnValue too.
        let logs = d.rpc("debug_traceCall", json!([call, block]));
        assert_eq!(logs["returnValue"], eth, "at {block}");
        assert_eq!(logs["failed"], false);
    }
    // Counter's slot 0 overridden to 41: the call returns 42.
    let slot0 = format!("0x{}", "0".repeat(64));
    let opts = json!({
        "tracer": "callTracer",
        "stateOverrides": {counter.clone(): {"stateDiff": {slot0: format!("0x{:064x}", 41)}}},
    });
    let r = d.rpc("debug_traceCall", json!([call, "latest", opts]));
    assert_eq!(r["output"], format!("0x{:064x}", 42));
    // blockOverrides: NUMBER (0x43) returned by overridden code sees the overridden number.
    let number_code = "0x4360005260206000f3";
    let opts = json!({
        "tracer": "callTracer",
        "stateOverrides": {counter: {"code": number_code}},
        "blockOverrides": {"number": "0x1234"},
    });
    let r = d.rpc("debug_traceCall", json!([call, "latest", opts]));
    assert_eq!(r["output"], format!("0x{:064x}", 0x1234));
}

/// erc7562Tracer (geth's ERC-4337 validation tracer): Counter's call reads slot 0 (the value
/// `eth_getStorageAt` gives) before writing it once, and uses SLOAD and SSTORE.
#[test]
fn erc7562_tracer_reports_counters_slot_accesses() {
    let d = Dev::start(|_| {});
    let counter = addr(loupe::dev::COUNTER);
    let slot0 = format!("0x{}", "0".repeat(64));
    let stored = d.rpc("eth_getStorageAt", json!([counter, slot0, "latest"]));
    let call = json!({"to": counter});
    let r = d.rpc("debug_traceCall", json!([call, "latest", {"tracer": "erc7562Tracer"}]));
    assert_eq!(r["accessedSlots"]["reads"], json!({slot0.clone(): [stored]}), "{r}");
    assert_eq!(r["accessedSlots"]["writes"], json!({slot0: 1}), "{r}");
    let opcodes = r["usedOpcodes"].as_object().unwrap();
    assert_eq!(opcodes.get("0x54"), Some(&json!(1)), "SLOAD: {r}");
    assert_eq!(opcodes.get("0x55"), Some(&json!(1)), "SSTORE: {r}");
}

/// Before Homestead a create that cannot pay its code deposit succeeds with no code, and geth's
/// callTracer reports the init code's return data as its `output`. Init code `PUSH32 0x11…11
/// PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN` returns 32 bytes of 0x11; the gas by hand (Frontier:
/// no 32,000 create charge, 68 per non-zero and 4 per zero data byte): 21,000 + 39 × 68 +
/// 2 × 4 + 18 (six steps of 3, one word of memory 3) = 23,678, leaving 322 of 24,000 for a
/// deposit of 200 × 32 = 6,400.
#[test]
fn a_frontier_create_whose_deposit_runs_out_reports_the_init_codes_output() {
    let from = "0x00000000000000000000000000000000000000f1";
    let genesis = json!({
        "config": {"chainId": 7777},
        "difficulty": "0x20000",
        "gasLimit": "0x1000000",
        "alloc": {from: {"balance": "0x1"}},
    });
    let d = Dev::genesis_only(&genesis.to_string());
    let returned = format!("0x{}", "11".repeat(32));
    let init = format!("0x7f{}60005260206000f3", "11".repeat(32));
    let call = json!({"from": from, "input": init, "gas": format!("{:#x}", 24_000)});
    for with_log in [false, true] {
        let opts = json!({"tracer": "callTracer", "tracerConfig": {"withLog": with_log}});
        let r = d.rpc("debug_traceCall", json!([call, "latest", opts]));
        assert_eq!(r["type"], "CREATE", "{r}");
        assert!(r.get("error").is_none(), "the create succeeds: {r}");
        assert_eq!(r["output"], returned, "{r}");
        assert_eq!(r["gasUsed"], format!("{:#x}", 23_678), "{r}");
    }
}

// ---------------------------------------------------------------------------------------------
// Refusals and errors
// ---------------------------------------------------------------------------------------------

#[test]
fn js_and_unknown_tracers_are_refused() {
    let d = Dev::start(|_| {});
    let hash = d.block(1)["transactions"][0]["hash"].clone();
    let js = "{data: [], step: function(log) { this.data.push(log.op.toString()); }, \
              fault: function() {}, result: function() { return this.data; }}";
    let e = d.rpc_err("debug_traceTransaction", json!([hash, {"tracer": js}]));
    assert_eq!(e["code"], -32602, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("JavaScript tracers are not supported"), "{msg}");
    assert!(msg.contains("{data: []"), "the message quotes the tracer: {msg}");

    let e = d.rpc_err("debug_traceTransaction", json!([hash, {"tracer": "fooTracer"}]));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("unknown tracer \"fooTracer\""), "{e}");

    // The same checks on debug_traceCall (options at argument 2) and block tracing.
    let call = json!({"to": addr(loupe::dev::COUNTER)});
    let e = d.rpc_err("debug_traceCall", json!([call, "latest", {"tracer": js}]));
    assert_eq!(e["code"], -32602, "{e}");
    let e = d.rpc_err("debug_traceBlockByNumber", json!(["0x1", {"tracer": "fooTracer"}]));
    assert_eq!(e["code"], -32602, "{e}");
    // A malformed tracer config names the tracer.
    let bad = json!({"tracer": "callTracer", "tracerConfig": {"onlyTopCall": "yes"}});
    let e = d.rpc_err("debug_traceTransaction", json!([hash, bad]));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("callTracer"), "{e}");
    // A malformed timeout.
    let e = d.rpc_err("debug_traceTransaction", json!([hash, {"timeout": "soon"}]));
    assert_eq!(e["code"], -32602, "{e}");
}

#[test]
fn genesis_and_missing_targets_are_errors() {
    let d = Dev::start(|_| {});
    let genesis = d.block(0)["hash"].clone();
    for (method, params) in [
        ("debug_traceBlockByNumber", json!(["0x0"])),
        ("debug_traceBlockByNumber", json!(["earliest"])),
        ("debug_traceBlockByHash", json!([genesis])),
    ] {
        let e = d.rpc_err(method, params);
        assert_eq!(e, json!({"code": -32000, "message": "genesis is not traceable"}));
    }
    let missing = format!("0x{}", "11".repeat(32));
    let e = d.rpc_err("debug_traceTransaction", json!([missing]));
    assert_eq!(e, json!({"code": -32000, "message": "transaction not found"}));
    let e = d.rpc_err("debug_traceBlockByNumber", json!(["0x15"]));
    assert_eq!(e, json!({"code": -32000, "message": "block #21 not found"}));
    let e = d.rpc_err("debug_traceBlockByHash", json!([missing]));
    assert_eq!(e["code"], -32000);
    let e = d.rpc_err("debug_traceCall", json!([{"to": addr(loupe::dev::COUNTER)}, "0x15"]));
    assert_eq!(e, json!({"code": -32000, "message": "header not found"}));
}

/// A call that never ends (`JUMPDEST PUSH1 0 JUMP`, with a gas cap too high to run out) stops
/// at the operator's deadline, or earlier at the request's `timeout`; the node keeps serving.
#[test]
fn deadline_stops_a_long_trace_and_the_node_keeps_serving() {
    let d = Dev::start(|c| {
        c.gas_cap = 1_000_000_000_000;
        c.call_timeout = Duration::from_millis(300);
    });
    let looper = "0x00000000000000000000000000000000000000ff";
    let call = json!({"to": looper, "gas": "0xe8d4a51000"});
    let opts = |extra: Value| {
        let mut o =
            json!({"tracer": "callTracer", "stateOverrides": {looper: {"code": "0x5b600056"}}});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    let started = Instant::now();
    let e = d.rpc_err("debug_traceCall", json!([call, "latest", opts(json!({}))]));
    assert_eq!(e["code"], -32000, "{e}");
    assert_eq!(e["message"], "execution timeout after 300ms");
    assert!(started.elapsed() < Duration::from_secs(30));

    // The request may lower the deadline, never raise it.
    let e = d.rpc_err("debug_traceCall", json!([call, "latest", opts(json!({"timeout": "50ms"}))]));
    assert_eq!(e["message"], "execution timeout after 50ms", "{e}");
    let e = d.rpc_err("debug_traceCall", json!([call, "latest", opts(json!({"timeout": "1h"}))]));
    assert_eq!(e["message"], "execution timeout after 300ms", "{e}");

    // Still serving: reads and traces.
    assert_eq!(d.rpc("eth_blockNumber", json!([])), "0x14");
    let tx = &d.block(6)["transactions"][0];
    let r = d.rpc("debug_traceTransaction", json!([tx["hash"], call_tracer()]));
    assert_eq!(r["calls"].as_array().unwrap().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Budgets: the struct logger's size, cancellation when the client leaves, memory
// ---------------------------------------------------------------------------------------------

/// `JUMPDEST PUSH1 0 JUMP` at `LOOPER`: a call that runs until its gas or its deadline ends.
const LOOPER: &str = "0x00000000000000000000000000000000000000ff";

fn looping(tracer: Option<&str>) -> Value {
    let mut o = json!({"stateOverrides": {LOOPER: {"code": "0x5b600056"}}});
    if let Some(t) = tracer {
        o["tracer"] = json!(t);
    }
    o
}

/// The struct logger's answer is bounded while the call runs (`--rpc.max-trace-size`): a trace
/// whose answer is larger than the limit (measured on a node with the default limit) is refused
/// with -32008 naming the flag, a smaller one is answered in full, and a call that never ends
/// stops at the limit long before its deadline.
#[test]
fn struct_logs_past_the_trace_size_limit_are_refused_naming_the_flag() {
    const LIMIT: u64 = 256 * 1024;
    let full = Dev::start(|c| c.call_timeout = Duration::from_secs(120));
    let limited = Dev::start(|c| {
        c.max_trace_size = LIMIT;
        c.call_timeout = Duration::from_secs(120);
    });
    let size = |d: &Dev, gas: u64| {
        let call = json!({"to": LOOPER, "gas": q(gas)});
        d.call("debug_traceCall", json!([call, "latest", looping(None)]))
            .map(|r| (r["structLogs"].as_array().unwrap().len(), r.to_string().len()))
    };
    // 12 gas a turn of 3 steps: some 250 steps, and some 25,000.
    let (small_steps, small_len) = size(&full, 21_000 + 1_000).unwrap();
    let (big_steps, big_len) = size(&full, 21_000 + 100_000).unwrap();
    assert!(small_steps > 200 && big_steps > 20_000, "{small_steps} {big_steps}");
    assert!((small_len as u64) < LIMIT / 8 && big_len as u64 > LIMIT, "{small_len} {big_len}");
    assert_eq!(size(&limited, 21_000 + 1_000).unwrap(), (small_steps, small_len));
    let e = size(&limited, 21_000 + 100_000).unwrap_err();
    assert_eq!(e["code"], -32008, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains(&format!("{LIMIT} bytes")) && msg.contains("--rpc.max-trace-size"), "{e}");

    // An endless loop with the default limit: refused by size, well before the 120 s deadline.
    let started = Instant::now();
    let call = json!({"to": LOOPER, "gas": "0x2faf080"});
    let e = full.rpc_err("debug_traceCall", json!([call, "latest", looping(None)]));
    assert_eq!(e["code"], -32008, "{e}");
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());

    // erc7562Tracer records each step's stack and memory too: bounded the same way.
    let e =
        full.rpc_err("debug_traceCall", json!([call, "latest", looping(Some("erc7562Tracer"))]));
    assert_eq!(e["code"], -32008, "{e}");
    let call = json!({"to": LOOPER, "gas": q(21_000 + 1_000)});
    assert!(
        limited
            .rpc("debug_traceCall", json!([call, "latest", looping(Some("erc7562Tracer"))]))
            .is_object()
    );

    // A stored transaction's trace over the limit too.
    let tx = &limited.block(6)["transactions"][0];
    let whole = full.rpc("debug_traceTransaction", json!([tx["hash"]])).to_string().len();
    let tiny = Dev::start(|c| c.max_trace_size = whole as u64 / 2);
    let e = tiny.rpc_err("debug_traceTransaction", json!([tx["hash"]]));
    assert_eq!(e["code"], -32008, "{e}");
    assert!(tiny.rpc("debug_traceTransaction", json!([tx["hash"], call_tracer()])).is_object());
}

/// A trace whose client leaves is stopped at once: with one EVM worker and no queue, the worker
/// is busy while the client waits (a second call is refused with -32005), and free again as soon
/// as the client closed its connection, though the call's deadline is ten minutes away.
#[test]
fn a_trace_whose_client_leaves_stops_and_frees_its_worker() {
    use std::io::Write;
    let d = Dev::start(|c| {
        c.workers = 1;
        c.queue = 0;
        c.inline_budget = Duration::ZERO;
        c.gas_cap = 1_000_000_000_000;
        c.call_timeout = Duration::from_secs(600);
    });
    let call = json!({"to": LOOPER, "gas": "0xe8d4a51000"});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceCall",
                      "params": [call, "latest", looping(Some("callTracer"))]})
    .to_string();
    let addr = d.url.trim_start_matches("http://").trim_end_matches('/').to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let cheap = json!([{"to": "0x0000000000000000000000000000000000000004", "data": "0x01"}]);
    // The endless call runs when no answer comes within two seconds.
    let s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    (&s).write_all(request.as_bytes()).unwrap();
    let mut answer = [0u8; 1];
    let read = std::io::Read::read(&mut &s, &mut answer);
    assert!(read.is_err(), "the looping call was answered: {read:?}");
    // It holds the one worker.
    let e = d.call("eth_call", cheap.clone()).unwrap_err();
    assert_eq!(e["code"], -32005, "{e}");
    drop(s);
    let left = Instant::now();
    loop {
        match d.call("eth_call", cheap.clone()) {
            Ok(r) => {
                assert_eq!(r, "0x01");
                break;
            }
            Err(e) if e["code"] == -32005 && left.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                panic!("the worker is still busy {:?} after the client left: {e}", left.elapsed())
            }
        }
    }
}

/// The memory one struct-logger call of an endless loop takes in `loupe dev` with default flags:
/// the peak resident set (VmHWM, reset before the call) grows by less than 256 MiB, and the call
/// is refused by the trace size limit.
#[test]
fn an_endless_struct_log_grows_the_binarys_memory_by_less_than_256_mib() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["dev", "--http.port", "0", "--http.explorer=false", "--datadir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut url = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(at) = line.find("serving JSON-RPC at ") {
            url = Some(line[at + "serving JSON-RPC at ".len()..].trim().to_string());
            break;
        }
    }
    let url = url.expect("the served URL");
    // Its output is read to the end, so that its logging never meets a closed pipe.
    let drain = std::thread::spawn(move || lines.for_each(drop));
    let pid = child.id();
    let kib = |field: &str| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let call = json!({"to": LOOPER, "gas": "0x2faf080"});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceCall",
                      "params": [call, "latest", looping(None)]});
    // A connection per request: none is reused after the server closed it.
    let client = reqwest::blocking::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    // One small call first, so that what the first call of a kind allocates is not counted.
    let warm = json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceCall",
                      "params": [{"to": LOOPER, "gas": "0x5dc0"}, "latest", looping(None)]});
    let _: Value = client.post(&url).json(&warm).send().unwrap().json().unwrap();
    let before = kib("VmRSS:");
    // Writing 5 to clear_refs resets the peak (VmHWM) to the current resident set.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let resp: Value = client.post(&url).json(&body).send().unwrap().json().unwrap();
    let peak = kib("VmHWM:");
    child.kill().unwrap();
    child.wait().unwrap();
    drain.join().unwrap();
    assert_eq!(resp["error"]["code"], -32008, "{resp}");
    let grown = peak.saturating_sub(before);
    assert!(grown < 256 * 1024, "peak grew by {} MiB", grown / 1024);
}
