//! Soak: minutes of saturating mixed load on a `loupe follow` of anvil (issue 13). Every
//! method, good and bad requests, batches, polling filters, and WebSocket subscriptions (some
//! that read, some that stop reading), while anvil mines a block a second with transfers and
//! log-emitting calls. Every answer is checked: a good request must get a result (or -32005
//! when the trace pool sheds load, counted apart), a bad one its specific error. The node's
//! RSS and open files are sampled; the run ends with a markdown record for BENCHMARKS.md.
//!
//! `cargo build --release && cargo run --release --example soak -- [MINUTES] [CLIENTS] [WARMUP]`
//! (defaults 10, 16 and 2: WARMUP minutes of the same load come before the MINUTES whose first
//! and last minute are compared; LOUPE_BIN picks the binary, default target/release/loupe;
//! SOAK_LOUPE_ARGS adds flags to `loupe follow`, e.g. `--db.cache-mb 8`; SOAK_SAMPLES=FILE
//! writes the 1-s samples as CSV; MIMALLOC_SHOW_STATS=1 prints the allocator's exit report;
//! SOAK_PREMINE=N gives anvil N blocks of history before the node starts following).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/support/anvil.rs"]
mod anvil;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Stores calldata's first word in slot 0 and logs it; empty calldata reverts (as in
/// tests/follow.rs).
const INIT_CODE: &str = "0x6017600c60003960176000f336156012576000358060005560006000a1005b600080fd";

/// What a request must get.
#[derive(Clone, Copy)]
enum Want {
    /// A result (every item, for a batch); -32005 counts as shed load.
    Ok,
    /// This JSON-RPC error code.
    Code(i64),
    /// An error, with whatever code the upstream chose (a forwarded request).
    AnyError,
}

#[derive(Default)]
struct Counts {
    good: AtomicU64,
    bad: AtomicU64,
    shed: AtomicU64,
    unexpected: AtomicU64,
    ws_heads: AtomicU64,
    ws_logs: AtomicU64,
    ws_dropped_readers: AtomicU64,
}

/// What the requests refer to, refreshed from the node as the chain grows.
#[derive(Clone, Default)]
struct Refs {
    head: u64,
    tx: Value,
    block_hash: Value,
}

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

