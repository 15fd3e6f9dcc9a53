//! [`TxCache`]: transaction objects already serialized, by block hash and index.
//!
//! A transaction object is fixed by its block's hash and its index (the block's number and
//! hash and the base fee it shows are the block's), so an entry never goes stale: after a
//! reorg the canonical block at a number has another hash, and the old entries are simply
//! not asked for again. A lookup costs the block's hash (the header cache) and one map read
//! instead of reading, decoding (with a keccak of the transaction for its hash) and
//! serializing the transaction. Bounded by bytes (`--rpc.tx-cache-mb`); quick_cache evicts
//! the least useful entries (CLOCK-Pro).

use std::sync::Arc;

use alloy_primitives::B256;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// Rough size of one transaction object, for the cache's initial table.
const TYPICAL_OBJECT: u64 = 1024;

/// Weighs an entry by its text (and the key and bookkeeping around it).
#[derive(Debug, Clone, Copy)]
struct Bytes;

impl Weighter<(B256, u32), Arc<str>> for Bytes {
    fn weight(&self, _key: &(B256, u32), text: &Arc<str>) -> u64 {
        text.len() as u64 + 64
    }
}

/// See the module docs.
pub(crate) struct TxCache {
    /// `None` when the operator gave it no memory.
    cache: Option<Cache<(B256, u32), Arc<str>, Bytes>>,
}

impl std::fmt::Debug for TxCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.cache.as_ref().map_or(0, Cache::len);
        f.debug_struct("TxCache").field("entries", &len).finish()
    }
}

impl TxCache {
    /// A cache holding at most about `bytes` of objects.
    pub(crate) fn new(bytes: u64) -> Self {
        let cache = (bytes > 0).then(|| {
            let items = usize::try_from(bytes / TYPICAL_OBJECT).unwrap_or(usize::MAX).max(16);
            Cache::with_weighter(items, bytes, Bytes)
        });
        Self { cache }
    }

    /// The object of transaction `index` of the block with hash `block`, if kept.
    pub(crate) fn get(&self, block: B256, index: u32) -> Option<Arc<str>> {
        self.cache.as_ref()?.get(&(block, index))
    }

    /// Keeps `text` as the object of transaction `index` of block `block`.
    pub(crate) fn insert(&self, block: B256, index: u32, text: &str) {
        if let Some(cache) = &self.cache {
            cache.insert((block, index), Arc::from(text));
        }
    }
}
