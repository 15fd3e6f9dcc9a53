//! `loupe db snapshot` through the real binary: a copy of the dev chain answers every block,
//! receipt, trace and historical balance, storage slot and code exactly as the original does
//! and passes `loupe verify`; taken while `loupe node` serves the datadir (through its admin
//! socket), after that node was killed (a stale socket), and refused with a clear message where
//! it cannot be taken.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn loupe(args: &[&str], dirs: &[&Path]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(args);
    for d in dirs {
        c.arg(d);
    }
    c.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn snapshot(from: &Path, to: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(["db", "snapshot", "--datadir"]).arg(from).arg("--out").arg(to);
    c.output().unwrap()
}

/// Every answer a client could ask of the dev chain, per block.
fn answers(node: &support::Node, head: u64) -> Vec<Value> {
    let accounts: Vec<String> = loupe::dev::dev_accounts()
        .iter()
        .map(|a| format!("{a:#x}"))
        .chain([format!("{:#x}", loupe::dev::COUNTER)])
        .collect();
    let mut all = vec![];
    for n in 0..=head {
        let b = json!(format!("{n:#x}"));
        all.push(node.call("eth_getBlockByNumber", json!([b, true])).unwrap());
        all.push(node.call("eth_getBlockReceipts", json!([b])).unwrap());
        all.push(node.call("trace_block", json!([b])).unwrap());
        for a in &accounts {
            all.push(node.call("eth_getBalance", json!([a, b])).unwrap());
            all.push(node.call("eth_getTransactionCount", json!([a, b])).unwrap());
            all.push(node.call("eth_getStorageAt", json!([a, "0x0", b])).unwrap());
            all.push(node.call("eth_getCode", json!([a, b])).unwrap());
        }
    }
    all
}

fn assert_same_chain(a: &Path, b: &Path) {
    let verify = loupe(&["verify", "--datadir"], &[b]);
    assert!(verify.status.success(), "{}", text(&verify));
    let open = |d: &Path| {
        let db = loupe::storage::Database::open(d).unwrap();
        let spec = loupe::import::load_spec(&db).unwrap().unwrap();
        let head = db.begin_read().unwrap().head().unwrap().unwrap();
        (Arc::new(db), spec, head)
    };
    let (da, sa, ha) = open(a);
    let (db, sb, hb) = open(b);
    assert_eq!(ha, hb);
    let (na, nb) = (support::Node::serve(da, sa, |_| {}), support::Node::serve(db, sb, |_| {}));
    let (x, y) = (answers(&na, ha), answers(&nb, hb));
    assert_eq!(x.len(), y.len());
    for (i, (x, y)) in x.iter().zip(&y).enumerate() {
        assert_eq!(x, y, "answer {i}");
    }
}

#[test]
fn a_snapshot_of_a_stopped_datadir_answers_everything_the_original_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    drop(support::dev_chain(&a));
    let out = snapshot(&a, &b);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("at head #20"), "{}", text(&out));
    assert_same_chain(&a, &b);

    // Refused, with what was wrong: a target that holds a database, a source that holds none.
    let again = snapshot(&a, &b);
    assert!(!again.status.success());
    assert!(text(&again).contains("a database is already there"), "{}", text(&again));
    let none = snapshot(&tmp.path().join("nothing"), &tmp.path().join("c"));
    assert!(!none.status.success());
    assert!(text(&none).contains("holds no loupe database"), "{}", text(&none));
    assert!(!tmp.path().join("c").exists());
}

#[test]
fn a_snapshot_is_taken_by_the_serving_node_and_without_it_after_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
    drop(support::dev_chain(&a));
    let mut node = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["node", "--http.port", "0", "--datadir"])
        .arg(&a)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = a.join("loupe.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "no admin socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The node holds the database: nothing else can open it, yet the snapshot is taken.
    let locked = loupe(&["verify", "--datadir"], &[&a]);
    assert!(!locked.status.success(), "{}", text(&locked));
    let out = snapshot(&a, &b);
    assert!(out.status.success(), "{}", text(&out));
    node.kill().unwrap();
    node.wait().unwrap();
    // The killed node left its socket file; nothing answers there, so the copy is direct.
    assert!(socket.exists());
    let out = snapshot(&a, &c);
    assert!(out.status.success(), "{}", text(&out));
    assert_same_chain(&a, &b);
    assert_same_chain(&a, &c);
}
