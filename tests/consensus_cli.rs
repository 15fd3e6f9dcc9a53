//! The consensus suites through the binary, driven as a test runner such as hive drives a
//! client: for each test, its genesis.json (chain id 1, as the fixtures have) is initialised by
//! `loupe init --chain FILE --allow-foreign-genesis` (under the test's genesis hash), its valid
//! blocks are imported by `loupe import` from RLP chain files, each invalid block is fed alone in
//! a file of its own and must be refused (exit code not 0; for execution-specs' suites the
//! message names the rule the suite's `expectException` names) with the head where it was, and
//! the head read back from `loupe node` over JSON-RPC (`eth_getBlockByNumber("latest")`) must be
//! the test's `lastblockhash`. A chain id 1 genesis that is not mainnet's is refused without
//! the flag, the message naming it.
//!
//! The folders: ethereum/tests' `BlockchainTests/{ValidBlocks,InvalidBlocks,TransitionTests}`
//! and execution-specs' `osaka` and `prague_at_osaka` ([`FOLDERS`]); CI runs every Nth test of
//! each, the whole folders run with `cargo nextest run --test suite -E 'test(/^consensus_cli::/)' --run-ignored only`
//! (README). Amsterdam's tests are `tests/consensus.rs`'s alone: they need its second path
//! (bal-devnet-4 has no EIP-8282 predeploys). The fixtures, the tests' genesis and the rules
//! are `tests/support/consensus/`'s, shared with `tests/consensus.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/served.rs"]
mod served;
use served::served_url;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use alloy_primitives::{B256, Bytes};
use serde_json::{Value, json};

#[path = "support/consensus/mod.rs"]
mod consensus_suite;

use consensus_suite::fixtures::{BLOCKS_ARCHIVE, EEST_ARCHIVE, every_nth, suite_files, tests_in};
use consensus_suite::genesis::{Setup, setup};
use consensus_suite::rules::{Refusal, names_the_rule};
use consensus_suite::runner::{Outcome, run_tests, scratch_dir};

/// A folder of blockchain tests.
struct Folder {
    /// The archive it is in.
    archive: &'static str,
    /// Its path in the archive.
    sub: &'static str,
    /// CI runs the first of every `every` of its tests.
    every: usize,
    /// Whether an invalid block must be refused by the rule its `expectException` names
    /// (execution-specs' suites), or only refused (ethereum/tests, whose names are older).
    rules: bool,
}

/// The folders, and the share of each that CI runs.
const FOLDERS: [Folder; 5] = [
    Folder { archive: BLOCKS_ARCHIVE, sub: "BlockchainTests/ValidBlocks", every: 4, rules: false },
    Folder {
        archive: BLOCKS_ARCHIVE,
        sub: "BlockchainTests/InvalidBlocks",
        every: 2,
        rules: false,
    },
    Folder {
        archive: BLOCKS_ARCHIVE,
        sub: "BlockchainTests/TransitionTests",
        every: 1,
        rules: false,
    },
    Folder { archive: EEST_ARCHIVE, sub: "osaka/blockchain_tests", every: 4, rules: true },
    Folder {
        archive: EEST_ARCHIVE,
        sub: "prague_at_osaka/blockchain_tests",
        every: 4,
        rules: true,
    },
];

