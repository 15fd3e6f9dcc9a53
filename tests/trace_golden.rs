//! Golden `trace_call` results (`../shared/spec/behaviour.md` §3, dossier §2).
//!
//! Every expected value is derived independently of loupe's tracer: from the EVM gas schedule of
//! the fork active at the block (block N has timestamp 10·N in the fixture chain, so Shanghai is
//! block 39, Cancun 42, Prague 45, Osaka 48; blocks 27–41 are London rules), from bytecode
//! assembled here by hand (each opcode and its cost in a comment), from the execution-apis
//! fixtures, or from a second read path of the node (`eth_call`, `eth_getBalance`,
//! `eth_getStorageAt`, `eth_getTransactionCount`, the storage layer). Nothing is pasted from
//! loupe's own `trace_call` output.
//!
//! Gas costs used (Berlin and later unless noted): 3 for PUSHn (n ≥ 1), DUPn, ADD, ISZERO and
//! the base of MSTORE/MSTORE8; 2 for PUSH0, POP, ADDRESS, CALLDATASIZE, NUMBER, TIMESTAMP,
//! COINBASE, BASEFEE, PREVRANDAO, GASLIMIT; SELFBALANCE 5; JUMP 8, JUMPI 10, JUMPDEST 1; memory
//! 3·words + words²/512 (charged on growth); cold account 2600, warm 100; value transfer 9000
//! (+2300 stipend for the callee, returned to the caller with the callee's unused gas); new
//! account 25000; SELFDESTRUCT 5000; cold SLOAD 2100; SSTORE set 20000 / reset 2900 (+2100 when
//! the slot is cold); LOG 375 + 375·topics + 8·bytes; SHA3 30 + 6·words; CALLDATACOPY 3 +
//! 3·words; identity precompile 15 + 3·words; code deposit 200 per byte. Intrinsic: 21000
//! (53000 for a create, + 2 per initcode word), calldata 4 per zero byte and 16 per non-zero
//! byte (68 before Istanbul, block 18).
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeSet;

use alloy_consensus::Transaction as _;
use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256, address, hex, keccak256};
use serde_json::{Value, json};
use support::Node;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A genesis-funded account that sends no transaction in the fixture chain.
const FUNDED: Address = address!("14e46043e63d0e3cdcf2530519f4cfaf35058cb2");
/// The fixture's emit contract (genesis alloc), disassembled in `storage_write_*`.
const EMIT: Address = address!("7dcd17433742f4c0ca53122ab541d0ba67fc27df");
/// The fixture's callenv contract (created in block 1).
const CALLENV: Address = address!("9344b07175800259691961298ca11c824e65032d");
/// The EIP-7702 delegated account of the fixture chain (delegates to 0x8c23…9561).
const DELEGATED: Address = address!("eda8645ba6948855e3b3cd596bbb07596d59c603");
/// Identity precompile.
const IDENTITY: Address = address!("0000000000000000000000000000000000000004");

/// Gas the tests pass explicitly unless noted.
const GAS: u64 = 100_000;

fn node() -> Option<Node> {
    Node::start(|_| {})
}

fn a(x: Address) -> String {
    format!("{x:#x}")
}

/// Hex quantity.
fn q(n: u64) -> String {
    format!("{n:#x}")
}

fn qu(n: U256) -> String {
    format!("{n:#x}")
}

/// 32-byte word holding `n`.
fn word(n: u64) -> String {
    format!("0x{n:064x}")
}

fn word_u(n: U256) -> String {
    format!("{:#x}", B256::from(n))
}

fn word_addr(x: Address) -> String {
    format!("0x{}{}", "0".repeat(24), hex::encode(x))
}

/// PUSH1 v.
fn push1(v: u8) -> String {
    format!("60{v:02x}")
}

/// PUSH2 v.
fn push2(v: u16) -> String {
    format!("61{v:04x}")
}

/// PUSH20 address.
fn push20(x: Address) -> String {
    format!("73{}", hex::encode(x))
}

/// The operand pushes and the opcode of a call-family instruction: PUSH1 retSize, PUSH1
/// retOffset, PUSH1 argsSize, PUSH1 argsOffset, [PUSH1 value], PUSH20 to, PUSH2 gas, op.
/// Pushes cost 7·3 = 21 gas with a value operand (CALL, CALLCODE), 6·3 = 18 without
/// (DELEGATECALL, STATICCALL).
fn call_op(
    op: u8,
    to: Address,
    gas: u16,
    value: Option<u8>,
    args: (u8, u8),
    ret: (u8, u8),
) -> String {
    let mut s = String::new();
    s += &push1(ret.1);
    s += &push1(ret.0);
    s += &push1(args.1);
    s += &push1(args.0);
    if let Some(v) = value {
        s += &push1(v);
    }
    s += &push20(to);
    s += &push2(gas);
    s += &format!("{op:02x}");
    s
}

fn code(body: impl AsRef<str>) -> String {
    format!("0x{}", body.as_ref())
}

/// Calldata gas after Istanbul: 4 per zero byte, 16 per non-zero byte.
fn calldata_gas(data: &[u8]) -> u64 {
    data.iter().map(|b| if *b == 0 { 4 } else { 16 }).sum()
}

fn trace(node: &Node, params: Value) -> Value {
    node.call("trace_call", params.clone())
        .unwrap_or_else(|e| panic!("trace_call {params} failed: {e}"))
}

fn parse_u256(v: &Value) -> U256 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    U256::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn balance(node: &Node, x: Address, block: &str) -> U256 {
    parse_u256(&node.call("eth_getBalance", json!([a(x), block])).unwrap())
}

fn nonce(node: &Node, x: Address, block: &str) -> u64 {
    parse_u256(&node.call("eth_getTransactionCount", json!([a(x), block])).unwrap()).to::<u64>()
}

fn storage(node: &Node, x: Address, slot: &str, block: &str) -> String {
    node.call("eth_getStorageAt", json!([a(x), slot, block])).unwrap().as_str().unwrap().to_string()
}

/// Asserts that `x` does not exist in the stored state after `block` (storage-layer read).
fn assert_fresh(x: Address, block: u64) {
    let chain = support::chain().unwrap();
    let acc = chain.db.begin_read().unwrap().state_at(block).unwrap().account(&x).unwrap();
    assert!(acc.is_none(), "{x} must not exist at block {block}: {acc:?}");
}

/// `stateDiff` entry of an account whose nonce went from `n` to `n + 1` and nothing else.
fn sender_nonce_only(n: u64) -> Value {
    json!({"balance": "=", "code": "=", "nonce": {"*": {"from": q(n), "to": q(n + 1)}}, "storage": {}})
}

fn changed(from: String, to: String) -> Value {
    json!({"*": {"from": from, "to": to}})
}

