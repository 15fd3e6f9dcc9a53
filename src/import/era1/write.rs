//! [`export_era1`]: stored pre-merge blocks written as era1 files, one per 8,192-block epoch, in
//! the form geth's era1 builder writes (receipts as the network's RLP list, typed receipts as
//! byte strings), each under a temporary name until it is complete.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use alloy_consensus::BlockBody;
use alloy_primitives::{B256, U256};

use super::accumulator::{EPOCH_BLOCKS, accumulator_root};
use super::e2store::{compress, kind, write_record};
use super::network_name;
use crate::import::ImportError;
use crate::storage::{Database, Reader};

/// One era1 file [`export_era1`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Era1Written {
    /// Where: `<network>-<epoch, 5 digits>-<first 4 bytes of the root, hex>.era1`.
    pub path: PathBuf,
    /// Its epoch (first block / 8192).
    pub epoch: u64,
    /// Its first block.
    pub first: u64,
    /// Its last block.
    pub last: u64,
    /// Its accumulator root.
    pub root: B256,
}

/// Why [`export_era1`] wrote no further file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era1Stop {
    /// The range asked for is written whole.
    Done,
    /// Block `first_pos` has no difficulty: the merge, where era1 history ends.
    Merge {
        /// The first proof-of-stake block.
        first_pos: u64,
    },
    /// The epoch's blocks are not all stored yet, and the merge is not among them: the file
    /// would not be the epoch's.
    Incomplete {
        /// The epoch left out.
        epoch: u64,
        /// The stored head.
        head: u64,
    },
}

/// What [`export_era1`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Era1Export {
    /// The files written, in order.
    pub files: Vec<Era1Written>,
    /// Why no further file was written.
    pub stop: Era1Stop,
}

/// Writes the stored pre-merge blocks of the epochs of blocks `from..=to` (whole epochs: from
/// the first block of `from`'s epoch to the last of `to`'s, within the head) as era1 files into
/// `dir`, one per epoch, named for the network of `chain_id`. History ends at the merge, the
/// first stored block with no difficulty; an epoch is written only whole, or up to the merge.
/// Total difficulties are summed from the genesis (its difficulty included). Each file is
/// written as `.<network>-<epoch>.era1.partial`, made durable and then renamed.
pub fn export_era1(
    db: &Database,
    chain_id: u64,
    dir: &Path,
    from: u64,
    to: u64,
) -> Result<Era1Export, ImportError> {
    let reader = db.begin_read()?;
    let head = reader.head()?.ok_or(ImportError::NotInitialised)?;
    let to = to.min(head);
    let mut files = Vec::new();
    if from > to {
        return Ok(Era1Export { files, stop: Era1Stop::Done });
    }
    let (first_epoch, last_epoch) = (from / EPOCH_BLOCKS, to / EPOCH_BLOCKS);
    // The total difficulty before the first epoch.
    let mut td = U256::ZERO;
    for number in 0..first_epoch * EPOCH_BLOCKS {
        let header = header(&reader, number)?;
        if header.difficulty.is_zero() {
            return Ok(Era1Export { files, stop: Era1Stop::Merge { first_pos: number } });
        }
        td += header.difficulty;
    }
    std::fs::create_dir_all(dir)
        .map_err(|error| ImportError::Write { path: dir.display().to_string(), error })?;
    let network = network_name(chain_id);
    for epoch in first_epoch..=last_epoch {
        let start = epoch * EPOCH_BLOCKS;
        let partial = dir.join(format!(".{network}-{epoch:05}.era1.partial"));
        let write_err = |error| ImportError::Write { path: partial.display().to_string(), error };
        let file = std::fs::File::create(&partial).map_err(write_err)?;
        let mut out = EpochWriter::new(BufWriter::with_capacity(1 << 20, file));
        let mut merge = None;
        for number in start..=(start + EPOCH_BLOCKS - 1).min(head) {
            let header = header(&reader, number)?;
            if header.difficulty.is_zero() {
                merge = Some(number);
                break;
            }
            td += header.difficulty;
            let (body, _) =
                reader.body(number)?.ok_or(ImportError::NotStored { number, what: "body" })?;
            let transactions: Vec<_> =
                reader.transactions(number)?.into_iter().map(|t| t.tx).collect();
            let receipts = reader.receipts(number)?.unwrap_or_default();
            if receipts.len() != transactions.len() {
                return Err(ImportError::NotStored { number, what: "receipts" });
            }
            let body =
                BlockBody { transactions, ommers: body.ommers, withdrawals: body.withdrawals };
            out.add(&header, &body, &receipts, td).map_err(write_err)?;
        }
        let whole = out.count() == EPOCH_BLOCKS || merge.is_some() && out.count() > 0;
        if !whole {
            drop(out);
            let _ = std::fs::remove_file(&partial);
            let stop = match merge {
                Some(first_pos) => Era1Stop::Merge { first_pos },
                None => Era1Stop::Incomplete { epoch, head },
            };
            return Ok(Era1Export { files, stop });
        }
        let (root, last, file) = out.finish().map_err(write_err)?;
        file.into_inner().map_err(|e| write_err(e.into_error()))?.sync_all().map_err(write_err)?;
        let path = dir.join(format!("{network}-{epoch:05}-{}.era1", hex4(root)));
        std::fs::rename(&partial, &path).map_err(write_err)?;
        // The rename itself durable: the folder's entry.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        files.push(Era1Written { path, epoch, first: start, last, root });
        if let Some(first_pos) = merge {
            return Ok(Era1Export { files, stop: Era1Stop::Merge { first_pos } });
        }
    }
    Ok(Era1Export { files, stop: Era1Stop::Done })
}

