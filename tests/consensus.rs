//! The Ethereum consensus tests (ethereum/tests `BlockchainTests` and `DifficultyTests`, the
//! suites every execution client runs) against loupe's import: every valid block accepted,
//! every invalid block refused with the chain going on from its parent, the head equal to
//! `lastblockhash`, the post-state equal to the test's; and the difficulty formula against
//! every vector.
//!
//! The fixtures are `../shared/fixtures/ethereum-tests/*.tar.zst` (or `$LOUPE_ETHEREUM_TESTS`),
//! unpacked once under `target/ethereum-tests/`. The `blockchain-tests-blocks` suite and the
//! difficulty vectors run whole in CI, and `blockchain-tests-general-state` but for a few
//! tests that take minutes in a debug build ([`SLOW_IN_DEBUG`]); the whole suite runs with
//! `cargo nextest run --test consensus --run-ignored only` (README). Skips are listed with
//! their reason and counted: tests whose blocks do not form one chain (side chains that win by
//! total difficulty, which an archive that imports one chain does not follow), and the
//! withdrawn EIP-7610 collision tests. `LOUPE_CONSENSUS_ONLY=NAME` runs the tests whose names
//! contain NAME.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use alloy_consensus::{Block, Header, TxEnvelope};
use alloy_primitives::{Address, B256, Bytes, U256, keccak256};
use alloy_rlp::Decodable;
use loupe::import::{GenesisSource, InitOptions, init_with};
use loupe::storage::Database;
use revm::database::DatabaseRef;
use serde_json::{Value, json};

/// Where the suites' archives are.
fn archives() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_ETHEREUM_TESTS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/ethereum-tests"),
    };
    if dir.join("blockchain-tests-blocks.tar.zst").is_file() {
        return Some(dir);
    }
    let msg =
        format!("ethereum-tests fixtures not found at {}; set LOUPE_ETHEREUM_TESTS", dir.display());
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    assert!(!ci, "{msg}");
    eprintln!("note: skipping test: {msg}");
    None
}

/// Unpacks `archive` (a `.tar.zst` of the fixtures folder) once, under `target/`; returns the
/// folder. A marker file written last makes a half-unpacked folder be unpacked again.
fn unpacked(archive: &str) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = archives()?.join(archive);
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

