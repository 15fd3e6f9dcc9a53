//! [`BodyMemory`]: the request bodies the HTTP server holds at once, in bytes, bounded in all
//! (`--rpc.max-body-memory`) and per client (its `--rpc.client-share` of that).
//!
//! Without it the bodies held are bounded only by connections × `--rpc.max-request-size`
//! (1,024 × 10 MiB): thirty parallel 9.8 MB `eth_call`s from one client grew the node by
//! 391 MiB before any of them was refused. A body is counted from its first byte (or its
//! announced `Content-Length`) until its answer is built; one that does not fit is refused at
//! once with 503 and -32005 naming the flag, and its bytes are read and dropped so that the
//! client gets the answer. A WebSocket message is counted the same way while it is answered
//! (one that does not fit is answered with that error, id null). Bodies of a client outside any `client::scope` (none, in practice:
//! every HTTP request has one) count in the total only.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::rpc::RpcError;

/// Bytes of request bodies held, in all and by each client.
#[derive(Debug)]
pub(crate) struct BodyMemory {
    /// Most bytes held in all.
    total: usize,
    /// Most bytes one client holds.
    per_client: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// Why a body was refused: the limit it would have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    /// `--rpc.max-body-memory`, every client's bodies together.
    Total(usize),
    /// One client's share of it (`--rpc.client-share`).
    Client(usize),
}

impl Over {
    /// The refusal (-32005), naming the limit and its flag.
    pub(crate) fn error(self) -> RpcError {
        RpcError::Limit(match self {
            Self::Total(n) => format!(
                "request bodies held at once would pass {n} bytes (--rpc.max-body-memory); retry later"
            ),
            Self::Client(n) => format!(
                "this client's request bodies held at once would pass its share, {n} bytes \
                 (--rpc.max-body-memory, --rpc.client-share); retry later"
            ),
        })
    }
}

impl BodyMemory {
    /// At most `total` bytes of bodies at once, and `percent` % of that for one client (100
    /// or more: no per-client share); both at least `largest`, the largest body taken, so that
    /// one such body always fits when nothing else is held.
    pub(crate) fn new(total: usize, percent: u32, largest: usize) -> Arc<Self> {
        let total = total.max(largest);
        let per_client = if percent >= 100 {
            total
        } else {
            (total / 100).saturating_mul(percent as usize).max(largest)
        };
        Arc::new(Self { total, per_client, held: Mutex::new(Held::default()) })
    }

    /// An empty claim of `client` (none: counted in the total only), grown as its body
    /// arrives.
    pub(crate) fn claim(self: &Arc<Self>, client: Option<IpAddr>) -> Claim {
        Claim { owner: self.clone(), client, bytes: 0 }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        // Only changed here, by code that cannot panic while it holds the lock.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The bytes one body holds of a [`BodyMemory`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Claim {
    owner: Arc<BodyMemory>,
    client: Option<IpAddr>,
    bytes: usize,
}

impl Claim {
    /// Holds `more` bytes besides those held, or says which limit they would pass (and holds
    /// nothing more).
    pub(crate) fn grow(&mut self, more: usize) -> Result<(), Over> {
        let owner = &self.owner;
        let mut held = owner.lock();
        if held.total + more > owner.total {
            return Err(Over::Total(owner.total));
        }
        if let Some(ip) = self.client {
            let mine = held.by_client.entry(ip).or_insert(0);
            if *mine + more > owner.per_client {
                if *mine == 0 {
                    held.by_client.remove(&ip);
                }
                return Err(Over::Client(owner.per_client));
            }
            *mine += more;
        }
        held.total += more;
        self.bytes += more;
        Ok(())
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut held = self.owner.lock();
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(ip) = self.client
            && let Some(mine) = held.by_client.get_mut(&ip)
        {
            *mine = mine.saturating_sub(self.bytes);
            if *mine == 0 {
                held.by_client.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_bounded_in_all_and_per_client_and_given_back() {
        let memory = BodyMemory::new(1000, 50, 10);
        let (a, b) = ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        let mut first = memory.claim(Some(a));
        first.grow(300).unwrap();
        first.grow(200).unwrap();
        assert_eq!(first.grow(1), Err(Over::Client(500)));
        let mut other = memory.claim(Some(b));
        other.grow(500).unwrap();
        let mut local = memory.claim(None);
        assert_eq!(local.grow(1), Err(Over::Total(1000)));
        drop(first);
        local.grow(400).unwrap();
        let mut again = memory.claim(Some(a));
        again.grow(100).unwrap();
        assert_eq!(again.grow(1), Err(Over::Total(1000)));
        drop((other, local, again));
        assert_eq!(memory.lock().total, 0);
        assert!(memory.lock().by_client.is_empty());
    }
}