/// The stored header of block `number`.
fn header(reader: &Reader, number: u64) -> Result<alloy_consensus::Header, ImportError> {
    reader.header(number)?.ok_or(ImportError::NotStored { number, what: "header" })
}

/// The first 4 bytes of `root`, hex, as era1 names carry them.
fn hex4(root: B256) -> String {
    root[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// One era1 file being written: the version record, then each block's four records; the
/// accumulator and the block index at the end.
pub(super) struct EpochWriter<W> {
    out: W,
    /// Bytes written so far.
    written: u64,
    /// The first block's number.
    start: Option<u64>,
    /// Each block's header record offset.
    offsets: Vec<u64>,
    /// Each block's (hash, total difficulty).
    records: Vec<(B256, U256)>,
}

impl<W: Write> EpochWriter<W> {
    /// A file written to `out`.
    pub(super) fn new(out: W) -> Self {
        Self { out, written: 0, start: None, offsets: Vec::new(), records: Vec::new() }
    }

    /// Blocks added.
    pub(super) fn count(&self) -> u64 {
        self.records.len() as u64
    }

    fn record(&mut self, kind: u16, data: &[u8]) -> std::io::Result<()> {
        self.written += write_record(&mut self.out, kind, data)?;
        Ok(())
    }

    /// Appends one block, whose total difficulty is `td`.
    pub(super) fn add(
        &mut self,
        header: &alloy_consensus::Header,
        body: &BlockBody<alloy_consensus::TxEnvelope>,
        receipts: &[alloy_consensus::ReceiptEnvelope],
        td: U256,
    ) -> std::io::Result<()> {
        if self.start.is_none() {
            self.record(kind::VERSION, &[])?;
            self.start = Some(header.number);
        }
        self.offsets.push(self.written);
        self.records.push((header.hash_slow(), td));
        let mut rlp = Vec::new();
        alloy_rlp::Encodable::encode(header, &mut rlp);
        self.record(kind::HEADER, &compress(&rlp)?)?;
        rlp.clear();
        alloy_rlp::Encodable::encode(body, &mut rlp);
        self.record(kind::BODY, &compress(&rlp)?)?;
        rlp.clear();
        alloy_rlp::encode_list::<_, alloy_consensus::ReceiptEnvelope>(receipts, &mut rlp);
        self.record(kind::RECEIPTS, &compress(&rlp)?)?;
        self.record(kind::TOTAL_DIFFICULTY, &td.to_le_bytes::<32>())
    }

    /// Writes the accumulator and the block index and flushes; returns the accumulator root,
    /// the last block's number and the output.
    pub(super) fn finish(mut self) -> std::io::Result<(B256, u64, W)> {
        let root = accumulator_root(&self.records);
        self.record(kind::ACCUMULATOR, root.as_slice())?;
        let start = self.start.unwrap_or_default();
        let at = self.written;
        let mut index = Vec::with_capacity(16 + 8 * self.offsets.len());
        index.extend_from_slice(&start.to_le_bytes());
        for offset in &self.offsets {
            // Relative to the index record: negative, as the blocks come before it.
            index.extend_from_slice(&(*offset as i64 - at as i64).to_le_bytes());
        }
        index.extend_from_slice(&(self.offsets.len() as u64).to_le_bytes());
        self.record(kind::BLOCK_INDEX, &index)?;
        self.out.flush()?;
        Ok((root, start + self.count().saturating_sub(1), self.out))
    }
}