/// A call-type trace entry.
#[allow(clippy::too_many_arguments)]
fn call_entry(
    call_type: &str,
    from: Address,
    to: Address,
    gas: u64,
    input: &str,
    value: &str,
    result: Value,
    subtraces: usize,
    trace_address: &[usize],
) -> Value {
    json!({
        "action": {"callType": call_type, "from": a(from), "gas": q(gas), "input": input,
                   "to": a(to), "value": value},
        "result": result,
        "subtraces": subtraces,
        "traceAddress": trace_address,
        "type": "call",
    })
}

fn ok(gas_used: u64, output: &str) -> Value {
    json!({"gasUsed": q(gas_used), "output": output})
}

/// Compares a trace entry with the expectation, accepting an extra `creationMethod: "create"`
/// on create actions (reth/alloy add it; behaviour.md lists from/gas/init/value).
fn assert_entry(got: &Value, want: &Value, what: &str) {
    let mut got = got.clone();
    if got["type"] == "create"
        && let Some(action) = got.get_mut("action").and_then(Value::as_object_mut)
        && let Some(m) = action.remove("creationMethod")
    {
        assert_eq!(m, "create", "{what}: creationMethod");
    }
    assert_eq!(got, *want, "{what}\n got: {got:#}\nwant: {want:#}");
}

fn assert_traces(res: &Value, want: &[Value], what: &str) {
    let got = res["trace"].as_array().unwrap_or_else(|| panic!("{what}: no trace array in {res}"));
    assert_eq!(got.len(), want.len(), "{what}: trace length; got {got:#?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_entry(g, w, &format!("{what}: trace[{i}]"));
    }
}

fn assert_state_diff(res: &Value, want: Value, what: &str) {
    assert_eq!(
        res["stateDiff"], want,
        "{what}: stateDiff\n got: {:#}\nwant: {want:#}",
        res["stateDiff"]
    );
}

fn both() -> Value {
    json!(["trace", "stateDiff"])
}

// ---------------------------------------------------------------------------------------------
// Value transfer
// ---------------------------------------------------------------------------------------------

/// A plain value transfer from a funded account to a fresh address, no gas given (gas = cap
/// 50,000,000), zero price.
#[test]
fn value_transfer_to_fresh_address() {
    let Some(node) = node() else { return };
    let to = address!("1000000000000000000000000000000000000001");
    assert_fresh(to, 54);
    let (b, n) = (balance(&node, FUNDED, "latest"), nonce(&node, FUNDED, "latest"));
    let value = U256::from(0x1234u64);
    let res = trace(&node, json!([{"from": a(FUNDED), "to": a(to), "value": qu(value)}, both()]));

    assert_eq!(res["output"], "0x");
    assert_eq!(res["vmTrace"], Value::Null);
    // Root gas = cap 50,000,000 − 21,000 intrinsic (no calldata); no code runs: gasUsed 0.
    assert_traces(
        &res,
        &[call_entry("call", FUNDED, to, 50_000_000 - 21_000, "0x", "0x1234", ok(0, "0x"), 0, &[])],
        "transfer",
    );
    // Recipient born: `+` for balance, nonce, code. Zero price: the sender loses exactly the
    // value (balances from eth_getBalance), its nonce goes up by one. No coinbase entry.
    assert_state_diff(
        &res,
        json!({
            a(to): {"balance": {"+": "0x1234"}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}},
            a(FUNDED): {"balance": changed(qu(b), qu(b - value)), "code": "=",
                        "nonce": changed(q(n), q(n + 1)), "storage": {}},
        }),
        "transfer",
    );
}

// ---------------------------------------------------------------------------------------------
// Every contract of the fixture chain
// ---------------------------------------------------------------------------------------------

/// eth_call's halt messages (geth wording) → OpenEthereum wording (geth's flatCallTracer table).
fn parity_error_of(eth_call_message: &str) -> Option<&'static str> {
    let m = eth_call_message;
    if m == "out of gas" {
        Some("Out of gas")
    } else if m.starts_with("invalid opcode") {
        Some("Bad instruction")
    } else if m == "invalid jump destination" {
        Some("Bad jump destination")
    } else if m.starts_with("stack underflow") {
        Some("Stack underflow")
    } else if m.starts_with("stack limit reached") {
        Some("Out of stack")
    } else {
        None
    }
}

