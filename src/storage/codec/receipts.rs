//! Receipts rows: a block's receipts stored without blooms (compressed when long), read whole,
//! one at a time, as cumulative gas only, or as the logs a filter matches.

use std::borrow::Cow;

use alloy_consensus::{Eip658Value, Receipt, ReceiptEnvelope, ReceiptWithBloom, TxType};
use alloy_primitives::{Address, B256, Log, keccak256};
use alloy_rlp::{Decodable, Encodable};

/// First byte of a receipts row stored without blooms. A row written before (an RLP list of
/// whole receipt envelopes) starts with a list header, 0xc0 or above, so both are told apart and
/// old rows stay readable.
const RECEIPTS_WITHOUT_BLOOMS: u8 = 0;

/// First byte of a receipts row stored without blooms and compressed: then the length of the
/// RLP list (u32 BE) and the list compressed with zstd, with its content checksum. Logs repeat
/// addresses, topics and the zero bytes of padded words, so a block's receipts take about a
/// third of the bytes (BENCHMARKS.md, session 28).
const RECEIPTS_ZSTD: u8 = 1;

/// A list at most this long is stored uncompressed (a zstd frame has a few bytes of its own).
const RECEIPTS_COMPRESS_FROM: usize = 128;

/// zstd's fastest level: higher ones gained 3 % on a generated chain's receipts.
const RECEIPTS_ZSTD_LEVEL: i32 = 1;

/// The longest RLP list a compressed receipts row may claim (a block's receipts are bounded by
/// its gas; this bounds the memory a corrupt row can ask for).
const MAX_RECEIPTS_LIST: usize = 256 << 20;

/// A receipt's status (or post-state root), cumulative gas and logs.
fn fields(r: &ReceiptEnvelope) -> (Eip658Value, u64, &[Log]) {
    match r.as_receipt() {
        Some(inner) => (inner.status, inner.cumulative_gas_used, inner.logs.as_slice()),
        None => (Eip658Value::Eip658(r.status()), r.cumulative_gas_used(), r.logs()),
    }
}

/// Encodes a block's receipts for [`crate::storage::tables::RECEIPTS`]: each as the RLP list
/// `[type, status or post-state root, cumulative gas, logs]`, without its 256-byte bloom, which
/// is a function of its logs and is recomputed when read (most of a receipt's bytes otherwise).
/// Lists longer than [`RECEIPTS_COMPRESS_FROM`] bytes are stored compressed ([`RECEIPTS_ZSTD`]).
pub(crate) fn encode_receipts(receipts: &[ReceiptEnvelope], out: &mut Vec<u8>) {
    let start = out.len();
    encode_receipts_list(receipts, out);
    let list = &out[start + 1..];
    if list.len() <= RECEIPTS_COMPRESS_FROM {
        return;
    }
    let Ok(length) = u32::try_from(list.len()) else { return };
    // With zstd's checksum of the content, so that a damaged row is an error, not other
    // receipts. Compression does not fail on a buffer in memory; if it did, the row stays plain.
    let packed = zstd::bulk::Compressor::new(RECEIPTS_ZSTD_LEVEL).and_then(|mut c| {
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        c.compress(list)
    });
    if let Ok(packed) = packed {
        out.truncate(start);
        out.push(RECEIPTS_ZSTD);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&packed);
    }
}

/// [`RECEIPTS_WITHOUT_BLOOMS`] and the RLP list of the receipts without blooms.
fn encode_receipts_list(receipts: &[ReceiptEnvelope], out: &mut Vec<u8>) {
    out.push(RECEIPTS_WITHOUT_BLOOMS);
    let lengths: Vec<usize> = receipts
        .iter()
        .map(|r| {
            let (status, gas, logs) = fields(r);
            (r.tx_type() as u8).length()
                + status.length()
                + gas.length()
                + alloy_rlp::list_length(logs)
        })
        .collect();
    let payload: usize = lengths.iter().map(|l| l + alloy_rlp::length_of_length(*l)).sum();
    alloy_rlp::Header { list: true, payload_length: payload }.encode(out);
    for (r, length) in receipts.iter().zip(lengths) {
        let (status, gas, logs) = fields(r);
        alloy_rlp::Header { list: true, payload_length: length }.encode(out);
        (r.tx_type() as u8).encode(out);
        status.encode(out);
        gas.encode(out);
        alloy_rlp::encode_list(logs, out);
    }
}