fn requests(r: &Refs, contract: &str, i: u64) -> (Value, Want) {
    let a0 = anvil::ANVIL_ACCOUNTS[0];
    let a3 = anvil::ANVIL_ACCOUNTS[3];
    let n = hex(if r.head == 0 { 0 } else { i % (r.head + 1) });
    let recent = hex(r.head.saturating_sub(100));
    let call = json!({"from": a0, "to": contract, "data": format!("0x{:064x}", i)});
    let transfer = json!({"from": a0, "to": a3, "value": "0x1"});
    let one = |m: &str, p: Value| json!({"jsonrpc": "2.0", "id": i, "method": m, "params": p});
    use Want::{AnyError, Code, Ok};
    let all = [
        (one("eth_blockNumber", json!([])), Ok),
        (one("eth_chainId", json!([])), Ok),
        (one("net_version", json!([])), Ok),
        (one("web3_clientVersion", json!([])), Ok),
        (one("eth_syncing", json!([])), Ok),
        (one("eth_gasPrice", json!([])), Ok),
        (one("eth_maxPriorityFeePerGas", json!([])), Ok),
        (one("eth_feeHistory", json!(["0x10", "latest", [10, 90]])), Ok),
        (one("eth_blobBaseFee", json!([])), Ok),
        (one("eth_getBlockByNumber", json!(["latest", true])), Ok),
        (one("eth_getBlockByNumber", json!([n, false])), Ok),
        (one("eth_getBlockByHash", json!([r.block_hash, true])), Ok),
        (one("eth_getBalance", json!([a3, n])), Ok),
        (one("eth_getTransactionCount", json!([a0, n])), Ok),
        (one("eth_getCode", json!([contract, "latest"])), Ok),
        (one("eth_getStorageAt", json!([contract, "0x0", n])), Ok),
        (one("eth_getProof", json!([contract, ["0x0"], "latest"])), Ok),
        (one("eth_getTransactionByHash", json!([r.tx])), Ok),
        (one("eth_getTransactionReceipt", json!([r.tx])), Ok),
        (one("eth_getBlockReceipts", json!([n])), Ok),
        (one("eth_getTransactionByBlockNumberAndIndex", json!(["latest", "0x0"])), Ok),
        (
            one(
                "eth_getLogs",
                json!([{"fromBlock": recent, "toBlock": "latest", "address": contract}]),
            ),
            Ok,
        ),
        (one("eth_call", json!([call, "latest"])), Ok),
        (one("eth_estimateGas", json!([transfer, "latest"])), Ok),
        (one("eth_createAccessList", json!([call, "latest"])), Ok),
        (
            one(
                "eth_simulateV1",
                json!([{"blockStateCalls": [{"calls": [transfer, call]}], "traceTransfers": true}, "latest"]),
            ),
            Ok,
        ),
        (one("trace_call", json!([call, ["trace", "stateDiff"], "latest"])), Ok),
        (
            one(
                "trace_callMany",
                json!([[[call, ["trace"]], [transfer, ["stateDiff"]]], "latest"]),
            ),
            Ok,
        ),
        (one("trace_block", json!([n])), Ok),
        (one("trace_transaction", json!([r.tx])), Ok),
        (one("trace_replayTransaction", json!([r.tx, ["trace", "stateDiff"]])), Ok),
        (one("trace_replayBlockTransactions", json!(["latest", ["trace"]])), Ok),
        (one("trace_get", json!([r.tx, ["0x0"]])), Ok),
        (
            one(
                "trace_filter",
                json!([{"fromBlock": recent, "toBlock": "latest", "toAddress": [contract], "count": 20}]),
            ),
            Ok,
        ),
        (one("debug_traceTransaction", json!([r.tx, {"tracer": "callTracer"}])), Ok),
        (one("debug_traceBlockByNumber", json!(["latest", {"tracer": "prestateTracer"}])), Ok),
        (one("debug_traceCall", json!([call, "latest", {}])), Ok),
        (one("debug_getRawBlock", json!([n])), Ok),
        (one("debug_getRawHeader", json!([n])), Ok),
        (one("debug_getRawTransaction", json!([r.tx])), Ok),
        (one("eth_getRawTransactionByHash", json!([r.tx])), Ok),
        (one("debug_traceBlockByHash", json!([r.block_hash, {"tracer": "callTracer"}])), Ok),
        (one("eth_accounts", json!([])), Ok),
        (one("eth_baseFee", json!([])), Ok),
        (one("eth_capabilities", json!([])), Ok),
        (one("eth_config", json!([])), Ok),
        (one("net_listening", json!([])), Ok),
        (one("net_peerCount", json!([])), Ok),
        (one("web3_sha3", json!(["0x68656c6c6f"])), Ok),
        (one("eth_getBlockTransactionCountByHash", json!([r.block_hash])), Ok),
        (one("eth_getBlockTransactionCountByNumber", json!([n])), Ok),
        (one("eth_getTransactionByBlockHashAndIndex", json!([r.block_hash, "0x0"])), Ok),
        (one("eth_getStorageValues", json!([{ contract: ["0x0", "0x1"] }, n])), Ok),
        (one("eth_getUncleByBlockHashAndIndex", json!([r.block_hash, "0x0"])), Ok),
        (one("eth_getUncleByBlockNumberAndIndex", json!([n, "0x0"])), Ok),
        (one("eth_getUncleCountByBlockHash", json!([r.block_hash])), Ok),
        (one("eth_getUncleCountByBlockNumber", json!([n])), Ok),
        // Forwarded to anvil, which refuses bytes that are no transaction.
        (one("eth_sendRawTransaction", json!(["0x02"])), AnyError),
        (one("debug_getRawReceipts", json!([n])), Ok),
        (
            json!([
                one("eth_blockNumber", json!([])),
                one("eth_getBalance", json!([a0, "latest"])),
                one("eth_getBlockByNumber", json!([n, false])),
                one("trace_block", json!(["latest"]))
            ]),
            Ok,
        ),
        // Bad requests, each with the error it must get.
        (one("eth_noSuchMethod", json!([])), Code(-32601)),
        (one("eth_getBalance", json!(["0x12", "latest"])), Code(-32602)),
        (one("eth_getBlockByNumber", json!(["0xffffffffffffffffff", false])), Code(-32602)),
        (one("eth_call", json!([{"to": contract, "data": "0x"}, "latest"])), Code(3)),
        (Value::String("{\"jsonrpc\":\"2.0\",\"id\":1,".into()), Code(-32700)),
    ];
    let k = (i as usize) % all.len();
    all[k].clone()
}

