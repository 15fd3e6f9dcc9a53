//! [`BlockReader`]: streams concatenated RLP blocks from a file, one block in memory at a time.

use std::io::Read;

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::B256;
use alloy_rlp::Decodable;

/// Largest block accepted (a guard against a garbage length prefix allocating gigabytes).
const MAX_BLOCK_BYTES: u64 = 256 * 1024 * 1024;

/// Largest record, and largest decompressed record, accepted: a guard against a garbage length
/// allocating gigabytes (the largest pre-merge block is a few MiB).
pub(super) const MAX_RECORD_BYTES: u64 = 256 * 1024 * 1024;

/// What was wrong with the bytes of a chain file (RLP or era1).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading failed.
    #[error("read error at byte {offset}: {error}")]
    Io {
        /// Offset.
        offset: u64,
        /// I/O error.
        error: std::io::Error,
    },
    /// The bytes do not start an RLP list, so this is not a block (or not RLP at all).
    #[error(
        "not an RLP chain file: byte 0x{byte:02x} at offset {offset} does not start an RLP list (a block)"
    )]
    NotAList {
        /// Offset.
        offset: u64,
        /// The byte found.
        byte: u8,
    },
    /// The file ends inside a block.
    #[error(
        "file truncated inside the block starting at byte {offset}: it needs {needed} bytes, only {available} remain"
    )]
    Truncated {
        /// Offset of the block.
        offset: u64,
        /// Bytes the block's length prefix announces.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// The length prefix announces an absurd size.
    #[error(
        "block at byte {offset} claims {size} bytes, more than the {MAX_BLOCK_BYTES}-byte limit"
    )]
    TooLarge {
        /// Offset.
        offset: u64,
        /// Claimed size.
        size: u64,
    },
    /// The bytes are RLP but not a valid block.
    #[error("block at byte {offset} does not decode: {message}")]
    Decode {
        /// Offset.
        offset: u64,
        /// Decoder message.
        message: String,
    },
    /// An e2store record (era1) runs past the end of the file.
    #[error("file ends at byte {end} inside the record at byte {offset} (truncated?)")]
    RecordTruncated {
        /// Offset of the record's header.
        offset: u64,
        /// Length of the file.
        end: u64,
    },
    /// An e2store record's length is absurd.
    #[error(
        "record at byte {offset} claims {size} bytes, more than the {MAX_RECORD_BYTES}-byte limit"
    )]
    RecordTooLarge {
        /// Offset of the record's header.
        offset: u64,
        /// Claimed length.
        size: u64,
    },
    /// An e2store record header whose reserved bytes are not zero: not an e2store file.
    #[error("record at byte {offset}: reserved header bytes are 0x{reserved:04x}, not zero")]
    RecordReserved {
        /// Offset of the record's header.
        offset: u64,
        /// The reserved bytes, as a little-endian u16.
        reserved: u16,
    },
    /// An era1 record out of its place.
    #[error(
        "record at byte {offset} is a {found_name} record (type 0x{found:04x}) where {expected} is due"
    )]
    RecordOrder {
        /// Offset of the record's header.
        offset: u64,
        /// Its type.
        found: u16,
        /// What that type is.
        found_name: &'static str,
        /// What the era1 layout wants there.
        expected: &'static str,
    },
    /// The file does not start with the era1 version record.
    #[error(
        "not an era1 file: the first record has type 0x{found:04x}, not the version record 0x3265"
    )]
    NotEra1 {
        /// Type of the first record.
        found: u16,
    },
    /// The records end before the accumulator and the block index.
    #[error(
        "file ends at byte {end} after {blocks} blocks, without its accumulator and block index \
         (truncated?)"
    )]
    Era1Ended {
        /// Length of the file.
        end: u64,
        /// Blocks read.
        blocks: u64,
    },
    /// An era1 record's data does not decode.
    #[error("{what} record at byte {offset}: {message}")]
    Era1Record {
        /// Offset of the record's header.
        offset: u64,
        /// Which record.
        what: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The era1 block index does not describe the file's records.
    #[error("block index: {message}")]
    Era1Index {
        /// What is wrong, with the values.
        message: String,
    },
    /// An era1 block's parent hash is not the hash of the block before it.
    #[error(
        "block {number}: header hash chain broken: parent hash {parent_hash} is not block \
         {previous_number}'s hash {previous_hash} ({previous_from})"
    )]
    Era1ChainBroken {
        /// The block.
        number: u64,
        /// Its parent hash.
        parent_hash: B256,
        /// The block before it.
        previous_number: u64,
        /// That block's hash.
        previous_hash: B256,
        /// Where that block is: in the file, stored, in the file before.
        previous_from: &'static str,
    },
    /// Two values that must be equal for an era1 block are not.
    #[error("block {number}: {what}: expected {expected}, found {found}")]
    Era1Mismatch {
        /// The block.
        number: u64,
        /// Which value is not what (the file's "found" is not the "expected").
        what: &'static str,
        /// The value required.
        expected: String,
        /// The value the file has.
        found: String,
    },
    /// The era1 file does not follow the chain stored or imported before it.
    #[error(
        "the file starts at block {first}, but the chain before it ends at block {reach}: \
         blocks {}..={} are missing (files out of order?)",
        .reach + 1, .first - 1
    )]
    Era1Gap {
        /// The file's first block.
        first: u64,
        /// The last block stored or read before it.
        reach: u64,
    },
    /// The accumulator root computed from the headers is not the file's.
    #[error("accumulator root {computed} computed from the headers differs from the file's {file}")]
    Era1Accumulator {
        /// Root of the file's (hash, total difficulty) records.
        computed: B256,
        /// The file's accumulator record.
        file: B256,
    },
    /// The file's accumulator root is not the network's known root of its epoch.
    #[error("accumulator root {computed} is not {network}'s known root of epoch {epoch}: {known}")]
    Era1EpochRoot {
        /// The network.
        network: &'static str,
        /// The file's epoch (first block / 8192).
        epoch: u64,
        /// The file's root (equal to the one computed from its headers).
        computed: B256,
        /// The known root, or why there is none.
        known: String,
    },
}

