//! A new user's first hour, through the real binary: `init` says where the chain's blocks come
//! from, with the command; `node` on a datadir at its genesis says so at start-up; a command
//! refused on a path leaves the path as it found it (nothing created in a typo's place); an
//! empty chain file is an error naming it.
//!
//! The truths are outside loupe: the networks' published merge blocks (mainnet's first
//! proof-of-stake block is 15,537,394, Sepolia's 1,450,409, so their era1 history ends one
//! block before), the fixture chain's head (`headfcu.json`), and the file system as listed
//! before the command ran.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{CHAIN_LEN, Fixture};

fn loupe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run loupe")
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn ok(args: &[&str]) -> String {
    let out = loupe(args);
    assert!(out.status.success(), "loupe {args:?} failed: {}", text(&out));
    text(&out)
}

/// Every entry under `root` (itself included) with its length, or `None` for a folder: what a
/// command must leave as it was.
fn listing(root: &Path) -> BTreeMap<PathBuf, Option<u64>> {
    fn walk(p: &Path, out: &mut BTreeMap<PathBuf, Option<u64>>) {
        let Ok(meta) = std::fs::symlink_metadata(p) else { return };
        if meta.is_dir() {
            out.insert(p.to_path_buf(), None);
            let mut entries: Vec<_> = std::fs::read_dir(p).unwrap().flatten().collect();
            entries.sort_by_key(std::fs::DirEntry::path);
            for e in entries {
                walk(&e.path(), out);
            }
        } else {
            out.insert(p.to_path_buf(), Some(meta.len()));
        }
    }
    let mut out = BTreeMap::new();
    walk(root, &mut out);
    out
}

/// Runs `loupe args`, which must be refused naming `named` (each) in its error, and checks that
/// `root` is listed the same before and after.
fn refused_leaving(root: &Path, args: &[&str], named: &[&str]) -> String {
    let before = listing(root);
    let out = loupe(args);
    let msg = text(&out);
    assert!(!out.status.success(), "loupe {args:?} was not refused: {msg}");
    for n in named {
        assert!(msg.contains(n), "loupe {args:?}: {n:?} not in {msg}");
    }
    assert_eq!(listing(root), before, "loupe {args:?} changed {}: {msg}", root.display());
    msg
}

/// A genesis that claims mainnet's chain id with another genesis: `init` opens the datadir,
/// then refuses it (without `--allow-foreign-genesis`).
fn foreign_genesis(dir: &Path) -> PathBuf {
    let mut genesis: serde_json::Value =
        serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    genesis["config"]["chainId"] = serde_json::json!(1);
    let path = dir.join("chain-id-1.json");
    std::fs::write(&path, genesis.to_string()).unwrap();
    path
}

