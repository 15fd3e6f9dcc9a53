//! `loupe follow` against real upstreams: anvil 1.7.1 (installed from npm), started from
//! loupe's genesis, and another loupe. The truth is the upstream's own answers (blocks,
//! transactions, receipts, balances, storage, code at every height) and, for loupe following
//! loupe, the upstream's state dump at every height.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/anvil.rs"]
mod anvil;
#[path = "support/clients.rs"]
mod clients;

use std::path::PathBuf;
use std::time::Duration;

use alloy_consensus::{
    SignableTransaction, TxEip1559, TxEip2930, TxEip4844, TxEip4844Variant, TxEip4844WithSidecar,
    TxEip7702, TxEnvelope, TxLegacy,
};
use alloy_eips::Encodable2718;
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_eips::eip4844::BlobTransactionSidecar;
use alloy_eips::eip4844::builder::{SidecarBuilder, SimpleCoder};
use alloy_eips::eip7702::Authorization;
use alloy_primitives::{Address, B256, Bytes, TxKind, U256};
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use anvil::{Proc, Receiver, rpc, try_rpc};
use serde_json::{Value, json};

/// A contract: calldata stores its first word in slot 0 and logs it; empty calldata reverts.
/// Runtime: CALLDATASIZE ISZERO PUSH1 0x12 JUMPI PUSH1 0 CALLDATALOAD DUP1 PUSH1 0 SSTORE
/// PUSH1 0 PUSH1 0 LOG1 STOP JUMPDEST PUSH1 0 DUP1 REVERT; the init code copies it out.
const INIT_CODE: &str = "6017600c60003960176000f336156012576000358060005560006000a1005b600080fd";

fn init_code() -> Bytes {
    INIT_CODE.parse().unwrap()
}

/// An anvil upstream started from loupe's genesis, and the datadir `loupe init` made.
struct Upstream {
    tmp: tempfile::TempDir,
    datadir: PathBuf,
    state: PathBuf,
    bin: PathBuf,
    anvil: Proc,
    genesis_hash: B256,
}

fn start_upstream(extra: &[&str]) -> Option<Upstream> {
    start_upstream_with(extra, None)
}

/// [`start_upstream`] with the datadir initialised under `policy` (default: chain id 31337's,
/// the dev policy).
fn start_upstream_with(
    extra: &[&str],
    policy: Option<loupe::chain::HeaderPolicy>,
) -> Option<Upstream> {
    let bin = anvil::anvil_bin()?;
    let tmp = tempfile::tempdir().unwrap();
    let datadir = tmp.path().join("loupe");
    let genesis = anvil::genesis_json();
    let (state, genesis_hash) = {
        let db = loupe::storage::Database::open(&datadir).unwrap();
        let options = loupe::import::InitOptions { policy, ..Default::default() };
        let source = loupe::import::GenesisSource::Json(&genesis);
        let (spec, _) = loupe::import::init_with(&db, source, options).unwrap();
        assert_eq!(spec.header_policy(), policy.unwrap_or(loupe::chain::HeaderPolicy::Dev));
        (anvil::anvil_state(&genesis, &db), spec.genesis_hash())
    };
    let state_path = tmp.path().join("anvil-state.json");
    std::fs::write(&state_path, state.to_string()).unwrap();
    let anvil = anvil::start_anvil(&bin, &state_path, anvil::free_port(), extra);
    let block0 = rpc(&anvil.url, "eth_getBlockByNumber", json!(["0x0", false]));
    assert_eq!(block0["hash"], json!(genesis_hash), "anvil took loupe's genesis as its block 0");
    Some(Upstream { tmp, datadir, state: state_path, bin, anvil, genesis_hash })
}

/// Signs and sends transactions for the three dev keys, tracking nonces.
struct Wallet {
    signers: Vec<PrivateKeySigner>,
    nonces: Vec<u64>,
}

impl Wallet {
    fn new() -> Self {
        let signers = loupe::dev::dev_signers();
        let nonces = vec![0; signers.len()];
        Self { signers, nonces }
    }

    fn address(&self, i: usize) -> Address {
        self.signers[i].address()
    }

    fn next_nonce(&mut self, i: usize) -> u64 {
        self.nonces[i] += 1;
        self.nonces[i] - 1
    }

