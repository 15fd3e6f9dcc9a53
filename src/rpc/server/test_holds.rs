//! [`TestHolds`]: the state of the test-only methods `loupe_testHold`, `loupe_testHolding` and
//! `loupe_testRelease` (`RpcConfig::test_methods`), which hold read workers on purpose.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::rpc::request::json::Raw;
use crate::rpc::{RpcError, RpcResult};

/// The state of the test-only methods that hold a read worker: `loupe_testHold` (a read that
/// waits until `loupe_testRelease`, at most [`TestHolds::MAX_HOLD`]) and `loupe_testHolding`
/// (how many are waiting). Tests use them to fill the read pool on purpose.
#[derive(Debug, Default)]
pub(crate) struct TestHolds {
    /// Holds in progress, and whether they were released.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl TestHolds {
    /// The longest a hold waits for its release, so that a failing test cannot hang a server.
    const MAX_HOLD: Duration = Duration::from_secs(20);

    pub(crate) fn hold(&self) -> RpcResult<Raw> {
        let mut state = self.state.lock().map_err(poisoned)?;
        state.0 += 1;
        let (mut state, waited) = self
            .changed
            .wait_timeout_while(state, Self::MAX_HOLD, |(_, released)| !*released)
            .map_err(poisoned)?;
        state.0 -= 1;
        crate::rpc::request::json::to_value(!waited.timed_out())
    }

    pub(crate) fn holding(&self) -> RpcResult<Raw> {
        let state = self.state.lock().map_err(poisoned)?;
        crate::rpc::request::json::to_value(state.0)
    }

    pub(crate) fn release(&self) -> RpcResult<Raw> {
        let mut state = self.state.lock().map_err(poisoned)?;
        state.1 = true;
        self.changed.notify_all();
        crate::rpc::request::json::to_value(state.0)
    }
}

fn poisoned<E>(_: E) -> RpcError {
    RpcError::Internal("test hold state poisoned".into())
}
