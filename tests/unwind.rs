//! Unwinding blocks (`Writer::unwind_head`, the change index): a database that imported a
//! chain to N and was unwound to k holds exactly, table by table and row by row, what a
//! database that only ever imported the chain to k holds. Importing k+1..N again (the last
//! blocks after an unwind in the same transaction, executed on its uncommitted state) then
//! gives exactly the database of a straight import. Checked on the fixture chain and on a generated
//! chain with self-destructs, storage clears and contract creations.
//!
//! The truth is a second path to the same answer: a fresh import of the same blocks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use alloy_consensus::{Block, TxEnvelope};
use common::tables::assert_same_tables;
use common::{CHAIN_LEN, Fixture};
use loupe::chain::ChainSpec;
use loupe::import::{BlockReader, import_block, import_block_on_writer, init_genesis};
use loupe::storage::Database;

struct Chain {
    genesis: String,
    blocks: Vec<Block<TxEnvelope>>,
}

impl Chain {
    /// A database with the chain imported up to `to`, each block committed on its own.
    fn import(&self, dir: &Path, to: u64) -> (Database, ChainSpec) {
        let db = Database::open(dir).unwrap();
        let (spec, _) = init_genesis(&db, &self.genesis).unwrap();
        for block in &self.blocks[..to as usize] {
            import_block(&db, &spec, block, true).unwrap();
        }
        (db, spec)
    }
}

/// Imports everything, unwinds to each target in turn (one commit per block, then several
/// blocks in one commit), compares with a fresh import at each target, and finally re-imports
/// the rest and compares with a straight import.
fn check_chain(chain: &Chain, targets: &[u64]) {
    let len = chain.blocks.len() as u64;
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    let work = tmp.path().join("work");
    drop(chain.import(&full, len));
    let (mut db, mut spec) = chain.import(&work, len);
    let mut head = len;
    for (i, &target) in targets.iter().enumerate() {
        if i % 2 == 0 {
            while head > target {
                let mut w = db.begin_write().unwrap();
                head = w.unwind_head().unwrap();
                w.commit(true).unwrap();
            }
        } else {
            let mut w = db.begin_write().unwrap();
            while head > target {
                head = w.unwind_head().unwrap();
            }
            w.commit(true).unwrap();
        }
        assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(target));
        drop(db);
        let fresh = tmp.path().join(format!("fresh-{target}"));
        drop(chain.import(&fresh, target));
        assert_same_tables(&work, &fresh, &format!("unwound to {target}"));
        std::fs::remove_dir_all(&fresh).unwrap();
        (db, spec) = {
            let db = Database::open(&work).unwrap();
            let spec = loupe::import::load_spec(&db).unwrap().unwrap();
            (db, spec)
        };
    }
    // Back up to len - 2 block by block; then, in one transaction (a reorg): unwind 3 blocks
    // and import the last 5 on top of the uncommitted state.
    for block in &chain.blocks[head as usize..len as usize - 2] {
        import_block(&db, &spec, block, true).unwrap();
    }
    let mut w = db.begin_write().unwrap();
    for _ in 0..3 {
        w.unwind_head().unwrap();
    }
    for block in &chain.blocks[len as usize - 5..] {
        import_block_on_writer(&w, &spec, block).unwrap();
    }
    // import_block_on_writer moves only the head; a file's chain is final, as import has it.
    w.advance_head_with_markers(len, len, len).unwrap();
    w.commit(true).unwrap();
    drop(db);
    assert_same_tables(&work, &full, "unwound and imported again");

    // Genesis stays.
    let db = Database::open(&work).unwrap();
    let mut w = db.begin_write().unwrap();
    while w.head().unwrap() != Some(0) {
        w.unwind_head().unwrap();
    }
    let err = w.unwind_head().unwrap_err();
    assert!(err.to_string().contains("genesis"), "{err}");
}

#[test]
fn fixture_chain_unwinds_to_exactly_the_database_of_a_shorter_import() {
    let Some(fx) = Fixture::load() else { return };
    let chain = Chain {
        genesis: fx.genesis_text.clone(),
        blocks: fx.blocks.iter().map(|b| b.block.clone()).collect(),
    };
    assert_eq!(chain.blocks.len() as u64, CHAIN_LEN);
    check_chain(&chain, &[53, 40, 31, 12, 1]);
}

#[test]
fn generated_chain_unwinds_to_exactly_the_database_of_a_shorter_import() {
    check_chain(&generated_chain(), &[11, 7, 3, 0]);
}

