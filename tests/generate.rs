//! `loupe generate` end to end: the files are deterministic in the seed, the real binary
//! imports them (re-executing every block and verifying every root), the imported chain holds
//! the promised transaction mix, and the genesis holds every funded account.
//!
//! Expectations come from the EVM rules and the generator's documented derivations
//! (`funded_account`, `funded_balance`, the contracts' listings), never from its own output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use alloy_consensus::{Transaction, TxEnvelope};
use alloy_eips::Typed2718;
use alloy_primitives::{Address, U256, keccak256};
use loupe::dev::generate::{
    COUNTER, GenerateConfig, POOL, SCRATCH, SELFDESTRUCT_INIT, SENDERS, TOKEN, TRANSFER_TOPIC,
    fill_selector, funded_account, funded_balance, generate, swap_selector, swap_topic,
};
use loupe::storage::Database;

const BIN: &str = env!("CARGO_BIN_EXE_loupe");

/// Small enough to keep the suite fast, large enough for every kind of transaction to occur.
const ACCOUNTS: u64 = 2_000;
const BLOCKS: u64 = 20;
const GAS_LIMIT: u64 = 10_000_000;

fn generate_with_binary(out: &Path, seed: u64) -> std::process::Child {
    Command::new(BIN)
        .args(["generate", "--out"])
        .arg(out)
        .args(["--accounts", &ACCOUNTS.to_string(), "--blocks", &BLOCKS.to_string()])
        .args(["--gas-limit", &GAS_LIMIT.to_string(), "--seed", &seed.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

#[test]
fn same_seed_gives_identical_files_another_seed_different_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = [tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c")];
    // The three runs in parallel, through the command line.
    let children: Vec<_> =
        dirs.iter().zip([1, 1, 2]).map(|(d, seed)| generate_with_binary(d, seed)).collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "loupe generate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for name in ["genesis.json", "chain.rlp"] {
        let (a, b, c) = (read(&dirs[0], name), read(&dirs[1], name), read(&dirs[2], name));
        assert!(!a.is_empty());
        assert!(a == b, "{name} differs between two runs with the same seed");
        assert!(a != c, "{name} is the same with another seed");
    }
    for d in &dirs {
        assert!(!d.join(".work").exists(), "the work datadir is removed by default");
    }
}

/// Counts the `alloc` entries of a genesis.json while parsing it from the file, keeping only
/// the addresses (the entries' bodies are skipped unparsed).
fn alloc_addresses(path: &Path) -> Vec<Address> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Top(Vec<Address>);
    struct Alloc;
    impl<'de> Visitor<'de> for Alloc {
        type Value = Vec<Address>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the alloc object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Address>, A::Error> {
            let mut out = Vec::new();
            while let Some(key) = map.next_key::<Address>()? {
                map.next_value::<IgnoredAny>()?;
                out.push(key);
            }
            Ok(out)
        }
    }
    impl<'de> serde::Deserialize<'de> for Top {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Top;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a genesis object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
                    let mut alloc = Vec::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if key == "alloc" {
                            alloc = map.next_value_seed(AllocSeed)?;
                        } else {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                    Ok(Top(alloc))
                }
            }
            d.deserialize_map(V)
        }
    }
    struct AllocSeed;
    impl<'de> serde::de::DeserializeSeed<'de> for AllocSeed {
        type Value = Vec<Address>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Address>, D::Error> {
            d.deserialize_map(Alloc)
        }
    }
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let top: Top = serde_json::from_reader(file).unwrap();
    top.0
}

#[test]
fn genesis_alloc_holds_every_funded_account() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 20_000;
    let mut config = GenerateConfig::new(tmp.path(), n, 1);
    config.seed = 9;
    config.gas_limit = 5_000_000;
    config.quiet = true;
    generate(&config).unwrap();
    let alloc = alloc_addresses(&tmp.path().join("genesis.json"));
    // N funded accounts, the senders, 4 system contracts and the token, pool, filler, counter.
    assert_eq!(alloc.len() as u64, n + SENDERS + 4 + 4);
    let set: HashSet<Address> = alloc.iter().copied().collect();
    assert_eq!(set.len(), alloc.len(), "no address twice");
    for i in 0..n {
        assert!(set.contains(&funded_account(9, i)), "funded account {i} missing");
    }
    for c in [TOKEN, POOL, SCRATCH, COUNTER] {
        assert!(set.contains(&c));
    }
}

/// A generated chain imported by the real binary into a fresh datadir.
struct Imported {
    db: Database,
    _tmp: tempfile::TempDir,
}

