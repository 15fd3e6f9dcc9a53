//! Tests of era1 reading and checking: the mainnet fixture's accumulator, and small files
//! written here, whole and damaged.

use std::io::{BufReader, Cursor};
use std::path::PathBuf;

use alloy_consensus::{
    EMPTY_OMMER_ROOT_HASH, EMPTY_ROOT_HASH, Header, ReceiptEnvelope, TxEnvelope,
};
use alloy_primitives::{B256, U256, b256};

use super::accumulator::known_epoch_roots;
use super::read::{Era1File, read_file};
use super::write::EpochWriter;
use super::*;

/// The era1 fixture folder: `$LOUPE_ERA1_FIXTURES`, else `../shared/fixtures/mainnet-era1` from
/// the repository. Missing: the test fails, naming the command that fetches it (`Some`
/// always; the `Option` keeps the callers' `let … else`).
fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_ERA1_FIXTURES") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mainnet-era1"),
    };
    if dir.join(FIXTURE).is_file() {
        return Some(dir);
    }
    panic!(
        "the mainnet-era1 fixtures are not at {}: fetch them from their public source (pinned \
         commit, every file checked against its sha256) with\n    {}/scripts/fetch-fixtures.sh \
         mainnet-era1\nor set LOUPE_ERA1_FIXTURES to where they are",
        dir.display(),
        env!("CARGO_MANIFEST_DIR")
    )
}

const FIXTURE: &str = "mainnet-00000-5ec1ffb8.era1";

/// Reads `bytes` as an era1 file, none of its blocks stored.
fn read(bytes: &[u8]) -> Result<Era1File, SourceError> {
    let mut r = BufReader::new(Cursor::new(bytes));
    read_file(&mut r, bytes.len() as u64, None, |_, _| Ok(()))
}

#[test]
fn the_fixtures_accumulator_root_is_mainnet_epoch_0s() {
    let Some(dir) = fixtures() else { return };
    let bytes = std::fs::read(dir.join(FIXTURE)).unwrap();
    let started = std::time::Instant::now();
    let file = read(&bytes).unwrap();
    eprintln!("read and checked 8,192 blocks in {:?}", started.elapsed());
    let root = b256!("0x5ec1ffb8c3b146f42606c74ced973dc16ec5a107c0345858c343fc94780b4218");
    assert_eq!(file.root, root);
    assert_eq!(known_epoch_roots(1).unwrap().1[0], root);
    assert_eq!((file.start(), file.end(), file.headers.len()), (0, 8191, 8192));
    assert_eq!(
        file.headers[0].1,
        b256!("0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3")
    );
    // The genesis difficulty counts: the first total difficulty is it.
    assert_eq!(file.total_difficulties[0], file.headers[0].0.difficulty);
    // Every body is read again from its offset.
    let mut r = BufReader::new(Cursor::new(&bytes));
    let mut position = 0;
    for (i, (_, body_at)) in file.offsets.iter().enumerate().step_by(1000).rev() {
        let body = read::read_body(&mut r, &mut position, *body_at, bytes.len() as u64).unwrap();
        assert!(body.transactions.is_empty(), "block {i}");
    }
}

/// A chain of `n` empty proof-of-work blocks on top of a made-up genesis.
fn chain(n: u64) -> Vec<Header> {
    let mut headers: Vec<Header> = Vec::new();
    for number in 0..n {
        let parent_hash = headers.last().map(Header::hash_slow).unwrap_or_default();
        headers.push(Header {
            number,
            parent_hash,
            difficulty: U256::from(131_072 + number),
            transactions_root: EMPTY_ROOT_HASH,
            receipts_root: EMPTY_ROOT_HASH,
            ommers_hash: EMPTY_OMMER_ROOT_HASH,
            gas_limit: 5000,
            timestamp: number * 15,
            ..Default::default()
        });
    }
    headers
}

/// `headers` as an era1 file, total difficulties summed from the first; its bytes and root.
fn write(headers: &[Header]) -> (Vec<u8>, B256) {
    write_after(headers, U256::ZERO)
}

/// [`write`], the total difficulties summed from `td_before`.
fn write_after(headers: &[Header], td_before: U256) -> (Vec<u8>, B256) {
    let mut w = EpochWriter::new(Vec::new());
    let mut td = td_before;
    let body = alloy_consensus::BlockBody::<TxEnvelope> {
        transactions: vec![],
        ommers: vec![],
        withdrawals: None,
    };
    for h in headers {
        td += h.difficulty;
        w.add(h, &body, &[] as &[ReceiptEnvelope], td).unwrap();
    }
    let (root, last, bytes) = w.finish().unwrap();
    assert_eq!(last, headers.last().unwrap().number);
    (bytes, root)
}

