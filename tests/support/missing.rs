//! What a test says when its fixtures are missing: it fails, in CI and outside it alike, naming
//! the command that fetches them from their public source (`scripts/fetch-fixtures.sh`: pinned
//! commits, every file checked against its sha256).

use std::path::Path;

/// Fails the test: the fixture set `set` (a folder of `scripts/fixtures.sha256`) is not at
/// `dir`; `var` is the variable that points the tests elsewhere.
pub fn missing_fixtures(set: &str, dir: &Path, var: &str) -> ! {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-fixtures.sh");
    let how = match set {
        // Packed from their sources here, published nowhere: the script says how they were made.
        "ethereum-tests" | "eest" => format!(
            "these archives are packed from their source, not downloadable as they are; \
             `{} {set}` says what they hold and where they come from, and `{} --check {set}` \
             checks a copy",
            script.display(),
            script.display()
        ),
        _ => format!(
            "fetch them from their public source (pinned commit, every file checked against its \
             sha256) with\n    {} {set}\nwhich writes them to ../shared/fixtures/{set} beside the \
             repository",
            script.display()
        ),
    };
    panic!("the {set} fixtures are not at {}: {how}; or set {var} to where they are", dir.display())
}
