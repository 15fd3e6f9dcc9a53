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

/// Where an archive of the suites is: ethereum/tests' in `$LOUPE_ETHEREUM_TESTS` (default
/// `../shared/fixtures/ethereum-tests`), execution-specs' in `$LOUPE_EEST` (default
/// `../shared/fixtures/eest`).
fn archive_path(archive: &str) -> Option<PathBuf> {
    let (var, default) = if archive == EEST_ARCHIVE {
        ("LOUPE_EEST", "../shared/fixtures/eest")
    } else {
        ("LOUPE_ETHEREUM_TESTS", "../shared/fixtures/ethereum-tests")
    };
    let dir = match std::env::var_os(var) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join(default),
    };
    if dir.join(archive).is_file() {
        return Some(dir.join(archive));
    }
    let msg = format!("consensus fixture {archive} not found in {}; set {var}", dir.display());
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
    let src = archive_path(archive)?;
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

/// execution-specs' blockchain tests, filled at Osaka and Amsterdam (`../shared/fixtures/eest`).
const EEST_ARCHIVE: &str = "eest-blockchain-tests.tar.zst";

/// The forks in order, with the geth `config` key that activates each.
const FORKS: [(&str, &str); 24] = [
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
    ("BPO1", "bpo1Time"),
    ("BPO2", "bpo2Time"),
    ("BPO3", "bpo3Time"),
    ("BPO4", "bpo4Time"),
    ("BPO5", "bpo5Time"),
    ("Amsterdam", "amsterdamTime"),
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

/// execution-specs' fixtures carry their chain id and blob schedule (`config`, in hex): they
/// replace the defaults, under geth's keys (`cancun`, …, `bpo2`) and alloy-genesis's spelling of
/// Amsterdam's (`Amsterdam`).
fn with_fixture_config(config: &mut Value, given: &Value) {
    if let Some(id) = given.get("chainid") {
        config["chainId"] = json!(hex_u64(id));
    }
    let Some(schedule) = given.get("blobSchedule").and_then(Value::as_object) else { return };
    let mut out = serde_json::Map::new();
    for (fork, p) in schedule {
        let key = if fork == "Amsterdam" { fork.clone() } else { fork.to_lowercase() };
        out.insert(
            key,
            json!({
                "target": hex_u64(&p["target"]),
                "max": hex_u64(&p["max"]),
                "baseFeeUpdateFraction": hex_u64(&p["baseFeeUpdateFraction"]),
            }),
        );
    }
    config["blobSchedule"] = Value::Object(out);
}

// ---------------------------------------------------------------------------------------------
// One blockchain test

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Pass,
    Skip(&'static str),
    Fail(String),
    /// An Amsterdam block the suite's version of the fork takes and revm's refuses: what the
    /// block gives without EIP-8282 (the test stops there).
    Differs(Diagnosis),
}

/// What an Amsterdam block executed by the second path ([`without_eip8282`]) gives against the
/// suite's block, bal-devnet-4, which has no EIP-8282.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Diagnosis {
    /// Gas used, receipts root, logs bloom and the block access list (but for EIP-8282's two
    /// predeploys, which revm's fork calls) are the suite's: the block access list equals the
    /// fixture's `blockAccessList` entry for entry, and hashes to the header's.
    AsTheSuite,
    /// Gas used differs (EIP-2780's intrinsic gas, EIP-8038's state access costs, EIP-8037's
    /// cost per state byte: revm's devnet-8 values against bal-devnet-4's). `shape`: whether the
    /// block access list still names the same accounts, slots, reads, nonce and code changes,
    /// and balance changes at the same indices (the values gas moves aside).
    Gas { header: u64, revm: u64, shape: bool, outcome: String },
    /// revm refuses a transaction the suite took (its intrinsic or floor gas, EIP-2780).
    Refused(String),
    /// Gas used is the suite's and the receipts are not.
    Receipts(String),
    /// Gas and receipts are the suite's and the block access list is not: an EIP-7928 rule.
    AccessList(String),
}

impl Diagnosis {
    fn reason(&self) -> String {
        match self {
            Self::AsTheSuite => "as the suite's".into(),
            Self::Gas { header, revm, outcome, .. } if header == revm => {
                format!("gas used {header} as the suite's, but {outcome}")
            }
            Self::Gas { header, revm, .. } => {
                format!("gas used mismatch: expected {header}, got {revm}")
            }
            Self::Refused(e) => e.clone(),
            Self::Receipts(e) => format!("receipts: {e}"),
            Self::AccessList(e) => format!("block access list: {e}"),
        }
    }

