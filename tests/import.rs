//! Import of the execution-apis fixture chain: the happy path, archive state at every block,
//! idempotent re-import, split files, and bad inputs (truncation, a wrong state root, a gap,
//! non-RLP bytes, a datadir of another chain).
//!
//! Truth comes from the fixture files: block hashes are keccak of the headers in chain.rlp, the
//! head hash is `headBlockHash` of headfcu.json, the genesis hash is block 1's parent hash.

use crate::common;

use std::path::Path;

use alloy_consensus::proofs::calculate_receipt_root;
use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::B256;
use alloy_rlp::{Decodable, Encodable};
use common::tables::assert_same_tables;
use common::{CHAIN_LEN, Fixture, assert_chain_prefix, assert_state_root, write_file};
use loupe::chain::ChainSpec;
use loupe::import::{
    ImportError, ImportOptions, ImportSummary, import_files, import_files_with, init_genesis,
    load_spec,
};
use loupe::storage::Database;
use tempfile::TempDir;

/// A fresh datadir initialised with the fixture genesis.
fn fresh(fx: &Fixture) -> (TempDir, Database, ChainSpec) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path()).expect("open fresh db");
    let (spec, created) = init_genesis(&db, &fx.genesis_text).expect("init genesis");
    assert!(created, "a fresh datadir must be initialised by init_genesis");
    (dir, db, spec)
}

fn import(db: &Database, spec: &ChainSpec, paths: &[&Path]) -> Result<ImportSummary, ImportError> {
    import_files(db, spec, paths)
}

/// How many of the fixture blocks from `from` to the head are Byzantium or later (the genesis
/// config puts Byzantium at block 9): those a file import executes ahead of the writer.
fn byzantium_blocks(spec: &ChainSpec, from: u64) -> u64 {
    use alloy_hardforks::EthereumHardforks;
    (from..=CHAIN_LEN).filter(|n| spec.is_byzantium_active_at_block(*n)).count() as u64
}

fn head(db: &Database) -> u64 {
    db.begin_read().expect("begin_read").head().expect("head").expect("initialised")
}

/// Checks a datadir fully imported: head 54, hash per headfcu.json, every block per chain.rlp,
/// receipts match each header's receipts root, head state root verifies.
fn assert_full_chain(db: &Database, fx: &Fixture) {
    assert_eq!(assert_chain_prefix(db, fx), CHAIN_LEN);
    let reader = db.begin_read().expect("begin_read");
    assert_eq!(
        reader.canonical_hash(CHAIN_LEN).expect("canonical"),
        Some(fx.head_hash),
        "head hash vs headfcu.json"
    );
    for n in 1..=CHAIN_LEN {
        let receipts =
            reader.receipts(n).expect("receipts").unwrap_or_else(|| panic!("receipts {n} missing"));
        let block = &fx.block(n).block;
        assert_eq!(receipts.len(), block.body.transactions.len(), "receipt count of #{n}");
        assert_eq!(
            calculate_receipt_root(&receipts),
            block.header.receipts_root,
            "stored receipts of #{n}"
        );
    }
    assert_state_root(db, CHAIN_LEN);
}

/// After a failed import: the datadir holds exactly blocks 0..=`last_good` (verified against
/// the fixtures, head state root checks), nothing of the bad block (`bad_hash`), re-opens, and
/// then imports the correct chain to 54.
fn assert_recovers(dir: &Path, db: Database, fx: &Fixture, last_good: u64, bad_hash: Option<B256>) {
    assert_eq!(assert_chain_prefix(&db, fx), last_good, "head after the failed import");
    assert_state_root(&db, last_good);
    if let Some(bad) = bad_hash {
        assert_eq!(
            db.begin_read().expect("begin_read").block_number(&bad).expect("lookup"),
            None,
            "bad block stored"
        );
    }
    drop(db);

    let db = Database::open(dir).expect("database re-opens after a failed import");
    assert_eq!(head(&db), last_good, "head after re-open");
    let spec = load_spec(&db).expect("load spec").expect("spec stored");
    let summary = import(&db, &spec, &[&fx.chain_path()]).expect("import of the correct chain");
    assert_eq!(summary.head, CHAIN_LEN);
    assert_eq!(summary.skipped, last_good, "blocks already stored are skipped");
    assert_eq!(summary.imported, CHAIN_LEN - last_good);
    assert_full_chain(&db, fx);
}