/// Calls every account with code at block 54 (which includes every contract created by a
/// transaction of chain.rlp: checked against the creation transactions) with `["trace"]`, and
/// compares with `eth_call` of the same call (second path): success → same output, no error;
/// revert → error "Reverted" and the revert data as output; halt → the OE wording of the halt,
/// `result: null`, output `0x`. Root shape: gas = 1,000,000 − 21,000 (empty input).
#[test]
fn every_fixture_contract_matches_eth_call() {
    let Some(node) = node() else { return };
    let chain = support::chain().unwrap();
    let r = chain.db.begin_read().unwrap();
    let state = r.state_at(54).unwrap();
    let with_code: BTreeSet<Address> = state
        .dump()
        .unwrap()
        .into_iter()
        .filter(|(_, (acc, _))| acc.code_hash != KECCAK256_EMPTY && !acc.code_hash.is_zero())
        .map(|(addr, _)| addr)
        .collect();

    // Second source: addresses created by the transactions of chain.rlp (sender, nonce).
    let mut created = BTreeSet::new();
    for n in 1..=54 {
        for t in r.transactions(n).unwrap() {
            if t.tx.to().is_none() {
                let addr = t.sender.create(t.tx.nonce());
                if state.account(&addr).unwrap().is_some_and(|acc| acc.has_code()) {
                    created.insert(addr);
                }
            }
        }
    }
    assert!(!created.is_empty(), "chain.rlp creates contracts");
    assert!(
        created.is_subset(&with_code),
        "created contracts missing from dump: {:?}",
        created.difference(&with_code).collect::<Vec<_>>()
    );
    for fixture_contract in [
        CALLENV,
        EMIT,
        DELEGATED,
        address!("17e7eedce4ac02ef114a7ed9fe6e2f33feba1667"),
        address!("0ee3ab1371c93e7c0c281cc0c2107cdebc8b1930"),
    ] {
        assert!(with_code.contains(&fixture_contract), "{fixture_contract} has code at 54");
    }

    let gas = 1_000_000u64;
    let mut failures = Vec::new();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for addr in &with_code {
        let call = json!({"from": a(Address::ZERO), "to": a(*addr), "gas": q(gas)});
        let eth = node.call("eth_call", json!([call, "latest"]));
        let res = trace(&node, json!([call, ["trace"], "latest"]));
        let root = &res["trace"][0];
        let action = json!({"callType": "call", "from": a(Address::ZERO), "gas": q(gas - 21_000),
                            "input": "0x", "to": a(*addr), "value": "0x0"});
        if root["action"] != action || root["traceAddress"] != json!([]) || root["type"] != "call" {
            failures.push(format!("{addr}: root shape {root}"));
            continue;
        }
        let n_sub = root["subtraces"].as_u64().unwrap_or(u64::MAX);
        let direct = res["trace"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["traceAddress"].as_array().is_some_and(|ta| ta.len() == 1))
            .count() as u64;
        if n_sub != direct {
            failures.push(format!("{addr}: subtraces {n_sub} but {direct} direct children"));
        }
        let kind = match &eth {
            Ok(_) => "success".to_string(),
            Err(e) if e["code"] == 3 => "revert".to_string(),
            Err(e) => format!("halt: {}", e["message"]),
        };
        *kinds.entry(kind).or_default() += 1;
        match eth {
            Ok(out) => {
                if res["output"] != out
                    || root["result"]["output"] != out
                    || root.get("error").is_some()
                {
                    failures.push(format!("{addr}: eth_call {out} vs trace {res}"));
                }
            }
            Err(e) if e["code"] == 3 => {
                let data = e["data"].clone();
                if res["output"] != data
                    || root["error"] != "Reverted"
                    || root["result"]["output"] != data
                {
                    failures.push(format!("{addr}: eth_call revert {e} vs trace {res}"));
                }
            }
            Err(e) => {
                let msg = e["message"].as_str().unwrap_or_default();
                let want = parity_error_of(msg);
                let err_ok = match want {
                    Some(w) => root["error"] == w,
                    None => root["error"].is_string(),
                };
                if !err_ok || root["result"] != Value::Null || res["output"] != "0x" {
                    failures.push(format!("{addr}: eth_call error {e} vs trace {res}"));
                }
            }
        }
    }
    println!("{} contracts: {kinds:?}", with_code.len());
    assert!(kinds.contains_key("success") && kinds.contains_key("revert"), "{kinds:?}");
    assert!(
        failures.is_empty(),
        "{} of {} contracts differ:\n{}",
        failures.len(),
        with_code.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Creation with the four call kinds
// ---------------------------------------------------------------------------------------------

/// A creation whose init code makes CALL, DELEGATECALL, STATICCALL and CALLCODE into a contract
/// installed by override; then returns the one-byte runtime code 0xfe.
#[test]
fn create_with_four_call_kinds() {
    let Some(node) = node() else { return };
    let target = address!("2000000000000000000000000000000000000001");
    assert_fresh(target, 54);
    // Target: PUSH1 0x2a (3) PUSH1 0 (3) MSTORE (3 + 3 memory) PUSH1 0x20 (3) PUSH1 0 (3)
    // RETURN (0) → returns word(42), 18 gas, in any context.
    let target_code = code("602a60005260206000f3");
    let init_hex = [
        call_op(0xf1, target, 0x1000, Some(0), (0, 0), (0, 0)), // CALL
        "50".into(),                                            // POP
        call_op(0xf4, target, 0x1000, None, (0, 0), (0, 0)),    // DELEGATECALL
        "50".into(),
        call_op(0xfa, target, 0x1000, None, (0, 0), (0, 0)), // STATICCALL
        "50".into(),
        call_op(0xf2, target, 0x1000, Some(0), (0, 0), (0, 0)), // CALLCODE
        "50".into(),
        // PUSH1 0xfe, PUSH1 0, MSTORE8 (3 + 3 memory), PUSH1 1, PUSH1 0, RETURN → code 0xfe.
        "60fe600053".to_owned() + "60016000f3",
    ]
    .concat();
    let init = hex::decode(&init_hex).unwrap();
    let n = nonce(&node, FUNDED, "latest");
    // Created address: keccak(rlp(sender, nonce))[12:].
    let created = FUNDED.create(n);
    assert_fresh(created, 54);

    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "gas": q(1_000_000), "input": code(&init_hex)}, both(), "latest",
               {a(target): {"code": target_code}}]),
    );
    // Intrinsic: 53,000 + calldata + 2 per 32-byte word of init code (EIP-3860).
    let intrinsic = 53_000 + calldata_gas(&init) + 2 * (init.len() as u64).div_ceil(32);
    // Init code gas: CALL 21 pushes + 2600 cold target + 18 child + 2 POP = 2641;
    // DELEGATECALL 18 + 100 warm + 18 + 2 = 138; STATICCALL 138; CALLCODE 21 + 100 + 18 + 2 =
    // 141; tail 3 + 3 + 6 + 3 + 3 = 18; code deposit 200 × 1 byte.
    let init_gas = 2641 + 138 + 138 + 141 + 18 + 200;
    let child = |ct: &str, idx: usize| {
        call_entry(ct, created, target, 0x1000, "0x", "0x0", ok(18, &word(42)), 0, &[idx])
    };
    assert_eq!(res["output"], "0xfe", "create output is the runtime code");
    assert_traces(
        &res,
        &[
            json!({"action": {"from": a(FUNDED), "gas": q(1_000_000 - intrinsic), "init": code(&init_hex), "value": "0x0"},
                   "result": {"address": a(created), "code": "0xfe", "gasUsed": q(init_gas)},
                   "subtraces": 4, "traceAddress": [], "type": "create"}),
            child("call", 0),
            child("delegatecall", 1),
            child("staticcall", 2),
            child("callcode", 3),
        ],
        "create",
    );
    // Created account born (nonce 1 by EIP-161); the target is touched but unchanged (omitted).
    assert_state_diff(
        &res,
        json!({
            a(created): {"balance": {"+": "0x0"}, "code": {"+": "0xfe"}, "nonce": {"+": "0x1"}, "storage": {}},
            a(FUNDED): sender_nonce_only(n),
        }),
        "create",
    );
}

// ---------------------------------------------------------------------------------------------
// Failures
// ---------------------------------------------------------------------------------------------

/// Revert contract: PUSH2 0xdead (3) PUSH1 0 (3) MSTORE (3 + 3) PUSH1 2 (3) PUSH1 30 (3)
/// REVERT (0) → revert data 0xdead, 18 gas.
fn reverter() -> String {
    code(
        "61dead600052" /* PUSH2 0xdead PUSH1 0 MSTORE */
            .to_owned()
            + "6002601efd", /* PUSH1 2 PUSH1 30 REVERT */
    )
}

/// Parent: CALL(gas 0x1000, child, value 0, no args, no return area), then PUSH1 0 MSTORE
/// PUSH1 32 PUSH1 0 RETURN → returns the CALL success flag. Gas: 21 pushes + 2600 cold child +
/// child gas used + 3 + 6 + 3 + 3.
fn parent_of(child: Address) -> String {
    code(&(call_op(0xf1, child, 0x1000, Some(0), (0, 0), (0, 0)) + "600052" + "60206000f3"))
}

