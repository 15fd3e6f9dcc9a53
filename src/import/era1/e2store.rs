//! e2store framing of era1 files: 8-byte record headers, and the snappy-framed record data.
//!
//! A record is `type (u16 LE) | length (u32 LE) | reserved (u16, zero) | data`. Written here by
//! hand: no maintained crate reads it (reth-era is not on crates.io; `e2store` pulls in alloy
//! 0.12). The snappy framing itself is the `snap` crate's.

use std::io::{Read, Write};

use crate::import::SourceError;
use crate::import::source::{MAX_RECORD_BYTES, read_full};

/// Record types of an era1 file (u16, little-endian on disk).
pub(crate) mod kind {
    /// The version record, first in the file: bytes `65 32`, no data.
    pub(crate) const VERSION: u16 = 0x3265;
    /// A block header, snappy-framed RLP.
    pub(crate) const HEADER: u16 = 0x03;
    /// A block body (transactions, ommers), snappy-framed RLP.
    pub(crate) const BODY: u16 = 0x04;
    /// A block's receipts list, snappy-framed RLP.
    pub(crate) const RECEIPTS: u16 = 0x05;
    /// The total difficulty after the block, 32 bytes little-endian.
    pub(crate) const TOTAL_DIFFICULTY: u16 = 0x06;
    /// The accumulator root of the file's (hash, total difficulty) records, 32 bytes.
    pub(crate) const ACCUMULATOR: u16 = 0x07;
    /// The block index, last in the file: bytes `66 32`.
    pub(crate) const BLOCK_INDEX: u16 = 0x3266;

    /// What a record of `kind` is, for messages.
    pub(crate) fn name(kind: u16) -> &'static str {
        match kind {
            VERSION => "version",
            HEADER => "header",
            BODY => "body",
            RECEIPTS => "receipts",
            TOTAL_DIFFICULTY => "total difficulty",
            ACCUMULATOR => "accumulator",
            BLOCK_INDEX => "block index",
            _ => "other",
        }
    }
}

/// Bytes of a record header.
pub(crate) const HEADER_BYTES: u64 = 8;

/// A record header: the record's type and the length of its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// The record's type ([`kind`]).
    pub(crate) kind: u16,
    /// Bytes of data after the header.
    pub(crate) len: u64,
}

impl Record {
    /// Parses the header `bytes` of the record at byte `offset` of a file of `file_len` bytes:
    /// its data must lie inside the file and within [`MAX_RECORD_BYTES`].
    pub(crate) fn parse(bytes: [u8; 8], offset: u64, file_len: u64) -> Result<Self, SourceError> {
        let kind = u16::from_le_bytes([bytes[0], bytes[1]]);
        let len = u64::from(u32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]));
        let reserved = u16::from_le_bytes([bytes[6], bytes[7]]);
        if reserved != 0 {
            return Err(SourceError::RecordReserved { offset, reserved });
        }
        if offset.saturating_add(HEADER_BYTES).saturating_add(len) > file_len {
            return Err(SourceError::RecordTruncated { offset, end: file_len });
        }
        if len > MAX_RECORD_BYTES {
            return Err(SourceError::RecordTooLarge { offset, size: len });
        }
        Ok(Self { kind, len })
    }

    /// The header's bytes.
    pub(crate) fn to_bytes(self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..2].copy_from_slice(&self.kind.to_le_bytes());
        out[2..6].copy_from_slice(&(self.len as u32).to_le_bytes());
        out
    }
}

/// Reads the header of the record at `offset` (where `r` stands): `None` at a clean end of the
/// file.
pub(crate) fn read_header(
    r: &mut impl Read,
    offset: u64,
    file_len: u64,
) -> Result<Option<Record>, SourceError> {
    let mut bytes = [0u8; 8];
    let got = read_full(r, &mut bytes).map_err(|error| SourceError::Io { offset, error })?;
    match got {
        0 => Ok(None),
        8 => Record::parse(bytes, offset, file_len).map(Some),
        _ => Err(SourceError::RecordTruncated { offset, end: file_len }),
    }
}

