//! RLP block decoding (the import file reader) and block import on mutated valid blocks: a
//! decoding or verification error names what was wrong, never a panic, and nothing is stored.
//!
//! The dev chain's blocks are the seeds. A decoded block numbered n is imported on top of a
//! copy of the dev chain whose head is n-1 (one copy per height, made at start by unwinding,
//! so an execution imports one block and unwinds nothing), with `import_block_pending` in a
//! write transaction that is then dropped: the same `store_block` as `import_block`. The
//! committed chains never change. A block other than the stored one may import only if its
//! body is the stored block's and its header differs in fields the consensus layer chooses
//! within the header rules (FUZZING.md: `prevRandao`, `extraData`, gas limit, timestamp).

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

use loupe::storage::Database;
use serde_json::json;

const HEAD: u64 = 20;

fuzz_target!(
    init: {
        let node = loupe_fuzz::dev_node();
        let _ = bases();
        let seeds = (1..=HEAD).map(|n| {
            let raw = node.call("debug_getRawBlock", json!([format!("{n:#x}")]));
            let hex = raw.as_str().unwrap_or_default().trim_start_matches("0x").to_string();
            alloy_primitives::hex::decode(hex).unwrap_or_default()
        });
        loupe_fuzz::write_seeds(seeds);
    },
    |data: &[u8]| {
        let node = loupe_fuzz::dev_node();
        let mut reader = loupe::import::BlockReader::new(data);
        let block = match reader.next_block() {
            None => return,
            Some(Err(e)) => {
                assert!(!e.to_string().is_empty());
                return;
            }
            Some(Ok((_, block))) => block,
        };
        let n = block.header.number;
        let stored = |n| node.db.begin_read().and_then(|r| r.canonical_hash(n)).ok().flatten();
        let before = stored(n);
        if n == 0 || n > HEAD {
            // Genesis is never imported; past the head, the parent is missing.
            let r = loupe::import::import_block(&node.db, &node.spec, &block, false);
            assert!(!matches!(r, Ok(loupe::import::BlockStatus::Imported)), "block {n} imported");
        } else {
            let base = &bases()[n as usize - 1];
            let writer = base.begin_write().expect("writer");
            match loupe::import::import_block_pending(&writer, &node.spec, &block) {
                Ok(hash) if Some(hash) != before => {
                    let reader = node.db.begin_read().expect("reader");
                    let (mut body, _) = reader.body(n).ok().flatten().expect("stored body");
                    let txs = reader.transactions(n).expect("stored transactions");
                    body.transactions = txs.into_iter().map(|t| t.tx).collect();
                    assert_eq!(body, block.body, "another body imported as #{n}");
                    // Only what the consensus layer chooses may differ, within the header
                    // rules: prevRandao, extraData within its 32 bytes, the gas limit within
                    // 1/1024 of the parent's (and not below the gas used), and a timestamp not
                    // before the parent's. The roots catch any effect on execution.
                    let mut header = reader.header(n).ok().flatten().expect("stored header");
                    let parent = reader.header(n - 1).ok().flatten().expect("stored parent");
                    let theirs = &block.header;
                    header.mix_hash = theirs.mix_hash;
                    if theirs.extra_data.len() <= 32 {
                        header.extra_data = theirs.extra_data.clone();
                    }
                    let step = parent.gas_limit / 1024;
                    if theirs.gas_limit.abs_diff(parent.gas_limit) < step
                        && theirs.gas_limit >= theirs.gas_used.max(5000)
                    {
                        header.gas_limit = theirs.gas_limit;
                    }
                    if theirs.timestamp >= parent.timestamp {
                        header.timestamp = theirs.timestamp;
                    }
                    assert_eq!(header, block.header, "an invalid header imported as #{n}");
                }
                Ok(_) => {}
                Err(e) => assert!(!e.to_string().is_empty()),
            }
            drop(writer);
            let base_head = base.begin_read().and_then(|r| r.head()).ok().flatten();
            assert_eq!(base_head, Some(n - 1), "the copy's head moved");
        }
        let head = node.db.begin_read().and_then(|r| r.head()).ok().flatten();
        assert_eq!(head, Some(HEAD), "the stored head moved");
        assert_eq!(stored(n), before, "block {n} changed");
    }
);

/// Copies of the dev chain with heads 0..HEAD-1 (index n-1 holds the parent of block n).
fn bases() -> &'static [Database] {
    static BASES: LazyLock<(tempfile::TempDir, Vec<Database>)> = LazyLock::new(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().join("work");
        loupe_fuzz::dev_node().db.copy_to(&work).expect("copy");
        let work = Database::open(&work).expect("open copy");
        let mut bases = Vec::new();
        for n in (0..HEAD).rev() {
            let mut writer = work.begin_write().expect("writer");
            while writer.head().ok().flatten().is_some_and(|h| h > n) {
                writer.unwind_head().expect("unwind");
            }
            writer.commit(true).expect("commit");
            let at = dir.path().join(format!("head-{n}"));
            work.copy_to(&at).expect("copy");
            bases.push(Database::open(&at).expect("open copy"));
        }
        bases.reverse();
        (dir, bases)
    });
    &BASES.1
}
