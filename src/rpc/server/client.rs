//! The calling client: its identity (the peer's IP address, set by the HTTP server around each
//! request's dispatch, readable by code deep in the handlers through [`current`]), and
//! [`PerClient`], the count of what each client holds (connections, places in a pool), capped
//! per client.
//!
//! A call made in-process (tests' and benchmarks' `InProcess`, a subscription's reads) runs
//! outside any [`scope`]: it has no client, and no per-client cap applies to it.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Semaphore;

tokio::task_local! {
    static CLIENT: IpAddr;
}

/// Runs `fut` as a request of the client at `ip`: [`current`] answers `ip` inside it.
pub(crate) async fn scope<F: Future>(ip: IpAddr, fut: F) -> F::Output {
    CLIENT.scope(ip, fut).await
}

/// The client whose request is running on this task, if any (none in-process).
pub(crate) fn current() -> Option<IpAddr> {
    CLIENT.try_with(|ip| *ip).ok()
}

/// The client a peer address stands for: an IPv4 address (also when mapped into IPv6), or the
/// /64 prefix of an IPv6 one (a single host is commonly given a whole /64).
pub(crate) fn identity(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// What each client holds of something shared (connections, places in a pool), at most
/// `limit` each. Clients holding nothing take no memory.
#[derive(Debug)]
pub(crate) struct PerClient {
    limit: usize,
    /// The permits of each client's [`Held::running`] semaphore.
    running: usize,
    held: Mutex<HashMap<IpAddr, Entry>>,
}

#[derive(Debug)]
struct Entry {
    count: usize,
    running: Arc<Semaphore>,
}

impl PerClient {
    /// At most `limit` held by one client; each client's [`Held::running`] has `running` permits.
    pub(crate) fn new(limit: usize, running: usize) -> Arc<Self> {
        Arc::new(Self { limit, running, held: Mutex::new(HashMap::new()) })
    }

    /// The most one client may hold.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// One more held by `ip`, or `None` when it already holds [`Self::limit`].
    pub(crate) fn try_hold(self: &Arc<Self>, ip: IpAddr) -> Option<Held> {
        let mut map = self.lock();
        let entry = map
            .entry(ip)
            .or_insert_with(|| Entry { count: 0, running: Arc::new(Semaphore::new(self.running)) });
        if entry.count >= self.limit {
            return None;
        }
        entry.count += 1;
        let running = entry.running.clone();
        Some(Held { owner: self.clone(), ip, running })
    }

    /// How many `ip` holds now.
    #[cfg(test)]
    fn count(&self, ip: IpAddr) -> usize {
        self.lock().get(&ip).map_or(0, |e| e.count)
    }

    /// The table; counts stay right even if a holder panicked (the table is only ever changed
    /// here, by code that cannot panic while it holds the lock).
    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One thing held by a client ([`PerClient::try_hold`]), given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    owner: Arc<PerClient>,
    ip: IpAddr,
    running: Arc<Semaphore>,
}

impl Held {
    /// The client's own semaphore (the same for everything it holds of this [`PerClient`]): a
    /// pool takes one of its permits for each call it runs, so that one client never runs more
    /// than that many calls at once.
    pub(crate) fn running(&self) -> Arc<Semaphore> {
        self.running.clone()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut map = self.owner.lock();
        if let Some(entry) = map.get_mut(&self.ip) {
            entry.count = entry.count.saturating_sub(1);
            if entry.count == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_client_holds_at_most_the_limit_and_gets_it_back() {
        let per = PerClient::new(2, 1);
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let first = per.try_hold(a).unwrap();
        let second = per.try_hold(a).unwrap();
        assert!(per.try_hold(a).is_none(), "a third for the same client");
        assert!(per.try_hold(b).is_some(), "another client is not counted with it");
        assert!(Arc::ptr_eq(&first.running(), &second.running()), "one semaphore per client");
        drop(first);
        assert_eq!(per.count(a), 1);
        let third = per.try_hold(a).unwrap();
        drop((second, third));
        assert_eq!(per.count(a), 0);
        assert!(per.lock().is_empty(), "a client holding nothing takes no memory");
    }

    #[test]
    fn an_ipv6_client_is_its_64_prefix_and_a_mapped_ipv4_is_the_ipv4() {
        let id = |s: &str| identity(s.parse().unwrap());
        assert_eq!(id("2001:db8:1:2:aaaa::1"), id("2001:db8:1:2:bbbb::2"));
        assert_ne!(id("2001:db8:1:2::1"), id("2001:db8:1:3::1"));
        assert_eq!(id("::ffff:127.0.0.2"), id("127.0.0.2"));
        assert_eq!(id("127.0.0.2").to_string(), "127.0.0.2");
    }

    #[tokio::test]
    async fn the_client_is_known_inside_its_scope_only() {
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(current(), None);
        assert_eq!(scope(ip, async { current() }).await, Some(ip));
        assert_eq!(current(), None);
    }
}