fn message(e: &ImportError) -> String {
    let s = e.to_string();
    eprintln!("import error (expected): {s}");
    s
}

// ---------------------------------------------------------------------------------------------
// (a) + (b): the chain imports; the state after every block reads back and hashes to its root.

#[test]
fn fixture_chain_imports_and_every_historical_state_verifies() {
    let Some(fx) = Fixture::load() else { return };
    assert_eq!(fx.blocks.len() as u64, CHAIN_LEN, "chain.rlp block count");
    let (_dir, db, spec) = fresh(&fx);
    assert_eq!(
        spec.genesis_hash(),
        fx.hash(0),
        "genesis hash vs parent hash of block 1 in chain.rlp"
    );

    let summary = import(&db, &spec, &[&fx.chain_path()]).expect("fixture chain imports");
    assert_eq!(summary.imported, CHAIN_LEN);
    assert_eq!(summary.skipped, 0);
    assert_eq!(summary.head, CHAIN_LEN);
    // Every block from Byzantium on ran on the execution thread, ahead of the writer, on the
    // committed snapshot plus the blocks before it: the roots checked above and the states
    // below verify it. Blocks 1-8 (pre-Byzantium) need per-transaction roots and ran inline.
    assert_eq!(summary.executed_ahead, byzantium_blocks(&spec, 1));
    assert_eq!(
        summary.transactions,
        fx.blocks.iter().map(|b| b.block.body.transactions.len() as u64).sum::<u64>()
    );
    assert_eq!(summary.gas, fx.blocks.iter().map(|b| b.block.header.gas_used).sum::<u64>());

    let reader = db.begin_read().expect("begin_read");
    assert_eq!(reader.head().expect("head"), Some(CHAIN_LEN));
    assert_eq!(reader.canonical_hash(CHAIN_LEN).expect("canonical"), Some(fx.head_hash));
    assert_eq!(reader.block_number(&fx.head_hash).expect("by hash"), Some(CHAIN_LEN));
    let h1 = reader.header(1).expect("header 1").expect("header 1 stored");
    assert_eq!(h1.parent_hash, spec.genesis_hash());
    assert_eq!(
        reader.header(0).expect("header 0").expect("genesis stored").hash_slow(),
        fx.hash(0)
    );
    drop(reader);
    assert_full_chain(&db, &fx);

    // (b) every block, through the history tables below head.
    let reader = db.begin_read().expect("begin_read");
    let mut roots = std::collections::HashSet::new();
    for n in 0..=CHAIN_LEN {
        let header = reader.header(n).expect("header").expect("stored");
        let dump = reader.state_at(n).expect("state_at").dump().expect("dump");
        assert_eq!(
            loupe::storage::state_root_of(&dump),
            header.state_root,
            "state root after block {n}"
        );
        roots.insert(header.state_root);
    }
    // The check is only meaningful if the state actually changes along the chain.
    assert!(roots.len() > 40, "only {} distinct state roots in 55 blocks", roots.len());
}

// (c) Re-running the import is a no-op.
#[test]
fn reimport_is_a_noop() {
    let Some(fx) = Fixture::load() else { return };
    let (_dir, db, spec) = fresh(&fx);
    import(&db, &spec, &[&fx.chain_path()]).expect("first import");
    let again = import(&db, &spec, &[&fx.chain_path()]).expect("second import");
    assert_eq!(again.imported, 0);
    assert_eq!(again.skipped, CHAIN_LEN);
    assert_eq!(again.head, CHAIN_LEN);
    let text = again.to_string();
    assert!(text.contains("nothing to import"), "summary: {text}");
    assert_full_chain(&db, &fx);
}

// (d) Split files, imported in one call and in two calls, give the same database.

fn assert_same_db(a: &Database, b: &Database, what: &str) {
    let ra = a.begin_read().expect("begin_read");
    let rb = b.begin_read().expect("begin_read");
    assert_eq!(ra.head().expect("head"), rb.head().expect("head"), "{what}: head");
    for n in 0..=CHAIN_LEN {
        assert_eq!(
            ra.canonical_hash(n).expect("a"),
            rb.canonical_hash(n).expect("b"),
            "{what}: hash #{n}"
        );
        assert_eq!(ra.header(n).expect("a"), rb.header(n).expect("b"), "{what}: header #{n}");
        assert_eq!(ra.receipts(n).expect("a"), rb.receipts(n).expect("b"), "{what}: receipts #{n}");
        let da = ra.state_at(n).expect("a").dump().expect("a");
        let db_ = rb.state_at(n).expect("b").dump().expect("b");
        assert_eq!(da, db_, "{what}: state after #{n}");
    }
}