/// Reads the `len` bytes of data of the record at `offset`.
pub(crate) fn read_data(
    r: &mut impl Read,
    offset: u64,
    record: Record,
    file_len: u64,
) -> Result<Vec<u8>, SourceError> {
    // `len` is within the file and MAX_RECORD_BYTES (`Record::parse`).
    let mut data = vec![0u8; record.len as usize];
    let got = read_full(r, &mut data).map_err(|error| SourceError::Io { offset, error })?;
    if got < data.len() {
        return Err(SourceError::RecordTruncated { offset, end: file_len });
    }
    Ok(data)
}

/// Writes one record; returns the bytes written (header and data).
pub(crate) fn write_record(out: &mut impl Write, kind: u16, data: &[u8]) -> std::io::Result<u64> {
    let len = u32::try_from(data.len()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a {} record of {} bytes does not fit e2store", kind::name(kind), data.len()),
        )
    })?;
    out.write_all(&Record { kind, len: u64::from(len) }.to_bytes())?;
    out.write_all(data)?;
    Ok(HEADER_BYTES + u64::from(len))
}

/// Decompresses snappy-framed `data`, refusing more than [`MAX_RECORD_BYTES`] of output.
pub(crate) fn decompress(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    snap::read::FrameDecoder::new(data)
        .take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("snappy: {e}"))?;
    if out.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!("decompresses to more than {MAX_RECORD_BYTES} bytes"));
    }
    Ok(out)
}

/// Compresses `data` in the snappy framing format.
pub(crate) fn compress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    snap::read::FrameEncoder::new(data).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_header_with_a_garbage_length_is_refused_without_allocating() {
        // A header record claiming 4 GiB in a 100-byte file: truncated, named by both offsets.
        let bytes = [0x03, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00];
        let err = Record::parse(bytes, 40, 100).unwrap_err();
        assert!(matches!(err, SourceError::RecordTruncated { offset: 40, end: 100 }), "{err}");
        assert_eq!(
            err.to_string(),
            "file ends at byte 100 inside the record at byte 40 (truncated?)"
        );
        // In a file long enough for it, the length is still above the limit.
        let err = Record::parse(bytes, 40, u64::MAX).unwrap_err();
        assert!(matches!(err, SourceError::RecordTooLarge { offset: 40, size: 0xffff_ffff }));
        // Non-zero reserved bytes: not e2store.
        let err = Record::parse([0x03, 0, 1, 0, 0, 0, 0, 7], 8, 100).unwrap_err();
        assert!(matches!(err, SourceError::RecordReserved { offset: 8, reserved: 0x0700 }));
        // A well-formed one, and its bytes back.
        let ok = Record::parse([0x66, 0x32, 16, 0, 0, 0, 0, 0], 0, 24).unwrap();
        assert_eq!(ok, Record { kind: kind::BLOCK_INDEX, len: 16 });
        assert_eq!(ok.to_bytes(), [0x66, 0x32, 16, 0, 0, 0, 0, 0]);
        // A header cut short.
        let mut short = &[0x03u8, 0x00, 0x10][..];
        let err = read_header(&mut short, 64, 67).unwrap_err();
        assert!(matches!(err, SourceError::RecordTruncated { offset: 64, end: 67 }));
        assert!(read_header(&mut &[][..], 64, 64).unwrap().is_none());
    }

    #[test]
    fn a_record_round_trips_through_snappy_and_e2store() {
        let payload: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8 ^ (i / 997) as u8).collect();
        let compressed = compress(&payload).unwrap();
        assert!(compressed.len() < payload.len(), "compressible data shrinks");
        let mut file = Vec::new();
        let written = write_record(&mut file, kind::BODY, &compressed).unwrap();
        assert_eq!(written, file.len() as u64);
        let mut r = file.as_slice();
        let record = read_header(&mut r, 0, file.len() as u64).unwrap().unwrap();
        assert_eq!(record, Record { kind: kind::BODY, len: compressed.len() as u64 });
        let data = read_data(&mut r, 0, record, file.len() as u64).unwrap();
        assert_eq!(decompress(&data).unwrap(), payload);
        // A flipped byte breaks the frame's checksum (or its structure): an error, not a panic.
        let mut bad = data;
        let last = bad.len() - 1;
        bad[last] ^= 0x55;
        assert!(decompress(&bad).is_err());
    }
}
