//! Acceptance tests with real client libraries: web3.py, ethers v6, viem and foundry's cast,
//! each run against a fresh dev chain served in-process (the scripts are in `tests/clients/`;
//! the libraries are installed on first use by `support/clients.rs`).
//!
//! The scripts only report what their library returned; every expectation here comes from an
//! independent source, never from loupe's own answers:
//!
//! - the sample history as `src/dev/sample.rs`, `contracts/Sample.sol` and README's table
//!   describe it (addresses, transfers and their events, the hand-assembled `Counter`, whose
//!   gas follows from its opcodes);
//! - header fields (base fees, gas limit, state roots) and the EIP-1559 base-fee rule;
//! - geth's documented estimate search and fee-oracle rules (`docs/design.md`) applied to gas
//!   figures derived from the sources;
//! - cross-checks between two paths: a proof verified against the block's `stateRoot` (by the
//!   script's own Merkle-Patricia verifier, or by `alloy-trie` here), a proven slot against
//!   `eth_getStorageAt`, cast's own re-execution against the stored receipt, an estimate
//!   against `eth_call` with that much gas.
//!
//! The web3.py filter test needs new blocks while the node serves: it builds them into the
//! served datadir with `loupe::dev::BlockBuilder`, as the dev chain's own history is built.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/clients.rs"]
mod tools;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy_primitives::{Address, B256, Bytes, TxKind, U256, address, hex, keccak256};
use alloy_rlp::Encodable;
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use loupe::chain::ChainSpec;
use loupe::rpc::{RpcConfig, RpcServer};
use loupe::storage::Database;
use serde_json::{Value, json};

/// How long one client script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// Independent truths: README's dev accounts and sample-history table, src/dev/sample.rs,
// contracts/Sample.sol.
// ---------------------------------------------------------------------------------------------

