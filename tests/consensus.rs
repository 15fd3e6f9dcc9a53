//! The Ethereum consensus tests (ethereum/tests `BlockchainTests` and `DifficultyTests`, and
//! execution-specs' blockchain tests: the suites every execution client runs) against loupe's
//! import, in process: every valid block accepted, every invalid block refused with the chain
//! going on from its parent, the head equal to `lastblockhash`, the post-state equal to the
//! test's; and the difficulty formula against every vector. `tests/consensus_cli.rs` runs the
//! same suites through the binary; what both share (the archives, a test's genesis, the rules
//! an invalid block is refused by, the runner) is in `tests/support/consensus/`.
//!
//! The fixtures are `../shared/fixtures/ethereum-tests/*.tar.zst` (or `$LOUPE_ETHEREUM_TESTS`)
//! and `../shared/fixtures/eest/` (or `$LOUPE_EEST`), unpacked once under
//! `target/ethereum-tests/`. The `blockchain-tests-blocks` suite, execution-specs' suites and
//! the difficulty vectors run whole in CI, and `blockchain-tests-general-state` but for a few
//! tests that take minutes in a debug build ([`SLOW_IN_DEBUG`]); the whole suite runs with
//! `cargo nextest run --test suite -E 'test(/^consensus::/)' --run-ignored only` (README). Skips are listed with
//! their reason and counted: tests whose blocks do not form one chain (side chains that win by
//! total difficulty, which an archive that imports one chain does not follow), and the
//! withdrawn EIP-7610 collision tests. `LOUPE_CONSENSUS_ONLY=NAME` runs the tests whose names
//! contain NAME.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use alloy_consensus::{Block, Header, TxEnvelope};
use alloy_primitives::{Address, B256, U256, keccak256};
use loupe::import::{GenesisSource, InitOptions, init_with};
use loupe::storage::Database;
use revm::database::DatabaseRef;
use serde_json::{Value, json};

#[path = "support/consensus/mod.rs"]
mod consensus_suite;
#[path = "support/witness.rs"]
mod witness_trip;

use consensus_suite::fixtures::{
    BLOCKS_ARCHIVE, DIFFICULTY_ARCHIVE, EEST_ARCHIVE, GENERAL_STATE_ARCHIVE, every_nth,
    suite_files, tests_in,
};
use consensus_suite::genesis::{Setup, decode_block, hex_u64, network_config, setup};
use consensus_suite::rules::{Refusal, names_the_rule};
use consensus_suite::runner::{Outcome, Tally, run_tests, scratch_dir};

// ---------------------------------------------------------------------------------------------
// One blockchain test

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

impl From<Diagnosis> for Outcome {
    fn from(d: Diagnosis) -> Self {
        Self::Differs { under: d.listed_under(), reason: d.reason() }
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

/// `rules`: an invalid block must be refused by the rule its `expectException` names
/// ([`names_the_rule`]; execution-specs' suites), not only refused (ethereum/tests, whose
/// exception names are older).
fn run_test(name: &str, test: &Value, rules: bool, refusals: &mut Vec<Refusal>) -> Outcome {
    run_test_with(name, test, rules, refusals, false)
}

/// [`run_test`]; with `witnesses`, each block of the test's chain then also makes the round trip
/// of its archive witness (`support/witness.rs`): re-executed statelessly, every node needed.
fn run_test_with(
    name: &str,
    test: &Value,
    rules: bool,
    refusals: &mut Vec<Refusal>,
    witnesses: bool,
) -> Outcome {
    let Setup { genesis: json, genesis_hash } = match setup(name, test) {
        Ok(s) => s,
        Err(u) => return u.into(),
    };
    let dir =
        tempfile::Builder::new().prefix("loupe-consensus-").tempdir_in(scratch_dir()).unwrap();
    let db = std::sync::Arc::new(Database::open(dir.path()).unwrap());
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
                    Ok(d) => d.into(),
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
    if witnesses {
        for n in 1..=head {
            if let Err(e) = witness_trip::round_trip(&db, &spec, n, true) {
                return Outcome::Fail(format!("witness: {e}"));
            }
            if reader.transaction_count(n).unwrap().unwrap_or(0) > 0
                && let Err(e) = witness_trip::traces_match(&db, &spec, n, true)
            {
                return Outcome::Fail(format!("witness traces: {e}"));
            }
        }
    }
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

/// Runs every test of `files` in process on all cores but those whose names contain one of
/// `left_out` (`rules` as for [`run_test`]); prints the counts and lists skips and failures.
fn run_files(suite: &str, files: &[std::path::PathBuf], left_out: &[&str], rules: bool) -> Tally {
    run_tests(suite, &tests_in(files), left_out, |name, test, refusals| {
        run_test(name, test, rules, refusals)
    })
}

/// `BlockchainTests/{ValidBlocks,InvalidBlocks,TransitionTests}`: every test.
#[test]
fn blockchain_tests_blocks() {
    let Some(files) = suite_files(BLOCKS_ARCHIVE, "BlockchainTests") else {
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
    let Some(files) = suite_files(GENERAL_STATE_ARCHIVE, "BlockchainTests/GeneralStateTests")
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
    let Some(files) = suite_files(GENERAL_STATE_ARCHIVE, "BlockchainTests/GeneralStateTests")
    else {
        return;
    };
    let t = run_files("blockchain-tests-general-state", &files, &[], false);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// Every block of the valid chains of every `nth` test of `tests/osaka` and `tests/prague` at
/// Osaka, and of every `2 * nth` of `BlockchainTests/ValidBlocks`: the archive's witness of it
/// re-executes statelessly to the header's roots and the stored receipts, and holds no node the
/// run does without; the block's traces from an anchored datadir built from the witness are the
/// archive's, byte for byte.
fn witnesses_of_valid_chains(nth: usize) -> Tally {
    let mut tests = Vec::new();
    for (archive, sub, nth) in [
        (EEST_ARCHIVE, "osaka/blockchain_tests", nth),
        (EEST_ARCHIVE, "prague_at_osaka/blockchain_tests", nth),
        (BLOCKS_ARCHIVE, "BlockchainTests/ValidBlocks", 2 * nth),
    ] {
        let Some(files) = suite_files(archive, sub) else { return Tally::default() };
        tests.extend(every_nth(tests_in(&files), nth));
    }
    run_tests("witnesses of valid chains", &tests, &[], |name, test, refusals| {
        run_test_with(name, test, false, refusals, true)
    })
}

/// [`witnesses_of_valid_chains`] for every 4th test (786 chains; about 15 s on 2 cores).
#[test]
fn witnesses_of_the_suites_valid_chains() {
    let t = witnesses_of_valid_chains(4);
    assert!(t.failed.is_empty(), "{} failed", t.failed.len());
}

/// [`witnesses_of_valid_chains`] for every test (`--run-ignored only`).
#[test]
#[ignore = "every valid chain's witnesses: the CI run takes every 4th"]
fn witnesses_of_every_valid_chain() {
    let t = witnesses_of_valid_chains(1);
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
    let Some(files) = suite_files(DIFFICULTY_ARCHIVE, "DifficultyTests") else {
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