#[test]
fn split_files_import_like_one_file() {
    let Some(fx) = Fixture::load() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let cut = fx.block(28).start;
    let first = write_file(tmp.path(), "1-27.rlp", &[&fx.chain_bytes[..cut]]);
    let second = write_file(tmp.path(), "28-54.rlp", &[&fx.chain_bytes[cut..]]);
    assert_eq!(common::split_blocks(&fx.chain_bytes[..cut]).len(), 27);
    assert_eq!(common::split_blocks(&fx.chain_bytes[cut..]).first().map(|b| b.number()), Some(28));

    let (_d1, whole, spec) = fresh(&fx);
    import(&whole, &spec, &[&fx.chain_path()]).expect("one file");
    assert_full_chain(&whole, &fx);

    let (_d2, one_call, spec2) = fresh(&fx);
    let s = import(&one_call, &spec2, &[&first, &second]).expect("two files, one call");
    assert_eq!((s.imported, s.skipped, s.head), (CHAIN_LEN, 0, CHAIN_LEN));
    // Execution ahead carries on across the file boundary (block 28 executes on the first
    // file's blocks, which the writer has not committed yet).
    assert_eq!(s.executed_ahead, byzantium_blocks(&spec2, 1));
    assert_full_chain(&one_call, &fx);

    let (_d3, two_calls, spec3) = fresh(&fx);
    let s = import(&two_calls, &spec3, &[&first]).expect("first half");
    assert_eq!((s.imported, s.head), (27, 27));
    assert_eq!(head(&two_calls), 27);
    let s = import(&two_calls, &spec3, &[&second]).expect("second half");
    assert_eq!((s.imported, s.skipped, s.head), (27, 0, CHAIN_LEN));
    assert_full_chain(&two_calls, &fx);

    assert_same_db(&whole, &one_call, "two files in one call");
    assert_same_db(&whole, &two_calls, "two files in two calls");
}

// (d') Several blocks per write transaction (`--import.batch`) store the same database, and a
// bad block in the middle of a group leaves every block before it stored.

fn import_batched(
    db: &Database,
    spec: &ChainSpec,
    paths: &[&Path],
    batch: u64,
) -> Result<ImportSummary, ImportError> {
    import_files_with(
        db,
        spec,
        paths,
        ImportOptions { batch, sync_every: 16, ..Default::default() },
    )
}

#[test]
fn batched_import_stores_what_a_commit_per_block_stores() {
    let Some(fx) = Fixture::load() else { return };
    let (_d1, single, spec) = fresh(&fx);
    import_batched(&single, &spec, &[&fx.chain_path()], 1).expect("a commit per block");

    let tmp = tempfile::tempdir().expect("tempdir");
    let cut = fx.block(28).start;
    let first = write_file(tmp.path(), "1-27.rlp", &[&fx.chain_bytes[..cut]]);
    let second = write_file(tmp.path(), "28-54.rlp", &[&fx.chain_bytes[cut..]]);
    // 7 divides neither 54 nor the file cut; 16 (sync_every) cuts groups too; 100 holds all.
    for batch in [7, 100] {
        let (_d, batched, spec) = fresh(&fx);
        let s = import_batched(&batched, &spec, &[&first, &second], batch).expect("batched");
        assert_eq!((s.imported, s.skipped, s.head), (CHAIN_LEN, 0, CHAIN_LEN), "batch {batch}");
        assert_eq!(s.executed_ahead, byzantium_blocks(&spec, 1), "batch {batch}: ahead");
        assert_full_chain(&batched, &fx);
        assert_same_db(&single, &batched, &format!("batch {batch}"));
        // Everything stored: a second run skips every block, also in groups.
        let again = import_batched(&batched, &spec, &[&fx.chain_path()], batch).expect("again");
        assert_eq!((again.imported, again.skipped), (0, CHAIN_LEN), "batch {batch} again");
    }
    // A run that starts inside the stored chain skips to the head and goes on in groups.
    let (_d, part, spec) = fresh(&fx);
    import_batched(&part, &spec, &[&first], 5).expect("first half");
    let s = import_batched(&part, &spec, &[&fx.chain_path()], 5).expect("whole file");
    assert_eq!((s.imported, s.skipped, s.head), (27, 27, CHAIN_LEN));
    assert_eq!(s.executed_ahead, byzantium_blocks(&spec, 28), "the blocks above the head");
    assert_same_db(&single, &part, "batch 5 over a stored prefix");
}