/// The dev accounts (README "Run it").
const A0: Address = address!("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
const A1: Address = address!("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
const A2: Address = address!("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC");
/// Their keys (README "Run it").
const KEYS: [&str; 3] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
];
/// `Counter` (block 1) and `Token` (block 3), README's table.
const COUNTER: Address = address!("0x5fbdb2315678afecb367f032d93f642f64180aa3");
const TOKEN: Address = address!("0xe7f1725e7734ce288f8367e1bb143e90bb3f0512");
/// `Counter`'s runtime (src/dev/sample.rs).
const COUNTER_RUNTIME: &str = "6000546001018060005560005260206000f3";

/// `Stamp` and `Prober` (block 4): account 0's creations with nonces 2 and 3 (after Counter
/// and Token).
fn stamp() -> Address {
    A0.create(2)
}
fn prober() -> Address {
    A0.create(3)
}

const GWEI: u128 = 1_000_000_000;
/// The dev genesis gas limit (0x1c9c380), which every dev block keeps.
const GAS_LIMIT: u64 = 30_000_000;
/// The dev genesis base fee (0x3b9aca00).
const GENESIS_BASE_FEE: u128 = GWEI;
/// Blocks of the sample history.
const HEAD: u64 = 20;
/// Token's supply, minted to account 0 in its constructor (block 3).
fn supply() -> U256 {
    U256::from(1_000_000u64) * U256::from(10u64).pow(U256::from(18u64))
}
/// Nonces the dev accounts have used by block 20: account 0 sent one transaction in blocks 1,
/// 3, 5 and 10, two in block 4, and one in each of blocks 11–20; account 1 one in blocks 2, 6,
/// 9 and 11–20.
const A0_NEXT_NONCE: u64 = 16;
const A1_NEXT_NONCE: u64 = 13;

/// `keccak256("Transfer(address,address,uint256)")`.
fn transfer_topic() -> B256 {
    keccak256("Transfer(address,address,uint256)")
}

/// The first four bytes of `keccak256(signature)`, as hex.
fn selector(signature: &str) -> String {
    hex::encode(&keccak256(signature)[..4])
}

/// A `Transfer(from, to, value)` event of `Token`.
#[derive(Debug, Clone, PartialEq)]
struct Transfer {
    block: u64,
    from: Address,
    to: Address,
    value: U256,
}

/// Token's events in the sample history, which has no other logs (Counter, Stamp, Prober and
/// Ephemeral emit none): the mint in its constructor (block 3) and `transfer(account 1, 1000)`
/// (block 5). Prober's calls in block 6 only read balances.
fn history_transfers() -> Vec<Transfer> {
    vec![
        Transfer { block: 3, from: Address::ZERO, to: A0, value: supply() },
        Transfer { block: 5, from: A0, to: A1, value: U256::from(1000) },
    ]
}

/// Storage slot of `Token.balanceOf[who]` (the mapping is the first state variable: slot 0).
fn balance_slot(who: Address) -> B256 {
    keccak256([B256::left_padding_from(who.as_slice()).0, B256::ZERO.0].concat())
}

/// Execution gas of one call to `Counter` (intrinsic gas excluded), from its opcodes:
/// PUSH1 0, SLOAD, PUSH1 1, ADD, DUP1, PUSH1 0, SSTORE, PUSH1 0, MSTORE, PUSH1 32, PUSH1 0,
/// RETURN. Nine "very low" opcodes (3 each), one word of memory (3), SLOAD of slot 0 (2,100
/// cold, 100 when warmed by an access list), and SSTORE of the now-warm slot: 20,000 when it
/// held zero, else 2,900 (5,000 less the cold surcharge SLOAD already paid, EIP-2929). RETURN
/// costs nothing.
fn counter_exec_gas(slot_was_zero: bool, slot_warm: bool) -> u64 {
    let sload = if slot_warm { 100 } else { 2_100 };
    let sstore = if slot_was_zero { 20_000 } else { 2_900 };
    9 * 3 + 3 + sload + sstore
}

/// Gas of a transaction calling `Counter` with an empty calldata (21,000 intrinsic) once slot 0
/// is nonzero, as at block 20: the least gas such a call succeeds with (no refunds, and every
/// SSTORE has more than the 2,300 stipend left).
fn counter_call_gas() -> u64 {
    21_000 + counter_exec_gas(false, false)
}

/// Gas used by the blocks 11–20 (src/dev/sample.rs): a Counter call (slot 0 goes 0 → 1 in
/// block 11, then stays nonzero) and a plain 21,000-gas payment to a fresh address.
fn history_gas_used(block: u64) -> u64 {
    assert!((11..=20).contains(&block));
    21_000 + counter_exec_gas(block == 11, false) + 21_000
}

/// The EIP-1559 base fee of the block after one with `base_fee`, `gas_used`, `gas_limit`
/// (elasticity 2, change denominator 8).
fn next_base_fee(base_fee: u128, gas_used: u64, gas_limit: u64) -> u128 {
    let target = u128::from(gas_limit / 2);
    let used = u128::from(gas_used);
    match used.cmp(&target) {
        std::cmp::Ordering::Equal => base_fee,
        std::cmp::Ordering::Greater => base_fee + (base_fee * (used - target) / target / 8).max(1),
        std::cmp::Ordering::Less => base_fee - base_fee * (target - used) / target / 8,
    }
}

/// geth's `eth_estimateGas` search (docs/design.md "Estimates") for a call that succeeds with
/// any gas limit of at least `min_ok`, uses `used` gas unconstrained (with `refund` refunded),
/// under an upper bound `hi`: try `(used + refund + 2300) × 64/63`, then bisect (skewed to at
/// most twice the lower end) until within 1.5% of the answer.
fn geth_estimate(min_ok: u64, used: u64, refund: u64, mut hi: u64) -> u64 {
    let ok = |gas: u64| gas >= min_ok;
    assert!(ok(hi));
    let mut lo = used - 1;
    let optimistic = (used + refund + 2_300) * 64 / 63;
    if optimistic < hi {
        if ok(optimistic) {
            hi = optimistic;
        } else {
            lo = optimistic;
        }
    }
    while lo + 1 < hi {
        if ((hi - lo) as f64) / (hi as f64) < 0.015 {
            break;
        }
        let mid = ((hi + lo) / 2).min(lo * 2);
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// What `eth_estimateGas` must answer for a call to `Counter` at block 20: geth's search over a
/// call that needs exactly [`counter_call_gas`] (the upper bound, the block gas limit capped by
/// EIP-7825's 2^24, is far above it).
fn counter_estimate() -> u64 {
    let g = counter_call_gas();
    geth_estimate(g, g, 0, GAS_LIMIT.min(1 << 24))
}

/// The suggested tip (`eth_maxPriorityFeePerGas`) at block 20, by geth's oracle rule
/// (docs/design.md "Fees": the 60th percentile of the 3 lowest effective tips of each of the
/// last 20 blocks). Blocks 1–20 hold 32 transactions; all but the two of block 2 (legacy and
/// access-list, priced at 10 gwei) are EIP-1559/blob/7702 with a 1 gwei tip and a 100 gwei fee
/// cap, far above any base fee here, so they tip exactly 1 gwei. 30 of the 32 values are 1 gwei,
/// and so is their 60th percentile.
const SUGGESTED_TIP: u128 = GWEI;

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A dev chain (genesis and the 20-block sample history) built into a temporary datadir and
/// served in-process on a free port. The database stays reachable to build more blocks.
struct Dev {
    url: String,
    db: Arc<Database>,
    spec: ChainSpec,
    client: reqwest::blocking::Client,
    server: Option<RpcServer>,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Dev {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
        assert_eq!(loupe::dev::build_sample_history(&db, &spec).unwrap(), HEAD);
        let db = Arc::new(db);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let config = RpcConfig { addr: "127.0.0.1:0".parse().unwrap(), ..RpcConfig::default() };
        let server = rt.block_on(loupe::rpc::start(db.clone(), spec.clone(), config)).unwrap();
        let url = format!("http://{}", server.addr);
        let client = reqwest::blocking::Client::new();
        Self { url, db, spec, client, server: Some(server), rt, _dir: dir }
    }

    /// The `result` of a JSON-RPC call; panics on an error.
    fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp: Value = self.client.post(&self.url).json(&body).send().unwrap().json().unwrap();
        assert!(resp.get("error").is_none(), "{method} {params}: {resp}");
        resp["result"].clone()
    }

    /// Block `n` (header fields, transaction hashes).
    fn block(&self, n: u64) -> Value {
        self.rpc("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))
    }

    fn base_fee(&self, n: u64) -> u128 {
        num(&self.block(n)["baseFeePerGas"])
    }

    /// The hash of the `i`-th transaction of block `n`.
    fn tx_hash(&self, n: u64, i: usize) -> String {
        self.block(n)["transactions"][i].as_str().unwrap().to_string()
    }

    /// Seals `txs` into the next block of the served datadir; returns its hash.
    fn build_block(&self, txs: Vec<(usize, TxEip1559)>) -> B256 {
        let mut envelopes = Vec::new();
        let mut senders = Vec::new();
        for (key, tx) in txs {
            let signer = PrivateKeySigner::from_str(KEYS[key]).unwrap();
            let sig = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
            envelopes.push(TxEnvelope::from(tx.into_signed(sig)));
            senders.push(signer.address());
        }
        let block =
            loupe::dev::BlockBuilder::new(&self.db, &self.spec).build(envelopes, &senders).unwrap();
        block.header.hash_slow()
    }

    /// The JSON the client scripts take: the node's URL and the sample history's addresses.
    fn script_config(&self) -> String {
        json!({
            "url": self.url,
            "counter": addr(COUNTER),
            "token": addr(TOKEN),
            "stamp": addr(stamp()),
            "prober": addr(prober()),
            "accounts": [addr(A0), addr(A1), addr(A2)],
            "block5Hash": self.block(5)["hash"],
        })
        .to_string()
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.rt.block_on(server.stop());
        }
    }
}

/// A Token transfer (or any call) as the history signs them: EIP-1559, 1 gwei tip, 100 gwei
/// cap, 200,000 gas.
fn eip1559(nonce: u64, to: Address, input: Vec<u8>) -> TxEip1559 {
    TxEip1559 {
        chain_id: 1337,
        nonce,
        gas_limit: 200_000,
        max_fee_per_gas: 100 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to: TxKind::Call(to),
        value: U256::ZERO,
        access_list: Default::default(),
        input: Bytes::from(input),
    }
}

/// Calldata of `Token.transfer(to, value)`.
fn transfer_call(to: Address, value: u64) -> Vec<u8> {
    let mut data = hex::decode(selector("transfer(address,uint256)")).unwrap();
    data.extend_from_slice(B256::left_padding_from(to.as_slice()).as_slice());
    data.extend_from_slice(&U256::from(value).to_be_bytes::<32>());
    data
}

fn addr(a: Address) -> String {
    format!("{a:#x}")
}

/// A number as the scripts print it: a JSON number, a decimal string or a 0x-quantity.
fn num(v: &Value) -> u128 {
    match v {
        Value::Number(n) => n.as_u64().map(u128::from).unwrap_or_else(|| panic!("not a u64: {v}")),
        Value::String(s) => match s.strip_prefix("0x") {
            Some(h) => u128::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{s}: {e}")),
            None => s.parse().unwrap_or_else(|e| panic!("{s}: {e}")),
        },
        _ => panic!("not a number: {v}"),
    }
}

fn u256(v: &Value) -> U256 {
    match v {
        Value::Number(n) => U256::from(n.as_u64().unwrap()),
        Value::String(s) => match s.strip_prefix("0x") {
            Some("") => U256::ZERO,
            Some(h) => U256::from_str_radix(h, 16).unwrap(),
            None => U256::from_str(s).unwrap(),
        },
        _ => panic!("not a number: {v}"),
    }
}

fn address_of(v: &Value) -> Address {
    v.as_str().unwrap_or_else(|| panic!("not an address: {v}")).to_lowercase().parse().unwrap()
}

/// Collects a reader's lines on a thread.
fn lines_of(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A running client script: its stdin, stdout lines and stderr text.
struct Script {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    deadline: Instant,
}

impl Script {
    fn spawn(name: &str, cmd: &mut Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stdout = lines_of(child.stdout.take().unwrap());
        let stderr = lines_of(child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        let deadline = Instant::now() + SCRIPT_TIMEOUT;
        Self { name: name.into(), child, stdin, stdout, stderr, deadline }
    }

    fn stderr_text(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// The next line the script prints (`None` once it exited); panics past the deadline.
    fn line(&mut self) -> Option<String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.stdout.recv_timeout(left) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                panic!("{} timed out; stderr:\n{}", self.name, self.stderr_text());
            }
        }
    }

    /// The next JSON line the script prints (other lines are echoed); panics when it exits
    /// first.
    fn json(&mut self) -> Value {
        loop {
            let Some(line) = self.line() else {
                let status = self.child.wait().unwrap();
                panic!(
                    "{} exited ({status}) before printing its result; stderr:\n{}",
                    self.name,
                    self.stderr_text()
                );
            };
            if line.trim_start().starts_with('{') {
                return serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("{}: bad JSON ({e}): {line}", self.name));
            }
            eprintln!("{}: {line}", self.name);
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the script to exit successfully.
    fn finish(mut self) {
        self.stdin.take();
        while self.line().is_some() {}
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "{} failed ({status}); stderr:\n{}",
            self.name,
            self.stderr_text()
        );
    }
}

/// Runs a client script to completion and returns the one JSON object it prints.
fn run_json(name: &str, cmd: &mut Command) -> Value {
    let mut s = Script::spawn(name, cmd);
    let v = s.json();
    s.finish();
    eprintln!("{name}: {v}");
    v
}

/// The JSON-RPC calls a script recorded that came back with an error, except those `allowed`
/// to (by method).
fn unexpected_errors<'a>(calls: &'a Value, allowed: &[&str]) -> Vec<&'a Value> {
    calls
        .as_array()
        .unwrap_or_else(|| panic!("no call list: {calls}"))
        .iter()
        .filter(|c| c.get("error").is_some_and(|e| !e.is_null()))
        .filter(|c| !allowed.contains(&c["method"].as_str().unwrap_or_default()))
        .collect()
}

