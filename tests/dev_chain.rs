//! The built-in dev chain end to end.
//!
//! 1. Round trip: the sample history built by the library, exported with `loupe export` and
//!    re-imported with `loupe import` (which executes and verifies every block) into a fresh
//!    datadir, answers every block, transaction, receipt and trace_call identically.
//! 2. One trace_call per sample-history transaction: each transaction is fetched over RPC and
//!    replayed at its parent block. Every expectation below is derived from the contract
//!    sources (`contracts/Sample.sol`, the hand-assembled Counter in `src/dev/sample.rs`) and
//!    the EVM rules, never copied from loupe's own output.
//! 3. An interrupted first `loupe dev`: killed at several moments of its build (and a datadir
//!    an older loupe left with part of the history), the datadir never holds a partial chain,
//!    and the next start serves the chain a clean build serves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use alloy_primitives::{Address, U256, hex, keccak256};
use loupe::chain::ChainSpec;
use loupe::rpc::{RpcConfig, RpcServer};
use loupe::storage::Database;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A running server on a database, with a blocking HTTP client.
struct Node {
    url: String,
    client: reqwest::blocking::Client,
    server: Option<RpcServer>,
    rt: tokio::runtime::Runtime,
}

impl Node {
    fn serve(db: Database, spec: ChainSpec) -> Self {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let config = RpcConfig { addr: "127.0.0.1:0".parse().unwrap(), ..RpcConfig::default() };
        let server = rt.block_on(loupe::rpc::start(Arc::new(db), spec, config)).unwrap();
        let url = format!("http://{}", server.addr);
        Self { url, client: reqwest::blocking::Client::new(), server: Some(server), rt }
    }

    /// The `result` of a JSON-RPC call; panics on a JSON-RPC error.
    fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp: Value = self.client.post(&self.url).json(&body).send().unwrap().json().unwrap();
        assert!(resp.get("error").is_none(), "{method} {params}: {resp}");
        resp["result"].clone()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.rt.block_on(server.stop());
        }
    }
}

/// Builds the dev chain (genesis + the 20-block sample history) in `dir` through the library.
fn build_dev_chain(dir: &Path) -> (Database, ChainSpec) {
    let db = Database::open(dir).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
    assert_eq!(loupe::dev::build_sample_history(&db, &spec).unwrap(), 20);
    (db, spec)
}

/// A served dev chain in a temporary datadir (the server stops before the dir is removed).
struct Dev {
    node: Node,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Dev {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.node
    }
}

fn dev() -> Dev {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec) = build_dev_chain(dir.path());
    Dev { node: Node::serve(db, spec), _dir: dir }
}

/// A sample-history transaction (as the RPC returns it) and its trace_call replay.
struct Replay {
    tx: Value,
    res: Value,
}

impl Replay {
    fn root(&self) -> &Value {
        &self.res["trace"][0]
    }
    fn diff(&self, a: Address) -> &Value {
        &self.res["stateDiff"][addr(a)]
    }
    fn from(&self) -> Address {
        self.tx["from"].as_str().unwrap().parse().unwrap()
    }
    fn value(&self) -> U256 {
        u256(&self.tx["value"])
    }
}

/// The call object replaying `tx`: its from/to/input/value, plus the access list (type 1),
/// blob hashes and blob fee cap (type 3) or authorization list (type 4) as the RPC returned
/// them. No gas price: the call pays nothing for gas (behaviour.md §3.2).
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

impl Node {
    fn tx(&self, block: u64, index: u64) -> Value {
        let tx = self.rpc("eth_getTransactionByBlockNumberAndIndex", json!([q(block), q(index)]));
        assert!(tx.is_object(), "block {block} has no transaction {index}");
        tx
    }

    /// Transaction `index` of `block`, replayed with `["trace","stateDiff"]` on the state after
    /// block `at`.
    fn replay(&self, block: u64, index: u64, at: u64) -> Replay {
        let tx = self.tx(block, index);
        let res = self.rpc("trace_call", json!([call_of(&tx), ["trace", "stateDiff"], q(at)]));
        // Seed rule 5 / behaviour.md §3.3: the root has traceAddress [] and the result's
        // output is the root frame's return data (for a create: the deployed code).
        let root = &res["trace"][0];
        assert_eq!(root["traceAddress"], json!([]));
        let root_out = if root["type"] == "create" {
            &root["result"]["code"]
        } else {
            &root["result"]["output"]
        };
        assert_eq!(&res["output"], root_out, "output must be the root frame's output");
        assert_eq!(res["vmTrace"], Value::Null);
        Replay { tx, res }
    }

    fn balance(&self, a: Address, at: u64) -> U256 {
        u256(&self.rpc("eth_getBalance", json!([addr(a), q(at)])))
    }