/// Reads one block at a time from a stream of concatenated RLP blocks (`geth export` format).
#[derive(Debug)]
pub struct BlockReader<R> {
    inner: R,
    offset: u64,
    buf: Vec<u8>,
}

impl<R: Read> BlockReader<R> {
    /// Wraps a reader positioned at the first block.
    pub fn new(inner: R) -> Self {
        Self { inner, offset: 0, buf: Vec::new() }
    }

    /// The next block and the byte offset it started at; `None` at a clean end of file.
    pub fn next_block(&mut self) -> Option<Result<(u64, Block<TxEnvelope>), SourceError>> {
        let start = self.offset;
        let mut first = [0u8; 1];
        match read_full(&mut self.inner, &mut first) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(error) => return Some(Err(SourceError::Io { offset: start, error })),
        }
        Some(self.read_rest(start, first[0]))
    }

    fn read_rest(
        &mut self,
        start: u64,
        first: u8,
    ) -> Result<(u64, Block<TxEnvelope>), SourceError> {
        if first < 0xc0 {
            return Err(SourceError::NotAList { offset: start, byte: first });
        }
        self.buf.clear();
        self.buf.push(first);
        let payload_len = if first <= 0xf7 {
            u64::from(first - 0xc0)
        } else {
            let len_of_len = usize::from(first - 0xf7);
            let mut len_bytes = [0u8; 8];
            let got = read_full(&mut self.inner, &mut len_bytes[..len_of_len])
                .map_err(|error| SourceError::Io { offset: start, error })?;
            if got < len_of_len {
                return Err(SourceError::Truncated {
                    offset: start,
                    needed: 1 + len_of_len as u64,
                    available: 1 + got as u64,
                });
            }
            self.buf.extend_from_slice(&len_bytes[..len_of_len]);
            len_bytes[..len_of_len].iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
        };
        if payload_len > MAX_BLOCK_BYTES {
            return Err(SourceError::TooLarge { offset: start, size: payload_len });
        }
        let header_len = self.buf.len();
        self.buf.resize(header_len + payload_len as usize, 0);
        let got = read_full(&mut self.inner, &mut self.buf[header_len..])
            .map_err(|error| SourceError::Io { offset: start, error })?;
        if got < payload_len as usize {
            return Err(SourceError::Truncated {
                offset: start,
                needed: header_len as u64 + payload_len,
                available: (header_len + got) as u64,
            });
        }
        self.offset = start + self.buf.len() as u64;
        let mut slice = self.buf.as_slice();
        let block = Block::<TxEnvelope>::decode(&mut slice)
            .map_err(|e| SourceError::Decode { offset: start, message: e.to_string() })?;
        if !slice.is_empty() {
            return Err(SourceError::Decode {
                offset: start,
                message: format!("{} trailing bytes inside the block's RLP list", slice.len()),
            });
        }
        Ok((start, block))
    }
}

/// Reads until `buf` is full or EOF; returns the count read (what an interrupted read left
/// unread is read again).
pub(super) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_rlp_and_empty_is_clean_eof() {
        let mut r = BlockReader::new(&b"{\"json\": true}"[..]);
        assert!(matches!(
            r.next_block(),
            Some(Err(SourceError::NotAList { offset: 0, byte: b'{' }))
        ));
        let mut r = BlockReader::new(&b""[..]);
        assert!(r.next_block().is_none());
    }

    #[test]
    fn truncated_length_prefix() {
        let mut r = BlockReader::new(&[0xf9u8, 0x01][..]);
        assert!(matches!(r.next_block(), Some(Err(SourceError::Truncated { offset: 0, .. }))));
    }
}
