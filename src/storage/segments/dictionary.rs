//! Zstd dictionaries of segment files: which kinds train one, on which rows, and when a new
//! file takes its newest neighbour's instead.

use super::{Kind, Manifest, Segment, Store};
use crate::storage::StorageResult;

/// Rows a dictionary is trained on.
pub(super) const DICT_SAMPLES: usize = 4096;
/// A trained dictionary's size.
const DICT_BYTES: usize = 64 * 1024;

/// Whether `kind`'s rows are compressed with a dictionary trained on them: transactions and
/// receipts, whose rows share much across blocks (addresses, selectors, log topics) but little
/// within one small block of rows.
fn trains(kind: Kind) -> bool {
    matches!(kind, Kind::Transactions | Kind::Receipts)
}

/// A dictionary for `kind` from its first rows (empty when the kind takes none, or there are
/// too few rows to train on).
fn dictionary_from(kind: Kind, samples: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    if !trains(kind) {
        return Vec::new();
    }
    let samples: Vec<Vec<u8>> = samples.take(DICT_SAMPLES).collect();
    super::file::train_dictionary(&samples, DICT_BYTES)
}

/// The dictionary a new segment of `kind` compresses with: `reuse`'s when that file has one,
/// else one trained on `samples` (none for a kind that takes none). A freeze passes the newest
/// file of its kind, a merge below [`RETRAIN_LEVEL`](super::merge::RETRAIN_LEVEL) its newest part, and a larger merge none.
pub(super) fn dictionary_for(
    kind: Kind,
    reuse: Option<&Segment>,
    samples: impl FnOnce() -> StorageResult<Vec<Vec<u8>>>,
) -> StorageResult<Vec<u8>> {
    if !trains(kind) {
        return Ok(Vec::new());
    }
    if let Some(file) = reuse {
        let dictionary = file.dictionary_bytes()?;
        if !dictionary.is_empty() {
            return Ok(dictionary);
        }
    }
    Ok(dictionary_from(kind, samples()?.into_iter()))
}

/// The dictionary a freeze of `kind` compresses with: the newest segment's of that kind when it
/// has one, else one trained on `samples`. Training took about a second of the writer's time
/// per kind and epoch, 15 % of an import's writer on the 10,000-block chain over 1M accounts
/// (BENCHMARKS.md, session 36). Merges into level [`RETRAIN_LEVEL`](super::merge::RETRAIN_LEVEL) train their own on rows
/// from across their parts, so a dictionary is at most that level's span older than the rows
/// it compresses.
pub(super) fn freeze_dictionary(
    store: &Store,
    manifest: &Manifest,
    kind: Kind,
    samples: impl FnOnce() -> StorageResult<Vec<Vec<u8>>>,
) -> StorageResult<Vec<u8>> {
    let newest = manifest.files.iter().filter(|e| e.kind == kind).max_by_key(|e| e.first);
    if !trains(kind) {
        return Ok(Vec::new());
    }
    let newest = newest.map(|e| store.segment(e)).transpose()?;
    dictionary_for(kind, newest.as_deref(), samples)
}

/// Transaction-like rows: a few shared byte strings (addresses, selectors) and a counter.
#[cfg(test)]
pub(super) fn samples(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut row = b"\xf8\x6b\x80\x84\x3b\x9a\xca\x00\x82\x52\x08\x94".to_vec();
            row.extend_from_slice(&[(i % 7) as u8; 20]);
            row.extend_from_slice(&i.to_be_bytes());
            row.extend_from_slice(&[0xa9, 0x05, 0x9c, 0xbb]);
            row.extend_from_slice(&[(i % 13) as u8; 32]);
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::segments::{Entry, SegmentWriter};

    #[test]
    fn a_freeze_takes_the_newest_dictionary_of_its_kind_and_trains_one_only_without() {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = Manifest::default();
        let store = Store::open(dir.path(), &manifest).unwrap();
        // No segment of the kind yet: trained on the samples.
        let mut asked = 0;
        let trained = freeze_dictionary(&store, &manifest, Kind::Transactions, || {
            asked += 1;
            Ok(samples(2000))
        })
        .unwrap();
        assert_eq!(asked, 1);
        assert!(!trained.is_empty(), "2,000 rows train a dictionary");
        // A kind that takes none never asks for samples.
        let none = freeze_dictionary(&store, &manifest, Kind::AccountHistory, || {
            unreachable!("account history is not trained")
        });
        assert!(none.unwrap().is_empty());
        // Two segments of the kind: the newer one's dictionary is taken, not trained again.
        for (first, dictionary) in [(0, Vec::new()), (1, trained.clone())] {
            let e =
                Entry { kind: Kind::Transactions, first, last: first, rows: 0, bytes: 0, crc: 0 };
            let mut w = SegmentWriter::create(&store.path(&e), dictionary).unwrap();
            for (i, row) in samples(100).iter().enumerate() {
                w.push(&(i as u64).to_be_bytes(), row).unwrap();
            }
            w.finish().unwrap();
            manifest.files.push(e);
        }
        let reused = freeze_dictionary(&store, &manifest, Kind::Transactions, || {
            unreachable!("the newest segment has a dictionary")
        })
        .unwrap();
        assert_eq!(reused, trained);
        // The newest without one (too few rows when it was frozen): trained again.
        let e = Entry { kind: Kind::Transactions, first: 2, last: 2, rows: 0, bytes: 0, crc: 0 };
        let mut w = SegmentWriter::create(&store.path(&e), Vec::new()).unwrap();
        w.push(b"k", b"v").unwrap();
        w.finish().unwrap();
        manifest.files.push(e);
        let mut asked = 0;
        let again = freeze_dictionary(&store, &manifest, Kind::Transactions, || {
            asked += 1;
            Ok(samples(10))
        });
        assert_eq!(asked, 1);
        assert!(again.unwrap().is_empty(), "10 rows are too few to train on");
    }
}
