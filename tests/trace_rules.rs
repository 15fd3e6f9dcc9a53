//! The rules of `trace_call` (`../shared/spec/behaviour.md` §3 and the seed's rules), one test
//! each: no state change, result shape, every error with its code and message, the execution
//! deadline and the bounded tracing pool. Expected values are derived by hand (comments) or read
//! through a second path (storage layer, eth_getBalance); none is pasted from loupe's output.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256, U256, address};
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use serde_json::{Value, json};
use support::Node;

/// A genesis-funded account that sends no transaction in the fixture chain.
const FUNDED: Address = address!("14e46043e63d0e3cdcf2530519f4cfaf35058cb2");
/// The fixture's emit contract: every call writes storage slot 0 and slot keccak(input).
const EMIT: Address = address!("7dcd17433742f4c0ca53122ab541d0ba67fc27df");
/// JUMPDEST PUSH1 0 JUMP: loops until gas or the deadline runs out.
const LOOP: &str = "0x5b600056";
/// PUSH1 0x2a PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN → word(42).
const RET42: &str = "0x602a60005260206000f3";

fn a(x: Address) -> String {
    format!("{x:#x}")
}

fn word(n: u64) -> String {
    format!("0x{n:064x}")
}

fn trace(node: &Node, params: Value) -> Value {
    node.call("trace_call", params.clone())
        .unwrap_or_else(|e| panic!("trace_call {params} failed: {e}"))
}

/// Expects a JSON-RPC error with `code` and exactly `message`.
fn expect_error(node: &Node, method: &str, params: Value, code: i64, message: &str) {
    let e = node
        .call(method, params.clone())
        .expect_err(&format!("{method} {params} should fail with {code} {message}"));
    assert_eq!(e["code"], code, "{method} {params}: {e}");
    assert_eq!(e["message"], message, "{method} {params}: {e}");
}

/// Expects a JSON-RPC error with `code` whose message contains every one of `parts`.
fn expect_error_naming(node: &Node, params: Value, code: i64, parts: &[&str]) {
    let e = node
        .call("trace_call", params.clone())
        .expect_err(&format!("trace_call {params} should fail with {code}"));
    assert_eq!(e["code"], code, "{params}: {e}");
    let msg = e["message"].as_str().unwrap();
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} should name {p:?}");
    }
}

fn balance(node: &Node, x: Address) -> U256 {
    let v = node.call("eth_getBalance", json!([a(x), "latest"])).unwrap();
    U256::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// A simple call: RET42 installed at a fresh address.
fn simple_call() -> (Value, Value) {
    let x = address!("9000000000000000000000000000000000000001");
    (json!({"from": a(FUNDED), "to": a(x), "gas": "0x186a0"}), json!({a(x): {"code": RET42}}))
}

// ---------------------------------------------------------------------------------------------
// Seed rule 1: nothing is written
// ---------------------------------------------------------------------------------------------

/// 1,000 trace_calls that write storage (emit contract) or move value from a funded account,
/// with stateDiff asked: the stored state after block 54 is identical account by account and
/// slot by slot, the head is still 54.
#[test]
fn no_state_change_after_1000_writing_calls() {
    let Some(node) = Node::start(|_| {}) else { return };
    let chain = support::chain().unwrap();
    let before = chain.db.begin_read().unwrap().state_at(54).unwrap().dump().unwrap();
    assert_eq!(node.call("eth_blockNumber", json!([])).unwrap(), "0x36");

    let mut writes_seen = 0;
    for i in 0..1000u64 {
        let call = if i % 2 == 0 {
            json!({"from": a(FUNDED), "to": a(EMIT), "input": format!("0x{i:08x}")})
        } else {
            let to = Address::from_word(alloy_primitives::B256::from(U256::from(0xabc_0000 + i)));
            json!({"from": a(FUNDED), "to": a(to), "value": "0xde0b6b3a7640000"})
        };
        let res = trace(&node, json!([call, ["trace", "stateDiff"]]));
        // The call would write: the emit contract's slot 0 or the recipient's balance.
        let diff = res["stateDiff"].as_object().unwrap();
        if diff.contains_key(&a(EMIT)) || diff.len() >= 2 {
            writes_seen += 1;
        }
    }
    assert_eq!(writes_seen, 1000, "every call must produce a state diff");

    let after = chain.db.begin_read().unwrap().state_at(54).unwrap().dump().unwrap();
    assert_eq!(before.len(), after.len(), "account count");
    for ((ka, va), (kb, vb)) in before.iter().zip(after.iter()) {
        assert_eq!(ka, kb, "account set changed");
        assert_eq!(va, vb, "account {ka} changed");
    }
    assert_eq!(chain.db.begin_read().unwrap().head().unwrap(), Some(54));
    assert_eq!(node.call("eth_blockNumber", json!([])).unwrap(), "0x36");
    // Third path: the RPC reads agree.
    let slot0 = node.call("eth_getStorageAt", json!([a(EMIT), "0x0", "latest"])).unwrap();
    assert_eq!(
        slot0,
        format!("0x{:064x}", before[&EMIT].1.get(&U256::ZERO).copied().unwrap_or_default())
    );
    assert_eq!(balance(&node, FUNDED), before[&FUNDED].0.balance);
}

// ---------------------------------------------------------------------------------------------
// Result shape
// ---------------------------------------------------------------------------------------------

#[test]
fn trace_only_when_asked() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, so) = simple_call();
    let res = trace(&node, json!([call, ["trace"], "latest", so]));
    assert!(res["trace"].as_array().is_some_and(|t| t.len() == 1), "{res}");
    assert_eq!(res["stateDiff"], Value::Null);
    assert_eq!(res["vmTrace"], Value::Null);
    assert_eq!(res["output"], word(42));
}

