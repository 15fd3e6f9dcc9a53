//! `--metrics` (issue 13): the `loupe` binary serving the dev chain with its Prometheus listener;
//! the exposition parsed by prometheus_client's parser (PyPI, an independent implementation of
//! the text format); counters move by exactly the requests the test sends; gauges agree with
//! the JSON-RPC answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/clients.rs"]
mod tools;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The binary on the dev chain, stopped when dropped.
struct Node {
    child: Child,
    rpc: String,
    metrics: String,
    _dir: tempfile::TempDir,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// The node with `args` added to its command line.
    fn start_with(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (rpc_port, metrics_port) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_loupe"))
            .arg("dev")
            .arg("--datadir")
            .arg(dir.path())
            .args(["--http.port", &rpc_port.to_string()])
            .args(["--metrics", &format!("127.0.0.1:{metrics_port}")])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let node = Self {
            child,
            rpc: format!("http://127.0.0.1:{rpc_port}/"),
            metrics: format!("http://127.0.0.1:{metrics_port}/metrics"),
            _dir: dir,
        };
        let started = Instant::now();
        while node.scrape_text().is_none() || node.try_call("eth_chainId", json!([])).is_none() {
            assert!(started.elapsed() < Duration::from_secs(60), "the node did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        node
    }

    fn try_call(&self, method: &str, params: Value) -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        reqwest::blocking::Client::new().post(&self.rpc).json(&body).send().ok()?.json().ok()
    }

    fn call(&self, method: &str, params: Value) -> Value {
        self.try_call(method, params).unwrap()
    }

    fn scrape_text(&self) -> Option<String> {
        reqwest::blocking::get(&self.metrics).ok()?.text().ok()
    }
}

/// Samples keyed `name{label="value",...}` (labels sorted), parsed by prometheus_client.
fn parse(python: &Path, text: &str) -> BTreeMap<String, f64> {
    let script: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/prom_parse.py");
    let mut child = Command::new(python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "parser: {}", String::from_utf8_lossy(&out.stderr));
    let samples: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    samples
        .into_iter()
        .map(|s| {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(s["labels"].clone()).unwrap();
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            let key = if labels.is_empty() {
                s["name"].as_str().unwrap().to_string()
            } else {
                format!("{}{{{}}}", s["name"].as_str().unwrap(), labels.join(","))
            };
            (key, s["value"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn metrics_parse_and_count_exactly_the_requests_sent() {
    let Some(python) = tools::web3_python() else { return };
    let node = Node::start();
    // Touch each method once, so that each series exists before the baseline.
    node.call("eth_chainId", json!([]));
    node.call("eth_getBalance", json!(["0xnot-an-address", "latest"]));
    node.call("trace_block", json!(["0x2"]));
    let before = parse(&python, &node.scrape_text().unwrap());

    for _ in 0..7 {
        assert!(node.call("eth_chainId", json!([])).get("result").is_some());
    }
    for _ in 0..3 {
        assert!(
            node.call("eth_getBalance", json!(["0xnot-an-address", "latest"]))
                .get("error")
                .is_some()
        );
    }
    for _ in 0..2 {
        assert!(node.call("trace_block", json!(["0x2"])).get("result").is_some());
    }
    let head = node.call("eth_blockNumber", json!([]))["result"].as_str().unwrap().to_string();
    // Gauges are sampled once a second.
    std::thread::sleep(Duration::from_millis(1500));
    let after = parse(&python, &node.scrape_text().unwrap());

    let delta = |key: &str| {
        after.get(key).copied().unwrap_or(0.0) - before.get(key).copied().unwrap_or(0.0)
    };
    assert_eq!(delta("loupe_rpc_requests_total{method=\"eth_chainId\"}"), 7.0);
    assert_eq!(delta("loupe_rpc_errors_total{method=\"eth_chainId\"}"), 0.0);
    assert_eq!(delta("loupe_rpc_requests_total{method=\"eth_getBalance\"}"), 3.0);
    assert_eq!(delta("loupe_rpc_errors_total{method=\"eth_getBalance\"}"), 3.0);
    assert_eq!(delta("loupe_rpc_requests_total{method=\"trace_block\"}"), 2.0);
    assert_eq!(delta("loupe_rpc_request_duration_seconds_count{method=\"eth_chainId\"}"), 7.0);
    assert_eq!(
        delta("loupe_rpc_request_duration_seconds_bucket{le=\"+Inf\",method=\"trace_block\"}"),
        2.0
    );
    // Busy workers and the queue are back to zero once the calls are answered.
    assert_eq!(after["loupe_rpc_pool_busy_workers"], 0.0);
    assert_eq!(after["loupe_rpc_pool_queue_depth"], 0.0);
    let head = u64::from_str_radix(head.trim_start_matches("0x"), 16).unwrap() as f64;
    assert_eq!(after["loupe_chain_head_block"], head);
    assert_eq!(after["loupe_chain_finalized_block"], head);
    assert!(after["loupe_database_size_bytes"] > 100_000.0, "{after:?}");
    assert!(after["process_resident_memory_bytes"] > 1_000_000.0, "{after:?}");
    assert!(after["process_open_fds"] >= 3.0, "{after:?}");
}

/// A short `eth_call`, `trace_call` or `debug_traceCall` runs on the server's thread
/// (`--rpc.inline-budget-us`, on by default), calls to the identity precompile included; one
/// that leaves its budget (a call of any precompile but `ecrecover`, SHA-256 and identity ends an
/// inline attempt at once) sends the next 32 calls of either method straight to the EVM pool,
/// and then calls run inline again. The counter of each outcome moves by exactly the calls sent, and the answers are the
/// same wherever they ran.
#[test]
fn a_call_past_the_inline_budget_sends_the_next_ones_to_the_pool() {
    let Some(python) = tools::web3_python() else { return };
    // A budget of half a second: a short call descheduled on a busy machine still fits it,
    // while a modexp call ends the attempt at once whatever the budget.
    let node = Node::start_with(&["--rpc.inline-budget-us", "500000"]);
    let x = "0x900000000000000000000000000000000000000b";
    let trace_call = |code: &str| {
        let params = json!([{"to": x}, ["trace", "stateDiff"], "latest", {x: {"code": code}}]);
        node.call("trace_call", params)
    };
    let eth_call =
        |code: &str| node.call("eth_call", json!([{"to": x}, "latest", {x: {"code": code}}]));
    // PUSH1 42 PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN.
    let ret42 = "0x602a60005260206000f3";
    let want_trace = trace_call(ret42);
    let want_eth = eth_call(ret42);
    assert_eq!(want_trace["result"]["output"], format!("0x{:064x}", 42), "{want_trace}");
    assert_eq!(want_eth["result"], format!("0x{:064x}", 42), "{want_eth}");
    // Call i: trace_call when even, eth_call when odd; either answers as it did at first.
    let short = |i: usize| {
        if i.is_multiple_of(2) {
            assert_eq!(trace_call(ret42), want_trace);
        } else {
            assert_eq!(eth_call(ret42), want_eth);
        }
    };
    let before = parse(&python, &node.scrape_text().unwrap());

    (0..4).for_each(short);
    // PUSH1 32 PUSH1 0 PUSH1 0 PUSH1 0 PUSH1 p GAS STATICCALL, then its success flag returned
    // as a word: the identity precompile (4) runs inline, modexp (5) ends the attempt.
    let precompile = |p: u8| eth_call(&format!("0x6020600060006000600{p}5afa60005260206000f3"));
    assert_eq!(precompile(4)["result"], format!("0x{:064x}", 1));
    // debug_traceCall takes the same way.
    let opts = json!({"tracer": "callTracer", "stateOverrides": {x: {"code": ret42}}});
    let traced = node.call("debug_traceCall", json!([{"to": x}, "latest", opts]));
    assert_eq!(traced["result"]["output"], format!("0x{:064x}", 42), "{traced}");
    let between = parse(&python, &node.scrape_text().unwrap());
    assert_eq!(precompile(5)["result"], format!("0x{:064x}", 1));
    (0..32 + 2).for_each(short);
    let after = parse(&python, &node.scrape_text().unwrap());
    let delta = |from: &BTreeMap<String, f64>, to: &BTreeMap<String, f64>, outcome: &str| {
        let key = format!("loupe_rpc_inline_calls_total{{outcome=\"{outcome}\"}}");
        to.get(&key).copied().unwrap_or(0.0) - from.get(&key).copied().unwrap_or(0.0)
    };
    // The four short calls, the identity precompile's and the traced one ran inline.
    assert_eq!(delta(&before, &between, "inline"), 4.0 + 1.0 + 1.0);
    assert_eq!(delta(&before, &between, "overran"), 0.0);
    assert_eq!(delta(&between, &after, "inline"), 2.0);
    assert_eq!(delta(&between, &after, "overran"), 1.0);
    assert_eq!(delta(&between, &after, "pool"), 32.0);
}

/// Every series the Grafana dashboard queries is one the node records (a `loupe_*` name in
/// the source) or one the scrape shows (`process_*`).
#[test]
fn the_dashboard_queries_only_metrics_the_node_exports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dashboard = std::fs::read_to_string(root.join("deploy/grafana-dashboard.json")).unwrap();
    let dash: Value = serde_json::from_str(&dashboard).unwrap();
    let mut source = String::new();
    let mut dirs = vec![root.join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                source.push_str(&std::fs::read_to_string(p).unwrap());
            }
        }
    }
    let names = |text: &str, prefix: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let tail = &rest[i..];
            let end =
                tail.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(tail.len());
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
        out
    };
    let mut queried = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for name in names(expr, "loupe_") {
                let base = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name);
                assert!(source.contains(&format!("\"{base}\"")), "dashboard queries {name}");
                queried += 1;
            }
            for name in names(expr, "process_") {
                assert!(
                    ["process_resident_memory_bytes", "process_open_fds"].contains(&name.as_str()),
                    "dashboard queries {name}"
                );
            }
        }
    }
    assert!(queried >= 15, "{queried} loupe series queried");
}

