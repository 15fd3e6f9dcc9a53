//! [`Snapshot`]: one read transaction with every table already open, shared by all readers
//! until the next commit.
//!
//! Opening a redb read transaction and its tables costs more than the few B-tree lookups a
//! request makes, so readers share one snapshot per commit generation. A snapshot pins the
//! pages it can see until its last reader drops it; writers are not blocked (MVCC).

use redb::{ReadOnlyTable, ReadTransaction};

use super::StorageResult;
use super::codec::u64_value;
use super::history::keys::Epochs;
use super::history::lookup::{History, SnapshotHistory};
use super::segments::{Kind, Segments, Store};
use super::tables::{self, meta};

/// The block numbers the tags `latest`, `safe`, `finalized` resolve to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMarkers {
    /// Last fully stored block.
    pub head: u64,
    /// The `safe` block.
    pub safe: u64,
    /// The `finalized` block.
    pub finalized: u64,
}

/// A consistent view of the whole database.
pub(crate) struct Snapshot {
    pub(crate) markers: Option<BlockMarkers>,
    /// The anchor block of an anchored datadir ([`meta::ANCHOR`]).
    pub(crate) anchor: Option<u64>,
    pub(crate) headers: ReadOnlyTable<u64, &'static [u8]>,
    pub(crate) canonical: ReadOnlyTable<u64, &'static [u8; 32]>,
    pub(crate) hash_to_number: ReadOnlyTable<&'static [u8; 32], u64>,
    pub(crate) bodies: ReadOnlyTable<u64, &'static [u8]>,
    pub(crate) transactions: ReadOnlyTable<&'static [u8; 12], &'static [u8]>,
    pub(crate) receipts: ReadOnlyTable<u64, &'static [u8]>,
    pub(crate) access_lists: ReadOnlyTable<u64, &'static [u8]>,
    pub(crate) tx_lookup: ReadOnlyTable<&'static [u8; 32], &'static [u8; 12]>,
    pub(crate) bytecodes: ReadOnlyTable<&'static [u8; 32], &'static [u8]>,
    pub(crate) meta: ReadOnlyTable<&'static str, &'static [u8]>,
    pub(crate) trace_addresses: ReadOnlyTable<&'static [u8; 28], ()>,
    pub(crate) trie: TrieTables,
}

/// The state and trie tables of one read snapshot, open: for the trie layer (proofs and
/// verification) and for [`super::StateAt`].
/// Their layouts are in [`super::tables`].
#[allow(missing_docs)]
pub struct TrieTables {
    pub preimages: ReadOnlyTable<&'static [u8; 32], &'static [u8]>,
    pub hashed_accounts: ReadOnlyTable<&'static [u8; 32], &'static [u8]>,
    pub hashed_storage: ReadOnlyTable<&'static [u8; 64], &'static [u8]>,
    pub hashed_account_history: ReadOnlyTable<&'static [u8; 44], &'static [u8]>,
    pub hashed_storage_history: ReadOnlyTable<&'static [u8; 76], &'static [u8]>,
    pub hashed_account_epochs: ReadOnlyTable<&'static [u8; 36], u64>,
    pub hashed_storage_epochs: ReadOnlyTable<&'static [u8; 68], u64>,
    pub account_trie: ReadOnlyTable<&'static [u8; 33], &'static [u8]>,
    pub storage_trie: ReadOnlyTable<&'static [u8; 65], &'static [u8]>,
    pub account_trie_history: ReadOnlyTable<&'static [u8; 45], &'static [u8]>,
    pub storage_trie_history: ReadOnlyTable<&'static [u8; 77], &'static [u8]>,
    pub account_trie_epochs: ReadOnlyTable<&'static [u8; 37], u64>,
    pub storage_trie_epochs: ReadOnlyTable<&'static [u8; 69], u64>,
    /// The datadir's history epoch length.
    pub epochs: Epochs,
    /// The epoch of the snapshot's head, the one not indexed yet (`storage::history::index`).
    pub open_epoch: u32,
    /// The frozen epochs' segments (`storage::segments`).
    pub segments: Segments,
}

impl TrieTables {
    /// The hashed-account history with its index.
    pub fn account_history(&self) -> SnapshotHistory<'_, 44, 36, &'static [u8]> {
        self.history(
            &self.hashed_account_history,
            &self.hashed_account_epochs,
            Kind::AccountHistory,
        )
    }

    /// The hashed-storage history with its index.
    pub fn storage_history(&self) -> SnapshotHistory<'_, 76, 68, &'static [u8]> {
        self.history(
            &self.hashed_storage_history,
            &self.hashed_storage_epochs,
            Kind::StorageHistory,
        )
    }