#[test]
fn revert_at_root_keeps_result() {
    let Some(node) = node() else { return };
    let r = address!("3000000000000000000000000000000000000001");
    assert_fresh(r, 54);
    let n = nonce(&node, FUNDED, "latest");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(r), "gas": q(GAS)}, both(), "latest", {a(r): {"code": reverter()}}]),
    );
    assert_eq!(res["output"], "0xdead");
    let mut root =
        call_entry("call", FUNDED, r, GAS - 21_000, "0x", "0x0", ok(18, "0xdead"), 0, &[]);
    root["error"] = json!("Reverted");
    assert_traces(&res, &[root], "root revert");
    // A reverted call still bumps the sender's nonce (price 0: no fee).
    assert_state_diff(&res, json!({a(FUNDED): sender_nonce_only(n)}), "root revert");
}

#[test]
fn revert_in_child_parent_succeeds() {
    let Some(node) = node() else { return };
    let (p, r) = (
        address!("3000000000000000000000000000000000000002"),
        address!("3000000000000000000000000000000000000003"),
    );
    assert_fresh(p, 54);
    assert_fresh(r, 54);
    let n = nonce(&node, FUNDED, "latest");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(p), "gas": q(GAS)}, both(), "latest",
               {a(p): {"code": parent_of(r)}, a(r): {"code": reverter()}}]),
    );
    // Parent: 21 + 2600 + 18 (child) + 15 = 2654; returns the failed CALL's flag 0.
    assert_eq!(res["output"], word(0));
    let mut child = call_entry("call", p, r, 0x1000, "0x", "0x0", ok(18, "0xdead"), 0, &[0]);
    child["error"] = json!("Reverted");
    assert_traces(
        &res,
        &[
            call_entry("call", FUNDED, p, GAS - 21_000, "0x", "0x0", ok(2654, &word(0)), 1, &[]),
            child,
        ],
        "child revert",
    );
    assert_state_diff(&res, json!({a(FUNDED): sender_nonce_only(n)}), "child revert");
}

#[test]
fn out_of_gas_in_child_parent_continues() {
    let Some(node) = node() else { return };
    let (p, l) = (
        address!("3000000000000000000000000000000000000004"),
        address!("3000000000000000000000000000000000000005"),
    );
    assert_fresh(p, 54);
    assert_fresh(l, 54);
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(p), "gas": q(GAS)}, ["trace"], "latest",
               // JUMPDEST PUSH1 0 JUMP: loops until its 0x1000 gas is gone.
               {a(p): {"code": parent_of(l)}, a(l): {"code": "0x5b600056"}}]),
    );
    // Parent: 21 + 2600 + 4096 (all of the child's gas) + 15 = 6732; continues and returns 0.
    assert_eq!(res["output"], word(0));
    let mut child = call_entry("call", p, l, 0x1000, "0x", "0x0", Value::Null, 0, &[0]);
    child["error"] = json!("Out of gas");
    assert_traces(
        &res,
        &[
            call_entry("call", FUNDED, p, GAS - 21_000, "0x", "0x0", ok(6732, &word(0)), 1, &[]),
            child,
        ],
        "child oog",
    );
    assert_eq!(res["stateDiff"], Value::Null);
}

#[test]
fn invalid_opcode_is_bad_instruction() {
    let Some(node) = node() else { return };
    let x = address!("3000000000000000000000000000000000000006");
    assert_fresh(x, 54);
    let n = nonce(&node, FUNDED, "latest");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(x), "gas": q(GAS)}, both(), "latest", {a(x): {"code": "0xfe"}}]),
    );
    // A halt: no return data, `result: null`, OE wording.
    assert_eq!(res["output"], "0x");
    let mut root = call_entry("call", FUNDED, x, GAS - 21_000, "0x", "0x0", Value::Null, 0, &[]);
    root["error"] = json!("Bad instruction");
    assert_traces(&res, &[root], "invalid");
    assert_state_diff(&res, json!({a(FUNDED): sender_nonce_only(n)}), "invalid");
}

// ---------------------------------------------------------------------------------------------
// Precompiles
// ---------------------------------------------------------------------------------------------

#[test]
fn precompile_at_root_is_shown() {
    let Some(node) = node() else { return };
    let n = nonce(&node, FUNDED, "latest");
    let input = [1u8, 2, 3, 4];
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(IDENTITY), "gas": q(GAS), "input": "0x01020304"}, both()]),
    );
    // Identity returns its input; 15 + 3 × 1 word = 18 gas. Root gas: 100,000 − 21,000 − 4 × 16.
    assert_eq!(res["output"], "0x01020304");
    assert_traces(
        &res,
        &[call_entry(
            "call",
            FUNDED,
            IDENTITY,
            GAS - 21_000 - calldata_gas(&input),
            "0x01020304",
            "0x0",
            ok(18, "0x01020304"),
            0,
            &[],
        )],
        "precompile root",
    );
    assert_state_diff(&res, json!({a(FUNDED): sender_nonce_only(n)}), "precompile root");
}

/// PUSH1 0x2a PUSH1 0 MSTORE (3 + 3 + 6 = 12); CALL(gas 0x1000, identity, value, args [0,32),
/// ret [32,64)) (21 pushes + 100 warm precompile + 3 memory growth to 2 words [+ 9000 value +
/// 25000 new account]); POP (2); PUSH1 0x20 PUSH1 0x20 RETURN (6) → returns word(42).
fn identity_caller(value: u8) -> String {
    code(
        &("602a600052".to_string()
            + &call_op(0xf1, IDENTITY, 0x1000, Some(value), (0, 0x20), (0x20, 0x20))
            + "50"
            + "60206020f3"),
    )
}

#[test]
fn nested_precompile_without_value_is_hidden() {
    let Some(node) = node() else { return };
    let p = address!("4000000000000000000000000000000000000001");
    assert_fresh(p, 54);
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(p), "gas": q(GAS)}, ["trace"], "latest", {a(p): {"code": identity_caller(0)}}]),
    );
    // 12 + 21 + 100 + 3 + 18 (identity) + 2 + 6 = 162; the precompile call takes no entry.
    assert_eq!(res["output"], word(42));
    assert_traces(
        &res,
        &[call_entry("call", FUNDED, p, GAS - 21_000, "0x", "0x0", ok(162, &word(42)), 0, &[])],
        "hidden precompile",
    );
}

#[test]
fn nested_precompile_with_value_is_shown() {
    let Some(node) = node() else { return };
    let p = address!("4000000000000000000000000000000000000002");
    assert_fresh(p, 54);
    // The identity precompile's account does not exist (empty), so a value transfer pays the
    // new-account cost and the account is born.
    assert_fresh(IDENTITY, 54);
    let n = nonce(&node, FUNDED, "latest");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(p), "gas": q(GAS)}, both(), "latest",
               {a(p): {"code": identity_caller(1), "balance": "0x10"}}]),
    );
    // Parent: 12 + 21 + 100 + 9000 + 25000 + 3 + (18 − 2300 stipend returned) + 2 + 6 = 31862.
    // Child gas: 0x1000 + 2300 stipend = 6396.
    assert_eq!(res["output"], word(42));
    assert_traces(
        &res,
        &[
            call_entry("call", FUNDED, p, GAS - 21_000, "0x", "0x0", ok(31_862, &word(42)), 1, &[]),
            call_entry(
                "call",
                p,
                IDENTITY,
                0x1000 + 2300,
                &word(42),
                "0x1",
                ok(18, &word(42)),
                0,
                &[0],
            ),
        ],
        "shown precompile",
    );
    assert_state_diff(
        &res,
        json!({
            a(IDENTITY): {"balance": {"+": "0x1"}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}},
            a(p): {"balance": changed("0x10".into(), "0xf".into()), "code": "=", "nonce": "=", "storage": {}},
            a(FUNDED): sender_nonce_only(n),
        }),
        "shown precompile",
    );
}