fn hex_u64(v: &Value) -> u64 {
    let s = v.as_str().unwrap();
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Networks

/// The forks in order, with the geth `config` key that activates each.
const FORKS: [(&str, &str); 18] = [
    ("Frontier", ""),
    ("Homestead", "homesteadBlock"),
    ("EIP150", "eip150Block"),
    ("EIP158", "eip155Block,eip158Block"),
    ("Byzantium", "byzantiumBlock"),
    ("Constantinople", "constantinopleBlock"),
    ("ConstantinopleFix", "petersburgBlock"),
    ("Istanbul", "istanbulBlock"),
    ("MuirGlacier", "muirGlacierBlock"),
    ("Berlin", "berlinBlock"),
    ("London", "londonBlock"),
    ("ArrowGlacier", "arrowGlacierBlock"),
    ("GrayGlacier", "grayGlacierBlock"),
    ("Paris", "terminalTotalDifficulty"),
    ("Shanghai", "shanghaiTime"),
    ("Cancun", "cancunTime"),
    ("Prague", "pragueTime"),
    ("Osaka", "osakaTime"),
];

fn fork_index(name: &str) -> Option<usize> {
    let name = if name == "Merge" { "Paris" } else { name };
    FORKS.iter().position(|(n, _)| *n == name)
}

/// The geth-style `config` of a test `network` (geth's `tests/init.go` names): `X` has every
/// fork up to X from genesis; `AToBAt5` has A's forks from genesis and B's at block 5;
/// `AToBAtTime15k` B's at time 15,000; `ArrowGlacierToParisAtDiffC0000` the merge at total
/// difficulty 0xC0000; `HomesteadToDaoAt5` the DAO fork (supported) at block 5.
fn network_config(network: &str) -> Option<Value> {
    let mut c = serde_json::Map::new();
    c.insert("chainId".into(), json!(1));
    let set = |c: &mut serde_json::Map<String, Value>, upto: usize, at: Value| {
        for (_, keys) in &FORKS[1..=upto] {
            for key in keys.split(',') {
                if key == "terminalTotalDifficulty" {
                    c.insert(key.into(), json!(0));
                    c.insert("mergeNetsplitBlock".into(), json!(0));
                } else {
                    c.entry(key.to_string()).or_insert(at.clone());
                }
            }
        }
    };
    if network == "HomesteadToDaoAt5" {
        set(&mut c, fork_index("Homestead")?, json!(0));
        c.insert("daoForkBlock".into(), json!(5));
        c.insert("daoForkSupport".into(), json!(true));
        return Some(Value::Object(c));
    }
    if network == "ArrowGlacierToParisAtDiffC0000" {
        set(&mut c, fork_index("ArrowGlacier")?, json!(0));
        c.insert("terminalTotalDifficulty".into(), json!(0xC0000));
        return Some(Value::Object(c));
    }
    if let Some((from, rest)) = network.split_once("To") {
        let (to, at) = if let Some(to) = rest.strip_suffix("AtTime15k") {
            (to, json!(15_000))
        } else {
            (rest.strip_suffix("At5")?, json!(5))
        };
        let (a, b) = (fork_index(from)?, fork_index(to)?);
        set(&mut c, a, json!(0));
        // The forks between A and B (inclusive of B) at the transition.
        for (_, keys) in &FORKS[a + 1..=b] {
            for key in keys.split(',') {
                c.insert(key.into(), at.clone());
            }
        }
        return Some(Value::Object(c));
    }
    set(&mut c, fork_index(network)?, json!(0));
    Some(Value::Object(c))
}

// ---------------------------------------------------------------------------------------------
// One blockchain test

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Pass,
    Skip(&'static str),
    Fail(String),
}

/// Withdrawn EIP-7610 tests: a creation onto an address that has storage but no code and no
/// nonce. No mainnet account is in that state and execution-specs removed these tests in 2026.
const EIP7610: [&str; 6] = [
    "InitCollision",
    "create2collisionStorage",
    "RevertInCreateInInit",
    "dynamicAccountOverwriteEmpty",
    "collisionStorage",
    "CollisionToEmpty",
];

fn decode_block(rlp: &str) -> Result<Block<TxEnvelope>, String> {
    let bytes: Bytes = rlp.parse().map_err(|e| format!("rlp hex: {e}"))?;
    let mut slice = bytes.as_ref();
    let block = Block::<TxEnvelope>::decode(&mut slice).map_err(|e| e.to_string())?;
    if !slice.is_empty() {
        return Err(format!("{} trailing bytes", slice.len()));
    }
    Ok(block)
}

/// The genesis.json of a test: its genesis header's fields, `pre` as the allocation, and the
/// network's config.
fn genesis_json(test: &Value, config: Value) -> String {
    let g = &test["genesisBlockHeader"];
    let mut out = json!({
        "config": config,
        "nonce": g["nonce"],
        "timestamp": g["timestamp"],
        "extraData": g["extraData"],
        "gasLimit": g["gasLimit"],
        "difficulty": g["difficulty"],
        "mixHash": g["mixHash"],
        "coinbase": g["coinbase"],
        "number": "0x0",
        "parentHash": g["parentHash"],
        "alloc": test["pre"],
    });
    for (from, to) in [
        ("baseFeePerGas", "baseFeePerGas"),
        ("blobGasUsed", "blobGasUsed"),
        ("excessBlobGas", "excessBlobGas"),
    ] {
        if let Some(v) = g.get(from) {
            out[to] = v.clone();
        }
    }
    out.to_string()
}

/// The valid blocks' chain: `Err` when a valid block does not extend the one before it (a side
/// chain), so the test's blocks do not form one chain.
fn one_chain(test: &Value, genesis: B256) -> Result<(), ()> {
    let mut head = genesis;
    for b in test["blocks"].as_array().unwrap() {
        if b.get("expectException").is_some() {
            continue;
        }
        let Ok(block) = decode_block(b["rlp"].as_str().unwrap()) else { return Err(()) };
        if block.header.parent_hash != head {
            return Err(());
        }
        head = block.header.hash_slow();
    }
    Ok(())
}

/// For a network whose merge is at a total difficulty (`ArrowGlacierToParisAtDiffC0000`), the
/// first block whose parent's total difficulty reaches it, along the valid blocks.
fn merge_block(test: &Value, ttd: U256) -> Option<u64> {
    let g = &test["genesisBlockHeader"];
    let mut td: U256 = g["difficulty"].as_str()?.parse().ok()?;
    for b in test["blocks"].as_array()? {
        if b.get("expectException").is_some() {
            continue;
        }
        let block = decode_block(b["rlp"].as_str()?).ok()?;
        if td >= ttd {
            return Some(block.header.number);
        }
        td += block.header.difficulty;
    }
    None
}

fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() }
}