fn methods(calls: &Value) -> Vec<&str> {
    calls.as_array().unwrap().iter().filter_map(|c| c["method"].as_str()).collect()
}

/// Checks a raw log (address, topics, data, block number) against a Transfer.
fn check_raw_log(log: &Value, t: &Transfer, what: &str) {
    assert_eq!(address_of(&log["address"]), TOKEN, "{what}: {log}");
    assert_eq!(num(&log["blockNumber"]), u128::from(t.block), "{what}: {log}");
    let topics: Vec<B256> = log["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect();
    let want = vec![
        transfer_topic(),
        B256::left_padding_from(t.from.as_slice()),
        B256::left_padding_from(t.to.as_slice()),
    ];
    assert_eq!(topics, want, "{what}: topics of {log}");
    assert_eq!(u256(&log["data"]), t.value, "{what}: data of {log}");
}

/// Checks a decoded Transfer event (`from`, `to`, `value`, `blockNumber`).
fn check_event(ev: &Value, t: &Transfer, what: &str) {
    assert_eq!(num(&ev["blockNumber"]), u128::from(t.block), "{what}: {ev}");
    assert_eq!(address_of(&ev["from"]), t.from, "{what}: {ev}");
    assert_eq!(address_of(&ev["to"]), t.to, "{what}: {ev}");
    assert_eq!(u256(&ev["value"]), t.value, "{what}: {ev}");
}

fn check_events(got: &Value, want: &[Transfer], what: &str) {
    let got = got.as_array().unwrap_or_else(|| panic!("{what}: not a list: {got}"));
    assert_eq!(got.len(), want.len(), "{what}: {got:?}");
    for (g, w) in got.iter().zip(want) {
        check_event(g, w, what);
    }
}

fn check_raw_logs(got: &Value, want: &[Transfer], what: &str) {
    let got = got.as_array().unwrap_or_else(|| panic!("{what}: not a list: {got}"));
    assert_eq!(got.len(), want.len(), "{what}: {got:?}");
    for (g, w) in got.iter().zip(want) {
        check_raw_log(g, w, what);
    }
}

// ---------------------------------------------------------------------------------------------
// web3.py: get_logs, estimate_gas, fee_history, get_proof, create_filter / get_new_entries
// ---------------------------------------------------------------------------------------------

#[test]
fn web3py_logs_estimates_fee_history_proofs_and_filters() {
    let Some(python) = tools::web3_python() else { return };
    let dev = Dev::start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/web3py_check.py");
    let mut s =
        Script::spawn("web3py", Command::new(&python).arg(&script).arg(dev.script_config()));

    // 1. Reads at the head of the sample history.
    let out = s.json();
    eprintln!("web3py: {out}");
    assert_eq!(out["stage"], "static", "{out}");
    assert_eq!(out["chainId"], 1337);
    assert_eq!(out["head"], HEAD);

    let transfers = history_transfers();
    check_raw_logs(&out["logsAll"], &transfers, "get_logs over the whole chain");
    check_raw_logs(&out["logsTransfer"], &transfers, "get_logs by address and topic");
    check_raw_logs(&out["logsToA1"], &transfers[1..], "get_logs by recipient topic");
    check_events(&out["eventsTransfer"], &transfers, "Transfer.get_logs");

    assert_eq!(
        num(&out["estimateCounter"]),
        u128::from(counter_estimate()),
        "estimate_gas Counter"
    );
    let transfer_estimate = num(&out["estimateTransfer"]);
    assert!(
        (21_000..100_000).contains(&transfer_estimate),
        "estimate_gas Token.transfer: {transfer_estimate}"
    );

    // fee_history(10, latest, [25, 75]): blocks 11–20. Base fees: the headers', and each the
    // EIP-1559 successor of the one before with the gas the history's transactions use; the
    // last is the next block's. Rewards: both transactions of each block tip exactly 1 gwei.
    let fh = &out["feeHistory"];
    assert_eq!(fh["oldestBlock"], 11, "{fh}");
    let base: Vec<u128> = fh["baseFeePerGas"].as_array().unwrap().iter().map(num).collect();
    assert_eq!(base.len(), 11, "{fh}");
    for (i, b) in (11..=HEAD).enumerate() {
        assert_eq!(base[i], dev.base_fee(b), "fee_history base fee of block {b}");
        assert_eq!(
            base[i + 1],
            next_base_fee(base[i], history_gas_used(b), GAS_LIMIT),
            "fee_history base fee after block {b}"
        );
        let ratio = fh["gasUsedRatio"][i].as_f64().unwrap();
        let want = history_gas_used(b) as f64 / GAS_LIMIT as f64;
        assert!((ratio - want).abs() < 1e-12, "gasUsedRatio of block {b}: {ratio} vs {want}");
        let reward: Vec<u128> = fh["reward"][i].as_array().unwrap().iter().map(num).collect();
        assert_eq!(reward, vec![GWEI, GWEI], "fee_history reward of block {b}");
    }
    // fee_history(4, 3, [50]): blocks 0–3. Genesis: 1 gwei, empty (ratio 0, reward 0); block 1
    // follows an empty block (1 gwei × 7/8); block 2's two transactions pay 10 gwei a gas
    // (legacy and access-list), so its median tip is 10 gwei less its base fee; blocks 1 and 3
    // hold one EIP-1559 creation tipping 1 gwei.
    let fh = &out["feeHistoryAt3"];
    assert_eq!(fh["oldestBlock"], 0, "{fh}");
    let base: Vec<u128> = fh["baseFeePerGas"].as_array().unwrap().iter().map(num).collect();
    assert_eq!(base[0], GENESIS_BASE_FEE);
    assert_eq!(base[1], GENESIS_BASE_FEE * 7 / 8);
    let headers: Vec<u128> = (0..=4).map(|n| dev.base_fee(n)).collect();
    assert_eq!(base, headers, "fee_history base fees of blocks 0–4");
    assert_eq!(fh["gasUsedRatio"][0].as_f64(), Some(0.0));
    let reward: Vec<u128> = fh["reward"].as_array().unwrap().iter().map(|r| num(&r[0])).collect();
    assert_eq!(reward, vec![0, GWEI, 10 * GWEI - headers[2], GWEI], "fee_history rewards 0–3");

    // get_proof: each proof verified by the script's own Merkle-Patricia verifier against the
    // block's stateRoot, its storage values equal to get_storage_at and to the history's.
    let proofs = out["proofs"].as_array().unwrap();
    assert_eq!(proofs.len(), 4);
    for p in proofs {
        assert_eq!(p["verified"], true, "proof does not verify: {p}");
        for s in p["storage"].as_array().unwrap() {
            assert_eq!(u256(&s["returned"]), u256(&s["proven"]), "{s}");
            assert_eq!(u256(&s["proven"]), u256(&s["getStorageAt"]), "{s}");
        }
        if !p["account"].is_null() {
            let (a, r) = (&p["account"], &p["returned"]);
            assert_eq!(num(&a["nonce"]), num(&r["nonce"]), "{p}");
            assert_eq!(u256(&a["balance"]), u256(&r["balance"]), "{p}");
            assert_eq!(a["storageHash"], r["storageHash"], "{p}");
            assert_eq!(a["codeHash"], r["codeHash"], "{p}");
        }
    }
    let values = |p: &Value| -> Vec<U256> {
        p["storage"].as_array().unwrap().iter().map(|s| u256(&s["proven"])).collect()
    };
    // Counter: a contract (nonce 1, EIP-161) whose code is the hand-assembled runtime, called
    // three times by block 13 and ten by block 20; slot 1 is never written.
    let counter_code_hash = format!("{:#x}", keccak256(hex::decode(COUNTER_RUNTIME).unwrap()));
    for p in &proofs[..2] {
        assert_eq!(p["account"]["nonce"], 1, "{p}");
        assert_eq!(p["account"]["codeHash"], counter_code_hash.as_str(), "{p}");
    }
    assert_eq!(values(&proofs[0]), vec![U256::from(3)], "Counter slot 0 at block 13");
    assert_eq!(values(&proofs[1]), vec![U256::from(10), U256::ZERO], "Counter slots at head");
    // Token: balanceOf[account 0] = supply − 1000, balanceOf[account 1] = 1000, totalSupply.
    assert_eq!(
        values(&proofs[2]),
        vec![supply() - U256::from(1000), U256::from(1000), supply()],
        "Token balances and supply at head"
    );
    let keys: Vec<B256> = proofs[2]["storage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| B256::from(u256(&s["key"])))
        .collect();
    assert_eq!(keys[..2], [balance_slot(A0), balance_slot(A1)]);
    // 0x…dEaD never existed: the proof shows it absent, with a zero balance and nonce.
    assert!(proofs[3]["account"].is_null(), "0xdead must be proven absent: {}", proofs[3]);
    assert_eq!(u256(&proofs[3]["returned"]["balance"]), U256::ZERO);
    assert_eq!(num(&proofs[3]["returned"]["nonce"]), 0);

    let errors = unexpected_errors(&out["calls"], &[]);
    assert!(errors.is_empty(), "JSON-RPC errors: {errors:?}");

    // 2. Filters installed at the head and polled: nothing new yet.
    let ready = s.json();
    eprintln!("web3py: {ready}");
    assert_eq!(ready["stage"], "ready", "{ready}");
    assert_eq!(ready["before"], json!({"events": [], "blocks": []}), "{ready}");

    // 3. Two new blocks while the node serves: block 21 with Token.transfer(account 1, 42),
    // block 22 with Token.transfer(account 2, 43) and a Counter call (no log).
    let h21 = dev.build_block(vec![(0, eip1559(A0_NEXT_NONCE, TOKEN, transfer_call(A1, 42)))]);
    let h22 = dev.build_block(vec![
        (0, eip1559(A0_NEXT_NONCE + 1, TOKEN, transfer_call(A2, 43))),
        (1, eip1559(A1_NEXT_NONCE, COUNTER, Vec::new())),
    ]);
    s.send("go");
    let out = s.json();
    eprintln!("web3py: {out}");
    assert_eq!(out["stage"], "filters", "{out}");
    let new = [
        Transfer { block: 21, from: A0, to: A1, value: U256::from(42) },
        Transfer { block: 22, from: A0, to: A2, value: U256::from(43) },
    ];
    check_events(&out["after"]["events"], &new, "event filter get_new_entries after blocks 21, 22");
    assert_eq!(
        out["after"]["blocks"],
        json!([format!("{h21:#x}"), format!("{h22:#x}")]),
        "block filter get_new_entries after blocks 21, 22"
    );
    assert_eq!(out["again"], json!({"events": [], "blocks": []}), "a second poll: {out}");
    assert_eq!(out["uninstalled"], true);
    let errors = unexpected_errors(&out["calls"], &[]);
    assert!(errors.is_empty(), "JSON-RPC errors: {errors:?}");
    assert!(methods(&out["calls"]).contains(&"eth_newFilter"), "{out}");
    assert!(methods(&out["calls"]).contains(&"eth_newBlockFilter"), "{out}");
    s.finish();
}

// ---------------------------------------------------------------------------------------------
// ethers v6: getFeeData, contract.queryFilter, estimateGas
// ---------------------------------------------------------------------------------------------

#[test]
fn ethers_fee_data_query_filter_and_estimate_gas() {
    let Some(node) = tools::node_tools() else { return };
    let dev = Dev::start();
    let dir = tools::node_script_dir(&node, &["ethers_check.mjs"]);
    let out = run_json(
        "ethers",
        Command::new("node").arg(dir.path().join("ethers_check.mjs")).arg(dev.script_config()),
    );
    assert!(out.get("exception").is_none(), "ethers threw: {}", out["exception"]);

    // getFeeData: ethers takes the tip from eth_maxPriorityFeePerGas (1 gwei, see
    // SUGGESTED_TIP), maxFeePerGas = 2 × the latest base fee + tip, and gasPrice from
    // eth_gasPrice: the next block's base fee + the tip.
    let head_base = dev.base_fee(HEAD);
    assert_eq!(out["latest"]["number"], HEAD);
    assert_eq!(num(&out["latest"]["baseFeePerGas"]), head_base);
    let next_base = next_base_fee(head_base, history_gas_used(HEAD), GAS_LIMIT);
    let fee = &out["feeData"];
    assert_eq!(num(&fee["maxPriorityFeePerGas"]), SUGGESTED_TIP, "{fee}");
    assert_eq!(num(&fee["maxFeePerGas"]), 2 * head_base + SUGGESTED_TIP, "{fee}");
    assert_eq!(num(&fee["gasPrice"]), next_base + SUGGESTED_TIP, "{fee}");
    // ethers falls back to 1 gwei when eth_maxPriorityFeePerGas fails: it must not have.
    let calls = &out["calls"];
    let tip_call =
        calls.as_array().unwrap().iter().find(|c| c["method"] == "eth_maxPriorityFeePerGas");
    assert_eq!(tip_call.map(|c| &c["ok"]), Some(&json!(true)), "{calls}");

    // contract.queryFilter.
    let transfers = history_transfers();
    check_events(&out["transfers"], &transfers, "queryFilter(Transfer, 0, latest)");
    check_events(&out["transfersToA1"], &transfers[1..], "queryFilter(Transfer(null, account 1))");
    check_events(&out["transfersFrom0"], &transfers[..1], "queryFilter(Transfer(zero address), 0)");
    check_events(&out["transfers6to20"], &[], "queryFilter(Transfer, 6, 20)");

    // estimateGas.
    assert_eq!(num(&out["estimateCounter"]), u128::from(counter_estimate()), "estimateGas Counter");
    let e = num(&out["estimateTransfer"]);
    assert!((21_000..100_000).contains(&e), "estimateGas Token.transfer: {e}");
    assert_eq!(out["transferWithEstimate"], json!({"ok": true, "result": true}), "{out}");
    assert_eq!(out["transferUnder"]["ok"], false, "98.5% of the estimate must not do: {out}");
    // Account 2 holds no Token: Sample.sol's require message comes back.
    assert_eq!(out["estimateRevert"]["ok"], false, "{out}");
    assert_eq!(out["estimateRevert"]["reason"], "insufficient balance", "{out}");

    // The only errors: the call with too little gas, and the reverting estimate.
    let errors = unexpected_errors(calls, &["eth_call", "eth_estimateGas"]);
    assert!(errors.is_empty(), "JSON-RPC errors: {errors:?}");
    let failed: Vec<&str> = calls
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("error").is_some())
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["eth_call", "eth_estimateGas"], "{calls}");
}

