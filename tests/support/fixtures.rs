//! Where the execution-apis fixtures are: shared by `tests/support` and `tests/common`.

use std::path::{Path, PathBuf};

#[path = "missing.rs"]
#[allow(clippy::duplicate_mod)] // also loaded by the other fixture locators a test binary includes
mod missing;

/// The execution-apis fixture directory: `$LOUPE_FIXTURES`, else
/// `<CARGO_MANIFEST_DIR>/../shared/fixtures/execution-apis`.
///
/// When it is missing the test fails, in CI and outside it, naming the command that fetches
/// the fixtures (`scripts/fetch-fixtures.sh execution-apis`): a test never passes having
/// tested nothing. (`Some` always; the `Option` keeps the callers' `let … else`.)
pub fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_FIXTURES") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/execution-apis"),
    };
    if dir.join("chain.rlp").is_file() && dir.join("genesis.json").is_file() {
        return Some(dir);
    }
    missing::missing_fixtures("execution-apis", &dir, "LOUPE_FIXTURES")
}
