//! era1 history through the real binary: mainnet's first epoch (the fixture) imported, executed
//! and verified; damaged copies refused before any of their blocks runs, with the blocks
//! imported before them kept; and `loupe export --era1` writing a file with the original's
//! accumulator root, which imports again.
//!
//! Then the second epoch's file (blocks 8,192–16,383) on top: a self-consistent copy that is not
//! mainnet's epoch 1 is refused by its accumulator root, and the real one imports with every root
//! verified, its last block's hash the head's.
//!
//! Truth comes from the fixture: the file's accumulator root is mainnet's epoch-0 root (its name
//! carries it), epoch 1's is the published historical hashes accumulator's (recomputed here from
//! the file's records apart from the importer), and its genesis is mainnet's (hash 0xd4e5…8fa3).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use alloy_primitives::{B256, b256};

#[path = "support/era1.rs"]
mod era1_fixture;
use era1_fixture::{FIXTURE, blocks, decompressed, fixtures, records, rlp_blocks};

const ROOT: B256 = b256!("0x5ec1ffb8c3b146f42606c74ced973dc16ec5a107c0345858c343fc94780b4218");
const MAINNET_GENESIS: B256 =
    b256!("0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3");
const LAST: u64 = 8191;
/// The fixture folder's second file, mainnet's blocks 8,192–16,383 (issue 61's fixtures).
const NEXT: &str = "mainnet-00001-a5364e9a.era1";

fn loupe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().expect("run loupe")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A datadir initialised by `loupe init --chain mainnet`, whose genesis hash must be mainnet's.
fn init_mainnet(_fixtures: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let datadir = dir.path().join("data");
    let out = loupe(&["init", "--datadir", path(&datadir), "--chain", "mainnet"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&MAINNET_GENESIS.to_string()),
        "not mainnet's genesis: {}",
        text(&out)
    );
    dir
}

fn datadir(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("data")
}

fn head(datadir: &Path) -> u64 {
    let db = loupe::storage::Database::open(datadir).unwrap();
    db.begin_read().unwrap().head().unwrap().unwrap()
}

/// `loupe import` of `files` into `datadir`; the output and the time it took.
fn import(datadir: &Path, files: &[&Path]) -> (Output, std::time::Duration) {
    let mut args = vec!["import", "--datadir", path(datadir)];
    args.extend(files.iter().map(|f| path(f)));
    let started = Instant::now();
    let out = loupe(&args);
    (out, started.elapsed())
}

/// The accumulator record of an era1 file.
fn accumulator(bytes: &[u8]) -> B256 {
    let (at, _, len) = *records(bytes).iter().find(|r| r.1 == 0x07).expect("an accumulator");
    assert_eq!(len, 32);
    B256::from_slice(&bytes[at + 8..at + 40])
}

