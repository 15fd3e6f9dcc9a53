//! The abuse probes of issue 60, replayed against the real binary (`loupe dev`, default flags):
//! each once took gigabytes, locked every client out or kept the node working after its
//! client left. For each probe the test asserts what a public endpoint owes everyone else:
//!
//! - a clear error naming the limit (and its flag) where a request asks for too much;
//! - the process's resident memory grows by less than [`MAX_GROWTH`] for the probe (its peak,
//!   `VmHWM`, reset before the probe through `/proc/PID/clear_refs`, against `VmRSS` before);
//! - `eth_blockNumber` from another client ([`Watch`], 127.0.0.1) answered throughout, each
//!   within [`MAX_STALL`];
//! - work stopping once its client leaves: the EVM workers' own CPU time (`/proc/PID/task`,
//!   threads `loupe-evm-*`) stops growing.
//!
//! Attackers connect from 127.0.0.2 (Linux routes all of 127/8 to loopback), so per-client
//! limits see two clients, as they would on a public URL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/served.rs"]
mod served;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Most a single probe may add to the node's resident memory.
const MAX_GROWTH: u64 = 256 << 20;
/// Longest the watching client may wait for `eth_blockNumber` while a probe runs.
const MAX_STALL: Duration = Duration::from_secs(2);
/// Where the attacker's connections come from.
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// Where the well-behaved client's connections come from.
const GOOD: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// An endless loop: `JUMPDEST PUSH1 0 JUMP`.
const LOOP_CODE: &str = "0x5b600056";
const LOOP_AT: &str = "0x0000000000000000000000000000000000001009";

/// A `loupe dev` process on a fresh datadir and a free port.
struct Loupe {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Loupe {
    fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
            .arg("dev")
            .arg("--datadir")
            .arg(dir.path())
            .args(["--http.port", "0", "--log.filter", "info"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !sent && let Some(url) = served::served_url(&line) {
                    let _ = tx.send(url);
                    sent = true;
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(120)).expect("loupe dev did not serve");
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        let node = Self { child, port, _dir: dir };
        // The sample history is complete once block 20 is there.
        let started = Instant::now();
        while node.call(GOOD, "eth_blockNumber", json!([])).1["result"].as_str() != Some("0x14") {
            assert!(started.elapsed() < Duration::from_secs(60), "no sample history");
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One JSON-RPC call from `from`: the HTTP status and the parsed body.
    fn call(&self, from: Ipv4Addr, method: &str, params: Value) -> (u16, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, text) = post(from, self.port, body.to_string().as_bytes(), None);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Reads one field of `/proc/PID/status`, in bytes.
    fn status_bytes(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = text.lines().find(|l| l.starts_with(field)).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib << 10
    }

    /// Runs `probe` and returns its answer with the growth of resident memory it caused.
    fn measured<T>(&self, probe: impl FnOnce() -> T) -> (T, u64) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").unwrap();
        let before = self.status_bytes("VmRSS:");
        let out = probe();
        let peak = self.status_bytes("VmHWM:");
        (out, peak.saturating_sub(before))
    }

    /// CPU time of the EVM workers (threads named `loupe-evm-*`), in clock ticks.
    fn evm_ticks(&self) -> u64 {
        let mut ticks = 0;
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid())).unwrap();
        for task in tasks.map_while(Result::ok) {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
            if !stat[open + 1..close].starts_with("loupe-evm") {
                continue;
            }
            let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
            ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        }
        ticks
    }
}

impl Drop for Loupe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP connection to `port` from the address `from`.
fn connect(from: Ipv4Addr, port: u16) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::from((from, 0)).into())?;
    socket.connect(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)).into())?;
    Ok(socket.into())
}

/// POSTs `body` to `/` from `from` on a fresh connection: the status (0 when the connection was
/// refused or cut) and the body's text.
fn post(from: Ipv4Addr, port: u16, body: &[u8], timeout: Option<Duration>) -> (u16, String) {
    let Ok(mut s) = connect(from, port) else { return (0, String::new()) };
    s.set_read_timeout(Some(timeout.unwrap_or(Duration::from_secs(60)))).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if s.write_all(head.as_bytes()).and_then(|()| s.write_all(body)).is_err() {
        return (0, String::new());
    }
    let mut text = Vec::new();
    let _ = s.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// The well-behaved client: `eth_blockNumber` every 50 ms from [`GOOD`] on a fresh connection,
/// recording the slowest answer and every failure.
struct Watch {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<(Duration, Vec<String>, u32)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(port: u16) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new((Duration::ZERO, Vec::new(), 0)));
        let (s, w) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            let body = br#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}"#;
            while !s.load(Ordering::Relaxed) {
                let t = Instant::now();
                let (status, text) = post(GOOD, port, body, Some(Duration::from_secs(30)));
                let took = t.elapsed();
                let mut w = w.lock().unwrap();
                w.0 = w.0.max(took);
                w.2 += 1;
                if status != 200 || !text.contains("\"result\":\"0x") {
                    w.1.push(format!("{status} {text}"));
                }
                drop(w);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Self { stop, seen, thread: Some(thread) }
    }

    /// Stops watching; asserts every answer came, each within [`MAX_STALL`].
    fn assert_served(mut self, what: &str) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let (slowest, failures, count) = self.seen.lock().unwrap().clone();
        assert!(count > 0, "{what}: the watching client made no call");
        assert!(failures.is_empty(), "{what}: eth_blockNumber failed: {failures:?}");
        assert!(slowest < MAX_STALL, "{what}: eth_blockNumber took {slowest:?}");
        eprintln!("{what}: {count} eth_blockNumber calls, slowest {slowest:?}");
    }
}

