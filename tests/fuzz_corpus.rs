//! The fuzz targets' committed corpora (`fuzz/corpus/TARGET`) replayed through the same checks
//! the targets run (`fuzz/src/checks.rs`), in this suite's ordinary build: every input any
//! fuzzing run found interesting, crashes that were fixed among them, must still pass. Fuzzing
//! itself (new inputs, with coverage instrumentation) is `fuzz/run.sh` (FUZZING.md).

use std::path::PathBuf;

#[path = "../fuzz/src/lib.rs"]
#[allow(unreachable_pub, dead_code, missing_debug_implementations)]
mod loupe_fuzz;

/// Runs `check` on every file of `target`'s corpus; fails naming each input that broke it.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    files.sort();
    // A corpus is some hundreds to thousands of inputs; a near-empty one means a wrong path.
    assert!(files.len() >= 100, "{}: only {} inputs", dir.display(), files.len());
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            failed.push(file.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs failed: {failed:#?}",
        failed.len(),
        files.len()
    );
    eprintln!("{target}: {} inputs replayed", files.len());
}

#[test]
fn http_request_corpus_replays() {
    replay("http_request", loupe_fuzz::checks::http_request);
}

#[test]
fn params_corpus_replays() {
    replay("params", loupe_fuzz::checks::params);
}

#[test]
fn block_import_corpus_replays() {
    replay("block_import", loupe_fuzz::checks::block_import);
}

#[test]
fn upstream_decode_corpus_replays() {
    replay("upstream_decode", loupe_fuzz::checks::upstream_decode);
}
