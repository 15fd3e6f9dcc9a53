//! The budget of the call a pool worker runs: its deadline and whether its client is still
//! there. [`WorkerPool`](super::pool::WorkerPool) installs one for the length of each job; the
//! loops that scan (blocks of a log query, of a `trace_filter`, of a fee history) call
//! [`check`] at each step, and the EVM's deadline reads the same cancellation flag
//! (`crate::evm::cancel`), so the work stops within one step of the client leaving.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::rpc::{RpcError, RpcResult};

/// A job's deadline and its cancellation flag (set once its client went away).
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    until: Instant,
    timeout: Duration,
    cancelled: Arc<AtomicBool>,
}

thread_local! {
    static CURRENT: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

impl Budget {
    /// A budget of `timeout` from now, cancelled when `cancelled` is set.
    pub(crate) fn new(timeout: Duration, cancelled: Arc<AtomicBool>) -> Self {
        Self { until: Instant::now() + timeout, timeout, cancelled }
    }

    /// Makes this the budget of the work on this thread (and its flag the EVM's,
    /// `crate::evm::cancel`) until the guard is dropped.
    pub(crate) fn install(self) -> Installed {
        let evm = crate::evm::cancel::install(Some(self.cancelled.clone()));
        let previous = CURRENT.with(|c| c.replace(Some(self)));
        Installed { previous, _evm: evm }
    }

    fn check(&self) -> RpcResult<()> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(RpcError::Cancelled);
        }
        if Instant::now() >= self.until {
            return Err(RpcError::QueryTimeout(self.timeout));
        }
        Ok(())
    }
}

/// A budget installed on this thread ([`Budget::install`]); the one before comes back when
/// dropped.
#[derive(Debug)]
pub(crate) struct Installed {
    previous: Option<Budget>,
    _evm: crate::evm::cancel::Installed,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The budget of the work on this thread, to install on the threads it splits into.
pub(crate) fn current() -> Option<Budget> {
    CURRENT.with(|c| c.borrow().clone())
}

/// `Err` once the work on this thread must stop: its client went away ([`RpcError::Cancelled`])
/// or its deadline passed ([`RpcError::QueryTimeout`]). Work with no budget (run inline, or
/// in-process) is never stopped. A few ns: a thread-local, an atomic and the clock.
pub(crate) fn check() -> RpcResult<()> {
    CURRENT.with(|c| c.borrow().as_ref().map_or(Ok(()), Budget::check))
}

/// Sets the flag when dropped unless [`Self::disarm`]ed: held by the future that waits for a
/// job, so that dropping the future (the client went away) cancels the job.
#[derive(Debug)]
pub(crate) struct CancelOnDrop(pub(crate) Option<Arc<AtomicBool>>);

impl CancelOnDrop {
    /// The job's answer came: nothing to cancel.
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_follows_the_installed_budget() {
        assert!(check().is_ok(), "no budget: never stopped");
        let flag = Arc::new(AtomicBool::new(false));
        {
            let _g = Budget::new(Duration::from_secs(60), flag.clone()).install();
            assert!(check().is_ok());
            drop(CancelOnDrop(Some(flag)));
            assert!(matches!(check(), Err(RpcError::Cancelled)));
            assert!(crate::evm::cancel::current().is_some());
        }
        assert!(check().is_ok());
        assert!(crate::evm::cancel::current().is_none());
        let _g = Budget::new(Duration::ZERO, Arc::new(AtomicBool::new(false))).install();
        let e = check().expect_err("deadline passed");
        assert_eq!(e.to_string(), "query timeout after 0ns (--rpc.evm-timeout)");
    }
}