/// Offsets of each record of `bytes`: (offset, type, data length).
fn records(bytes: &[u8]) -> Vec<(usize, u16, usize)> {
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

#[test]
fn a_written_file_reads_back_with_its_root() {
    let headers = chain(5);
    let (bytes, root) = write(&headers);
    let file = read(&bytes).unwrap();
    assert_eq!(file.root, root);
    assert_eq!(
        file.headers.iter().map(|(_, h)| *h).collect::<Vec<_>>(),
        headers.iter().map(Header::hash_slow).collect::<Vec<_>>()
    );
    // Version, 5 x 4 records, accumulator, index.
    let kinds: Vec<u16> = records(&bytes).iter().map(|r| r.1).collect();
    assert_eq!(kinds.len(), 1 + 5 * 4 + 2);
    assert_eq!((kinds[0], kinds[21], kinds[22]), (0x3265, 0x07, 0x3266));
}

#[test]
fn damaged_files_are_refused_naming_what_is_wrong() {
    let headers = chain(5);
    let (good, root) = write(&headers);
    let recs = records(&good);
    let message = |bytes: &[u8]| read(bytes).unwrap_err().to_string();

    // A broken hash chain: block 3's parent hash is not block 2's hash.
    let mut broken = headers.clone();
    broken[2].extra_data = vec![1].into();
    let (bytes, _) = write(&broken);
    let m = message(&bytes);
    assert!(m.starts_with("block 3: header hash chain broken: parent hash"), "{m}");
    assert!(m.contains(&format!("is not block 2's hash {}", broken[2].hash_slow())), "{m}");

    // The last header changed: only the accumulator can tell.
    let mut last = headers.clone();
    last[4].extra_data = vec![1].into();
    let (mut bytes, new_root) = write(&last);
    let acc = recs[21].0 + 8;
    bytes[acc..acc + 32].copy_from_slice(root.as_slice());
    assert_eq!(
        message(&bytes),
        format!(
            "accumulator root {new_root} computed from the headers differs from the file's {root}"
        )
    );

    // A total difficulty off by one.
    let mut bytes = good.clone();
    let td = recs[4 + 4].0 + 8; // block 1's
    bytes[td] ^= 1;
    let m = message(&bytes);
    assert!(m.starts_with("block 1: total difficulty is not the previous one plus"), "{m}");

    // Cut short, inside a record and at a record's end.
    let m = message(&good[..recs[10].0 + 11]);
    assert_eq!(
        m,
        format!(
            "file ends at byte {} inside the record at byte {} (truncated?)",
            recs[10].0 + 11,
            recs[10].0
        )
    );
    let m = message(&good[..recs[13].0]);
    assert!(m.contains("after 3 blocks, without its accumulator and block index"), "{m}");

    // An index offset that points elsewhere, and bytes after the index.
    let mut bytes = good.clone();
    let index = recs[22].0 + 8;
    bytes[index + 8 + 8] ^= 0x10; // block 1's offset
    assert!(message(&bytes).starts_with("block index: block 1's offset"), "{}", message(&bytes));
    let mut bytes = good.clone();
    bytes.extend_from_slice(&[0; 8]);
    assert!(message(&bytes).contains("is followed by 8 more bytes"), "{}", message(&bytes));

    // A body where a receipts record is due.
    let mut bytes = good.clone();
    bytes[recs[3].0] = 0x04;
    assert_eq!(
        message(&bytes),
        format!(
            "record at byte {} is a body record (type 0x0004) where the block's receipts is due",
            recs[3].0
        )
    );

    // A header whose transactions root does not fit its (empty) body.
    let mut rooted = headers;
    rooted[1].transactions_root = B256::repeat_byte(7);
    for i in 2..5 {
        rooted[i].parent_hash = rooted[i - 1].hash_slow();
    }
    let (bytes, _) = write(&rooted);
    let m = message(&bytes);
    assert!(
        m.starts_with(
            "block 1: transactions root of the body is not the header's: expected 0x0707"
        ),
        "{m}"
    );
    // Not checked for a block already stored, whose hash is all the import compares.
    let mut r = BufReader::new(Cursor::new(&bytes));
    assert!(read_file(&mut r, bytes.len() as u64, Some(4), |_, _| Ok(())).is_ok());

    // Not snappy: a header record's data changed.
    let mut bytes = good;
    bytes[recs[1].0 + 8 + 12] ^= 0xff;
    let m = message(&bytes);
    assert!(m.starts_with(&format!("header record at byte {}: snappy", recs[1].0)), "{m}");

    // Not era1 at all.
    assert!(message(&[0xc0; 16]).starts_with("not an era1 file"));
    assert!(message(&[]).contains("after 0 blocks"));
}

#[test]
fn receipts_are_written_in_geths_form_and_read_back() {
    use alloy_consensus::{Eip658Value, Receipt};
    use alloy_primitives::{Address, Log};
    let log =
        Log::new_unchecked(Address::repeat_byte(3), vec![B256::repeat_byte(4)], vec![5].into());
    let pre_byzantium = Receipt {
        status: Eip658Value::PostState(B256::repeat_byte(1)),
        cumulative_gas_used: 21_000,
        logs: vec![],
    };
    let typed = Receipt { status: true.into(), cumulative_gas_used: 50_000, logs: vec![log] };
    let receipts = vec![
        ReceiptEnvelope::Legacy(pre_byzantium.with_bloom()),
        ReceiptEnvelope::Eip1559(typed.with_bloom()),
    ];
    let header = Header {
        number: 1,
        parent_hash: B256::repeat_byte(9),
        difficulty: U256::from(1),
        receipts_root: alloy_consensus::proofs::calculate_receipt_root(&receipts),
        ..chain(1)[0].clone()
    };
    let mut w = EpochWriter::new(Vec::new());
    let body = alloy_consensus::BlockBody::<TxEnvelope> {
        transactions: vec![],
        ommers: vec![],
        withdrawals: None,
    };
    w.add(&header, &body, &receipts, U256::from(7)).unwrap();
    let (_, _, bytes) = w.finish().unwrap();
    // The receipts record: an RLP list whose legacy item is a list and whose typed item is a
    // byte string holding the type and the receipt (the network form geth writes).
    let (at, kind, len) = records(&bytes)[3];
    assert_eq!(kind, super::e2store::kind::RECEIPTS);
    let rlp = super::e2store::decompress(&bytes[at + 8..at + 8 + len]).unwrap();
    let mut items = &rlp[..];
    let list = alloy_rlp::Header::decode(&mut items).unwrap();
    assert!(list.list);
    let first = alloy_rlp::Header::decode(&mut &items[..]).unwrap();
    assert!(first.list, "a legacy receipt is a list");
    let second = &items[first.length_with_payload()..];
    let typed_header = alloy_rlp::Header::decode(&mut &second[..]).unwrap();
    assert!(!typed_header.list, "a typed receipt is a byte string");
    assert_eq!(second[typed_header.length()], 0x02, "its first byte is the type");
    // Read back: the receipts root checks against the header.
    let file = read(&bytes).unwrap();
    assert_eq!(file.headers[0].0.receipts_root, header.receipts_root);
    let mut wrong = header.clone();
    wrong.receipts_root = EMPTY_ROOT_HASH;
    let mut w = EpochWriter::new(Vec::new());
    w.add(&wrong, &body, &receipts, U256::from(7)).unwrap();
    let (_, _, bytes) = w.finish().unwrap();
    let m = read(&bytes).unwrap_err().to_string();
    assert!(
        m.starts_with(
            "block 1: root of the receipts is not the header's receipts root: expected 0x56e8"
        ),
        "{m}"
    );
}

/// A datadir of a small proof-of-work chain with id `chain_id`: the database and its genesis
/// hash.
fn datadir(chain_id: u64) -> (tempfile::TempDir, Database, B256) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let genesis = format!(
        r#"{{"config":{{"chainId":{chain_id},"homesteadBlock":0}},"difficulty":"0x20000",
        "gasLimit":"0x1388","alloc":{{}}}}"#
    );
    // A made-up chain, even under a named network's chain id (the checks key on the id).
    let options = crate::import::InitOptions { foreign_chain_id: true, ..Default::default() };
    let source = crate::import::GenesisSource::Json(&genesis);
    let (spec, _) = crate::import::init_with(&db, source, options).unwrap();
    (dir, db, spec.genesis_hash())
}