    /// The difference of the fork's versions it is listed under.
    fn listed_under(&self) -> &'static str {
        match self {
            Self::AsTheSuite => {
                "EIP-8282 only: the block is the suite's (gas, receipts, block access list) \
                 but for the two builder-request predeploys revm's fork calls after every block, \
                 which bal-devnet-4 has not (its pre-state lacks their code)"
            }
            Self::Gas { shape: true, .. } => {
                "EIP-2780/EIP-8038/EIP-8037 gas: gas used differs; the block access list has the \
                 suite's accounts, slots and change indices"
            }
            Self::Gas { shape: false, .. } => {
                "EIP-2780/EIP-8038/EIP-8037 gas: gas used differs, and with it what the \
                 transactions reach (the block access list's shape)"
            }
            Self::Refused(_) => {
                "EIP-2780 intrinsic gas: revm refuses a transaction whose gas limit bal-devnet-4's \
                 intrinsic or floor gas accepts"
            }
            Self::Receipts(e) if e.contains("cumulative gas used") => {
                "EIP-8037 receipt gas: the block's gas is the suite's, a receipt's is not (the \
                 state gas drawn from the reservoir above the transaction gas cap)"
            }
            Self::Receipts(_) => "receipts differ with the suite's gas",
            Self::AccessList(_) => "EIP-7928: the block access list differs with the suite's gas",
        }
    }
}

/// The first transaction that failed having used its whole gas limit.
fn ran_out_of_gas(
    receipts: &[alloy_consensus::ReceiptEnvelope],
    block: &Block<TxEnvelope>,
) -> Option<usize> {
    use alloy_consensus::Transaction;
    let mut before = 0;
    receipts.iter().zip(&block.body.transactions).position(|(r, tx)| {
        let used = r.cumulative_gas_used() - before;
        before = r.cumulative_gas_used();
        !r.status() && used == tx.gas_limit()
    })
}

fn opt_hash(h: Option<B256>) -> String {
    h.map_or_else(|| "none".into(), |h| h.to_string())
}

/// Invalid blocks loupe refuses by another rule than the suite names, each with why: counted
/// and printed with the refusals.
const OTHER_RULE: [(&str, &str); 1] = [(
    "test_system_contract_errors[fork_Osaka-blockchain_test-system_contract_out_of_gas",
    "the suite's EIP-7002/7251 contract runs out of its 30,000,000 system-call gas and the \
     block is invalid; revm 43 completes the call, so the block is refused by its state root",
)];

/// What loupe's reason for refusing a block says, for each `expectException` of the suites
/// (several alternatives joined by `|` in the suite): one of these words.
fn reason_words(expect: &str) -> &'static [&'static str] {
    match expect.split('.').next_back().unwrap_or_default() {
        "INTRINSIC_GAS_TOO_LOW" => &["call gas cost", "intrinsic", "gas floor"],
        "INTRINSIC_GAS_BELOW_FLOOR_GAS_COST" => &["gas floor"],
        "INVALID_REQUESTS" => &["requests hash"],
        "GAS_LIMIT_EXCEEDS_MAXIMUM" => &["greater than the cap"],
        "INVALID_DEPOSIT_EVENT_LAYOUT" => &["deposit requests", "requests hash"],
        "SENDER_NOT_EOA" => &["senders with deployed code"],
        "TYPE_3_TX_BLOB_COUNT_EXCEEDED" => &["too many blobs"],
        "TYPE_3_TX_MAX_BLOB_GAS_ALLOWANCE_EXCEEDED" => &["blob gas"],
        "SYSTEM_CONTRACT_CALL_FAILED" => &["contract call", "system contract rule"],
        "RLP_BLOCK_LIMIT_EXCEEDED" => &["block size rule"],
        // A type-4 transaction has no creation form: its RLP does not decode.
        "TYPE_4_TX_CONTRACT_CREATION" => &["unexpected length"],
        "TYPE_4_EMPTY_AUTHORIZATION_LIST" => &["empty authorization list"],
        "PRIORITY_GREATER_THAN_MAX_FEE_PER_GAS" => &["priority fee is greater than max fee"],
        "NONCE_MISMATCH_TOO_LOW" => &["too low"],
        "INSUFFICIENT_MAX_FEE_PER_GAS" => &["less than basefee"],
        "GAS_ALLOWANCE_EXCEEDED" | "GAS_USED_OVERFLOW" => &["available gas", "gas used"],
        "INITCODE_SIZE_EXCEEDED" => &["initcode size"],
        "INVALID_BLOCK_ACCESS_LIST" | "INVALID_BAL_HASH" | "INCORRECT_BLOCK_FORMAT" => {
            &["block access list"]
        }
        "BLOCK_ACCESS_LIST_GAS_LIMIT_EXCEEDED" => &["block access list rule"],
        _ => &[],
    }
}

