//! README.md's curl examples, run word for word (only the URL's port changes) against a fresh
//! dev chain, must print what README shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use loupe::rpc::RpcConfig;
use loupe::storage::Database;

/// (curl command, expected JSON) pairs: each ```sh block with a curl, then the next ```json block.
fn examples(readme: &str) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if let Some(lang) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
            blocks.push((lang.trim().to_string(), body.join("\n")));
        }
    }
    for pair in blocks.windows(2) {
        if pair[0].0 == "sh" && pair[0].1.starts_with("curl") && pair[1].0 == "json" {
            out.push((
                pair[0].1.clone(),
                serde_json::from_str(&pair[1].1).expect("README json parses"),
            ));
        }
    }
    out
}

#[test]
fn readme_curl_examples_print_what_readme_shows() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 3, "README lost its examples");

    let tmp = tempfile::tempdir().unwrap();
    let db = Database::open(tmp.path()).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
    loupe::dev::build_sample_history(&db, &spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = RpcConfig { addr: "127.0.0.1:0".parse().unwrap(), ..RpcConfig::default() };
    let server = rt.block_on(loupe::rpc::start(Arc::new(db), spec, config)).unwrap();
    let url = format!("http://{}", server.addr);

    for (cmd, expected) in examples {
        assert!(
            cmd.contains("http://127.0.0.1:8545"),
            "example must target the default node: {cmd}"
        );
        let cmd = cmd.replace("http://127.0.0.1:8545", &url);
        let out = std::process::Command::new("sh").arg("-c").arg(&cmd).output().expect("run curl");
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{cmd}: not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
        });
        assert_eq!(got, expected, "README example output changed: {cmd}");
    }
    rt.block_on(server.stop());
}

/// README's two commands, as README gives them: the one that runs the node, and the one that
/// runs the tests, which `.ci/run` runs word for word and which installs cargo-nextest when it is
/// missing.
#[test]
fn readme_test_command_is_the_one_ci_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let after = |heading: &str| -> String {
        let at = readme.find(heading).unwrap_or_else(|| panic!("README lost {heading:?}"));
        let rest = &readme[at..];
        let start = rest.find("```sh\n").expect("a sh block") + "```sh\n".len();
        rest[start..start + rest[start..].find("```").unwrap()].trim().to_string()
    };
    assert_eq!(after("## Run it"), "cargo run --release");
    let test = after("## Run the tests");
    assert_eq!(test, "scripts/test.sh");
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == test), ".ci/run does not run {test:?}");
    let script = std::fs::read_to_string(format!("{root}/{test}")).unwrap();
    assert!(script.contains("cargo install --locked cargo-nextest"), "{script}");
    assert!(script.contains("exec cargo nextest run --locked --no-fail-fast \"$@\""), "{script}");
}