fn run_test(name: &str, test: &Value) -> Outcome {
    if std::env::var("LOUPE_CONSENSUS_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return Outcome::Skip("not chosen by LOUPE_CONSENSUS_ONLY");
    }
    if EIP7610.iter().any(|p| name.contains(p)) {
        return Outcome::Skip("EIP-7610 (withdrawn)");
    }
    let network = test["network"].as_str().unwrap_or_default();
    let Some(mut config) = network_config(network) else {
        return Outcome::Fail(format!("network {network} is not mapped"));
    };
    let genesis_hash: B256 = test["genesisBlockHeader"]["hash"].as_str().unwrap().parse().unwrap();
    if one_chain(test, genesis_hash).is_err() {
        return Outcome::Skip("side chains");
    }
    if config.get("mergeNetsplitBlock").is_none()
        && let Some(ttd) = config.get("terminalTotalDifficulty").and_then(Value::as_u64)
        && ttd > 0
    {
        let block = merge_block(test, U256::from(ttd)).unwrap_or(u64::MAX / 2);
        config["mergeNetsplitBlock"] = json!(block);
    }
    let dir =
        tempfile::Builder::new().prefix("loupe-consensus-").tempdir_in(scratch_dir()).unwrap();
    let db = Database::open(dir.path()).unwrap();
    let json = genesis_json(test, config);
    let options = InitOptions { foreign_chain_id: true, ..Default::default() };
    let spec = match init_with(&db, GenesisSource::Json(&json), options) {
        Ok((spec, _)) => spec,
        Err(e) => return Outcome::Fail(format!("genesis: {e}")),
    };
    if spec.genesis_hash() != genesis_hash {
        return Outcome::Fail(format!(
            "genesis hash {} is not the test's {genesis_hash}",
            spec.genesis_hash()
        ));
    }
    for (i, b) in test["blocks"].as_array().unwrap().iter().enumerate() {
        let expect = b.get("expectException").and_then(Value::as_str);
        let imported = decode_block(b["rlp"].as_str().unwrap()).and_then(|block| {
            loupe::import::import_block(&db, &spec, &block, false).map_err(|e| e.to_string())
        });
        match (imported, expect) {
            (Ok(_), None) | (Err(_), Some(_)) => {}
            (Ok(_), Some(why)) => {
                return Outcome::Fail(format!("block {i} was accepted; expected {why}"));
            }
            (Err(e), None) => return Outcome::Fail(format!("block {i} was refused: {e}")),
        }
    }
    let reader = db.begin_read().unwrap();
    let head = reader.head().unwrap().unwrap();
    let head_hash = reader.canonical_hash(head).unwrap().unwrap();
    let last: B256 = test["lastblockhash"].as_str().unwrap().parse().unwrap();
    if head_hash != last {
        return Outcome::Fail(format!("head {head_hash} (#{head}) is not lastblockhash {last}"));
    }
    let header: Header = reader.header(head).unwrap().unwrap();
    if let Some(hash) = test.get("postStateHash").and_then(Value::as_str) {
        let hash: B256 = hash.parse().unwrap();
        if header.state_root != hash {
            return Outcome::Fail(format!(
                "state root {} is not postStateHash {hash}",
                header.state_root
            ));
        }
        return Outcome::Pass;
    }
    match check_post_state(&reader, head, &header, &test["postState"]) {
        Ok(()) => Outcome::Pass,
        Err(e) => Outcome::Fail(e),
    }
}