    fn sign<T: SignableTransaction<alloy_primitives::Signature>>(
        &self,
        i: usize,
        tx: T,
    ) -> TxEnvelope
    where
        TxEnvelope: From<alloy_consensus::Signed<T>>,
    {
        let sig = self.signers[i].sign_hash_sync(&tx.signature_hash()).unwrap();
        tx.into_signed(sig).into()
    }

    fn eip1559(&mut self, i: usize, to: TxKind, value: u64, input: Bytes) -> TxEnvelope {
        let tx = TxEip1559 {
            chain_id: anvil::CHAIN_ID,
            nonce: self.next_nonce(i),
            gas_limit: 300_000,
            max_fee_per_gas: 20_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to,
            value: U256::from(value),
            access_list: AccessList::default(),
            input,
        };
        self.sign(i, tx)
    }

    fn legacy(&mut self, i: usize, to: Address, value: u64) -> TxEnvelope {
        let tx = TxLegacy {
            chain_id: Some(anvil::CHAIN_ID),
            nonce: self.next_nonce(i),
            gas_price: 10_000_000_000,
            gas_limit: 21_000,
            to: TxKind::Call(to),
            value: U256::from(value),
            input: Bytes::new(),
        };
        self.sign(i, tx)
    }

    fn eip2930(&mut self, i: usize, to: Address, input: Bytes) -> TxEnvelope {
        let tx = TxEip2930 {
            chain_id: anvil::CHAIN_ID,
            nonce: self.next_nonce(i),
            gas_price: 10_000_000_000,
            gas_limit: 100_000,
            to: TxKind::Call(to),
            value: U256::ZERO,
            access_list: AccessList(vec![AccessListItem {
                address: to,
                storage_keys: vec![B256::ZERO],
            }]),
            input,
        };
        self.sign(i, tx)
    }

    /// A blob transaction (type 3) carrying one blob with `data`, its sidecar built with the
    /// mainnet KZG setup (anvil checks the proofs).
    fn eip4844(&mut self, i: usize, to: Address, data: &[u8]) -> TxEnvelope {
        let sidecar = SidecarBuilder::<SimpleCoder>::from_slice(data).build_4844().unwrap();
        let tx = TxEip4844 {
            chain_id: anvil::CHAIN_ID,
            nonce: self.next_nonce(i),
            gas_limit: 100_000,
            max_fee_per_gas: 20_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to,
            value: U256::from(5u64),
            access_list: AccessList::default(),
            blob_versioned_hashes: sidecar.versioned_hashes().collect(),
            max_fee_per_blob_gas: 1_000_000_000,
            input: Bytes::new(),
        };
        let tx = TxEip4844WithSidecar::from_tx_and_sidecar(tx, sidecar);
        self.sign(i, TxEip4844Variant::<BlobTransactionSidecar>::TxEip4844WithSidecar(tx))
    }

    /// A 7702 transaction from `i` carrying `authority`'s delegation to `target`.
    fn eip7702(&mut self, i: usize, authority: usize, target: Address) -> TxEnvelope {
        let auth = Authorization {
            chain_id: U256::from(anvil::CHAIN_ID),
            address: target,
            nonce: self.next_nonce(authority),
        };
        let sig = self.signers[authority].sign_hash_sync(&auth.signature_hash()).unwrap();
        let tx = TxEip7702 {
            chain_id: anvil::CHAIN_ID,
            nonce: self.next_nonce(i),
            gas_limit: 200_000,
            max_fee_per_gas: 20_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to: self.address(authority),
            value: U256::ZERO,
            access_list: AccessList::default(),
            authorization_list: vec![auth.into_signed(sig)],
            input: Bytes::from(U256::from(7u64).to_be_bytes::<32>().to_vec()),
        };
        self.sign(i, tx)
    }
}

fn raw(tx: &TxEnvelope) -> String {
    format!("0x{}", alloy_primitives::hex::encode(tx.encoded_2718()))
}

/// Sends `tx` to anvil and waits until it is mined (anvil answers before automine has sealed
/// the block, and the tests count blocks).
fn send(anvil: &str, tx: &TxEnvelope) -> Value {
    send_via(anvil, anvil, tx)
}

/// Sends `tx` through `via` (anvil, or loupe, which forwards it) and waits until anvil mined it.
fn send_via(via: &str, anvil: &str, tx: &TxEnvelope) -> Value {
    let hash = rpc(via, "eth_sendRawTransaction", json!([raw(tx)]));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while rpc(anvil, "eth_getTransactionReceipt", json!([hash])).is_null() {
        assert!(std::time::Instant::now() < deadline, "{hash} was not mined");
        std::thread::sleep(Duration::from_millis(10));
    }
    hash
}

