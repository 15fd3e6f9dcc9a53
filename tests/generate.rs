//! `loupe generate` end to end: the files are deterministic in the seed, the real binary
//! imports them (re-executing every block and verifying every root), the imported chain holds
//! the promised transaction mix, the genesis holds every funded account, and with
//! `--contract-slots` a big contract whose slots the blocks update, clear and add to.
//!
//! Expectations come from the EVM rules and the generator's documented derivations
//! (`funded_account`, `funded_balance`, the contracts' listings), never from its own output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use alloy_consensus::{Transaction, TxEnvelope};
use alloy_eips::Typed2718;
use alloy_primitives::{Address, B256, U256, keccak256};
use loupe::dev::generate::{
    BIG, BIG_RUNTIME, COUNTER, GenerateConfig, POOL, SCRATCH, SELFDESTRUCT_INIT, SENDERS, TOKEN,
    TRANSFER_TOPIC, big_slot, big_slot_value, fill_selector, funded_account, funded_balance,
    generate, swap_selector, swap_topic,
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
    let db = import_with_binary(&out, &tmp.path().join("node"), BLOCKS);
    Imported { db, _tmp: tmp }
}

/// Imports `OUT/genesis.json` and `OUT/chain.rlp` (`blocks` blocks) into `datadir` with the
/// real binary, and opens the result.
fn import_with_binary(out: &Path, datadir: &Path, blocks: u64) -> Database {
    let run = Command::new(BIN)
        .args(["import", "--datadir"])
        .arg(datadir)
        .arg("--genesis")
        .arg(out.join("genesis.json"))
        .arg(out.join("chain.rlp"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "import failed: {}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains(&format!("imported {blocks} blocks")), "{stdout}");
    assert!(stdout.contains(&format!("head #{blocks}")), "{stdout}");
    let db = Database::open(datadir).unwrap();
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(blocks));
    db
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

/// Gas a call of the big contract uses, from the EVM rules (Prague/Osaka) and the
/// `BIG_RUNTIME` listing: intrinsic cost (calldata, access list; the EIP-7623 floor), 29 gas
/// of fixed code and 60 per (slot, value) pair plus each SSTORE (EIP-2200/2929/3529, the
/// transaction's first write of each slot: `current` holds the values at its start), less the
/// refund (at most a fifth).
fn big_call_gas(tx: &TxEnvelope, current: &std::collections::HashMap<B256, U256>) -> u64 {
    let input = tx.input();
    let zeros = input.iter().filter(|b| **b == 0).count() as u64;
    let nonzero = input.len() as u64 - zeros;
    let mut intrinsic = 21_000 + 4 * zeros + 16 * nonzero;
    let warm: HashSet<B256> = match tx.access_list() {
        Some(list) => {
            for item in list.iter() {
                intrinsic += 2_400 + 1_900 * item.storage_keys.len() as u64;
            }
            list.iter().flat_map(|i| i.storage_keys.iter().copied()).collect()
        }
        None => HashSet::new(),
    };
    let floor = 21_000 + 10 * (zeros + 4 * nonzero);
    let (mut exec, mut refund) = (29, 0);
    for pair in input.chunks(64) {
        let slot = B256::from_slice(&pair[..32]);
        let (now, new) = (current[&slot], U256::from_be_slice(&pair[32..]));
        exec += 60 + if warm.contains(&slot) { 0 } else { 2_100 };
        exec += if new == now {
            100
        } else if now.is_zero() {
            20_000
        } else {
            if new.is_zero() {
                refund += 4_800;
            }
            2_900
        };
    }
    let used = intrinsic + exec;
    (used - refund.min(used / 5)).max(floor)
}

#[test]
fn a_big_contract_holds_its_derived_slots_and_the_blocks_write_to_it() {
    const SLOTS: u64 = 5_000;
    const N: u64 = 4;
    let seed = 6;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // Through the command line, so the flag is covered too.
    let run = Command::new(BIN)
        .args(["generate", "--out"])
        .arg(&out)
        .args(["--accounts", "100", "--contract-slots", &SLOTS.to_string()])
        .args(["--blocks", &N.to_string(), "--gas-limit", &GAS_LIMIT.to_string()])
        .args(["--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(run.status.success(), "generate: {}", String::from_utf8_lossy(&run.stderr));
    let db = import_with_binary(&out, &tmp.path().join("node"), N);
    let r = db.begin_read().unwrap();
    let value_of = |state: &loupe::storage::StateAt, slot: B256| {
        state.storage_value(&BIG, &U256::from_be_bytes(slot.0)).unwrap()
    };

    // Genesis: the code, and every slot as derived (the first new index is still unset).
    let genesis = r.state_at(0).unwrap();
    let account = genesis.account(&BIG).unwrap().expect("the big contract");
    let code = genesis.code(&account.code_hash).unwrap().original_bytes();
    assert_eq!(code[..], alloy_primitives::hex::decode(BIG_RUNTIME).unwrap()[..]);
    let genesis_slots: std::collections::HashMap<B256, u64> =
        (0..SLOTS).map(|i| (big_slot(seed, i), i)).collect();
    for i in (0..SLOTS).step_by(97).chain([SLOTS - 1]) {
        assert_eq!(value_of(&genesis, big_slot(seed, i)), big_slot_value(seed, i), "slot {i}");
    }
    assert_eq!(value_of(&genesis, big_slot(seed, SLOTS)), U256::ZERO);

    // The blocks: every write lands, with exactly the gas the EVM rules give.
    let (mut calls, mut txs) = (0u64, 0u64);
    let (mut updated, mut cleared, mut added) = (0, 0, 0);
    let mut touched = HashSet::new();
    for n in 1..=N {
        let (before, after) = (r.state_at(n - 1).unwrap(), r.state_at(n).unwrap());
        let receipts = r.receipts(n).unwrap().unwrap();
        // Values as of the transaction being checked, for the slots this block writes.
        let mut current = std::collections::HashMap::new();
        let mut cumulative = 0;
        for (stored, receipt) in r.transactions(n).unwrap().iter().zip(&receipts) {
            let used = receipt.cumulative_gas_used() - cumulative;
            cumulative = receipt.cumulative_gas_used();
            txs += 1;
            let tx: &TxEnvelope = &stored.tx;
            if tx.kind() != alloy_primitives::TxKind::Call(BIG) {
                continue;
            }
            calls += 1;
            assert!(receipt.status());
            let input = tx.input();
            assert!(!input.is_empty() && input.len().is_multiple_of(64));
            let pairs: Vec<(B256, U256)> = input
                .chunks(64)
                .map(|p| (B256::from_slice(&p[..32]), U256::from_be_slice(&p[32..])))
                .collect();
            let distinct: HashSet<B256> = pairs.iter().map(|p| p.0).collect();
            assert_eq!(distinct.len(), pairs.len(), "a slot written twice in one transaction");
            for (slot, _) in &pairs {
                current.entry(*slot).or_insert_with(|| value_of(&before, *slot));
            }
            assert_eq!(used, big_call_gas(tx, &current), "block {n}: gas used");
            assert!(used < tx.gas_limit());
            for (slot, value) in pairs {
                let was = current.insert(slot, value).unwrap();
                match (genesis_slots.contains_key(&slot), value.is_zero()) {
                    (true, false) if !was.is_zero() => updated += 1,
                    (true, true) if !was.is_zero() => cleared += 1,
                    (true, _) => {}
                    (false, zero) => {
                        // A new slot: unset before, set non-zero.
                        assert!(was.is_zero() && !zero, "new slot {slot} was {was}, set {value}");
                        added += 1;
                    }
                }
                touched.insert(slot);
            }
        }
        for (slot, value) in &current {
            assert_eq!(value_of(&after, *slot), *value, "block {n}: slot {slot}");
        }
    }
    eprintln!(
        "{calls} of {txs} txs write the big contract: {updated} slots updated, {cleared} cleared, \
         {added} added"
    );
    assert!(calls * 100 > txs * 8 && calls * 100 < txs * 25, "{calls} of {txs}");
    assert!(updated > 100 && cleared > 10 && added > 10, "{updated} {cleared} {added}");

    // Slots no block touched still hold their genesis values at the head.
    let head = r.state_at(N).unwrap();
    let mut untouched = 0;
    for i in (0..SLOTS).step_by(13) {
        let slot = big_slot(seed, i);
        if !touched.contains(&slot) {
            assert_eq!(value_of(&head, slot), big_slot_value(seed, i));
            untouched += 1;
        }
    }
    assert!(untouched > 100);
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

/// The generator commits its blocks without fsync, and a merge's replaced segment files are
/// removed only by a durable commit: at every [`DURABLE_EVERY`]th block it makes one, so its
/// work datadir holds no file that its manifest does not list (opening a datadir removes any
/// such file, which is how they are counted here).
#[test]
fn the_work_datadir_keeps_no_replaced_segment_at_a_durable_block() {
    use loupe::dev::generate::{DURABLE_EVERY, WORK_DIR};
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["generate", "--out"])
        .arg(tmp.path())
        .args(["--accounts", "200", "--blocks", &DURABLE_EVERY.to_string()])
        .args(["--txs-per-block", "1", "--keep-datadir"])
        // Epochs of 4 blocks and an unwind window of 8: the run freezes 100-odd epochs and
        // merges them level by level.
        .env("LOUPE_HISTORY_EPOCH", "4")
        .env("LOUPE_UNWIND_DEPTH", "8")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let work = tmp.path().join(WORK_DIR);
    let files = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join("segments"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let before = files(&work);
    // A merged file spans more than one epoch: merges ran, so parts were replaced.
    let merged = before.iter().filter(|f| {
        let parts: Vec<&str> = f.trim_end_matches(".seg").rsplitn(3, '-').collect();
        parts.len() == 3 && parts[0] != parts[1]
    });
    assert!(merged.count() > 0, "no merged segment among {before:?}");
    let db = Database::open(&work).unwrap();
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(DURABLE_EVERY));
    drop(db);
    assert_eq!(files(&work), before, "files the manifest does not list were left");
}
