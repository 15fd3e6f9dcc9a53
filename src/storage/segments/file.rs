//! One segment file: rows sorted by key, in blocks of front-coded keys and their values, each
//! block zstd-compressed (with the segment's trained dictionary, if it has one) and checksummed,
//! then a block index, then a footer with the format version and checksums.
//!
//! Written here: no maintained crate writes immutable sorted files of this shape that redb's
//! readers can seek in (sstable crates bring their own block caches, bloom filters and
//! compression choices, or a whole LSM tree).
//!
//! Layout (integers little-endian):
//!
//! ```text
//! "LOUPESEG"                                    magic
//! block*            u32 length ++ u32 crc32 ++ zstd frame of:
//!                     (varint shared ++ varint rest ++ key[shared..] ++ varint value len ++ value)*
//! dictionary        the zstd dictionary, if any
//! index             per block: varint key len ++ first key ++ u64 offset ++ u32 length
//! footer (56 bytes) u64 index offset, u64 index length, u64 dictionary offset,
//!                   u32 dictionary length, u64 rows, u32 blocks, u32 crc32 of index and
//!                   dictionary, u16 version, u16 reserved, "LOUPESEG"
//! ```
//!
//! A block's first key is whole (`shared` 0), so any block decodes on its own. A file is
//! written under a temporary name and renamed into place, and synced before a commit names it;
//! its crc32 as a whole is recorded by the manifest that makes it live (`super::Manifest`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::storage::{StorageError, StorageResult};

/// The file's first and last 8 bytes.
pub const MAGIC: &[u8; 8] = b"LOUPESEG";
/// The format version in the footer; a file of another is refused.
pub const FORMAT_VERSION: u16 = 1;
/// Footer length in bytes.
const FOOTER: usize = 56;
/// Uncompressed bytes a block holds before the next row starts a new one.
const BLOCK_TARGET: usize = 16 * 1024;
/// A block's decompressed size may not exceed this (a corrupt length must not allocate much).
const MAX_BLOCK: usize = 64 * 1024 * 1024;
/// zstd level. Level 2 compresses at about level 1's speed: on the 10,000-block chain over 1M
/// accounts it takes 4.4 % off transactions and receipts (with their dictionaries) for 0.8 s more
/// of a 64-epoch merge's 480 MiB of transactions; hash-heavy kinds (state and trie history) gain
/// nothing from any level, what compresses there is the keys' tails.
const LEVEL: i32 = 2;

/// An I/O error on a segment file, named (a full disk is told apart: `StorageError::DiskFull`).
pub(crate) fn seg_io(path: &Path, error: std::io::Error) -> StorageError {
    StorageError::io(path, error)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Milliseconds to pause in the middle of writing each segment file (before its footer): a
/// fault-injection hook for the crash tests, which kill the process there. Unset: no pause.
pub const TEST_PAUSE_ENV: &str = "LOUPE_SEGMENT_TEST_PAUSE_MS";

fn test_pause() {
    static PAUSE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ms = *PAUSE.get_or_init(|| {
        std::env::var(TEST_PAUSE_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
    });
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// What a finished segment file holds: what its manifest entry records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Rows.
    pub rows: u64,
    /// File length in bytes.
    pub bytes: u64,
    /// crc32 of the whole file.
    pub crc: u32,
}

/// Writes a segment file from rows pushed in strictly ascending key order.
pub struct SegmentWriter {
    tmp: PathBuf,
    path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    crc: crc32fast::Hasher,
    compressor: zstd::bulk::Compressor<'static>,
    dictionary: Vec<u8>,
    block: Vec<u8>,
    block_first: Option<Vec<u8>>,
    last: Vec<u8>,
    index: Vec<u8>,
    blocks: u32,
    rows: u64,
}

impl std::fmt::Debug for SegmentWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentWriter").field("path", &self.path).field("rows", &self.rows).finish()
    }
}