/// The error object of an answer, or a panic naming what came instead.
fn error_of(answer: &(u16, Value)) -> (i64, String) {
    let e = &answer.1["error"];
    let code = e["code"].as_i64().unwrap_or_else(|| panic!("no error: {answer:?}"));
    (code, e["message"].as_str().unwrap_or_default().to_string())
}

fn assert_growth(what: &str, growth: u64) {
    eprintln!("{what}: resident memory grew {} MiB", growth >> 20);
    assert!(growth < MAX_GROWTH, "{what}: resident memory grew {} MiB", growth >> 20);
}

fn hex_list(n: usize, width: usize) -> Vec<String> {
    (1..=n).map(|i| format!("0x{i:0width$x}")).collect()
}

#[test]
fn fee_history_with_100000_percentiles_is_refused_naming_the_limit() {
    let node = Loupe::start(&[]);
    let watch = Watch::start(node.port);
    let percentiles: Vec<f64> = (0..100_000).map(|i| f64::from(i) / 1000.0).collect();
    let (answer, growth) = node.measured(|| {
        node.call(ATTACKER, "eth_feeHistory", json!(["0x400", "latest", percentiles]))
    });
    let (code, message) = error_of(&answer);
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("100"), "the limit is not named: {message}");
    assert_growth("eth_feeHistory", growth);
    watch.assert_served("eth_feeHistory");
}

#[test]
fn log_filters_with_huge_lists_are_refused_naming_the_limit() {
    let node = Loupe::start(&[]);
    let watch = Watch::start(node.port);
    let addresses = hex_list(20_000, 40);
    let topics = hex_list(10_001, 64);
    let probes = [
        ("20,000 addresses", json!({"fromBlock": "0x0", "address": addresses})),
        (
            "4 × 10,001 topics",
            json!({"fromBlock": "0x0", "topics": [topics, topics, topics, topics]}),
        ),
    ];
    for (what, filter) in probes {
        for method in ["eth_getLogs", "eth_newFilter"] {
            let (answer, growth) =
                node.measured(|| node.call(ATTACKER, method, json!([filter.clone()])));
            let (code, message) = error_of(&answer);
            assert_eq!(code, -32602, "{method} {what}: {message}");
            assert!(message.contains("--rpc.max-filter-"), "{method} {what}: {message}");
            assert_growth(what, growth);
        }
    }
    // At the limits, the query runs (and finds nothing: no log has these addresses).
    let at_limit = json!({"fromBlock": "0x0", "address": hex_list(1_000, 40),
        "topics": [hex_list(1_000, 64), hex_list(1_000, 64), hex_list(1_000, 64), hex_list(1_000, 64)]});
    let (answer, growth) = node.measured(|| node.call(ATTACKER, "eth_getLogs", json!([at_limit])));
    assert_eq!(answer.1["result"], json!([]), "{answer:?}");
    assert_growth("eth_getLogs at the limits", growth);
    watch.assert_served("eth_getLogs lists");
}

/// `debug_traceCall` of an endless loop with the struct logger, as the attacker sends it.
fn struct_logger_loop_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceCall", "params": [
        {"to": LOOP_AT, "gas": "0x2faf080"},
        "latest",
        {"enableMemory": true, "stateOverrides": {LOOP_AT: {"code": LOOP_CODE}}}
    ]})
    .to_string()
    .into_bytes()
}

#[test]
fn struct_logger_on_an_endless_loop_stops_on_time_within_its_memory() {
    let node = Loupe::start(&[]);
    let watch = Watch::start(node.port);
    let started = Instant::now();
    let ((status, text), growth) =
        node.measured(|| post(ATTACKER, node.port, &struct_logger_loop_body(), None));
    let took = started.elapsed();
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let (code, message) = error_of(&(status, answer));
    // Either deadline or response budget fired; each names what it is.
    assert!(message.contains("timeout") || message.contains("--rpc.max-"), "{code}: {message}");
    // The default deadline is 5 s; the answer comes within a second of it.
    assert!(took < Duration::from_secs(6), "answered after {took:?}: {message}");
    assert_growth("struct logger", growth);
    watch.assert_served("struct logger");
}

