//! Reading one era1 file and checking everything it can vouch for by itself: record types and
//! order, the block index, consecutive numbers, the header hash chain, the bodies' and receipts'
//! roots, the total difficulties and the accumulator root.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use alloy_consensus::proofs::{
    calculate_ommers_root, calculate_receipt_root, calculate_transaction_root,
    calculate_withdrawals_root,
};
use alloy_consensus::{BlockBody, Header, ReceiptEnvelope, TxEnvelope};
use alloy_primitives::{B256, U256};
use alloy_rlp::Decodable;

use super::accumulator::{EPOCH_BLOCKS, accumulator_root};
use super::e2store::{HEADER_BYTES, Record, decompress, kind, read_data, read_header};
use crate::import::SourceError;

/// One era1 file, read and checked by [`read_file`]: every header, but no body.
#[derive(Debug)]
pub(crate) struct Era1File {
    /// Each block's header and hash, in order from the index's first block.
    pub(crate) headers: Vec<(Header, B256)>,
    /// Each block's total difficulty (after the block).
    pub(crate) total_difficulties: Vec<U256>,
    /// Each block's header record and body record: their byte offsets.
    pub(crate) offsets: Vec<(u64, u64)>,
    /// The file's accumulator root (equal to the one computed from its headers).
    pub(crate) root: B256,
}

impl Era1File {
    /// The first block's number.
    pub(crate) fn start(&self) -> u64 {
        self.headers.first().map_or(0, |(h, _)| h.number)
    }

    /// The last block's number.
    pub(crate) fn end(&self) -> u64 {
        self.headers.last().map_or(0, |(h, _)| h.number)
    }
}

/// The record the reader waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// A block's header, an other record, or the accumulator.
    HeaderOrTail,
    Body,
    Receipts,
    TotalDifficulty,
    /// After an other record: more of them, or the accumulator.
    OtherOrAccumulator,
    Index,
}

impl Want {
    fn expected(self) -> &'static str {
        match self {
            Self::HeaderOrTail => "a block header, another record or the accumulator",
            Self::Body => "the block's body",
            Self::Receipts => "the block's receipts",
            Self::TotalDifficulty => "the block's total difficulty",
            Self::OtherOrAccumulator => "another record or the accumulator",
            Self::Index => "the block index",
        }
    }
}

fn known(k: u16) -> bool {
    matches!(
        k,
        kind::VERSION
            | kind::HEADER
            | kind::BODY
            | kind::RECEIPTS
            | kind::TOTAL_DIFFICULTY
            | kind::ACCUMULATOR
            | kind::BLOCK_INDEX
    )
}

/// A decoding failure inside the record of `what` at byte `offset`.
fn bad(offset: u64, what: &'static str, message: impl Into<String>) -> SourceError {
    SourceError::Era1Record { offset, what, message: message.into() }
}

/// Decodes all of `bytes` as one `T`.
fn decode_all<T: Decodable>(
    bytes: &[u8],
    offset: u64,
    what: &'static str,
) -> Result<T, SourceError> {
    let mut slice = bytes;
    let value = T::decode(&mut slice).map_err(|e| bad(offset, what, format!("RLP: {e}")))?;
    if !slice.is_empty() {
        return Err(bad(offset, what, format!("{} bytes after the RLP item", slice.len())));
    }
    Ok(value)
}

/// The snappy-framed RLP of the record of `what` at `offset`, decoded.
fn decode_record<T: Decodable>(
    data: &[u8],
    offset: u64,
    what: &'static str,
) -> Result<T, SourceError> {
    let rlp = decompress(data).map_err(|m| bad(offset, what, m))?;
    decode_all(&rlp, offset, what)
}

/// `expected` (the header's) against `found` (the file's), for block `number`.
fn same<T: PartialEq + std::fmt::Display>(
    number: u64,
    what: &'static str,
    expected: T,
    found: T,
) -> Result<(), SourceError> {
    if expected == found {
        return Ok(());
    }
    Err(SourceError::Era1Mismatch {
        number,
        what,
        expected: expected.to_string(),
        found: found.to_string(),
    })
}