impl SegmentWriter {
    /// Starts the file that will be `path`, under a temporary name beside it. `dictionary`: a
    /// zstd dictionary to compress every block with (empty: none).
    pub fn create(path: &Path, dictionary: Vec<u8>) -> StorageResult<Self> {
        let tmp = path.with_extension("tmp");
        let io = |e| seg_io(&tmp, e);
        let file = File::create(&tmp).map_err(io)?;
        let compressor = if dictionary.is_empty() {
            zstd::bulk::Compressor::new(LEVEL)
        } else {
            zstd::bulk::Compressor::with_dictionary(LEVEL, &dictionary)
        }
        .map_err(io)?;
        let mut w = Self {
            tmp,
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            crc: crc32fast::Hasher::new(),
            compressor,
            dictionary,
            block: Vec::with_capacity(BLOCK_TARGET + 4096),
            block_first: None,
            last: Vec::new(),
            index: Vec::new(),
            blocks: 0,
            rows: 0,
        };
        w.write(MAGIC)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> StorageResult<()> {
        self.out.write_all(bytes).map_err(|e| seg_io(&self.tmp, e))?;
        self.crc.update(bytes);
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Adds a row; its key must be greater than the previous one's.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> StorageResult<()> {
        if self.rows > 0 && key <= self.last.as_slice() {
            return Err(StorageError::SegmentOrder { path: self.path.display().to_string() });
        }
        let shared = match self.block_first {
            None => {
                self.block_first = Some(key.to_vec());
                0
            }
            Some(_) => self.last.iter().zip(key).take_while(|(a, b)| a == b).count(),
        };
        put_varint(&mut self.block, shared as u64);
        put_varint(&mut self.block, (key.len() - shared) as u64);
        self.block.extend_from_slice(&key[shared..]);
        put_varint(&mut self.block, value.len() as u64);
        self.block.extend_from_slice(value);
        self.last.clear();
        self.last.extend_from_slice(key);
        self.rows += 1;
        if self.block.len() >= BLOCK_TARGET {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> StorageResult<()> {
        let Some(first) = self.block_first.take() else { return Ok(()) };
        let frame = self.compressor.compress(&self.block).map_err(|e| seg_io(&self.tmp, e))?;
        let offset = self.offset;
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        head[4..].copy_from_slice(&crc32fast::hash(&frame).to_le_bytes());
        self.write(&head)?;
        self.write(&frame)?;
        put_varint(&mut self.index, first.len() as u64);
        self.index.extend_from_slice(&first);
        self.index.extend_from_slice(&offset.to_le_bytes());
        self.index.extend_from_slice(&(8 + frame.len() as u32).to_le_bytes());
        self.blocks += 1;
        self.block.clear();
        Ok(())
    }

    /// Writes the index and the footer, syncs the file, renames it into place and syncs its
    /// folder, so that a commit may name it.
    pub fn finish(self) -> StorageResult<Written> {
        let path = self.path.clone();
        let unsynced = Unsynced::default();
        let written = self.finish_file(&unsynced)?;
        unsynced.sync(path.parent().unwrap_or_else(|| Path::new(".")))?;
        Ok(written)
    }

    /// [`Self::finish`] without the syncs: the file is renamed into place with its write-back
    /// started and left in `unsynced`, for a caller that writes several files before the one
    /// commit that names them and syncs them all, then their folder, before it
    /// ([`Unsynced::sync`]). A freeze writes up to about ten: one sync of the folder for them
    /// took an import of empty blocks (mainnet's first 16,384) to 0.91 times its time, and
    /// their files' syncs together, after all are written, cost one journal commit where each
    /// file's own took one (docs/benchmarks/issue-62.md). A file renamed into place before
    /// its sync is not named by any manifest until the commit after the sync; a crash before
    /// that leaves it to the store's open, which removes every file the manifest does not name.
    pub fn finish_file(mut self, unsynced: &Unsynced) -> StorageResult<Written> {
        self.flush_block()?;
        tracing::debug!(target: "storage", file = %self.path.display(), rows = self.rows, "segment written");
        test_pause();
        let dict_offset = self.offset;
        let dictionary = std::mem::take(&mut self.dictionary);
        self.write(&dictionary)?;
        let index_offset = self.offset;
        let index = std::mem::take(&mut self.index);
        self.write(&index)?;
        let mut meta_crc = crc32fast::Hasher::new();
        meta_crc.update(&index);
        meta_crc.update(&dictionary);
        let mut footer = Vec::with_capacity(FOOTER);
        footer.extend_from_slice(&index_offset.to_le_bytes());
        footer.extend_from_slice(&(index.len() as u64).to_le_bytes());
        footer.extend_from_slice(&dict_offset.to_le_bytes());
        footer.extend_from_slice(&(dictionary.len() as u32).to_le_bytes());
        footer.extend_from_slice(&self.rows.to_le_bytes());
        footer.extend_from_slice(&self.blocks.to_le_bytes());
        footer.extend_from_slice(&meta_crc.finalize().to_le_bytes());
        footer.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        footer.extend_from_slice(&0u16.to_le_bytes());
        footer.extend_from_slice(MAGIC);
        self.write(&footer)?;
        let io = |e| seg_io(&self.tmp, e);
        self.out.flush().map_err(io)?;
        let file = self.out.into_inner().map_err(|e| seg_io(&self.tmp, e.into_error()))?;
        start_write_back(&file);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| seg_io(&self.path, e))?;
        unsynced.add(self.path, file);
        Ok(Written { rows: self.rows, bytes: self.offset, crc: self.crc.finalize() })
    }
}

/// Segment files renamed into place whose bytes are not synced yet
/// ([`SegmentWriter::finish_file`]).
#[derive(Debug, Default)]
pub struct Unsynced(std::sync::Mutex<Vec<(PathBuf, File)>>);

impl Unsynced {
    fn add(&self, path: PathBuf, file: File) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push((path, file));
    }

    /// Syncs every file added since the last call, then the folder `dir` they were renamed
    /// into, so that a commit may name them.
    pub fn sync(&self, dir: &Path) -> StorageResult<()> {
        let files = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for (path, file) in files {
            file.sync_all().map_err(|e| seg_io(&path, e))?;
        }
        sync_dir(dir)
    }
}

/// Starts writing `file`'s dirty pages to the disk without waiting (Linux's
/// `sync_file_range`), so that the later sync finds them written; best effort: where it fails
/// or is missing, the sync writes them.
fn start_write_back(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain call on an open descriptor that `file` owns for its duration.
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Syncs the folder `dir`, so that the files renamed into it survive a power loss.
pub(super) fn sync_dir(dir: &Path) -> StorageResult<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| seg_io(dir, e))
}

