//! [`BlockCache`]: recently used headers with their hashes, and the commit generation that
//! tells readers when to take a new snapshot.
//!
//! A stored header changes only when its block is unwound (a reorg). The commit of an unwind
//! clears the cache, and a reader trusts an entry only when its hash is the canonical hash in
//! the reader's own snapshot, so a reader of an older snapshot cannot leak a header of the old
//! branch to newer readers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use alloy_consensus::Header;
use alloy_primitives::B256;

/// Headers kept at most; the map is cleared when it is full (cheap, and reloads are one read).
const MAX_HEADERS: usize = 1 << 16;

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct BlockCache {
    generation: AtomicU64,
    headers: Mutex<HashMap<u64, Arc<(Header, B256)>>>,
}

impl BlockCache {
    /// Commits so far (in this process).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Called after every commit.
    pub(crate) fn bump_generation(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn header(&self, number: u64) -> Option<Arc<(Header, B256)>> {
        self.headers.lock().unwrap_or_else(|e| e.into_inner()).get(&number).cloned()
    }

    /// Forgets every header (after an unwind).
    pub(crate) fn clear_headers(&self) {
        self.headers.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub(crate) fn insert_header(&self, number: u64, entry: Arc<(Header, B256)>) {
        let mut map = self.headers.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_HEADERS {
            map.clear();
        }
        map.insert(number, entry);
    }
}