/// The stored state at `head` holds every account of `post` as it is there, and the root of
/// `post` is the head's state root (so the state has nothing else either).
fn check_post_state(
    reader: &loupe::storage::Reader,
    head: u64,
    header: &Header,
    post: &Value,
) -> Result<(), String> {
    let alloc: BTreeMap<Address, alloy_genesis::GenesisAccount> =
        serde_json::from_value(post.clone()).map_err(|e| format!("postState: {e}"))?;
    let root = alloy_trie::root::state_root_ref_unhashed(&alloc);
    if root != header.state_root {
        return Err(format!(
            "postState root {root} is not the head's state root {}",
            header.state_root
        ));
    }
    let state = reader.state_at(head).map_err(|e| e.to_string())?;
    for (address, account) in &alloc {
        let stored = state.basic_ref(*address).map_err(|e| e.to_string())?.unwrap_or_default();
        let code = account.code.clone().unwrap_or_default();
        let want = (account.balance, account.nonce.unwrap_or_default(), keccak256(&code));
        let code_hash = if code.is_empty() { alloy_primitives::KECCAK256_EMPTY } else { want.2 };
        if (stored.balance, stored.nonce, stored.code_hash) != (want.0, want.1, code_hash) {
            return Err(format!(
                "account {address}: stored balance {} nonce {} code {}; postState {} {} {code_hash}",
                stored.balance, stored.nonce, stored.code_hash, want.0, want.1
            ));
        }
        for (slot, value) in account.storage.iter().flatten() {
            let got = state
                .storage_ref(*address, U256::from_be_bytes(slot.0))
                .map_err(|e| e.to_string())?;
            if got != U256::from_be_bytes(value.0) {
                return Err(format!(
                    "account {address} slot {slot}: stored {got}, postState {value}"
                ));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Suites

#[derive(Default)]
struct Tally {
    pass: usize,
    /// The slowest tests: (seconds, name).
    slowest: Vec<(f64, String)>,
    skipped: BTreeMap<&'static str, Vec<String>>,
    failed: Vec<(String, String)>,
}

/// Runs every test of `files` on all cores but those whose names contain one of `left_out`;
/// prints the counts and lists skips and failures.
fn run_files(suite: &str, files: &[PathBuf], left_out: &[&str]) -> Tally {
    let tests: Vec<(String, PathBuf)> = files
        .iter()
        .flat_map(|f| {
            let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            v.as_object().unwrap().keys().map(|k| (k.clone(), f.clone())).collect::<Vec<_>>()
        })
        .collect();
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut cached: Option<(PathBuf, Value)> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((name, file)) = tests.get(i) else { break };
                    if cached.as_ref().is_none_or(|(f, _)| f != file) {
                        let v = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
                        cached = Some((file.clone(), v));
                    }
                    let test = &cached.as_ref().unwrap().1[name];
                    if left_out.iter().any(|p| name.contains(p)) {
                        let mut t = tally.lock().unwrap();
                        t.skipped
                            .entry("slow in a debug build: run by the full suite")
                            .or_default()
                            .push(name.clone());
                        continue;
                    }
                    let began = std::time::Instant::now();
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_test(name, test)
                    }))
                    .unwrap_or_else(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        Outcome::Fail(format!("panicked: {msg}"))
                    });
                    let mut t = tally.lock().unwrap();
                    t.slowest.push((began.elapsed().as_secs_f64(), name.clone()));
                    t.slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
                    t.slowest.truncate(40);
                    match outcome {
                        Outcome::Pass => t.pass += 1,
                        Outcome::Skip(why) => t.skipped.entry(why).or_default().push(name.clone()),
                        Outcome::Fail(e) => {
                            t.failed.push((format!("{} :: {name}", file.display()), e))
                        }
                    }
                }
            });
        }
    });
    let t = tally.into_inner().unwrap();
    let skipped: usize = t.skipped.values().map(Vec::len).sum();
    println!(
        "{suite}: {} tests: {} passed, {} failed, {skipped} skipped in {:.1}s",
        tests.len(),
        t.pass,
        t.failed.len(),
        started.elapsed().as_secs_f64()
    );
    for (secs, name) in &t.slowest {
        println!("  slow: {secs:.2}s {name}");
    }
    for (why, names) in &t.skipped {
        println!("  skipped ({why}): {}", names.len());
        for n in names {
            println!("    {n}");
        }
    }
    for (name, e) in &t.failed {
        println!("  FAILED {name}: {e}");
    }
    t
}