#[test]
fn a_refused_command_leaves_the_path_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("work");
    std::fs::create_dir(&root).unwrap();
    let typo = root.join("typo");
    let nested = root.join("a/b/typo");
    let empty = root.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let other = root.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "not a datadir").unwrap();
    let chain = root.join("chain.rlp");
    std::fs::write(&chain, [0xc0]).unwrap();
    let out = root.join("out.rlp");
    let (c, o) = (chain.to_str().unwrap(), out.to_str().unwrap());
    let foreign = foreign_genesis(&root);
    let foreign = foreign.to_str().unwrap();
    let missing = root.join("no-such-genesis.json");
    let missing = missing.to_str().unwrap();

    for dir in [&typo, &nested, &empty, &other] {
        let d = dir.to_str().unwrap();
        // Commands that read a chain: refused before anything is created, naming the path and
        // the init to run.
        let init = format!("loupe init --datadir {d}");
        for args in [
            vec!["verify", "--datadir", d],
            vec!["verify", "--datadir", d, "--history"],
            vec!["export", "--datadir", d, o],
            vec!["node", "--datadir", d, "--http.port", "0"],
            vec!["import", "--datadir", d, c],
            vec!["follow", "--datadir", d, "--upstream", "http://127.0.0.1:9", "--http.port", "0"],
        ] {
            refused_leaving(&root, &args, &[d, &init]);
        }
        // `init` without --chain, or with a genesis file that is not there.
        refused_leaving(&root, &["init", "--datadir", d], &["--chain"]);
        refused_leaving(&root, &["init", "--datadir", d, "--chain", missing], &[missing]);
        refused_leaving(&root, &["node", "--datadir", d, "--chain", missing], &[missing]);
        // Refused once the database is open (a public chain id with another genesis): what the
        // open created is removed again.
        for args in [
            vec!["init", "--datadir", d, "--chain", foreign],
            vec!["import", "--datadir", d, "--chain", foreign, c],
        ] {
            refused_leaving(&root, &args, &["--allow-foreign-genesis"]);
        }
    }
    assert!(!typo.exists() && !root.join("a").exists());

    // A datadir that does hold a chain is opened as before (opening it commits to its file, so
    // only what is there is compared), and a refusal there (another genesis) keeps its chain.
    let data = root.join("data");
    let d = data.to_str().unwrap();
    let out = ok(&["init", "--datadir", d, "--chain", "holesky"]);
    let hash = "0xb5f7f912443c940f21fd611f12828d75b534364ed9e95ca4e307729a4661bde4";
    assert!(out.contains(hash), "holesky's published genesis hash: {out}");
    let before: Vec<PathBuf> = listing(&root).into_keys().collect();
    let out = loupe(&["init", "--datadir", d, "--chain", "hoodi"]);
    assert!(!out.status.success() && text(&out).contains(hash), "{}", text(&out));
    assert_eq!(listing(&root).into_keys().collect::<Vec<_>>(), before);
    let again = ok(&["init", "--datadir", d, "--chain", "holesky"]);
    assert!(again.contains("already initialised") && again.contains(hash), "{again}");
    ok(&["verify", "--datadir", d]);
}

#[test]
fn an_empty_chain_file_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.rlp");
    std::fs::write(&empty, b"").unwrap();
    let e = empty.to_str().unwrap();

    // Into a new datadir: refused before the datadir is made.
    let fresh = tmp.path().join("fresh");
    let msg = refused_leaving(
        tmp.path(),
        &["import", "--datadir", fresh.to_str().unwrap(), "--chain", "holesky", e],
        &[e, "empty"],
    );
    assert!(!msg.contains("nothing to import"), "{msg}");

    // Into an initialised one: the same, and its head stays at the genesis.
    let data = tmp.path().join("data");
    let d = data.to_str().unwrap();
    ok(&["init", "--datadir", d, "--chain", "holesky"]);
    let msg = refused_leaving(tmp.path(), &["import", "--datadir", d, e], &[e, "empty"]);
    assert!(!msg.contains("nothing to import"), "{msg}");
    // A file that is not there is named the same way.
    let missing = tmp.path().join("missing.rlp");
    let m = missing.to_str().unwrap();
    refused_leaving(tmp.path(), &["import", "--datadir", d, m], &[m, "no such"]);
    let db = loupe::storage::Database::open(&data).unwrap();
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(0));
}

/// The first proof-of-stake block of each network with era1 history, as published (geth's and
/// reth's chain configurations): era1 files end one block before.
const MERGES: [(&str, u64); 2] = [("mainnet", 15_537_394), ("sepolia", 1_450_409)];

/// `n` as the output writes it: commas between groups of three digits.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The lines of `out` that are commands (indented `loupe …`), without their indentation.
fn commands(out: &str) -> Vec<String> {
    out.lines().map(str::trim).filter(|l| l.starts_with("loupe ")).map(String::from).collect()
}