/// A block's entry in the index.
#[derive(Debug, Clone)]
struct BlockEntry {
    first: Box<[u8]>,
    offset: u64,
    len: u32,
}

/// A decoded block: its keys (whole) and values, back to back.
#[derive(Debug)]
pub struct Block {
    keys: Vec<u8>,
    values: Vec<u8>,
    /// Per row: key end in `keys`, value end in `values`.
    ends: Vec<(u32, u32)>,
}

impl Block {
    /// Rows in the block.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the block has no rows.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Row `i`: key and value.
    pub fn row(&self, i: usize) -> (&[u8], &[u8]) {
        let (ks, vs) = if i == 0 { (0, 0) } else { self.ends[i - 1] };
        let (ke, ve) = self.ends[i];
        (&self.keys[ks as usize..ke as usize], &self.values[vs as usize..ve as usize])
    }

    /// The first row whose key is at least `key`.
    pub fn seek(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.row(mid).0 < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes it holds in memory (for the block cache's weight).
    pub fn weight(&self) -> u64 {
        (self.keys.capacity() + self.values.capacity() + 8 * self.ends.capacity() + 64) as u64
    }
}

/// An open segment file: its index in memory, blocks read on demand.
pub struct Segment {
    path: PathBuf,
    file: File,
    blocks: Vec<BlockEntry>,
    dictionary: Option<zstd::dict::DecoderDictionary<'static>>,
    /// Where the dictionary's bytes are in the file: offset and length.
    dictionary_at: (u64, usize),
    rows: u64,
    len: u64,
    /// Identifies the file in the block cache.
    pub(crate) id: u64,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("path", &self.path).field("rows", &self.rows).finish()
    }
}

impl Segment {
    /// Opens `path`: reads and checks its footer, index and dictionary (their checksum), not
    /// its blocks (each is checked as it is read).
    pub fn open(path: &Path, id: u64) -> StorageResult<Self> {
        let corrupt = |detail: &str| StorageError::SegmentCorrupt {
            path: path.display().to_string(),
            detail: detail.to_string(),
        };
        let file = File::open(path).map_err(|e| seg_io(path, e))?;
        let len = file.metadata().map_err(|e| seg_io(path, e))?.len();
        if len < (MAGIC.len() + FOOTER) as u64 {
            return Err(corrupt("shorter than a header and a footer"));
        }
        let mut footer = [0u8; FOOTER];
        file.read_exact_at(&mut footer, len - FOOTER as u64).map_err(|e| seg_io(path, e))?;
        let u64_at = |i: usize| u64::from_le_bytes(footer[i..i + 8].try_into().unwrap_or_default());
        let u32_at = |i: usize| u32::from_le_bytes(footer[i..i + 4].try_into().unwrap_or_default());
        if &footer[48..56] != MAGIC {
            return Err(corrupt("no segment magic at the end (truncated?)"));
        }
        let version = u16::from_le_bytes([footer[44], footer[45]]);
        if version != FORMAT_VERSION {
            return Err(StorageError::SegmentVersion {
                path: path.display().to_string(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let (index_offset, index_len) = (u64_at(0), u64_at(8));
        let (dict_offset, dict_len) = (u64_at(16), u64::from(u32_at(24)));
        let (rows, blocks, meta_crc) = (u64_at(28), u32_at(36), u32_at(40));
        let body_end = len - FOOTER as u64;
        if index_offset.checked_add(index_len) != Some(body_end)
            || dict_offset.checked_add(dict_len) != Some(index_offset)
        {
            return Err(corrupt("footer offsets do not fit the file"));
        }
        let mut meta = vec![0u8; (index_len + dict_len) as usize];
        file.read_exact_at(&mut meta, dict_offset).map_err(|e| seg_io(path, e))?;
        let (dict, index) = meta.split_at(dict_len as usize);
        let mut crc = crc32fast::Hasher::new();
        crc.update(index);
        crc.update(dict);
        if crc.finalize() != meta_crc {
            return Err(corrupt("index checksum mismatch"));
        }
        let mut refs = Vec::with_capacity(blocks as usize);
        let mut at = 0;
        while at < index.len() {
            let klen = get_varint(index, &mut at).ok_or_else(|| corrupt("index entry"))? as usize;
            let end = at.checked_add(klen + 12).filter(|e| *e <= index.len());
            let end = end.ok_or_else(|| corrupt("index entry past its end"))?;
            let first = index[at..at + klen].into();
            let offset =
                u64::from_le_bytes(index[at + klen..at + klen + 8].try_into().unwrap_or_default());
            let blen = u32::from_le_bytes(index[at + klen + 8..end].try_into().unwrap_or_default());
            if offset.checked_add(u64::from(blen)).is_none_or(|e| e > dict_offset) {
                return Err(corrupt("a block past the data"));
            }
            refs.push(BlockEntry { first, offset, len: blen });
            at = end;
        }
        if refs.len() != blocks as usize {
            return Err(corrupt("block count differs from the index"));
        }
        let dictionary = (!dict.is_empty()).then(|| zstd::dict::DecoderDictionary::copy(dict));
        Ok(Self {
            path: path.to_path_buf(),
            file,
            blocks: refs,
            dictionary,
            dictionary_at: (dict_offset, dict.len()),
            rows,
            len,
            id,
        })
    }

    /// The zstd dictionary the file's blocks are compressed with, as stored (empty: none), for a
    /// newer segment of the same kind to compress with too.
    pub fn dictionary_bytes(&self) -> StorageResult<Vec<u8>> {
        let mut bytes = vec![0u8; self.dictionary_at.1];
        self.file
            .read_exact_at(&mut bytes, self.dictionary_at.0)
            .map_err(|e| seg_io(&self.path, e))?;
        Ok(bytes)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows in the file.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// File length in bytes.
    pub fn bytes(&self) -> u64 {
        self.len
    }

    /// Blocks in the file.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The block that would hold `key` (the last whose first key is at most `key`; 0 if `key`
    /// comes before every block).
    pub fn block_for(&self, key: &[u8]) -> usize {
        self.blocks.partition_point(|b| &*b.first <= key).saturating_sub(1)
    }

    /// Reads, checks and decodes block `i`.
    pub fn read_block(&self, i: usize) -> StorageResult<Block> {
        let corrupt = |detail: String| StorageError::SegmentCorrupt {
            path: self.path.display().to_string(),
            detail: format!("block {i}: {detail}"),
        };
        let b = self.blocks.get(i).ok_or_else(|| corrupt("no such block".into()))?;
        let mut buf = vec![0u8; b.len as usize];
        self.file.read_exact_at(&mut buf, b.offset).map_err(|e| seg_io(&self.path, e))?;
        let frame_len = u32::from_le_bytes(buf[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(buf[4..8].try_into().unwrap_or_default());
        let frame =
            buf.get(8..8 + frame_len).ok_or_else(|| corrupt("length past the block".into()))?;
        if crc32fast::hash(frame) != crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        let raw = match &self.dictionary {
            Some(d) => {
                let mut dec = zstd::bulk::Decompressor::with_prepared_dictionary(d)
                    .map_err(|e| corrupt(e.to_string()))?;
                dec.decompress(frame, MAX_BLOCK)
            }
            None => zstd::bulk::decompress(frame, MAX_BLOCK),
        }
        .map_err(|e| corrupt(format!("does not decompress: {e}")))?;
        let mut block = Block { keys: Vec::new(), values: Vec::new(), ends: Vec::new() };
        let mut at = 0;
        let mut prev: (usize, usize) = (0, 0);
        while at < raw.len() {
            let shared = get_varint(&raw, &mut at).ok_or_else(|| corrupt("row".into()))? as usize;
            let rest = get_varint(&raw, &mut at).ok_or_else(|| corrupt("row".into()))? as usize;
            if shared > prev.1 - prev.0 || at + rest > raw.len() {
                return Err(corrupt("front coding past its key".into()));
            }
            let start = block.keys.len();
            block.keys.extend_from_within(prev.0..prev.0 + shared);
            block.keys.extend_from_slice(&raw[at..at + rest]);
            at += rest;
            let vlen = get_varint(&raw, &mut at).ok_or_else(|| corrupt("row".into()))? as usize;
            let value =
                raw.get(at..at + vlen).ok_or_else(|| corrupt("value past the block".into()))?;
            block.values.extend_from_slice(value);
            at += vlen;
            prev = (start, block.keys.len());
            block.ends.push((block.keys.len() as u32, block.values.len() as u32));
        }
        Ok(block)
    }

    /// Copies the file to `to` through its open handle (it may have been unlinked since),
    /// synced.
    pub fn copy_to(&self, to: &Path) -> StorageResult<()> {
        let mut out = File::create(to).map_err(|e| seg_io(to, e))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < self.len {
            let n = (self.len - at).min(buf.len() as u64) as usize;
            self.file.read_exact_at(&mut buf[..n], at).map_err(|e| seg_io(&self.path, e))?;
            out.write_all(&buf[..n]).map_err(|e| seg_io(to, e))?;
            at += n as u64;
        }
        out.sync_all().map_err(|e| seg_io(to, e))
    }

    /// The crc32 of the whole file, read through once (`verify`).
    pub fn checksum(&self) -> StorageResult<u32> {
        let mut crc = crc32fast::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < self.len {
            let n = (self.len - at).min(buf.len() as u64) as usize;
            self.file.read_exact_at(&mut buf[..n], at).map_err(|e| seg_io(&self.path, e))?;
            crc.update(&buf[..n]);
            at += n as u64;
        }
        Ok(crc.finalize())
    }
}

/// Decoded blocks of every open segment, shared, bounded by bytes.
pub type BlockCache = quick_cache::sync::Cache<(u64, u32), Arc<Block>, BlockWeight>;

/// The block cache's weigher.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockWeight;

impl quick_cache::Weighter<(u64, u32), Arc<Block>> for BlockWeight {
    fn weight(&self, _: &(u64, u32), block: &Arc<Block>) -> u64 {
        block.weight()
    }
}

/// Trains a zstd dictionary of at most `size` bytes on `samples` (empty if too few to train).
pub fn train_dictionary(samples: &[Vec<u8>], size: usize) -> Vec<u8> {
    if samples.len() < 64 {
        return Vec::new();
    }
    zstd::dict::from_samples(samples, size).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let mut k = vec![0u8; 20];
                k[12..16].copy_from_slice(&(i / 7).to_be_bytes());
                k[16..].copy_from_slice(&i.to_be_bytes());
                (k, if i % 5 == 0 { Vec::new() } else { i.to_le_bytes().repeat(i as usize % 11) })
            })
            .collect()
    }

    #[test]
    fn rows_written_read_back_in_order_and_every_key_seeks_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        for dictionary in [false, true] {
            let path = dir.path().join(format!("s{dictionary}.seg"));
            let rows = rows(20_000);
            let dict = if dictionary {
                train_dictionary(
                    &rows.iter().map(|r| r.1.clone()).take(2000).collect::<Vec<_>>(),
                    4096,
                )
            } else {
                Vec::new()
            };
            let mut w = SegmentWriter::create(&path, dict.clone()).unwrap();
            for (k, v) in &rows {
                w.push(k, v).unwrap();
            }
            let written = w.finish().unwrap();
            assert_eq!(written.rows, rows.len() as u64);
            assert!(!path.with_extension("tmp").exists());
            let s = Segment::open(&path, 1).unwrap();
            assert_eq!(s.checksum().unwrap(), written.crc);
            assert_eq!(s.bytes(), written.bytes);
            assert_eq!(s.dictionary_bytes().unwrap(), dict, "the dictionary as written");
            assert_eq!(dictionary, !dict.is_empty());
            let mut all = Vec::new();
            for b in 0..s.block_count() {
                let block = s.read_block(b).unwrap();
                for i in 0..block.len() {
                    let (k, v) = block.row(i);
                    all.push((k.to_vec(), v.to_vec()));
                }
            }
            assert_eq!(all, rows);
            for (k, v) in rows.iter().step_by(97) {
                let block = s.read_block(s.block_for(k)).unwrap();
                let i = block.seek(k);
                assert_eq!(block.row(i), (k.as_slice(), v.as_slice()));
            }
        }
    }

    #[test]
    fn out_of_order_rows_a_flipped_byte_and_a_cut_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.seg");
        let mut w = SegmentWriter::create(&path, Vec::new()).unwrap();
        w.push(b"b", b"1").unwrap();
        assert!(matches!(w.push(b"a", b"2"), Err(StorageError::SegmentOrder { .. })));
        let mut w = SegmentWriter::create(&path, Vec::new()).unwrap();
        for (k, v) in rows(5000) {
            w.push(&k, &v).unwrap();
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut flipped = bytes.clone();
        flipped[100] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let s = Segment::open(&path, 1).unwrap();
        assert!(matches!(s.read_block(0), Err(StorageError::SegmentCorrupt { .. })));
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        assert!(matches!(Segment::open(&path, 1), Err(StorageError::SegmentCorrupt { .. })));
        let mut other = bytes.clone();
        let v = bytes.len() - 12;
        other[v] = 9;
        std::fs::write(&path, &other).unwrap();
        assert!(matches!(
            Segment::open(&path, 1),
            Err(StorageError::SegmentVersion { found: 9, .. })
        ));
    }
}