#[test]
fn state_diff_only_when_asked() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, so) = simple_call();
    let res = trace(&node, json!([call, ["stateDiff"], "latest", so]));
    assert_eq!(res["trace"], json!([]), "trace is [] when not asked");
    assert!(res["stateDiff"].is_object(), "{res}");
    // The sender's nonce moved: the diff has it.
    assert!(res["stateDiff"][a(FUNDED)]["nonce"]["*"].is_object(), "{res}");
    assert_eq!(res["vmTrace"], Value::Null);
    assert_eq!(res["output"], word(42));
}

#[test]
fn nothing_asked_gives_empty_shapes() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, so) = simple_call();
    let res = trace(&node, json!([call, [], "latest", so]));
    assert_eq!(
        res,
        json!({"output": word(42), "stateDiff": null, "trace": [], "vmTrace": null}),
        "output is always present"
    );
    // Duplicates are allowed.
    let res = trace(&node, json!([call, ["trace", "trace"], "latest", so]));
    assert_eq!(res["trace"].as_array().unwrap().len(), 1);
}

/// Seed rule 5: in a simple call `output == trace[0].result.output` and the root has
/// `traceAddress: []`.
#[test]
fn simple_call_output_equals_root_output() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, so) = simple_call();
    let res = trace(&node, json!([call, ["trace", "stateDiff"], "latest", so]));
    assert_eq!(res["output"], res["trace"][0]["result"]["output"]);
    assert_eq!(res["output"], word(42));
    assert_eq!(res["trace"][0]["traceAddress"], json!([]));
    assert_eq!(res["trace"][0]["subtraces"], 0);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[test]
fn vm_trace_refused_when_off() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, so) = simple_call();
    expect_error(
        &node,
        "trace_call",
        json!([call, ["vmTrace"], "latest", so]),
        -32602,
        "vmTrace is not supported",
    );
    expect_error(
        &node,
        "trace_call",
        json!([call, ["trace", "vmTrace"], "latest", so]),
        -32602,
        "vmTrace is not supported",
    );
}

/// With `--trace.vm-trace` the OpenEthereum vmTrace is served: the executed code and one op per
/// instruction of RET42: PUSH1 (pc 0, 3) PUSH1 (pc 2, 3) MSTORE (pc 4, 3 + 3 memory) PUSH1 (pc 5,
/// 3) PUSH1 (pc 7, 3) RETURN (pc 9, 0).
#[test]
fn vm_trace_served_when_on() {
    let Some(node) = Node::start(|cfg| cfg.vm_trace = true) else { return };
    let (call, so) = simple_call();
    let res = trace(&node, json!([call, ["vmTrace"], "latest", so]));
    let vm = &res["vmTrace"];
    assert!(vm.is_object(), "{res}");
    assert_eq!(vm["code"], RET42);
    let ops = vm["ops"].as_array().unwrap_or_else(|| panic!("no ops: {vm}"));
    let pcs: Vec<u64> = ops.iter().map(|o| o["pc"].as_u64().unwrap()).collect();
    assert_eq!(pcs, [0, 2, 4, 5, 7, 9]);
    let costs: Vec<u64> = ops.iter().map(|o| o["cost"].as_u64().unwrap()).collect();
    assert_eq!(costs, [3, 3, 6, 3, 3, 0]);
    assert_eq!(res["trace"], json!([]));
    assert_eq!(res["stateDiff"], Value::Null);
    // Not asked on a vmTrace-enabled node → null.
    let res = trace(&node, json!([call, ["trace"], "latest", so]));
    assert_eq!(res["vmTrace"], Value::Null);
}

#[test]
fn unknown_trace_type_is_named() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, _) = simple_call();
    expect_error_naming(&node, json!([call, ["trace", "callTracer"]]), -32602, &["callTracer"]);
    // Case-sensitive.
    expect_error_naming(&node, json!([call, ["StateDiff"]]), -32602, &["StateDiff"]);
}

#[test]
fn pending_is_refused() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, _) = simple_call();
    expect_error(
        &node,
        "trace_call",
        json!([call, ["trace"], "pending"]),
        -32602,
        "pending is not supported for tracing",
    );
}

#[test]
fn unknown_block_is_header_not_found() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, _) = simple_call();
    // Head is 54 = 0x36: 0x37 does not exist.
    expect_error(&node, "trace_call", json!([call, ["trace"], "0x37"]), -32000, "header not found");
    let unknown = format!("0x{}", "11".repeat(32));
    expect_error(
        &node,
        "trace_call",
        json!([call, ["trace"], unknown]),
        -32000,
        "header not found",
    );
    expect_error(
        &node,
        "trace_call",
        json!([call, ["trace"], {"blockHash": unknown}]),
        -32000,
        "header not found",
    );
}