#[test]
fn bad_block_inside_a_group_keeps_the_blocks_before_it() {
    let Some(fx) = Fixture::load() else { return };
    let (dir, db, spec) = fresh(&fx);
    let (path, _, _, altered_hash) = altered_root_at_20(dir.path(), &fx);
    // Groups of 8: 1-8, 9-16 (durable at 16), then 17, 18, 19 and the bad 20.
    let err = import_batched(&db, &spec, &[&path], 8).expect_err("block 20 must fail");
    let msg = message(&err);
    assert!(
        matches!(err.root(), ImportError::Mismatch { number: 20, what: "state root", .. }),
        "{err:?}"
    );
    assert!(msg.contains("#20"), "{msg}");
    assert_recovers(dir.path(), db, &fx, 19, Some(altered_hash));
}

/// A fresh datadir without trie history below the unwind window, where a bulk import checks
/// the state root once per commit group by default.
fn fresh_window(fx: &Fixture) -> (TempDir, Database, ChainSpec) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path()).expect("open fresh db");
    let options = loupe::import::InitOptions {
        proof_history: Some(loupe::storage::segments::ProofHistory::Window),
        ..Default::default()
    };
    let (spec, _) = loupe::import::init_with(
        &db,
        loupe::import::GenesisSource::Json(&fx.genesis_text),
        options,
    )
    .expect("init genesis");
    (dir, db, spec)
}

#[test]
fn a_group_whose_state_root_fails_is_imported_again_block_by_block() {
    let Some(fx) = Fixture::load() else { return };
    let (dir, db, spec) = fresh_window(&fx);
    // The chain diverges at block 20: its state root and every later one differ from what the
    // blocks compute (as after a block that executes differently), and the parent hashes are
    // linked again, so that every other check passes and only the state roots tell.
    let mut bytes = fx.chain_bytes[..fx.block(20).start].to_vec();
    let mut parent = fx.hash(19);
    let mut hash20 = B256::ZERO;
    for n in 20..=30 {
        let mut block = fx.block(n).block.clone();
        block.header.parent_hash = parent;
        block.header.state_root.0[7] ^= 0x01;
        parent = block.header.hash_slow();
        if n == 20 {
            hash20 = parent;
        }
        block.encode(&mut bytes);
    }
    let path = write_file(dir.path(), "diverged.rlp", &[&bytes]);
    // Groups of 16: 1-16 (1-8 are pre-Byzantium, each with its own root; 9-16 one root at
    // 16), then 17-30 with one root check at 30, which fails.
    let options = ImportOptions { batch: 16, sync_every: 16, ..Default::default() };
    let err = import_files_with(&db, &spec, &[&path], options).expect_err("the roots differ");
    let msg = message(&err);
    assert!(
        matches!(err.root(), ImportError::Mismatch { number: 20, what: "state root", hash, .. } if *hash == hash20),
        "the first bad block is named, not the group's last: {err:?}"
    );
    assert!(msg.contains("#20"), "{msg}");
    let reader = db.begin_read().expect("begin_read");
    assert_eq!(reader.group_root_at().expect("meta"), Some(16), "the first group's root");
    drop(reader);
    // 17-19 are kept, each with its own root; the correct chain then imports in groups.
    assert_recovers(dir.path(), db, &fx, 19, Some(hash20));
}

/// The fixture chain diverged from block `at` on (its state root and every later one differ
/// from what the blocks compute, as after a block that executes differently, the parent hashes
/// linked again so that only the roots tell), up to block 30. Returns the file and `at`'s hash.
fn diverged_at(dir: &Path, fx: &Fixture, at: u64) -> (std::path::PathBuf, B256) {
    let mut bytes = fx.chain_bytes[..fx.block(at).start].to_vec();
    let mut parent = fx.hash(at - 1);
    let mut hash_at = B256::ZERO;
    for n in at..=30 {
        let mut block = fx.block(n).block.clone();
        block.header.parent_hash = parent;
        block.header.state_root.0[7] ^= 0x01;
        parent = block.header.hash_slow();
        if n == at {
            hash_at = parent;
        }
        block.encode(&mut bytes);
    }
    (write_file(dir, &format!("diverged-{at}.rlp"), &[&bytes]), hash_at)
}