fn suite_files(archive: &str, sub: &str) -> Option<Vec<PathBuf>> {
    let dir = unpacked(archive)?.join(sub);
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    assert!(!files.is_empty(), "no tests under {}", dir.display());
    Some(files)
}

/// `BlockchainTests/{ValidBlocks,InvalidBlocks,TransitionTests}`: every test.
#[test]
fn blockchain_tests_blocks() {
    let Some(files) = suite_files("blockchain-tests-blocks.tar.zst", "BlockchainTests") else {
        return;
    };
    let t = run_files("blockchain-tests-blocks", &files, &[]);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// Tests that take seconds to minutes each in a debug build (the EVM's loops at opt-level 2
/// with debug assertions: `loopMul_d1g0v0` alone takes over four minutes), left to the full
/// run ([`blockchain_tests_general_state`]) so that CI's run stays short.
const SLOW_IN_DEBUG: [&str; 4] =
    ["loopMul", "loopExp", "CALLBlake2f_MaxRounds", "static_Call50000_sha256"];

/// `BlockchainTests/GeneralStateTests`: every test but [`SLOW_IN_DEBUG`]'s.
#[test]
fn blockchain_tests_general_state_but_the_slowest() {
    let Some(files) =
        suite_files("blockchain-tests-general-state.tar.zst", "BlockchainTests/GeneralStateTests")
    else {
        return;
    };
    let t = run_files(
        "blockchain-tests-general-state (but the slowest in a debug build)",
        &files,
        &SLOW_IN_DEBUG,
    );
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// `BlockchainTests/GeneralStateTests`: every test (slow; `--run-ignored only`).
#[test]
#[ignore = "the whole general-state suite: about 14k tests"]
fn blockchain_tests_general_state() {
    // Not in CI: the whole suite, the slowest tests included (about 6 minutes on 2 cores).
    let Some(files) =
        suite_files("blockchain-tests-general-state.tar.zst", "BlockchainTests/GeneralStateTests")
    else {
        return;
    };
    let t = run_files("blockchain-tests-general-state", &files, &[]);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// `DifficultyTests`: the difficulty of every vector, from its parent, by `chain::difficulty`.
#[test]
fn difficulty_tests() {
    let Some(files) = suite_files("difficulty-transaction-tests.tar.zst", "DifficultyTests") else {
        return;
    };
    let (mut pass, mut failed) = (0usize, Vec::new());
    for f in &files {
        let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        for (_, t) in v.as_object().unwrap() {
            for (network, cases) in t.as_object().unwrap() {
                if network == "_info" {
                    continue;
                }
                // "Berlin" vectors are EIP-2384's (Muir Glacier's delay).
                let config = network_config(network).unwrap_or_else(|| panic!("{network}"));
                let spec = loupe::chain::ChainSpec::from_genesis_json(
                    &json!({"config": config, "difficulty": "0x1", "gasLimit": "0x1000000", "alloc": {}})
                        .to_string(),
                )
                .unwrap();
                for (name, c) in cases.as_object().unwrap() {
                    let number = hex_u64(&c["currentBlockNumber"]);
                    let parent = loupe::chain::DifficultyParent {
                        number: number - 1,
                        timestamp: hex_u64(&c["parentTimestamp"]),
                        difficulty: c["parentDifficulty"].as_str().unwrap().parse().unwrap(),
                        has_ommers: hex_u64(&c["parentUncles"]) != 0,
                    };
                    let want: U256 = c["currentDifficulty"].as_str().unwrap().parse().unwrap();
                    let got =
                        loupe::chain::difficulty(&spec, hex_u64(&c["currentTimestamp"]), &parent);
                    if got == want {
                        pass += 1;
                    } else {
                        failed.push(format!(
                            "{}/{network}/{name}: got {got}, want {want}",
                            f.display()
                        ));
                    }
                }
            }
        }
    }
    println!(
        "DifficultyTests: {} vectors: {pass} passed, {} failed",
        pass + failed.len(),
        failed.len()
    );
    for f in failed.iter().take(20) {
        println!("  FAILED {f}");
    }
    assert!(
        failed.is_empty() && pass > 10_000,
        "{} failed of {}",
        failed.len(),
        pass + failed.len()
    );
}
