//! Graceful shutdown (issue 13): SIGTERM during an import and during load ends the `loupe`
//! process with exit code 0, no answered request is cut short, and the datadir passes
//! `loupe verify` afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn loupe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loupe"))
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(ok.success(), "kill -TERM");
}

/// Waits for `child` to exit, at most `limit`.
fn wait(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn verify(datadir: &Path) {
    let out = loupe().arg("verify").arg("--datadir").arg(datadir).output().unwrap();
    assert!(
        out.status.success(),
        "loupe verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigterm_during_an_import_commits_the_last_block_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gen");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 2_000, 800);
    config.txs_per_block = Some(20);
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let datadir = tmp.path().join("db");
    let mut child = loupe()
        .arg("import")
        .arg("--datadir")
        .arg(&datadir)
        .arg("--genesis")
        .arg(out.join("genesis.json"))
        .arg(out.join("chain.rlp"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Once blocks are being imported: the database file has grown well past the genesis state.
    let file = datadir.join(loupe::storage::DB_FILE);
    let size = || std::fs::metadata(&file).map_or(0, |m| m.len());
    let started = Instant::now();
    while size() == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "the import did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let genesis = size();
    while size() < genesis + (4 << 20) {
        assert!(started.elapsed() < Duration::from_secs(60), "the import made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    sigterm(&child);
    let status = wait(&mut child, Duration::from_secs(30));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "exit {status}: {stdout}");
    assert!(stdout.contains("stopped by a signal") && stdout.contains("imported"), "{stdout}");
    verify(&datadir);
    // The import resumes where it stopped.
    let resumed = loupe()
        .arg("import")
        .arg("--datadir")
        .arg(&datadir)
        .arg(out.join("chain.rlp"))
        .output()
        .unwrap();
    assert!(resumed.status.success());
    let text = String::from_utf8_lossy(&resumed.stdout);
    assert!(text.contains("head #800"), "{text}");
}

#[test]
fn sigterm_under_load_answers_every_request_it_took_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = loupe()
        .arg("dev")
        .arg("--datadir")
        .arg(tmp.path())
        .args(["--http.port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let client = reqwest::blocking::Client::new();
    let started = Instant::now();
    while client
        .post(&url)
        .json(&json!({"jsonrpc":"2.0","id":1,"method":"eth_chainId"}))
        .send()
        .is_err()
    {
        assert!(started.elapsed() < Duration::from_secs(60), "the node did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let cut = Arc::new(AtomicUsize::new(0));
    let load: Vec<_> = (0..4)
        .map(|i| {
            let (url, stop, answered, cut) =
                (url.clone(), stop.clone(), answered.clone(), cut.clone());
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let block = format!("{:#x}", 1 + (n + i) % 20);
                    let body =
                        json!({"jsonrpc":"2.0","id":n,"method":"trace_block","params":[block]});
                    let Ok(resp) = client.post(&url).json(&body).send() else {
                        continue; // refused or reset before an answer began: not cut
                    };
                    match resp.text().ok().and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
                        Some(v) if v.get("result").is_some() => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            cut.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let before = answered.load(Ordering::Relaxed);
    assert!(before > 10, "only {before} answers under load");
    sigterm(&child);
    let status = wait(&mut child, Duration::from_secs(20));
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    assert!(status.success(), "exit {status}");
    assert_eq!(cut.load(Ordering::Relaxed), 0, "answers cut short");
    verify(tmp.path());
}
