//! The replica fleet of `deploy/`: three `loupe follow` replicas of one anvil behind nginx,
//! run from the Debian package `deploy/debian/build.sh` builds (its binary, its systemd unit's
//! command line, its replica configuration and its nginx configuration), the second and third
//! replicas started from `loupe db snapshot`s of the first taken while it serves.
//!
//! The truth is anvil: every block any answer names must be anvil's block at that height. nginx
//! comes from Debian (`apt-get install nginx`, which `.ci/run` does); under `CI=true` a missing
//! nginx fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/anvil.rs"]
mod anvil;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anvil::{Proc, rpc};
use serde_json::{Value, json};

fn nginx_bin() -> Option<PathBuf> {
    let found = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        let msg = "nginx is not installed (apt-get install nginx; .ci/run does)";
        assert!(!std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"), "{msg}");
        eprintln!("note: skipping test: {msg}");
    }
    found
}

/// The package built from this test's loupe binary, unpacked into `dir/root`.
fn unpack_package(dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(repo.join("deploy/debian/build.sh"))
        .arg(env!("CARGO_BIN_EXE_loupe"))
        .arg(dir.join("deb"))
        .output()
        .unwrap();
    assert!(out.status.success(), "build.sh: {}", String::from_utf8_lossy(&out.stderr));
    let deb = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let info = Command::new("dpkg-deb").args(["--field", &deb, "Package", "Version"]).output();
    let info = String::from_utf8(info.unwrap().stdout).unwrap();
    assert!(info.contains("Package: loupe"), "{info}");
    assert!(info.contains(&format!("Version: {}", env!("CARGO_PKG_VERSION"))), "{info}");
    let root = dir.join("root");
    let x = Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root).status().unwrap();
    assert!(x.success());
    root
}

/// The unit's command line for instance `name`, with the package's paths made relative to
/// the unpacked `root`.
fn unit_command(root: &Path, name: &str) -> Vec<String> {
    let unit =
        std::fs::read_to_string(root.join("lib/systemd/system/loupe-follow@.service")).unwrap();
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    exec.replace("%i", name)
        .split_whitespace()
        .map(|w| if w.starts_with('/') { format!("{}{w}", root.display()) } else { w.into() })
        .collect()
}

/// A replica: the packaged configuration `replica-N.toml`, its datadir, upstream, port and
/// genesis pointed at the test's.
struct Replica {
    name: String,
    port: u16,
    datadir: PathBuf,
    command: Vec<String>,
}