#[test]
fn init_prints_the_next_step_for_its_chain() {
    let tmp = tempfile::tempdir().unwrap();
    for (network, merge) in MERGES {
        let dir = tmp.path().join(network);
        let d = dir.to_str().unwrap();
        let out = ok(&["init", "--datadir", d, "--chain", network]);
        assert!(out.contains("no peer-to-peer sync"), "{out}");
        let last = grouped(merge - 1);
        assert!(out.contains(&format!("blocks 1 to {last}")), "{network}: {last} not in {out}");
        assert!(out.contains(&format!("https://{network}.era1.nimbus.team/")), "{out}");
        let cmds = commands(&out);
        assert!(cmds.contains(&format!("loupe import --datadir {d} ./era1/")), "{cmds:?}");
        assert!(
            cmds.iter()
                .any(|c| c.starts_with(&format!("loupe follow --datadir {d} --upstream http"))),
            "{cmds:?}"
        );
        // Again on the same datadir, still at its genesis: the same next step.
        let again = ok(&["init", "--datadir", d, "--chain", network]);
        assert!(again.contains("already initialised") && again.contains("Next:"), "{again}");
    }
    // Networks that began under proof of stake have no era1 history: follow only.
    for network in ["holesky", "hoodi"] {
        let dir = tmp.path().join(network);
        let d = dir.to_str().unwrap();
        let out = ok(&["init", "--datadir", d, "--chain", network]);
        assert!(out.contains("no era1 history"), "{out}");
        let cmds = commands(&out);
        assert!(!cmds.iter().any(|c| c.starts_with("loupe import")), "{cmds:?}");
        assert!(
            cmds.iter().any(|c| c.starts_with(&format!("loupe follow --datadir {d} "))),
            "{cmds:?}"
        );
    }
}

/// A chain of a genesis file: `init` points at RLP chain files, and the command it prints,
/// given the fixture chain's file, imports it to the head the fixtures name; `node` then starts
/// without the at-genesis notice, which it gave before the import.
#[test]
fn the_printed_next_step_imports_and_node_at_genesis_says_how_to_get_blocks() {
    let Some(fx) = Fixture::load() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let d = dir.to_str().unwrap();
    let out = ok(&["init", "--datadir", d, "--chain", fx.genesis_path().to_str().unwrap()]);
    let cmds = commands(&out);
    let import = cmds
        .iter()
        .find(|c| c.starts_with("loupe import"))
        .unwrap_or_else(|| panic!("no import command in {out}"));
    assert_eq!(import, &format!("loupe import --datadir {d} chain.rlp"), "{out}");

    // Before any block: the notice, with the commands that get blocks.
    let notice = node_notice(d);
    let notice = notice.unwrap_or_else(|| panic!("`loupe node` at genesis said nothing"));
    assert!(notice.contains("head 0") && notice.contains("no peer-to-peer sync"), "{notice}");
    assert!(notice.contains(&format!("loupe import --datadir {d} chain.rlp")), "{notice}");
    assert!(notice.contains(&format!("loupe follow --datadir {d} --upstream")), "{notice}");

    // The printed command, run as printed from the folder holding the chain file.
    let words: Vec<&str> = import.split_whitespace().skip(1).collect();
    let status = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(&words)
        .current_dir(&fx.dir)
        .output()
        .unwrap();
    assert!(status.status.success(), "{import}: {}", text(&status));
    let db = loupe::storage::Database::open(&dir).unwrap();
    let reader = db.begin_read().unwrap();
    assert_eq!(reader.head().unwrap(), Some(CHAIN_LEN));
    assert_eq!(reader.canonical_hash(CHAIN_LEN).unwrap(), Some(fx.head_hash));
    drop(reader);
    drop(db);
    assert_eq!(node_notice(d), None, "the notice on a datadir with blocks");
}

/// Starts `loupe node` on `datadir` until it serves; the at-genesis notice it logged, if any.
fn node_notice(datadir: &str) -> Option<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["node", "--datadir", datadir, "--http.port", "0"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let started = Instant::now();
    let mut lines = Vec::new();
    while started.elapsed() < Duration::from_secs(60) {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            assert!(child.try_wait().unwrap().is_none(), "loupe node exited: {lines:?}");
            continue;
        };
        let serving = line.contains("serving JSON-RPC");
        lines.push(line);
        if serving {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(lines.iter().any(|l| l.contains("serving JSON-RPC")), "never served: {lines:?}");
    lines.into_iter().find(|l| l.contains("holds only the genesis block"))
}