/// Checks a block's body against its header: transactions root, ommers hash, withdrawals root.
fn check_body(header: &Header, body: &BlockBody<TxEnvelope>) -> Result<(), SourceError> {
    let number = header.number;
    same(
        number,
        "transactions root of the body is not the header's",
        header.transactions_root,
        calculate_transaction_root(&body.transactions),
    )?;
    same(
        number,
        "ommers hash of the body is not the header's",
        header.ommers_hash,
        calculate_ommers_root(&body.ommers),
    )?;
    let withdrawals = body.withdrawals.as_ref().map(|w| calculate_withdrawals_root(w));
    if header.withdrawals_root.is_some() || withdrawals.is_some() {
        let show = |v: Option<B256>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
        same(
            number,
            "withdrawals root of the body is not the header's",
            show(header.withdrawals_root),
            show(withdrawals),
        )?;
    }
    Ok(())
}

/// Reads the era1 file `r` (`file_len` bytes) from its start and checks it: record types and
/// order, the block index against the records, block numbers consecutive from the index's
/// start, each header's parent hash against the previous header's hash, each total difficulty
/// against the previous one plus the block's difficulty (the first block 0's against its
/// difficulty alone), and the accumulator root computed from the (hash, total difficulty)
/// records against the file's. The body and receipts of each block above `stored` are decoded
/// and checked against the header (transactions root, ommers hash, withdrawals root, receipts
/// root) and then dropped; those at or below it are skipped, since the import only compares
/// those blocks' hashes with the stored ones. `first` is called with the first header and its
/// hash as soon as they are read, to refuse a file that does not extend the chain before the
/// rest of it is read.
pub(crate) fn read_file<R: Read + Seek>(
    r: &mut BufReader<R>,
    file_len: u64,
    stored: Option<u64>,
    mut first: impl FnMut(&Header, B256) -> Result<(), SourceError>,
) -> Result<Era1File, SourceError> {
    let mut file = Era1File {
        headers: Vec::new(),
        total_difficulties: Vec::new(),
        offsets: Vec::new(),
        root: B256::ZERO,
    };
    // The first record's type before anything else: another kind of file is named as such.
    let peek = r.fill_buf().map_err(|error| SourceError::Io { offset: 0, error })?;
    if let [a, b, ..] = *peek
        && u16::from_le_bytes([a, b]) != kind::VERSION
    {
        return Err(SourceError::NotEra1 { found: u16::from_le_bytes([a, b]) });
    }
    let version =
        read_header(r, 0, file_len)?.ok_or(SourceError::Era1Ended { end: file_len, blocks: 0 })?;
    if version.kind != kind::VERSION {
        return Err(SourceError::NotEra1 { found: version.kind });
    }
    let mut offset = HEADER_BYTES + version.len;
    skip(r, version, 0)?;
    let mut want = Want::HeaderOrTail;
    let mut file_root = None;
    // The header record of the block being read, and its offset.
    let mut group = 0;
    let index = loop {
        let at = offset;
        let record = read_header(r, at, file_len)?
            .ok_or(SourceError::Era1Ended { end: file_len, blocks: file.headers.len() as u64 })?;
        offset = at + HEADER_BYTES + record.len;
        let number = file.headers.last().map_or(0, |(h, _)| h.number);
        let full = stored.is_none_or(|head| number > head);
        match (want, record.kind) {
            (Want::HeaderOrTail, kind::HEADER) => {
                if file.headers.len() as u64 >= EPOCH_BLOCKS {
                    return Err(SourceError::Era1Index {
                        message: format!(
                            "more than {EPOCH_BLOCKS} blocks (another header record at byte {at})"
                        ),
                    });
                }
                let data = read_data(r, at, record, file_len)?;
                let header: Header = decode_record(&data, at, "header")?;
                let hash = header.hash_slow();
                if file.headers.is_empty() {
                    first(&header, hash)?;
                }
                file.headers.push((header, hash));
                group = at;
                want = Want::Body;
            }
            (Want::Body, kind::BODY) => {
                file.offsets.push((group, at));
                if full {
                    let data = read_data(r, at, record, file_len)?;
                    let body: BlockBody<TxEnvelope> = decode_record(&data, at, "body")?;
                    if let Some((header, _)) = file.headers.last() {
                        check_body(header, &body)?;
                    }
                } else {
                    skip(r, record, at)?;
                }
                want = Want::Receipts;
            }
            (Want::Receipts, kind::RECEIPTS) => {
                if full {
                    let data = read_data(r, at, record, file_len)?;
                    let receipts: Vec<ReceiptEnvelope> = decode_record(&data, at, "receipts")?;
                    if let Some((header, _)) = file.headers.last() {
                        same(
                            number,
                            "root of the receipts is not the header's receipts root",
                            header.receipts_root,
                            calculate_receipt_root(&receipts),
                        )?;
                    }
                } else {
                    skip(r, record, at)?;
                }
                want = Want::TotalDifficulty;
            }
            (Want::TotalDifficulty, kind::TOTAL_DIFFICULTY) => {
                let data = read_data(r, at, record, file_len)?;
                if data.len() != 32 {
                    return Err(bad(
                        at,
                        "total difficulty",
                        format!("{} bytes, not 32", data.len()),
                    ));
                }
                file.total_difficulties.push(U256::from_le_slice(&data));
                want = Want::HeaderOrTail;
            }
            (Want::HeaderOrTail | Want::OtherOrAccumulator, kind::ACCUMULATOR) => {
                if file.headers.is_empty() {
                    return Err(SourceError::Era1Index {
                        message: "the file holds no block".into(),
                    });
                }
                let data = read_data(r, at, record, file_len)?;
                if data.len() != 32 {
                    return Err(bad(at, "accumulator", format!("{} bytes, not 32", data.len())));
                }
                file_root = Some(B256::from_slice(&data));
                want = Want::Index;
            }
            (Want::Index, kind::BLOCK_INDEX) => {
                let data = read_data(r, at, record, file_len)?;
                if offset != file_len {
                    return Err(SourceError::Era1Index {
                        message: format!(
                            "the block index at byte {at} is followed by {} more bytes; it must \
                             end the file",
                            file_len - offset
                        ),
                    });
                }
                break (at, data);
            }
            (Want::HeaderOrTail | Want::OtherOrAccumulator, k) if !known(k) => {
                skip(r, record, at)?;
                want = Want::OtherOrAccumulator;
            }
            (want, found) => {
                return Err(SourceError::RecordOrder {
                    offset: at,
                    found,
                    found_name: kind::name(found),
                    expected: want.expected(),
                });
            }
        }
    };
    check_index(&file, index.0, &index.1)?;
    check_chain(&file)?;
    let records: Vec<(B256, U256)> = file
        .headers
        .iter()
        .zip(&file.total_difficulties)
        .map(|((_, hash), td)| (*hash, *td))
        .collect();
    let computed = accumulator_root(&records);
    let in_file = file_root.unwrap_or_default();
    if computed != in_file {
        return Err(SourceError::Era1Accumulator { computed, file: in_file });
    }
    file.root = computed;
    Ok(file)
}