impl Replica {
    fn new(root: &Path, n: usize, upstream: &str, genesis: &Path, dir: &Path) -> Self {
        let name = format!("replica-{n}");
        let path = root.join(format!("etc/loupe/{name}.toml"));
        let mut config: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        assert!(config["datadir"].as_str().unwrap().ends_with(&name));
        let datadir = dir.join(&name);
        let port = anvil::free_port();
        config.insert("datadir".into(), datadir.display().to_string().into());
        config.insert("upstream".into(), upstream.into());
        config.insert("genesis".into(), genesis.display().to_string().into());
        config.remove("metrics");
        config["http"].as_table_mut().unwrap().insert("port".into(), i64::from(port).into());
        config.insert("follow".into(), {
            let mut f = config["follow"].as_table().unwrap().clone();
            f.insert("poll-ms".into(), 100.into());
            f.into()
        });
        std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
        Self { command: unit_command(root, &name), name, port, datadir }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(&self, log: &Path) -> Child {
        let log = std::fs::File::create(log.join(format!("{}.log", self.name))).unwrap();
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while anvil::try_rpc(&self.url(), "eth_chainId", json!([])).is_err() {
            assert!(Instant::now() < deadline, "{} did not start", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    }
}

/// nginx with the packaged configuration, its replica ports and its listen port replaced.
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers too (SIGKILL would leave them running).
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn start_nginx(bin: &Path, root: &Path, dir: &Path, replicas: &[Replica]) -> (Nginx, String) {
    let port = anvil::free_port();
    let mut conf = std::fs::read_to_string(root.join("usr/share/loupe/nginx-loupe.conf")).unwrap();
    for (shipped, r) in ["8545", "8555", "8565"].iter().zip(replicas) {
        let from = format!("127.0.0.1:{shipped};");
        let from_opts = format!("127.0.0.1:{shipped} ");
        assert!(conf.contains(&from_opts), "the shipped config names port {shipped}");
        conf = conf
            .replace(&from, &format!("127.0.0.1:{};", r.port))
            .replace(&from_opts, &format!("127.0.0.1:{} ", r.port));
    }
    conf = conf.replace("listen 127.0.0.1:8645;", &format!("listen 127.0.0.1:{port};"));
    let nginx_dir = dir.join("nginx");
    std::fs::create_dir_all(&nginx_dir).unwrap();
    std::fs::write(nginx_dir.join("loupe.conf"), conf).unwrap();
    // The workers run as `nobody` when nginx starts as root: let them write the temp paths.
    let _ = Command::new("chmod").arg("-R").arg("a+rwx").arg(dir).status();
    let d = nginx_dir.display();
    let main = format!(
        "worker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  log_format upstreams '$status $upstream_status $upstream_addr';\n  \
         access_log {d}/access.log upstreams;\n  client_body_temp_path {d}/body;\n  \
         proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  \
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  include {d}/loupe.conf;\n}}\n"
    );
    std::fs::write(nginx_dir.join("nginx.conf"), main).unwrap();
    let test = Command::new(bin)
        .args(["-t", "-p"])
        .arg(&nginx_dir)
        .arg("-c")
        .arg(nginx_dir.join("nginx.conf"))
        .output()
        .unwrap();
    assert!(test.status.success(), "nginx -t: {}", String::from_utf8_lossy(&test.stderr));
    let child = Command::new(bin)
        .args(["-p"])
        .arg(&nginx_dir)
        .arg("-c")
        .arg(nginx_dir.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let deadline = Instant::now() + Duration::from_secs(20);
    while anvil::try_rpc(&url, "eth_chainId", json!([])).is_err() {
        assert!(Instant::now() < deadline, "nginx did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Nginx(child), url)
}

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// What the load saw: (block number → hashes named) and every failure.
#[derive(Default)]
struct Seen {
    blocks: BTreeMap<u64, Vec<String>>,
    requests: u64,
    failures: Vec<String>,
}

/// One client through nginx until `stop`: single requests and batches of the reads a wallet or
/// explorer makes; any transport error, non-200 status or JSON-RPC error is a failure.
fn client(url: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>, k: u64) {
    let http =
        reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let mut i = k;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let body = match i % 4 {
            0 => {
                json!({"jsonrpc": "2.0", "id": i, "method": "eth_getBlockByNumber", "params": ["latest", false]})
            }
            1 => json!([
                {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []},
                {"jsonrpc": "2.0", "id": 2, "method": "eth_getBlockByNumber", "params": ["latest", true]},
                {"jsonrpc": "2.0", "id": 3, "method": "eth_getBalance", "params": [anvil::ANVIL_ACCOUNTS[3], "latest"]},
            ]),
            2 => {
                json!({"jsonrpc": "2.0", "id": i, "method": "eth_getBlockByNumber", "params": [format!("{:#x}", i % 8), false]})
            }
            _ => json!({"jsonrpc": "2.0", "id": i, "method": "trace_block", "params": ["latest"]}),
        };
        let answer = http.post(&url).json(&body).send().map_err(|e| e.to_string()).and_then(|r| {
            let status = r.status();
            let text = r.text().map_err(|e| e.to_string())?;
            if status != 200 {
                return Err(format!("HTTP {status}: {text}"));
            }
            serde_json::from_str::<Value>(&text).map_err(|e| format!("{e}: {text}"))
        });
        let mut seen = seen.lock().unwrap();
        seen.requests += 1;
        let answers = match answer {
            Err(e) => {
                seen.failures.push(format!("{body}: {e}"));
                continue;
            }
            Ok(Value::Array(a)) => a,
            Ok(v) => vec![v],
        };
        for a in answers {
            if let Some(e) = a.get("error") {
                seen.failures.push(format!("{body}: {e}"));
            }
            let r = &a["result"];
            let mut blocks = vec![];
            if r.get("hash").is_some() {
                blocks.push((&r["number"], &r["hash"]));
            }
            if let Some(traces) = r.as_array() {
                blocks.extend(traces.iter().map(|t| (&t["blockNumber"], &t["blockHash"])));
            }
            for (n, h) in blocks {
                let n = n.as_u64().unwrap_or_else(|| hex_u64(n));
                seen.blocks.entry(n).or_default().push(h.as_str().unwrap().to_string());
            }
        }
    }
}

/// Waits until `url`'s head is at least `n`.
fn wait_at_least(url: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while anvil::block_number(url) < n {
        assert!(Instant::now() < deadline, "{url} did not reach block {n}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The acceptance check of the replica fleet: under load through nginx, one replica is killed
/// and restarted, then another; no request fails and every block named is anvil's.
#[test]
fn three_replicas_behind_nginx_survive_a_kill_and_restart_under_load() {
    let Some(nginx_bin) = nginx_bin() else { return };
    let Some(anvil_bin) = anvil::anvil_bin() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = unpack_package(dir);
    let loupe = root.join("usr/bin/loupe");

    // anvil from loupe's genesis, mining a block a second with a transfer in most.
    let genesis_text = anvil::genesis_json();
    let genesis = dir.join("genesis.json");
    std::fs::write(&genesis, &genesis_text).unwrap();
    let state = {
        let scratch = dir.join("scratch");
        let db = loupe::storage::Database::open(&scratch).unwrap();
        loupe::import::init_genesis(&db, &genesis_text).unwrap();
        anvil::anvil_state(&genesis_text, &db)
    };
    std::fs::write(dir.join("anvil-state.json"), state.to_string()).unwrap();
    let up: Proc = anvil::start_anvil(
        &anvil_bin,
        &dir.join("anvil-state.json"),
        anvil::free_port(),
        &["--block-time", "1"],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (url, stop) = (up.url.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let tx = json!({"from": anvil::ANVIL_ACCOUNTS[0], "to": anvil::ANVIL_ACCOUNTS[3], "value": format!("{i:#x}")});
                let _ = anvil::try_rpc(&url, "eth_sendTransaction", json!([tx]));
                std::thread::sleep(Duration::from_millis(700));
            }
        })
    };

    let replicas: Vec<Replica> =
        (1..=3).map(|n| Replica::new(&root, n, &up.url, &genesis, dir)).collect();
    let mut children = vec![replicas[0].start(dir)];
    wait_at_least(&replicas[0].url(), 3);

    // Replicas 2 and 3 start from snapshots of replica 1, taken while it serves and follows.
    for r in &replicas[1..] {
        let out = Command::new(&loupe)
            .args(["db", "snapshot", "--datadir"])
            .arg(&replicas[0].datadir)
            .arg("--out")
            .arg(&r.datadir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "snapshot: {text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("snapshot of") && text.contains("at head #"), "{text}");
        let verify = Command::new(&loupe).arg("verify").arg("--datadir").arg(&r.datadir).output();
        let verify = verify.unwrap();
        assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
        children.push(r.start(dir));
    }
    let head = anvil::block_number(&up.url);
    for r in &replicas {
        wait_at_least(&r.url(), head);
    }

    let (_nginx, url) = start_nginx(&nginx_bin, &root, dir, &replicas);
    let health = reqwest::blocking::get(format!("{url}health")).unwrap();
    assert_eq!(health.status().as_u16(), 200);

    let seen = Arc::new(Mutex::new(Seen::default()));
    let load_stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|k| {
            let (url, stop, seen) = (url.clone(), load_stop.clone(), seen.clone());
            std::thread::spawn(move || client(url, stop, seen, k))
        })
        .collect();
    // Under load: kill replica 2, run without it, restart it (it catches up behind the health
    // gate); then the same for replica 1, the one the snapshots came from.
    for victim in [1, 0] {
        std::thread::sleep(Duration::from_secs(3));
        kill(&mut children[victim]);
        std::thread::sleep(Duration::from_secs(4));
        children[victim] = replicas[victim].start(dir);
    }
    std::thread::sleep(Duration::from_secs(4));
    load_stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();

    let seen = seen.lock().unwrap();
    assert!(
        seen.failures.is_empty(),
        "{} failed of {}: {:#?}",
        seen.failures.len(),
        seen.requests,
        &seen.failures[..seen.failures.len().min(10)]
    );
    assert!(seen.requests > 200, "only {} requests", seen.requests);
    // Every block named is anvil's block at that height.
    let mut names = 0;
    for (n, hashes) in &seen.blocks {
        let truth = rpc(&up.url, "eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        for h in hashes {
            assert_eq!(truth["hash"].as_str(), Some(h.as_str()), "block {n}");
            names += 1;
        }
    }
    let newest = seen.blocks.keys().next_back().copied().unwrap_or(0);
    assert!(newest > head, "the load saw the chain grow: {newest} vs {head} at the start");
    // The kills were felt: nginx retried some requests on another replica (a failed attempt,
    // then a 200: `502, 200` or `503, 200` in its log).
    let log = std::fs::read_to_string(dir.join("nginx/access.log")).unwrap();
    let retried = log.lines().filter(|l| l.starts_with("200 ") && l.contains(", ")).count();
    let gated = log.lines().filter(|l| l.contains("503, ")).count();
    assert!(retried > 0, "no request was retried: the kills went unnoticed");
    eprintln!(
        "{} requests through nginx, 0 failed; {retried} retried on another replica ({gated} \
         after the health gate); {names} block names checked against anvil, up to #{newest}",
        seen.requests
    );

    // The upstream goes away: every replica turns unhealthy, and nginx still answers from any
    // of them (verified blocks, a little old) rather than fail.
    drop(up);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::blocking::get(format!("{url}health")).unwrap().status() != 503 {
        assert!(Instant::now() < deadline, "the fleet stayed healthy without its upstream");
        std::thread::sleep(Duration::from_millis(100));
    }
    for r in &replicas {
        let direct = reqwest::blocking::get(format!("{}/health", r.url())).unwrap();
        assert_eq!(direct.text().unwrap(), "upstream unreachable\n");
    }
    let last = anvil::block_number(&url);
    assert!(last >= newest, "served head {last} after the upstream went away");
    for mut c in children {
        kill(&mut c);
    }
}
