//! Where issue 61's real-network witness fixtures are, and their zeth host caches read.
#![allow(dead_code, unreachable_pub)]

use std::io::Read;
use std::path::{Path, PathBuf};

#[path = "missing.rs"]
#[allow(clippy::duplicate_mod)] // also loaded by the other fixture locators a test binary includes
mod missing;

/// `$LOUPE_WITNESS_FIXTURES`, else `<repo>/../shared/fixtures/mainnet-witness`. Missing: the
/// test fails, naming `scripts/fetch-fixtures.sh mainnet-witness` (`Some` always; the `Option`
/// keeps the callers' `let … else`).
pub fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_WITNESS_FIXTURES") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mainnet-witness"),
    };
    if dir.join("zeth/15537394.json.gz").is_file() {
        return Some(dir);
    }
    missing::missing_fixtures("mainnet-witness", &dir, "LOUPE_WITNESS_FIXTURES")
}

/// The zeth host cache of block `n` (`zeth/N.json.gz`), as JSON.
pub fn zeth_json(dir: &Path, n: u64) -> serde_json::Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(dir.join(format!("zeth/{n}.json.gz"))).expect("open"),
    )
    .read_to_string(&mut text)
    .expect("gunzip");
    serde_json::from_str(&text).expect("json")
}