// ---------------------------------------------------------------------------------------------
// viem: getLogs, estimateFeesPerGas; simulateCalls (eth_simulateV1)
// ---------------------------------------------------------------------------------------------

#[test]
fn viem_get_logs_and_estimate_fees() {
    let Some(node) = tools::node_tools() else { return };
    let dev = Dev::start();
    let dir = tools::node_script_dir(&node, &["viem_check.mjs"]);
    let out = run_json(
        "viem",
        Command::new("node").arg(dir.path().join("viem_check.mjs")).arg(dev.script_config()),
    );
    assert!(out.get("exception").is_none(), "viem threw: {}", out["exception"]);
    assert_eq!(num(&out["blockNumber"]), u128::from(HEAD));

    let transfers = history_transfers();
    check_events(&out["transfers"], &transfers, "getLogs(Transfer, 0, latest)");
    for l in out["transfers"].as_array().unwrap() {
        assert_eq!(l["eventName"], "Transfer", "{l}");
        assert_eq!(address_of(&l["address"]), TOKEN, "{l}");
    }
    check_events(&out["transfersToA1"], &transfers[1..], "getLogs(Transfer, args.to = account 1)");
    let blocks = |v: &Value| -> Vec<u128> {
        v.as_array().unwrap().iter().map(|l| num(&l["blockNumber"])).collect()
    };
    assert_eq!(blocks(&out["allLogs"]), [3, 5], "getLogs without a filter: {}", out["allLogs"]);
    assert_eq!(blocks(&out["logsAt5"]), [5], "getLogs by block 5's hash");

    // estimateFeesPerGas: tip from eth_maxPriorityFeePerGas; maxFeePerGas = 1.2 × the latest
    // base fee (viem's default multiplier, integer arithmetic: × 12 / 10) + tip; legacy:
    // 1.2 × eth_gasPrice, which is the next base fee + tip.
    let head_base = dev.base_fee(HEAD);
    assert_eq!(num(&out["latest"]["baseFeePerGas"]), head_base);
    let next_base = next_base_fee(head_base, history_gas_used(HEAD), GAS_LIMIT);
    assert_eq!(num(&out["fees"]["maxPriorityFeePerGas"]), SUGGESTED_TIP, "{out}");
    assert_eq!(num(&out["fees"]["maxFeePerGas"]), head_base * 12 / 10 + SUGGESTED_TIP, "{out}");
    assert_eq!(num(&out["legacyFees"]["gasPrice"]), (next_base + SUGGESTED_TIP) * 12 / 10);
    assert_eq!(num(&out["maxPriorityFeePerGas"]), SUGGESTED_TIP);
    // viem falls back to gasPrice − base fee when eth_maxPriorityFeePerGas fails: no errors.
    let errors = unexpected_errors(&out["calls"], &[]);
    assert!(errors.is_empty(), "JSON-RPC errors: {errors:?}");
    assert!(methods(&out["calls"]).contains(&"eth_maxPriorityFeePerGas"), "{out}");
}

