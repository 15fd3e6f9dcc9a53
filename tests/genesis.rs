//! Streaming genesis: a large allocation is initialised through the stored trie, and its root
//! equals alloy's in-memory root of the same allocation; the same genesis (in any order) is
//! recognised again, and another one is refused with both hashes named.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::Command;

use alloy_genesis::Genesis;
use alloy_primitives::{Address, B256, U256, keccak256};
use loupe::chain::ChainSpec;

fn loupe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().expect("run loupe")
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Writes a genesis with `n` accounts (every 1000th with code and storage), entries in the
/// order given by `order`.
fn write_genesis(path: &Path, n: u64, reverse: bool, bump: Option<u64>) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        f,
        r#"{{"config":{{"chainId":4242,"homesteadBlock":0,"eip150Block":0,"eip155Block":0,"eip158Block":0,"byzantiumBlock":0,"constantinopleBlock":0,"petersburgBlock":0,"istanbulBlock":0,"berlinBlock":0,"londonBlock":0,"terminalTotalDifficulty":0,"mergeNetsplitBlock":0,"shanghaiTime":0}},"difficulty":"0x0","gasLimit":"0x1c9c380","baseFeePerGas":"0x7","alloc":{{"#
    )
    .unwrap();
    let ids: Box<dyn Iterator<Item = u64>> =
        if reverse { Box::new((0..n).rev()) } else { Box::new(0..n) };
    let mut first = true;
    for i in ids {
        let address = Address::from_slice(&keccak256(i.to_be_bytes())[12..]);
        let balance = U256::from(i + 1) + U256::from(u64::from(bump == Some(i)));
        if !first {
            f.write_all(b",").unwrap();
        }
        first = false;
        if i % 1000 == 0 {
            write!(
                f,
                r#""{address:#x}":{{"balance":"{balance:#x}","nonce":"0x1","code":"0x600160005500","storage":{{"0x{:064x}":"0x{:064x}","0x{:064x}":"0x{:064x}"}}}}"#,
                1, i + 1, i + 7, 3
            )
            .unwrap();
        } else {
            write!(f, r#""{address:#x}":{{"balance":"{balance:#x}"}}"#).unwrap();
        }
    }
    f.write_all(b"}}").unwrap();
    f.flush().unwrap();
}

fn in_memory_hash(path: &Path) -> (B256, B256) {
    let genesis: Genesis = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let root = alloy_trie::root::state_root_ref_unhashed(&genesis.alloc);
    let spec = ChainSpec::from_genesis(genesis).unwrap();
    assert_eq!(spec.genesis_header().state_root, root);
    (root, spec.genesis_hash())
}

#[test]
fn a_large_genesis_streams_into_the_trie_and_is_recognised_again() {
    let dir = tempfile::tempdir().unwrap();
    let (g, reordered, other) =
        (dir.path().join("g.json"), dir.path().join("r.json"), dir.path().join("o.json"));
    const N: u64 = 120_000;
    write_genesis(&g, N, false, None);
    write_genesis(&reordered, N, true, None);
    write_genesis(&other, N, false, Some(N / 2));
    let (root, hash) = in_memory_hash(&g);

    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let out = loupe(&["init", "--datadir", d, "--genesis", g.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&hash.to_string()), "{}", text(&out));
    let db = loupe::storage::Database::open(&data).unwrap();
    let stored = db.begin_read().unwrap().header(0).unwrap().unwrap();
    assert_eq!(stored.state_root, root);
    assert_eq!(stored.hash_slow(), hash);
    drop(db);

    let out = loupe(&["verify", "--datadir", d]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("{} accounts", N)), "{}", text(&out));

    // The same allocation in the reverse order is the same genesis.
    let out = loupe(&["init", "--datadir", d, "--genesis", reordered.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("already initialised"), "{}", text(&out));

    // One balance differs: refused, naming both hashes.
    let (_, other_hash) = in_memory_hash(&other);
    let out = loupe(&["init", "--datadir", d, "--genesis", other.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    let msg = text(&out);
    assert!(msg.contains(&hash.to_string()) && msg.contains(&other_hash.to_string()), "{msg}");
}