    fn nonce(&self, a: Address, at: u64) -> u64 {
        let n = u256(&self.rpc("eth_getTransactionCount", json!([addr(a), q(at)])));
        u64::try_from(n).unwrap()
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding helpers (all independent of loupe)
// ---------------------------------------------------------------------------------------------

fn q(n: u64) -> String {
    format!("{n:#x}")
}

fn qu(v: U256) -> String {
    format!("{v:#x}")
}

fn addr(a: Address) -> String {
    format!("{a:#x}")
}

/// A 32-byte word, as storage keys/values and ABI words are written.
fn word(v: U256) -> String {
    format!("0x{v:064x}")
}

fn hexs(b: &[u8]) -> String {
    format!("0x{}", hex::encode(b))
}

fn u256(v: &Value) -> U256 {
    v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}")).parse().unwrap()
}

fn pad_addr(a: Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    w[12..].copy_from_slice(a.as_slice());
    w
}

/// First four bytes of keccak256(signature).
fn selector(signature: &str) -> [u8; 4] {
    keccak256(signature.as_bytes())[..4].try_into().unwrap()
}

/// Storage slot of `mapping(address => …)` declared at slot `p`: keccak256(pad32(key) ++ pad32(p)).
fn mapping_slot(key: Address, p: u64) -> U256 {
    let mut pre = pad_addr(key).to_vec();
    pre.extend_from_slice(&U256::from(p).to_be_bytes::<32>());
    U256::from_be_bytes(keccak256(&pre).0)
}

fn changed(from: impl Into<Value>, to: impl Into<Value>) -> Value {
    json!({"*": {"from": from.into(), "to": to.into()}})
}

fn born(v: impl Into<Value>) -> Value {
    json!({"+": v.into()})
}

fn accounts() -> [Address; 3] {
    loupe::dev::dev_accounts().try_into().unwrap()
}

fn eth() -> U256 {
    U256::from(10u64).pow(U256::from(18u64))
}

const GWEI: u64 = 1_000_000_000;

/// `Counter`'s runtime as given in src/dev/sample.rs (hand-assembled, 18 bytes).
const COUNTER_RUNTIME: &str = "0x6000546001018060005560005260206000f3";

/// Solidity creation code ends its constructor with `PUSH len DUP1 PUSH off PUSH0 CODECOPY
/// PUSH0 RETURN INVALID` and appends the runtime: bytes `off..off+len` of the init code.
fn runtime_in(init: &str, off: usize, len: usize) -> String {
    let init = hex::decode(init).unwrap();
    assert_eq!(init[off - 1], 0xfe, "solc puts INVALID right before the runtime");
    hexs(&init[off..off + len])
}

/// A fresh address paid in block `b` (11..=20): 0xde, zeros, then `b` as two bytes.
fn fresh(b: u64) -> Address {
    let mut a = [0u8; 20];
    a[0] = 0xde;
    a[18..].copy_from_slice(&(b as u16).to_be_bytes());
    Address::from(a)
}

// ---------------------------------------------------------------------------------------------
// Gas of one Counter call (the frame's own gas, Prague rules)
// ---------------------------------------------------------------------------------------------
//
//   PUSH1 0          3
//   SLOAD            2100   cold slot (EIP-2929); this warms slot 0
//   PUSH1 1, ADD     3 + 3
//   DUP1             3
//   PUSH1 0          3
//   SSTORE           slot warm, original == current (EIP-2200/2929):
//                      n != 0 → n+1: SSTORE_RESET 5000 − COLD_SLOAD 2100 = 2900
//                      0 → 1:        SSTORE_SET 20000
//   PUSH1 0, MSTORE  3 + 3, plus memory expansion 0 → 1 word: 3
//   PUSH1 32, PUSH1 0  3 + 3
//   RETURN           0 (memory already 1 word)
//
// 9 three-gas ops + 3 memory = 30, so a call costs 2100 + 2900 + 30 = 5030 when slot 0 is
// non-zero and 2100 + 20000 + 30 = 22130 when it is zero. No refunds apply either way.
const COUNTER_GAS_NONZERO: u64 = 2100 + 2900 + 9 * 3 + 3;
const COUNTER_GAS_ZERO: u64 = 2100 + 20_000 + 9 * 3 + 3;

/// Checks a replayed call that runs Counter's code on `storage_of`'s slot 0, which holds `n`.
fn check_counter_call(r: &Replay, storage_of: Address, n: u64) {
    let root = r.root();
    assert_eq!(r.res["trace"].as_array().unwrap().len(), 1, "Counter makes no calls");
    assert_eq!(root["type"], "call");
    assert_eq!(root["action"]["callType"], "call");
    assert_eq!(root["action"]["to"], r.tx["to"]);
    assert_eq!(root["subtraces"], 0);
    // RETURN(0, 32) of mem[0..32] = n + 1.
    assert_eq!(r.res["output"], word(U256::from(n + 1)));
    let gas = if n == 0 { COUNTER_GAS_ZERO } else { COUNTER_GAS_NONZERO };
    assert_eq!(root["result"]["gasUsed"], q(gas), "Counter call gas with slot 0 = {n}");
    // SSTORE(0, n + 1) on an existing account: slot 0 changes `*` from n to n + 1.
    let d = r.diff(storage_of);
    assert_eq!(
        d["storage"],
        json!({ word(U256::ZERO): changed(word(U256::from(n)), word(U256::from(n + 1))) })
    );
    assert_eq!(d["balance"], "=");
}

/// Checks a replayed plain value transfer to an account without code.
fn check_transfer(node: &Node, r: &Replay, at: u64, fresh_recipient: bool) {
    let (from, value) = (r.from(), r.value());
    let to: Address = r.tx["to"].as_str().unwrap().parse().unwrap();
    assert_eq!(r.tx["input"], "0x");
    // One call frame to an account without code: nothing runs, so the frame uses no gas and
    // returns nothing.
    assert_eq!(r.res["trace"].as_array().unwrap().len(), 1);
    let root = r.root();
    assert_eq!(root["type"], "call");
    assert_eq!(root["action"]["callType"], "call");
    assert_eq!(root["action"]["from"], addr(from));
    assert_eq!(root["action"]["to"], addr(to));
    assert_eq!(root["action"]["value"], qu(value));
    assert_eq!(root["action"]["input"], "0x");
    assert_eq!(root["result"], json!({"gasUsed": "0x0", "output": "0x"}));
    assert_eq!(root["subtraces"], 0);
    assert_eq!(r.res["output"], "0x");
    // With no gas price the sender pays exactly the value (no fee), and its nonce goes up by one.
    let (balance, nonce) = (node.balance(from, at), node.nonce(from, at));
    assert_eq!(
        r.diff(from),
        &json!({
            "balance": changed(qu(balance), qu(balance - value)),
            "nonce": changed(q(nonce), q(nonce + 1)),
            "code": "=",
            "storage": {},
        })
    );
    let recipient = if fresh_recipient {
        // The address did not exist before: every field is born (EIP-161: an account created
        // by a value transfer has nonce 0 and no code).
        assert_eq!(node.balance(to, at), U256::ZERO);
        json!({"balance": born(qu(value)), "nonce": born("0x0"), "code": born("0x"), "storage": {}})
    } else {
        let before = node.balance(to, at);
        json!({
            "balance": changed(qu(before), qu(before + value)),
            "nonce": "=",
            "code": "=",
            "storage": {},
        })
    };
    assert_eq!(r.diff(to), &recipient);
    // Nothing else changes: no fee reaches the coinbase with a zero price.
    let touched: Vec<&String> = r.res["stateDiff"].as_object().unwrap().keys().collect();
    assert_eq!(touched.len(), 2, "only sender and recipient change: {touched:?}");
}

/// Checks a replayed contract creation: the new account is born with nonce 1 (EIP-161), no
/// balance, `code` and `storage`.
fn check_create(r: &Replay, creator: Address, nonce: u64, code: &str, storage: Value) {
    let created = creator.create(nonce);
    let root = r.root();
    assert_eq!(root["type"], "create");
    assert_eq!(root["action"]["from"], addr(creator));
    assert_eq!(root["action"]["init"], r.tx["input"]);
    assert_eq!(root["result"]["address"], addr(created));
    assert_eq!(root["result"]["code"], code);
    assert_eq!(r.res["output"], code);
    assert_eq!(
        r.diff(created),
        &json!({"balance": born("0x0"), "nonce": born("0x1"), "code": born(code), "storage": storage})
    );
    // The creator's nonce goes up by one; with no gas price its balance does not change.
    assert_eq!(r.diff(creator)["nonce"], changed(q(nonce), q(nonce + 1)));
    assert_eq!(r.diff(creator)["balance"], "=");
}

// ---------------------------------------------------------------------------------------------
// 1. Round trip through `loupe export` / `loupe import`
// ---------------------------------------------------------------------------------------------

fn loupe(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "loupe {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn export_import_round_trip_answers_identically() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let rlp = tmp.path().join("out.rlp");
    let genesis = tmp.path().join("genesis.json");
    // Build A and close it, so that the loupe process can open the database.
    drop(build_dev_chain(&dir_a));

    loupe(&["export".as_ref(), "--datadir".as_ref(), dir_a.as_os_str(), rlp.as_os_str()]);
    assert!(std::fs::metadata(&rlp).unwrap().len() > 0);
    std::fs::write(&genesis, loupe::dev::dev_genesis_json()).unwrap();
    let out = loupe(&[
        "import".as_ref(),
        "--datadir".as_ref(),
        dir_b.as_os_str(),
        "--genesis".as_ref(),
        genesis.as_os_str(),
        rlp.as_os_str(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // 20 blocks holding 1 + 2 + 1 + 2 + 1×6 + 2×10 = 32 transactions, all executed.
    assert!(stdout.contains("imported 20 blocks (32 txs"), "import output: {stdout}");
    assert!(stdout.contains("head #20"), "import output: {stdout}");

    let open = |dir: &Path| {
        let db = Database::open(dir).unwrap();
        let spec = loupe::import::load_spec(&db).unwrap().expect("initialised");
        Node::serve(db, spec)
    };
    let (a, b) = (open(&dir_a), open(&dir_b));
    let both = |method: &str, params: Value| {
        let (x, y) = (a.rpc(method, params.clone()), b.rpc(method, params.clone()));
        assert_eq!(x, y, "{method} {params} differs between the original and the import");
        x
    };

    assert_eq!(both("eth_blockNumber", json!([])), "0x14");
    let mut txs = 0;
    for n in 0..=20u64 {
        let block = both("eth_getBlockByNumber", json!([q(n), true]));
        assert_eq!(block["number"], q(n));
        for (i, tx) in block["transactions"].as_array().unwrap().iter().enumerate() {
            let by_index =
                both("eth_getTransactionByBlockNumberAndIndex", json!([q(n), q(i as u64)]));
            assert_eq!(&by_index, tx);
            let receipt = both("eth_getTransactionReceipt", json!([tx["hash"]]));
            assert_eq!(receipt["transactionHash"], tx["hash"]);
            txs += 1;
        }
    }
    assert_eq!(txs, 32);

    let [a0, a1, _] = accounts();
    let c = loupe::dev::sample_contracts();
    let counter = json!({"from": addr(a0), "to": addr(c.counter)});
    let mut balance_of = selector("balanceOf(address)").to_vec();
    balance_of.extend(pad_addr(a0));
    let balance_of = json!({"from": addr(a0), "to": addr(c.token), "input": hexs(&balance_of)});
    let mut probe = selector("probe(address,address,address)").to_vec();
    for x in [c.token, c.stamp, a1] {
        probe.extend(pad_addr(x));
    }
    let probe = json!({"from": addr(a1), "to": addr(c.prober), "input": hexs(&probe)});
    let calls = [
        (&counter, json!("0x1")),
        (&counter, json!("0x5")),
        (&counter, json!("0xd")),
        (&counter, json!("latest")),
        (&balance_of, json!("0x3")),
        (&balance_of, json!("0x5")),
        (&balance_of, json!("latest")),
        (&probe, json!("latest")),
    ];
    for (call, block) in calls {
        let r = both("trace_call", json!([call, ["trace", "stateDiff"], block]));
        assert!(r["trace"].as_array().is_some_and(|t| !t.is_empty()), "{r}");
    }
    // Spot checks that the answers compared are the meaningful ones: 10 increments (blocks
    // 11..=20) before latest; supply − 1000 for account 0 after the block-5 transfer.
    let r = a.rpc("trace_call", json!([counter, ["trace"], "latest"]));
    assert_eq!(r["output"], word(U256::from(11)));
    let r = a.rpc("trace_call", json!([balance_of, ["trace"], "latest"]));
    assert_eq!(r["output"], word(U256::from(1_000_000u64) * eth() - U256::from(1000)));
}

// ---------------------------------------------------------------------------------------------
// 2. Every sample-history transaction replayed at its parent block
// ---------------------------------------------------------------------------------------------

#[test]
fn block_1_counter_deploy() {
    let d = dev();
    let [a0, ..] = accounts();
    let r = d.replay(1, 0, 0);
    // Init code = COUNTER_INIT (CODECOPY(0, 11, 18); RETURN(0, 18)) ++ runtime.
    assert_eq!(
        r.tx["input"].as_str().unwrap(),
        format!("0x601280600b6000396000f3{}", &COUNTER_RUNTIME[2..])
    );
    assert_eq!(r.tx["to"], Value::Null);
    // Account 0's first creation: address = keccak(rlp([a0, 0]))[12..]; the runtime returned
    // by the init code becomes its code; the constructor writes no storage.
    check_create(&r, a0, 0, COUNTER_RUNTIME, json!({}));
    assert_eq!(r.root()["subtraces"], 0);
    assert_eq!(r.root()["result"]["address"], addr(loupe::dev::COUNTER));
}

#[test]
fn block_2_legacy_transfer() {
    let d = dev();
    let [_, a1, a2] = accounts();
    let r = d.replay(2, 0, 1);
    assert_eq!(r.tx["type"], "0x0");
    // Account 1 sends 1 ETH to account 2 (an existing account: `*`).
    assert_eq!(r.from(), a1);
    assert_eq!(r.tx["to"], addr(a2));
    assert_eq!(r.value(), eth());
    check_transfer(&d, &r, 1, false);
}

#[test]
fn block_2_access_list_transfer() {
    let d = dev();
    let [a0, _, a2] = accounts();
    let r = d.replay(2, 1, 1);
    assert_eq!(r.tx["type"], "0x1");
    // Account 2 sends 0.5 ETH to account 0. The access list only warms Counter's slot 0; it
    // changes gas, not state, so Counter does not appear in the diff.
    assert_eq!(r.from(), a2);
    assert_eq!(r.tx["to"], addr(a0));
    assert_eq!(r.value(), eth() / U256::from(2));
    check_transfer(&d, &r, 1, false);
    assert!(r.diff(loupe::dev::COUNTER).is_null());
}

#[test]
fn block_3_token_deploy() {
    let d = dev();
    let [a0, ..] = accounts();
    let r = d.replay(3, 0, 2);
    let supply = U256::from(1_000_000u64) * eth();
    let input = r.tx["input"].as_str().unwrap();
    // Creation code ++ abi-encoded constructor argument `supply`.
    assert!(input.ends_with(&word(supply)[2..]));
    let init = &input[..input.len() - 64];
    assert_eq!(init, loupe::dev::contracts::TOKEN_INIT);
    // `PUSH2 0x0266 DUP1 PUSH2 0x0099 PUSH0 CODECOPY PUSH0 RETURN`: runtime = init[0x99..+0x266].
    assert!(init.contains("610266806100995f395ff3fe"));
    let runtime = runtime_in(init, 0x99, 0x266);
    // Constructor: balanceOf[msg.sender] = supply (mapping at slot 0) and totalSupply = supply
    // (slot 1); both slots are born with the account.
    let storage = json!({
        word(mapping_slot(a0, 0)): born(word(supply)),
        word(U256::from(1)): born(word(supply)),
    });
    // Account 0 has nonce 1 after block 2 (its Counter deploy).
    check_create(&r, a0, 1, &runtime, storage);
    assert_eq!(r.root()["result"]["address"], addr(loupe::dev::sample_contracts().token));
    // The Transfer event is a log, not a call: no child frames.
    assert_eq!(r.root()["subtraces"], 0);
}

#[test]
fn block_4_stamp_deploy() {
    let d = dev();
    let [a0, ..] = accounts();
    let r = d.replay(4, 0, 3);
    let init = r.tx["input"].as_str().unwrap();
    assert_eq!(init, loupe::dev::contracts::STAMP_INIT);
    // `PUSH1 0xaa DUP1 PUSH1 0x1a PUSH0 CODECOPY PUSH0 RETURN`: runtime = init[0x1a..+0xaa].
    assert!(init.contains("60aa80601a5f395ff3fe"));
    let runtime = runtime_in(init, 0x1a, 0xaa);
    // Stamp has no constructor: no storage. Account 0's third creation (nonce 2).
    check_create(&r, a0, 2, &runtime, json!({}));
    assert_eq!(r.root()["result"]["address"], addr(loupe::dev::sample_contracts().stamp));
}

#[test]
fn block_4_prober_deploy() {
    let d = dev();
    let [a0, ..] = accounts();
    let r = d.replay(4, 1, 3);
    let init = r.tx["input"].as_str().unwrap();
    assert_eq!(init, loupe::dev::contracts::PROBER_INIT);
    // `PUSH2 0x0480 DUP1 PUSH2 0x001c PUSH0 CODECOPY PUSH0 RETURN`: runtime = init[0x1c..+0x480].
    assert!(init.contains("6104808061001c5f395ff3fe"));
    let runtime = runtime_in(init, 0x1c, 0x480);
    // Replayed on block 3's state, account 0 still has nonce 2: the Stamp deploy before it in
    // block 4 has not happened there, so the replay creates at account 0's nonce-2 address
    // (where Stamp was mined), not at Prober's mined address (nonce 3).
    check_create(&r, a0, 2, &runtime, json!({}));
    let c = loupe::dev::sample_contracts();
    assert_eq!(r.root()["result"]["address"], addr(c.stamp));
    assert_ne!(r.root()["result"]["address"], addr(c.prober));
    // On block 4's state (after Stamp and Prober), the same creation lands at nonce 4.
    let later = d.replay(4, 1, 4);
    check_create(&later, a0, 4, &runtime, json!({}));
}

#[test]
fn block_5_token_transfer() {
    let d = dev();
    let [a0, a1, _] = accounts();
    let token = loupe::dev::sample_contracts().token;
    let r = d.replay(5, 0, 4);
    // transfer(address,uint256)(account 1, 1000)
    let mut input = selector("transfer(address,uint256)").to_vec();
    input.extend(pad_addr(a1));
    input.extend(U256::from(1000).to_be_bytes::<32>());
    assert_eq!(r.tx["input"], hexs(&input));
    assert_eq!(r.tx["to"], addr(token));
    // `returns (bool)` true: one ABI word 0x…01.
    assert_eq!(r.res["output"], word(U256::from(1)));
    // Only storage writes and a log: the root has no children.
    assert_eq!(r.res["trace"].as_array().unwrap().len(), 1);
    assert_eq!(r.root()["subtraces"], 0);
    assert_eq!(r.root()["action"]["callType"], "call");
    assert_eq!(r.root()["error"], Value::Null);
    // balanceOf[a0] −= 1000, balanceOf[a1] += 1000 (0 before); totalSupply unchanged. Token
    // already exists, so both slots are `*`.
    let supply = U256::from(1_000_000u64) * eth();
    assert_eq!(
        r.diff(token),
        &json!({
            "balance": "=",
            "nonce": "=",
            "code": "=",
            "storage": {
                word(mapping_slot(a0, 0)): changed(word(supply), word(supply - U256::from(1000))),
                word(mapping_slot(a1, 0)): changed(word(U256::ZERO), word(U256::from(1000))),
            },
        })
    );
    assert_eq!(r.diff(a0)["nonce"], changed(q(4), q(5)));
}

#[test]
fn block_6_prober_probe() {
    let d = dev();
    let [_, a1, _] = accounts();
    let c = loupe::dev::sample_contracts();
    let r = d.replay(6, 0, 5);
    let mut input = selector("probe(address,address,address)").to_vec();
    for x in [c.token, c.stamp, a1] {
        input.extend(pad_addr(x));
    }
    assert_eq!(r.tx["input"], hexs(&input));
    // probe returns viaCall = token.balanceOf(account 1) = 1000 (the block-5 transfer).
    let thousand = word(U256::from(1000));
    assert_eq!(r.res["output"], thousand);
    // CALL, STATICCALL, DELEGATECALL in source order, each a child of the root.
    let trace = r.res["trace"].as_array().unwrap();
    assert_eq!(trace.len(), 4);
    assert_eq!(r.root()["subtraces"], 3);
    let mut balance_of = selector("balanceOf(address)").to_vec();
    balance_of.extend(pad_addr(a1));
    let mut stamp = selector("stamp(uint256)").to_vec();
    stamp.extend(U256::from(1000).to_be_bytes::<32>());
    let expected = [
        ("call", c.token, hexs(&balance_of), thousand.clone()),
        ("staticcall", c.token, hexs(&balance_of), thousand.clone()),
        // stamp() returns nothing.
        ("delegatecall", c.stamp, hexs(&stamp), "0x".to_string()),
    ];
    for (i, (call_type, to, input, output)) in expected.iter().enumerate() {
        let t = &trace[i + 1];
        assert_eq!(t["type"], "call");
        assert_eq!(t["action"]["callType"], *call_type);
        assert_eq!(t["traceAddress"], json!([i]));
        assert_eq!(t["subtraces"], 0);
        // Prober is the caller of all three (for DELEGATECALL: the code of `to` runs in
        // Prober's context, and the frame's `from` is Prober).
        assert_eq!(t["action"]["from"], addr(c.prober));
        assert_eq!(t["action"]["to"], addr(*to));
        assert_eq!(t["action"]["input"], *input);
        assert_eq!(t["action"]["value"], "0x0");
        assert_eq!(t["result"]["output"], *output);
        assert_eq!(t["error"], Value::Null);
    }
    // Stamp's code wrote Prober's slot 0 (stamped) through DELEGATECALL; probe wrote slot 1
    // (lastBalance). Both were 0. Stamp and Token storage do not change.
    assert_eq!(
        r.diff(c.prober)["storage"],
        json!({
            word(U256::ZERO): changed(word(U256::ZERO), thousand.clone()),
            word(U256::from(1)): changed(word(U256::ZERO), thousand),
        })
    );
    assert!(r.diff(c.stamp).is_null());
    assert!(r.diff(c.token).is_null());
}

#[test]
fn block_7_prober_fail() {
    let d = dev();
    let c = loupe::dev::sample_contracts();
    let r = d.replay(7, 0, 6);
    assert_eq!(r.tx["input"], hexs(&selector("fail()")));
    assert_eq!(r.tx["to"], addr(c.prober));
    // revert("prober says no") = Error(string): selector keccak("Error(string)")[..4] =
    // 0x08c379a0, then offset 0x20, length 14, and the bytes right-padded to 32.
    let mut revert = selector("Error(string)").to_vec();
    assert_eq!(revert, hex::decode("08c379a0").unwrap());
    revert.extend(U256::from(32).to_be_bytes::<32>());
    revert.extend(U256::from(14).to_be_bytes::<32>());
    let mut text = b"prober says no".to_vec();
    assert_eq!(text.len(), 14);
    text.resize(32, 0);
    revert.extend(text);
    let revert = hexs(&revert);
    assert_eq!(r.root()["error"], "Reverted");
    assert_eq!(r.root()["result"]["output"], revert);
    assert_eq!(r.res["output"], revert);
    assert_eq!(r.root()["subtraces"], 0);
    // A reverted call changes no contract state; only the sender's nonce moves.
    assert!(r.diff(c.prober).is_null());
    let sender = r.from();
    assert_eq!(r.res["stateDiff"].as_object().unwrap().len(), 1);
    assert_eq!(r.diff(sender)["nonce"], changed(q(1), q(2)));
}

#[test]
fn block_8_ephemeral_created_and_destroyed() {
    let d = dev();
    let [_, _, a2] = accounts();
    let r = d.replay(8, 0, 7);
    let gwei = U256::from(GWEI);
    assert_eq!(r.tx["input"], loupe::dev::contracts::EPHEMERAL_INIT);
    assert_eq!(r.value(), gwei);
    // Account 2 has nonce 2 after block 7 (block 2 transfer, block 7 fail()).
    let created = a2.create(2);
    let trace = r.res["trace"].as_array().unwrap();
    assert_eq!(trace.len(), 2);
    let root = r.root();
    assert_eq!(root["type"], "create");
    assert_eq!(root["action"]["value"], qu(gwei));
    assert_eq!(root["result"]["address"], addr(created));
    // The constructor self-destructs: nothing is returned, no code is deployed.
    assert_eq!(root["result"]["code"], "0x");
    assert_eq!(root["subtraces"], 1);
    // selfdestruct(payable(msg.sender)): a `suicide` child sending the 1 gwei back to account 2.
    assert_eq!(
        trace[1],
        json!({
            "type": "suicide",
            "action": {"address": addr(created), "refundAddress": addr(a2), "balance": qu(gwei)},
            "result": null,
            "subtraces": 0,
            "traceAddress": [0],
        })
    );
    // Created and destroyed in one transaction (EIP-6780 still deletes it): it never existed
    // before or after, so it is not in the diff. Account 2 gets its gwei back: balance `=`.
    assert!(r.diff(created).is_null());
    assert_eq!(r.diff(a2)["balance"], "=");
    assert_eq!(r.diff(a2)["nonce"], changed(q(2), q(3)));
}

#[test]
fn block_9_blob_transfer() {
    let d = dev();
    let [_, a1, a2] = accounts();
    let r = d.replay(9, 0, 8);
    assert_eq!(r.tx["type"], "0x3");
    assert_eq!(r.tx["blobVersionedHashes"].as_array().unwrap().len(), 1);
    // A plain 7-wei transfer from account 1 to account 2 (an account without code).
    assert_eq!(r.from(), a1);
    assert_eq!(r.tx["to"], addr(a2));
    assert_eq!(r.value(), U256::from(7));
    assert_eq!(r.res["trace"].as_array().unwrap().len(), 1);
    assert_eq!(r.root()["action"]["callType"], "call");
    assert_eq!(r.root()["action"]["value"], "0x7");
    assert_eq!(r.root()["result"], json!({"gasUsed": "0x0", "output": "0x"}));
    assert_eq!(r.res["output"], "0x");
    let before = d.balance(a2, 8);
    assert_eq!(
        r.diff(a2),
        &json!({
            "balance": changed(qu(before), qu(before + U256::from(7))),
            "nonce": "=",
            "code": "=",
            "storage": {},
        })
    );
    assert_eq!(r.diff(a1)["nonce"], changed(q(d.nonce(a1, 8)), q(d.nonce(a1, 8) + 1)));
}

#[test]
fn block_9_blob_replay_without_gas_price_pays_no_gas_fee() {
    let d = dev();
    let [_, a1, _] = accounts();
    let r = d.replay(9, 0, 8);
    // The replay gives no gasPrice/maxFeePerGas/maxPriorityFeePerGas, so it pays nothing for
    // gas and the base fee is taken as 0 (behaviour.md §3.2). It does give maxFeePerBlobGas,
    // so the blob gas is paid as in a mined blob transaction (EIP-4844, as geth does):
    // 1 blob × GAS_PER_BLOB 2^17 at the blob base fee of block 8, which is the minimum 1 wei
    // because no blob was mined before (excessBlobGas 0).
    let block8 = d.rpc("eth_getBlockByNumber", json!(["0x8", false]));
    assert_eq!(block8["excessBlobGas"], "0x0");
    let blob_fee = U256::from(1u64 << 17);
    let before = d.balance(a1, 8);
    assert_eq!(
        r.diff(a1)["balance"],
        changed(qu(before), qu(before - U256::from(7) - blob_fee)),
        "sender must pay value + blob fee only, no gas × base fee"
    );
}

#[test]
fn block_10_set_code_call_runs_counter_on_account_2() {
    let d = dev();
    let [a0, _, a2] = accounts();
    let counter = loupe::dev::COUNTER;
    let r = d.replay(10, 0, 9);
    assert_eq!(r.tx["type"], "0x4");
    assert_eq!(r.from(), a0);
    assert_eq!(r.tx["to"], addr(a2));
    let auth = &r.tx["authorizationList"];
    assert_eq!(auth.as_array().unwrap().len(), 1);
    assert_eq!(auth[0]["address"], addr(counter));
    // Account 2's nonce after block 9 is 3 (blocks 2, 7, 8), which the authorization carries.
    assert_eq!(d.nonce(a2, 9), 3);
    assert_eq!(auth[0]["nonce"], "0x3");
    // The authorization installs the delegation designator 0xef0100 ++ Counter in account 2
    // and bumps its nonce; the call then runs Counter's code on account 2's own storage, whose
    // slot 0 is 0 (Counter's own slot 0 is 0 too at block 9, but is not touched).
    check_counter_call(&r, a2, 0);
    assert_eq!(r.res["output"], word(U256::from(1)));
    let designator = format!("0xef0100{}", &addr(counter)[2..]);
    assert_eq!(r.diff(a2)["code"], changed("0x", designator));
    assert_eq!(r.diff(a2)["nonce"], changed(q(3), q(4)));
    assert!(r.diff(counter).is_null(), "Counter's own storage is not touched");
    assert_eq!(r.diff(a0)["nonce"], changed(q(d.nonce(a0, 9)), q(d.nonce(a0, 9) + 1)));
}

/// Counter call of block `b` (11..=20), replayed on block b−1: Counter was incremented once in
/// each of blocks 11..b−1 (block 10's 7702 call ran Counter's code on account 2's storage,
/// not Counter's), so slot 0 holds b − 11.
fn counter_call_test(b: u64) {
    let d = dev();
    let [a0, ..] = accounts();
    let r = d.replay(b, 0, b - 1);
    assert_eq!(r.from(), a0);
    assert_eq!(r.tx["to"], addr(loupe::dev::COUNTER));
    assert_eq!(r.tx["input"], "0x");
    check_counter_call(&r, loupe::dev::COUNTER, b - 11);
    assert_eq!(r.res["output"], word(U256::from(b - 10)));
}

/// Payment of block `b` (11..=20): account 1 pays b gwei to a fresh address.
fn fresh_payment_test(b: u64) {
    let d = dev();
    let [_, a1, _] = accounts();
    let r = d.replay(b, 1, b - 1);
    assert_eq!(r.tx["type"], "0x2");
    assert_eq!(r.from(), a1);
    assert_eq!(r.tx["to"], addr(fresh(b)));
    assert_eq!(r.value(), U256::from(b * GWEI));
    check_transfer(&d, &r, b - 1, true);
}

macro_rules! history_block_tests {
    ($($b:literal => $counter:ident, $pay:ident;)*) => {$(
        #[test]
        fn $counter() {
            counter_call_test($b);
        }
        #[test]
        fn $pay() {
            fresh_payment_test($b);
        }
    )*};
}

history_block_tests! {
    11 => block_11_counter_call, block_11_fresh_payment;
    12 => block_12_counter_call, block_12_fresh_payment;
    13 => block_13_counter_call, block_13_fresh_payment;
    14 => block_14_counter_call, block_14_fresh_payment;
    15 => block_15_counter_call, block_15_fresh_payment;
    16 => block_16_counter_call, block_16_fresh_payment;
    17 => block_17_counter_call, block_17_fresh_payment;
    18 => block_18_counter_call, block_18_fresh_payment;
    19 => block_19_counter_call, block_19_fresh_payment;
    20 => block_20_counter_call, block_20_fresh_payment;
}

#[test]
fn replays_after_the_block_see_its_effects() {
    let d = dev();
    let [a0, a1, a2] = accounts();
    let c = loupe::dev::sample_contracts();

    // Counter call of block 13: on block 12 slot 0 is 2 (→ 3); on block 13, after the call was
    // mined, it is 3 (→ 4).
    let before = d.replay(13, 0, 12);
    let after = d.replay(13, 0, 13);
    check_counter_call(&before, c.counter, 2);
    check_counter_call(&after, c.counter, 3);
    assert_ne!(before.res["output"], after.res["output"]);

    // Payment of block 15: on block 15 the address exists with 15 gwei, so it is no longer born
    // but changes `*` from 15 to 30 gwei.
    let r = d.replay(15, 1, 15);
    let v = U256::from(15 * GWEI);
    assert_eq!(
        r.diff(fresh(15)),
        &json!({
            "balance": changed(qu(v), qu(v + v)),
            "nonce": "=",
            "code": "=",
            "storage": {},
        })
    );

    // Token transfer of block 5 replayed on block 5: balances are supply − 1000 and 1000.
    let r = d.replay(5, 0, 5);
    let s = U256::from(1_000_000u64) * eth();
    let k = U256::from(1000);
    assert_eq!(
        r.diff(c.token)["storage"],
        json!({
            word(mapping_slot(a0, 0)): changed(word(s - k), word(s - k - k)),
            word(mapping_slot(a1, 0)): changed(word(k), word(k + k)),
        })
    );

    // Prober.probe replayed on block 6: both slots already hold 1000, and writing the same
    // value is no change, so Prober is not in the diff; the answer is still 1000.
    let r = d.replay(6, 0, 6);
    assert_eq!(r.res["output"], word(k));
    assert!(r.diff(c.prober).is_null());

    // The 7702 transaction replayed on block 10: account 2 already delegates to Counter and
    // its nonce is 4, so the authorization (nonce 3) is skipped (EIP-7702: a nonce mismatch
    // skips the tuple) and account 2's code and nonce stay; Counter's code runs on account 2's
    // slot 0, now 1.
    let r = d.replay(10, 0, 10);
    check_counter_call(&r, a2, 1);
    assert_eq!(r.res["output"], word(U256::from(2)));
    assert_eq!(r.diff(a2)["code"], "=");
    assert_eq!(r.diff(a2)["nonce"], "=");
}

// ---------------------------------------------------------------------------------------------
// 3. An interrupted first build
// ---------------------------------------------------------------------------------------------

/// Starts `loupe dev` on `dir` on a free port, waits for its banner; returns the process and
/// its URL.
fn start_dev(dir: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["dev", "--datadir"])
        .arg(dir)
        .args(["--http.port", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some((_, url)) = line.split_once("serving JSON-RPC at ") {
            return (child, url.trim().to_string());
        }
    }
    let status = child.wait().unwrap();
    panic!("loupe dev on {} ended ({status}) without serving", dir.display());
}

/// The chain `loupe dev` serves from `dir`: every block hash, genesis to head.
fn served_hashes(dir: &Path) -> Vec<String> {
    let (mut child, url) = start_dev(dir);
    let client = reqwest::blocking::Client::new();
    let rpc = |method: &str, params: Value| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r: Value = client.post(&url).json(&body).send().unwrap().json().unwrap();
        r["result"].clone()
    };
    let head =
        u64::from_str_radix(rpc("eth_blockNumber", json!([])).as_str().unwrap()[2..].as_ref(), 16)
            .unwrap();
    let hashes = (0..=head)
        .map(|n| {
            rpc("eth_getBlockByNumber", json!([q(n), false]))["hash"].as_str().unwrap().to_string()
        })
        .collect();
    child.kill().unwrap();
    child.wait().unwrap();
    hashes
}

/// What a killed build left in `dir`: no database, or the whole chain (head = the sample
/// history's last block); never part of it.
fn assert_whole_or_nothing(dir: &Path, moment: &str) {
    if !dir.join(loupe::storage::DB_FILE).exists() {
        return;
    }
    let db = Database::open(dir).unwrap();
    let head = db.begin_read().unwrap().head().unwrap();
    assert_eq!(head, Some(loupe::dev::HISTORY_BLOCKS), "killed {moment}: a partial chain");
}

/// Spawns `loupe dev` on `dir` and kills it (SIGKILL) once `ready` says so, or once its build
/// is over (the chain in place, no scratch left), or when it has ended or 30 s have passed.
fn kill_when(dir: &Path, ready: impl Fn() -> bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["dev", "--datadir"])
        .arg(dir)
        .args(["--http.port", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let built =
        || dir.join(loupe::storage::DB_FILE).exists() && !dir.join(loupe::dev::SCRATCH).exists();
    while !ready() && !built() && std::time::Instant::now() < until {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let _ = child.kill();
    child.wait().unwrap();
}

/// When to kill a build, asked of its datadir.
type Moment = Box<dyn Fn(&Path) -> bool>;

#[test]
fn an_interrupted_first_build_is_never_served_partial() {
    // The independent truth: an uninterrupted build in a datadir of its own.
    let clean = tempfile::tempdir().unwrap();
    let want = served_hashes(clean.path());
    assert_eq!(want.len() as u64, loupe::dev::HISTORY_BLOCKS + 1);

    let scratch_db = |d: &Path| d.join(loupe::dev::SCRATCH).join(loupe::storage::DB_FILE);
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    // Each moment alone on a fresh datadir, then all of them one after the other on one.
    let moments: Vec<(&str, Moment)> = vec![
        ("before anything is written", Box::new(|_: &Path| true)),
        (
            "once the scratch datadir exists",
            Box::new(|d: &Path| d.join(loupe::dev::SCRATCH).exists()),
        ),
        ("once the scratch database exists", Box::new(move |d: &Path| scratch_db(d).exists())),
        (
            "once the scratch database has grown",
            Box::new(move |d: &Path| size(&scratch_db(d)) > 300_000),
        ),
        (
            "once the datadir's database exists",
            Box::new(|d: &Path| d.join(loupe::storage::DB_FILE).exists()),
        ),
        (
            "a while into the build",
            Box::new(|_: &Path| {
                std::thread::sleep(std::time::Duration::from_millis(150));
                true
            }),
        ),
    ];
    let shared = tempfile::tempdir().unwrap();
    for (moment, ready) in &moments {
        let dir = tempfile::tempdir().unwrap();
        kill_when(dir.path(), || ready(dir.path()));
        assert_whole_or_nothing(dir.path(), moment);
        assert_eq!(served_hashes(dir.path()), want, "restarted after a kill {moment}");
        assert!(!dir.path().join(loupe::dev::SCRATCH).exists(), "{moment}");

        kill_when(shared.path(), || ready(shared.path()));
        assert_whole_or_nothing(shared.path(), moment);
    }
    assert_eq!(served_hashes(shared.path()), want, "restarted after every kill");

    // A datadir an older loupe left when killed mid-history: genesis and four blocks.
    let old = tempfile::tempdir().unwrap();
    {
        let db = Database::open(old.path()).unwrap();
        let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
        for _ in 0..4 {
            loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
        }
    }
    assert_eq!(served_hashes(old.path()), want, "a partial history left by an older loupe");
}