/// Sends one request; classifies the answer.
fn check(
    http: &reqwest::blocking::Client,
    url: &str,
    body: &Value,
    want: Want,
    c: &Counts,
    log: &Mutex<Vec<String>>,
) {
    let text = match body {
        Value::String(raw) => raw.clone(),
        v => v.to_string(),
    };
    let outcome = http
        .post(url)
        .header("content-type", "application/json")
        .body(text.clone())
        .send()
        .and_then(|r| r.text());
    let unexpected = |why: String| {
        c.unexpected.fetch_add(1, Relaxed);
        let mut l = log.lock().unwrap();
        if l.len() < 20 {
            let line = format!("{why}\n  request: {}", &text[..text.len().min(300)]);
            eprintln!("unexpected: {line}");
            l.push(line);
        }
    };
    let answer = match outcome {
        Err(e) => return unexpected(format!("transport: {e}")),
        Ok(t) => match serde_json::from_str::<Value>(&t) {
            Ok(v) => v,
            Err(e) => return unexpected(format!("not JSON ({e}): {}", &t[..t.len().min(300)])),
        },
    };
    let items = match &answer {
        Value::Array(a) => a.clone(),
        v => vec![v.clone()],
    };
    for item in items {
        let code = item["error"]["code"].as_i64();
        match (want, code) {
            (Want::Ok, None) if item.get("result").is_some() => {
                c.good.fetch_add(1, Relaxed);
            }
            (_, Some(-32005)) => {
                c.shed.fetch_add(1, Relaxed);
            }
            (Want::Code(w), Some(got)) if w == got => {
                c.bad.fetch_add(1, Relaxed);
            }
            (Want::AnyError, Some(_)) => {
                c.bad.fetch_add(1, Relaxed);
            }
            _ => unexpected(format!(
                "answer: {}",
                &item.to_string()[..item.to_string().len().min(300)]
            )),
        }
    }
}

