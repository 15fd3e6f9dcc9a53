//! [`Reader`]: typed reads of blocks, transactions and receipts from one consistent snapshot.

use alloy_consensus::{BlockBody, Header, ReceiptEnvelope, Signed, TxEnvelope};
use alloy_eips::Decodable2718;
use alloy_primitives::{Address, B256};
use alloy_rlp::Decodable;
use std::sync::Arc;

use super::segments::Kind;

use super::codec::receipts::{
    LogInBlock, LogKeep, ReceiptInBlock, decode_cumulative_gas, decode_matching_logs,
    decode_receipt_at, decode_receipts,
};
use super::codec::tx::{TxFees, decode_tx_fees, decode_tx_hash, split_tx_key, tx_key};
use super::snapshot::{BlockMarkers, Snapshot};
use super::tables::meta;
use super::{StateAt, StorageError, StorageResult};

/// A transaction as stored, with its recovered sender and position.
#[derive(Debug, Clone)]
pub struct StoredTransaction {
    /// Recovered sender.
    pub sender: Address,
    /// The signed transaction.
    pub tx: TxEnvelope,
    /// Block number it is in.
    pub block: u64,
    /// Index within the block.
    pub index: u32,
}

/// A read snapshot of the archive. Everything read through one `Reader` is consistent.
#[derive(Debug)]
pub struct Reader {
    snap: Arc<Snapshot>,
    cache: Arc<super::cache::BlockCache>,
}

fn corrupt(table: &'static str, e: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt { table, detail: e.to_string() }
}

impl Reader {
    pub(super) fn new(snap: Arc<Snapshot>, cache: Arc<super::cache::BlockCache>) -> Self {
        Self { snap, cache }
    }

    /// Reads every segment file the snapshot's manifest names through once and checks its
    /// crc32 against the manifest's, and that the snapshot reads exactly those files, frozen to
    /// the manifest's epochs; returns the files checked.
    pub fn check_segments(&self) -> StorageResult<u64> {
        let manifest = super::segments::Manifest::read(&self.snap.meta)?;
        let view = &self.snap.trie.segments;
        let marks = (view.frozen_to, view.blocks_frozen_to, view.trace_frozen_to);
        if view.files().count() != manifest.files.len()
            || marks != (manifest.frozen_to, manifest.blocks_frozen_to, manifest.trace_frozen_to)
        {
            return Err(StorageError::SegmentCorrupt {
                path: "meta.segments".into(),
                detail: format!(
                    "the snapshot reads {} files frozen to epochs {marks:?}; its manifest names {} frozen to {:?}",
                    view.files().count(),
                    manifest.files.len(),
                    (manifest.frozen_to, manifest.blocks_frozen_to, manifest.trace_frozen_to)
                ),
            });
        }
        for entry in &manifest.files {
            let Some((_, _, _, s)) = self
                .snap
                .trie
                .segments
                .files()
                .find(|(k, f, l, _)| (*k, *f, *l) == (entry.kind, entry.first, entry.last))
            else {
                return Err(StorageError::SegmentCorrupt {
                    path: entry.file_name(),
                    detail: "named by the manifest but not open".into(),
                });
            };
            let crc = s.checksum()?;
            if crc != entry.crc {
                return Err(StorageError::SegmentCorrupt {
                    path: s.path().display().to_string(),
                    detail: format!("crc32 {crc:08x}; the manifest says {:08x}", entry.crc),
                });
            }
        }
        Ok(manifest.files.len() as u64)
    }

    /// The genesis.json text this database was initialised with, if initialised.
    pub fn genesis_json(&self) -> StorageResult<Option<String>> {
        let t = &self.snap.meta;
        match t.get(meta::GENESIS)? {
            Some(v) => {
                String::from_utf8(v.value().to_vec()).map(Some).map_err(|e| corrupt("meta", e))
            }
            None => Ok(None),
        }
    }

    /// The anchor block of a datadir that starts there instead of at genesis
    /// ([`meta::ANCHOR`]); `None` for a datadir that starts at genesis.
    pub fn anchor(&self) -> Option<u64> {
        self.snap.anchor
    }

