//! The trie-history stage against the per-block path: a generated chain imported with one state
//! root per epoch, then staged, answers every proof at every block exactly as the same chain
//! imported with every block's root stored. Over several seeds, epoch lengths, commit group
//! sizes, and an import that starts inside an epoch after blocks imported one by one.
//!
//! The truth is the per-block import (`--state-root block`), whose roots every block's header
//! checked; the stage's own check of every block's root against its header is a second one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::splitmix64;
use alloy_primitives::{Address, B256, U256};
use loupe::chain::ChainSpec;
use loupe::import::{GenesisSource, ImportOptions, InitOptions, StateRootCheck};
use loupe::storage::Database;
use loupe::storage::history::keys::Epochs;
use loupe::storage::segments::ProofHistory;
use loupe::trie::TrieError;

/// A generated chain: its genesis text and chain file.
struct Chain {
    _dir: tempfile::TempDir,
    genesis: String,
    file: std::path::PathBuf,
    blocks: u64,
}

fn chain(seed: u64, blocks: u64) -> Chain {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 1_500, blocks);
    config.seed = seed;
    config.gas_limit = 8_000_000;
    config.contract_slots = 300;
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let genesis = std::fs::read_to_string(out.join("genesis.json")).unwrap();
    Chain { _dir: dir, genesis, file: out.join("chain.rlp"), blocks }
}

fn fresh(dir: &Path, genesis: &str, epoch: u64) -> (Database, ChainSpec) {
    let db = Database::open_with_epochs(dir, Epochs { len: epoch }).unwrap();
    let options = InitOptions { proof_history: Some(ProofHistory::All), ..Default::default() };
    let (spec, _) = loupe::import::init_with(&db, GenesisSource::Json(genesis), options).unwrap();
    (db, spec)
}

fn import(db: &Database, spec: &ChainSpec, file: &Path, batch: u64, check: StateRootCheck) {
    // The stage is run apart, to see the datadir before it.
    let options = ImportOptions {
        batch,
        sync_every: batch,
        state_root: check,
        trie_history: false,
        ..Default::default()
    };
    loupe::import::import_files_with(db, spec, &[file], options).unwrap();
}

/// The stage, `at_once` ranges at a time: the first two of each round read the leaves after
/// them through the keys changed since (`trie/later.rs`; the second its own keys laid over the
/// set), a third one through the history tables; all must prove as the per-block import.
fn stage(db: &Database, at_once: usize) -> loupe::trie::stage::StageSummary {
    loupe::trie::stage::run(db, &std::sync::atomic::AtomicBool::new(false), at_once).unwrap()
}

/// The accounts each block changed (from the per-block datadir's state at it and before it),
/// and the slots of each that changed, with a few that did not.
fn targets(db: &Database, blocks: u64) -> BTreeMap<u64, BTreeMap<Address, Vec<B256>>> {
    let r = db.begin_read().unwrap();
    let mut out = BTreeMap::new();
    let mut before = r.state_at(0).unwrap().dump().unwrap();
    for n in 1..=blocks {
        let now = r.state_at(n).unwrap().dump().unwrap();
        let mut at: BTreeMap<Address, Vec<B256>> = BTreeMap::new();
        let addresses: BTreeSet<Address> = now.keys().chain(before.keys()).copied().collect();
        for address in addresses {
            let (a, b) = (now.get(&address), before.get(&address));
            if a == b {
                continue;
            }
            let empty = BTreeMap::new();
            let (sa, sb) = (a.map_or(&empty, |x| &x.1), b.map_or(&empty, |x| &x.1));
            let mut slots: BTreeSet<U256> =
                sa.keys().chain(sb.keys()).filter(|k| sa.get(k) != sb.get(k)).copied().collect();
            // Two slots the block left alone, and one never set.
            slots.extend(sa.keys().filter(|k| sb.get(k) == sa.get(k)).take(2));
            slots.insert(U256::from(0xdead_beefu64));
            at.insert(
                address,
                slots.into_iter().map(|s| B256::from(s.to_be_bytes::<32>())).collect(),
            );
        }
        // An account the block did not touch, and one that never existed.
        if let Some((address, _)) = now.iter().nth(n as usize % now.len().max(1)) {
            at.entry(*address).or_default();
        }
        at.insert(Address::repeat_byte(0xee), vec![B256::ZERO]);
        out.insert(n, at);
        before = now;
    }
    out
}