fn generate_and_import(seed: u64) -> Imported {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut config = GenerateConfig::new(&out, ACCOUNTS, BLOCKS);
    config.seed = seed;
    config.gas_limit = GAS_LIMIT;
    config.quiet = true;
    let summary = generate(&config).unwrap();
    assert_eq!(summary.blocks, BLOCKS);

    let datadir = tmp.path().join("node");
    let run = Command::new(BIN)
        .args(["import", "--datadir"])
        .arg(&datadir)
        .arg("--genesis")
        .arg(out.join("genesis.json"))
        .arg(out.join("chain.rlp"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "import failed: {}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains(&format!("imported {BLOCKS} blocks")), "{stdout}");
    assert!(stdout.contains(&format!("head #{BLOCKS}")), "{stdout}");
    let db = Database::open(&datadir).unwrap();
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(BLOCKS));
    Imported { db, _tmp: tmp }
}

/// `Token.balanceOf(holder)` as of the transaction being checked: `balances` holds the
/// balances this block's earlier transfers changed, `before` the state before the block.
fn token_balance(
    balances: &mut std::collections::HashMap<Address, U256>,
    before: &loupe::storage::StateAt,
    holder: Address,
) -> U256 {
    *balances.entry(holder).or_insert_with(|| {
        // Solidity mapping at slot 0: keccak256(holder ‖ 0).
        let slot = keccak256([holder.into_word().0, [0u8; 32]].concat());
        before.storage_value(&TOKEN, &slot.into()).unwrap()
    })
}

fn word(input: &[u8], i: usize) -> U256 {
    U256::from_be_slice(&input[4 + 32 * i..4 + 32 * (i + 1)])
}

#[test]
fn generated_chain_imports_and_holds_the_mix() {
    let seed = 3;
    let chain = generate_and_import(seed);
    let r = chain.db.begin_read().unwrap();

    let mut types = [0u64; 5];
    let (mut creations, mut self_destructs, mut transfers, mut swaps) = (0, 0, 0, 0);
    let (mut reverts, mut delegations, mut blobs, mut cleared) = (0, 0, 0, 0);
    // Filler ranges set with a non-zero value: start slot -> block.
    let mut set_at = std::collections::HashMap::new();
    let swap_sel = swap_selector();
    let fill_sel = fill_selector();
    let selfdestruct_init = alloy_primitives::hex::decode(SELFDESTRUCT_INIT).unwrap();
    let head = r.state_at(BLOCKS).unwrap();
    for n in 1..=BLOCKS {
        let header = r.header(n).unwrap().unwrap();
        assert_eq!(header.gas_limit, GAS_LIMIT);
        assert!(
            header.gas_used * 100 > header.gas_limit * 85,
            "block {n} uses {} of {} gas",
            header.gas_used,
            header.gas_limit
        );
        let txs = r.transactions(n).unwrap();
        let receipts = r.receipts(n).unwrap().unwrap();
        assert_eq!(txs.len(), receipts.len());
        let before = r.state_at(n - 1).unwrap();
        let mut balances = std::collections::HashMap::new();
        let mut cumulative = 0;
        for (stored, receipt) in txs.iter().zip(&receipts) {
            let tx: &TxEnvelope = &stored.tx;
            let used = receipt.cumulative_gas_used() - cumulative;
            cumulative = receipt.cumulative_gas_used();
            types[usize::from(tx.ty())] += 1;
            let input = tx.input();
            let ok = receipt.status();
            match tx.kind() {
                alloy_primitives::TxKind::Create => {
                    assert!(ok, "creations succeed");
                    let created = stored.sender.create(tx.nonce());
                    let account = head.account(&created).unwrap();
                    if input[..] == selfdestruct_init[..] {
                        // Created with value and destroyed in its constructor (EIP-6780): gone.
                        assert!(tx.value() > U256::ZERO);
                        assert!(account.is_none(), "self-destructed {created} still exists");
                        self_destructs += 1;
                    } else {
                        let account = account.expect("created contract exists");
                        let code = head.code(&account.code_hash).unwrap().original_bytes();
                        if input.len() > 600 {
                            // A Token: the code its constructor deploys is the code the genesis
                            // gives the chain's own Token.
                            let token = head.account(&TOKEN).unwrap().unwrap();
                            assert_eq!(code, head.code(&token.code_hash).unwrap().original_bytes());
                        } else {
                            assert!(!code.is_empty());
                        }
                        creations += 1;
                    }
                }
                alloy_primitives::TxKind::Call(to) if to == TOKEN => {
                    let (recipient, amount) =
                        (Address::from_word(word(input, 0).into()), word(input, 1));
                    let held = token_balance(&mut balances, &before, stored.sender);
                    if ok {
                        let log = receipt.logs().first().expect("a Transfer log");
                        assert_eq!(log.address, TOKEN);
                        assert_eq!(log.topics()[0], TRANSFER_TOPIC);
                        assert_eq!(log.topics()[1], stored.sender.into_word());
                        assert_eq!(log.topics()[2], recipient.into_word());
                        assert!(amount <= held);
                        balances.insert(stored.sender, held - amount);
                        let theirs = token_balance(&mut balances, &before, recipient);
                        balances.insert(recipient, theirs + amount);
                        transfers += 1;
                    } else {
                        // The deliberate failures: more than the sender holds.
                        assert!(amount > held, "a transfer within the balance reverted");
                        reverts += 1;
                    }
                }
                alloy_primitives::TxKind::Call(to) if to == POOL => {
                    assert!(ok);
                    assert_eq!(input[..4], swap_sel);
                    let log = &receipt.logs()[0];
                    assert_eq!((log.address, log.topics()[0]), (POOL, swap_topic()));
                    swaps += 1;
                }
                alloy_primitives::TxKind::Call(to) if to == SCRATCH => {
                    assert!(ok);
                    assert_eq!(input[..4], fill_sel);
                    let (start, count, value) = (word(input, 0), word(input, 1), word(input, 2));
                    if value.is_zero() {
                        // Cleared: every slot back to zero, and the refund shows in gas used.
                        let now = r.state_at(n).unwrap();
                        for k in 0..count.to::<u64>() {
                            let slot = start + U256::from(k);
                            assert_eq!(now.storage_value(&SCRATCH, &slot).unwrap(), U256::ZERO);
                        }
                        assert!(used * 100 < tx.gas_limit() * 85, "no refund: {used}");
                        if let Some(&m) = set_at.get(&start).filter(|&&m| m < n) {
                            let then = r.state_at(m).unwrap();
                            assert!(!then.storage_value(&SCRATCH, &start).unwrap().is_zero());
                            cleared += 1;
                        }
                    } else {
                        set_at.insert(start, n);
                    }
                }
                _ => {}
            }
            if let Some(list) = tx.authorization_list() {
                // EIP-7702: the authority's code is now the delegation designator to Counter.
                assert!(ok);
                let authority = list[0].recover_authority().unwrap();
                assert_eq!(list[0].address, COUNTER);
                let account = head.account(&authority).unwrap().unwrap();
                let designator = [&[0xef, 0x01, 0x00][..], COUNTER.as_slice()].concat();
                assert_eq!(account.code_hash, keccak256(&designator));
                assert_eq!(tx.kind(), alloy_primitives::TxKind::Call(authority));
                delegations += 1;
            }
            if let Some(hashes) = tx.blob_versioned_hashes() {
                assert!(ok);
                assert!(!hashes.is_empty() && hashes.iter().all(|h| h[0] == 1));
                blobs += 1;
            }
        }
    }
    eprintln!(
        "types {types:?}; {creations} creations, {self_destructs} self-destructs, {transfers} \
         transfers, {reverts} reverts, {swaps} swaps, {cleared} ranges cleared, {delegations} \
         delegations, {blobs} blob txs"
    );
    assert!(types.iter().all(|&t| t > 0), "all five transaction types occur: {types:?}");
    assert!(
        creations > 0 && self_destructs > 0,
        "{creations} creations, {self_destructs} self-destructs"
    );
    assert!(transfers > 100 && swaps > 50, "{transfers} Transfer logs, {swaps} swaps");
    assert!(reverts > 0 && delegations > 0 && blobs > 0, "{reverts} {delegations} {blobs}");
    assert!(cleared > 0, "no slot set in one block was cleared in a later one");

    // Genesis accounts, read back from the imported state.
    let genesis = r.state_at(0).unwrap();
    for i in [0, 1, ACCOUNTS / 2, ACCOUNTS - 1] {
        let a = genesis.account(&funded_account(seed, i)).unwrap().expect("funded account");
        assert_eq!(a.balance, funded_balance(seed, i));
    }
}

#[test]
fn bad_flags_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["generate", "--out"])
        .arg(tmp.path())
        .args(["--accounts", "10", "--blocks", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--blocks"));
}