    /// The genesis state root recorded in an anchored datadir ([`meta::ANCHOR_GENESIS_ROOT`]).
    pub fn anchor_genesis_root(&self) -> StorageResult<Option<B256>> {
        match self.snap.meta.get(meta::ANCHOR_GENESIS_ROOT)? {
            Some(v) => <[u8; 32]>::try_from(v.value())
                .map(|b| Some(B256::from(b)))
                .map_err(|_| corrupt("meta", "anchor_genesis_root is not 32 bytes")),
            None => Ok(None),
        }
    }

    /// Which trie history the datadir keeps.
    pub fn proof_history(&self) -> StorageResult<super::segments::ProofHistory> {
        super::segments::ProofHistory::read(&self.snap.meta)
    }

    /// The first block whose trie nodes are kept when the datadir keeps trie history for the
    /// unwind window only and has dropped some (`None`: proofs at every block).
    pub fn proofs_from(&self) -> Option<u64> {
        self.snap.trie.segments.proofs_from(self.snap.trie.epochs)
    }

    /// The last block whose state root a bulk import checked for a whole commit group
    /// ([`meta::GROUP_ROOT_AT`]): no proofs below it (`None`: every block's root was stored).
    pub fn group_root_at(&self) -> StorageResult<Option<u64>> {
        self.snap
            .meta
            .get(meta::GROUP_ROOT_AT)?
            .map(|v| super::codec::u64_value("meta", v.value()))
            .transpose()
    }

    /// Where the trie-history stage stands (`None`: no import checked roots per group).
    pub fn trie_stage(&self) -> StorageResult<Option<super::history::staged::TrieStage>> {
        super::history::staged::TrieStage::read(&self.snap.meta)
    }

    /// The header policy's name recorded at init (`None` for a datadir made before it was).
    pub fn header_policy(&self) -> StorageResult<Option<String>> {
        match self.snap.meta.get(meta::HEADER_POLICY)? {
            Some(v) => {
                String::from_utf8(v.value().to_vec()).map(Some).map_err(|e| corrupt("meta", e))
            }
            None => Ok(None),
        }
    }

    /// The genesis allocation's digest recorded at init.
    pub fn alloc_digest(&self) -> StorageResult<Option<alloy_primitives::U256>> {
        Ok(self
            .snap
            .meta
            .get(meta::ALLOC_DIGEST)?
            .map(|v| alloy_primitives::U256::from_be_slice(v.value())))
    }

    /// Number of the last fully stored block, `None` before `init`.
    pub fn head(&self) -> StorageResult<Option<u64>> {
        Ok(self.snap.markers.map(|m| m.head))
    }

    /// Head, safe and finalized block numbers (`None` before `init`).
    pub fn markers(&self) -> StorageResult<Option<BlockMarkers>> {
        Ok(self.snap.markers)
    }

    /// Header of block `number` with its hash, from the cache when it is there.
    pub fn header_and_hash(&self, number: u64) -> StorageResult<Option<Arc<(Header, B256)>>> {
        if let Some(entry) = self.cache.header(number)
            && self.canonical_hash(number)? == Some(entry.1)
        {
            return Ok(Some(entry));
        }
        let (Some(header), Some(hash)) = (self.header(number)?, self.canonical_hash(number)?)
        else {
            return Ok(None);
        };
        let entry = Arc::new((header, hash));
        self.cache.insert_header(number, entry.clone());
        Ok(Some(entry))
    }

    /// Canonical hash of block `number`.
    pub fn canonical_hash(&self, number: u64) -> StorageResult<Option<B256>> {
        self.snap.canonical_hash(number)
    }

    /// The epoch of block `number` if its block data is frozen (`storage::segments`).
    fn frozen(&self, number: u64) -> Option<u32> {
        self.snap.frozen_block(number)
    }

    /// The frozen row of `kind` at `key` (of block `number`, in epoch `epoch`).
    fn frozen_row(&self, kind: Kind, epoch: u32, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(self.snap.trie.segments.first(kind, epoch, key, key)?.map(|(_, v)| v))
    }

    /// Number of the block with `hash`, if stored.
    pub fn block_number(&self, hash: &B256) -> StorageResult<Option<u64>> {
        let t = &self.snap.hash_to_number;
        Ok(t.get(&hash.0)?.map(|v| v.value()))
    }