fn loupe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run loupe")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// What a failed command says: its `error: …` line on, else all it printed.
fn error_message(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    match stderr.find("error: ") {
        Some(at) => stderr[at + "error: ".len()..].trim().to_string(),
        None => text(out).trim().to_string(),
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The head's number as `loupe db stats --json` gives it (`None`: no block stored).
fn head_number(datadir: &Path) -> Result<Option<u64>, String> {
    let out = loupe(&["db", "stats", "--json", "--datadir", path_str(datadir)]);
    if !out.status.success() {
        return Err(format!("loupe db stats: {}", text(&out)));
    }
    let stats: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("loupe db stats --json: {e}: {}", text(&out)))?;
    Ok(stats["head"].as_u64())
}

/// The head block's number and hash, from `loupe node` on a free port:
/// `eth_getBlockByNumber("latest", false)`. The node is killed once it has answered, as a
/// runner tears down a client: its graceful stop (SIGTERM) takes over a second, and nothing
/// reads the datadir after it.
fn head_over_rpc(datadir: &Path) -> Result<(u64, B256), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["node", "--datadir", path_str(datadir), "--http.port", "0"])
        .args(["--log.filter", "info"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn loupe node: {e}"))?;
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the log to its end (the pipe never fills), sending the URL, or every line if the
    // node ends first.
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = served_url(&line) {
                let _ = tx.send(Ok(url));
            }
            lines.push(line);
        }
        let _ = tx.send(Err(lines.join("\n")));
    });
    let answer = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(url)) => {
            let body = json!({
                "jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber",
                "params": ["latest", false],
            });
            reqwest::blocking::Client::new()
                .post(&url)
                .json(&body)
                .send()
                .and_then(reqwest::blocking::Response::json::<Value>)
                .map_err(|e| format!("eth_getBlockByNumber: {e}"))
        }
        Ok(Err(log)) => Err(format!("loupe node ended without serving: {log}")),
        Err(_) => Err("loupe node did not start serving within 60 s".to_string()),
    };
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer?;
    let block = &answer["result"];
    let number = block["number"].as_str().and_then(|n| u64::from_str_radix(&n[2..], 16).ok());
    let hash = block["hash"].as_str().and_then(|h| h.parse::<B256>().ok());
    match (number, hash) {
        (Some(n), Some(h)) => Ok((n, h)),
        _ => Err(format!("eth_getBlockByNumber(\"latest\"): {answer}")),
    }
}

/// `loupe import` of `rlp` (blocks one after the other, as an RLP chain file has them),
/// written to `file` first.
fn import(datadir: &Path, file: &Path, rlp: &[u8]) -> Output {
    std::fs::write(file, rlp).unwrap();
    loupe(&["import", "--datadir", path_str(datadir), path_str(file)])
}

/// One test through the binary (`rules` as in [`Folder`]).
fn run_cli_test(name: &str, test: &Value, rules: bool, refusals: &mut Vec<Refusal>) -> Outcome {
    let Setup { genesis, genesis_hash } = match setup(name, test) {
        Ok(s) => s,
        Err(u) => return u.into(),
    };
    let dir = tempfile::Builder::new().prefix("loupe-cli-").tempdir_in(scratch_dir()).unwrap();
    let datadir = dir.path().join("data");
    let genesis_file = dir.path().join("genesis.json");
    std::fs::write(&genesis_file, genesis).unwrap();
    let out = loupe(&[
        "init",
        "--datadir",
        path_str(&datadir),
        "--chain",
        path_str(&genesis_file),
        "--allow-foreign-genesis",
    ]);
    if !out.status.success() {
        return Outcome::Fail(format!("loupe init: {}", text(&out)));
    }
    // "initialised DIR with genesis 0x…": the test's genesis hash.
    let said = String::from_utf8_lossy(&out.stdout);
    if !said.contains(&format!("with genesis {genesis_hash}")) {
        return Outcome::Fail(format!("loupe init: not the test's genesis {genesis_hash}: {said}"));
    }
    let chain = dir.path().join("chain.rlp");
    let bad = dir.path().join("invalid.rlp");
    // The valid blocks since the last invalid one, as one RLP chain file, and their indices.
    let mut pending: (Vec<u8>, Vec<usize>) = (Vec::new(), Vec::new());
    let flush = |pending: &mut (Vec<u8>, Vec<usize>)| -> Result<(), String> {
        if pending.1.is_empty() {
            return Ok(());
        }
        let out = import(&datadir, &chain, &pending.0);
        if !out.status.success() {
            return Err(format!("blocks {:?} were refused: {}", pending.1, error_message(&out)));
        }
        *pending = (Vec::new(), Vec::new());
        Ok(())
    };
    for (i, b) in test["blocks"].as_array().unwrap().iter().enumerate() {
        let rlp: Bytes = match b["rlp"].as_str().unwrap().parse() {
            Ok(r) => r,
            Err(e) => return Outcome::Fail(format!("block {i}: rlp hex: {e}")),
        };
        let Some(why) = b.get("expectException").and_then(Value::as_str) else {
            pending.0.extend_from_slice(&rlp);
            pending.1.push(i);
            continue;
        };
        if let Err(e) = flush(&mut pending) {
            return Outcome::Fail(e);
        }
        let before = match head_number(&datadir) {
            Ok(h) => h,
            Err(e) => return Outcome::Fail(e),
        };
        let out = import(&datadir, &bad, &rlp);
        if out.status.success() {
            return Outcome::Fail(format!(
                "block {i} was accepted; expected {why}: {}",
                text(&out)
            ));
        }
        let reason = error_message(&out);
        match head_number(&datadir) {
            Ok(after) if after == before => {}
            Ok(after) => {
                return Outcome::Fail(format!(
                    "block {i} was refused ({reason}) but the head moved from {before:?} to \
                     {after:?}"
                ));
            }
            Err(e) => return Outcome::Fail(e),
        }
        if rules && !names_the_rule(why, &reason) {
            return Outcome::Fail(format!(
                "block {i} was refused for another rule than {why}: {reason}"
            ));
        }
        refusals.push((why.to_string(), reason));
    }
    if let Err(e) = flush(&mut pending) {
        return Outcome::Fail(e);
    }
    let last: B256 = test["lastblockhash"].as_str().unwrap().parse().unwrap();
    match head_over_rpc(&datadir) {
        Ok((_, hash)) if hash == last => Outcome::Pass,
        Ok((number, hash)) => {
            Outcome::Fail(format!("head {hash} (#{number}) is not lastblockhash {last}"))
        }
        Err(e) => Outcome::Fail(e),
    }
}

