//! era1 history files: reading them into the import (every file checked whole before any of
//! its blocks runs) and writing stored pre-merge blocks as era1 (`loupe export --era1`).
//!
//! An era1 file (e2store records) is `Version | (Header | Body | Receipts | TotalDifficulty)* |
//! other* | Accumulator | BlockIndex` for at most 8,192 blocks of one epoch; header, body and
//! receipts are snappy-framed RLP (`e2store`). Its accumulator root commits to every block's
//! hash and total difficulty (`accumulator`), and for mainnet each epoch's root is known
//! (EIP-7643), so a file is checked against the network's history before it runs: see
//! [`read::read_file`] for what a file vouches for by itself, and [`Run`] for what is checked
//! against the chain before it and the network.

mod accumulator;
mod e2store;
mod read;
mod write;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;

use alloy_consensus::{Block, BlockBody, Header};
use alloy_primitives::{B256, U256};

pub use write::{Era1Export, Era1Stop, Era1Written, export_era1};

use super::block::{Prepared, Senders};
use super::item::{FileItem, Item};
use super::{ImportError, SourceError};
use crate::storage::Database;
use accumulator::{EPOCH_BLOCKS, known_epoch_roots};
use read::Era1File;

/// The name era1 file names give the network of `chain_id`: `mainnet`, `sepolia`, or the
/// chain id.
pub(crate) fn network_name(chain_id: u64) -> String {
    match chain_id {
        1 => "mainnet".into(),
        11_155_111 => "sepolia".into(),
        other => other.to_string(),
    }
}

/// The first proof-of-stake block and the final total difficulty of a network whose era1 files
/// cross the merge, by chain id.
fn paris(chain_id: u64) -> Option<(u64, U256)> {
    use alloy_hardforks::ethereum::{mainnet, sepolia};
    match chain_id {
        1 => Some((mainnet::MAINNET_PARIS_BLOCK, mainnet::MAINNET_PARIS_FINAL_TD)),
        11_155_111 => Some((sepolia::SEPOLIA_PARIS_BLOCK, sepolia::SEPOLIA_PARIS_FINAL_TD)),
        _ => None,
    }
}

/// Whether `path` is an era1 file: named `*.era1`, or starting with the era1 version record.
pub(super) fn is_era1(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("era1")) {
        return true;
    }
    let mut start = [0u8; 2];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut start)).is_ok()
        && u16::from_le_bytes(start) == e2store::kind::VERSION
}

/// The files to import for `paths`, in order: a folder stands for every `*.era1` file inside
/// it, sorted by name (era1 names sort by epoch); any other path is itself.
pub(super) fn expand(paths: &[&Path]) -> Result<Vec<PathBuf>, ImportError> {
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        if !path.is_dir() {
            out.push(path.to_path_buf());
            continue;
        }
        let open = |error| ImportError::Open { path: path.display().to_string(), error };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(open)? {
            let p = entry.map_err(open)?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if !name.starts_with('.')
                && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("era1"))
                && p.is_file()
            {
                files.push(p);
            }
        }
        if files.is_empty() {
            return Err(open(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the folder holds no .era1 file",
            )));
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        out.extend(files);
    }
    Ok(out)
}

/// The last block the reading thread handed on, from any file.
#[derive(Debug, Clone, Copy)]
struct Last {
    number: u64,
    hash: B256,
    /// Its total difficulty, when an era1 file gave it.
    total_difficulty: Option<U256>,
}

/// What the reading thread of one import knows across its files: the datadir as the import
/// began, and the last block read. An era1 file's first block must extend the last block read
/// before it or the stored chain (its genesis: the stored genesis), and its accumulator root
/// must be the network's known root of its epoch.
#[derive(Debug)]
pub(super) struct Run<'a> {
    db: &'a Database,
    chain_id: u64,
    /// The head when the import began.
    stored: Option<u64>,
    last: Option<Last>,
    /// The log line saying no epoch roots are known for this chain has been written.
    noted_unknown: bool,
}