    /// Header of block `number`.
    pub fn header(&self, number: u64) -> StorageResult<Option<Header>> {
        if let Some(epoch) = self.frozen(number) {
            let Some(v) = self.frozen_row(Kind::Headers, epoch, &number.to_be_bytes())? else {
                return Ok(None);
            };
            return Header::decode(&mut v.as_slice()).map(Some).map_err(|e| corrupt("headers", e));
        }
        let t = &self.snap.headers;
        let Some(v) = t.get(number)? else { return Ok(None) };
        Header::decode(&mut v.value()).map(Some).map_err(|e| corrupt("headers", e))
    }

    /// The bodies row of block `number`: tx count ++ RLP body.
    fn with_body_row<T>(
        &self,
        number: u64,
        read: impl FnOnce(&[u8]) -> StorageResult<T>,
    ) -> StorageResult<Option<T>> {
        if let Some(epoch) = self.frozen(number) {
            return match self.frozen_row(Kind::Bodies, epoch, &number.to_be_bytes())? {
                Some(v) => read(&v).map(Some),
                None => Ok(None),
            };
        }
        match self.snap.bodies.get(number)? {
            Some(v) => read(v.value()).map(Some),
            None => Ok(None),
        }
    }

    /// Ommers and withdrawals of block `number` (transactions left empty) and its tx count.
    pub fn body(&self, number: u64) -> StorageResult<Option<(BlockBody<TxEnvelope>, u32)>> {
        self.with_body_row(number, |bytes| {
            if bytes.len() < 4 {
                return Err(corrupt("bodies", "short value"));
            }
            let count = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let body = BlockBody::decode(&mut &bytes[4..]).map_err(|e| corrupt("bodies", e))?;
            Ok((body, count))
        })
    }

    /// Number of transactions in block `number`, if the block is stored.
    pub fn transaction_count(&self, number: u64) -> StorageResult<Option<u32>> {
        self.with_body_row(number, |b| {
            if b.len() < 4 {
                return Err(corrupt("bodies", "short value"));
            }
            Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        })
    }

    /// Transaction `index` of block `number`.
    pub fn transaction(&self, number: u64, index: u32) -> StorageResult<Option<StoredTransaction>> {
        if let Some(epoch) = self.frozen(number) {
            let Some(v) = self.frozen_row(Kind::Transactions, epoch, &tx_key(number, index))?
            else {
                return Ok(None);
            };
            return decode_tx(number, index, &v, Hash::FromRow).map(Some);
        }
        let t = &self.snap.transactions;
        let Some(v) = t.get(&tx_key(number, index))? else { return Ok(None) };
        decode_tx(number, index, v.value(), Hash::FromRow).map(Some)
    }

    /// All transactions of block `number`, in order, each with its hash (RPC objects).
    pub fn transactions(&self, number: u64) -> StorageResult<Vec<StoredTransaction>> {
        self.transaction_rows(number, |index, row| decode_tx(number, index, row, Hash::FromRow))
    }

    /// All transactions of block `number`, in order, their hashes left to be computed on first
    /// use: for replays, which execute every transaction before the ones they trace and name
    /// only those (a keccak of each of a block's transactions cost a replay about 7 %).
    pub fn transactions_to_execute(&self, number: u64) -> StorageResult<Vec<StoredTransaction>> {
        self.transaction_rows(number, |index, row| decode_tx(number, index, row, Hash::OnUse))
    }

    /// The hash of each of block `number`'s transactions and its length as an item of the
    /// block body's list (for the block's size), in order, from the stored bytes without
    /// decoding them.
    pub fn transaction_hashes(&self, number: u64) -> StorageResult<Vec<(B256, usize)>> {
        self.transaction_rows(number, |_, row| {
            decode_tx_hash(row).map_err(|e| corrupt("transactions", e))
        })
    }

    /// The sender and fee fields of block `number`'s transactions, in order, read in place
    /// (fee history, the tip oracle).
    pub fn transaction_fees(&self, number: u64) -> StorageResult<Vec<TxFees>> {
        self.transaction_rows(number, |_, row| {
            decode_tx_fees(row).map_err(|e| corrupt("transactions", e))
        })
    }