// ---------------------------------------------------------------------------------------------
// Self-destruct
// ---------------------------------------------------------------------------------------------

/// PUSH20 beneficiary (3) SELFDESTRUCT (5000 + 2600 cold beneficiary + 25000 new account when
/// value moves to an empty beneficiary) = 32603.
fn destructor(beneficiary: Address) -> String {
    push20(beneficiary) + "ff"
}

const SELFDESTRUCT_TO_NEW_GAS: u64 = 3 + 5000 + 2600 + 25_000;

fn suicide_entry(x: Address, refund: Address, bal: &str, trace_address: &[usize]) -> Value {
    json!({"action": {"address": a(x), "balance": bal, "refundAddress": a(refund)},
           "result": null, "subtraces": 0, "traceAddress": trace_address, "type": "suicide"})
}

/// Osaka (EIP-6780): a pre-existing contract that self-destructs is not deleted; its balance
/// moves to the beneficiary, its code and nonce stay.
#[test]
fn selfdestruct_of_existing_contract_under_eip6780() {
    let Some(node) = node() else { return };
    let (s, ben) = (
        address!("5000000000000000000000000000000000000001"),
        address!("5000000000000000000000000000000000000002"),
    );
    assert_fresh(s, 54);
    assert_fresh(ben, 54);
    let n = nonce(&node, FUNDED, "latest");
    let s_code = code(destructor(ben));
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(s), "gas": q(GAS)}, both(), "latest",
               {a(s): {"code": s_code, "balance": "0x100"}}]),
    );
    assert_eq!(res["output"], "0x");
    assert_traces(
        &res,
        &[
            call_entry(
                "call",
                FUNDED,
                s,
                GAS - 21_000,
                "0x",
                "0x0",
                ok(SELFDESTRUCT_TO_NEW_GAS, "0x"),
                1,
                &[],
            ),
            suicide_entry(s, ben, "0x100", &[0]),
        ],
        "selfdestruct 6780",
    );
    assert_state_diff(
        &res,
        json!({
            a(s): {"balance": changed("0x100".into(), "0x0".into()), "code": "=", "nonce": "=", "storage": {}},
            a(ben): {"balance": {"+": "0x100"}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}},
            a(FUNDED): sender_nonce_only(n),
        }),
        "selfdestruct 6780",
    );
}

/// Created and destroyed in the same transaction: the account is deleted and, having not
/// existed before, is absent from the state diff.
#[test]
fn create_and_selfdestruct_in_one_call() {
    let Some(node) = node() else { return };
    let ben = address!("5000000000000000000000000000000000000003");
    assert_fresh(ben, 54);
    let (b, n) = (balance(&node, FUNDED, "latest"), nonce(&node, FUNDED, "latest"));
    let created = FUNDED.create(n);
    assert_fresh(created, 54);
    let init_hex = destructor(ben);
    let init = hex::decode(&init_hex).unwrap();
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "gas": q(GAS), "input": code(&init_hex), "value": "0x100"}, both()]),
    );
    let intrinsic = 53_000 + calldata_gas(&init) + 2 * (init.len() as u64).div_ceil(32);
    assert_eq!(res["output"], "0x");
    assert_traces(
        &res,
        &[
            json!({"action": {"from": a(FUNDED), "gas": q(GAS - intrinsic), "init": code(&init_hex), "value": "0x100"},
                   "result": {"address": a(created), "code": "0x", "gasUsed": q(SELFDESTRUCT_TO_NEW_GAS)},
                   "subtraces": 1, "traceAddress": [], "type": "create"}),
            suicide_entry(created, ben, "0x100", &[0]),
        ],
        "create+selfdestruct",
    );
    let v = U256::from(0x100);
    assert_state_diff(
        &res,
        json!({
            a(ben): {"balance": {"+": "0x100"}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}},
            a(FUNDED): {"balance": changed(qu(b), qu(b - v)), "code": "=", "nonce": changed(q(n), q(n + 1)), "storage": {}},
        }),
        "create+selfdestruct",
    );
}

/// Block 30 is London rules (before Cancun, block 42): SELFDESTRUCT deletes an account that
/// existed before the call. The account is a genesis-funded EOA given code by override; its
/// balance and nonce come from eth_getBalance / eth_getTransactionCount at block 30. A died
/// account shows `-` for balance, nonce and code (code as the call saw it: the override).
#[test]
fn selfdestruct_before_cancun_deletes() {
    let Some(node) = node() else { return };
    let e = address!("0c2c51a0990aee1d73c1228de158688341557508");
    let ben = address!("5000000000000000000000000000000000000004");
    assert_fresh(ben, 30);
    let (be, ne) = (balance(&node, e, "0x1e"), nonce(&node, e, "0x1e"));
    assert!(be > U256::ZERO);
    let n = nonce(&node, FUNDED, "0x1e");
    let e_code = code(destructor(ben));
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(e), "gas": q(GAS)}, both(), "0x1e", {a(e): {"code": e_code}}]),
    );
    // London: same costs as above (EIP-2929 cold beneficiary, EIP-161 new account).
    assert_traces(
        &res,
        &[
            call_entry(
                "call",
                FUNDED,
                e,
                GAS - 21_000,
                "0x",
                "0x0",
                ok(SELFDESTRUCT_TO_NEW_GAS, "0x"),
                1,
                &[],
            ),
            suicide_entry(e, ben, &qu(be), &[0]),
        ],
        "selfdestruct london",
    );
    assert_state_diff(
        &res,
        json!({
            a(e): {"balance": {"-": qu(be)}, "code": {"-": e_code}, "nonce": {"-": q(ne)}, "storage": {}},
            a(ben): {"balance": {"+": qu(be)}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}},
            a(FUNDED): sender_nonce_only(n),
        }),
        "selfdestruct london",
    );
}

// ---------------------------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------------------------

/// The emit contract (genesis alloc), disassembled:
/// CALLDATASIZE DUP1 PUSH1 0 DUP1 CALLDATACOPY   ; mem[0..cds] = calldata
/// PUSH1 0 SHA3                                   ; h = keccak(calldata)
/// PUSH1 0 SLOAD                                  ; c = slot 0 (a counter)
/// DUP1 DUP3 SSTORE                               ; slot h = c
/// DUP1 PUSH1 1 ADD PUSH1 0 SSTORE                ; slot 0 = c + 1
/// PUSH1 0 MSTORE PUSH4 "emit" PUSH1 32 PUSH1 0 LOG2 ; log(c, "emit", h); returns nothing
const EMIT_CODE: &str = "0x3680600080376000206000548082558060010160005560005263656d697460206000a2";