impl<'a> Run<'a> {
    /// A run over `db` (of chain `chain_id`), whose head was `stored` when the import began.
    pub(super) fn new(db: &'a Database, chain_id: u64, stored: Option<u64>) -> Self {
        Self { db, chain_id, stored, last: None, noted_unknown: false }
    }

    /// The head when the import began.
    pub(super) fn stored(&self) -> Option<u64> {
        self.stored
    }

    /// Notes block `number` (hash `hash`) of an RLP file, handed on.
    pub(super) fn read(&mut self, number: u64, hash: B256) {
        self.last = Some(Last { number, hash, total_difficulty: None });
    }

    /// The stored hash of block `number` when it is stored. A storage error skips this early
    /// check: the writer reads the same tables and reports it.
    fn stored_hash(&self) -> Option<(u64, impl Fn(u64) -> Option<B256>)> {
        let reader = self
            .db
            .begin_read()
            .inspect_err(|e| tracing::debug!(target: "import", %e, "era1: no early chain check"))
            .ok()?;
        let head = reader.head().ok().flatten()?;
        Some((head, move |n| reader.canonical_hash(n).ok().flatten()))
    }

    /// The file's first block (`header`, hash `hash`) against the chain before it: the last
    /// block read in this run when that is its parent, else the stored chain. A block this run
    /// read but the writer has not stored yet, past the parent, is left to the writer.
    fn check_first(&self, header: &Header, hash: B256) -> Result<(), SourceError> {
        // Not initialised: the writer says so at the first block.
        let Some((head, stored_hash)) = self.stored.and_then(|_| self.stored_hash()) else {
            return Ok(());
        };
        let number = header.number;
        let Some(parent) = number.checked_sub(1) else {
            return match stored_hash(0) {
                Some(genesis) if genesis != hash => Err(SourceError::Era1Mismatch {
                    number: 0,
                    what: "genesis hash is not the datadir's (a file of another network?)",
                    expected: genesis.to_string(),
                    found: hash.to_string(),
                }),
                _ => Ok(()),
            };
        };
        let broken = |previous_hash: B256, previous_from| {
            if header.parent_hash == previous_hash {
                return Ok(());
            }
            Err(SourceError::Era1ChainBroken {
                number,
                parent_hash: header.parent_hash,
                previous_number: parent,
                previous_hash,
                previous_from,
            })
        };
        match self.last {
            Some(last) if last.number == parent => {
                broken(last.hash, "the last block of the file before")
            }
            _ if parent <= head => broken(stored_hash(parent).unwrap_or_default(), "stored"),
            Some(last) if last.number > parent => Ok(()),
            last => Err(SourceError::Era1Gap {
                first: number,
                reach: last.map_or(head, |l| l.number.max(head)),
            }),
        }
    }