fn word(n: u64) -> Bytes {
    Bytes::from(U256::from(n).to_be_bytes::<32>().to_vec())
}

fn fresh(i: u64) -> Address {
    Address::left_padding_from(&(0xf000_0000u64 + i).to_be_bytes())
}

/// The fields both values have, compared recursively; a difference is reported with its path.
fn assert_common(path: &str, ours: &Value, theirs: &Value) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                // anvil 1.7.1 sizes its mined blocks without their (empty) withdrawals list,
                // though the header commits to one: loupe counts the list, as the encoding has it.
                if k == "size" {
                    continue;
                }
                if let Some(vb) = b.get(k) {
                    assert_common(&format!("{path}.{k}"), va, vb);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: lengths differ");
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                assert_common(&format!("{path}[{i}]"), va, vb);
            }
        }
        _ => assert_eq!(ours, theirs, "{path}: loupe {ours} vs anvil {theirs}"),
    }
}

/// Sends a mix of transactions (every type, blobs included; deployment, calls, reverts, a 7702
/// delegation, transfers to new and existing accounts) and empty blocks; returns the contract
/// and the addresses involved. Half go through loupe (forwarded), half straight to anvil.
fn mixed_blocks(anvil: &str, loupe: &str, w: &mut Wallet, rounds: u64) -> (Address, Vec<Address>) {
    let contract = w.address(0).create(w.nonces[0]);
    send(anvil, &w.eip1559(0, TxKind::Create, 0, init_code()));
    let mut touched: Vec<Address> =
        anvil::ANVIL_ACCOUNTS.iter().map(|a| a.parse().unwrap()).collect();
    touched.push(contract);
    for i in 0..rounds {
        let via = if i % 2 == 0 { loupe } else { anvil };
        touched.push(fresh(i));
        send_via(via, anvil, &w.legacy(0, fresh(i), 1_000_000_000 + i));
        send_via(via, anvil, &w.eip2930(1, contract, word(i + 1)));
        // Reverts (empty calldata), mined with status 0.
        send_via(via, anvil, &w.eip1559(2, TxKind::Call(contract), 0, Bytes::new()));
        send_via(via, anvil, &w.eip1559(1, TxKind::Call(w.address(2)), 12345, Bytes::new()));
        if i % 4 == 3 {
            rpc(anvil, "evm_mine", json!([]));
        }
        if i == 5 {
            send_via(via, anvil, &w.eip7702(0, 2, contract));
        }
        if i % 5 == 1 {
            send_via(via, anvil, &w.eip4844(1, fresh(100 + i), format!("blob {i}").as_bytes()));
        }
    }
    (contract, touched)
}

fn follower_synced(anvil: &str, loupe: &str, log: &mut Receiver) -> u64 {
    let tip = anvil::block_number(anvil);
    let hash =
        rpc(anvil, "eth_getBlockByNumber", json!([format!("{tip:#x}"), false]))["hash"].clone();
    assert!(
        anvil::wait_head(loupe, tip, Some(&hash), Duration::from_secs(120)),
        "loupe did not reach anvil's head {tip} {hash}; loupe's latest: {}; its log:\n{}",
        try_rpc(loupe, "eth_getBlockByNumber", json!(["latest", false]))
            .map(|b| format!("{} {}", b["number"], b["hash"]))
            .unwrap_or_else(|e| e),
        log.all()
    );
    tip
}