/// A plain call needs 21,000 gas; 0x5207 = 20,999 is too low.
#[test]
fn intrinsic_gas_too_low() {
    let Some(node) = Node::start(|_| {}) else { return };
    let to = address!("9000000000000000000000000000000000000002");
    expect_error(
        &node,
        "trace_call",
        json!([{"from": a(FUNDED), "to": a(to), "gas": "0x5207"}, ["trace"]]),
        -32000,
        "intrinsic gas too low: have 20999, want 21000",
    );
    // 21,000 exactly is enough.
    let res = trace(&node, json!([{"from": a(FUNDED), "to": a(to), "gas": "0x5208"}, ["trace"]]));
    assert_eq!(res["trace"][0]["action"]["gas"], "0x0");
}

/// Priced calls must be affordable: want = gas × price + value (decimal in the message, worded
/// as behaviour.md §3.2: `have X, want Y`).
#[test]
fn insufficient_funds_for_priced_call() {
    let Some(node) = Node::start(|_| {}) else { return };
    let to = address!("9000000000000000000000000000000000000003");
    let unfunded = address!("9000000000000000000000000000000000000004");
    let chain = support::chain().unwrap();
    let st = chain.db.begin_read().unwrap().state_at(54).unwrap();
    assert!(st.account(&unfunded).unwrap().is_none());
    // Unfunded sender: have 0, want 21,000 × 10⁹ = 21,000,000,000,000.
    expect_error(
        &node,
        "trace_call",
        json!([{"from": a(unfunded), "to": a(to), "gas": "0x5208", "gasPrice": "0x3b9aca00"}, ["trace"]]),
        -32003,
        "insufficient funds for gas * price + value: have 0, want 21000000000000",
    );
    // Funded sender sending all its balance B: want = B + 21,000 × 10⁹.
    let b = st.account(&FUNDED).unwrap().unwrap().balance;
    assert_eq!(b, balance(&node, FUNDED));
    let want = b + U256::from(21_000_000_000_000u64);
    expect_error(
        &node,
        "trace_call",
        json!([{"from": a(FUNDED), "to": a(to), "gas": "0x5208", "gasPrice": "0x3b9aca00", "value": format!("{b:#x}")}, ["trace"]]),
        -32003,
        &format!("insufficient funds for gas * price + value: have {b}, want {want}"),
    );
}

#[test]
fn data_and_input_differ() {
    let Some(node) = Node::start(|_| {}) else { return };
    let to = address!("9000000000000000000000000000000000000005");
    let e = node
        .call("trace_call", json!([{"to": a(to), "data": "0x01", "input": "0x02"}, ["trace"]]))
        .unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("data") && msg.contains("input"), "{msg}");
    // Equal data and input are accepted.
    assert!(
        node.call("trace_call", json!([{"to": a(to), "data": "0x01", "input": "0x01"}, ["trace"]]))
            .is_ok()
    );
}

#[test]
fn unknown_call_field_is_named() {
    let Some(node) = Node::start(|_| {}) else { return };
    let to = address!("9000000000000000000000000000000000000006");
    expect_error_naming(
        &node,
        json!([{"to": a(to), "gasprice": "0x1"}, ["trace"]]),
        -32602,
        &["gasprice"],
    );
}

#[test]
fn state_and_state_diff_overrides_conflict() {
    let Some(node) = Node::start(|_| {}) else { return };
    let (call, _) = simple_call();
    let e = node
        .call(
            "trace_call",
            json!([call, ["trace"], "latest", {a(EMIT): {"state": {}, "stateDiff": {word(0): word(1)}}}]),
        )
        .unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
}

// ---------------------------------------------------------------------------------------------
// Protections
// ---------------------------------------------------------------------------------------------

/// An infinite loop with practically unlimited gas is stopped by the deadline: -32000
/// `execution timeout after 300ms` (Duration's Debug format), well within 2 s.
#[test]
fn infinite_loop_times_out() {
    let Some(node) = Node::start(|cfg| {
        cfg.call_timeout = Duration::from_millis(300);
        cfg.gas_cap = u64::MAX / 2;
    }) else {
        return;
    };
    let x = address!("9000000000000000000000000000000000000007");
    let started = Instant::now();
    expect_error(
        &node,
        "trace_call",
        json!([{"from": a(FUNDED), "to": a(x)}, ["trace", "stateDiff"], "latest", {a(x): {"code": LOOP}}]),
        -32000,
        "execution timeout after 300ms",
    );
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "took {took:?}");
}

