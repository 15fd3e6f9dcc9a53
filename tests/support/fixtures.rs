//! Where the execution-apis fixtures are: shared by `tests/support` and `tests/common`.

use std::path::{Path, PathBuf};

/// The execution-apis fixture directory: `$LOUPE_FIXTURES`, else
/// `<CARGO_MANIFEST_DIR>/../shared/fixtures/execution-apis`.
///
/// When it is missing: under CI (`CI=true`) this panics; otherwise it prints a note to stderr
/// and returns `None`, and the caller returns early.
pub fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_FIXTURES") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/execution-apis"),
    };
    if dir.join("chain.rlp").is_file() && dir.join("genesis.json").is_file() {
        return Some(dir);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let msg = format!(
        "execution-apis fixtures not found at {} (need genesis.json, chain.rlp, headfcu.json); \
         set LOUPE_FIXTURES to the fixture directory",
        dir.display()
    );
    if ci {
        panic!("{msg}");
    }
    eprintln!("note: skipping test: {msg}");
    None
}
