//! [`JsonCache`]: RPC objects already serialized, by the block hash that fixes them:
//! transaction objects ([`TxCache`]) and whole blocks and block receipts ([`BlockCache`]).
//!
//! An object is fixed by its block's hash (and, for a transaction, its index): the block's
//! number and hash and the base fee it shows are the block's, so an entry never goes stale.
//! After a reorg the canonical block at a number has another hash, and the old entries are
//! simply not asked for again. A lookup costs the block's hash (the header cache) and one map
//! read instead of reading, decoding (with a keccak of each transaction for its hash) and
//! serializing. Bounded by bytes (`--rpc.tx-cache-mb`, `--rpc.block-cache-mb`); quick_cache
//! evicts the least useful entries (CLOCK-Pro).

use std::hash::Hash;
use std::sync::Arc;

use alloy_primitives::B256;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// Transaction objects, by block hash and index.
pub(crate) type TxCache = JsonCache<(B256, u32)>;

/// Whole-block objects and block receipts, by block hash and which of them.
pub(crate) type BlockCache = JsonCache<(B256, BlockObject)>;

/// Which object of a block a [`BlockCache`] entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum BlockObject {
    /// `eth_getBlockBy*` with transaction hashes.
    Hashes,
    /// `eth_getBlockBy*` with transaction objects.
    Full,
    /// `eth_getBlockReceipts`.
    Receipts,
}

/// Weighs an entry by its text (and the key and bookkeeping around it).
#[derive(Debug, Clone, Copy)]
struct Bytes;

impl<K> Weighter<K, Arc<str>> for Bytes {
    fn weight(&self, _key: &K, text: &Arc<str>) -> u64 {
        text.len() as u64 + 64
    }
}

/// See the module docs.
pub(crate) struct JsonCache<K> {
    /// `None` when the operator gave it no memory.
    cache: Option<Cache<K, Arc<str>, Bytes>>,
}

impl<K> std::fmt::Debug for JsonCache<K>
where
    K: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.cache.as_ref().map_or(0, Cache::len);
        f.debug_struct("JsonCache").field("entries", &len).finish()
    }
}

impl<K: Eq + Hash + Clone> JsonCache<K> {
    /// A cache holding at most about `bytes` of objects, each about `typical` bytes (for its
    /// initial table).
    pub(crate) fn new(bytes: u64, typical: u64) -> Self {
        let cache = (bytes > 0).then(|| {
            let items = usize::try_from(bytes / typical.max(1)).unwrap_or(usize::MAX).max(16);
            Cache::with_weighter(items, bytes, Bytes)
        });
        Self { cache }
    }

    /// The object kept under `key`.
    pub(crate) fn get(&self, key: &K) -> Option<Arc<str>> {
        self.cache.as_ref()?.get(key)
    }

    /// Keeps `text` as the object under `key`.
    pub(crate) fn insert(&self, key: K, text: &str) {
        if let Some(cache) = &self.cache {
            cache.insert(key, Arc::from(text));
        }
    }
}