#[test]
fn follows_anvil_and_answers_as_anvil_does_at_every_height() {
    let Some(up) = start_upstream(&[]) else { return };
    let (follower, mut log) = anvil::start_follower(&up.datadir, &up.anvil.url, &[]);
    let loupe = follower.url.clone();
    let mut w = Wallet::new();
    let (contract, touched) = mixed_blocks(&up.anvil.url, &loupe, &mut w, 13);
    let tip = follower_synced(&up.anvil.url, &loupe, &mut log);
    assert!(tip >= 50, "only {tip} blocks");
    let a = &up.anvil.url;
    let mut types = std::collections::BTreeSet::new();
    let mut statuses = std::collections::BTreeSet::new();
    for n in 0..=tip {
        let tag = format!("{n:#x}");
        let ours = rpc(&loupe, "eth_getBlockByNumber", json!([tag, true]));
        let theirs = rpc(a, "eth_getBlockByNumber", json!([tag, true]));
        assert_common(&format!("block {n}"), &ours, &theirs);
        let count = theirs["transactions"].as_array().unwrap().len();
        for i in 0..count {
            let idx = format!("{i:#x}");
            let ours = rpc(&loupe, "eth_getTransactionByBlockNumberAndIndex", json!([tag, idx]));
            let theirs = rpc(a, "eth_getTransactionByBlockNumberAndIndex", json!([tag, idx]));
            assert_common(&format!("block {n} tx {i}"), &ours, &theirs);
            types.insert(theirs["type"].as_str().unwrap().to_string());
            let hash = &theirs["hash"];
            let ours = rpc(&loupe, "eth_getTransactionReceipt", json!([hash]));
            let theirs = rpc(a, "eth_getTransactionReceipt", json!([hash]));
            assert_common(&format!("receipt {hash}"), &ours, &theirs);
            statuses.insert(theirs["status"].as_str().unwrap().to_string());
        }
        for addr in &touched {
            for method in ["eth_getBalance", "eth_getCode", "eth_getTransactionCount"] {
                let ours = rpc(&loupe, method, json!([addr, tag]));
                let theirs = rpc(a, method, json!([addr, tag]));
                assert_eq!(ours, theirs, "{method} {addr} at {n}");
            }
        }
        let ours = rpc(&loupe, "eth_getStorageAt", json!([contract, "0x0", tag]));
        let theirs = rpc(a, "eth_getStorageAt", json!([contract, "0x0", tag]));
        assert_eq!(ours, theirs, "storage at {n}");
    }
    for t in ["0x0", "0x1", "0x2", "0x3", "0x4"] {
        assert!(types.contains(t), "no transaction of type {t}: {types:?}");
    }
    assert!(statuses.contains("0x0") && statuses.contains("0x1"), "{statuses:?}");
    // The delegation landed: the authority's code is the 7702 designator.
    let code = rpc(&loupe, "eth_getCode", json!([w.address(2), "latest"]));
    assert!(code.as_str().unwrap().starts_with("0xef0100"), "{code}");
    // Caught up: healthy, not syncing.
    assert_eq!(rpc(&loupe, "eth_syncing", json!([])), json!(false));
    let health = reqwest::blocking::get(format!("{loupe}/health")).unwrap();
    assert_eq!(health.status().as_u16(), 200, "{}", log.all());
    drop(follower);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["verify", "--datadir"])
        .arg(&up.datadir)
        .output()
        .unwrap();
    assert!(out.status.success(), "verify: {}", String::from_utf8_lossy(&out.stderr));
    let _ = (&up.tmp, &up.state, &up.bin, up.genesis_hash);
}

/// Hash → balance of `who` at every block of `url`'s chain.
fn chain_balances(url: &str, who: Address) -> Vec<(Value, Value)> {
    let tip = anvil::block_number(url);
    (0..=tip)
        .map(|n| {
            let tag = format!("{n:#x}");
            let hash = rpc(url, "eth_getBlockByNumber", json!([tag, false]))["hash"].clone();
            (hash, rpc(url, "eth_getBalance", json!([who, tag])))
        })
        .collect()
}

fn health(loupe: &str) -> u16 {
    reqwest::blocking::get(format!("{loupe}/health")).map_or(0, |r| r.status().as_u16())
}