/// Decodes a row of [`crate::storage::tables::RECEIPTS`], of any layout, each bloom computed from its
/// receipt's logs.
pub(crate) fn decode_receipts(mut bytes: &[u8]) -> Result<Vec<ReceiptEnvelope>, alloy_rlp::Error> {
    match receipts_list(bytes)? {
        Some(list) => {
            let mut hashes = BloomHashes::default();
            receipt_items(&list)?.map(|item| decode_receipt_item(item?, &mut hashes)).collect()
        }
        None => Vec::<ReceiptEnvelope>::decode(&mut bytes),
    }
}

/// The cumulative gas of each receipt of a row of [`crate::storage::tables::RECEIPTS`]; logs are skipped
/// over, and no receipt is built (`eth_feeHistory`).
pub(crate) fn decode_cumulative_gas(bytes: &[u8]) -> Result<Vec<u64>, alloy_rlp::Error> {
    let Some(list) = receipts_list(bytes)? else {
        return Ok(decode_receipts(bytes)?.iter().map(|r| r.cumulative_gas_used()).collect());
    };
    receipt_items(&list)?.map(|item| skip_to_logs(&mut item?)).collect()
}

/// One receipt of a block, with what its RPC object needs from the receipts before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptInBlock {
    /// The receipt, its bloom computed from its logs.
    pub receipt: ReceiptEnvelope,
    /// Cumulative gas of the receipt before it (0 for the first): its gas used is the difference.
    pub gas_before: u64,
    /// Logs of the receipts before it: the block-wide index of its first log.
    pub logs_before: u64,
}

/// Decodes receipt `index` of a row of [`crate::storage::tables::RECEIPTS`]. The receipts before it are
/// only skipped over (their cumulative gas read and their logs counted), so no other receipt is
/// built and no other bloom computed. `None`: the block has fewer receipts.
pub(crate) fn decode_receipt_at(
    bytes: &[u8],
    index: usize,
) -> Result<Option<ReceiptInBlock>, alloy_rlp::Error> {
    let Some(list) = receipts_list(bytes)? else {
        // Rows of the oldest layout (whole envelopes) are decoded whole.
        let all = decode_receipts(bytes)?;
        let gas_before =
            index.checked_sub(1).and_then(|i| all.get(i)).map_or(0, |r| r.cumulative_gas_used());
        let logs_before = all.iter().take(index).map(|r| r.logs().len() as u64).sum();
        return Ok(all.into_iter().nth(index).map(|receipt| ReceiptInBlock {
            receipt,
            gas_before,
            logs_before,
        }));
    };
    let mut items = receipt_items(&list)?;
    let (mut gas_before, mut logs_before) = (0, 0);
    for _ in 0..index {
        let Some(mut item) = items.next().transpose()? else { return Ok(None) };
        gas_before = skip_to_logs(&mut item)?;
        logs_before += count_items(&mut item)?;
        if !item.is_empty() {
            return Err(alloy_rlp::Error::Custom("trailing bytes in a receipt"));
        }
    }
    let Some(item) = items.next().transpose()? else { return Ok(None) };
    let receipt = decode_receipt_item(item, &mut BloomHashes::default())?;
    Ok(Some(ReceiptInBlock { receipt, gas_before, logs_before }))
}

/// A log that [`decode_matching_logs`] kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogInBlock {
    /// Index of its transaction in the block.
    pub tx_index: u32,
    /// Its index among all the block's logs.
    pub log_index: u64,
    /// The log.
    pub log: Log,
}

/// What [`decode_matching_logs`] asks of each log: its address and topics.
pub type LogKeep<'k> = dyn Fn(&Address, &[B256]) -> bool + 'k;