/// A group whose state root fails, whether the first bad block is its first, one inside it or
/// its last, is refused naming that block, and the blocks before it are kept: in a datadir
/// with trie history at every block (one root per group and epoch, then the trie-history
/// stage) and in one without (one root per group).
#[test]
fn a_bad_block_anywhere_in_a_group_is_refused_by_name_and_the_blocks_before_it_kept() {
    let Some(fx) = Fixture::load() else { return };
    // Groups of 8 from block 9 on (blocks 1-8 are pre-Byzantium, each with its own root):
    // 17-24 is one group; its first block, one in the middle, its last.
    for at in [17, 21, 24] {
        for window in [false, true] {
            let what = format!("bad from #{at}, window {window}");
            let (dir, db, spec) = if window { fresh_window(&fx) } else { fresh(&fx) };
            let (path, bad_hash) = diverged_at(dir.path(), &fx, at);
            let options = ImportOptions { batch: 8, sync_every: 8, ..Default::default() };
            let err = import_files_with(&db, &spec, &[&path], options).expect_err(&what);
            assert!(
                matches!(err.root(), ImportError::Mismatch { number, what: "state root", hash, .. } if *number == at && *hash == bad_hash),
                "{what}: the first bad block is named, not the group's last: {err:?}"
            );
            assert!(message(&err).contains(&format!("#{at}")), "{what}: {}", message(&err));
            assert_eq!(head(&db), at - 1, "{what}: the blocks before it are kept");
            // Every block kept has its proofs (the stage ran on what was committed), and the
            // right chain then imports on top.
            if !window {
                loupe::trie::stage::run(&db, &std::sync::atomic::AtomicBool::new(false), 1)
                    .expect("the stage over the kept blocks");
                let r = db.begin_read().expect("read");
                for n in 1..at {
                    loupe::trie::prove_account(&r, n, alloy_primitives::Address::ZERO, &[])
                        .unwrap_or_else(|e| panic!("{what}: proof at #{n}: {e}"));
                }
            }
            assert_recovers(dir.path(), db, &fx, at - 1, Some(bad_hash));
        }
    }
}

/// A grouped import into a datadir that keeps trie history at every block checks one root per
/// group and epoch; the trie-history stage it runs then gives every block its proofs, each
/// equal to the per-block import's (the fixture chain's pre-Byzantium blocks keep their own
/// roots inside the stage's ranges).
#[test]
fn group_state_roots_with_trie_history_at_every_block_then_the_stage_proves_every_block() {
    let Some(fx) = Fixture::load() else { return };
    let (_d1, per_block, spec) = fresh(&fx);
    let block =
        ImportOptions { state_root: loupe::import::StateRootCheck::Block, ..Default::default() };
    import_files_with(&per_block, &spec, &[&fx.chain_path()], block).expect("per block");
    let (_d2, db, spec) = fresh(&fx);
    let options = ImportOptions {
        batch: 8,
        sync_every: 8,
        state_root: loupe::import::StateRootCheck::Group,
        ..Default::default()
    };
    let s = import_files_with(&db, &spec, &[&fx.chain_path()], options).expect("grouped");
    assert_eq!(s.head, CHAIN_LEN);
    assert!(s.staged.blocks > 0, "the stage ran: {s:?}");
    let stage = db.begin_read().expect("read").trie_stage().expect("meta").expect("grouped");
    assert!(!stage.pending() && stage.failed.is_none(), "{stage:?}");
    let (ra, rb) = (per_block.begin_read().expect("a"), db.begin_read().expect("b"));
    for n in 0..=CHAIN_LEN {
        for address in ra.state_at(n).expect("state").dump().expect("dump").keys() {
            let a = loupe::trie::prove_account(&ra, n, *address, &[]).expect("per block");
            let b = loupe::trie::prove_account(&rb, n, *address, &[]).expect("staged");
            assert!(a == b, "#{n} {address}: proofs differ");
        }
    }
}

// (e) Bad inputs.