#[test]
fn a_files_first_block_must_extend_the_chain_before_it() {
    let (_dir, db, genesis) = datadir(1337);
    let run = Run::new(&db, 1337, Some(0));
    let block = |number, parent_hash| Header { number, parent_hash, ..Default::default() };
    // Block 0: the stored genesis, or refused.
    let other = block(0, B256::ZERO);
    let m = run.check_first(&other, other.hash_slow()).unwrap_err().to_string();
    assert_eq!(
        m,
        format!(
            "block 0: genesis hash is not the datadir's (a file of another network?): expected \
             {genesis}, found {}",
            other.hash_slow()
        )
    );
    // Block 1 on the stored genesis, or not.
    let one = block(1, genesis);
    run.check_first(&one, one.hash_slow()).unwrap();
    let m = run.check_first(&block(1, B256::repeat_byte(1)), B256::ZERO).unwrap_err().to_string();
    assert!(m.ends_with(&format!("is not block 0's hash {genesis} (stored)")), "{m}");
    // A gap after the head.
    let m = run.check_first(&block(5, B256::ZERO), B256::ZERO).unwrap_err().to_string();
    assert_eq!(
        m,
        "the file starts at block 5, but the chain before it ends at block 0: blocks 1..=4 are \
         missing (files out of order?)"
    );
    // After a block read in this run: its parent, or past it (left to the writer).
    let mut run = Run::new(&db, 1337, Some(0));
    run.read(4, B256::repeat_byte(4));
    run.check_first(&block(5, B256::repeat_byte(4)), B256::ZERO).unwrap();
    let m = run.check_first(&block(5, B256::ZERO), B256::ZERO).unwrap_err().to_string();
    assert!(m.contains("(the last block of the file before)"), "{m}");
    run.check_first(&block(3, B256::ZERO), B256::ZERO).unwrap();
    let m = run.check_first(&block(9, B256::ZERO), B256::ZERO).unwrap_err().to_string();
    assert!(m.contains("ends at block 4: blocks 5..=8 are missing"), "{m}");
}