/// Every target's proof at every block is the same in `staged` as in `per_block`.
fn assert_same_proofs(per_block: &Database, staged: &Database, blocks: u64, what: &str) {
    let targets = targets(per_block, blocks);
    let (a, b) = (per_block.begin_read().unwrap(), staged.begin_read().unwrap());
    let mut proofs = 0;
    for (n, at) in &targets {
        for (address, slots) in at {
            let want = loupe::trie::prove_account(&a, *n, *address, slots).unwrap();
            let got = loupe::trie::prove_account(&b, *n, *address, slots)
                .unwrap_or_else(|e| panic!("{what}: block {n}, {address}: {e}"));
            assert!(want == got, "{what}: block {n}, {address}: proofs differ");
            proofs += 1;
        }
    }
    assert!(proofs > blocks as usize * 3, "{what}: {proofs} proofs");
}

#[test]
fn staged_history_proves_every_block_as_the_per_block_import() {
    // (seed, blocks, epoch length, commit group): groups that cross epochs, that are shorter
    // than one, and that do not divide it.
    // One range at a time, two at once and three; 0: the whole epochs as beside an import
    // (built in turn, written in one transaction), then the rest one at a time.
    for (seed, blocks, epoch, batch, at_once) in [
        (3, 23, 4, 16, 1),
        (7, 19, 5, 3, 2),
        (11, 26, 8, 7, 3),
        (5, 22, 4, 5, 2),
        (13, 27, 4, 6, 0),
    ] {
        let c = chain(seed, blocks);
        let tmp = tempfile::tempdir().unwrap();
        let what = format!("seed {seed}, epochs of {epoch}, groups of {batch}, {at_once} at once");
        let (reference, spec) = fresh(&tmp.path().join("block"), &c.genesis, epoch);
        import(&reference, &spec, &c.file, batch, StateRootCheck::Block);

        let (grouped, spec) = fresh(&tmp.path().join("group"), &c.genesis, epoch);
        import(&grouped, &spec, &c.file, batch, StateRootCheck::Auto);
        let r = grouped.begin_read().unwrap();
        let before = r.trie_stage().unwrap().expect("a grouped import records its range");
        assert!(before.pending(), "{what}: {before:?}");
        assert_eq!(before.staged_to, 0, "{what}");
        // The last settle of more than one block ends the range (a last group of one block
        // has its own root).
        assert!((c.blocks - 1..=c.blocks).contains(&before.grouped_to), "{what}: {before:?}");
        // Before the stage: the inner blocks of an epoch wait, the epochs' ends do not.
        let epochs = Epochs { len: epoch };
        let inner = (1..c.blocks).find(|n| epochs.of(*n) == epochs.of(n + 1)).unwrap();
        let err = loupe::trie::prove_account(&r, inner, Address::ZERO, &[]).unwrap_err();
        assert!(matches!(err, TrieError::ProofsStaging { .. }), "{what}: {err}");
        assert!(err.to_string().contains("trie-history stage"), "{err}");
        let end = epoch - 1;
        loupe::trie::prove_account(&r, end, Address::ZERO, &[]).unwrap();
        drop(r);

        if at_once == 0 {
            let never = std::sync::atomic::AtomicBool::new(false);
            let beside = loupe::trie::stage::run_beside_import(&grouped, &never, false).unwrap();
            let whole = (before.grouped_to + 1) / epoch * epoch - 1;
            assert_eq!((beside.blocks, beside.staged_to), (whole, Some(whole)), "{what}");
            let rest = stage(&grouped, 1);
            assert_eq!(beside.blocks + rest.blocks, before.grouped_to, "{what}: {rest:?}");
            let after = grouped.begin_read().unwrap().trie_stage().unwrap().unwrap();
            assert!(!after.pending() && after.failed.is_none(), "{what}: {after:?}");
            assert_same_proofs(&reference, &grouped, c.blocks, &what);
            continue;
        }
        let summary = stage(&grouped, at_once);
        assert_eq!(summary.blocks, before.grouped_to, "{what}");
        // Up to two at once, every range reads the keys changed after it through the set
        // kept; with three, the third of a round reads the history tables (the stage builds no
        // more at once than the machine has cores).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if at_once.min(cores) <= 2 {
            assert_eq!(summary.kept_ranges, summary.ranges, "{what}: {summary:?}");
        } else {
            assert!((1..summary.ranges).contains(&summary.kept_ranges), "{what}: {summary:?}");
        }
        let after = grouped.begin_read().unwrap().trie_stage().unwrap().unwrap();
        assert!(!after.pending() && after.failed.is_none(), "{what}: {after:?}");
        assert_same_proofs(&reference, &grouped, c.blocks, &what);
        assert_eq!(stage(&grouped, at_once).blocks, 0, "{what}: nothing left");
    }
}

