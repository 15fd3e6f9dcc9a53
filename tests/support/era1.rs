//! The era1 fixture (mainnet's first epoch) for tests: where it is, its records, and its blocks.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io::Read;
use std::path::{Path, PathBuf};

use alloy_consensus::{Block, BlockBody, Header, TxEnvelope};

/// The fixture's file name.
pub const FIXTURE: &str = "mainnet-00000-5ec1ffb8.era1";

#[path = "missing.rs"]
#[allow(clippy::duplicate_mod)] // also loaded by the other fixture locators a test binary includes
mod missing;

/// The era1 fixture folder: `$LOUPE_ERA1_FIXTURES`, else `../shared/fixtures/mainnet-era1`
/// beside the repository. Missing: the test fails, naming `scripts/fetch-fixtures.sh
/// mainnet-era1` (`Some` always; the `Option` keeps the callers' `let … else`).
pub fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_ERA1_FIXTURES") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mainnet-era1"),
    };
    if dir.join(FIXTURE).is_file() {
        return Some(dir);
    }
    missing::missing_fixtures("mainnet-era1", &dir, "LOUPE_ERA1_FIXTURES")
}

/// The records of an era1 file: (offset, type, data length).
pub fn records(bytes: &[u8]) -> Vec<(usize, u16, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let len = u32::from_le_bytes(bytes[at + 2..at + 6].try_into().unwrap()) as usize;
        out.push((at, kind, len));
        at += 8 + len;
    }
    out
}

/// The decompressed data of `record` of `bytes`.
pub fn decompressed(bytes: &[u8], (at, _, len): (usize, u16, usize)) -> Vec<u8> {
    let mut out = Vec::new();
    snap::read::FrameDecoder::new(&bytes[at + 8..at + 8 + len]).read_to_end(&mut out).unwrap();
    out
}

/// Blocks `from..=to` of an era1 file that starts at block 0.
pub fn blocks(era1: &[u8], from: usize, to: usize) -> Vec<Block<TxEnvelope>> {
    let records = records(era1);
    (from..=to)
        .map(|n| {
            let header: Header =
                alloy_rlp::Decodable::decode(&mut &decompressed(era1, records[1 + 4 * n])[..])
                    .unwrap();
            let body: BlockBody<TxEnvelope> =
                alloy_rlp::Decodable::decode(&mut &decompressed(era1, records[2 + 4 * n])[..])
                    .unwrap();
            Block { header, body }
        })
        .collect()
}

/// Blocks `from..=to` of an era1 file (starting at block 0) as an RLP chain file.
pub fn rlp_blocks(era1: &[u8], from: usize, to: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for block in blocks(era1, from, to) {
        alloy_rlp::Encodable::encode(&block, &mut out);
    }
    out
}

/// The fixture's bytes.
pub fn fixture_bytes() -> Option<Vec<u8>> {
    Some(std::fs::read(fixtures()?.join(FIXTURE)).unwrap())
}