#[test]
fn reorgs_are_followed_in_one_commit_and_a_too_deep_one_stops_following() {
    let Some(up) = start_upstream(&[]) else { return };
    let a = up.anvil.url.clone();
    let (follower, mut log) = anvil::start_follower(&up.datadir, &a, &["--follow.max-reorg", "5"]);
    let loupe = follower.url.clone();
    let mut w = Wallet::new();
    let watched = w.address(0);
    for i in 0..8 {
        send(&a, &w.legacy(0, fresh(i), 1_000_000_000));
    }
    let tip = follower_synced(&a, &loupe, &mut log);
    let mut known: std::collections::HashMap<String, Value> = chain_balances(&a, watched)
        .into_iter()
        .map(|(h, b)| (h.as_str().unwrap().to_string(), b))
        .collect();

    // A reader polls the head and the watched balance at that head's hash throughout.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (loupe, stop) = (loupe.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let b = rpc(&loupe, "eth_getBlockByNumber", json!(["latest", false]));
                let n = u64::from_str_radix(&b["number"].as_str().unwrap()[2..], 16).unwrap();
                let bal =
                    try_rpc(&loupe, "eth_getBalance", json!([watched, {"blockHash": b["hash"]}]));
                seen.push((n, b["hash"].as_str().unwrap().to_string(), bal.ok()));
            }
            seen
        })
    };

    // 1. anvil_reorg: 3 blocks replaced, one carrying a new transaction.
    let nonce1 = w.nonces[1];
    let tx = w.legacy(1, fresh(100), 5_000_000_000);
    rpc(&a, "anvil_reorg", json!([3, [[raw(&tx), 0]]]));
    let tip2 = follower_synced(&a, &loupe, &mut log);
    assert!(
        log.wait_for("reorg: unwound 3 blocks", Duration::from_secs(5)).is_some(),
        "{}",
        log.all()
    );
    assert_eq!(
        rpc(&loupe, "eth_getTransactionCount", json!([w.address(1), "latest"])),
        json!(format!("{:#x}", nonce1 + 1)),
        "the new branch's transaction is in loupe's state"
    );
    known.extend(
        chain_balances(&a, watched).into_iter().map(|(h, b)| (h.as_str().unwrap().to_string(), b)),
    );

    // 2. anvil_rollback: the upstream is behind on the same chain; loupe waits. Then a
    //    competing block appears: loupe unwinds 2 and imports 1.
    rpc(&a, "anvil_rollback", json!([2]));
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(anvil::block_number(&loupe), tip2, "an upstream behind us is not a reorg");
    rpc(&a, "evm_mine", json!([]));
    let tip3 = follower_synced(&a, &loupe, &mut log);
    assert_eq!(tip3, tip2 - 1);
    assert!(
        log.wait_for("reorg: unwound 2 blocks", Duration::from_secs(5)).is_some(),
        "{}",
        log.all()
    );
    known.extend(
        chain_balances(&a, watched).into_iter().map(|(h, b)| (h.as_str().unwrap().to_string(), b)),
    );

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = reader.join().unwrap();
    assert!(seen.len() > 10, "the reader ran");
    let lowest = tip - 3;
    for (n, hash, bal) in &seen {
        let expected = known.get(hash).unwrap_or_else(|| panic!("head {n} {hash} is on no chain"));
        assert!(*n > lowest, "a reader saw block {n}, below every head (a half-done reorg)");
        if let Some(bal) = bal {
            assert_eq!(bal, expected, "balance at {n} {hash}: a mix of chains");
        }
    }

    // 3. Deeper than --follow.max-reorg 5: following stops, serving goes on.
    rpc(&a, "anvil_reorg", json!([6, []]));
    let line = log.wait_for("reorg deeper than --follow.max-reorg 5", Duration::from_secs(20));
    assert!(line.is_some(), "{}", log.all());
    assert_eq!(anvil::block_number(&loupe), tip3, "serving what is stored");
    assert_eq!(health(&loupe), 503);
    let _ = tip;
}

#[test]
fn a_block_the_rules_reject_stops_following_and_serving_goes_on() {
    let Some(up) = start_upstream(&[]) else { return };
    let a = up.anvil.url.clone();
    let (follower, mut log) = anvil::start_follower(&up.datadir, &a, &[]);
    let loupe = follower.url.clone();
    let mut w = Wallet::new();
    send(&a, &w.legacy(0, fresh(1), 1_000_000_000));
    let good = follower_synced(&a, &loupe, &mut log);
    // A zero-value transfer to a fresh address: EIP-161 removes the empty account it touches;
    // anvil keeps it, so its state root is not the one the rules give.
    send(&a, &w.legacy(0, fresh(2), 0));
    let line = log.wait_for("following stopped", Duration::from_secs(20));
    let line = line.unwrap_or_else(|| panic!("{}", log.all()));
    assert!(
        line.contains(&format!("block #{}", good + 1)) && line.contains("state root"),
        "{line}"
    );
    assert!(line.contains("expected") && line.contains("got"), "both roots named: {line}");
    assert_eq!(anvil::block_number(&loupe), good, "the block was not stored");
    let b = rpc(&loupe, "eth_getBlockByNumber", json!(["latest", true]));
    assert_eq!(b["number"], json!(format!("{good:#x}")));
    assert_eq!(health(&loupe), 503);
}

