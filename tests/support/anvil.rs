//! anvil (foundry, npm package `@foundry-rs/anvil-linux-amd64` 1.7.1) as an upstream for
//! `loupe follow`, started from loupe's own genesis by the load-state route of
//! `../shared/research/follow_upstream.md` §7; and loupe processes to follow it.
//!
//! anvil is installed from the npm registry into `$LOUPE_TOOLS` (default `target/tools`) on
//! first use. Without npm, or when the install fails: under `CI=true` the test fails, otherwise
//! it prints a note and returns early.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256, U256};
use serde_json::{Value, json};

/// The npm package and version the tests use.
pub const ANVIL_PACKAGE: &str = "@foundry-rs/anvil-linux-amd64@1.7.1";

/// Chain id of the test chain (anvil's default).
pub const CHAIN_ID: u64 = 31337;

/// anvil's ten default accounts (the published test mnemonic); the first three are loupe's
/// dev keys.
pub const ANVIL_ACCOUNTS: [&str; 10] = [
    "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
    "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
    "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
    "0x9965507d1a55bcc2695c58ba16fb37d819b0a4dc",
    "0x976ea74026e726554db657fa54763abd0c3a0aa9",
    "0x14dc79964da2c08b23698b3d3cc7ca32193d9955",
    "0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f",
    "0xa0ee7a142d267c1f36714e4a8f75612f20a79720",
];

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

fn missing(msg: String) -> Option<PathBuf> {
    if ci() {
        panic!("{msg}");
    }
    eprintln!("note: skipping test: {msg}");
    None
}

