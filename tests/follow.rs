//! `loupe follow` against real upstreams: anvil 1.7.1 (installed from npm), started from
//! loupe's genesis, and another loupe. The truth is the upstream's own answers (blocks,
//! transactions, receipts, balances, storage, code at every height) and, for loupe following
//! loupe, the upstream's state dump at every height.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/anvil.rs"]
mod anvil;

use std::path::PathBuf;
use std::time::Duration;

use alloy_consensus::{SignableTransaction, TxEip1559, TxEip2930, TxEip7702, TxEnvelope, TxLegacy};
use alloy_eips::Encodable2718;
use alloy_eips::eip2930::{AccessList, AccessListItem};
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
    let bin = anvil::anvil_bin()?;
    let tmp = tempfile::tempdir().unwrap();
    let datadir = tmp.path().join("loupe");
    let genesis = anvil::genesis_json();
    let (state, genesis_hash) = {
        let db = loupe::storage::Database::open(&datadir).unwrap();
        let (spec, _) = loupe::import::init_genesis(&db, &genesis).unwrap();
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

fn send(url: &str, tx: &TxEnvelope) -> Value {
    rpc(url, "eth_sendRawTransaction", json!([raw(tx)]))
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

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Sends a mix of transactions (every type but blobs; deployment, calls, reverts, a 7702
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
        send(via, &w.legacy(0, fresh(i), 1_000_000_000 + i));
        send(via, &w.eip2930(1, contract, word(i + 1)));
        // Reverts (empty calldata), mined with status 0.
        send(via, &w.eip1559(2, TxKind::Call(contract), 0, Bytes::new()));
        send(via, &w.eip1559(1, TxKind::Call(w.address(2)), 12345, Bytes::new()));
        if i % 4 == 3 {
            rpc(anvil, "evm_mine", json!([]));
        }
        if i == 5 {
            send(via, &w.eip7702(0, 2, contract));
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
        "loupe did not reach anvil's head {tip} {hash}; its log:\n{}",
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
    for t in ["0x0", "0x1", "0x2", "0x4"] {
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