/// Runs the tests of every folder, the first of every `every(folder)` of each; asserts that
/// none failed.
fn run_folders(every: impl Fn(&Folder) -> usize) {
    let mut failed = 0;
    for folder in &FOLDERS {
        let Some(files) = suite_files(folder.archive, folder.sub) else { continue };
        let n = every(folder);
        let tests = every_nth(tests_in(&files), n);
        let suite = format!("{} through the CLI (1 in {n})", folder.sub);
        let t = run_tests(&suite, &tests, &[], |name, test, refusals| {
            run_cli_test(name, test, folder.rules, refusals)
        });
        failed += t.failed.len();
    }
    assert_eq!(failed, 0, "{failed} failed");
}

/// A sample of each folder ([`FOLDERS`]): what CI runs.
#[test]
fn a_sample_of_each_suite_through_the_cli() {
    run_folders(|f| f.every);
}

/// Every test of each folder (`--run-ignored only`).
#[test]
#[ignore = "every test of five folders through the binary: minutes in a debug build"]
fn every_test_of_each_suite_through_the_cli() {
    run_folders(|_| 1);
}

/// `loupe init` of a chain id 1 genesis that is not mainnet's (a test's): refused without
/// `--allow-foreign-genesis`, the message naming the flag, nothing written; accepted with it,
/// under the test's genesis hash.
#[test]
fn init_of_a_chain_id_1_genesis_needs_allow_foreign_genesis() {
    let Some(files) = suite_files(BLOCKS_ARCHIVE, "BlockchainTests/ValidBlocks") else { return };
    let (name, file) = tests_in(&files).swap_remove(0);
    let v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let test = &v[&name];
    let Setup { genesis, genesis_hash } = setup(&name, test).unwrap();
    let config: Value = serde_json::from_str(&genesis).unwrap();
    assert_eq!(config["config"]["chainId"], 1, "{name}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("genesis.json");
    std::fs::write(&file, &genesis).unwrap();
    let datadir = dir.path().join("data");
    let (d, f) = (path_str(&datadir), path_str(&file));

    let out = loupe(&["init", "--datadir", d, "--chain", f]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("--allow-foreign-genesis"), "the refusal names the flag: {msg}");
    // Nothing stored, nor anything made there: the path is left as it was.
    assert!(!datadir.exists(), "a refused init left {d} behind");

    let out = loupe(&["init", "--datadir", d, "--chain", f, "--allow-foreign-genesis"]);
    let msg = text(&out);
    assert!(out.status.success(), "{msg}");
    assert!(msg.contains(&format!("with genesis {genesis_hash}")), "{msg}");
    assert!(msg.contains("chain id 1"), "{msg}");
    assert_eq!(head_over_rpc(&datadir), Ok((0, genesis_hash)));
}