/// viem's `simulateCalls` sends `eth_simulateV1` (one block of calls in sequence).
#[test]
fn viem_simulate_calls() {
    let Some(node) = tools::node_tools() else { return };
    let dev = Dev::start();
    let dir = tools::node_script_dir(&node, &["viem_check.mjs"]);
    let out = run_json(
        "viem simulate",
        Command::new("node")
            .arg(dir.path().join("viem_check.mjs"))
            .arg(dev.script_config())
            .arg("simulate"),
    );
    assert!(
        out.get("exception").is_none(),
        "viem simulateCalls threw: {}\nrequests: {}",
        out["exception"],
        out["calls"]
    );
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "{out}");
    // Counter held 10 at block 20; the second call sees the first call's write.
    let word = |n: u64| format!("{:#066x}", U256::from(n));
    assert_eq!(results[0]["status"], "success", "{out}");
    assert_eq!(results[0]["data"], word(11).as_str(), "{out}");
    assert_eq!(results[1]["status"], "success", "{out}");
    assert_eq!(results[1]["data"], word(12).as_str(), "{out}");
    // Token.transfer(account 1, 5) returns true and logs Transfer(account 0, account 1, 5).
    assert_eq!(results[2]["status"], "success", "{out}");
    assert_eq!(results[2]["result"], true, "{out}");
    let logs = results[2]["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 1, "{out}");
    check_raw_log(
        &json!({"address": logs[0]["address"], "blockNumber": HEAD + 1, "topics": logs[0]["topics"], "data": logs[0]["data"]}),
        &Transfer { block: HEAD + 1, from: A0, to: A1, value: U256::from(5) },
        "simulateCalls transfer log",
    );
    // Prober.fail() reverts with "prober says no".
    assert_eq!(results[3]["status"], "failure", "{out}");
    assert!(results[3]["error"].as_str().is_some_and(|e| e.contains("prober says no")), "{out}");
    let errors = unexpected_errors(&out["calls"], &[]);
    assert!(errors.is_empty(), "JSON-RPC errors: {errors:?}");
}