/// anvil mines blocks with its parent's timestamp when asked (an interval of 0): a datadir
/// initialised with the strict header policy refuses such a block, and the error names the
/// policy that follows anvil; the default datadir of chain 31337 (the dev policy) follows it.
#[test]
fn a_strict_datadir_refuses_an_equal_timestamp_from_anvil_naming_the_policy() {
    for policy in [loupe::chain::HeaderPolicy::Strict, loupe::chain::HeaderPolicy::Dev] {
        let Some(up) = start_upstream_with(&[], Some(policy)) else { return };
        let a = up.anvil.url.clone();
        let (follower, mut log) = anvil::start_follower(&up.datadir, &a, &[]);
        let loupe = follower.url.clone();
        rpc(&a, "evm_mine", json!([]));
        let good = follower_synced(&a, &loupe, &mut log);
        rpc(&a, "anvil_setBlockTimestampInterval", json!([0]));
        rpc(&a, "evm_mine", json!([]));
        rpc(&a, "evm_mine", json!([]));
        let tip = anvil::block_number(&a);
        let t = |n: u64| {
            rpc(&a, "eth_getBlockByNumber", json!([format!("{n:#x}"), false]))["timestamp"].clone()
        };
        assert_eq!(t(tip), t(tip - 1), "anvil mined equal timestamps");
        if policy == loupe::chain::HeaderPolicy::Dev {
            assert!(anvil::wait_head(&loupe, tip, None, Duration::from_secs(20)), "{}", log.all());
            continue;
        }
        let line = log.wait_for("following stopped", Duration::from_secs(20));
        let line = line.unwrap_or_else(|| panic!("{}", log.all()));
        assert!(
            line.contains("timestamp rule") && line.contains("equal to the parent's"),
            "{line}"
        );
        assert!(line.contains("--header-policy dev") && line.contains("anvil"), "{line}");
        assert!(anvil::block_number(&loupe) < tip && anvil::block_number(&loupe) >= good);
    }
}

/// A `--follow.max-reorg` beyond the datadir's unwind depth raises the depth, so that a reorg
/// that deep finds the change lists of the blocks it unwinds; the datadir keeps the new depth.
#[test]
fn a_max_reorg_beyond_the_unwind_depth_raises_it() {
    let Some(up) = start_upstream(&[]) else { return };
    let a = up.anvil.url.clone();
    let deep = loupe::storage::history::changes::DEFAULT_UNWIND_DEPTH + 976;
    let (follower, mut log) =
        anvil::start_follower(&up.datadir, &a, &["--follow.max-reorg", &deep.to_string()]);
    let line = log.wait_for("change lists now kept", Duration::from_secs(20));
    assert!(line.is_some(), "{}", log.all());
    let mut w = Wallet::new();
    send(&a, &w.legacy(0, fresh(1), 1_000_000_000));
    follower_synced(&a, &follower.url, &mut log);
    drop(follower);
    let db = loupe::storage::Database::open(&up.datadir).unwrap();
    assert_eq!(db.begin_write().unwrap().unwind_depth().unwrap(), deep);
}

