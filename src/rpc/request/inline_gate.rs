//! [`InlineState`]: where the server stands on running short EVM calls on its own threads
//! (`inline.rs`): the gate that sends calls to the pool while the server is saturated, and
//! the backoff after a call that overran.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Calls between two looks at how often the server's threads went to sleep.
const GATE_SAMPLE: u32 = 256;

/// The gate closes when the server's threads slept fewer than this many times per thread in
/// [`GATE_SAMPLE`] calls run inline, and opens again when they slept at least
/// [`GATE_OPEN_SLEEPS`] times per thread in as many calls run on the pool. Measured on two
/// cores (BENCHMARKS.md, issue 42, session 42), sleeps per thread per 256 calls: inline, 256
/// at one client, 45–70 at eight, 2–4 at 64; on the pool, 65–120 at eight, 6–37 at 64.
const GATE_CLOSE_SLEEPS: u64 = 16;
/// See [`GATE_CLOSE_SLEEPS`].
const GATE_OPEN_SLEEPS: u64 = 56;

/// Where the server stands on running calls inline.
#[derive(Debug)]
pub(crate) struct InlineState {
    /// Calls still to send straight to the pool after one overran its budget.
    pub(crate) backoff: AtomicU32,
    /// Calls seen since the server started (the gate looks every [`GATE_SAMPLE`]).
    calls: AtomicU32,
    /// The server threads' sleeps at the gate's last look.
    sleeps: AtomicU64,
    /// Whether calls may run inline: the server's threads sleep often enough that handing a
    /// call over would wake one.
    open: AtomicBool,
}

impl Default for InlineState {
    fn default() -> Self {
        Self {
            backoff: AtomicU32::new(0),
            calls: AtomicU32::new(0),
            sleeps: AtomicU64::new(0),
            open: AtomicBool::new(true),
        }
    }
}

impl InlineState {
    /// Counts a call and, every [`GATE_SAMPLE`] calls, opens or closes the gate from how often
    /// the server's threads slept since the last look (tokio's park count). A thread that sleeps
    /// between calls has to be woken for each answer from the pool, which costs more than a
    /// short call's EVM run; a server that never sleeps has calls waiting, the pool's workers
    /// stay awake between them and the hand-off costs little, while a worker that runs only
    /// the EVM keeps its caches warm.
    pub(crate) fn gate_open(&self) -> bool {
        let calls = self.calls.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if calls.is_multiple_of(GATE_SAMPLE)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let metrics = runtime.metrics();
            let threads = metrics.num_workers().max(1) as u64;
            let sleeps: u64 =
                (0..metrics.num_workers()).map(|i| metrics.worker_park_count(i)).sum();
            let per_thread =
                sleeps.wrapping_sub(self.sleeps.swap(sleeps, Ordering::Relaxed)) / threads;
            let open = next_open(self.open.load(Ordering::Relaxed), per_thread);
            self.open.store(open, Ordering::Relaxed);
            metrics::gauge!("loupe_rpc_inline_open").set(if open { 1.0 } else { 0.0 });
        }
        self.open.load(Ordering::Relaxed)
    }
}

/// The gate's next state from its state and the sleeps per server thread in the last
/// [`GATE_SAMPLE`] calls.
fn next_open(open: bool, sleeps_per_thread: u64) -> bool {
    if open {
        sleeps_per_thread >= GATE_CLOSE_SLEEPS
    } else {
        sleeps_per_thread >= GATE_OPEN_SLEEPS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate against the sleeps measured per server thread and 256 calls on two cores
    /// (BENCHMARKS.md, issue 42, session 42): open, it stays open at one and eight clients and
    /// closes at 64; closed, it opens at eight clients and stays closed at 64.
    #[test]
    fn the_gate_follows_the_measured_loads() {
        for inline_at_1_or_8 in [256, 70, 45] {
            assert!(next_open(true, inline_at_1_or_8), "{inline_at_1_or_8}");
        }
        for inline_at_64 in [2, 4] {
            assert!(!next_open(true, inline_at_64), "{inline_at_64}");
        }
        for pool_at_8 in [65, 120] {
            assert!(next_open(false, pool_at_8), "{pool_at_8}");
        }
        for pool_at_64 in [6, 37] {
            assert!(!next_open(false, pool_at_64), "{pool_at_64}");
        }
    }
}