// ---------------------------------------------------------------------------------------------
// cast: run, logs, estimate, access-list, proof
// ---------------------------------------------------------------------------------------------

/// Runs `cast <args> --rpc-url <url>` from an empty directory (no foundry.toml), offline (no
/// signature look-ups); returns stdout and stderr.
fn cast(bin: &Path, dev: &Dev, cwd: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin)
        .args(args)
        .args(["--rpc-url", &dev.url])
        .current_dir(cwd)
        .env("FOUNDRY_OFFLINE", "true")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cast {args:?}: {e}"));
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("cast {}:\n{o}{e}", args.join(" "));
    (out.status.success(), o, e)
}

/// `cast <args>` that must succeed; its stdout.
fn cast_ok(bin: &Path, dev: &Dev, cwd: &Path, args: &[&str]) -> String {
    let (ok, o, e) = cast(bin, dev, cwd, args);
    assert!(ok, "cast {args:?} failed:\n{o}{e}");
    o
}

/// One line of the call tree `cast run` prints.
#[derive(Debug)]
enum TraceLine {
    /// `[gas] target::function(args) [kind]` at a depth (0 = the transaction's call).
    Call { depth: usize, gas: u64, target: String, text: String },
    /// `← [Outcome] output` ending the call one level up.
    Return { depth: usize, text: String },
}

/// The call tree of `cast run`'s output ("Traces:" up to the first blank line). The depth is
/// read from the indentation: the root call is indented 2, each level 4 more.
fn trace_tree(out: &str) -> Vec<TraceLine> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with("Traces:")).skip(1);
    let mut tree = Vec::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        let Some(start) = line.find(['[', '←']) else { continue };
        let indent = line[..start].chars().count();
        let depth = if indent < 7 { 0 } else { (indent - 3) / 4 };
        let text = line[start..].trim_end().to_string();
        if let Some(rest) = text.strip_prefix('[') {
            let (gas, rest) = rest.split_once("] ").unwrap();
            let target = rest.split("::").next().unwrap().to_lowercase();
            tree.push(TraceLine::Call {
                depth,
                gas: gas.parse().unwrap(),
                target,
                text: rest.to_string(),
            });
        } else {
            tree.push(TraceLine::Return {
                depth,
                text: text.trim_start_matches('←').trim().into(),
            });
        }
    }
    tree
}