/// An existing account's slots change with `*` (a 0 → x write included, from 0x00…00).
#[test]
fn storage_write_of_existing_account() {
    let Some(node) = node() else { return };
    assert_eq!(node.call("eth_getCode", json!([a(EMIT), "latest"])).unwrap(), EMIT_CODE);
    let input = b"loupe";
    let h = keccak256(input);
    let slot0 = storage(&node, EMIT, "0x0", "latest");
    let c = U256::from_str_radix(slot0.trim_start_matches("0x"), 16).unwrap();
    assert!(c > U256::ZERO);
    assert_eq!(
        U256::from_str_radix(
            storage(&node, EMIT, &format!("{h:#x}"), "latest").trim_start_matches("0x"),
            16
        )
        .unwrap(),
        U256::ZERO
    );
    let n = nonce(&node, FUNDED, "latest");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(EMIT), "gas": q(GAS), "input": code(hex::encode(input))}, both()]),
    );
    // 2+3+3+3 + CALLDATACOPY 9 + 3 + SHA3 36 + 3 + SLOAD 2100 + 3+3 + SSTORE(h) 2100+20000
    // + 3+3+3+3 + SSTORE(0, warm, reset) 2900 + 3+3 + 3+3+3 + LOG2 (375+750+256) = 28576.
    assert_traces(
        &res,
        &[call_entry(
            "call",
            FUNDED,
            EMIT,
            GAS - 21_000 - calldata_gas(input),
            &code(hex::encode(input)),
            "0x0",
            ok(28_576, "0x"),
            0,
            &[],
        )],
        "emit",
    );
    let word0 = format!("{:#x}", B256::ZERO);
    assert_state_diff(
        &res,
        json!({
            a(EMIT): {"balance": "=", "code": "=", "nonce": "=", "storage": {
                word(0): changed(word_u(c), word_u(c + U256::from(1))),
                format!("{h:#x}"): changed(word0, word_u(c)),
            }},
            a(FUNDED): sender_nonce_only(n),
        }),
        "emit",
    );
}

/// Slots written by a born account are `+`.
#[test]
fn storage_write_of_born_account() {
    let Some(node) = node() else { return };
    let n = nonce(&node, FUNDED, "latest");
    let created = FUNDED.create(n);
    assert_fresh(created, 54);
    // PUSH1 0x2a PUSH1 1 SSTORE (3 + 3 + 2100 cold + 20000 set) STOP → empty runtime code.
    let init_hex = "602a600155";
    let init = hex::decode(init_hex).unwrap();
    let res =
        trace(&node, json!([{"from": a(FUNDED), "gas": q(GAS), "input": code(init_hex)}, both()]));
    let intrinsic = 53_000 + calldata_gas(&init) + 2;
    assert_traces(
        &res,
        &[
            json!({"action": {"from": a(FUNDED), "gas": q(GAS - intrinsic), "init": code(init_hex), "value": "0x0"},
                 "result": {"address": a(created), "code": "0x", "gasUsed": q(3 + 3 + 2100 + 20_000)},
                 "subtraces": 0, "traceAddress": [], "type": "create"}),
        ],
        "born storage",
    );
    assert_state_diff(
        &res,
        json!({
            a(created): {"balance": {"+": "0x0"}, "code": {"+": "0x"}, "nonce": {"+": "0x1"},
                         "storage": {word(1): {"+": word(0x2a)}}},
            a(FUNDED): sender_nonce_only(n),
        }),
        "born storage",
    );
}

// ---------------------------------------------------------------------------------------------
// EIP-7702
// ---------------------------------------------------------------------------------------------

/// The fixture call of call-eip7702-delegation.io, traced. The delegate 0x8c23…9561 runs:
/// CALLDATASIZE ISZERO PUSH1 9 JUMPI (2+3+3+10) JUMPDEST (1) ADDRESS PUSH0 MSTORE (2+2+6)
/// PUSH0 SLOAD (2+2100 cold) PUSH1 32 MSTORE (3+6) PUSH1 64 PUSH0 RETURN (3+2) = 2145,
/// returning (own address, slot 0).
#[test]
fn eip7702_delegated_account() {
    let Some(node) = node() else { return };
    let fixture = support::fixtures().unwrap().join("eth_call/call-eip7702-delegation.io");
    let text = std::fs::read_to_string(fixture).unwrap();
    let line = |p: &str| -> Value {
        serde_json::from_str(text.lines().find_map(|l| l.strip_prefix(p)).unwrap().trim()).unwrap()
    };
    let (req, resp) = (line(">>"), line("<<"));
    let expected = resp["result"].clone();
    let call = req["params"][0].clone();
    assert_eq!(
        node.call("eth_getCode", json!([a(DELEGATED), "latest"])).unwrap(),
        "0xef01008c2319620d7c348bb4e2b2a0b230c81f310e9561"
    );
    let res = trace(&node, json!([call, both(), "latest"]));
    assert_eq!(res["output"], expected);
    assert_traces(
        &res,
        &[call_entry(
            "call",
            Address::ZERO,
            DELEGATED,
            0x186a0 - 21_000,
            "0x",
            "0x0",
            ok(2145, expected.as_str().unwrap()),
            0,
            &[],
        )],
        "7702",
    );
    let n = nonce(&node, Address::ZERO, "latest");
    assert_state_diff(&res, json!({a(Address::ZERO): sender_nonce_only(n)}), "7702");
}

// ---------------------------------------------------------------------------------------------
// Historical blocks
// ---------------------------------------------------------------------------------------------