    /// The checks of a whole file against the file before it and the network: the first
    /// total difficulty continues the previous era1 file's, the final total difficulty at the
    /// merge is the network's, and the accumulator root is the network's known root of its
    /// epoch (without known roots the file's own accumulator record is all there is, logged).
    fn check_file(&mut self, file: &Era1File, path: &Path) -> Result<(), SourceError> {
        let start = file.start();
        if let (Some(last), Some(((first, _), td))) =
            (self.last, file.headers.first().zip(file.total_difficulties.first()))
            && let Some(previous_td) = last.total_difficulty
            && last.number + 1 == start
        {
            let expected = previous_td.checked_add(first.difficulty);
            if expected != Some(*td) {
                return Err(SourceError::Era1Mismatch {
                    number: start,
                    what: "total difficulty is not the file before's plus the block's difficulty",
                    expected: expected.map_or_else(|| "overflow".into(), |v| v.to_string()),
                    found: td.to_string(),
                });
            }
        }
        if let Some((paris_block, final_td)) = paris(self.chain_id)
            && let Some(i) = (paris_block - 1).checked_sub(start)
            && let Some(td) = file.total_difficulties.get(i as usize)
            && *td != final_td
        {
            return Err(SourceError::Era1Mismatch {
                number: paris_block - 1,
                what: "total difficulty of the last proof-of-work block is not the network's final one",
                expected: final_td.to_string(),
                found: td.to_string(),
            });
        }
        let Some((network, roots)) = known_epoch_roots(self.chain_id) else {
            if !self.noted_unknown {
                self.noted_unknown = true;
                tracing::warn!(
                    target: "import",
                    chain_id = self.chain_id,
                    "no known era1 epoch roots for {}: each era1 file is checked against its own \
                     accumulator record only",
                    network_name(self.chain_id)
                );
            }
            return Ok(());
        };
        let epoch = start / EPOCH_BLOCKS;
        let known = if !start.is_multiple_of(EPOCH_BLOCKS) {
            Err(format!("the file starts at block {start}, not at an epoch's first block"))
        } else {
            roots.get(epoch as usize).copied().ok_or_else(|| {
                format!("none known ({network} has {} pre-merge epochs)", roots.len())
            })
        };
        match known {
            Ok(root) if root == file.root => {
                tracing::debug!(
                    target: "import",
                    file = %path.display(),
                    epoch,
                    first = start,
                    last = file.end(),
                    root = %file.root,
                    "era1 file verified"
                );
                Ok(())
            }
            known => Err(SourceError::Era1EpochRoot {
                network,
                epoch,
                computed: file.root,
                known: known.map_or_else(|why| why, |root| root.to_string()),
            }),
        }
    }
}

/// Reads the era1 file `path` (the `index`th of the import) for the import: checks it whole
/// ([`read::read_file`], then [`Run`]'s checks) and only then hands on its blocks, each
/// prepared as an RLP file's are, reading one body at a time. A file that fails a check is
/// handed on as [`FileItem::Refused`], none of its blocks. Returns whether to go on with the
/// next file.
pub(super) fn prepare_file(
    index: usize,
    path: &Path,
    run: &mut Run<'_>,
    tx: &SyncSender<Item>,
) -> bool {
    let opened = std::fs::File::open(path).and_then(|f| Ok((f.metadata()?.len(), f)));
    let (len, file) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            let _ = tx.send((index, FileItem::Open(error)));
            return false;
        }
    };
    let mut r = std::io::BufReader::with_capacity(1 << 20, file);
    let stored = run.stored;
    let checked = read::read_file(&mut r, len, stored, |h, hash| run.check_first(h, hash))
        .and_then(|era| run.check_file(&era, path).map(|()| era));
    let era = match checked {
        Ok(era) => era,
        Err(error) => {
            let _ = tx.send((index, FileItem::Refused(error)));
            return false;
        }
    };
    let last = era.headers.last().map(|(h, hash)| (h.number, *hash));
    let last_td = era.total_difficulties.last().copied();
    // `read_file` read the file to its end.
    let mut position = len;
    for ((header, _), (group, body_at)) in era.headers.into_iter().zip(era.offsets) {
        let next = if stored.is_some_and(|head| header.number <= head) {
            // Only compared with the stored block: its body is not read.
            let body =
                BlockBody { transactions: Vec::new(), ommers: Vec::new(), withdrawals: None };
            let block = Block { header, body };
            let prepared = Prepared::hash_only(&block);
            Ok((group, block, prepared))
        } else {
            read::read_body(&mut r, &mut position, body_at, len).map(|body| {
                let block = Block { header, body };
                let prepared = Prepared::new(&block, Senders::AllCores);
                (group, block, prepared)
            })
        };
        let failed = next.is_err();
        if tx.send((index, FileItem::Block(Box::new(next)))).is_err() || failed {
            return false;
        }
    }
    if let Some((number, hash)) = last {
        run.last = Some(Last { number, hash, total_difficulty: last_td });
    }
    true
}

#[cfg(test)]
mod tests;
