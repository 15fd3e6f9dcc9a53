//! A generated chain at scale, through the real binary: at least 1,000 blocks over at least
//! 100,000 accounts import with every root verified, `loupe verify` passes on the result, and
//! SIGKILL at random moments during such an import (at least 20 kills, some during the
//! streamed genesis) always leaves a database that opens and passes `loupe verify`, whose head
//! never goes back, and that a re-run completes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::splitmix64;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_loupe");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run loupe")
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn generate(out: &Path, accounts: u64, blocks: u64, txs: u64, seed: u64) {
    let o = out.to_str().unwrap();
    let (a, b, t, s) =
        (accounts.to_string(), blocks.to_string(), txs.to_string(), seed.to_string());
    let out = run(&[
        "generate",
        "--out",
        o,
        "--accounts",
        &a,
        "--blocks",
        &b,
        "--txs-per-block",
        &t,
        "--seed",
        &s,
        "--gas-limit",
        "30000000",
    ]);
    assert!(out.status.success(), "generate: {}", text(&out));
}

fn head(datadir: &Path) -> Option<u64> {
    let db = loupe::storage::Database::open(datadir).expect("database opens");
    db.begin_read().unwrap().head().unwrap()
}

fn verify(datadir: &Path, when: &str) {
    let out = run(&["verify", "--history", "--datadir", datadir.to_str().unwrap()]);
    assert!(out.status.success(), "verify {when}: {}", text(&out));
}

fn import_cmd(datadir: &Path, chain: &Path) -> Command {
    let mut c = Command::new(BIN);
    // Committed and durable every 4 blocks (a group of 4, its root checked at its last block),
    // so that kills among the blocks leave heads between 0 and the end.
    c.args(["import", "--import.sync-every", "4", "--import.batch", "4"])
        .arg("--datadir")
        .arg(datadir)
        .arg("--genesis")
        .arg(chain.join("genesis.json"))
        .arg(chain.join("chain.rlp"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

#[test]
fn a_thousand_generated_blocks_over_100k_accounts_import_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let started = Instant::now();
    generate(&chain, 100_000, 1_000, 12, 11);
    let generated = started.elapsed();
    let data = tmp.path().join("data");
    let out = import_cmd(&data, &chain).stdout(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "import: {}", text(&out));
    assert_eq!(head(&data), Some(1_000));
    // The chain's last block is the generator's head: same hashes on both sides.
    let work = loupe::storage::Database::open(&data).unwrap();
    let header = work.begin_read().unwrap().header(1_000).unwrap().unwrap();
    drop(work);
    let rlp = std::fs::read(chain.join("chain.rlp")).unwrap();
    let mut reader = loupe::import::BlockReader::new(rlp.as_slice());
    let mut last = None;
    while let Some(b) = reader.next_block() {
        last = Some(b.unwrap().1);
    }
    assert_eq!(last.unwrap().header, header);
    verify(&data, "after the import");
    eprintln!(
        "generated in {:.1}s, imported and verified in {:.1}s",
        generated.as_secs_f64(),
        (started.elapsed() - generated).as_secs_f64()
    );
}

#[test]
fn sigkill_during_a_generated_import_leaves_a_verifiable_database() {
    const KILLS: u64 = 24;
    // Kills that must land among the blocks, and in the streamed genesis.
    const MIN_MID_IMPORT: u64 = 5;
    const MIN_IN_INIT: u64 = 2;
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    // Over 200,000 accounts: the genesis is streamed in more than one commit, so kills land
    // in a partial init too.
    generate(&chain, 210_000, 80, 30, 5);
    let data = tmp.path().join("data");

    // Calibration: an uninterrupted init, and a whole import, set the kill windows.
    let t0 = Instant::now();
    let g = chain.join("genesis.json");
    let out = run(&[
        "init",
        "--datadir",
        tmp.path().join("c1").to_str().unwrap(),
        "--genesis",
        g.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let init_ms = (t0.elapsed().as_millis() as u64).max(20);
    let t0 = Instant::now();
    assert!(import_cmd(&tmp.path().join("c2"), &chain).status().unwrap().success());
    let full_ms = (t0.elapsed().as_millis() as u64).max(100);
    eprintln!("uninterrupted init: {init_ms} ms, import: {full_ms} ms");

    let (mut mid_import, mut in_init) = (0, 0);
    // At least KILLS kills; more (up to three times as many) while too few have landed among
    // the blocks or in the init, as happens when the machine's load drops after the
    // calibration runs and the imports finish before their kills.
    for i in 0..KILLS * 3 {
        if i >= KILLS && mid_import >= MIN_MID_IMPORT && in_init >= MIN_IN_INIT {
            break;
        }
        let r = splitmix64(i);
        let current = if data.exists() { head(&data) } else { None };
        // Start over every third run and once the chain is complete; half of the fresh starts
        // are killed within the streamed genesis, the other runs among the blocks.
        let wipe = i % 3 == 0 || current == Some(80);
        if wipe && data.exists() {
            std::fs::remove_dir_all(&data).unwrap();
        }
        let before = if wipe { None } else { current };
        // Without a stored genesis the run starts with the whole init: kill it after that
        // unless this run is meant to land inside it.
        let sleep = if wipe && i % 2 == 0 {
            r % init_ms
        } else if before.is_none() {
            init_ms + r % full_ms.saturating_sub(init_ms).max(1)
        } else {
            r % full_ms
        };
        let mut child = import_cmd(&data, &chain).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(sleep));
        let finished = child.try_wait().unwrap().is_some();
        if !finished {
            child.kill().unwrap();
        }
        child.wait().unwrap();
        let after = head(&data);
        assert!(after >= before, "kill {i}: head went back from {before:?} to {after:?}");
        if after.is_some() {
            verify(&data, &format!("after kill {i} at {sleep} ms (head {after:?})"));
        }
        if !finished && after.is_some_and(|h| h > 0 && h < 80) {
            mid_import += 1;
        }
        if !finished && after.is_none() {
            in_init += 1;
        }
        eprintln!("kill {i:2} at {sleep:5} ms: head {before:?} -> {after:?}");
    }
    let kills = KILLS * 3;
    assert!(
        mid_import >= MIN_MID_IMPORT,
        "only {mid_import} of {kills} kills left a head among the blocks (need {MIN_MID_IMPORT})"
    );
    assert!(
        in_init >= MIN_IN_INIT,
        "only {in_init} of {kills} kills landed before the genesis was stored (need {MIN_IN_INIT})"
    );
    let out = import_cmd(&data, &chain).stdout(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "final import: {}", text(&out));
    assert_eq!(head(&data), Some(80));
    verify(&data, "after the final import");
}