/// The same calls at block 1 (Homestead), 27 (London) and 54 (Osaka): a balance reader and the
/// emit counter give the state of that block, cross-checked with eth_getBalance and
/// eth_getStorageAt at the same block; root gas follows the block's calldata price.
#[test]
fn same_call_at_three_blocks() {
    let Some(node) = node() else { return };
    let reader = address!("6000000000000000000000000000000000000001");
    assert_fresh(reader, 54);
    // PUSH20 EMIT BALANCE PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN → word(balance of EMIT).
    let reader_code = code(&(push20(EMIT) + "31" + "600052" + "60206000f3"));
    let input = b"loupe";
    let h = keccak256(input);
    let mut counters = Vec::new();
    for (block, calldata_byte_gas) in [("0x1", 68u64), ("0x1b", 16), ("0x36", 16)] {
        let bal = balance(&node, EMIT, block);
        let res = trace(
            &node,
            json!([{"from": a(FUNDED), "to": a(reader), "gas": q(GAS)}, ["trace"], block, {a(reader): {"code": reader_code}}]),
        );
        assert_eq!(res["output"], word_u(bal), "balance of EMIT at {block}");

        // callenv (created in block 1) starts NUMBER, CHAINID, COINBASE, BASEFEE, …: before
        // Istanbul (block 18) CHAINID (0x46) is not an opcode → "Bad instruction"; later the
        // first word is the block number.
        let env = trace(&node, json!([{"to": a(CALLENV), "gas": q(GAS)}, ["trace"], block]));
        let number = u64::from_str_radix(&block[2..], 16).unwrap();
        if number < 18 {
            assert_eq!(env["trace"][0]["error"], "Bad instruction", "callenv at {block}: {env}");
            assert_eq!(env["output"], "0x");
        } else {
            assert_eq!(&env["output"].as_str().unwrap()[..66], word(number), "callenv at {block}");
        }

        let c = storage(&node, EMIT, "0x0", block);
        let c = U256::from_str_radix(c.trim_start_matches("0x"), 16).unwrap();
        counters.push(c);
        let res = trace(
            &node,
            json!([{"from": a(FUNDED), "to": a(EMIT), "gas": q(GAS), "input": code(hex::encode(input))}, both(), block]),
        );
        // Root gas: 100,000 − 21,000 − 5 non-zero bytes at the block's price (68 before Istanbul).
        assert_eq!(
            res["trace"][0]["action"]["gas"],
            q(GAS - 21_000 - 5 * calldata_byte_gas),
            "root gas at {block}"
        );
        assert_eq!(res["trace"][0].get("error"), None);
        let mut slots = serde_json::Map::new();
        slots.insert(word(0), changed(word_u(c), word_u(c + U256::from(1))));
        if !c.is_zero() {
            // slot h = c; a write of 0 over 0 (at block 1) is no change and is not listed.
            slots.insert(format!("{h:#x}"), changed(format!("{:#x}", B256::ZERO), word_u(c)));
        }
        assert_eq!(
            res["stateDiff"][a(EMIT)]["storage"],
            Value::Object(slots),
            "emit storage at {block}"
        );
    }
    assert_eq!(counters[0], U256::ZERO, "no emit call before block 2");
    assert!(counters[0] < counters[1] && counters[1] < counters[2], "counter grows: {counters:?}");
}

// ---------------------------------------------------------------------------------------------
// Overrides
// ---------------------------------------------------------------------------------------------

/// Block overrides: NUMBER TIMESTAMP COINBASE BASEFEE PREVRANDAO GASLIMIT each stored to
/// memory (2 + 3 + 3 = 8 each, 48) + memory 6 words (18) + PUSH1 PUSH1 RETURN (6) = 72 gas.
/// A priced call (gasPrice 10 over base fee 7): the sender pays 10 × (21000 + 72), the
/// overridden coinbase receives the tip 3 × 21072.
#[test]
fn block_overrides_echo() {
    let Some(node) = node() else { return };
    let echo = address!("7000000000000000000000000000000000000001");
    let coinbase = address!("7000000000000000000000000000000000000002");
    assert_fresh(echo, 54);
    assert_fresh(coinbase, 54);
    let echo_code = code(
        "43600052" /* NUMBER */ .to_owned() + "42602052" /* TIMESTAMP */ + "41604052" /* COINBASE */
        + "48606052" /* BASEFEE */ + "44608052" /* PREVRANDAO */ + "4560a052" /* GASLIMIT */ + "60c06000f3",
    );
    let random = B256::repeat_byte(0xbe);
    let (b, n) = (balance(&node, FUNDED, "latest"), nonce(&node, FUNDED, "latest"));
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(echo), "gas": q(GAS), "gasPrice": "0xa"}, both(), "latest",
               {a(echo): {"code": echo_code}},
               {"number": "0x1234", "time": "0x5678", "coinbase": a(coinbase), "baseFee": "0x7",
                "prevRandao": format!("{random:#x}"), "gasLimit": "0x989680"}]),
    );
    let out = res["output"].as_str().unwrap();
    let expected = format!(
        "0x{}{}{}{}{}{}",
        &word(0x1234)[2..],
        &word(0x5678)[2..],
        &word_addr(coinbase)[2..],
        &word(7)[2..],
        hex::encode(random),
        &word(0x98_9680)[2..]
    );
    assert_eq!(out, expected);
    assert_traces(
        &res,
        &[call_entry("call", FUNDED, echo, GAS - 21_000, "0x", "0x0", ok(72, &expected), 0, &[])],
        "block overrides",
    );
    let used = U256::from(21_000 + 72);
    assert_state_diff(
        &res,
        json!({
            a(coinbase): {"balance": {"+": qu(used * U256::from(3))}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}},
            a(FUNDED): {"balance": changed(qu(b), qu(b - used * U256::from(10))), "code": "=",
                        "nonce": changed(q(n), q(n + 1)), "storage": {}},
        }),
        "block overrides",
    );
}

/// State overrides: code, balance, nonce and `stateDiff` of an account are what the call sees;
/// the state diff's "from" is the overridden state; `state` replaces all storage; a sender nonce
/// override moves the creation address.
#[test]
fn state_overrides() {
    let Some(node) = node() else { return };
    let x = address!("8000000000000000000000000000000000000001");
    assert_fresh(x, 54);
    // PUSH1 5 SLOAD PUSH1 0 MSTORE SELFBALANCE PUSH1 32 MSTORE PUSH1 64 PUSH1 0 RETURN
    // → (slot 5, own balance).
    let reader = code("600554600052476020526040".to_owned() + "6000f3");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(x), "gas": q(GAS)}, ["trace"], "latest",
               {a(x): {"code": reader, "balance": "0x77", "nonce": "0x3", "stateDiff": {word(5): word(0x99)}}}]),
    );
    assert_eq!(res["output"], format!("{}{}", word(0x99), &word(0x77)[2..]));

    // `stateDiff` patch of the emit counter: slot 0 starts at 0x100 → the write shows 0x100 →
    // 0x101, and slot keccak(input) gets 0x100.
    let input = b"override";
    let h = keccak256(input);
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(EMIT), "gas": q(GAS), "input": code(hex::encode(input))}, both(), "latest",
               {a(EMIT): {"stateDiff": {word(0): word(0x100)}}}]),
    );
    assert_eq!(
        res["stateDiff"][a(EMIT)]["storage"],
        json!({word(0): changed(word(0x100), word(0x101)), format!("{h:#x}"): changed(word(0), word(0x100))})
    );
    // `state` replaces all storage: slot 0 reads 0, so slot 0 goes 0 → 1 and slot h (0 → 0) is
    // no change.
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(EMIT), "gas": q(GAS), "input": code(hex::encode(input))}, both(), "latest",
               {a(EMIT): {"state": {}}}]),
    );
    assert_eq!(res["stateDiff"][a(EMIT)]["storage"], json!({word(0): changed(word(0), word(1))}));

    // Sender nonce override 0x77: CREATE address = keccak(rlp(sender, 0x77))[12:].
    let created = FUNDED.create(0x77);
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "gas": q(GAS), "input": "0x"}, both(), "latest", {a(FUNDED): {"nonce": "0x77"}}]),
    );
    assert_eq!(res["trace"][0]["result"]["address"], a(created));
    assert_eq!(res["stateDiff"][a(FUNDED)]["nonce"], changed(q(0x77), q(0x78)));
    assert_eq!(
        res["stateDiff"][a(created)],
        json!({"balance": {"+": "0x0"}, "code": {"+": "0x"}, "nonce": {"+": "0x1"}, "storage": {}})
    );
}