#[test]
fn work_stops_when_its_client_leaves() {
    // Neither the deadline nor the struct log's size limit may end the call before its client
    // leaves.
    let node = Loupe::start(&["--rpc.evm-timeout", "120", "--rpc.max-trace-size", "68719476736"]);
    let before = node.evm_ticks();
    let mut s = connect(ATTACKER, node.port).unwrap();
    let body = struct_logger_loop_body();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body).unwrap();
    // The worker is busy with it...
    let started = Instant::now();
    while node.evm_ticks() < before + 50 {
        assert!(started.elapsed() < Duration::from_secs(30), "the call never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // ...until the client leaves: then it stops within the next check.
    drop(s);
    std::thread::sleep(Duration::from_millis(500));
    let after_leave = node.evm_ticks();
    std::thread::sleep(Duration::from_secs(2));
    let later = node.evm_ticks();
    assert!(
        later <= after_leave + 10,
        "the EVM workers kept working after the client left: {} ticks in 2 s",
        later - after_leave
    );
}

#[test]
fn parallel_calls_with_huge_state_overrides_are_refused_and_stall_nobody() {
    let node = Loupe::start(&[]);
    let watch = Watch::start(node.port);
    let overrides: serde_json::Map<String, Value> =
        hex_list(120_000, 40).into_iter().map(|a| (a, json!({"balance": "0x1"}))).collect();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": [
        {"to": "0x0000000000000000000000000000000000000001"}, "latest", overrides
    ]})
    .to_string();
    assert!(body.len() > 5 << 20 && body.len() < 10 << 20, "{} bytes", body.len());
    let body = Arc::new(body.into_bytes());
    let (answers, growth) = node.measured(|| {
        let threads: Vec<_> = (0..30)
            .map(|_| {
                let (body, port) = (body.clone(), node.port);
                std::thread::spawn(move || post(ATTACKER, port, &body, None))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
    });
    for (status, text) in answers {
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let (code, message) = error_of(&(status, answer));
        // Refused by the per-request limit, or by the attacker's share of the server.
        assert!(
            (code == -32602 && message.contains("--rpc.max-override-accounts")) || code == -32005,
            "{code}: {message}"
        );
    }
    assert_growth("state overrides", growth);
    watch.assert_served("state overrides");
}

#[test]
fn stalled_bodies_from_one_client_lock_nobody_out() {
    let node = Loupe::start(&[]);
    let watch = Watch::start(node.port);
    let mut stalled = Vec::new();
    for _ in 0..1024 {
        let Ok(mut s) = connect(ATTACKER, node.port) else { continue };
        let head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                    Content-Length: 100\r\n\r\n{\"js";
        if s.write_all(head.as_bytes()).is_ok() {
            stalled.push(s);
        }
    }
    // Everyone else is served while they are held.
    for path in ["/health", "/explorer/"] {
        let mut s = connect(GOOD, node.port).unwrap();
        s.set_read_timeout(Some(MAX_STALL)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        assert!(text.starts_with("HTTP/1.1 200"), "{path} while stalled: {text:?}");
    }
    // And the stalled connections are closed by the server, not held forever.
    let started = Instant::now();
    let mut open = stalled.len();
    while open > 0 && started.elapsed() < Duration::from_secs(40) {
        open = 0;
        for s in &mut stalled {
            s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
            let mut b = [0u8; 512];
            match s.read(&mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => open += 1,
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => open += 1,
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(open, 0, "stalled connections still open after {:?}", started.elapsed());
    eprintln!("stalled bodies: all closed after {:?}", started.elapsed());
    watch.assert_served("stalled bodies");
}

#[test]
fn one_client_cannot_hold_every_filter() {
    let node = Loupe::start(&[]);
    let mut refused = None;
    for i in 0..1024 {
        let answer = node.call(ATTACKER, "eth_newBlockFilter", json!([]));
        if answer.1.get("error").is_some() {
            refused = Some((i, error_of(&answer)));
            break;
        }
    }
    let (held, (code, message)) = refused.expect("one client took all 1,024 filters");
    assert_eq!(code, -32005, "{message}");
    assert!(message.contains("--rpc.max-filters-per-ip"), "{message}");
    eprintln!("filters: one client held {held} before: {message}");
    let answer = node.call(GOOD, "eth_newBlockFilter", json!([]));
    assert!(answer.1["result"].is_string(), "another client gets no filter: {answer:?}");
}