    /// `read(index, row)` of each transactions row of block `number`, in order.
    fn transaction_rows<T>(
        &self,
        number: u64,
        read: impl Fn(u32, &[u8]) -> StorageResult<T>,
    ) -> StorageResult<Vec<T>> {
        let mut out = Vec::new();
        let (lo, hi) = (tx_key(number, 0), tx_key(number, u32::MAX));
        if let Some(epoch) = self.frozen(number) {
            self.snap.trie.segments.scan(Kind::Transactions, epoch, &lo, &hi, |k, v| {
                let key: &[u8; 12] = k
                    .try_into()
                    .map_err(|_| corrupt("transactions", "a segment key of another width"))?;
                out.push(read(split_tx_key(key).1, v)?);
                Ok(true)
            })?;
            return Ok(out);
        }
        let t = &self.snap.transactions;
        for item in t.range::<&[u8; 12]>(&lo..=&hi)? {
            let (k, v) = item?;
            out.push(read(split_tx_key(k.value()).1, v.value())?);
        }
        Ok(out)
    }

    /// Where the transaction with `hash` is: `(block, index)`.
    pub fn transaction_location(&self, hash: &B256) -> StorageResult<Option<(u64, u32)>> {
        let t = &self.snap.tx_lookup;
        Ok(t.get(&hash.0)?.map(|v| split_tx_key(v.value())))
    }

    /// Receipts of block `number`, whole (each bloom computed from its logs).
    pub fn receipts(&self, number: u64) -> StorageResult<Option<Vec<ReceiptEnvelope>>> {
        self.receipts_row(number, decode_receipts)
    }

    /// The cumulative gas of each receipt of block `number`, and nothing else of them.
    pub fn receipts_gas(&self, number: u64) -> StorageResult<Option<Vec<u64>>> {
        self.receipts_row(number, decode_cumulative_gas)
    }

    /// Receipt `index` of block `number`, whole, with the cumulative gas and the count of logs
    /// of the receipts before it; only this receipt is built (`eth_getTransactionReceipt`).
    pub fn receipt(&self, number: u64, index: u32) -> StorageResult<Option<ReceiptInBlock>> {
        Ok(self.receipts_row(number, |row| decode_receipt_at(row, index as usize))?.flatten())
    }

    /// The logs of block `number` that `keep` accepts (by address and topics), with their
    /// transaction and block-wide indexes; no receipt is built (`eth_getLogs`). `None`: no
    /// receipts stored for the block.
    pub fn logs_matching(
        &self,
        number: u64,
        keep: &LogKeep<'_>,
    ) -> StorageResult<Option<Vec<LogInBlock>>> {
        self.receipts_row(number, |row| decode_matching_logs(row, keep))
    }

    /// What `decode` reads from block `number`'s receipts row (`None`: no row).
    fn receipts_row<T>(
        &self,
        number: u64,
        decode: impl FnOnce(&[u8]) -> Result<T, alloy_rlp::Error>,
    ) -> StorageResult<Option<T>> {
        if let Some(epoch) = self.frozen(number) {
            let Some(v) = self.frozen_row(Kind::Receipts, epoch, &number.to_be_bytes())? else {
                return Ok(None);
            };
            return decode(&v).map(Some).map_err(|e| corrupt("receipts", e));
        }
        let Some(v) = self.snap.receipts.get(number)? else { return Ok(None) };
        decode(v.value()).map(Some).map_err(|e| corrupt("receipts", e))
    }

    /// The block access list (EIP-7928) of block `number`, as its execution built it and its
    /// header commits to; `None` for a block before Amsterdam (or not stored).
    pub fn access_list(
        &self,
        number: u64,
    ) -> StorageResult<Option<alloy_eip7928::BlockAccessList>> {
        let decode = |row: &[u8]| {
            super::access_list::decode_access_list(row).map_err(|e| corrupt("access_lists", e))
        };
        if let Some(epoch) = self.frozen(number) {
            let Some(v) = self.frozen_row(Kind::AccessLists, epoch, &number.to_be_bytes())? else {
                return Ok(None);
            };
            return decode(&v).map(Some);
        }
        let Some(v) = self.snap.access_lists.get(number)? else { return Ok(None) };
        decode(v.value()).map(Some)
    }

    /// The first block of the trace-address index (`None`: nothing indexed yet).
    pub fn trace_index_from(&self) -> StorageResult<Option<u64>> {
        let Some(v) = self.snap.meta.get(super::tables::meta::TRACE_INDEX_FROM)? else {
            return Ok(None);
        };
        super::codec::u64_value("meta", v.value()).map(Some)
    }