/// The logs of a row of [`crate::storage::tables::RECEIPTS`] that `keep` accepts, in order. The other
/// logs are only skipped over (their address and topics read in place, their data never
/// copied), and no receipt is built.
pub(crate) fn decode_matching_logs(
    bytes: &[u8],
    keep: &LogKeep<'_>,
) -> Result<Vec<LogInBlock>, alloy_rlp::Error> {
    let mut out = Vec::new();
    let mut log_index = 0u64;
    let Some(list) = receipts_list(bytes)? else {
        // Rows of the oldest layout (whole envelopes) are decoded whole.
        for (tx_index, receipt) in (0u32..).zip(decode_receipts(bytes)?) {
            for log in receipt.logs() {
                if keep(&log.address, log.topics()) {
                    out.push(LogInBlock { tx_index, log_index, log: log.clone() });
                }
                log_index += 1;
            }
        }
        return Ok(out);
    };
    for (tx_index, item) in (0u32..).zip(receipt_items(&list)?) {
        let mut item = item?;
        skip_to_logs(&mut item)?;
        let mut logs = list_payload(&mut item, "logs are not an RLP list")?;
        if !item.is_empty() {
            return Err(alloy_rlp::Error::Custom("trailing bytes in a receipt"));
        }
        while !logs.is_empty() {
            let whole = logs;
            let mut fields = list_payload(&mut logs, "log is not an RLP list")?;
            let address = Address::decode(&mut fields)?;
            let mut raw = list_payload(&mut fields, "log topics are not an RLP list")?;
            // LOG0..LOG4: at most four topics.
            let mut topics = [B256::ZERO; 4];
            let mut n = 0;
            while !raw.is_empty() {
                let slot = topics
                    .get_mut(n)
                    .ok_or(alloy_rlp::Error::Custom("log has more than four topics"))?;
                *slot = B256::decode(&mut raw)?;
                n += 1;
            }
            if keep(&address, &topics[..n]) {
                let log = Log::decode(&mut &whole[..whole.len() - logs.len()])?;
                out.push(LogInBlock { tx_index, log_index, log });
            }
            log_index += 1;
        }
    }
    Ok(out)
}

/// Reads a receipt's payload up to its logs: skips its type and status and returns its
/// cumulative gas, leaving `item` at the logs.
fn skip_to_logs(item: &mut &[u8]) -> Result<u64, alloy_rlp::Error> {
    u8::decode(item)?;
    Eip658Value::decode(item)?;
    u64::decode(item)
}

/// Takes the RLP list at the start of `bytes` off it and returns its payload.
fn list_payload<'b>(
    bytes: &mut &'b [u8],
    what: &'static str,
) -> Result<&'b [u8], alloy_rlp::Error> {
    let header = alloy_rlp::Header::decode(bytes)?;
    if !header.list || bytes.len() < header.payload_length {
        return Err(alloy_rlp::Error::Custom(what));
    }
    let (payload, rest) = bytes.split_at(header.payload_length);
    *bytes = rest;
    Ok(payload)
}

/// The RLP list of receipts without blooms that a row of either newer layout holds, decompressed
/// where it is stored compressed; `None` for a row of the oldest layout (whole envelopes).
fn receipts_list(bytes: &[u8]) -> Result<Option<Cow<'_, [u8]>>, alloy_rlp::Error> {
    match bytes.first() {
        Some(&RECEIPTS_WITHOUT_BLOOMS) => Ok(Some(Cow::Borrowed(&bytes[1..]))),
        Some(&RECEIPTS_ZSTD) => {
            let Some((length, packed)) = bytes[1..].split_first_chunk::<4>() else {
                return Err(alloy_rlp::Error::Custom("compressed receipts row is truncated"));
            };
            let length = u32::from_be_bytes(*length) as usize;
            if length > MAX_RECEIPTS_LIST {
                return Err(alloy_rlp::Error::Custom("compressed receipts row claims too much"));
            }
            let list = zstd::bulk::decompress(packed, length)
                .map_err(|_| alloy_rlp::Error::Custom("receipts row does not decompress"))?;
            if list.len() != length {
                return Err(alloy_rlp::Error::Custom(
                    "receipts row decompresses to another length",
                ));
            }
            Ok(Some(Cow::Owned(list)))
        }
        _ => Ok(None),
    }
}

/// A receipts row in its plain layout ([`RECEIPTS_WITHOUT_BLOOMS`] and the list), its zstd
/// frame undone where it has one; a row of the oldest layout as it is.
pub(crate) fn plain_receipts_row(row: &[u8]) -> Result<Cow<'_, [u8]>, alloy_rlp::Error> {
    match (row.first(), receipts_list(row)?) {
        (Some(&RECEIPTS_ZSTD), Some(list)) => {
            let mut out = Vec::with_capacity(list.len() + 1);
            out.push(RECEIPTS_WITHOUT_BLOOMS);
            out.extend_from_slice(&list);
            Ok(Cow::Owned(out))
        }
        _ => Ok(Cow::Borrowed(row)),
    }
}