/// The anvil binary, installed from npm on first use (one install at a time, across test
/// processes, under a lock file).
pub fn anvil_bin() -> Option<PathBuf> {
    let tools = match std::env::var_os("LOUPE_TOOLS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools"),
    };
    let bin = tools.join("node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
    // Written once the install is complete: a binary npm is still writing is not usable.
    let done = tools.join(".anvil-1.7.1.installed");
    if done.is_file() {
        return Some(bin);
    }
    std::fs::create_dir_all(&tools).unwrap();
    let lock = tools.join(".install.lock");
    let started = Instant::now();
    loop {
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(_) => break,
            Err(_) if started.elapsed() < Duration::from_secs(300) => {
                if done.is_file() {
                    return Some(bin);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return missing(format!("anvil install lock {}: {e}", lock.display())),
        }
    }
    if done.is_file() {
        let _ = std::fs::remove_file(&lock);
        return Some(bin);
    }
    let out = Command::new("npm")
        .args(["install", "--no-save", "--no-audit", "--no-fund", "--prefix"])
        .arg(&tools)
        .arg(ANVIL_PACKAGE)
        .output();
    let result = match out {
        Ok(o) if o.status.success() && bin.is_file() => {
            std::fs::write(&done, ANVIL_PACKAGE).unwrap();
            Some(bin)
        }
        Ok(o) => missing(format!(
            "npm install {ANVIL_PACKAGE} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => missing(format!("npm (to install {ANVIL_PACKAGE}): {e}")),
    };
    let _ = std::fs::remove_file(&lock);
    result
}

/// The test chain's genesis.json: Prague from block 0 (anvil runs one hardfork, so no
/// Osaka), the ten anvil accounts with 10,000 ETH, the 2935/7002/7251 system contracts and no
/// 4788 (anvil makes no beacon-root call), base fee 1 gwei, gas limit 30M.
pub fn genesis_json() -> String {
    let mut g: Value = serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    let config = g["config"].as_object_mut().unwrap();
    config.insert("chainId".into(), json!(CHAIN_ID));
    config.remove("osakaTime");
    config["blobSchedule"].as_object_mut().unwrap().remove("osaka");
    let alloc = g["alloc"].as_object_mut().unwrap();
    alloc.retain(|k, _| k.parse::<Address>().unwrap() != alloy_eips::eip4788::BEACON_ROOTS_ADDRESS);
    let balance = U256::from(10_000u64) * U256::from(10u64).pow(U256::from(18u64));
    for a in ANVIL_ACCOUNTS {
        alloc.insert(a.into(), json!({ "balance": format!("{balance:#x}") }));
    }
    g["baseFeePerGas"] = json!("0x3b9aca00");
    g["gasLimit"] = json!("0x1c9c380");
    serde_json::to_string_pretty(&g).unwrap()
}

/// anvil's `--load-state` file for a datadir `loupe init` made from [`genesis_json`]: loupe's
/// genesis block as anvil's block 0, and the allocation as its accounts.
pub fn anvil_state(genesis: &str, db: &loupe::storage::Database) -> Value {
    let g: Value = serde_json::from_str(genesis).unwrap();
    let reader = db.begin_read().unwrap();
    let header = reader.header(0).unwrap().unwrap();
    let mut accounts = serde_json::Map::new();
    for (address, a) in g["alloc"].as_object().unwrap() {
        accounts.insert(
            address.clone(),
            json!({
                "nonce": a.get("nonce").map_or(0, |n| match n {
                    Value::String(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap(),
                    n => n.as_u64().unwrap(),
                }),
                "balance": a.get("balance").cloned().unwrap_or_else(|| json!("0x0")),
                "code": a.get("code").cloned().unwrap_or_else(|| json!("0x")),
                "storage": a.get("storage").cloned().unwrap_or_else(|| json!({})),
            }),
        );
    }
    json!({
        "block": {
            "number": "0x0",
            "beneficiary": "0x0000000000000000000000000000000000000000",
            "timestamp": format!("{:#x}", header.timestamp),
            "gas_limit": header.gas_limit,
            "basefee": header.base_fee_per_gas.unwrap_or(1_000_000_000),
            "difficulty": "0x0",
            "prevrandao": B256::ZERO,
            "blob_excess_gas_and_price": { "excess_blob_gas": 0, "blob_gasprice": 1 },
        },
        "accounts": accounts,
        "best_block_number": 0,
        "blocks": [{ "header": header, "transactions": [], "ommers": [], "withdrawals": [] }],
        "transactions": [],
    })
}

/// A child process killed when dropped.
pub struct Proc {
    pub child: Child,
    pub port: u16,
    pub url: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts anvil on `port` from `state` (a `--load-state` file), Prague rules.
pub fn start_anvil(bin: &Path, state: &Path, port: u16, extra: &[&str]) -> Proc {
    let child = Command::new(bin)
        .args(["--load-state"])
        .arg(state)
        .args(["--hardfork", "prague", "--no-create2", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start anvil");
    let url = format!("http://127.0.0.1:{port}");
    let p = Proc { child, port, url };
    wait_rpc(&p.url, Duration::from_secs(30));
    p
}

/// Starts `loupe follow` on a free port, polling every 100 ms unless `extra` sets
/// `--follow.poll-ms`; `extra` adds flags.
pub fn start_follower(datadir: &Path, upstream: &str, extra: &[&str]) -> (Proc, Receiver) {
    let port = free_port();
    // Tests have the binary's path; examples (the soak) do not start followers this way.
    let bin = option_env!("CARGO_BIN_EXE_loupe").unwrap_or("loupe");
    let mut child = Command::new(bin)
        .args(["follow", "--datadir"])
        .arg(datadir)
        .args(["--upstream", upstream, "--http.port", &port.to_string()])
        .args(if extra.contains(&"--follow.poll-ms") {
            &[][..]
        } else {
            &["--follow.poll-ms", "100"]
        })
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start loupe follow");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let url = format!("http://127.0.0.1:{port}");
    let p = Proc { child, port, url };
    wait_rpc(&p.url, Duration::from_secs(60));
    (p, Receiver(rx, Vec::new()))
}

/// The follower's log lines.
pub struct Receiver(std::sync::mpsc::Receiver<String>, pub Vec<String>);

impl Receiver {
    /// Waits for a log line containing `needle`; returns it.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> Option<String> {
        if let Some(l) = self.1.iter().find(|l| l.contains(needle)) {
            return Some(l.clone());
        }
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.0.recv_timeout(left) {
                Ok(line) => {
                    self.1.push(line.clone());
                    if line.contains(needle) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Every line read so far, and any waiting.
    pub fn all(&mut self) -> String {
        while let Ok(line) = self.0.try_recv() {
            self.1.push(line);
        }
        self.1.join("\n")
    }
}

fn wait_rpc(url: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if try_rpc(url, "eth_chainId", json!([])).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{url} did not answer within {timeout:?}");
}

/// One JSON-RPC call; `Err` carries the error object or the transport failure.
pub fn try_rpc(url: &str, method: &str, params: Value) -> Result<Value, String> {
    let client =
        reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = client.post(url).json(&body).send().map_err(|e| e.to_string())?;
    let v: Value = resp.json().map_err(|e| e.to_string())?;
    match v.get("error") {
        Some(e) => Err(e.to_string()),
        None => Ok(v["result"].clone()),
    }
}

/// One JSON-RPC call that must succeed.
pub fn rpc(url: &str, method: &str, params: Value) -> Value {
    try_rpc(url, method, params.clone()).unwrap_or_else(|e| panic!("{url} {method} {params}: {e}"))
}

/// `eth_blockNumber` as a number.
pub fn block_number(url: &str) -> u64 {
    let v = rpc(url, "eth_blockNumber", json!([]));
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Waits until `url`'s head is `n` and its hash there is `hash` (when given).
pub fn wait_head(url: &str, n: u64, hash: Option<&Value>, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(b) = try_rpc(url, "eth_getBlockByNumber", json!(["latest", false])) {
            let num = b["number"].as_str().map(|s| u64::from_str_radix(&s[2..], 16).unwrap());
            if num == Some(n) && hash.is_none_or(|h| &b["hash"] == h) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