    /// `rows` with its epoch `index` and the segments of `kind`, as of this snapshot.
    pub fn history<'t, R, X>(&'t self, rows: &'t R, index: &'t X, kind: Kind) -> History<'t, R, X> {
        History {
            rows,
            index,
            epochs: self.epochs,
            open: self.open_epoch,
            frozen: Some((&self.segments, kind)),
        }
    }
}

impl std::fmt::Debug for TrieTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrieTables").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("markers", &self.markers).finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The epoch of block `number` if its block data is frozen.
    pub(crate) fn frozen_block(&self, number: u64) -> Option<u32> {
        let epoch = self.trie.epochs.of(number);
        self.trie.segments.holds_blocks(epoch).then_some(epoch)
    }

    /// Canonical hash of block `number`, from the B-tree or the segments.
    pub(crate) fn canonical_hash(
        &self,
        number: u64,
    ) -> StorageResult<Option<alloy_primitives::B256>> {
        if let Some(epoch) = self.frozen_block(number) {
            let key = number.to_be_bytes();
            return Ok(self
                .trie
                .segments
                .first(Kind::Canonical, epoch, &key, &key)?
                .and_then(|(_, v)| <[u8; 32]>::try_from(v.as_slice()).ok())
                .map(alloy_primitives::B256::from));
        }
        Ok(self.canonical.get(number)?.map(|v| alloy_primitives::B256::from(*v.value())))
    }

    /// Opens every table of `txn`, reads the block markers, and takes the segments its
    /// manifest names from `store`.
    pub(crate) fn open(txn: ReadTransaction, store: &std::sync::Arc<Store>) -> StorageResult<Self> {
        let meta_table = txn.open_table(tables::META)?;
        let get = |key: &str| -> StorageResult<Option<u64>> {
            meta_table.get(key)?.map(|v| u64_value("meta", v.value())).transpose()
        };
        let markers = match get(meta::HEAD)? {
            Some(head) => Some(BlockMarkers {
                head,
                safe: get(meta::SAFE)?.unwrap_or(head),
                finalized: get(meta::FINALIZED)?.unwrap_or(head),
            }),
            None => None,
        };
        let anchor = get(meta::ANCHOR)?;
        let epochs = Epochs::read(&meta_table)?;
        let segments =
            store.view_stored(&meta_table, super::segments::ProofHistory::read(&meta_table)?)?;
        let open_epoch = epochs.of(markers.as_ref().map_or(0, |m| m.head));
        Ok(Self {
            markers,
            anchor,
            headers: txn.open_table(tables::HEADERS)?,
            canonical: txn.open_table(tables::CANONICAL)?,
            hash_to_number: txn.open_table(tables::HASH_TO_NUMBER)?,
            bodies: txn.open_table(tables::BODIES)?,
            transactions: txn.open_table(tables::TRANSACTIONS)?,
            receipts: txn.open_table(tables::RECEIPTS)?,
            access_lists: txn.open_table(tables::ACCESS_LISTS)?,
            tx_lookup: txn.open_table(tables::TX_LOOKUP)?,
            bytecodes: txn.open_table(tables::BYTECODES)?,
            meta: meta_table,
            trace_addresses: txn.open_table(tables::TRACE_ADDRESSES)?,
            trie: TrieTables {
                preimages: txn.open_table(tables::PREIMAGES)?,
                hashed_accounts: txn.open_table(tables::HASHED_ACCOUNTS)?,
                hashed_storage: txn.open_table(tables::HASHED_STORAGE)?,
                hashed_account_history: txn.open_table(tables::HASHED_ACCOUNT_HISTORY)?,
                hashed_storage_history: txn.open_table(tables::HASHED_STORAGE_HISTORY)?,
                hashed_account_epochs: txn.open_table(tables::HASHED_ACCOUNT_EPOCHS)?,
                hashed_storage_epochs: txn.open_table(tables::HASHED_STORAGE_EPOCHS)?,
                account_trie: txn.open_table(tables::ACCOUNT_TRIE)?,
                storage_trie: txn.open_table(tables::STORAGE_TRIE)?,
                account_trie_history: txn.open_table(tables::ACCOUNT_TRIE_HISTORY)?,
                storage_trie_history: txn.open_table(tables::STORAGE_TRIE_HISTORY)?,
                account_trie_epochs: txn.open_table(tables::ACCOUNT_TRIE_EPOCHS)?,
                storage_trie_epochs: txn.open_table(tables::STORAGE_TRIE_EPOCHS)?,
                epochs,
                open_epoch,
                segments,
            },
        })
    }
}