/// 1 worker + 2 queue places: of 10 simultaneous slow calls (1 s each) at most 3 are admitted,
/// the others are refused at once with -32005 `too many tracing requests`.
#[test]
fn burst_beyond_pool_and_queue_is_refused_fast() {
    let Some(node) = Node::start(|cfg| {
        cfg.workers = 1;
        cfg.queue = 2;
        cfg.call_timeout = Duration::from_secs(1);
        cfg.gas_cap = u64::MAX / 2;
    }) else {
        return;
    };
    let x = address!("9000000000000000000000000000000000000008");
    let params =
        json!([{"from": a(FUNDED), "to": a(x)}, ["trace"], "latest", {a(x): {"code": LOOP}}]);
    let barrier = Barrier::new(10);
    let outcomes: Vec<(Duration, Result<Value, Value>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..10)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let t = Instant::now();
                    let r = node.call("trace_call", params.clone());
                    (t.elapsed(), r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rejected: Vec<_> =
        outcomes.iter().filter(|(_, r)| r.as_ref().is_err_and(|e| e["code"] == -32005)).collect();
    let accepted = outcomes.len() - rejected.len();
    assert!(
        rejected.len() >= 7 && accepted <= 3,
        "rejected {} accepted {accepted}: {outcomes:?}",
        rejected.len()
    );
    for (took, r) in &rejected {
        assert_eq!(r.as_ref().unwrap_err()["message"], "too many tracing requests");
        // Refused at once, well before the first slow call (1 s) ends.
        assert!(*took < Duration::from_millis(700), "rejection took {took:?}");
    }
    for (took, r) in
        outcomes.iter().filter(|(_, r)| !r.as_ref().is_err_and(|e| e["code"] == -32005))
    {
        let e = r.as_ref().expect_err("an infinite loop cannot succeed");
        assert_eq!(e["code"], -32000, "{e}");
        assert_eq!(e["message"], "execution timeout after 1s");
        assert!(*took >= Duration::from_secs(1), "admitted call took {took:?}");
    }
}

/// A short trace_call, eth_call or debug_traceCall runs on the server's thread within
/// `inline_budget`; one that does not fit runs again on the EVM pool. Either way the answer is the
/// one the pool alone gives, byte for byte: each call below, by the three methods (geth's opcode
/// logger, callTracer, prestateTracer and 4byteTracer for the last), is sent to a node with a
/// budget of 100 µs and to one with no inline execution (`inline_budget` zero), one by one and
/// then all in one batch. The calls
/// cover what stays inline (a transfer, the emit contract now and at block 10, a create nested 5
/// frames deep, a revert, state and block overrides, calls of the identity and ecrecover
/// precompiles) and what leaves it (a modexp call, memory past 16 KiB, an infinite loop under the
/// deadline, 200 nested frames), plus errors raised before execution.
#[test]
fn inline_calls_answer_as_the_pool_does() {
    let tweak = |cfg: &mut loupe::rpc::RpcConfig| {
        cfg.call_timeout = Duration::from_millis(300);
        cfg.gas_cap = u64::MAX / 2;
    };
    let Some(inline) = Node::start(|cfg| {
        tweak(cfg);
        cfg.inline_budget = Duration::from_micros(100);
    }) else {
        return;
    };
    let pooled = Node::start(|cfg| {
        tweak(cfg);
        cfg.inline_budget = Duration::ZERO;
    })
    .unwrap();
    let x = address!("900000000000000000000000000000000000000b");
    let both = json!(["trace", "stateDiff"]);
    // Init code nested 5 deep: PUSH2 len DUP1 PUSH2 17 PUSH1 0 CODECOPY PUSH1 0 PUSH1 0 CREATE
    // POP STOP, then the next level's init code; the innermost is STOP.
    let mut create = String::from("00");
    for _ in 1..5 {
        create = format!("61{:04x}8061001160003960006000f05000{create}", create.len() / 2);
    }
    // PUSH1 32 PUSH1 0 PUSH1 0 PUSH1 0 PUSH1 p GAS STATICCALL STOP: identity (4) stays
    // inline, modexp (5) leaves it.
    let precompile = |p: u8| format!("0x6020600060006000600{p}5afa00");
    // CALLDATACOPY(0, 0, 128); STATICCALL(gas, 1, 0, 128, 0, 32); RETURN(0, 32): ecrecover of
    // the call data, which stays inline.
    let ecrecover = "0x60806000600037602060006080600060015afa5060206000f3";
    // hash, v, r, s of a signature by a known key, which the precompile recovers.
    let signer = PrivateKeySigner::from_bytes(&B256::repeat_byte(7)).unwrap();
    let hash = B256::repeat_byte(0x42);
    let sig = signer.sign_hash_sync(&hash).unwrap();
    let v = 27 + u64::from(sig.v());
    let signature = format!("0x{hash:x}{v:064x}{:064x}{:064x}", sig.r(), sig.s());
    let ecrecover_eth_call =
        json!([{"to": a(x), "input": signature}, "latest", {a(x): {"code": ecrecover}}]);
    let recovered = inline.call("eth_call", ecrecover_eth_call).unwrap();
    assert_eq!(
        recovered,
        json!(format!("0x{:0>64}", format!("{:x}", signer.address()).trim_start_matches("0x")))
    );
    // PUSH1 1 PUSH2 0x8000 MSTORE8 STOP: memory past 32 KiB.
    let big_memory = "0x60016180005300";
    // CALLDATALOAD(0)=n; if n==0 stop; mem[0]=n-1; CALL(gas, self, 0, 0, 32, 0, 0).
    let recursive = "0x6000358015601d576001900360005260006000602060006000305af1505b00";
    let cases = [
        json!([{"from": a(FUNDED), "to": a(x), "value": "0x1"}, both, "latest"]),
        json!([{"from": a(FUNDED), "to": a(EMIT), "input": "0x12345678"}, both, "latest"]),
        json!([{"from": a(FUNDED), "to": a(EMIT), "input": "0x12345678"}, both, "0xa"]),
        json!([{"from": a(FUNDED), "input": format!("0x{create}")}, both, "latest"]),
        json!([{"from": a(FUNDED), "to": a(x)}, both, "latest", {a(x): {"code": "0x60006000fd"}}]),
        json!([{"from": a(FUNDED), "to": a(x)}, ["trace"], "latest", {a(x): {"code": RET42}}, {"number": "0x99"}]),
        json!([{"from": a(FUNDED), "to": a(x)}, both, "latest", {a(x): {"code": precompile(4)}}]),
        json!([{"from": a(FUNDED), "to": a(x)}, both, "latest", {a(x): {"code": precompile(5)}}]),
        json!([{"from": a(FUNDED), "to": a(x), "input": signature}, both, "latest", {a(x): {"code": ecrecover}}]),
        json!([{"from": a(FUNDED), "to": a(x)}, both, "latest", {a(x): {"code": big_memory}}]),
        json!([{"from": a(FUNDED), "to": a(x), "input": word(200)}, ["trace"], "latest", {a(x): {"code": recursive}}]),
        json!([{"from": a(FUNDED), "to": a(x)}, both, "latest", {a(x): {"code": LOOP}}]),
        json!([{"from": a(FUNDED), "to": a(x), "gas": "0x5207"}, both, "latest"]),
        json!([{"from": a(x), "to": a(FUNDED), "value": "0x1", "gasPrice": "0x1"}, both, "latest"]),
        json!([{"from": a(FUNDED), "to": a(x)}, both, "0x99999"]),
    ];
    let mut batch = Vec::new();
    for (k, params) in cases.into_iter().enumerate() {
        let p = params.as_array().unwrap().clone();
        // The same call as `eth_call`: its params without the trace types.
        let mut eth = p.clone();
        eth.remove(1);
        let mut methods = vec![("trace_call", params), ("eth_call", Value::Array(eth))];
        // And as `debug_traceCall` with geth's tracers, the overrides in its options. The
        // opcode logger records every step, so it skips the loop that only the deadline ends.
        let mut tracers = vec![
            json!({"tracer": "callTracer", "tracerConfig": {"withLog": true}}),
            json!({"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}}),
            json!({"tracer": "4byteTracer"}),
        ];
        if k != 11 {
            tracers.push(json!({"enableMemory": true}));
        }
        for mut opts in tracers {
            if let Some(o) = p.get(3) {
                opts["stateOverrides"] = o.clone();
            }
            if let Some(o) = p.get(4) {
                opts["blockOverrides"] = o.clone();
            }
            methods.push(("debug_traceCall", json!([p[0], p[2], opts])));
        }
        for (method, params) in methods {
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
            let (got, want) =
                (inline.post_raw(body.to_string()), pooled.post_raw(body.to_string()));
            assert_eq!(got, want, "{method} {params}");
            // The first eleven calls succeed (but for the revert as eth_call); the last four
            // are refused or time out.
            // (The text, not a parse: 200 nested frames are past serde_json's depth.)
            let ok = k < 11 && !(k == 4 && method == "eth_call");
            assert_eq!(!got.1.contains(r#""error":{"#), ok, "{method} {params}: {}", got.1);
            batch.push(
                json!({"jsonrpc": "2.0", "id": batch.len(), "method": method, "params": params}),
            );
        }
    }
    // All of them in one batch, which gives the thread back between the calls it runs inline.
    let body = Value::Array(batch).to_string();
    assert_eq!(inline.post_raw(body.clone()), pooled.post_raw(body));
}

/// A node with inline calls on (100 µs), one EVM worker and `queue` places to wait in, a
/// deadline of 1 s and no gas cap to speak of.
fn one_inline_worker(queue: usize) -> Option<Node> {
    Node::start(|cfg| {
        cfg.inline_budget = Duration::from_micros(100);
        cfg.workers = 1;
        cfg.queue = queue;
        cfg.call_timeout = Duration::from_secs(1);
        cfg.gas_cap = u64::MAX / 2;
    })
}

/// `trace_call` params of an infinite loop at `x` (a state override), which only the deadline
/// ends.
fn endless_call(x: Address) -> Value {
    json!([{"from": a(FUNDED), "to": a(x)}, ["trace"], "latest", {a(x): {"code": LOOP}}])
}

/// A call that could run inline still needs a place in the EVM pool: with the one worker busy
/// and no queue, a short trace_call is refused at once with -32005, as it was before inline
/// execution; once the place is free it is answered.
#[test]
fn a_full_pool_refuses_short_calls_too() {
    let Some(node) = one_inline_worker(0) else { return };
    let slow = endless_call(address!("900000000000000000000000000000000000000c"));
    let short = json!([{"from": a(FUNDED), "to": a(EMIT), "input": "0x01"}, ["trace"], "latest"]);
    std::thread::scope(|s| {
        let held = s.spawn(|| node.call("trace_call", slow.clone()));
        std::thread::sleep(Duration::from_millis(300));
        let e = node.call("trace_call", short.clone()).unwrap_err();
        assert_eq!(e["code"], -32005, "{e}");
        assert_eq!(e["message"], "too many tracing requests");
        assert_eq!(held.join().unwrap().unwrap_err()["message"], "execution timeout after 1s");
    });
    assert_eq!(trace(&node, short)["trace"][0]["action"]["to"], a(EMIT));
}

/// A call longer than the inline budget runs on the EVM pool, never on the server's threads:
/// with one worker and one queue place, a second infinite loop waits in the queue for the
/// first (it ends after both deadlines, near 2 s, not after one), and while both run the
/// server still answers a point read at once.
#[test]
fn a_long_call_goes_to_the_pool() {
    let Some(node) = one_inline_worker(1) else { return };
    let slow = endless_call(address!("900000000000000000000000000000000000000d"));
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let first = s.spawn(|| node.call("trace_call", slow.clone()));
        std::thread::sleep(Duration::from_millis(200));
        let second = s.spawn(|| {
            let r = node.call("trace_call", slow.clone());
            (t0.elapsed(), r)
        });
        std::thread::sleep(Duration::from_millis(200));
        let asked = Instant::now();
        assert_eq!(node.call("eth_blockNumber", json!([])).unwrap(), "0x36");
        let read = asked.elapsed();
        assert!(read < Duration::from_millis(250), "a point read took {read:?} beside two loops");
        assert_eq!(first.join().unwrap().unwrap_err()["message"], "execution timeout after 1s");
        let (ended, r) = second.join().unwrap();
        assert_eq!(r.unwrap_err()["message"], "execution timeout after 1s");
        assert!(ended >= Duration::from_millis(1900), "the second loop ended at {ended:?}");
    });
}

// ---------------------------------------------------------------------------------------------
// eth_call
// ---------------------------------------------------------------------------------------------

/// eth_call reverts are code 3 with the raw revert data (trace_call reports them in the trace).
#[test]
fn eth_call_revert_is_code_3_with_data() {
    let Some(node) = Node::start(|_| {}) else { return };
    let x = address!("9000000000000000000000000000000000000009");
    // PUSH2 0xdead PUSH1 0 MSTORE PUSH1 2 PUSH1 30 REVERT → revert data 0xdead (undecodable).
    let so = json!({a(x): {"code": "0x61dead6000526002601efd"}});
    let e = node
        .call("eth_call", json!([{"from": a(FUNDED), "to": a(x), "gas": "0x186a0"}, "latest", so]))
        .unwrap_err();
    assert_eq!(e, json!({"code": 3, "message": "execution reverted", "data": "0xdead"}));
    // The same call traced: no JSON-RPC error, the revert is in the trace.
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(x), "gas": "0x186a0"}, ["trace"], "latest", so]),
    );
    assert_eq!(res["trace"][0]["error"], "Reverted");
    assert_eq!(res["output"], "0xdead");

    // Fixture call-revert-abi-error.io: Error("user error") → reason in the message, the
    // contract's raw revert bytes as data (compared with the fixture's expected error).
    let fixture = support::fixtures().unwrap().join("eth_call/call-revert-abi-error.io");
    let text = std::fs::read_to_string(fixture).unwrap();
    let line = |p: &str| -> Value {
        serde_json::from_str(text.lines().find_map(|l| l.strip_prefix(p)).unwrap().trim()).unwrap()
    };
    let (req, resp) = (line(">>"), line("<<"));
    let e = node.call("eth_call", req["params"].clone()).unwrap_err();
    assert_eq!(e, resp["error"]);
    assert_eq!(e["code"], 3);
    assert!(e["data"].as_str().unwrap().starts_with("0x08c379a0"), "Error(string) selector");
}

