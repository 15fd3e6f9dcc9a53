//! Helpers shared by the integration tests: fixture location, fixture-derived truth (block
//! hashes, head hash, per-block byte ranges of `chain.rlp`) and state checks on a database.
//!
//! Everything "expected" comes from the fixture files (`genesis.json`, `chain.rlp`,
//! `headfcu.json`), never from loupe's own output.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::B256;
use loupe::import::BlockReader;
use loupe::storage::{Database, state_root_of};

/// Number of blocks after genesis in `chain.rlp`.
pub const CHAIN_LEN: u64 = 54;

#[path = "../support/fixtures.rs"]
mod fixture_dir;
pub use fixture_dir::fixtures;

/// One block of `chain.rlp` with its byte range and hash.
#[derive(Debug, Clone)]
pub struct RawBlock {
    /// First byte of the block in the file.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// The decoded block.
    pub block: Block<TxEnvelope>,
    /// Keccak of its header.
    pub hash: B256,
}

impl RawBlock {
    /// Block number.
    pub fn number(&self) -> u64 {
        self.block.header.number
    }
}

/// The fixture set, loaded.
#[derive(Debug)]
pub struct Fixture {
    /// Fixture directory.
    pub dir: PathBuf,
    /// genesis.json text.
    pub genesis_text: String,
    /// chain.rlp bytes.
    pub chain_bytes: Vec<u8>,
    /// The blocks of chain.rlp, in file order (`blocks[i]` is block i+1).
    pub blocks: Vec<RawBlock>,
    /// `headBlockHash` from headfcu.json.
    pub head_hash: B256,
}

impl Fixture {
    /// Loads the fixtures, or `None` (after a note) when they are absent outside CI.
    pub fn load() -> Option<Self> {
        let dir = fixtures()?;
        let genesis_text =
            std::fs::read_to_string(dir.join("genesis.json")).expect("read genesis.json");
        let chain_bytes = std::fs::read(dir.join("chain.rlp")).expect("read chain.rlp");
        let blocks = split_blocks(&chain_bytes);
        let head_hash = head_block_hash(&dir);
        Some(Self { dir, genesis_text, chain_bytes, blocks, head_hash })
    }

    /// Path of chain.rlp.
    pub fn chain_path(&self) -> PathBuf {
        self.dir.join("chain.rlp")
    }

    /// Path of genesis.json.
    pub fn genesis_path(&self) -> PathBuf {
        self.dir.join("genesis.json")
    }

    /// The fixture block with number `n` (1..=54).
    pub fn block(&self, n: u64) -> &RawBlock {
        let b = &self.blocks[(n - 1) as usize];
        assert_eq!(b.number(), n, "chain.rlp is not in block order");
        b
    }

    /// Raw bytes of block `n`.
    pub fn block_bytes(&self, n: u64) -> &[u8] {
        let b = self.block(n);
        &self.chain_bytes[b.start..b.end]
    }

    /// Hash of block `n` per the fixtures: genesis = parent hash of block 1, else keccak of the
    /// header in chain.rlp.
    pub fn hash(&self, n: u64) -> B256 {
        if n == 0 { self.block(1).block.header.parent_hash } else { self.block(n).hash }
    }
}

/// Splits concatenated RLP blocks with loupe's [`BlockReader`], recording each block's bytes.
/// The ranges are checked to tile the file exactly, and the header hash is recomputed here.
pub fn split_blocks(bytes: &[u8]) -> Vec<RawBlock> {
    let mut reader = BlockReader::new(bytes);
    let mut starts_blocks = Vec::new();
    while let Some(next) = reader.next_block() {
        let (offset, block) = next.expect("chain.rlp decodes");
        starts_blocks.push((offset as usize, block));
    }
    let mut out = Vec::with_capacity(starts_blocks.len());
    for i in 0..starts_blocks.len() {
        let end = starts_blocks.get(i + 1).map_or(bytes.len(), |(s, _)| *s);
        let (start, block) = starts_blocks[i].clone();
        let hash = block.header.hash_slow();
        out.push(RawBlock { start, end, block, hash });
    }
    assert_eq!(out.first().map(|b| b.start), Some(0), "first block must start at byte 0");
    out
}

/// `headBlockHash` of the forkchoice state in headfcu.json.
pub fn head_block_hash(dir: &Path) -> B256 {
    let text = std::fs::read_to_string(dir.join("headfcu.json")).expect("read headfcu.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("headfcu.json is JSON");
    let s = v["params"][0]["headBlockHash"].as_str().expect("params[0].headBlockHash");
    s.parse().expect("headBlockHash is a 32-byte hex")
}

/// Writes `parts` concatenated into `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, parts: &[&[u8]]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, parts.concat()).expect("write temp chain file");
    path
}

/// Checks that the stored state after `n` hashes to the state root of stored header `n`, reading
/// every account and slot through `state_at(n)` (the history path for `n` below head).
pub fn assert_state_root(db: &Database, n: u64) {
    let reader = db.begin_read().expect("begin_read");
    let header =
        reader.header(n).expect("read header").unwrap_or_else(|| panic!("header {n} missing"));
    let dump = reader.state_at(n).expect("state_at").dump().expect("dump");
    assert_eq!(
        state_root_of(&dump),
        header.state_root,
        "state root of the stored state after block {n}"
    );
}

/// Checks the canonical chain 0..=head against the fixture hashes and that nothing above head
/// is stored; returns head.
pub fn assert_chain_prefix(db: &Database, fx: &Fixture) -> u64 {
    let reader = db.begin_read().expect("begin_read");
    let head = reader.head().expect("head").expect("datadir initialised");
    for n in 0..=head {
        assert_eq!(
            reader.canonical_hash(n).expect("canonical"),
            Some(fx.hash(n)),
            "canonical hash of #{n}"
        );
        let header =
            reader.header(n).expect("header").unwrap_or_else(|| panic!("header {n} missing"));
        if n > 0 {
            assert_eq!(
                header,
                fx.block(n).block.header,
                "stored header #{n} differs from chain.rlp"
            );
        }
    }
    assert_eq!(
        reader.canonical_hash(head + 1).expect("canonical"),
        None,
        "block above head stored"
    );
    assert!(reader.header(head + 1).expect("header").is_none(), "header above head stored");
    assert!(reader.receipts(head + 1).expect("receipts").is_none(), "receipts above head stored");
    head
}

/// A genesis.json as a datadir stores it: the same JSON with an empty `alloc` (the allocation
/// lives in the state tables).
pub fn stored_genesis(text: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(text).expect("genesis JSON");
    v["alloc"] = serde_json::json!({});
    v
}

pub mod tables;