/// The payload of each receipt in the RLP list of receipts without blooms.
fn receipt_items(
    mut list: &[u8],
) -> Result<impl Iterator<Item = Result<&[u8], alloy_rlp::Error>>, alloy_rlp::Error> {
    let header = alloy_rlp::Header::decode(&mut list)?;
    if !header.list || list.len() != header.payload_length {
        return Err(alloy_rlp::Error::Custom("receipts row is not one RLP list"));
    }
    Ok(std::iter::from_fn(move || {
        if list.is_empty() {
            return None;
        }
        let item = alloy_rlp::Header::decode(&mut list).and_then(|h| {
            if !h.list || list.len() < h.payload_length {
                return Err(alloy_rlp::Error::Custom("receipt is not an RLP list"));
            }
            let (item, rest) = list.split_at(h.payload_length);
            list = rest;
            Ok(item)
        });
        if item.is_err() {
            list = &[];
        }
        Some(item)
    }))
}

/// Skips the RLP list at the start of `bytes` and returns how many items it holds.
fn count_items(bytes: &mut &[u8]) -> Result<u64, alloy_rlp::Error> {
    let mut items = list_payload(bytes, "logs are not an RLP list")?;
    let mut n = 0;
    while !items.is_empty() {
        let h = alloy_rlp::Header::decode(&mut items)?;
        if items.len() < h.payload_length {
            return Err(alloy_rlp::Error::Custom("log is cut short"));
        }
        items = &items[h.payload_length..];
        n += 1;
    }
    Ok(n)
}

/// The keccak of each log address and topic seen so far in one receipts row, for the blooms:
/// a block's logs repeat a few addresses and event signatures (and often holders), and a bloom
/// costs one keccak per address and topic, a quarter of an `eth_getBlockReceipts`.
#[derive(Default)]
struct BloomHashes {
    addresses: alloy_primitives::map::AddressMap<B256>,
    topics: alloy_primitives::map::B256Map<B256>,
}

impl BloomHashes {
    /// The bloom of `logs`: alloy's `logs_bloom`, with the hashes kept.
    fn bloom(&mut self, logs: &[Log]) -> alloy_primitives::Bloom {
        let mut bloom = alloy_primitives::Bloom::ZERO;
        for log in logs {
            let a = *self.addresses.entry(log.address).or_insert_with(|| keccak256(log.address));
            bloom.accrue(alloy_primitives::BloomInput::Hash(a));
            for topic in log.topics() {
                let t = *self.topics.entry(*topic).or_insert_with(|| keccak256(topic));
                bloom.accrue(alloy_primitives::BloomInput::Hash(t));
            }
        }
        bloom
    }
}