/// A database that keeps the change lists of its newest `depth` blocks, with `chain` imported
/// up to `to`.
fn import_with_depth(chain: &Chain, dir: &Path, to: u64, depth: u64) -> (Database, ChainSpec) {
    let db = Database::open(dir).unwrap();
    let w = db.begin_write().unwrap();
    w.set_unwind_depth(depth).unwrap();
    w.commit(true).unwrap();
    let (spec, _) = init_genesis(&db, &chain.genesis).unwrap();
    for block in &chain.blocks[..to as usize] {
        import_block(&db, &spec, block, true).unwrap();
    }
    (db, spec)
}

/// The blocks that have change lists, from the table's keys (`block BE ++ kind`).
fn blocks_with_changes(dir: &Path) -> std::collections::BTreeSet<u64> {
    let (tables, _) = common::tables::dump_tables(dir);
    let name = redb::TableHandle::name(&loupe::storage::tables::BLOCK_CHANGES).to_string();
    tables[&name]
        .iter()
        .map(|(k, _)| {
            let bytes = common::tables::debug_bytes(k);
            u64::from_be_bytes(bytes[..8].try_into().unwrap())
        })
        .collect()
}

/// Only the newest blocks keep their change lists. With a depth of 5, a 12-block import keeps
/// those of blocks 8 to 12 (the default depth keeps all 12). Those five blocks unwind to the
/// database of an import of 7 blocks (but for the lists it pruned); block 7 cannot be unwound,
/// the error names it and the oldest kept block, and the aborted writer leaves the database as
/// it was. Importing 8 to 12 again gives exactly the database of a straight import.
#[test]
fn only_the_newest_blocks_keep_change_lists_and_deeper_unwinds_are_refused() {
    let chain = generated_chain();
    let tmp = tempfile::tempdir().unwrap();
    let (full, work, fresh, all) = (
        tmp.path().join("full"),
        tmp.path().join("work"),
        tmp.path().join("fresh"),
        tmp.path().join("all"),
    );
    drop(import_with_depth(&chain, &full, 12, 5));
    drop(chain.import(&all, 12));
    assert_eq!(blocks_with_changes(&all), (1..=12).collect());
    assert_eq!(blocks_with_changes(&full), (8..=12).collect());

    let (db, spec) = import_with_depth(&chain, &work, 12, 5);
    for _ in 0..5 {
        let mut w = db.begin_write().unwrap();
        w.unwind_head().unwrap();
        w.commit(true).unwrap();
    }
    let mut w = db.begin_write().unwrap();
    let err = w.unwind_head().unwrap_err().to_string();
    assert!(
        err.contains("cannot unwind block 7") && err.contains("oldest kept is block 8"),
        "{err}"
    );
    drop(w);
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(7));
    drop(db);

    drop(import_with_depth(&chain, &fresh, 7, 5));
    let (mut unwound, _) = common::tables::dump_tables(&work);
    let (mut shorter, _) = common::tables::dump_tables(&fresh);
    let lists = redb::TableHandle::name(&loupe::storage::tables::BLOCK_CHANGES).to_string();
    assert_eq!(unwound.remove(&lists), Some(vec![]));
    assert_eq!(blocks_with_changes(&fresh), (3..=7).collect());
    shorter.remove(&lists);
    let meta = redb::TableHandle::name(&loupe::storage::tables::META).to_string();
    for t in [&mut unwound, &mut shorter] {
        t.get_mut(&meta).unwrap().retain(|(k, _)| !k.contains("changes_from"));
    }
    for (name, rows) in &shorter {
        let other = &unwound[name];
        let only: Vec<_> = rows.iter().filter(|r| !other.contains(r)).take(2).collect();
        let extra: Vec<_> = other.iter().filter(|r| !rows.contains(r)).take(2).collect();
        assert!(
            rows == other,
            "unwound to 7 differs from an import of 7 beyond the change lists in table {name}: \
             only in the import {only:?}, only in the unwound {extra:?}"
        );
    }
    assert_eq!(unwound.len(), shorter.len());

    let db = Database::open(&work).unwrap();
    for block in &chain.blocks[7..] {
        import_block(&db, &spec, block, true).unwrap();
    }
    drop(db);
    common::tables::assert_same_tables(&work, &full, "unwound to 7 and imported again");
}

fn generated_chain() -> Chain {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gen");
    let mut config = loupe::dev::generate::GenerateConfig::new(&out, 500, 12);
    config.gas_limit = 8_000_000;
    config.quiet = true;
    loupe::dev::generate::generate(&config).unwrap();
    let genesis = std::fs::read_to_string(out.join("genesis.json")).unwrap();
    let file = std::fs::File::open(out.join("chain.rlp")).unwrap();
    let mut reader = BlockReader::new(std::io::BufReader::new(file));
    let mut blocks = Vec::new();
    while let Some(item) = reader.next_block() {
        blocks.push(item.unwrap().1);
    }
    assert_eq!(blocks.len(), 12);
    Chain { genesis, blocks }
}