    /// The indexed blocks in `from..=to` whose execution touched `address`, in order. Cost
    /// grows with the number of such blocks (and of the frozen files the range covers), not
    /// with the range.
    pub fn blocks_touching(
        &self,
        address: &Address,
        from: u64,
        to: u64,
    ) -> StorageResult<Vec<u64>> {
        if from > to {
            return Ok(Vec::new());
        }
        let lo = super::codec::tx::address_block_key(address, from);
        let hi = super::codec::tx::address_block_key(address, to);
        let mut out = Vec::new();
        // The frozen blocks first (their epochs are below every indexed one in the B-tree), file
        // after file in epoch order.
        let epochs = &self.snap.trie.epochs;
        let segments = &self.snap.trie.segments;
        if segments.trace_frozen_to > 0 && epochs.of(from) < segments.trace_frozen_to {
            let span = epochs.of(from)..=epochs.of(to).min(segments.trace_frozen_to - 1);
            segments.scan_files(Kind::TraceAddresses, span, &lo, &hi, |k, _| {
                out.extend(super::codec::tx::block_of_address_key(k));
                Ok(())
            })?;
        }
        for item in self.snap.trace_addresses.range::<&[u8; 28]>(&lo..=&hi)? {
            let (k, _) = item?;
            out.extend(super::codec::tx::block_of_address_key(k.value()));
        }
        Ok(out)
    }

    /// The hashed-state and trie tables of this snapshot (for the trie layer).
    pub fn trie_tables(&self) -> &super::TrieTables {
        &self.snap.trie
    }

    /// State as of the end of block `number` (the EVM's view for calls "at" that block).
    /// Refused ([`StorageError::BelowAnchor`]) below the anchor of an anchored datadir, which
    /// holds no state there.
    pub fn state_at(&self, number: u64) -> StorageResult<StateAt> {
        if let Some(anchor) = self.snap.anchor.filter(|a| number < *a) {
            return Err(StorageError::BelowAnchor { block: number, anchor });
        }
        let head = self.head()?.unwrap_or(0);
        Ok(StateAt::new(self.snap.clone(), number, head))
    }
}

/// When a decoded transaction's hash is computed.
#[derive(Clone, Copy)]
enum Hash {
    /// Now, from the stored bytes.
    FromRow,
    /// By alloy on first use, by encoding the transaction again.
    OnUse,
}

fn decode_tx(block: u64, index: u32, bytes: &[u8], hash: Hash) -> StorageResult<StoredTransaction> {
    if bytes.len() < 20 {
        return Err(corrupt("transactions", "short value"));
    }
    let sender = Address::from_slice(&bytes[..20]);
    let tx = TxEnvelope::decode_2718(&mut &bytes[20..]).map_err(|e| corrupt("transactions", e))?;
    let tx = match hash {
        Hash::OnUse => tx,
        Hash::FromRow => {
            let (hash, _) = decode_tx_hash(bytes).map_err(|e| corrupt("transactions", e))?;
            debug_assert_eq!(*tx.tx_hash(), hash, "transaction {block}/{index}: hash from its row");
            with_hash(tx, hash)
        }
    };
    Ok(StoredTransaction { sender, tx, block, index })
}

/// `tx` carrying `hash`, the keccak of the stored bytes it was decoded from (of the transaction
/// alone when a blob transaction was stored with its sidecar): alloy's decoding
/// leaves the hash to be computed on first use by encoding the transaction again, which was
/// a third of an `eth_getBlockByNumber`.
fn with_hash(tx: TxEnvelope, hash: B256) -> TxEnvelope {
    fn hashed<T>(s: Signed<T>, hash: B256) -> Signed<T> {
        let signature = *s.signature();
        Signed::new_unchecked(s.strip_signature(), signature, hash)
    }
    match tx {
        TxEnvelope::Legacy(s) => TxEnvelope::Legacy(hashed(s, hash)),
        TxEnvelope::Eip2930(s) => TxEnvelope::Eip2930(hashed(s, hash)),
        TxEnvelope::Eip1559(s) => TxEnvelope::Eip1559(hashed(s, hash)),
        TxEnvelope::Eip4844(s) => TxEnvelope::Eip4844(hashed(s, hash)),
        TxEnvelope::Eip7702(s) => TxEnvelope::Eip7702(hashed(s, hash)),
    }
}