/// `cast run <tx>` (Osaka rules: cast cannot know them for chain 1337, and the dev chain has
/// every fork through Osaka from genesis); its call tree and the "Gas used" it reports, which
/// must equal the stored receipt's.
fn cast_run(bin: &Path, dev: &Dev, cwd: &Path, tx: &str) -> (Vec<TraceLine>, String) {
    let (_, o, e) = cast(bin, dev, cwd, &["run", tx, "--evm-version", "osaka"]);
    let all = format!("{o}{e}");
    let receipt = dev.rpc("eth_getTransactionReceipt", json!([tx]));
    let gas_used = all
        .lines()
        .find_map(|l| l.strip_prefix("Gas used: "))
        .unwrap_or_else(|| panic!("cast run {tx}: no gas used:\n{all}"));
    assert_eq!(
        u128::from(gas_used.trim().parse::<u64>().unwrap()),
        num(&receipt["gasUsed"]),
        "cast run {tx}: gas used differs from the receipt's\n{all}"
    );
    (trace_tree(&all), all)
}

fn call_at(tree: &[TraceLine], i: usize) -> (usize, u64, Address, &str) {
    match &tree[i] {
        TraceLine::Call { depth, gas, target, text } => {
            (*depth, *gas, target.parse().unwrap(), text.as_str())
        }
        other => panic!("trace line {i} is not a call: {other:?} in {tree:?}"),
    }
}

fn return_at(tree: &[TraceLine], i: usize) -> (usize, &str) {
    match &tree[i] {
        TraceLine::Return { depth, text } => (*depth, text.as_str()),
        other => panic!("trace line {i} is not a return: {other:?} in {tree:?}"),
    }
}

/// Verifies an EIP-1186 proof (as `cast proof` prints it) against `state_root` with alloy-trie;
/// returns the proven storage values (`None`: proven absent). `expect_account` false: the
/// account must be proven absent.
fn verify_eip1186(proof: &Value, state_root: B256, expect_account: bool) -> Vec<U256> {
    let bytes = |v: &Value| -> Vec<Bytes> {
        v.as_array().unwrap().iter().map(|n| n.as_str().unwrap().parse().unwrap()).collect()
    };
    let address = address_of(&proof["address"]);
    let account_rlp = expect_account.then(|| {
        let mut payload = Vec::new();
        (num(&proof["nonce"]) as u64).encode(&mut payload);
        u256(&proof["balance"]).encode(&mut payload);
        proof["storageHash"].as_str().unwrap().parse::<B256>().unwrap().encode(&mut payload);
        proof["codeHash"].as_str().unwrap().parse::<B256>().unwrap().encode(&mut payload);
        let mut out = Vec::new();
        alloy_rlp::Header { list: true, payload_length: payload.len() }.encode(&mut out);
        out.extend(payload);
        out
    });
    let nodes = bytes(&proof["accountProof"]);
    alloy_trie::proof::verify_proof(
        state_root,
        alloy_trie::Nibbles::unpack(keccak256(address)),
        account_rlp,
        &nodes,
    )
    .unwrap_or_else(|e| panic!("account proof of {address} does not verify: {e:?}\n{proof}"));
    let storage_root: B256 = proof["storageHash"].as_str().unwrap().parse().unwrap();
    let mut values = Vec::new();
    for s in proof["storageProof"].as_array().unwrap() {
        let key = B256::from(u256(&s["key"]));
        let value = u256(&s["value"]);
        let expected = (!value.is_zero()).then(|| alloy_rlp::encode(value));
        let nodes = bytes(&s["proof"]);
        alloy_trie::proof::verify_proof(
            storage_root,
            alloy_trie::Nibbles::unpack(keccak256(key)),
            expected,
            &nodes,
        )
        .unwrap_or_else(|e| panic!("storage proof of {key} does not verify: {e:?}\n{s}"));
        values.push(value);
    }
    values
}