/// A block inside an epoch whose header claims another state root than its state has is caught
/// by the stage (a grouped import checks roots at the epochs' ends only; a crafted chain file
/// cannot show it on this chain, whose Prague blocks store their parent's hash in state, so the
/// stored header is altered after the import). With epochs of 4 the stage builds 8–11 and
/// 12–15 side by side; the bad block 13 is in the second: the first is written, the block is
/// named with the root its state has (the original header's), proofs reach block 11, and the
/// stage refuses to run again. One range at a time (through the keys kept from range to range)
/// the same holds.
#[test]
fn the_stage_names_a_wrong_root_inside_an_epoch_and_keeps_the_ranges_before_it() {
    // 0: as beside an import, whose ranges before the bad one share its write transaction.
    for at_once in [2, 1, 0] {
        wrong_root_inside_an_epoch(at_once);
    }
}

/// The stage `at_once` ranges at a time, or as beside an import for 0.
fn stage_or_beside(db: &Database, at_once: usize) -> Result<u64, TrieError> {
    let never = std::sync::atomic::AtomicBool::new(false);
    match at_once {
        0 => loupe::trie::stage::run_beside_import(db, &never, false).map(|s| s.blocks),
        n => loupe::trie::stage::run(db, &never, n).map(|s| s.blocks),
    }
}

/// The first `blocks` blocks of `file`, as a file of their own.
fn first_blocks(dir: &Path, file: &Path, blocks: usize) -> std::path::PathBuf {
    let bytes = std::fs::read(file).unwrap();
    let mut reader = loupe::import::BlockReader::new(bytes.as_slice());
    let mut out = Vec::new();
    for _ in 0..blocks {
        let (_, block) = reader.next_block().unwrap().unwrap();
        alloy_rlp::Encodable::encode(&block, &mut out);
    }
    let path = dir.join(format!("first-{blocks}.rlp"));
    std::fs::write(&path, out).unwrap();
    path
}