/// "A dropped client connection cancels its queued call" (behaviour.md §3.2). One worker, two
/// queue places, calls that take the 1 s deadline: A runs (0–1 s); B is queued at 0.1 s and its
/// client gives up at 0.4 s; C is queued at 0.5 s. If B was cancelled, C runs 1–2 s; if B still
/// ran (1–2 s), C would end near 3 s.
#[test]
fn dropped_client_cancels_queued_call() {
    let Some(node) = Node::start(|cfg| {
        cfg.workers = 1;
        cfg.queue = 2;
        cfg.call_timeout = Duration::from_secs(1);
        cfg.gas_cap = u64::MAX / 2;
    }) else {
        return;
    };
    let x = address!("900000000000000000000000000000000000000a");
    let params =
        json!([{"from": a(FUNDED), "to": a(x)}, ["trace"], "latest", {a(x): {"code": LOOP}}]);
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "trace_call", "params": params}).to_string();
    let t0 = Instant::now();
    let (b_result, c_end, c_result) = std::thread::scope(|s| {
        let a_handle = s.spawn(|| node.call("trace_call", params.clone()));
        std::thread::sleep(Duration::from_millis(100));
        let b_handle = s.spawn(|| {
            let impatient = reqwest::blocking::Client::builder()
                .timeout(Duration::from_millis(300))
                .build()
                .unwrap();
            impatient
                .post(&node.url)
                .header("Content-Type", "application/json")
                .body(body.clone())
                .send()
                .map(|r| r.status().as_u16())
        });
        std::thread::sleep(Duration::from_millis(400));
        let c_handle = s.spawn(|| {
            let r = node.call("trace_call", params.clone());
            (t0.elapsed(), r)
        });
        let a_result = a_handle.join().unwrap();
        assert_eq!(a_result.unwrap_err()["message"], "execution timeout after 1s");
        let b = b_handle.join().unwrap();
        let (c_end, c) = c_handle.join().unwrap();
        (b, c_end, c)
    });
    assert!(b_result.is_err(), "B's client must have given up: {b_result:?}");
    assert_eq!(c_result.unwrap_err()["message"], "execution timeout after 1s");
    assert!(
        c_end < Duration::from_millis(2600),
        "C ended at {c_end:?}: the abandoned call B still ran"
    );
}