// ---------------------------------------------------------------------------------------------
// EIP-161: touched empty accounts die
// ---------------------------------------------------------------------------------------------

/// 0x81d1…3960 is an empty account (nonce 0, balance 0, no code, no storage) created before
/// Spurious Dragon (block 6) and still in the state at block 54 (storage-layer read). A zero-value
/// call touches it; under EIP-161 (active from block 6) a touched empty account is deleted at the
/// end of the transaction. behaviour.md §3.3: `{"-": old}` for an account "emptied under
/// EIP-161", as OpenEthereum's pre/post diff shows it.
#[test]
fn touched_empty_account_dies_under_eip161() {
    let Some(node) = node() else { return };
    let empty = address!("81d180be8008f56e16d78fb20f40d8b4bf023960");
    let chain = support::chain().unwrap();
    let acc = chain.db.begin_read().unwrap().state_at(54).unwrap().account(&empty).unwrap();
    let acc = acc.expect("the empty account exists in the state at 54");
    assert!(acc.nonce == 0 && acc.balance.is_zero() && !acc.has_code(), "{acc:?}");
    // Before Spurious Dragon (block 5, Homestead) a touch deletes nothing: only the sender's
    // nonce changes.
    let pre = chain.db.begin_read().unwrap().state_at(5).unwrap().account(&empty).unwrap();
    assert!(pre.is_some(), "the empty account exists at block 5");
    let n5 = nonce(&node, FUNDED, "0x5");
    let res =
        trace(&node, json!([{"from": a(FUNDED), "to": a(empty), "gas": q(GAS)}, both(), "0x5"]));
    assert_state_diff(&res, json!({a(FUNDED): sender_nonce_only(n5)}), "pre-eip161");

    let n = nonce(&node, FUNDED, "latest");
    let res = trace(&node, json!([{"from": a(FUNDED), "to": a(empty), "gas": q(GAS)}, both()]));
    assert_traces(
        &res,
        &[call_entry("call", FUNDED, empty, GAS - 21_000, "0x", "0x0", ok(0, "0x"), 0, &[])],
        "eip161",
    );
    assert_state_diff(
        &res,
        json!({
            a(empty): {"balance": {"-": "0x0"}, "code": {"-": "0x"}, "nonce": {"-": "0x0"}, "storage": {}},
            a(FUNDED): sender_nonce_only(n),
        }),
        "eip161",
    );
}

// ---------------------------------------------------------------------------------------------
// Block environment: state after block N, nothing of N+1
// ---------------------------------------------------------------------------------------------

/// EIP-4788 beacon roots contract (genesis alloc). For a non-system caller it takes a 32-byte
/// timestamp, reverts unless ring slot `ts % 8191` holds `ts`, and returns slot
/// `ts % 8191 + 8191`. Block N's own system call stored N's parent beacon root under N's
/// timestamp (10·N); block N+1's system call is not part of "the state after block N".
#[test]
fn state_after_block_n_excludes_next_block_system_call() {
    let Some(node) = node() else { return };
    let beacon = address!("000f3df6d732807ef1319fb7b8bb8522d0beac02");
    let chain = support::chain().unwrap();
    let r = chain.db.begin_read().unwrap();
    let (h50, h51) = (r.header(50).unwrap().unwrap(), r.header(51).unwrap().unwrap());
    let root50 = h50.parent_beacon_block_root.expect("Cancun header");
    let call = |ts: u64| json!({"to": a(beacon), "gas": q(GAS), "input": word(ts)});

    // Block 50's timestamp at block 50 → block 50's parent beacon root (from the header).
    let res = trace(&node, json!([call(h50.timestamp), ["trace"], "0x32"]));
    assert_eq!(res["output"], format!("{root50:#x}"));
    assert_eq!(res["trace"][0].get("error"), None, "{res}");

    // Block 51's timestamp at block 50: written only by block 51 → revert, no data.
    let res = trace(&node, json!([call(h51.timestamp), ["trace"], "0x32"]));
    assert_eq!(res["trace"][0]["error"], "Reverted", "{res}");
    assert_eq!(res["output"], "0x");
    // …and visible at block 51.
    let res = trace(&node, json!([call(h51.timestamp), ["trace"], "0x33"]));
    assert_eq!(res["output"], format!("{:#x}", h51.parent_beacon_block_root.unwrap()));
}

// ---------------------------------------------------------------------------------------------
// Fees
// ---------------------------------------------------------------------------------------------

/// An EIP-1559-priced transfer at block 54 (base fee from the stored header): effective price =
/// min(maxFee, baseFee + tip) = baseFee + 5; the sender pays 21,000 × that, the block's
/// coinbase receives the tip 21,000 × 5 (behaviour.md §3.2). The empty recipient is touched
/// without change (value 0): no entry.
#[test]
fn priced_call_pays_fee_and_tip() {
    let Some(node) = node() else { return };
    let chain = support::chain().unwrap();
    let header = chain.db.begin_read().unwrap().header(54).unwrap().unwrap();
    let base_fee = header.base_fee_per_gas.unwrap();
    let coinbase = header.beneficiary;
    let to = address!("a000000000000000000000000000000000000001");
    assert_fresh(to, 54);
    let (b, n) = (balance(&node, FUNDED, "latest"), nonce(&node, FUNDED, "latest"));
    let cb = balance(&node, coinbase, "latest");
    let res = trace(
        &node,
        json!([{"from": a(FUNDED), "to": a(to), "gas": q(GAS), "maxFeePerGas": q(base_fee + 100),
                "maxPriorityFeePerGas": "0x5"}, both()]),
    );
    assert_traces(
        &res,
        &[call_entry("call", FUNDED, to, GAS - 21_000, "0x", "0x0", ok(0, "0x"), 0, &[])],
        "priced",
    );
    let fee = U256::from(21_000u64) * U256::from(base_fee + 5);
    let tip = U256::from(21_000u64 * 5);
    assert_state_diff(
        &res,
        json!({
            a(coinbase): {"balance": changed(qu(cb), qu(cb + tip)), "code": "=", "nonce": "=", "storage": {}},
            a(FUNDED): {"balance": changed(qu(b), qu(b - fee)), "code": "=", "nonce": changed(q(n), q(n + 1)), "storage": {}},
        }),
        "priced",
    );
}