#[test]
fn truncated_file_stops_before_the_cut_block() {
    let Some(fx) = Fixture::load() else { return };
    let (dir, db, spec) = fresh(&fx);
    let b30 = fx.block(30);
    let cut = b30.start + (b30.end - b30.start) / 2;
    let path = write_file(dir.path(), "truncated.rlp", &[&fx.chain_bytes[..cut]]);

    let err = import(&db, &spec, &[&path]).expect_err("a truncated file must fail");
    let msg = message(&err);
    assert!(matches!(err.root(), ImportError::Source { expected_block: 30, .. }), "{err:?}");
    assert!(msg.contains("truncated"), "{msg}");
    assert!(msg.contains("#30"), "{msg}");
    assert!(
        msg.contains(&format!("byte {}", b30.start)),
        "message should name the block's offset: {msg}"
    );
    assert_recovers(dir.path(), db, &fx, 29, None);
}

/// The fixture chain with block 20's state root altered (one bit), written to `dir`. Returns
/// the file, the real and the altered root, and the altered block's hash.
fn altered_root_at_20(dir: &Path, fx: &Fixture) -> (std::path::PathBuf, B256, B256, B256) {
    let raw = fx.block_bytes(20);
    let mut block = Block::<TxEnvelope>::decode(&mut &raw[..]).expect("block 20 decodes");
    let mut reencoded = Vec::new();
    block.encode(&mut reencoded);
    assert_eq!(reencoded, raw, "block 20 must re-encode byte for byte");
    let real_root = block.header.state_root;
    block.header.state_root.0[7] ^= 0x01;
    let altered_root = block.header.state_root;
    let altered_hash = block.header.hash_slow();
    assert_ne!(altered_hash, fx.hash(20));
    let mut altered = Vec::new();
    block.encode(&mut altered);

    let start20 = fx.block(20).start;
    let end20 = fx.block(20).end;
    let path = write_file(
        dir,
        "bad-root.rlp",
        &[&fx.chain_bytes[..start20], &altered, &fx.chain_bytes[end20..]],
    );
    (path, real_root, altered_root, altered_hash)
}

#[test]
fn wrong_state_root_is_named_and_nothing_of_the_block_is_stored() {
    let Some(fx) = Fixture::load() else { return };
    let (dir, db, spec) = fresh(&fx);

    let (path, real_root, altered_root, altered_hash) = altered_root_at_20(dir.path(), &fx);
    let err = import(&db, &spec, &[&path]).expect_err("a wrong state root must fail");
    let msg = message(&err);
    match err.root() {
        ImportError::Mismatch { number, hash, what, expected, got } => {
            assert_eq!(*number, 20);
            assert_eq!(*hash, altered_hash, "the error must carry the altered block's hash");
            assert_eq!(*what, "state root");
            assert_eq!(expected, &altered_root.to_string());
            assert_eq!(got, &real_root.to_string());
        }
        other => panic!("expected a state root mismatch, got {other:?}"),
    }
    assert!(msg.contains("#20"), "{msg}");
    assert!(msg.contains(&altered_hash.to_string()), "{msg}");
    assert!(msg.contains("state root"), "{msg}");
    assert!(
        msg.contains(&altered_root.to_string()) && msg.contains(&real_root.to_string()),
        "{msg}"
    );
    let exp_pos = msg.find(&altered_root.to_string()).unwrap_or(usize::MAX);
    let got_pos = msg.find(&real_root.to_string()).unwrap_or(0);
    assert!(exp_pos < got_pos, "expected (header) value must come before got: {msg}");
    assert_recovers(dir.path(), db, &fx, 19, Some(altered_hash));

    // Once block 20 is stored, the altered file conflicts at #20 (blocks 1..=19 are skipped).
    let db = Database::open(dir.path()).expect("re-open");
    let err = import(&db, &spec, &[&path]).expect_err("a block differing from the stored one");
    let msg = message(&err);
    assert!(
        matches!(err.root(), ImportError::Conflict { number: 20, hash, stored } if *hash == altered_hash && *stored == fx.hash(20)),
        "{err:?}"
    );
    assert!(msg.contains("#20") && msg.contains(&fx.hash(20).to_string()), "{msg}");
    assert_full_chain(&db, &fx);
}

#[test]
fn import_into_an_uninitialised_datadir_is_refused() {
    let Some(fx) = Fixture::load() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path()).expect("open");
    let spec = ChainSpec::from_genesis_json(&fx.genesis_text).expect("spec");
    let err = import(&db, &spec, &[&fx.chain_path()]).expect_err("no genesis yet");
    assert!(matches!(err.root(), ImportError::NotInitialised), "{err:?}");
    let reader = db.begin_read().expect("begin_read");
    assert_eq!(reader.head().expect("head"), None);
    assert_eq!(reader.canonical_hash(1).expect("canonical"), None);
}

