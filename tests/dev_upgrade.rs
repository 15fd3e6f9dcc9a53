//! `loupe dev` on a dev datadir written in another storage format rebuilds the dev chain (it is
//! fully reproducible from its built-in genesis) instead of refusing to start; `loupe node` on
//! the same kind of datadir still refuses it, naming both versions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_loupe");
const META: redb::TableDefinition<'_, &str, &[u8]> = redb::TableDefinition::new("meta");

fn set_schema(dir: &std::path::Path, version: u64) {
    let db = redb::Database::open(dir.join(loupe::storage::DB_FILE)).unwrap();
    let w = db.begin_write().unwrap();
    w.open_table(META).unwrap().insert("schema", version.to_be_bytes().as_slice()).unwrap();
    w.commit().unwrap();
}

#[test]
fn an_old_dev_datadir_is_rebuilt_and_a_node_datadir_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(loupe::storage::Database::open(dir.path()).unwrap());
    set_schema(dir.path(), 1);

    let out = Command::new(BIN)
        .args(["node", "--datadir", dir.path().to_str().unwrap(), "--http.port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let current = format!("version {}", loupe::storage::tables::SCHEMA_VERSION);
    assert!(err.contains("version 1") && err.contains(&current), "{err}");

    let mut child = Command::new(BIN)
        .args(["dev", "--datadir", dir.path().to_str().unwrap(), "--http.port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let done = line.contains("serving JSON-RPC at");
        lines.push(line);
        if done {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = lines.join("\n");
    let rebuilding = format!(
        "storage format 1; rebuilding it in format {}",
        loupe::storage::tables::SCHEMA_VERSION
    );
    assert!(text.contains(&rebuilding), "{text}");
    assert!(text.contains("built the dev chain's sample history"), "{text}");
    let db = loupe::storage::Database::open(dir.path()).unwrap();
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(loupe::dev::HISTORY_BLOCKS));
}
