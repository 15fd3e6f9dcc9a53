//! Where the suites' archives are, unpacked once, and the tests of a folder.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

/// ethereum/tests' `BlockchainTests/{ValidBlocks,InvalidBlocks,TransitionTests}`.
pub const BLOCKS_ARCHIVE: &str = "blockchain-tests-blocks.tar.zst";
/// ethereum/tests' `BlockchainTests/GeneralStateTests`.
pub const GENERAL_STATE_ARCHIVE: &str = "blockchain-tests-general-state.tar.zst";
/// ethereum/tests' `DifficultyTests`.
pub const DIFFICULTY_ARCHIVE: &str = "difficulty-transaction-tests.tar.zst";
/// execution-specs' blockchain tests, filled at Osaka and Amsterdam (`../shared/fixtures/eest`).
pub const EEST_ARCHIVE: &str = "eest-blockchain-tests.tar.zst";

#[path = "../missing.rs"]
#[allow(clippy::duplicate_mod)] // also loaded by the other fixture locators a test binary includes
mod missing;

/// Where an archive of the suites is: ethereum/tests' in `$LOUPE_ETHEREUM_TESTS` (default
/// `../shared/fixtures/ethereum-tests`), execution-specs' in `$LOUPE_EEST` (default
/// `../shared/fixtures/eest`). Missing: the test fails, saying where the archive comes from
/// (`Some` always; the `Option` keeps the callers' `let … else`).
pub fn archive_path(archive: &str) -> Option<PathBuf> {
    let (var, set, default) = if archive == EEST_ARCHIVE {
        ("LOUPE_EEST", "eest", "../shared/fixtures/eest")
    } else {
        ("LOUPE_ETHEREUM_TESTS", "ethereum-tests", "../shared/fixtures/ethereum-tests")
    };
    let dir = match std::env::var_os(var) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join(default),
    };
    if dir.join(archive).is_file() {
        return Some(dir.join(archive));
    }
    missing::missing_fixtures(set, &dir.join(archive), var)
}

/// Unpacks `archive` (a `.tar.zst` of the fixtures folder) once, under `target/`; returns the
/// folder. A marker file written last makes a half-unpacked folder be unpacked again.
pub fn unpacked(archive: &str) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = archive_path(archive)?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("ethereum-tests").join(archive.trim_end_matches(".tar.zst"));
    let marker = dir.join(".unpacked");
    let stamp = std::fs::metadata(&src).map(|m| m.len().to_string()).unwrap();
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(stamp.as_str()) {
        return Some(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::fs::File::open(&src).unwrap();
    let decoder = zstd::stream::read::Decoder::new(file).unwrap();
    tar::Archive::new(decoder).unpack(&dir).unwrap();
    std::fs::write(&marker, stamp).unwrap();
    Some(dir)
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

/// The JSON files under `sub` of the unpacked `archive`, in path order (`None`: no archive).
pub fn suite_files(archive: &str, sub: &str) -> Option<Vec<PathBuf>> {
    let dir = unpacked(archive)?.join(sub);
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    assert!(!files.is_empty(), "no tests under {}", dir.display());
    Some(files)
}

/// Every test of `files`: its name and its file, in file order and, within a file, in name
/// order.
pub fn tests_in(files: &[PathBuf]) -> Vec<(String, PathBuf)> {
    files
        .iter()
        .flat_map(|f| {
            let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            v.as_object().unwrap().keys().map(|k| (k.clone(), f.clone())).collect::<Vec<_>>()
        })
        .collect()
}

/// The first of every `n` tests (all of them for 1), so that a sample spreads over the
/// folder's files.
pub fn every_nth(tests: Vec<(String, PathBuf)>, n: usize) -> Vec<(String, PathBuf)> {
    tests.into_iter().step_by(n.max(1)).collect()
}