#[test]
fn gap_in_the_file_names_the_block_and_the_expected_number() {
    let Some(fx) = Fixture::load() else { return };
    let (dir, db, spec) = fresh(&fx);
    let path = write_file(
        dir.path(),
        "gap.rlp",
        &[fx.block_bytes(1), fx.block_bytes(2), fx.block_bytes(4)],
    );
    let err = import(&db, &spec, &[&path]).expect_err("a gap must fail");
    let msg = message(&err);
    assert!(
        matches!(err.root(), ImportError::OutOfOrder { number: 4, expected: 3, hash } if *hash == fx.hash(4)),
        "{err:?}"
    );
    assert!(msg.contains("#4") && msg.contains("#3"), "{msg}");
    assert!(msg.contains(&fx.hash(4).to_string()), "{msg}");
    assert_recovers(dir.path(), db, &fx, 2, None);
}

#[test]
fn non_rlp_file_is_refused() {
    let Some(fx) = Fixture::load() else { return };
    let (dir, db, spec) = fresh(&fx);
    let path = write_file(dir.path(), "not-rlp.rlp", &[b"{\"jsonrpc\":\"2.0\",\"result\":[]}\n"]);
    let err = import(&db, &spec, &[&path]).expect_err("JSON is not a chain file");
    let msg = message(&err);
    assert!(matches!(err.root(), ImportError::Source { expected_block: 1, .. }), "{err:?}");
    assert!(msg.contains("not an RLP"), "{msg}");
    assert!(msg.contains("#1"), "{msg}");
    // Also as the second file of a run: the first file's blocks stay.
    let err = import(&db, &spec, &[&fx.chain_path(), &path]).expect_err("second file is not RLP");
    assert!(message(&err).contains("not an RLP"));
    assert_eq!(head(&db), CHAIN_LEN);
    drop(db);
    let dir2 = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir2.path()).expect("open");
    let (spec, _) = init_genesis(&db, &fx.genesis_text).expect("init");
    import(&db, &spec, &[&path]).expect_err("JSON is not a chain file");
    assert_recovers(dir2.path(), db, &fx, 0, None);
    drop(dir);
}

#[test]
fn datadir_of_another_genesis_is_refused() {
    let Some(fx) = Fixture::load() else { return };
    let mut other: serde_json::Value =
        serde_json::from_str(&fx.genesis_text).expect("genesis.json");
    assert_eq!(other["extraData"], "0x68697665636861696e", "fixture genesis changed");
    other["extraData"] = "0x6f74686572".into();
    let other_text = serde_json::to_string_pretty(&other).expect("json");

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path()).expect("open");
    let (other_spec, created) =
        init_genesis(&db, &other_text).expect("init with the other genesis");
    assert!(created);
    let other_hash = other_spec.genesis_hash();
    assert_ne!(other_hash, fx.hash(0));

    let err = init_genesis(&db, &fx.genesis_text).expect_err("another genesis must be refused");
    let msg = message(&err);
    match err.root() {
        ImportError::GenesisMismatch { stored, given } => {
            assert_eq!(*stored, other_hash);
            assert_eq!(*given, fx.hash(0));
        }
        e => panic!("expected GenesisMismatch, got {e:?}"),
    }
    assert!(
        msg.contains(&other_hash.to_string()) && msg.contains(&fx.hash(0).to_string()),
        "{msg}"
    );
    // Idempotent for the same genesis.
    let (_, created) = init_genesis(&db, &other_text).expect("same genesis again");
    assert!(!created);

    // The real chain does not continue this genesis: block 1 fails its parent check.
    let err = import(&db, &other_spec, &[&fx.chain_path()]).expect_err("chain of another genesis");
    let msg = message(&err);
    assert!(
        matches!(err.root(), ImportError::Mismatch { number: 1, what: "parent hash", .. }),
        "{err:?}"
    );
    assert!(
        msg.contains(&fx.hash(0).to_string()) && msg.contains(&other_hash.to_string()),
        "{msg}"
    );
    drop(db);

    let db = Database::open(dir.path()).expect("re-open");
    let reader = db.begin_read().expect("begin_read");
    assert_eq!(reader.head().expect("head"), Some(0));
    assert_eq!(reader.canonical_hash(0).expect("canonical"), Some(other_hash));
    let stored = reader.genesis_json().expect("genesis").expect("stored genesis");
    assert_eq!(common::stored_genesis(&stored), common::stored_genesis(&other_text));
    drop(reader);
    assert!(matches!(
        init_genesis(&db, &fx.genesis_text),
        Err(ImportError::GenesisMismatch { .. })
    ));
    let dump = db.begin_read().expect("r").state_at(0).expect("s").dump().expect("d");
    assert_eq!(loupe::storage::state_root_of(&dump), other_spec.genesis_header().state_root);
}

