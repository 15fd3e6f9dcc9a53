//! The HTTP server's table of open connections: each one's client, and whether it is in a
//! request. When every connection slot is taken, [`Conns::evict`] asks one that is between
//! requests (idle on keep-alive, or still sending a request's head) to close, from the client
//! holding the most connections, so that a new connection finds a place: connections that
//! merely sit open, from however many addresses, cannot lock everyone out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// The open connections.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    table: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

/// One open connection.
#[derive(Debug)]
pub(crate) struct Conn {
    ip: IpAddr,
    /// Requests being answered (one at a time on HTTP/1.1).
    in_request: AtomicUsize,
    /// Asked to close ([`Conns::evict`]).
    closing: AtomicBool,
    close: Notify,
}

impl Conns {
    /// Registers a connection from `ip`; it leaves the table when the [`Entry`] is dropped.
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr) -> Entry {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            ip,
            in_request: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            close: Notify::new(),
        });
        self.lock().insert(id, conn.clone());
        Entry { conns: self.clone(), id, conn }
    }

    /// Asks one connection between requests to close, of the client with the most connections;
    /// `false` when every connection is in a request (or already closing).
    pub(crate) fn evict(&self) -> bool {
        let table = self.lock();
        let mut per_ip: HashMap<IpAddr, usize> = HashMap::new();
        for conn in table.values() {
            *per_ip.entry(conn.ip).or_default() += 1;
        }
        let idle = table.values().filter(|c| {
            c.in_request.load(Ordering::Acquire) == 0 && !c.closing.load(Ordering::Acquire)
        });
        let Some(victim) = idle.max_by_key(|c| per_ip.get(&c.ip).copied().unwrap_or(0)) else {
            return false;
        };
        victim.closing.store(true, Ordering::Release);
        victim.close.notify_one();
        tracing::debug!(target: "rpc", ip = %victim.ip, "closing an idle connection for a new one");
        true
    }

    /// The table; it stays right even if a holder panicked (it is only changed here, by code
    /// that cannot panic while it holds the lock).
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A connection's place in the table ([`Conns::open`]).
#[derive(Debug)]
pub(crate) struct Entry {
    conns: Arc<Conns>,
    id: u64,
    conn: Arc<Conn>,
}

impl Entry {
    /// The connection, for its service to mark its requests ([`Conn::request`]).
    pub(crate) fn conn(&self) -> Arc<Conn> {
        self.conn.clone()
    }

    /// Resolves when the connection is asked to close.
    pub(crate) async fn evicted(&self) {
        self.conn.close.notified().await;
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.conns.lock().remove(&self.id);
    }
}

impl Conn {
    /// Marks the connection as in a request until the guard is dropped.
    pub(crate) fn request(self: &Arc<Self>) -> InRequest {
        self.in_request.fetch_add(1, Ordering::AcqRel);
        InRequest(self.clone())
    }
}

/// A request being answered on a connection ([`Conn::request`]).
#[derive(Debug)]
pub(crate) struct InRequest(Arc<Conn>);

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.in_request.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_idle_connection_of_the_heaviest_client_is_asked_to_close() {
        let conns = Arc::new(Conns::default());
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let good = conns.open(b);
        let busy = conns.open(a);
        let idle = conns.open(a);
        let _in_request = busy.conn().request();
        assert!(conns.evict());
        // The idle one of 127.0.0.2 (two connections) was asked, not 127.0.0.1's.
        tokio::time::timeout(std::time::Duration::from_secs(1), idle.evicted()).await.unwrap();
        assert!(idle.conn.closing.load(Ordering::Acquire));
        assert!(!good.conn.closing.load(Ordering::Acquire));
        // Next: 127.0.0.1's, the only one between requests and not closing yet; then none.
        assert!(conns.evict());
        assert!(good.conn.closing.load(Ordering::Acquire));
        assert!(!conns.evict(), "every other connection is in a request");
        drop((good, idle));
        assert_eq!(conns.lock().len(), 1);
    }
}
