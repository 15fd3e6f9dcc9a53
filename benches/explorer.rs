//! Server-side time of the explorer's pages (issue 43): every transaction page of the dev
//! chain, and a simulated call of 1,000 nested calls, each requested many times through the
//! node's whole HTTP request path in-process (`rpc::InProcess`: routing, the JSON-RPC methods
//! on their pools, parsing, rendering; no socket). Beside each page, the same methods asked
//! over JSON-RPC (one batch), so the difference is what the explorer adds.
//!
//! Run: `cargo bench --bench explorer` (`LOUPE_BENCH_RUNS`, default 300 requests per page).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use loupe::rpc::{InProcess, RpcConfig};
use serde_json::{Value, json};

/// Same allocator as the binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ACCOUNT0: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
const COUNTER: &str = "5fbdb2315678afecb367f032d93f642f64180aa3";

struct Stats {
    median: Duration,
    p90: Duration,
    max: Duration,
    bytes: usize,
}

/// Times `runs` requests (after 20 unmeasured ones).
fn measure(
    rt: &tokio::runtime::Runtime,
    node: &InProcess,
    method: &str,
    path: &str,
    body: &[u8],
    runs: usize,
) -> Stats {
    let mut bytes = 0;
    for _ in 0..20 {
        let (status, answer) = rt.block_on(node.request(method, path, body.to_vec()));
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&answer));
        bytes = answer.len();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let (status, _) = rt.block_on(node.request(method, path, body.to_vec()));
            let took = started.elapsed();
            assert_eq!(status, 200);
            took
        })
        .collect();
    times.sort();
    Stats {
        median: times[times.len() / 2],
        p90: times[times.len() * 9 / 10],
        max: times[times.len() - 1],
        bytes,
    }
}

fn rpc(rt: &tokio::runtime::Runtime, node: &InProcess, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (_, answer) = rt.block_on(node.request("POST", "/", body.to_string().into_bytes()));
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    answer["result"].clone()
}

/// Init code that calls `Counter` `n` times in a loop, then stops.
fn calling_init_code(n: u16) -> String {
    let [hi, lo] = n.to_be_bytes();
    format!("0x61{hi:02x}{lo:02x}5b6000600060006000600073{COUNTER}5af15060019003806003570000")
}

fn main() {
    let runs: usize =
        std::env::var("LOUPE_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(300);
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = loupe::storage::Database::open(tmp.path()).expect("db");
    let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
    loupe::dev::build_sample_history(&db, &spec).unwrap();
    let config = RpcConfig {
        pages: Some(Arc::new(loupe::explorer::Explorer::new())),
        ..RpcConfig::default()
    };
    let node = InProcess::new(Arc::new(db), spec, config).expect("request path");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    println!("explorer pages, server side (in-process request path), {runs} requests each\n");
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "page", "median", "p90", "max", "HTML", "JSON-RPC"
    );
    let head = rpc(&rt, &node, "eth_blockNumber", json!([]));
    let head = u64::from_str_radix(head.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let mut rows = Vec::new();
    for n in 1..=head {
        let block = rpc(&rt, &node, "eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        for (i, hash) in block["transactions"].as_array().unwrap().iter().enumerate() {
            let hash = hash.as_str().unwrap();
            let page = measure(&rt, &node, "GET", &format!("/explorer/tx/{hash}"), b"", runs);
            // The page's three methods, asked over JSON-RPC in one batch.
            let batch = json!([
                {"jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionByHash", "params": [hash]},
                {"jsonrpc": "2.0", "id": 2, "method": "eth_getTransactionReceipt", "params": [hash]},
                {"jsonrpc": "2.0", "id": 3, "method": "trace_replayTransaction",
                 "params": [hash, ["trace", "stateDiff"]]},
            ]);
            let alone = measure(&rt, &node, "POST", "/", batch.to_string().as_bytes(), runs);
            rows.push((format!("tx page, block {n} #{i}"), page, alone));
        }
    }
    let calls = 1000;
    let call =
        format!("/explorer/call?from={ACCOUNT0}&data={}&block=latest", calling_init_code(calls));
    let page = measure(&rt, &node, "GET", &call, b"", runs);
    let traced = rpc(
        &rt,
        &node,
        "trace_call",
        json!([{"from": ACCOUNT0, "data": calling_init_code(calls)}, ["trace"], "latest"]),
    );
    assert_eq!(traced["trace"].as_array().unwrap().len(), usize::from(calls) + 1);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "trace_call", "params":
        [{"from": ACCOUNT0, "data": calling_init_code(calls)}, ["trace", "stateDiff"], "latest"]});
    let alone = measure(&rt, &node, "POST", "/", body.to_string().as_bytes(), runs);
    rows.sort_by_key(|(_, page, _)| std::cmp::Reverse(page.median));
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    for (name, page, alone) in
        rows.iter().chain([&(format!("call page, {calls} calls"), page, alone)])
    {
        println!(
            "{name:<34} {:>9} {:>9} {:>9} {:>8}K {:>12}",
            ms(page.median),
            ms(page.p90),
            ms(page.max),
            page.bytes / 1024,
            ms(alone.median)
        );
    }
    let (name, busiest, _) = &rows[0];
    println!("\nslowest transaction page of the dev chain: {name}, median {}", ms(busiest.median));
}