/// A subscriber that reads: counts heads and logs, checks heads arrive without gaps, and
/// resubscribes every 30 s (unsubscribe churn).
async fn reader(
    ws: String,
    contract: String,
    stop: Arc<AtomicBool>,
    c: Arc<Counts>,
    log: Arc<Mutex<Vec<String>>>,
) {
    use jsonrpsee::core::client::{Subscription, SubscriptionClientT};
    use jsonrpsee::rpc_params;
    while !stop.load(Relaxed) {
        let Ok(client) = jsonrpsee::ws_client::WsClientBuilder::default().build(&ws).await else {
            log.lock().unwrap().push("ws connect failed".into());
            c.unexpected.fetch_add(1, Relaxed);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let heads: Result<Subscription<Value>, _> =
            client.subscribe("eth_subscribe", rpc_params!["newHeads"], "eth_unsubscribe").await;
        let logs: Result<Subscription<Value>, _> = client
            .subscribe(
                "eth_subscribe",
                rpc_params!["logs", json!({"address": contract})],
                "eth_unsubscribe",
            )
            .await;
        let (Ok(mut heads), Ok(mut logs)) = (heads, logs) else {
            log.lock().unwrap().push("ws subscribe failed".into());
            c.unexpected.fetch_add(1, Relaxed);
            continue;
        };
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut last: Option<u64> = None;
        while tokio::time::Instant::now() < until && !stop.load(Relaxed) {
            tokio::select! {
                h = heads.next() => match h {
                    Some(Ok(h)) => {
                        let n = u64::from_str_radix(h["number"].as_str().unwrap_or("0x0").trim_start_matches("0x"), 16).unwrap_or(0);
                        // After a reorg the fork is re-sent from its first block: n <= last.
                        if let Some(l) = last && n > l + 1 {
                            log.lock().unwrap().push(format!("newHeads gap: {l} then {n}"));
                            c.unexpected.fetch_add(1, Relaxed);
                        }
                        last = Some(n);
                        c.ws_heads.fetch_add(1, Relaxed);
                    }
                    other => {
                        log.lock().unwrap().push(format!("newHeads ended: {other:?}"));
                        c.unexpected.fetch_add(1, Relaxed);
                        break;
                    }
                },
                l = logs.next() => if let Some(Ok(_)) = l { c.ws_logs.fetch_add(1, Relaxed); },
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
        let _ = heads.unsubscribe().await;
        let _ = logs.unsubscribe().await;
    }
}

/// A subscriber that never reads: the node must drop it (it answers no ping).
fn non_reader(addr: &str, c: &Counts, stop: &AtomicBool) {
    let Ok(mut tcp) = std::net::TcpStream::connect(addr) else { return };
    let _ = write!(
        tcp,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#;
    let mut frame = vec![0x81, 0x80 | body.len() as u8, 1, 2, 3, 4];
    frame.extend(body.iter().enumerate().map(|(i, b)| b ^ [1, 2, 3, 4][i % 4]));
    let _ = tcp.write_all(&frame);
    // Sleep without reading; then see whether the server closed the connection.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) && !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
    }
    tcp.set_read_timeout(Some(Duration::from_millis(200))).ok();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => {
                c.ws_dropped_readers.fetch_add(1, Relaxed);
                return;
            }
            Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// One reading of the node's `/proc` status.
#[derive(Clone, Copy)]
struct Sample {
    t: f64,
    /// VmRSS, RssAnon and RssFile in KiB.
    rss: u64,
    anon: u64,
    file: u64,
    /// Anonymous memory in transparent huge pages (`AnonHugePages` of `smaps_rollup`), KiB.
    huge: u64,
    threads: u64,
    fds: usize,
}

/// The number on the `name` line (`VmRSS:` in kB, `Threads:` a count) of a `/proc` file; 0 when absent.
fn kib(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

fn proc_stat(pid: u32, t: f64) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    Sample {
        t,
        rss: kib(&status, "VmRSS:"),
        anon: kib(&status, "RssAnon:"),
        file: kib(&status, "RssFile:"),
        huge: kib(&rollup, "AnonHugePages:"),
        threads: kib(&status, "Threads:"),
        fds,
    }
}

/// The median of `values` (0 when empty).
fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let m = values.len() / 2;
    if values.len() % 2 == 1 { values[m] } else { (values[m - 1] + values[m]) / 2.0 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let minutes: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let clients: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(16);
    let warmup_minutes: f64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let bin = std::env::var_os("LOUPE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/loupe"));
    let anvil_bin = anvil::anvil_bin().expect("anvil");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // anvil from loupe's genesis, a block a second.
    let genesis_text = anvil::genesis_json();
    let genesis = dir.join("genesis.json");
    std::fs::write(&genesis, &genesis_text).unwrap();
    let state = {
        let db = loupe::storage::Database::open(&dir.join("scratch")).unwrap();
        loupe::import::init_genesis(&db, &genesis_text).unwrap();
        anvil::anvil_state(&genesis_text, &db)
    };
    std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    let up = anvil::start_anvil(
        &anvil_bin,
        &dir.join("state.json"),
        anvil::free_port(),
        &["--block-time", "1"],
    );
    let deploy = anvil::rpc(
        &up.url,
        "eth_sendTransaction",
        json!([{"from": anvil::ANVIL_ACCOUNTS[1], "data": INIT_CODE}]),
    );
    let contract = loop {
        let receipt = anvil::rpc(&up.url, "eth_getTransactionReceipt", json!([deploy]));
        if let Some(a) = receipt["contractAddress"].as_str() {
            break a.to_string();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // SOAK_PREMINE=N: N blocks of history (two transactions each) before the follower starts,
    // so the node starts on a chain larger than its caches and the window measures the node,
    // not its caches filling with a young chain.
    let premine: u64 = std::env::var("SOAK_PREMINE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for i in 0..premine {
        let value = hex(i + 1);
        let to_contract = format!("0x{:064x}", i + 1);
        anvil::rpc(
            &up.url,
            "eth_sendTransaction",
            json!([{"from": anvil::ANVIL_ACCOUNTS[0], "to": anvil::ANVIL_ACCOUNTS[3], "value": value}]),
        );
        anvil::rpc(
            &up.url,
            "eth_sendTransaction",
            json!([{"from": anvil::ANVIL_ACCOUNTS[2], "to": contract, "data": to_contract}]),
        );
        anvil::rpc(&up.url, "anvil_mine", json!(["0x1"]));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (url, stop, contract) = (up.url.clone(), stop.clone(), contract.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Relaxed) {
                i += 1;
                let tx = if i.is_multiple_of(2) {
                    json!({"from": anvil::ANVIL_ACCOUNTS[0], "to": anvil::ANVIL_ACCOUNTS[3], "value": hex(i)})
                } else {
                    json!({"from": anvil::ANVIL_ACCOUNTS[2], "to": contract, "data": format!("0x{i:064x}")})
                };
                let _ = anvil::try_rpc(&url, "eth_sendTransaction", json!([tx]));
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };

    // The follower, with WebSocket on.
    let (port, ws_port) = (anvil::free_port(), anvil::free_port());
    let mut node = Command::new(&bin)
        .args(["follow", "--datadir"])
        .arg(dir.join("loupe"))
        .arg("--genesis")
        .arg(&genesis)
        .args(["--upstream", &up.url, "--follow.poll-ms", "200", "--log.filter", "warn"])
        .args(["--http.port", &port.to_string(), "--ws", "--ws.port", &ws_port.to_string()])
        .args(std::env::var("SOAK_LOUPE_ARGS").unwrap_or_default().split_whitespace())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("loupe.log")).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let ws = format!("ws://127.0.0.1:{ws_port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while anvil::try_rpc(&url, "eth_blockNumber", json!([])).is_err() {
        assert!(Instant::now() < deadline, "loupe did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let target = anvil::block_number(&up.url);
    let deadline = Instant::now() + Duration::from_secs(600);
    while anvil::block_number(&url) < target {
        assert!(Instant::now() < deadline, "loupe did not catch up with the premined chain");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(5));

    let refs = Arc::new(RwLock::new(Refs::default()));
    let refresh = |refs: &RwLock<Refs>| {
        let Ok(b) = anvil::try_rpc(&url, "eth_getBlockByNumber", json!(["latest", false])) else {
            return;
        };
        let head =
            u64::from_str_radix(b["number"].as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)
                .unwrap_or(0);
        let mut r = refs.write().unwrap();
        r.head = head;
        r.block_hash = b["hash"].clone();
        if let Some(tx) = b["transactions"].as_array().and_then(|t| t.first()) {
            r.tx = tx.clone();
        }
    };
    while refs.read().unwrap().tx.is_null() {
        refresh(&refs);
        std::thread::sleep(Duration::from_millis(300));
    }

    let counts = Arc::new(Counts::default());
    let log = Arc::new(Mutex::new(Vec::new()));
    let load_stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for k in 0..clients {
        let (url, refs, contract, c, log, stop) = (
            url.clone(),
            refs.clone(),
            contract.clone(),
            counts.clone(),
            log.clone(),
            load_stop.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap();
            let mut i = k as u64 * 7919;
            while !stop.load(Relaxed) {
                i += 1;
                let r = refs.read().unwrap().clone();
                let (body, want) = requests(&r, &contract, i);
                check(&http, &url, &body, want, &c, &log);
                // Log filters: install, read whole, uninstall.
                if i.is_multiple_of(50) {
                    let recent = hex(r.head.saturating_sub(50));
                    let filter = json!([{"fromBlock": recent, "address": contract}]);
                    let id = anvil::try_rpc(&url, "eth_newFilter", filter);
                    let logs = id
                        .as_ref()
                        .map_err(Clone::clone)
                        .and_then(|id| anvil::try_rpc(&url, "eth_getFilterLogs", json!([id])));
                    let removed = id
                        .as_ref()
                        .map_err(Clone::clone)
                        .and_then(|id| anvil::try_rpc(&url, "eth_uninstallFilter", json!([id])));
                    if logs.as_ref().is_ok_and(Value::is_array) && removed == Ok(json!(true)) {
                        c.good.fetch_add(3, Relaxed);
                    } else {
                        c.unexpected.fetch_add(1, Relaxed);
                        log.lock().unwrap().push(format!("log filter: {logs:?} {removed:?}"));
                    }
                }
                // Polling filters: install, poll, uninstall.
                if i.is_multiple_of(50) {
                    let id = anvil::try_rpc(&url, "eth_newBlockFilter", json!([]));
                    match id {
                        Ok(id) => {
                            let polled = anvil::try_rpc(&url, "eth_getFilterChanges", json!([id]));
                            let removed = anvil::try_rpc(&url, "eth_uninstallFilter", json!([id]));
                            if polled.is_err() || removed != Ok(json!(true)) {
                                c.unexpected.fetch_add(1, Relaxed);
                                log.lock().unwrap().push(format!("filter: {polled:?} {removed:?}"));
                            } else {
                                c.good.fetch_add(3, Relaxed);
                            }
                        }
                        Err(e) => {
                            c.unexpected.fetch_add(1, Relaxed);
                            log.lock().unwrap().push(format!("eth_newBlockFilter: {e}"));
                        }
                    }
                }
            }
        }));
    }
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            rt.spawn(reader(
                ws.clone(),
                contract.clone(),
                load_stop.clone(),
                counts.clone(),
                log.clone(),
            ))
        })
        .collect();
    {
        let (c, stop, addr) =
            (counts.clone(), load_stop.clone(), ws.trim_start_matches("ws://").to_string());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                non_reader(&addr, &c, &stop);
            }
        }));
    }

    // Sample every second and print a row every 10 s (medians of its 10 samples). The first
    // `warmup_minutes` run the same load (its answers are checked like the rest) while allocator
    // arenas and buffers reach their working size; the RSS and open-file comparison covers the
    // measured minutes after it, as the medians of the first and the last minute's samples
    // (one 1-s reading can land on a burst of in-flight responses, a median cannot).
    // SOAK_SAMPLES=FILE also writes every sample as CSV.
    let started = Instant::now();
    let warmup = warmup_minutes * 60.0;
    let total = Duration::from_secs_f64(warmup + minutes * 60.0);
    let db_file = dir.join("loupe").join(loupe::storage::DB_FILE);
    let mut samples: Vec<Sample> = Vec::new();
    let mut csv = std::env::var_os("SOAK_SAMPLES").map(|p| {
        let mut f = std::fs::File::create(p).expect("SOAK_SAMPLES file");
        writeln!(f, "t,rss_kib,anon_kib,file_kib,huge_kib,threads,fds").ok();
        f
    });
    println!(
        "| t (s) | phase | RSS (MiB) | anon (MiB) | huge pages (MiB) | threads | open files | database (MiB) | requests answered | unexpected | head |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut tick = 0u64;
    while started.elapsed() < total {
        tick += 1;
        let next = Duration::from_secs(tick);
        std::thread::sleep(next.saturating_sub(started.elapsed()));
        let s = proc_stat(node.id(), started.elapsed().as_secs_f64());
        if let Some(f) = csv.as_mut() {
            let (t, rss, anon, file, huge) = (s.t, s.rss, s.anon, s.file, s.huge);
            writeln!(f, "{t:.1},{rss},{anon},{file},{huge},{},{}", s.threads, s.fds).ok();
        }
        samples.push(s);
        if !tick.is_multiple_of(10) {
            continue;
        }
        refresh(&refs);
        let last: Vec<Sample> = samples.iter().rev().take(10).copied().collect();
        let med = |f: fn(&Sample) -> f64| median(last.iter().map(f).collect());
        let answered =
            counts.good.load(Relaxed) + counts.bad.load(Relaxed) + counts.shed.load(Relaxed);
        let db_mib = std::fs::metadata(&db_file).map_or(0.0, |m| m.len() as f64 / 1048576.0);
        println!(
            "| {:.0} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {db_mib:.1} | {answered} | {} | {} |",
            s.t,
            if s.t <= warmup { "warm-up" } else { "measured" },
            med(|s| s.rss as f64) / 1024.0,
            med(|s| s.anon as f64) / 1024.0,
            med(|s| s.huge as f64) / 1024.0,
            med(|s| s.threads as f64),
            med(|s| s.fds as f64),
            counts.unexpected.load(Relaxed),
            refs.read().unwrap().head
        );
    }
    load_stop.store(true, Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    rt.block_on(async {
        for r in readers {
            let _ = r.await;
        }
    });
    stop.store(true, Relaxed);
    sender.join().unwrap();

    let window = |from: f64, to: f64| {
        let s: Vec<&Sample> = samples.iter().filter(|s| s.t > from && s.t <= to).collect();
        (
            median(s.iter().map(|s| s.rss as f64).collect()),
            median(s.iter().map(|s| s.fds as f64).collect()),
        )
    };
    let end = samples.last().map_or(0.0, |s| s.t);
    let (rss_first, fds_first) = window(warmup, warmup + 60.0);
    let (rss_last, fds_last) = window(end - 60.0, end);
    let secs = started.elapsed().as_secs_f64();
    let c = &counts;
    println!();
    println!(
        "duration {secs:.0} s ({warmup:.0} s warm-up), {clients} HTTP clients, 4 WebSocket readers, 1 non-reading subscriber at a time"
    );
    println!(
        "answered: {} good, {} bad with the right error, {} shed (-32005); {:.0} req/s",
        c.good.load(Relaxed),
        c.bad.load(Relaxed),
        c.shed.load(Relaxed),
        (c.good.load(Relaxed) + c.bad.load(Relaxed) + c.shed.load(Relaxed)) as f64 / secs
    );
    println!(
        "WebSocket: {} heads, {} logs received; {} non-reading subscribers disconnected by the node",
        c.ws_heads.load(Relaxed),
        c.ws_logs.load(Relaxed),
        c.ws_dropped_readers.load(Relaxed)
    );
    println!("unexpected: {}", c.unexpected.load(Relaxed));
    for l in log.lock().unwrap().iter() {
        println!("  {l}");
    }
    let rss_change = (rss_last - rss_first) / rss_first * 100.0;
    println!(
        "RSS median of the first measured minute {:.1} MiB, of the last minute {:.1} MiB ({rss_change:+.1}%); open files {fds_first:.1} -> {fds_last:.1}",
        rss_first / 1024.0,
        rss_last / 1024.0
    );
    // SIGTERM, so that an allocator's exit report (MIMALLOC_SHOW_STATS=1) is printed.
    let _ = Command::new("kill").arg("-TERM").arg(node.id().to_string()).status();
    let _ = node.wait();
    if std::env::var_os("MIMALLOC_SHOW_STATS").is_some() {
        let text = std::fs::read_to_string(dir.join("loupe.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        println!("node's last log lines (allocator report):");
        for l in &lines[lines.len().saturating_sub(60)..] {
            println!("  {l}");
        }
    }
    let ok = c.unexpected.load(Relaxed) == 0
        && rss_change.abs() <= 10.0
        && (fds_last - fds_first).abs() <= 0.1 * fds_first.max(10.0);
    println!("{}", if ok { "SOAK PASSED" } else { "SOAK FAILED" });
    std::process::exit(if ok { 0 } else { 1 });
}
