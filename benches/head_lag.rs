//! Head lag of `loupe follow` under steady production: anvil mines a full block every second.
//!
//! anvil 1.7.1 (installed from npm as the follow tests do) runs from loupe's genesis with
//! `--block-time 1`; a sender keeps its pool topped up with signed transfers to fresh addresses
//! (21,000 gas each, about 1,400 a block at the 30M gas limit), so every block is full. Two
//! watchers poll `eth_blockNumber` every 2 ms, one on anvil and one on loupe, and note when each
//! height first appears. The lag of a block is loupe's moment minus anvil's. Prints the median
//! and p99 over the measured blocks, how full they were, and how long anvil takes to serve one
//! of them as JSON (the largest part of the lag). `HEAD_LAG_LOG=follow=debug` prints the
//! follower's per-block fetch, import and commit times.
//!
//! `cargo bench --bench head_lag -- [BLOCKS] [POLL_MS]` (default 120 blocks, poll 500 ms, the
//! follower's default). The first 5 blocks are warm-up and not counted.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/support/anvil.rs"]
mod anvil;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy_eips::Encodable2718;
use alloy_eips::eip2930::AccessList;
use alloy_primitives::{Address, TxKind, U256};
use alloy_signer::SignerSync;
use serde_json::{Value, json};

const WARM_UP: u64 = 5;
/// Transactions kept waiting in anvil's pool: two blocks' worth.
const POOL_TARGET: u64 = 2_900;
const BATCH: usize = 300;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.parse().unwrap())
        .collect();
    let blocks = args.first().copied().unwrap_or(120);
    let poll_ms = args.get(1).copied().unwrap_or(500);
    let bin = anvil::anvil_bin().expect("anvil from npm");
    let tmp = tempfile::tempdir().unwrap();
    let datadir = tmp.path().join("loupe");
    // Full blocks raise the base fee by 1/8 a block without end: the senders get balances and
    // fee caps that outlast any run.
    let mut genesis: Value = serde_json::from_str(&anvil::genesis_json()).unwrap();
    for s in loupe::dev::dev_signers() {
        genesis["alloc"][format!("{:#x}", s.address())]["balance"] =
            json!(format!("{:#x}", U256::from(1u64) << 200));
    }
    let genesis = genesis.to_string();
    let state = {
        let db = loupe::storage::Database::open(&datadir).unwrap();
        loupe::import::init_genesis(&db, &genesis).unwrap();
        anvil::anvil_state(&genesis, &db)
    };
    let state_path = tmp.path().join("anvil-state.json");
    std::fs::write(&state_path, state.to_string()).unwrap();
    let up = anvil::start_anvil(&bin, &state_path, anvil::free_port(), &["--block-time", "1"]);
    let poll = poll_ms.to_string();
    let filter = std::env::var("HEAD_LAG_LOG").unwrap_or_else(|_| "info".into());
    let (follower, mut log) = anvil::start_follower(
        &datadir,
        &up.url,
        &["--follow.poll-ms", &poll, "--log.filter", &filter],
    );

    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (url, stop) = (up.url.clone(), stop.clone());
        std::thread::spawn(move || send_load(&url, &stop))
    };
    let seen_up = watch(&up.url, stop.clone());
    let seen_fo = watch(&follower.url, stop.clone());
    let last = WARM_UP + blocks;
    while !seen_fo.lock().unwrap().contains_key(&last) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();

    let (up_seen, fo_seen) = (seen_up.lock().unwrap(), seen_fo.lock().unwrap());
    let mut lags: Vec<f64> = (WARM_UP + 1..=last)
        .map(|n| {
            // Loupe may take several blocks in one step: a height is served once the head is at
            // or past it.
            let fo = fo_seen.range(n..).map(|(_, t)| *t).min().unwrap();
            fo.duration_since(up_seen[&n]).as_secs_f64() * 1000.0
        })
        .collect();
    // Where the lag goes: the upstream's own time to serve one of these blocks as JSON, and
    // the time to parse it (the follower's first step).
    let (mut serve, mut parse) = (Vec::new(), Vec::new());
    let client = reqwest::blocking::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber",
        "params": [format!("{last:#x}"), true]});
    for _ in 0..5 {
        let t = Instant::now();
        let text = client.post(&up.url).json(&body).send().unwrap().text().unwrap();
        serve.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let v: Value = serde_json::from_str(&text).unwrap();
        let _: alloy_rpc_types_eth::Block = serde_json::from_value(v["result"].clone()).unwrap();
        parse.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    if std::env::var("HEAD_LAG_LOG").is_ok() {
        println!("{}", log.all());
    }
    lags.sort_by(f64::total_cmp);
    let pct = |p: f64| lags[((lags.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    let (mut gas, mut txs) = (0u64, 0u64);
    let mut limit = 0u64;
    for n in WARM_UP + 1..=last {
        let b = anvil::rpc(&up.url, "eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        gas += hex(&b["gasUsed"]);
        limit += hex(&b["gasLimit"]);
        txs += b["transactions"].as_array().unwrap().len() as u64;
    }
    println!(
        "head lag over {} blocks (poll {poll_ms} ms): median {:.0} ms, p99 {:.0} ms, max {:.0} ms; \
         blocks {:.1}% full, {:.0} transactions and {:.1} Mgas a block",
        lags.len(),
        pct(0.5),
        pct(0.99),
        lags[lags.len() - 1],
        100.0 * gas as f64 / limit as f64,
        txs as f64 / blocks as f64,
        gas as f64 / blocks as f64 / 1e6,
    );
    println!(
        "one such block: anvil serves it as JSON in {:.0} ms, loupe parses it in {:.0} ms (medians of 5)",
        median(&mut serve),
        median(&mut parse)
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Polls `url`'s head every 2 ms; the map holds when each height was first seen.
fn watch(url: &str, stop: Arc<AtomicBool>) -> Arc<Mutex<BTreeMap<u64, Instant>>> {
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let (url, out) = (url.to_string(), seen.clone());
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []});
        while !stop.load(Ordering::Relaxed) {
            if let Ok(v) = client.post(&url).json(&body).send().and_then(|r| r.json::<Value>()) {
                let n = hex(&v["result"]);
                out.lock().unwrap().entry(n).or_insert_with(Instant::now);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    seen
}

/// Keeps anvil's pool at about [`POOL_TARGET`] transfers, signed by the dev keys in turn.
fn send_load(url: &str, stop: &AtomicBool) {
    let signers = loupe::dev::dev_signers();
    let mut nonces = vec![0u64; signers.len()];
    let client = reqwest::blocking::Client::new();
    let mut next = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let status = anvil::rpc(url, "txpool_status", json!([]));
        if hex(&status["pending"]) >= POOL_TARGET {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let batch: Vec<Value> = (0..BATCH)
            .map(|k| {
                let i = (next as usize) % signers.len();
                next += 1;
                let tx = TxEip1559 {
                    chain_id: anvil::CHAIN_ID,
                    nonce: nonces[i],
                    gas_limit: 21_000,
                    max_fee_per_gas: 10u128.pow(30),
                    max_priority_fee_per_gas: 1_000_000_000,
                    to: TxKind::Call(Address::left_padding_from(&(0xa000_0000 + next).to_be_bytes())),
                    value: U256::from(1u64),
                    access_list: AccessList::default(),
                    input: Default::default(),
                };
                nonces[i] += 1;
                let sig = signers[i].sign_hash_sync(&tx.signature_hash()).unwrap();
                let tx: TxEnvelope = tx.into_signed(sig).into();
                let raw = format!("0x{}", alloy_primitives::hex::encode(tx.encoded_2718()));
                json!({"jsonrpc": "2.0", "id": k, "method": "eth_sendRawTransaction", "params": [raw]})
            })
            .collect();
        let answers: Value = client.post(url).json(&batch).send().unwrap().json().unwrap();
        if let Some(e) = answers.as_array().and_then(|a| a.iter().find_map(|r| r.get("error"))) {
            panic!("anvil refused a transfer: {e}");
        }
    }
}