#[test]
fn upstream_down_and_back_health_follows_and_no_request_fails() {
    let Some(up) = start_upstream(&[]) else { return };
    let dump = up.tmp.path().join("anvil-dump.json");
    let port = up.anvil.port;
    let dump_flag = ["--dump-state", dump.to_str().unwrap()];
    // Restart anvil with a dump on exit, so that it comes back with the same chain.
    drop(up.anvil);
    let anvil_proc = anvil::start_anvil(&up.bin, &up.state, port, &dump_flag);
    let a = anvil_proc.url.clone();
    let (follower, mut log) =
        anvil::start_follower(&up.datadir, &a, &["--follow.timeout-ms", "1000"]);
    let loupe = follower.url.clone();
    let mut w = Wallet::new();
    for i in 0..3 {
        send(&a, &w.legacy(0, fresh(i), 1_000_000_000));
    }
    follower_synced(&a, &loupe, &mut log);
    assert_eq!(health(&loupe), 200);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hammer = {
        let (loupe, stop) = (loupe.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0u64, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (m, p) in [
                    ("eth_blockNumber", json!([])),
                    ("eth_getBalance", json!([watched_address(), "latest"])),
                    ("eth_getBlockByNumber", json!(["latest", true])),
                ] {
                    match try_rpc(&loupe, m, p) {
                        Ok(_) => ok += 1,
                        Err(e) => failed.push(format!("{m}: {e}")),
                    }
                }
            }
            (ok, failed)
        })
    };
    // Down: SIGINT makes anvil write its dump.
    std::process::Command::new("kill")
        .args(["-INT", &anvil_proc.child.id().to_string()])
        .status()
        .unwrap();
    let mut anvil_proc = anvil_proc;
    let _ = anvil_proc.child.wait();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while health(&loupe) != 503 {
        assert!(std::time::Instant::now() < deadline, "health never went 503: {}", log.all());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(log.wait_for("retrying in", Duration::from_secs(10)).is_some(), "{}", log.all());
    // Back, with the same chain and one more block.
    let anvil_back = anvil::start_anvil(&up.bin, &dump, port, &dump_flag);
    send(&a, &w.legacy(0, fresh(9), 1_000_000_000));
    follower_synced(&a, &loupe, &mut log);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while health(&loupe) != 200 {
        assert!(std::time::Instant::now() < deadline, "health never came back: {}", log.all());
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = hammer.join().unwrap();
    assert!(ok > 30, "the hammer ran ({ok} requests)");
    assert!(failed.is_empty(), "requests to loupe failed while the upstream was away: {failed:?}");
    drop(anvil_back);
}

fn watched_address() -> Address {
    loupe::dev::dev_accounts()[0]
}

/// `loupe verify` passes on `datadir`; returns its head number and hash.
fn verify_and_head(datadir: &std::path::Path) -> (u64, B256) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["verify", "--datadir"])
        .arg(datadir)
        .output()
        .unwrap();
    assert!(out.status.success(), "verify: {}", String::from_utf8_lossy(&out.stderr));
    let db = loupe::storage::Database::open(datadir).unwrap();
    let r = db.begin_read().unwrap();
    let head = r.head().unwrap().unwrap();
    (head, r.canonical_hash(head).unwrap().unwrap())
}

