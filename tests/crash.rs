//! Crash safety: `loupe import` is killed with SIGKILL at pseudo-random moments (during
//! start-up and init, among the blocks, at the final commit, during a no-op re-run), always
//! into the same datadir, which is sometimes wiped to start over. After every kill the database
//! must open, its head must not have gone back, and blocks 0..=head must be stored whole with a
//! state that hashes to the head's state root. Finally an import runs to completion.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::splitmix64;
use common::{CHAIN_LEN, Fixture, assert_chain_prefix, assert_state_root};
use loupe::storage::Database;

/// Kills at least (more while fewer than [`MIN_MID_IMPORT`] landed among the blocks).
const ITERATIONS: u64 = 24;
/// Required number of kills that land while blocks are being imported.
const MIN_MID_IMPORT: usize = 5;

/// Blocks per write transaction in these imports (`--import.batch`).
const BATCH: u64 = 1;

fn spawn_import(datadir: &Path, fx: &Fixture, log: &Path) -> std::process::Child {
    let log = std::fs::File::create(log).expect("create log file");
    Command::new(env!("CARGO_BIN_EXE_loupe"))
        .arg("import")
        .arg("--datadir")
        .arg(datadir)
        .arg("--genesis")
        .arg(fx.genesis_path())
        .arg(fx.chain_path())
        // One block per write transaction (the default groups 32): a commit and a log line
        // per block, so kills land between many commits. Groups of several blocks are killed
        // in tests/scale.rs.
        .args(["--import.batch", &BATCH.to_string()])
        // The importer logs `block stored number=N` at debug after each commit; that tells us
        // how far the process got before the kill.
        .env("RUST_LOG", "import=debug")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn loupe import")
}

/// Highest block the process logged as stored, if it logged any.
fn last_logged_block(log: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut max = None;
    for line in text.lines().filter(|l| l.contains("block stored")) {
        // Strip ANSI colour codes in case the subscriber ignores NO_COLOR.
        let mut plain = String::with_capacity(line.len());
        let mut esc = false;
        for c in line.chars() {
            match (esc, c) {
                (false, '\u{1b}') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => plain.push(c),
            }
        }
        let Some(at) = plain.find("number=") else { continue };
        let digits: String = plain[at + 7..].chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u64>() {
            max = max.max(Some(n));
        }
    }
    max
}

/// Opens the datadir and checks it; returns its head (`None`: not initialised yet).
fn check_after_kill(datadir: &Path, fx: &Fixture, iteration: u64, when: &str) -> Option<u64> {
    let db = Database::open(datadir).unwrap_or_else(|e| {
        panic!("iteration {iteration}: database does not open after SIGKILL {when}: {e}")
    });
    let reader = db.begin_read().expect("begin_read");
    let head = reader.head().expect("read head");
    let Some(head) = head else {
        // Killed before init committed: nothing of the chain may be there.
        assert_eq!(
            reader.canonical_hash(0).expect("canonical"),
            None,
            "iteration {iteration}: genesis without head"
        );
        assert_eq!(
            reader.genesis_json().expect("genesis"),
            None,
            "iteration {iteration}: genesis text without head"
        );
        return None;
    };
    let stored = reader.genesis_json().expect("genesis").expect("stored genesis");
    assert_eq!(
        common::stored_genesis(&stored),
        common::stored_genesis(&fx.genesis_text),
        "iteration {iteration}: stored genesis"
    );
    assert!(
        reader.header(head).expect("header").is_some(),
        "iteration {iteration}: header of head {head}"
    );
    drop(reader);
    assert_eq!(assert_chain_prefix(&db, fx), head);
    assert_state_root(&db, head);
    Some(head)
}