/// Whether loupe's `reason` names the rule of one of the suite's alternatives in `expect`.
fn names_the_rule(expect: &str, reason: &str) -> bool {
    expect.split('|').any(|e| reason_words(e).iter().any(|w| reason.contains(w)))
}

/// EIP-8282's predeploys, which revm 43's Amsterdam calls after every block.
const EIP8282: [Address; 2] = [
    alloy_eips::eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS,
    alloy_eips::eip8282::BUILDER_EXIT_CONTRACT_ADDRESS,
];

/// The second path for an Amsterdam block that import refused for want of EIP-8282's
/// predeploys: the block executed on the stored head's state by `loupe::evm::execute_block`,
/// compared with the fixture's header, `receipts` and `blockAccessList` — the two predeploys'
/// entries (empty reads of accounts without code) taken out of the list loupe built.
fn without_eip8282(
    db: &Database,
    spec: &loupe::chain::ChainSpec,
    block: &Block<TxEnvelope>,
    fixture: &Value,
) -> Result<Diagnosis, String> {
    use alloy_consensus::transaction::SignerRecoverable;
    let reader = db.begin_read().map_err(|e| e.to_string())?;
    let head = reader.head().map_err(|e| e.to_string())?.ok_or("no head")?;
    let state = reader.state_at(head).map_err(|e| e.to_string())?;
    let senders: Vec<Address> = block
        .body
        .transactions
        .iter()
        .map(|tx| tx.recover_signer().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let outcome = match loupe::evm::execute_block(spec, state, block, &senders, |_| {
        Ok::<B256, String>(B256::ZERO)
    }) {
        Ok(o) => o,
        Err(e) => return Ok(Diagnosis::Refused(e.to_string())),
    };
    let mut built = outcome.access_list.clone().ok_or("no block access list was built")?;
    built.retain(|a| {
        !(EIP8282.contains(&a.address)
            && a.storage_changes.is_empty()
            && a.storage_reads.is_empty()
            && a.balance_changes.is_empty()
            && a.nonce_changes.is_empty()
            && a.code_changes.is_empty())
    });
    // A valid block's fixture carries the list its header commits to; an invalid one none.
    let suite: Option<Vec<alloy_eip7928::AccountChanges>> = match &fixture["blockAccessList"] {
        Value::Null => None,
        list => Some(
            serde_json::from_value(list.clone())
                .map_err(|e| format!("the fixture's blockAccessList: {e}"))?,
        ),
    };
    let header = &block.header;
    // The fixture's list is the one its header commits to (a check of the hash's encoding).
    if let Some(suite) = &suite
        && header.block_access_list_hash
            != Some(alloy_eip7928::compute_block_access_list_hash(suite))
    {
        return Err("the fixture's blockAccessList does not hash to its header's".into());
    }
    if outcome.gas_used != header.gas_used {
        let shape = |l: &[alloy_eip7928::AccountChanges]| {
            l.iter()
                .map(|a| {
                    let mut a = a.clone();
                    for c in &mut a.balance_changes {
                        c.post_balance = U256::ZERO;
                    }
                    a
                })
                .collect::<Vec<_>>()
        };
        return Ok(Diagnosis::Gas {
            header: header.gas_used,
            revm: outcome.gas_used,
            shape: suite.as_ref().is_some_and(|suite| shape(&built) == shape(suite)),
            outcome: String::new(),
        });
    }
    let receipts_root = alloy_consensus::proofs::calculate_receipt_root(&outcome.receipts);
    if receipts_root != header.receipts_root {
        let theirs = fixture["receipts"].as_array().cloned().unwrap_or_default();
        for (i, (ours, theirs)) in outcome.receipts.iter().zip(&theirs).enumerate() {
            let succeeded = theirs["status"].as_bool().unwrap_or(true);
            if ours.status() != succeeded {
                return Ok(Diagnosis::Gas {
                    header: header.gas_used,
                    revm: outcome.gas_used,
                    shape: false,
                    outcome: format!(
                        "transaction {i} {} where the suite's {}",
                        if ours.status() { "succeeded" } else { "failed" },
                        if succeeded { "succeeded" } else { "failed" }
                    ),
                });
            }
            let cumulative = hex_u64(&theirs["cumulativeGasUsed"]);
            if ours.cumulative_gas_used() != cumulative {
                return Ok(Diagnosis::Receipts(format!(
                    "receipt {i}: cumulative gas used {}, the suite's {cumulative}",
                    ours.cumulative_gas_used()
                )));
            }
            let logs: Vec<alloy_primitives::Log> =
                serde_json::from_value(theirs["logs"].clone()).map_err(|e| e.to_string())?;
            if ours.logs() != logs.as_slice() {
                return Ok(Diagnosis::Receipts(format!(
                    "receipt {i}: logs {:?}, the suite's {:?}",
                    ours.logs(),
                    logs
                )));
            }
        }
        if let Some(i) = ran_out_of_gas(&outcome.receipts, block) {
            return Ok(Diagnosis::Gas {
                header: header.gas_used,
                revm: outcome.gas_used,
                shape: false,
                outcome: format!("transaction {i} ran out of gas (its whole limit)"),
            });
        }
        return Ok(Diagnosis::Receipts(format!(
            "root {receipts_root}, the header's {}",
            header.receipts_root
        )));
    }
    let items = alloy_eip7928::total_bal_items(&built);
    if items * alloy_eip7928::ITEM_COST as u64 > header.gas_limit {
        return Ok(Diagnosis::AccessList(format!(
            "block access list rule: {items} items, more than the gas limit {} pays for",
            header.gas_limit
        )));
    }
    let built_hash = alloy_eip7928::compute_block_access_list_hash(&built);
    let Some(suite) = suite else {
        return Ok(if header.block_access_list_hash == Some(built_hash) {
            Diagnosis::AsTheSuite
        } else {
            Diagnosis::AccessList(format!(
                "hash {built_hash}, the header's {}",
                opt_hash(header.block_access_list_hash)
            ))
        });
    };
    if built != suite {
        let diff = alloy_eip7928::first_bal_divergence(&suite, &built);
        // A transaction that ran out of gas in both versions (its whole limit used) may have
        // run out at another point under the other gas schedule, and reached other accounts.
        if let Some(i) = ran_out_of_gas(&outcome.receipts, block) {
            return Ok(Diagnosis::Gas {
                header: header.gas_used,
                revm: outcome.gas_used,
                shape: false,
                outcome: format!(
                    "transaction {i} ran out of gas in both; what it reached differs: {diff:?}"
                ),
            });
        }
        return Ok(Diagnosis::AccessList(format!("{diff:?}")));
    }
    Ok(Diagnosis::AsTheSuite)
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
        ("slotNumber", "slotNumber"),
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

/// One invalid block's refusal: the suite's `expectException` and loupe's reason.
type Refusal = (String, String);

/// `rules`: an invalid block must be refused by the rule its `expectException` names
/// ([`names_the_rule`]; execution-specs' suites), not only refused (ethereum/tests, whose
/// exception names are older).
fn run_test(name: &str, test: &Value, rules: bool, refusals: &mut Vec<Refusal>) -> Outcome {
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
    if let Some(given) = test.get("config") {
        with_fixture_config(&mut config, given);
    }
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
        let decoded = decode_block(b["rlp"].as_str().unwrap());
        let imported = decoded.as_ref().map_err(Clone::clone).and_then(|block| {
            loupe::import::import_block(&db, &spec, block, false).map_err(|e| e.to_string())
        });
        // An Amsterdam block refused for want of EIP-8282's predeploys (which bal-devnet-4 has
        // not): what the rest of the block gives, by the second path.
        let eip8282 = |e: &str| e.contains("(EIP-8282)");
        match (imported, expect) {
            (Ok(_), None) => {}
            (Err(e), Some(why)) if eip8282(&e) => {
                let block = decoded.as_ref().unwrap();
                let reason = match without_eip8282(&db, &spec, block, b) {
                    Ok(Diagnosis::AsTheSuite) => {
                        return Outcome::Fail(format!(
                            "block {i}: but for EIP-8282 it is the suite's valid block; expected {why}"
                        ));
                    }
                    Ok(d @ Diagnosis::Gas { .. }) => {
                        // The suite's gas schedule is not revm's: the rule the block breaks
                        // under revm's may be another.
                        refusals.push((
                            why.to_string(),
                            format!("{e}; without EIP-8282: {}", d.reason()),
                        ));
                        continue;
                    }
                    Ok(other) => other.reason(),
                    Err(e) => e,
                };
                if !names_the_rule(why, &reason) {
                    return Outcome::Fail(format!(
                        "block {i} is refused without EIP-8282 for another rule than {why}: {reason}"
                    ));
                }
                refusals.push((why.to_string(), format!("{e}; without EIP-8282: {reason}")));
            }
            (Err(e), Some(why)) => {
                if OTHER_RULE.iter().any(|(n, _)| name.contains(n)) {
                    refusals.push((why.to_string(), format!("{e} (listed: another rule)")));
                    continue;
                }
                if rules && !names_the_rule(why, &e) {
                    return Outcome::Fail(format!(
                        "block {i} was refused for another rule than {why}: {e}"
                    ));
                }
                refusals.push((why.to_string(), e));
            }
            (Ok(_), Some(why)) => {
                return Outcome::Fail(format!("block {i} was accepted; expected {why}"));
            }
            (Err(e), None) if eip8282(&e) => {
                let block = decoded.as_ref().unwrap();
                return match without_eip8282(&db, &spec, block, b) {
                    Ok(d) => Outcome::Differs(d),
                    Err(e) => Outcome::Fail(format!("block {i}: second path: {e}")),
                };
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
    /// Every invalid block refused: (test, the suite's `expectException`, loupe's reason).
    refused: Vec<(String, String, String)>,
    /// Amsterdam tests whose versions of the fork differ, by the difference.
    differ: BTreeMap<&'static str, Vec<(String, String)>>,
}

/// Runs every test of `files` on all cores but those whose names contain one of `left_out`
/// (`rules` as for [`run_test`]);
/// prints the counts and lists skips and failures.
fn run_files(suite: &str, files: &[PathBuf], left_out: &[&str], rules: bool) -> Tally {
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
                    let mut refusals = Vec::new();
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_test(name, test, rules, &mut refusals)
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
                    t.refused.extend(refusals.into_iter().map(|(e, r)| (name.clone(), e, r)));
                    t.slowest.push((began.elapsed().as_secs_f64(), name.clone()));
                    t.slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
                    t.slowest.truncate(40);
                    match outcome {
                        Outcome::Pass => t.pass += 1,
                        Outcome::Skip(why) => t.skipped.entry(why).or_default().push(name.clone()),
                        Outcome::Differs(d) => t
                            .differ
                            .entry(d.listed_under())
                            .or_default()
                            .push((name.clone(), d.reason())),
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
    let differ: usize = t.differ.values().map(Vec::len).sum();
    println!(
        "{suite}: {} tests: {} passed, {} failed, {skipped} skipped, {differ} listed under a \
         difference of the fork's versions, in {:.1}s",
        tests.len(),
        t.pass,
        t.failed.len(),
        started.elapsed().as_secs_f64()
    );
    for (why, names) in &t.differ {
        println!("  listed ({why}): {}", names.len());
        for (n, reason) in names {
            println!("    {n}: {reason}");
        }
    }
    for (secs, name) in &t.slowest {
        println!("  slow: {secs:.2}s {name}");
    }
    for (why, names) in &t.skipped {
        println!("  skipped ({why}): {}", names.len());
        for n in names {
            println!("    {n}");
        }
    }
    if !t.refused.is_empty() {
        println!(
            "  invalid blocks refused: {} (the suite's exception, then loupe's reason)",
            t.refused.len()
        );
        for (name, expected, reason) in &t.refused {
            println!("    {name}\n      expected {expected}\n      loupe:   {reason}");
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
    let t = run_files("blockchain-tests-blocks", &files, &[], false);
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
        false,
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
    let t = run_files("blockchain-tests-general-state", &files, &[], false);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// execution-specs' `tests/osaka`, filled at Osaka: every test.
#[test]
fn eest_osaka() {
    let Some(files) = suite_files(EEST_ARCHIVE, "osaka/blockchain_tests") else { return };
    let t = run_files("eest osaka (at Osaka)", &files, &[], true);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// execution-specs' `tests/prague`, filled at Osaka: every test.
#[test]
fn eest_prague_at_osaka() {
    let Some(files) = suite_files(EEST_ARCHIVE, "prague_at_osaka/blockchain_tests") else {
        return;
    };
    let t = run_files("eest prague (at Osaka)", &files, &[], true);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// execution-specs' `tests/amsterdam`, filled at Amsterdam (bal-devnet-4).
#[test]
fn eest_amsterdam() {
    let Some(files) = suite_files(EEST_ARCHIVE, "amsterdam/blockchain_tests") else { return };
    let t = run_files("eest amsterdam (bal-devnet-4)", &files, &[], true);
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