/// A call whose client leaves while it runs is stopped and counted: with a ten-minute deadline
/// and a gas cap the loop cannot exhaust, `loupe_rpc_cancelled_total` reaches 1 and the busy
/// workers gauge 0 soon after the client closed its connection.
#[test]
fn a_call_whose_client_leaves_is_stopped_and_counted() {
    let node = Node::start_with(&[
        "--rpc.evm-timeout",
        "600",
        "--rpc.gascap",
        "1000000000000",
        "--rpc.inline-budget-us",
        "0",
    ]);
    let sample = |name: &str| -> Option<f64> {
        let text = node.scrape_text()?;
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let looper = "0x00000000000000000000000000000000000000ff";
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceCall", "params": [
        {"to": looper, "gas": "0xe8d4a51000"}, "latest",
        {"tracer": "callTracer", "stateOverrides": {looper: {"code": "0x5b600056"}}}]})
    .to_string();
    let addr = node.rpc.trim_start_matches("http://").trim_end_matches('/').to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let started = Instant::now();
    while sample("loupe_rpc_pool_busy_workers") != Some(1.0) {
        assert!(started.elapsed() < Duration::from_secs(30), "the loop never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(s);
    let left = Instant::now();
    while sample("loupe_rpc_cancelled_total") != Some(1.0)
        || sample("loupe_rpc_pool_busy_workers") != Some(0.0)
    {
        assert!(left.elapsed() < Duration::from_secs(10), "still running after the client left");
        std::thread::sleep(Duration::from_millis(20));
    }
}