fn hash_at(url: &str, n: u64) -> Option<B256> {
    let b = rpc(url, "eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
    (!b.is_null()).then(|| b["hash"].as_str().unwrap().parse().unwrap())
}

#[test]
fn kill_9_during_catch_up_and_during_an_unwind_leaves_a_verified_database_that_resumes() {
    let Some(up) = start_upstream(&[]) else { return };
    let a = up.anvil.url.clone();
    let mut w = Wallet::new();
    let contract = w.address(0).create(w.nonces[0]);
    send(&a, &w.eip1559(0, TxKind::Create, 0, init_code()));
    for i in 0..60 {
        send(&a, &w.eip2930(1, contract, word(i + 1)));
    }
    // Catch-up, killed at several moments (durable every 2 blocks, batches of 3).
    let flags = ["--follow.batch", "3", "--follow.sync-every", "2"];
    let mut last = 0;
    for delay_ms in [150, 400, 700, 1000] {
        let (follower, _log) = anvil::start_follower(&up.datadir, &a, &flags);
        std::thread::sleep(Duration::from_millis(delay_ms));
        drop(follower); // SIGKILL
        let (head, hash) = verify_and_head(&up.datadir);
        assert_eq!(hash_at(&a, head), Some(hash), "head {head} is a block of the upstream's chain");
        assert!(head >= last, "the head went back from {last} to {head}");
        last = head;
    }
    let (follower, mut log) = anvil::start_follower(&up.datadir, &a, &flags);
    let tip = follower_synced(&a, &loupe_url(&follower), &mut log);
    drop(follower);

    // Unwinds, killed a few milliseconds after the reorg appears upstream.
    let mut tip = tip;
    for (round, delay_ms) in [0u64, 5, 15, 40].into_iter().enumerate() {
        let (follower, mut log) = anvil::start_follower(&up.datadir, &a, &[]);
        let old = (tip, hash_at(&a, tip).unwrap());
        follower_synced(&a, &loupe_url(&follower), &mut log);
        let nonce = rpc(&a, "eth_getTransactionCount", json!([w.address(2), "latest"]));
        w.nonces[2] = u64::from_str_radix(&nonce.as_str().unwrap()[2..], 16).unwrap();
        let tx = w.legacy(2, fresh(200 + round as u64), 1_000_000_000);
        rpc(&a, "anvil_reorg", json!([3, [[raw(&tx), 1]]]));
        let new_tip = anvil::block_number(&a);
        let new = (new_tip, hash_at(&a, new_tip).unwrap());
        std::thread::sleep(Duration::from_millis(delay_ms));
        drop(follower);
        let head = verify_and_head(&up.datadir);
        // anvil mines the new branch block by block after dropping the old one, so a poll may
        // see (and the follower commit) part of it: any block of the new chain from the fork
        // point is a consistent head too, but never one of the old branch but its tip.
        let on_new_chain = head.0 >= old.0 - 3 && hash_at(&a, head.0) == Some(head.1);
        assert!(
            head == old || head == new || on_new_chain,
            "after kill -9: head {head:?}, neither {old:?} nor a block of the new chain up to {new:?}"
        );
        tip = new_tip;
    }
    let (follower, mut log) = anvil::start_follower(&up.datadir, &a, &[]);
    follower_synced(&a, &loupe_url(&follower), &mut log);
}

fn loupe_url(p: &Proc) -> String {
    p.url.clone()
}

#[test]
fn loupe_following_loupe_has_the_same_state_at_every_height() {
    let Some(fx) = common_fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let up_dir = tmp.path().join("upstream");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["import", "--datadir"])
        .arg(&up_dir)
        .arg("--genesis")
        .arg(fx.join("genesis.json"))
        .arg(fx.join("chain.rlp"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let port = anvil::free_port();
    let upstream = std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["node", "--datadir"])
        .arg(&up_dir)
        .args(["--http.port", &port.to_string()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let upstream = Proc { child: upstream, port, url: format!("http://127.0.0.1:{port}") };
    let follow_dir = tmp.path().join("follower");
    let genesis = fx.join("genesis.json");
    let (follower, mut log) = anvil::start_follower(
        &follow_dir,
        &upstream.url,
        &["--genesis", genesis.to_str().unwrap()],
    );
    let tip = follower_synced(&upstream.url, &follower.url, &mut log);
    assert_eq!(tip, 54);
    assert!(log.wait_for("debug_getRawBlock", Duration::from_secs(1)).is_some(), "raw blocks used");
    drop((follower, upstream));
    let a = loupe::storage::Database::open(&up_dir).unwrap();
    let b = loupe::storage::Database::open(&follow_dir).unwrap();
    let (ra, rb) = (a.begin_read().unwrap(), b.begin_read().unwrap());
    for n in 0..=tip {
        assert_eq!(ra.canonical_hash(n).unwrap(), rb.canonical_hash(n).unwrap(), "hash of {n}");
        let da = ra.state_at(n).unwrap().dump().unwrap();
        let db = rb.state_at(n).unwrap().dump().unwrap();
        assert!(!da.is_empty());
        assert_eq!(da, db, "state dump at block {n}");
    }
}

#[path = "support/fixtures.rs"]
#[allow(unreachable_pub)]
mod fixtures;

fn common_fixtures() -> Option<PathBuf> {
    fixtures::fixtures()
}

#[test]
fn viem_over_websocket_gets_new_heads_for_every_block_the_followed_anvil_mines() {
    let Some(up) = start_upstream(&[]) else { return };
    let Some(tools) = clients::node_tools() else { return };
    let ws_port = anvil::free_port();
    let (loupe, _log) = anvil::start_follower(
        &up.datadir,
        &up.anvil.url,
        &["--ws", "--ws.port", &ws_port.to_string()],
    );
    let dir = clients::node_script_dir(&tools, &["viem_ws.mjs"]);
    const HEADS: u64 = 8;
    let mut child = std::process::Command::new("node")
        .arg(dir.path().join("viem_ws.mjs"))
        .arg(format!("ws://127.0.0.1:{ws_port}"))
        .arg(HEADS.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let ready = lines.next().unwrap().unwrap();
    assert_eq!(ready, r#"{"ready":true}"#, "{ready}");
    let start = anvil::block_number(&loupe.url);
    // Blocks one at a time, then several at once (between two of the follower's polls).
    for _ in 0..4 {
        rpc(&up.anvil.url, "evm_mine", json!([]));
        std::thread::sleep(Duration::from_millis(300));
    }
    rpc(&up.anvil.url, "anvil_mine", json!(["0x4"]));
    let line = lines.next().unwrap().unwrap();
    let heads: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert!(child.wait().unwrap().success(), "viem: {line}");
    let heads = heads.as_array().unwrap_or_else(|| panic!("viem: {heads}"));
    assert_eq!(heads.len() as u64, HEADS);
    for (k, h) in heads.iter().enumerate() {
        let n = start + 1 + k as u64;
        assert_eq!(h["number"], json!(format!("{n:#x}")), "{heads:?}");
        let theirs = rpc(&up.anvil.url, "eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        assert_eq!(h["hash"], theirs["hash"], "block {n}");
    }
    drop(loupe);
}