/// Skips the data of `record` (at byte `offset`).
fn skip<R: Read + Seek>(
    r: &mut BufReader<R>,
    record: Record,
    offset: u64,
) -> Result<(), SourceError> {
    // Within the file (`Record::parse`), so within i64.
    r.seek_relative(record.len as i64).map_err(|error| SourceError::Io { offset, error })
}

/// The block index (`start u64 | offset i64 per block | count u64`, offsets relative to the
/// index record at `at`) against the records read.
fn check_index(file: &Era1File, at: u64, data: &[u8]) -> Result<(), SourceError> {
    let fail = |message: String| Err(SourceError::Era1Index { message });
    if data.len() < 16 || !data.len().is_multiple_of(8) {
        return fail(format!("{} bytes: not start, offsets and count of 8 bytes each", data.len()));
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&data[i * 8..i * 8 + 8]);
        b
    };
    let words = data.len() / 8;
    let start = u64::from_le_bytes(word(0));
    let count = u64::from_le_bytes(word(words - 1));
    if count != (words - 2) as u64 {
        return fail(format!("counts {count} blocks but holds {} offsets", words - 2));
    }
    if count != file.headers.len() as u64 {
        return fail(format!("counts {count} blocks, the file holds {}", file.headers.len()));
    }
    if start != file.start() {
        return fail(format!(
            "starts at block {start}, the file's first header is block {}",
            file.start()
        ));
    }
    for (i, (group, _)) in file.offsets.iter().enumerate() {
        let relative = i64::from_le_bytes(word(1 + i));
        let points = i128::from(at) + i128::from(relative);
        if points != i128::from(*group) {
            return fail(format!(
                "block {}'s offset {relative} points to byte {points}, but its header record is \
                 at byte {group}",
                start + i as u64
            ));
        }
    }
    Ok(())
}

