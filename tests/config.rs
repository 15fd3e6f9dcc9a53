//! `--config FILE` and `--http.api` (issue 13): a TOML file gives the same configuration as the
//! same flags, flags win over it, an unknown key or a bad value is refused naming it, and a
//! namespace left out answers -32601.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use loupe::cli::{Cli, ConfigError};
use serde_json::json;

fn parse(args: &[&str]) -> Result<Cli, ConfigError> {
    Cli::parse_with_config_from(std::iter::once("loupe").chain(args.iter().copied()))
}

fn file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loupe.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap().to_string();
    (dir, p)
}

const FILE: &str = r#"
datadir = "/tmp/loupe-config-test"
metrics = "127.0.0.1:9101"

[http]
port = 9999
api = ["eth", "trace"]

[rpc]
gascap = 1000000
evm-timeout = 2.5
max-logs = 10
trace-workers = 3

[trace]
vm-trace = true
max-filter-range = 50

[log]
filter = "debug"

[db]
cache-mb = 64
"#;

const FLAGS: [&str; 22] = [
    "--datadir",
    "/tmp/loupe-config-test",
    "--metrics",
    "127.0.0.1:9101",
    "--http.port",
    "9999",
    "--http.api",
    "eth,trace",
    "--rpc.gascap",
    "1000000",
    "--rpc.evm-timeout",
    "2.5",
    "--rpc.max-logs",
    "10",
    "--rpc.trace-workers",
    "3",
    "--trace.vm-trace",
    "--trace.max-filter-range",
    "50",
    "--log.filter=debug",
    "--db.cache-mb",
    "64",
];

#[test]
fn a_config_file_sets_what_the_same_flags_set_and_flags_win() {
    let (_dir, path) = file(FILE);
    let from_file = parse(&["node", "--config", &path]).unwrap();
    let mut args = vec!["node"];
    args.extend(FLAGS);
    let from_flags = parse(&args).unwrap();
    assert_eq!(format!("{:?}", from_file.command), format!("{:?}", from_flags.command));
    assert_eq!(from_file.log.filter, "debug");
    assert_eq!(from_flags.log.filter, "debug");
    // And a default differs from both, so the comparison is not vacuous.
    let plain = parse(&["node", "--datadir", "/tmp/loupe-config-test"]).unwrap();
    assert_ne!(format!("{:?}", plain.command), format!("{:?}", from_file.command));

    // A flag on the command line wins, wherever it stands.
    let over = parse(&["node", "--http.port", "7777", "--config", &path]).unwrap();
    let debug = format!("{:?}", over.command);
    assert!(debug.contains("port: 7777"), "{debug}");
    assert!(debug.contains("gas_cap: 1000000"), "{debug}");
    assert!(debug.contains("cache_mb: 64"), "{debug}");
}

#[test]
fn unknown_keys_and_bad_values_are_refused_by_name() {
    let (_d, path) = file("[http]\nprot = 8546\n");
    let e = parse(&["node", "--datadir", "/tmp/x", "--config", &path]).unwrap_err().to_string();
    assert!(e.contains("unknown key `http.prot`") && e.contains("loupe node"), "{e}");
    // A key of another subcommand is unknown to this one.
    let (_d, path) = file("[follow]\nupstream = \"http://127.0.0.1:1\"\n");
    let e = parse(&["node", "--datadir", "/tmp/x", "--config", &path]).unwrap_err().to_string();
    assert!(e.contains("unknown key `follow.upstream`"), "{e}");
    let (_d, path) = file("[http]\nport = \"eighty\"\n");
    let e = parse(&["node", "--datadir", "/tmp/x", "--config", &path]).unwrap_err().to_string();
    assert!(e.contains("--http.port") && e.contains("eighty"), "{e}");
    let (_d, path) = file("[db]\ncache-mb = 0\n");
    let e = parse(&["node", "--datadir", "/tmp/x", "--config", &path]).unwrap_err().to_string();
    assert!(e.contains("--db.cache-mb") && e.contains('0'), "{e}");
    let (_d, path) = file("[http\nport = 1\n");
    let e = parse(&["node", "--config", &path]).unwrap_err().to_string();
    assert!(e.contains("not valid TOML"), "{e}");
    let e = parse(&["node", "--config", "/nonexistent/loupe.toml"]).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/loupe.toml"), "{e}");
    // --http.api names the namespace it does not know.
    let cli = parse(&["node", "--datadir", "/tmp/x", "--http.api", "eth,admin"]).unwrap();
    let Some(loupe::cli::Command::Node(node)) = cli.command else { panic!() };
    let e = node.rpc.to_config().unwrap_err().to_string();
    assert!(e.contains("\"admin\""), "{e}");
}

#[test]
fn namespaces_left_out_answer_method_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = support::dev_chain(dir.path());
    let node = support::Node::serve(db, spec, |c| c.apis = vec!["eth".into(), "net".into()]);
    assert!(node.call("eth_chainId", json!([])).is_ok());
    assert!(node.call("net_version", json!([])).is_ok());
    for (m, p) in [
        ("trace_block", json!(["0x1"])),
        ("debug_getRawHeader", json!(["0x1"])),
        ("web3_clientVersion", json!([])),
    ] {
        let e = node.call(m, p).unwrap_err();
        assert_eq!(e["code"], json!(-32601), "{m}: {e}");
    }
}

/// `--allow-foreign-genesis` is a flag of every command that may initialise a datadir from a
/// genesis file, on the command line or from a `--config` file, and it reaches init's options;
/// `loupe dev` (its own genesis) has no such flag.
#[test]
fn allow_foreign_genesis_is_a_flag_of_every_command_that_initialises() {
    use loupe::cli::Command;
    let (_d, path) = file("allow-foreign-genesis = true\n");
    for command in ["init", "import", "node", "follow"] {
        let mut base = vec![command, "--datadir", "/tmp/x", "--chain", "g.json"];
        match command {
            "import" => base.push("chain.rlp"),
            "follow" => base.extend(["--upstream", "http://127.0.0.1:1"]),
            _ => {}
        }
        let options = |args: &[&str]| {
            let cli = parse(args).unwrap();
            let chain = match cli.command {
                Some(Command::Init(c)) => c.chain,
                Some(Command::Import(c)) => c.chain,
                Some(Command::Node(c)) => c.chain,
                Some(Command::Follow(c)) => c.chain,
                other => panic!("{other:?}"),
            };
            chain.options().foreign_chain_id
        };
        assert!(!options(&base), "{command}: off by default");
        let mut flag = base.clone();
        flag.push("--allow-foreign-genesis");
        assert!(options(&flag), "{command}: the flag");
        let mut config = base.clone();
        config.extend(["--config", &path]);
        assert!(options(&config), "{command}: from the config file");
    }
    let e = parse(&["dev", "--config", &path]).unwrap_err().to_string();
    assert!(e.contains("unknown key `allow-foreign-genesis`"), "{e}");
}
