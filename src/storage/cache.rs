//! [`BlockCache`]: in-memory copies of what every request reads — the block markers and
//! recently used headers with their hashes.
//!
//! loupe follows one chain and never unwinds, so a stored header never changes: the cache
//! needs no invalidation, only a bound on its size. Markers are published after the commit
//! that wrote them; a reader takes them before opening its snapshot, so the markers it uses
//! are never ahead of what its snapshot holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use alloy_consensus::Header;
use alloy_primitives::B256;

use super::BlockMarkers;

/// Headers kept at most; the map is cleared when it is full (cheap, and reloads are one read).
const MAX_HEADERS: usize = 1 << 16;

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct BlockCache {
    markers: RwLock<Option<BlockMarkers>>,
    headers: Mutex<HashMap<u64, Arc<(Header, B256)>>>,
}

impl BlockCache {
    pub(crate) fn markers(&self) -> Option<BlockMarkers> {
        *self.markers.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_markers(&self, m: BlockMarkers) {
        *self.markers.write().unwrap_or_else(|e| e.into_inner()) = Some(m);
    }

    pub(crate) fn header(&self, number: u64) -> Option<Arc<(Header, B256)>> {
        self.headers.lock().unwrap_or_else(|e| e.into_inner()).get(&number).cloned()
    }

    pub(crate) fn insert_header(&self, number: u64, entry: Arc<(Header, B256)>) {
        let mut map = self.headers.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_HEADERS {
            map.clear();
        }
        map.insert(number, entry);
    }
}