#[test]
fn a_file_is_checked_against_the_network() {
    let (_dir, db, _) = datadir(1);
    let path = Path::new("x.era1");
    let parsed = |headers: &[Header], td_before| read(&write_after(headers, td_before).0).unwrap();
    // Epoch 0 of a made-up chain is not mainnet's epoch 0.
    let file = parsed(&chain(3), U256::ZERO);
    let m = Run::new(&db, 1, Some(0)).check_file(&file, path).unwrap_err().to_string();
    assert_eq!(
        m,
        format!(
            "accumulator root {} is not mainnet's known root of epoch 0: \
             0x5ec1ffb8c3b146f42606c74ced973dc16ec5a107c0345858c343fc94780b4218",
            file.root
        )
    );
    // On another chain the file's own accumulator record is all there is.
    Run::new(&db, 1337, Some(0)).check_file(&file, path).unwrap();
    // The last proof-of-work block of mainnet carries the final total difficulty.
    let last_pow = alloy_hardforks::ethereum::mainnet::MAINNET_PARIS_BLOCK - 1;
    let final_td = alloy_hardforks::ethereum::mainnet::MAINNET_PARIS_FINAL_TD;
    let mut pow = chain(2);
    pow[0].number = last_pow - 1;
    pow[1].number = last_pow;
    pow[1].parent_hash = pow[0].hash_slow();
    let before = final_td - pow[0].difficulty - pow[1].difficulty;
    let file = parsed(&pow, before + U256::from(1));
    let m = Run::new(&db, 1, Some(0)).check_file(&file, path).unwrap_err().to_string();
    assert_eq!(
        m,
        format!(
            "block {last_pow}: total difficulty of the last proof-of-work block is not the \
             network's final one: expected 58750003716598352816469, found {}",
            final_td + U256::from(1)
        )
    );
    let file = parsed(&pow, before);
    let m = Run::new(&db, 1, Some(0)).check_file(&file, path).unwrap_err().to_string();
    assert!(m.ends_with("not at an epoch's first block"), "{m}");
    // The first total difficulty continues the previous era1 file's.
    let mut run = Run::new(&db, 1337, Some(0));
    run.last = Some(Last {
        number: last_pow - 2,
        hash: B256::ZERO,
        total_difficulty: Some(before - U256::from(1)),
    });
    let m = run.check_file(&file, path).unwrap_err().to_string();
    assert!(
        m.starts_with(&format!(
            "block {}: total difficulty is not the file before's",
            last_pow - 1
        )),
        "{m}"
    );
    run.last =
        Some(Last { number: last_pow - 2, hash: B256::ZERO, total_difficulty: Some(before) });
    run.check_file(&file, path).unwrap();
}