/// Gas above the cap is lowered to it: root gas = cap − 21,000 (behaviour.md §3.1).
#[test]
fn gas_above_cap_is_lowered() {
    let Some(node) = Node::start(|cfg| cfg.gas_cap = 1_000_000) else { return };
    let (mut call, so) = simple_call();
    call["gas"] = json!("0xffffffffffff");
    let res = trace(&node, json!([call, ["trace"], "latest", so]));
    assert_eq!(res["trace"][0]["action"]["gas"], format!("{:#x}", 1_000_000 - 21_000));
    // No gas given → the cap.
    call.as_object_mut().unwrap().remove("gas");
    let res = trace(&node, json!([call, ["trace"], "latest", so]));
    assert_eq!(res["trace"][0]["action"]["gas"], format!("{:#x}", 1_000_000 - 21_000));
}

// ---------------------------------------------------------------------------------------------
// behaviour.md §3.2: the fee-cap-vs-base-fee check is off
// ---------------------------------------------------------------------------------------------

fn quantity(v: &Value) -> U256 {
    U256::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// The balance change of `x` in a stateDiff (zero when `x` is absent or unchanged).
fn balance_change(diff: &Value, x: Address) -> (U256, U256) {
    let b = &diff[a(x)]["balance"];
    if let Some(c) = b.get("*") {
        (quantity(&c["from"]), quantity(&c["to"]))
    } else if let Some(born) = b.get("+") {
        (U256::ZERO, quantity(born))
    } else {
        (U256::ZERO, U256::ZERO)
    }
}

/// A fee cap below the block's base fee (read from the header) is accepted by every call
/// method and charged like a mined transaction at the effective price min(cap, base fee + tip)
/// = the cap; the coinbase is paid only the part of the price above the base fee, so nothing.
/// A plain transfer uses exactly 21,000 gas, so the sender pays 21,000 × price. A cap above the
/// base fee still pays base fee + tip, the tip to the coinbase.
#[test]
fn fee_cap_below_base_fee_is_charged_the_cap() {
    let Some(node) = Node::start(|_| {}) else { return };
    let head = node.call("eth_getBlockByNumber", json!(["latest", false])).unwrap();
    let base = quantity(&head["baseFeePerGas"]);
    let coinbase: Address = serde_json::from_value(head["miner"].clone()).unwrap();
    assert!(base > U256::from(10), "block 54 has a base fee: {base}");
    let to = address!("9000000000000000000000000000000000000008");
    assert_ne!(coinbase, FUNDED);
    let cap = base / U256::from(2);
    let tip = U256::from(3);
    let hex = |v: U256| format!("{v:#x}");
    // (fee fields, effective price).
    let cases = [
        (json!({"maxFeePerGas": hex(cap)}), cap),
        (json!({"maxFeePerGas": hex(cap), "maxPriorityFeePerGas": hex(tip)}), cap),
        (json!({"gasPrice": hex(cap)}), cap),
        (
            json!({"maxFeePerGas": hex(base * U256::from(2)), "maxPriorityFeePerGas": hex(tip)}),
            base + tip,
        ),
    ];
    for (fees, price) in cases {
        let mut call = json!({"from": a(FUNDED), "to": a(to), "gas": "0x5208"});
        call.as_object_mut().unwrap().extend(fees.as_object().unwrap().clone());
        let res = trace(&node, json!([call, ["stateDiff"], "latest"]));
        let diff = &res["stateDiff"];
        let (from, after) = balance_change(diff, FUNDED);
        assert_eq!(from - after, U256::from(21_000) * price, "{call}: {diff}");
        let (cb_from, cb_to) = balance_change(diff, coinbase);
        let paid = price.saturating_sub(base);
        assert_eq!(cb_to - cb_from, U256::from(21_000) * paid, "{call}: {diff}");
        // The other call methods take the same call.
        assert_eq!(node.call("eth_call", json!([call, "latest"])).unwrap(), "0x", "{call}");
        assert_eq!(node.call("eth_estimateGas", json!([call, "latest"])).unwrap(), "0x5208");
        let list = node.call("eth_createAccessList", json!([call, "latest"])).unwrap();
        assert_eq!(list["gasUsed"], "0x5208", "{call}: {list}");
        let geth = node
            .call("debug_traceCall", json!([call, "latest", {"tracer": "callTracer"}]))
            .unwrap();
        assert_eq!(geth["gasUsed"], "0x5208", "{call}: {geth}");
        let many = node.call("trace_callMany", json!([[[call, ["stateDiff"]]], "latest"])).unwrap();
        assert_eq!(many[0]["stateDiff"], *diff, "{call}");
    }
    // A tip above the cap is still refused.
    let call = json!({"from": a(FUNDED), "to": a(to), "maxFeePerGas": "0x1", "maxPriorityFeePerGas": "0x2"});
    let e = node.call("trace_call", json!([call, ["trace"]])).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("priority fee"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// behaviour.md §3.1: an override is applied or refused, never accepted and ignored
// ---------------------------------------------------------------------------------------------

/// NUMBER PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN → word(block number).
const RET_NUMBER: &str = "0x4360005260206000f3";

/// An unknown `blockOverrides` key is -32602 naming it in every call method, as is an unknown
/// key of a state override entry; a known key (and its alias) is applied: the code returning
/// NUMBER sees the overridden number.
#[test]
fn unknown_override_keys_are_refused_and_known_ones_applied() {
    let Some(node) = Node::start(|_| {}) else { return };
    let x = address!("9000000000000000000000000000000000000009");
    let call = json!({"from": a(FUNDED), "to": a(x), "gas": "0x186a0"});
    let code = json!({a(x): {"code": RET_NUMBER}});
    for key in ["number", "blockNumber"] {
        let res = trace(&node, json!([call, ["trace"], "latest", code, {key: "0x99"}]));
        assert_eq!(res["output"], word(0x99), "{key}");
    }
    let head = trace(&node, json!([call, ["trace"], "latest", code]));
    assert_eq!(head["output"], word(54));

    let typo = json!({"numbr": "0x99"});
    let named = |e: Value, what: &str| {
        assert_eq!(e["code"], -32602, "{what}: {e}");
        assert!(e["message"].as_str().unwrap().contains("\"numbr\""), "{what}: {e}");
    };
    named(
        node.call("trace_call", json!([call, ["trace"], "latest", code, typo])).unwrap_err(),
        "trace_call",
    );
    for m in ["eth_call", "eth_estimateGas", "eth_createAccessList"] {
        named(node.call(m, json!([call, "latest", code, typo])).unwrap_err(), m);
    }
    let opts = json!({"tracer": "callTracer", "stateOverrides": code, "blockOverrides": typo});
    named(node.call("debug_traceCall", json!([call, "latest", opts])).unwrap_err(), "debug");
    let sim = json!({"blockStateCalls": [{"calls": []}, {"blockOverrides": typo, "calls": []}]});
    let e = node.call("eth_simulateV1", json!([sim, "latest"])).unwrap_err();
    named(e.clone(), "eth_simulateV1");
    assert!(e["message"].as_str().unwrap().contains("blockStateCalls[1]"), "{e}");
    // A beacon root cannot reach a call (no system call runs): refused as geth refuses it.
    let root = json!({"beaconRoot": format!("0x{}", "11".repeat(32))});
    let e = node.call("eth_call", json!([call, "latest", code, root])).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("\"beaconRoot\" is not supported"), "{e}");
    // State override entries: an unknown key is named too.
    let e = node
        .call("trace_call", json!([call, ["trace"], "latest", {a(x): {"balanc": "0x1"}}]))
        .unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("balanc"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Deadlines and tags of the other trace methods
// ---------------------------------------------------------------------------------------------

/// `trace_callMany` runs all its calls under one deadline: when it fires during a later call,
/// the message names that deadline (the configured one), not what was left of it.
#[test]
fn call_many_timeout_names_the_batch_deadline() {
    let Some(node) = Node::start(|cfg| {
        cfg.call_timeout = Duration::from_millis(700);
        cfg.gas_cap = u64::MAX / 2;
    }) else {
        return;
    };
    // The first call loops until its 3,000,000 gas run out, the second until the deadline.
    let short = json!({"from": a(FUNDED), "data": LOOP, "gas": "0x2dc6c0"});
    let endless = json!({"from": a(FUNDED), "data": LOOP});
    expect_error(
        &node,
        "trace_callMany",
        json!([[[short, ["trace"]], [endless, ["trace"]]], "latest"]),
        -32000,
        "execution timeout after 700ms",
    );
}

/// `pending` is refused by `trace_filter` as by `trace_call` (behaviour.md §3.1): this node
/// builds no pending block to trace.
#[test]
fn trace_filter_refuses_pending() {
    let Some(node) = Node::start(|_| {}) else { return };
    for key in ["fromBlock", "toBlock"] {
        let e = node.call("trace_filter", json!([{key: "pending"}])).unwrap_err();
        assert_eq!(e["code"], -32602, "{e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(key) && msg.contains("pending is not supported for tracing"), "{e}");
    }
    assert!(node.call("trace_filter", json!([{"fromBlock": "latest"}])).is_ok());
}