/// Numbers consecutive from the first, each parent hash the previous block's hash, and each
/// total difficulty the previous one plus the block's difficulty.
fn check_chain(file: &Era1File) -> Result<(), SourceError> {
    let start = file.start();
    let mut previous: Option<(&B256, U256)> = None;
    for (i, ((header, hash), td)) in file.headers.iter().zip(&file.total_difficulties).enumerate() {
        let number = start + i as u64;
        same(number, "header number is not the one the block index gives", number, header.number)?;
        match previous {
            Some((previous_hash, previous_td)) => {
                if header.parent_hash != *previous_hash {
                    return Err(SourceError::Era1ChainBroken {
                        number,
                        parent_hash: header.parent_hash,
                        previous_number: number - 1,
                        previous_hash: *previous_hash,
                        previous_from: "in the file",
                    });
                }
                let expected = previous_td.checked_add(header.difficulty);
                same(
                    number,
                    "total difficulty is not the previous one plus the block's difficulty",
                    expected.map_or_else(|| "overflow".to_string(), |v| v.to_string()),
                    td.to_string(),
                )?;
            }
            None if number == 0 => {
                same(
                    number,
                    "total difficulty is not the genesis difficulty",
                    header.difficulty,
                    *td,
                )?;
            }
            None => {}
        }
        previous = Some((hash, *td));
    }
    Ok(())
}

/// Reads the body record at byte `offset` (found by [`read_file`]); `position` is where `r`
/// stands, and is moved past the record. A seek within the reader's buffer keeps it, so reading
/// the bodies in order reads the file once.
pub(crate) fn read_body<R: Read + Seek>(
    r: &mut BufReader<R>,
    position: &mut u64,
    offset: u64,
    file_len: u64,
) -> Result<BlockBody<TxEnvelope>, SourceError> {
    let io = |error| SourceError::Io { offset, error };
    match i64::try_from(i128::from(offset) - i128::from(*position)) {
        Ok(relative) => r.seek_relative(relative).map_err(io)?,
        Err(_) => _ = r.seek(SeekFrom::Start(offset)).map_err(io)?,
    }
    *position = offset;
    let record = read_header(r, offset, file_len)?
        .ok_or(SourceError::RecordTruncated { offset, end: file_len })?;
    if record.kind != kind::BODY {
        return Err(SourceError::RecordOrder {
            offset,
            found: record.kind,
            found_name: kind::name(record.kind),
            expected: "the block's body (the file changed while it was imported?)",
        });
    }
    let data = read_data(r, offset, record, file_len)?;
    *position = offset + HEADER_BYTES + record.len;
    decode_record(&data, offset, "body")
}