/// One test, so that a test runner with a process per test (nextest) imports the 8,191 blocks
/// only twice (the fixture, and the file exported from it), then the next epoch's once.
#[test]
fn the_fixture_imports_verifies_reimports_as_a_no_op_and_exports_to_its_own_root() {
    let Some(fx) = fixtures() else { return };
    let dir = init_mainnet(&fx);
    let data = datadir(&dir);
    let (out, took) = import(&data, &[&fx.join(FIXTURE)]);
    assert!(out.status.success(), "{}", text(&out));
    eprintln!("imported the fixture's 8,191 blocks in {took:.2?}: {}", text(&out).trim());
    assert!(took.as_secs() < 120, "8,191 empty blocks took {took:.1?}");
    assert_eq!(head(&data), LAST);
    let out = loupe(&["verify", "--datadir", path(&data)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("verified head #8191"), "{}", text(&out));
    // Again: every block is already stored.
    let (out, again) = import(&data, &[&fx.join(FIXTURE)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("nothing to import: all 8192 blocks already stored (head #8191)"),
        "{}",
        text(&out)
    );
    eprintln!("imported the fixture again (a no-op) in {again:.2?}");
    assert_eq!(head(&data), LAST);
    exported_again(&fx, &data);
    // Through the folder, which also holds the next epoch's file (blocks 8,192–16,383): the
    // stored epoch is skipped and the next one imported, every block executed and its roots
    // checked against its header.
    assert!(fx.join(NEXT).is_file(), "{NEXT} missing from {}", fx.display());
    let next = std::fs::read(fx.join(NEXT)).unwrap();
    let epoch_1 = published_epoch_root(&fx, 1);
    assert_eq!(accumulator(&next), epoch_1, "{NEXT} carries the published epoch-1 root");
    not_epoch_1(&data, &next, epoch_1);
    let (out, took) = import(&data, &[&fx]);
    assert!(out.status.success(), "{}", text(&out));
    eprintln!("imported the next epoch through the folder in {took:.2?}");
    assert_eq!(head(&data), 2 * LAST + 1);
    // The head is the file's last block, by hash.
    let last = decompressed(&next, records(&next)[1 + 4 * LAST as usize]);
    let db = loupe::storage::Database::open(&data).unwrap();
    let stored = db.begin_read().unwrap().canonical_hash(2 * LAST + 1).unwrap();
    assert_eq!(stored, Some(alloy_primitives::keccak256(&last)), "block 16,383's hash");
    drop(db);
    let out = loupe(&["verify", "--datadir", path(&data)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("verified head #16383"), "{}", text(&out));
}

/// Epoch `epoch`'s root in the published historical hashes accumulator (EIP-7643's SSZ in the
/// fixture folder: two 4-byte offsets, then the roots).
fn published_epoch_root(fx: &Path, epoch: usize) -> B256 {
    let ssz = std::fs::read(fx.join("mainnet-historical-hashes-accumulator.ssz")).unwrap();
    assert_eq!(u32::from_le_bytes(ssz[..4].try_into().unwrap()), 8);
    B256::from_slice(&ssz[8 + 32 * epoch..8 + 32 * (epoch + 1)])
}

/// SSZ `hash_tree_root(List[HeaderRecord, 8192])` of a full epoch's (hash, total difficulty)
/// records, computed here apart from the importer's code.
fn epoch_accumulator(records: &[(B256, [u8; 32])]) -> B256 {
    use sha2::{Digest, Sha256};
    let pair = |a: &[u8], b: &[u8]| -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(a);
        h.update(b);
        h.finalize().into()
    };
    assert_eq!(records.len(), 8192, "a full epoch");
    let mut level: Vec<[u8; 32]> = records.iter().map(|(h, td)| pair(h.as_slice(), td)).collect();
    while level.len() > 1 {
        level = level.chunks(2).map(|c| pair(&c[0], &c[1])).collect();
    }
    let mut length = [0u8; 32];
    length[..8].copy_from_slice(&(records.len() as u64).to_le_bytes());
    B256::from(pair(&level[0], &length))
}

/// A copy of the epoch-1 file with its last header changed and its accumulator record set to
/// the root of the changed headers (so the file is consistent in itself) is refused as not
/// mainnet's epoch 1, before any of its blocks runs; the head stays at the first epoch's end.
fn not_epoch_1(data: &Path, next: &[u8], epoch_1: B256) {
    let changed = with_changed_header(next, LAST as usize);
    let recs = records(&changed);
    let pairs: Vec<(B256, [u8; 32])> = (0..=LAST as usize)
        .map(|i| {
            let hash = alloy_primitives::keccak256(decompressed(&changed, recs[1 + 4 * i]));
            let (at, kind, len) = recs[4 + 4 * i];
            assert_eq!((kind, len), (0x06, 32), "block {i}'s total difficulty record");
            (hash, changed[at + 8..at + 40].try_into().unwrap())
        })
        .collect();
    // The importer's own computation agrees on the untouched file.
    let r = records(next);
    let original: Vec<(B256, [u8; 32])> = (0..=LAST as usize)
        .map(|i| {
            let (at, _, _) = r[4 + 4 * i];
            (
                alloy_primitives::keccak256(decompressed(next, r[1 + 4 * i])),
                next[at + 8..at + 40].try_into().unwrap(),
            )
        })
        .collect();
    assert_eq!(epoch_accumulator(&original), epoch_1, "the accumulator computed here");
    let root = epoch_accumulator(&pairs);
    let mut bytes = changed;
    let (at, _, _) = *recs.iter().find(|r| r.1 == 0x07).unwrap();
    bytes[at + 8..at + 40].copy_from_slice(root.as_slice());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join(NEXT);
    std::fs::write(&file, &bytes).unwrap();
    let (out, _) = import(data, &[&file]);
    assert!(!out.status.success(), "{}", text(&out));
    let expected =
        format!("accumulator root {root} is not mainnet's known root of epoch 1: {epoch_1}");
    assert!(text(&out).contains(&expected), "{expected:?} not in {}", text(&out));
    assert_eq!(head(data), LAST);
}

/// A copy of the fixture with block `number`'s header changed (one byte of its mix hash) and
/// compressed again, at the same length so that the block index still fits.
fn with_changed_header(original: &[u8], number: usize) -> Vec<u8> {
    let (at, kind, len) = records(original)[1 + 4 * number];
    assert_eq!(kind, 0x03, "block {number}'s header record");
    let mut rlp = Vec::new();
    snap::read::FrameDecoder::new(&original[at + 8..at + 8 + len]).read_to_end(&mut rlp).unwrap();
    let mut header: alloy_consensus::Header =
        alloy_rlp::Decodable::decode(&mut rlp.as_slice()).unwrap();
    for value in 1..=255u8 {
        header.mix_hash.0[7] ^= value;
        let mut changed = Vec::new();
        alloy_rlp::Encodable::encode(&header, &mut changed);
        let mut compressed = Vec::new();
        snap::read::FrameEncoder::new(changed.as_slice()).read_to_end(&mut compressed).unwrap();
        if compressed.len() == len {
            let mut bytes = original.to_vec();
            bytes[at + 8..at + 8 + len].copy_from_slice(&compressed);
            return bytes;
        }
        header.mix_hash.0[7] ^= value;
    }
    panic!("no one-byte change of block {number}'s mix hash compresses to {len} bytes");
}

#[test]
fn damaged_copies_are_refused_and_the_blocks_before_them_kept() {
    let Some(fx) = fixtures() else { return };
    let original = std::fs::read(fx.join(FIXTURE)).unwrap();
    let work = tempfile::tempdir().unwrap();
    // Blocks 1..=100 of the fixture as an RLP chain file.
    let prefix = work.path().join("prefix.rlp");
    std::fs::write(&prefix, rlp_blocks(&original, 1, 100)).unwrap();

    let header = with_changed_header(&original, 5000);
    let mut accumulator = original.clone();
    let (at, _, _) = *records(&original).iter().find(|r| r.1 == 0x07).unwrap();
    accumulator[at + 8 + 5] ^= 0x01;
    let cut = original.len() / 2;
    let truncated = original[..cut].to_vec();
    let bad_root = {
        let mut r = ROOT;
        r.0[5] ^= 0x01;
        r
    };
    let cases: [(&str, Vec<u8>, String); 3] = [
        ("header", header, "block 5001: header hash chain broken: parent hash 0x".to_string()),
        ("accumulator", accumulator, format!("differs from the file's {bad_root}")),
        ("truncated", truncated, format!("file ends at byte {cut} inside the record at byte ")),
    ];
    for (name, bytes, expected) in cases {
        let file = work.path().join(format!("{name}-{FIXTURE}"));
        std::fs::write(&file, &bytes).unwrap();
        let fresh = init_mainnet(&fx);
        let data = datadir(&fresh);
        // The RLP prefix and the damaged file in one run: the prefix is stored, the file not.
        let (out, took) = import(&data, &[&prefix, &file]);
        assert!(!out.status.success(), "{name}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let named = format!("{name}-{FIXTURE}: refused before any of its blocks ran: ");
        assert!(err.contains(&named), "{name}: the file is named: {err}");
        assert!(err.contains(&expected), "{name}: {expected:?} not in: {err}");
        assert_eq!(head(&data), 100, "{name}: the blocks before the file are kept");
        eprintln!("{name}: refused in {took:.2?}: {}", err.trim());
        // And alone, on top of them: refused again, nothing of it stored.
        let (out, _) = import(&data, &[&file]);
        assert!(!out.status.success() && text(&out).contains(&expected), "{name}: {}", text(&out));
        assert_eq!(head(&data), 100, "{name}");
    }
    // The chain broken at block 5001 names both hashes: the file's parent hash of block 5001
    // (the original block 5000's hash) and the changed block 5000's.
    let changed = work.path().join(format!("header-{FIXTURE}"));
    let fresh = init_mainnet(&fx);
    let (out, _) = import(&datadir(&fresh), &[&changed]);
    let err = text(&out);
    let original_5000 = {
        let rlp = decompressed(&original, records(&original)[1 + 4 * 5001]);
        let header: alloy_consensus::Header =
            alloy_rlp::Decodable::decode(&mut rlp.as_slice()).unwrap();
        header.parent_hash
    };
    assert!(
        err.contains(&format!("parent hash {original_5000} is not block 5000's hash 0x")),
        "{err}"
    );
    assert_eq!(head(&datadir(&fresh)), 0);
}

/// Mainnet's pre-Byzantium blocks without transactions have no receipt to carry an
/// intermediate root, so a grouped import checks their state roots once per group like any
/// other block's. A crafted RLP file of blocks 1–100 whose block 60 claims another state root
/// (the later blocks linked to it again, so that only the root tells) is refused naming block
/// 60 and its root, and blocks 1–59 are kept, with the state that verifies.
#[test]
fn a_wrong_state_root_among_empty_pre_byzantium_blocks_is_named_and_the_blocks_before_kept() {
    let Some(fx) = fixtures() else { return };
    let original = std::fs::read(fx.join(FIXTURE)).unwrap();
    let mut parent = None;
    let mut bytes = Vec::new();
    for mut block in blocks(&original, 1, 100) {
        assert!(block.body.transactions.is_empty(), "block {} has none", block.header.number);
        if block.header.number == 60 {
            block.header.state_root.0[3] ^= 0x40;
        }
        if let Some(hash) = parent {
            block.header.parent_hash = hash;
        }
        if block.header.number >= 60 {
            parent = Some(block.header.hash_slow());
        }
        alloy_rlp::Encodable::encode(&block, &mut bytes);
    }
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("root-60.rlp");
    std::fs::write(&file, &bytes).unwrap();
    let fresh = init_mainnet(&fx);
    let data = datadir(&fresh);
    let (out, _) = import(&data, &[&file]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = text(&out);
    assert!(err.contains("#60") && err.contains("state root"), "block 60's root named: {err}");
    assert_eq!(head(&data), 59, "the blocks before it are kept: {err}");
    let out = loupe(&["verify", "--datadir", path(&data)]);
    assert!(text(&out).contains("verified head #59"), "{}", text(&out));
}

/// `loupe export --era1` of epoch 0 from `data` (the fixture imported): a file named and
/// rooted as the original, with the same content, that imports into a fresh datadir.
fn exported_again(fx: &Path, data: &Path) {
    let out_dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = loupe(&[
        "export",
        "--datadir",
        path(data),
        "--era1",
        path(out_dir.path()),
        "--from",
        "0",
        "--to",
        "8191",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    eprintln!("exported epoch 0 in {:.2?}: {}", started.elapsed(), text(&out).trim());
    let names: Vec<String> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![FIXTURE.to_string()], "one file, named for its root");
    let exported = std::fs::read(out_dir.path().join(FIXTURE)).unwrap();
    assert_eq!(accumulator(&exported), ROOT);
    let original = std::fs::read(fx.join(FIXTURE)).unwrap();
    // Record for record the same content: headers, bodies and receipts decompress to the same
    // RLP (the compressed bytes may differ between snappy implementations), the same total
    // difficulties and accumulator, the same index start and count.
    let (ours, theirs) = (records(&exported), records(&original));
    assert_eq!(ours.len(), theirs.len());
    let content = |bytes: &[u8], (at, kind, len): (usize, u16, usize)| {
        let data = &bytes[at + 8..at + 8 + len];
        let mut out = Vec::new();
        if (0x03..=0x05).contains(&kind) {
            snap::read::FrameDecoder::new(data).read_to_end(&mut out).unwrap();
        } else if kind == 0x3266 {
            // The index's offsets follow the compressed lengths: its start and count.
            out.extend_from_slice(&data[..8]);
            out.extend_from_slice(&data[len - 8..]);
        } else {
            out.extend_from_slice(data);
        }
        (kind, out)
    };
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(content(&exported, *a), content(&original, *b), "record {i}");
    }
    eprintln!("the exported file is byte-identical to the original: {}", exported == original);

    // Into a fresh datadir, through the folder.
    let fresh = init_mainnet(fx);
    let (out, took) = import(&datadir(&fresh), &[out_dir.path()]);
    assert!(out.status.success(), "{}", text(&out));
    eprintln!("imported the exported file in {took:.2?}");
    assert_eq!(head(&datadir(&fresh)), LAST);

    // Another range of the same epoch is the same file; a range past the head writes nothing.
    let again = tempfile::tempdir().unwrap();
    let out = loupe(&[
        "export",
        "--datadir",
        path(data),
        "--era1",
        path(again.path()),
        "--from",
        "100",
        "--to",
        "200",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(again.path().join(FIXTURE)).unwrap(), exported);
    let out =
        loupe(&["export", "--datadir", path(data), "--era1", path(again.path()), "--from", "9000"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("no era1 file written"), "{}", text(&out));
}