fn wrong_root_inside_an_epoch(at_once: usize) {
    let c = chain(5, 24);
    let tmp = tempfile::tempdir().unwrap();
    let (db, spec) = fresh(&tmp.path().join("d"), &c.genesis, 4);
    // A header whose state root is wrong, though its hash links: a crafted file cannot make
    // one without changing the state after it (each block stores its parent's hash, EIP-2935),
    // so the stored header is changed, before its epoch is frozen. Blocks 1..=14 first: the
    // epochs up to the last group's root (14) that end below it are frozen (0..=2), and epoch
    // 3 (blocks 12..=15) keeps its rows in the B-tree until the rest of the chain follows.
    import(&db, &spec, &first_blocks(tmp.path(), &c.file, 14), 24, StateRootCheck::Auto);
    let bad = 13;
    let mut header = db.begin_read().unwrap().header(bad).unwrap().unwrap();
    let real = header.state_root;
    header.state_root.0[9] ^= 0x10;
    let w = db.begin_write().unwrap();
    let mut rlp = Vec::new();
    alloy_rlp::Encodable::encode(&header, &mut rlp);
    w.transaction()
        .open_table(loupe::storage::tables::HEADERS)
        .unwrap()
        .insert(bad, rlp.as_slice())
        .unwrap();
    w.commit(true).unwrap();
    import(&db, &spec, &c.file, 24, StateRootCheck::Auto);
    assert_eq!(
        db.begin_read().unwrap().header(bad).unwrap().unwrap().state_root,
        header.state_root
    );
    let err = stage_or_beside(&db, at_once).unwrap_err();
    assert!(
        matches!(err, TrieError::StageRootMismatch { block: 13, computed, .. } if computed == real),
        "{at_once} at once: {err:?}"
    );
    let r = db.begin_read().unwrap();
    let stage = r.trie_stage().unwrap().unwrap();
    assert_eq!((stage.staged_to, stage.failed.map(|f| f.0)), (11, Some(bad)), "{stage:?}");
    for n in 1..=11 {
        loupe::trie::prove_account(&r, n, Address::ZERO, &[]).unwrap();
    }
    loupe::trie::prove_account(&r, 13, Address::ZERO, &[]).unwrap_err();
    drop(r);
    let again = stage_or_beside(&db, at_once).unwrap_err();
    assert!(matches!(again, TrieError::StageRootMismatch { block: 13, .. }), "{again:?}");
}

#[test]
fn a_grouped_import_after_blocks_imported_one_by_one_starts_inside_an_epoch() {
    let c = chain(5, 21);
    let tmp = tempfile::tempdir().unwrap();
    let (reference, spec) = fresh(&tmp.path().join("block"), &c.genesis, 4);
    import(&reference, &spec, &c.file, 4, StateRootCheck::Block);

    // Blocks 1..=6 one by one (epoch 1 is blocks 4..=7), the rest grouped.
    let (db, spec) = fresh(&tmp.path().join("mixed"), &c.genesis, 4);
    let bytes = std::fs::read(&c.file).unwrap();
    let mut reader = loupe::import::BlockReader::new(bytes.as_slice());
    for _ in 0..6 {
        let (_, block) = reader.next_block().unwrap().unwrap();
        loupe::import::import_block(&db, &spec, &block, false).unwrap();
    }
    import(&db, &spec, &c.file, 5, StateRootCheck::Auto);
    // Block 7 ends epoch 1 alone: its root is its own, and the stage starts after it. The last
    // settle of more than one block ends the range.
    let stage_before = db.begin_read().unwrap().trie_stage().unwrap().unwrap();
    assert_eq!(stage_before.staged_to, 7, "{stage_before:?}");
    assert!((c.blocks - 2..=c.blocks).contains(&stage_before.grouped_to), "{stage_before:?}");
    let summary = stage(&db, 1);
    assert_eq!(summary.blocks, stage_before.grouped_to - 7);
    assert_same_proofs(&reference, &db, c.blocks, "one by one, then grouped");
}

/// A deeper trie (50,000 accounts; the chain that found it, `loupe generate --accounts 50000
/// --blocks 130 --seed 3` in epochs of 16): the stage's walks seek past the end of the subtree
/// they are in (a branch's last child), an empty range the stage's node overlay refused with a
/// panic (`BTreeMap::range`) from block 112 on. Every block's root is checked against its
/// header by the stage itself; the head's trie is then the grouped import's.
#[test]
fn a_walk_that_seeks_past_its_subtree_is_staged() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 50_000, 130);
    config.seed = 3;
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let genesis = std::fs::read_to_string(out.join("genesis.json")).unwrap();
    let (db, spec) = fresh(&dir.path().join("data"), &genesis, 16);
    import(&db, &spec, &out.join("chain.rlp"), 512, StateRootCheck::Auto);
    let before = db.begin_read().unwrap().trie_stage().unwrap().unwrap();
    let summary = stage(&db, 1);
    assert_eq!(summary.blocks, before.grouped_to - before.staged_to, "{before:?}");
    assert_eq!(summary.staged_to, Some(130));
    let r = db.begin_read().unwrap();
    loupe::trie::verify(&r).unwrap();
    loupe::trie::verify_history(&r).unwrap();
}