#[test]
fn cast_run_logs_estimate_access_list_and_proof() {
    let Some(node) = tools::node_tools() else { return };
    let bin = node.cast();
    let dev = Dev::start();
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path();
    let balance_of = selector("balanceOf(address)");
    let stamp_sel = selector("stamp(uint256)");
    let word = |n: u64| format!("{:#066x}", U256::from(n));

    // cast run, block 6: Prober.probe(token, stamp, account 1) (Sample.sol) CALLs
    // Token.balanceOf(account 1) (1000 since block 5), STATICCALLs it again, DELEGATECALLs
    // Stamp.stamp(1000) (which returns nothing), and returns 1000.
    let (tree, all) = cast_run(&bin, &dev, cwd, &dev.tx_hash(6, 0));
    assert!(all.contains("Transaction successfully executed."), "{all}");
    assert_eq!(tree.len(), 8, "{tree:?}");
    let (d, _, to, text) = call_at(&tree, 0);
    assert_eq!((d, to), (0, prober()), "{all}");
    let probe = selector("probe(address,address,address)");
    assert!(text.contains("probe(") || text.contains(&format!("{probe}(")), "{all}");
    for (i, kind) in [(1, None), (3, Some("[staticcall]"))] {
        let (d, _, to, text) = call_at(&tree, i);
        assert_eq!((d, to), (1, TOKEN), "{all}");
        assert!(text.contains("balanceOf(") || text.contains(&format!("{balance_of}(")), "{all}");
        assert!(text.to_lowercase().contains(&addr(A1)[2..]), "balanceOf(account 1): {all}");
        match kind {
            Some(k) => assert!(text.ends_with(k), "{text}: {all}"),
            None => assert!(!text.ends_with(']'), "a plain CALL: {text}: {all}"),
        }
        let (d, ret) = return_at(&tree, i + 1);
        assert_eq!(d, 2, "{all}");
        assert!(ret == "[Return] 1000" || ret == format!("[Return] {}", word(1000)), "{ret}");
    }
    let (d, _, to, text) = call_at(&tree, 5);
    assert_eq!((d, to), (1, stamp()), "{all}");
    assert!(text.contains("stamp(") || text.contains(&format!("{stamp_sel}(")), "{all}");
    assert!(text.contains("3e8") || text.contains("(1000)"), "stamp(1000): {all}");
    assert!(text.ends_with("[delegatecall]"), "{all}");
    assert_eq!(return_at(&tree, 6), (2, "[Stop]"), "{all}");
    let (d, ret) = return_at(&tree, 7);
    assert_eq!(d, 1);
    assert!(ret == format!("[Return] {}", word(1000)) || ret == "[Return] 1000", "{all}");

    // Block 7: Prober.fail() reverts with "prober says no".
    let (tree, all) = cast_run(&bin, &dev, cwd, &dev.tx_hash(7, 0));
    assert_eq!(tree.len(), 2, "{all}");
    assert_eq!(call_at(&tree, 0).2, prober(), "{all}");
    assert_eq!(return_at(&tree, 1), (1, "[Revert] prober says no"), "{all}");
    assert!(all.contains("Transaction failed."), "{all}");

    // Block 10 (EIP-7702): account 2 runs Counter's code on its own storage: slot 0 goes
    // 0 → 1 (22,130 gas by the opcodes) and the call returns 1.
    let (tree, all) = cast_run(&bin, &dev, cwd, &dev.tx_hash(10, 0));
    assert_eq!(tree.len(), 2, "{all}");
    let (d, gas, to, _) = call_at(&tree, 0);
    assert_eq!((d, gas, to), (0, counter_exec_gas(true, false), A2), "{all}");
    assert_eq!(return_at(&tree, 1), (1, format!("[Return] {}", word(1)).as_str()), "{all}");

    // Block 20: the tenth Counter call returns 10 and uses 21,000 + 5,030 gas.
    let (tree, all) = cast_run(&bin, &dev, cwd, &dev.tx_hash(20, 0));
    let (d, gas, to, _) = call_at(&tree, 0);
    assert_eq!((d, gas, to), (0, counter_exec_gas(false, false), COUNTER), "{all}");
    assert_eq!(return_at(&tree, 1), (1, format!("[Return] {}", word(10)).as_str()), "{all}");
    assert!(all.contains(&format!("Gas used: {}", counter_call_gas())), "{all}");

    // cast logs: Token's Transfer events, all and those to account 1.
    let event = "Transfer(address indexed from,address indexed to,uint256 value)";
    let token = addr(TOKEN);
    let logs: Value = serde_json::from_str(&cast_ok(
        &bin,
        &dev,
        cwd,
        &[
            "logs",
            "--from-block",
            "0",
            "--to-block",
            "latest",
            "--address",
            &token,
            event,
            "--json",
        ],
    ))
    .unwrap();
    check_raw_logs(&logs, &history_transfers(), "cast logs");
    let logs: Value = serde_json::from_str(&cast_ok(
        &bin,
        &dev,
        cwd,
        &["logs", "--from-block", "0", "--address", &token, event, "", &addr(A1), "--json"],
    ))
    .unwrap();
    check_raw_logs(&logs, &history_transfers()[1..], "cast logs to account 1");

    // cast estimate: Counter exactly; Token.transfer(account 1, 1) with gas that cast call
    // confirms is enough.
    let from = addr(A0);
    let est = cast_ok(&bin, &dev, cwd, &["estimate", &addr(COUNTER), "--from", &from]);
    assert_eq!(est.trim().parse::<u64>().unwrap(), counter_estimate(), "cast estimate Counter");
    let sig = "transfer(address,uint256)";
    let est = cast_ok(&bin, &dev, cwd, &["estimate", &token, sig, &addr(A1), "1", "--from", &from]);
    let est: u64 = est.trim().parse().unwrap();
    assert!((21_000..100_000).contains(&est), "cast estimate transfer: {est}");
    let (a1, gas) = (addr(A1), est.to_string());
    let call = ["call", &token, "transfer(address,uint256)(bool)", &a1, "1", "--from", &from];
    let ret = cast_ok(&bin, &dev, cwd, &[&call[..], &["--gas-limit", &gas]].concat());
    assert_eq!(ret.trim(), "true", "cast call with the estimated gas");

    // cast access-list: Counter touches only its slot 0, and with the list the call costs
    // 21,000 + 2,400 (address) + 1,900 (key) + its run with slot 0 warm.
    let list: Value = serde_json::from_str(&cast_ok(
        &bin,
        &dev,
        cwd,
        &["access-list", &addr(COUNTER), "--from", &from, "--json"],
    ))
    .unwrap();
    assert_eq!(
        list["accessList"],
        json!([{"address": addr(COUNTER), "storageKeys": [format!("{:#x}", B256::ZERO)]}]),
        "{list}"
    );
    assert_eq!(
        num(&list["gasUsed"]),
        u128::from(21_000 + 2_400 + 1_900 + counter_exec_gas(false, true))
    );
    // Token.transfer(account 1, 1) from account 0 reads and writes both balances.
    let list: Value = serde_json::from_str(&cast_ok(
        &bin,
        &dev,
        cwd,
        &["access-list", &token, sig, &addr(A1), "1", "--from", &from, "--json"],
    ))
    .unwrap();
    let items = list["accessList"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(address_of(&items[0]["address"]), TOKEN, "{list}");
    let mut keys: Vec<B256> = items[0]["storageKeys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().parse().unwrap())
        .collect();
    keys.sort();
    let mut want = vec![balance_slot(A0), balance_slot(A1)];
    want.sort();
    assert_eq!(keys, want, "access list of Token.transfer: {list}");

    // cast proof, verified against the block's stateRoot here.
    let root = |n: u64| -> B256 { dev.block(n)["stateRoot"].as_str().unwrap().parse().unwrap() };
    let proof: Value = serde_json::from_str(&cast_ok(
        &bin,
        &dev,
        cwd,
        &["proof", &addr(COUNTER), "0", "-B", "13", "--json"],
    ))
    .unwrap();
    assert_eq!(
        verify_eip1186(&proof, root(13), true),
        [U256::from(3)],
        "Counter slot 0 at block 13"
    );
    let slot = format!("{:#x}", balance_slot(A1));
    let proof: Value =
        serde_json::from_str(&cast_ok(&bin, &dev, cwd, &["proof", &token, &slot, "1", "--json"]))
            .unwrap();
    assert_eq!(
        verify_eip1186(&proof, root(HEAD), true),
        [U256::from(1000), supply()],
        "Token balanceOf[account 1] and totalSupply at head"
    );
    let proof: Value = serde_json::from_str(&cast_ok(
        &bin,
        &dev,
        cwd,
        &["proof", "0x000000000000000000000000000000000000dEaD", "--json"],
    ))
    .unwrap();
    assert!(verify_eip1186(&proof, root(HEAD), false).is_empty(), "0xdead is proven absent");
}