/// Decodes one receipt's payload: `[type, status or post-state root, cumulative gas, logs]`.
fn decode_receipt_item(
    mut item: &[u8],
    hashes: &mut BloomHashes,
) -> Result<ReceiptEnvelope, alloy_rlp::Error> {
    let ty = TxType::try_from(u8::decode(&mut item)?)
        .map_err(|_| alloy_rlp::Error::Custom("unknown receipt type"))?;
    let receipt = Receipt {
        status: Eip658Value::decode(&mut item)?,
        cumulative_gas_used: u64::decode(&mut item)?,
        logs: Vec::<Log>::decode(&mut item)?,
    };
    if !item.is_empty() {
        return Err(alloy_rlp::Error::Custom("trailing bytes in a receipt"));
    }
    let bloom = hashes.bloom(&receipt.logs);
    debug_assert_eq!(bloom, receipt.bloom_slow());
    Ok(ReceiptEnvelope::from_typed(ty, ReceiptWithBloom::new(receipt, bloom)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::U256;

    /// Receipts of every type, with and without logs, pre- and post-Byzantium.
    fn sample_receipts() -> Vec<ReceiptEnvelope> {
        let log = |n: u8, topics: usize| {
            Log::new_unchecked(
                Address::repeat_byte(n),
                (0..topics).map(|t| B256::repeat_byte(n + t as u8)).collect(),
                vec![n; n as usize * 7].into(),
            )
        };
        let receipt = |status, gas, logs: Vec<Log>| {
            let r = Receipt { status, cumulative_gas_used: gas, logs };
            ReceiptWithBloom::new(r.clone(), r.bloom_slow())
        };
        vec![
            ReceiptEnvelope::Legacy(receipt(
                Eip658Value::PostState(B256::repeat_byte(9)),
                21_000,
                vec![],
            )),
            ReceiptEnvelope::Legacy(receipt(Eip658Value::Eip658(true), 50_000, vec![log(1, 0)])),
            ReceiptEnvelope::Eip2930(receipt(Eip658Value::Eip658(false), 80_000, vec![log(2, 4)])),
            ReceiptEnvelope::Eip1559(receipt(
                Eip658Value::Eip658(true),
                1 << 40,
                vec![log(3, 1), log(4, 3)],
            )),
            ReceiptEnvelope::Eip4844(receipt(
                Eip658Value::Eip658(true),
                2_000_000,
                vec![log(5, 2)],
            )),
            ReceiptEnvelope::Eip7702(receipt(Eip658Value::Eip658(true), 2_100_000, vec![])),
        ]
    }

    #[test]
    fn receipts_round_trip_without_their_blooms_and_old_rows_still_read() {
        let receipts = sample_receipts();
        let mut row = Vec::new();
        encode_receipts(&receipts, &mut row);
        assert_eq!(decode_receipts(&row).unwrap(), receipts);
        let mut whole = Vec::new();
        receipts.encode(&mut whole);
        assert!(row.len() + 256 * receipts.len() <= whole.len() + 1, "blooms are not stored");
        // A row of the earlier layout: the RLP list of whole envelopes.
        assert_eq!(decode_receipts(&whole).unwrap(), receipts);
        // Cumulative gas alone, from each layout.
        let gas: Vec<u64> = receipts.iter().map(|r| r.cumulative_gas_used()).collect();
        assert_eq!(decode_cumulative_gas(&row).unwrap(), gas);
        assert_eq!(decode_cumulative_gas(&whole).unwrap(), gas);
        let mut packed = Vec::new();
        encode_receipts(&transfer_receipts(200), &mut packed);
        assert_eq!(packed[0], RECEIPTS_ZSTD);
        let gas: Vec<u64> =
            transfer_receipts(200).iter().map(|r| r.cumulative_gas_used()).collect();
        assert_eq!(decode_cumulative_gas(&packed).unwrap(), gas);
        assert!(decode_cumulative_gas(&packed[..packed.len() - 1]).is_err());
        // An empty block and a truncated row.
        let mut empty = Vec::new();
        encode_receipts(&[], &mut empty);
        assert_eq!(decode_receipts(&empty).unwrap(), vec![]);
        assert!(decode_receipts(&row[..row.len() - 1]).is_err());
    }

    /// A block of token transfers: each receipt one `Transfer` log from one of a few tokens,
    /// between pseudo-random holders, as a generated or a real chain has them.
    fn transfer_receipts(n: u64) -> Vec<ReceiptEnvelope> {
        let transfer = B256::repeat_byte(0xdd);
        let holder =
            |i: u64| B256::left_padding_from(&alloy_primitives::keccak256(i.to_be_bytes())[..20]);
        (0..n)
            .map(|i| {
                let log = Log::new_unchecked(
                    Address::repeat_byte(1 + (i % 3) as u8),
                    vec![transfer, holder(i), holder(i + 1000)],
                    U256::from(i * 1_000_003).to_be_bytes::<32>().to_vec().into(),
                );
                let r = Receipt {
                    status: Eip658Value::Eip658(i % 17 != 0),
                    cumulative_gas_used: 52_000 * (i + 1),
                    logs: vec![log],
                };
                ReceiptEnvelope::Eip1559(ReceiptWithBloom::new(r.clone(), r.bloom_slow()))
            })
            .collect()
    }

    #[test]
    fn a_block_of_receipts_is_stored_compressed_and_reads_back_whole() {
        let receipts = transfer_receipts(200);
        let mut row = Vec::new();
        encode_receipts(&receipts, &mut row);
        let mut plain = Vec::new();
        encode_receipts_list(&receipts, &mut plain);
        assert_eq!(row[0], RECEIPTS_ZSTD);
        assert_eq!(u32::from_be_bytes(row[1..5].try_into().unwrap()) as usize, plain.len() - 1);
        // The holders' addresses are random; the rest repeats.
        assert!(row.len() * 10 < plain.len() * 6, "{} bytes from {}", row.len(), plain.len());
        assert_eq!(decode_receipts(&row).unwrap(), receipts);
        // A plain row (as written before, or for a short list) still reads.
        assert_eq!(decode_receipts(&plain).unwrap(), receipts);
        let mut short = Vec::new();
        encode_receipts(&transfer_receipts(0), &mut short);
        assert_eq!(short, vec![RECEIPTS_WITHOUT_BLOOMS, 0xc0]);

        // Corrupt rows are errors, never a panic or a wrong answer.
        let mut bad = row.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        assert!(decode_receipts(&bad).is_err_and(|e| e.to_string().len() > 3));
        let mut longer = row.clone();
        longer[1..5].copy_from_slice(&(plain.len() as u32).to_be_bytes());
        assert!(decode_receipts(&longer).is_err());
        let mut huge = row.clone();
        huge[1..5].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_receipts(&huge).is_err());
        assert!(decode_receipts(&row[..4]).is_err());
        assert!(decode_receipts(&row[..row.len() - 3]).is_err());
    }

    /// What [`decode_receipt_at`] must give for receipt `i`, computed from the whole list.
    fn expected_at(receipts: &[ReceiptEnvelope], i: usize) -> Option<ReceiptInBlock> {
        receipts.get(i).map(|r| ReceiptInBlock {
            receipt: r.clone(),
            gas_before: i.checked_sub(1).map_or(0, |p| receipts[p].cumulative_gas_used()),
            logs_before: receipts[..i].iter().map(|r| r.logs().len() as u64).sum(),
        })
    }

    /// Blocks of receipts for the partial reads: the samples, a compressed block, an empty one,
    /// and a mixed block (several logs per receipt, so log counts add up across receipts).
    fn partial_read_blocks() -> [Vec<ReceiptEnvelope>; 4] {
        [
            sample_receipts(),
            transfer_receipts(200),
            vec![],
            [sample_receipts(), transfer_receipts(9)].concat(),
        ]
    }

    /// A block's receipts in the three row layouts: as written now (compressed when long), a
    /// plain list without blooms, and whole envelopes (the oldest).
    fn row_layouts(receipts: &[ReceiptEnvelope]) -> [Vec<u8>; 3] {
        let mut row = Vec::new();
        encode_receipts(receipts, &mut row);
        let mut plain = Vec::new();
        encode_receipts_list(receipts, &mut plain);
        let mut whole = Vec::new();
        alloy_rlp::encode_list(receipts, &mut whole);
        [row, plain, whole]
    }

    #[test]
    fn one_receipt_read_alone_equals_its_entry_in_the_whole_block() {
        for receipts in &partial_read_blocks() {
            let [row, plain, whole] = row_layouts(receipts);
            for layout in [&row, &plain, &whole] {
                for i in 0..=receipts.len() + 1 {
                    assert_eq!(
                        decode_receipt_at(layout, i).unwrap(),
                        expected_at(receipts, i),
                        "receipt {i} of {}",
                        receipts.len()
                    );
                }
            }
            // A damaged row is an error for every receipt whose read reaches the damage.
            if row.len() > 8 {
                let last = receipts.len() - 1;
                assert!(decode_receipt_at(&row[..row.len() - 2], last).is_err());
                assert!(decode_receipt_at(&plain[..plain.len() - 2], last).is_err());
            }
        }
    }

    #[test]
    fn matching_logs_equal_a_filter_over_the_whole_receipts() {
        let keeps: [&LogKeep<'_>; 5] = [
            &|_, _| true,
            &|_, _| false,
            &|a, _| *a == Address::repeat_byte(2),
            &|_, t| t.get(1) == Some(&B256::repeat_byte(5)),
            &|a, t| *a == Address::repeat_byte(1) && t.len() == 3,
        ];
        for receipts in &partial_read_blocks() {
            let [row, plain, whole] = row_layouts(receipts);
            for (k, keep) in keeps.iter().enumerate() {
                let mut want = Vec::new();
                let mut log_index = 0;
                for (tx_index, r) in (0u32..).zip(receipts) {
                    for log in r.logs() {
                        if keep(&log.address, log.topics()) {
                            want.push(LogInBlock { tx_index, log_index, log: log.clone() });
                        }
                        log_index += 1;
                    }
                }
                for layout in [&row, &plain, &whole] {
                    assert_eq!(decode_matching_logs(layout, keep).unwrap(), want, "filter {k}");
                }
                // On the mixed block every narrowing filter keeps some logs, not all.
                if receipts.len() == 15 && k >= 2 {
                    assert!(!want.is_empty() && (want.len() as u64) < log_index, "filter {k}");
                }
            }
            if row.len() > 8 {
                assert!(decode_matching_logs(&row[..row.len() - 2], &|_, _| true).is_err());
                assert!(decode_matching_logs(&plain[..plain.len() - 2], &|_, _| false).is_err());
            }
        }
    }
}
