//! The cancellation flag of the work running on this thread: set by whoever runs the work (the
//! RPC server's worker pool, when the client that asked for it went away), read by
//! [`super::call_env::Deadline`] each time it reads the clock, so an EVM run stops at its next check.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// While alive, `flag` is this thread's cancellation flag; the one before it comes back when
/// dropped.
#[derive(Debug)]
pub struct Installed {
    previous: Option<Arc<AtomicBool>>,
}

/// Makes `flag` this thread's cancellation flag until the returned guard is dropped.
pub fn install(flag: Option<Arc<AtomicBool>>) -> Installed {
    Installed { previous: FLAG.with(|f| f.replace(flag)) }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.previous.take();
        FLAG.with(|f| *f.borrow_mut() = previous);
    }
}

/// This thread's cancellation flag, if any (for work split across threads).
pub fn current() -> Option<Arc<AtomicBool>> {
    FLAG.with(|f| f.borrow().clone())
}

/// Whether `flag` says stop.
pub(crate) fn is_set(flag: Option<&Arc<AtomicBool>>) -> bool {
    flag.is_some_and(|f| f.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_installed_for_the_guards_life() {
        assert!(current().is_none());
        let flag = Arc::new(AtomicBool::new(false));
        {
            let _g = install(Some(flag.clone()));
            assert!(!is_set(current().as_ref()));
            flag.store(true, Ordering::Relaxed);
            assert!(is_set(current().as_ref()));
        }
        assert!(current().is_none());
    }
}