/// `loupe import` killed with SIGKILL at 20 moments of its trie-history stage (a pause after
/// each range is built and another before its commit, so that kills land in both; the stage
/// runs beside the import's blocks and after them, so kills land in both): after each kill the
/// datadir opens, the stage's progress never goes back, and a later run goes on from it; once
/// it is done, `verify` and `verify --history` pass and every proof at every block is
/// the per-block import's. Epochs of 4 blocks and a window of 8, so the freeze of history that
/// waits for the stage runs between kills too.
#[test]
fn sigkill_at_20_moments_of_the_stage_leaves_history_that_proves_as_the_per_block_import() {
    let c = chain(13, 80);
    let tmp = tempfile::tempdir().unwrap();
    let (reference, spec) = fresh(&tmp.path().join("block"), &c.genesis, 4);
    import(&reference, &spec, &c.file, 16, StateRootCheck::Block);
    let genesis = tmp.path().join("genesis.json");
    std::fs::write(&genesis, &c.genesis).unwrap();

    let datadir = tmp.path().join("data");
    let log = tmp.path().join("import.log");
    let out = tmp.path().join("import.out");
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
            .args(["import", "--datadir"])
            .arg(&datadir)
            .arg("--chain")
            .arg(&genesis)
            .arg(&c.file)
            .args(["--import.batch", "16", "--import.sync-every", "16", "--import.compact", "off"])
            .env("LOUPE_HISTORY_EPOCH", "4")
            .env("LOUPE_UNWIND_DEPTH", "8")
            .env(loupe::trie::stage::TEST_PAUSE_ENV, "120")
            .env("RUST_LOG", "trie=info,import=info")
            .env("NO_COLOR", "1")
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap()
    };
    let (mut landed, mut staged_to) = (0, 0u64);
    for i in 0..80u64 {
        if landed >= 20 {
            break;
        }
        let mut child = run();
        // Wait until this run's stage is under way (its blocks are stored), then kill at a
        // random moment among its pauses.
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(120)
            && !std::fs::read_to_string(&log).unwrap_or_default().contains("trie-history stage")
            && child.try_wait().ok().flatten().is_none()
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(splitmix64(i) % 250));
        let finished = child.try_wait().ok().flatten().is_some();
        let _ = child.kill();
        let _ = child.wait();
        let db = Database::open(&datadir)
            .unwrap_or_else(|e| panic!("iteration {i}: does not open after SIGKILL: {e}"));
        let Some(stage) = db.begin_read().unwrap().trie_stage().unwrap() else { continue };
        assert!(stage.failed.is_none(), "iteration {i}: {stage:?}");
        assert!(stage.staged_to >= staged_to, "iteration {i}: the stage went back: {stage:?}");
        staged_to = stage.staged_to;
        if finished {
            break;
        }
        // The stage runs beside the import too: a kill may land while blocks are still
        // coming, with the stage caught up to the last group for a moment (not a stage kill).
        if stage.pending() {
            landed += 1;
        }
    }
    assert!(landed >= 20, "only {landed} kills landed in the stage");
    // The last run, not killed: the rest of the blocks, then the stage to the end.
    let status = run().wait().unwrap();
    assert!(status.success(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    let db = Database::open(&datadir).unwrap();
    stage(&db, 1);
    let r = db.begin_read().unwrap();
    let done = r.trie_stage().unwrap().unwrap();
    assert!(!done.pending() && done.failed.is_none(), "{done:?}");
    assert_eq!(r.head().unwrap(), Some(c.blocks));
    loupe::trie::verify(&r).unwrap();
    loupe::trie::verify_history(&r).unwrap();
    drop(r);
    assert_same_proofs(&reference, &db, c.blocks, "after 20 kills");
}