// (f) Execution ahead of the writer. A generated chain has the cases an overlay of uncommitted
// blocks must get right: contracts created and self-destructed, storage cleared for refunds,
// accounts created and emptied. Imported in small groups (so the execution thread moves to a
// new snapshot at every commit), it must store exactly what executing every block inline on
// the writer's own state stores (`import_block`, which never runs ahead).

#[test]
fn execution_ahead_stores_what_inline_execution_stores() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("gen");
    let blocks = 20;
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 2_000, blocks);
    config.seed = 11;
    config.gas_limit = 10_000_000;
    config.quiet = true;
    loupe::dev::generate::generate(&config).expect("generate");
    let genesis = std::fs::read_to_string(out.join("genesis.json")).expect("genesis");
    let chain = out.join("chain.rlp");

    let inline = Database::open(&tmp.path().join("inline")).expect("open");
    let (spec, _) = init_genesis(&inline, &genesis).expect("init");
    let bytes = std::fs::read(&chain).expect("chain");
    let mut reader = loupe::import::BlockReader::new(bytes.as_slice());
    while let Some(next) = reader.next_block() {
        let (_, block) = next.expect("decode");
        loupe::import::import_block(&inline, &spec, &block, false).expect("import inline");
    }
    let rb = inline.begin_read().expect("read");
    let mut databases = Vec::new();

    let (mut cleared, mut created) = (0, 0);
    // Groups of 3: the execution thread moves to a new snapshot at every commit. One group of
    // all the blocks: its overlay holds every block, so a value written or cleared blocks
    // earlier is read from it.
    for batch in [3, 64] {
        let ahead = Database::open(&tmp.path().join(format!("ahead-{batch}"))).expect("open");
        let (spec, _) = init_genesis(&ahead, &genesis).expect("init");
        // Every block's root stored, as the inline import does: the tables compare row by row.
        let options = ImportOptions {
            batch,
            sync_every: 16,
            state_root: loupe::import::StateRootCheck::Block,
            ..Default::default()
        };
        let s = import_files_with(&ahead, &spec, &[&chain], options).expect("import ahead");
        assert_eq!((s.imported, s.executed_ahead), (blocks, blocks), "batch {batch}");
        let ra = ahead.begin_read().expect("read");
        assert_eq!(ra.head().expect("head"), Some(blocks));
        for n in 1..=blocks {
            let what = format!("batch {batch}, block #{n}");
            assert_eq!(ra.header(n).expect("a"), rb.header(n).expect("b"), "header, {what}");
            assert_eq!(ra.receipts(n).expect("a"), rb.receipts(n).expect("b"), "receipts, {what}");
            let da = ra.state_at(n).expect("a").dump().expect("dump a");
            assert_eq!(da, rb.state_at(n).expect("b").dump().expect("dump b"), "state, {what}");
            let before = ra.state_at(n - 1).expect("a").dump().expect("dump");
            for (address, (account, slots)) in &da {
                match before.get(address) {
                    Some((_, old)) => {
                        cleared += old.keys().filter(|k| !slots.contains_key(*k)).count()
                    }
                    None => {
                        let code = account.code_hash;
                        created += usize::from(
                            !code.is_zero() && code != alloy_primitives::KECCAK256_EMPTY,
                        );
                    }
                }
            }
        }
        databases.push((batch, tmp.path().join(format!("ahead-{batch}"))));
    }
    // Row by row, every table is what the inline import (a commit per block) stored, the
    // history rows of the trie nodes a group rewrites in every block included.
    drop((rb, inline));
    for (batch, dir) in databases {
        assert_same_tables(&dir, &tmp.path().join("inline"), &format!("batch {batch}"));
    }
    // The overlay's slot deletions and new code were exercised (whole-account deletions are
    // checked by `ahead`'s unit test: generated chains do not remove accounts that existed).
    assert!(cleared > 0 && created > 0, "cleared slots {cleared}, contracts created {created}");
}