#[test]
fn sigkill_at_any_moment_leaves_an_openable_consistent_database() {
    let Some(fx) = Fixture::load() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let datadir = tmp.path().join("datadir");
    let started = Instant::now();

    // Calibration: one uninterrupted import into a scratch datadir. Its wall time sets the kill
    // window, so kills spread over the whole import on a fast or a slow (2-core, dev build)
    // machine alike.
    let scratch = tmp.path().join("calibration");
    let log = tmp.path().join("import-calibration.log");
    let t0 = Instant::now();
    let status = spawn_import(&scratch, &fx, &log).wait().expect("wait");
    let full_ms = t0.elapsed().as_millis() as u64;
    assert!(
        status.success(),
        "uninterrupted import failed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(last_logged_block(&log), Some(CHAIN_LEN), "calibration run log");
    assert_eq!(
        check_after_kill(&scratch, &fx, u64::MAX, "(none: calibration run)"),
        Some(CHAIN_LEN)
    );
    std::fs::remove_dir_all(&scratch).expect("remove scratch datadir");
    // Uniform over 0..115% of a full run: most kills land among the blocks, some after the end.
    let window_ms = (full_ms * 115 / 100).max(50);
    eprintln!("uninterrupted import: {full_ms} ms; kill window 0..{window_ms} ms");

    let mut before_first_block = 0usize;
    let mut mid_import = 0usize;
    let mut after_last_block = 0usize;
    let mut finished = 0usize;
    let mut noop_rerun = 0usize;
    let mut logs_seen = false;

    // At least ITERATIONS kills; more (up to three times as many) while too few have landed
    // among the blocks, as happens when the machine's load drops after the calibration run.
    for i in 0..ITERATIONS * 3 {
        if i >= ITERATIONS && mid_import >= MIN_MID_IMPORT {
            break;
        }
        let r = splitmix64(i);
        let head_before = if datadir.exists() {
            Database::open(&datadir)
                .expect("open")
                .begin_read()
                .expect("read")
                .head()
                .expect("head")
        } else {
            None
        };
        // Start over every fourth run, and half the time once the chain is complete, so that
        // kills keep landing in init and among the blocks rather than only in no-op re-runs.
        let wipe =
            i.is_multiple_of(4) || (head_before == Some(CHAIN_LEN) && (r >> 32).is_multiple_of(2));
        if wipe && datadir.exists() {
            std::fs::remove_dir_all(&datadir).expect("wipe datadir");
        }
        let head_before = if wipe { None } else { head_before };
        // Short sleeps right after a wipe hit start-up, file creation and init; a no-op re-run
        // of a complete chain is over in a few tens of ms.
        let sleep_ms = if wipe && (r >> 8).is_multiple_of(2) {
            r % 25
        } else if !wipe && head_before == Some(CHAIN_LEN) {
            r % 40
        } else {
            r % window_ms
        };

        let log = tmp.path().join(format!("import-{i}.log"));
        let mut child = spawn_import(&datadir, &fx, &log);
        std::thread::sleep(Duration::from_millis(sleep_ms));
        let exited = child.try_wait().expect("try_wait");
        if exited.is_none() {
            child.kill().expect("SIGKILL");
        }
        let status = child.wait().expect("wait");
        let logged = last_logged_block(&log);
        logs_seen |= logged.is_some();

        let when = format!("{sleep_ms} ms after spawn (last logged block {logged:?})");
        let head = check_after_kill(&datadir, &fx, i, &when);
        // Durable blocks survive: the head never goes back.
        assert!(
            head >= head_before,
            "iteration {i}: head went back from {head_before:?} to {head:?}"
        );
        // Nothing beyond what the process had committed (it logs each block of a group right
        // after the group's commit, so a kill can fall between the commit and those lines).
        if let (Some(h), Some(l)) = (head, logged) {
            assert!(
                h <= l + BATCH || Some(h) == head_before,
                "iteration {i}: head {h} beyond logged {l}"
            );
        }
        let phase = match (exited, logged) {
            (Some(st), _) => {
                assert!(
                    st.success(),
                    "iteration {i}: import exited with {st} before the kill (log {})",
                    log.display()
                );
                assert_eq!(
                    head,
                    Some(CHAIN_LEN),
                    "iteration {i}: finished import must leave head 54"
                );
                finished += 1;
                "finished"
            }
            (None, _) if head_before == Some(CHAIN_LEN) => {
                noop_rerun += 1;
                "no-op re-run"
            }
            (None, None) => {
                before_first_block += 1;
                "before first block"
            }
            (None, Some(l)) if l < CHAIN_LEN => {
                mid_import += 1;
                "mid-import"
            }
            (None, Some(_)) => {
                after_last_block += 1;
                "after last block"
            }
        };
        eprintln!(
            "iteration {i:2}: wipe={wipe:5} sleep={sleep_ms:3}ms head_before={head_before:?} \
             exit={status} last_logged={logged:?} head_after={head:?} -> {phase}"
        );
    }

    eprintln!(
        "kills: {mid_import} mid-import, {before_first_block} before the first block (start-up, \
         init), {after_last_block} after the last block, {noop_rerun} during a no-op re-run; \
         {finished} runs finished before the kill; {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        logs_seen,
        "no `block stored number=N` debug line was seen in any run's stderr; did the log format change?"
    );
    assert!(
        mid_import >= MIN_MID_IMPORT,
        "only {mid_import} of {} kills landed mid-import (need {MIN_MID_IMPORT})",
        ITERATIONS * 3
    );

    // Finally the import runs to completion in the same datadir.
    let log = tmp.path().join("import-final.log");
    let status = spawn_import(&datadir, &fx, &log).wait().expect("wait");
    assert!(
        status.success(),
        "final import failed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let db = Database::open(&datadir).expect("open after final import");
    assert_eq!(assert_chain_prefix(&db, &fx), CHAIN_LEN);
    let reader = db.begin_read().expect("begin_read");
    assert_eq!(
        reader.canonical_hash(CHAIN_LEN).expect("canonical"),
        Some(fx.head_hash),
        "head hash vs headfcu.json"
    );
    drop(reader);
    assert_state_root(&db, CHAIN_LEN);
}

/// The first milliseconds of a run into an empty datadir, where the database file is created:
/// kills every 250 µs from 0 to 12 ms. redb writes a new file's header first and its magic number
/// last; a kill in between must still leave a datadir that opens (and then imports).
#[test]
fn sigkill_while_the_database_file_is_created_leaves_an_openable_datadir() {
    let Some(fx) = Fixture::load() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut file_left = 0usize;
    for i in 0..48u64 {
        let datadir = tmp.path().join(format!("d{i}"));
        let log = tmp.path().join(format!("early-{i}.log"));
        let mut child = spawn_import(&datadir, &fx, &log);
        std::thread::sleep(Duration::from_micros(250 * i));
        if child.try_wait().expect("try_wait").is_none() {
            child.kill().expect("SIGKILL");
        }
        child.wait().expect("wait");
        let file = datadir.join(loupe::storage::DB_FILE);
        let size = std::fs::metadata(&file).map(|m| m.len()).ok();
        file_left += usize::from(size.is_some());
        let when =
            format!("{} µs after spawn, {} left with {size:?} bytes", 250 * i, file.display());
        check_after_kill(&datadir, &fx, i, &when);
        std::fs::remove_dir_all(&datadir).ok();
    }
    eprintln!("{file_left} of 48 early kills left a database file behind");
}
