//! Short EVM calls (`eth_call`, `trace_call`) run on the server's thread that parsed them,
//! within a budget of µs: whether a call may, the backoff after one that overran, and the
//! counters of each way.

use std::sync::atomic::Ordering;
use std::time::Duration;

use jsonrpsee::types::Params;

use crate::rpc::RpcContext;

/// Largest call parameters, in bytes of JSON, that may run inline: they bound what preparing
/// the call costs (state overrides' code is analysed as it is loaded).
const INLINE_PARAMS: usize = 16 * 1024;

/// How many calls go straight to the EVM pool after one ran past its inline budget: a load of
/// long calls then spends at most one budget on the server's thread in this many calls, and a
/// load of short ones loses inline execution only briefly.
pub(crate) const INLINE_BACKOFF: u32 = 32;

/// The counter of calls by where they ran: `inline`, `overran` (tried inline, then run on the
/// pool) or `pool` (sent there at once).
const COUNTER: &str = "loupe_rpc_inline_calls_total";

impl RpcContext {
    /// The budget of a call run inline, if this one may be: inline execution is on
    /// (`--rpc.inline-budget-us` not 0), its parameters are at most [`INLINE_PARAMS`] bytes,
    /// and none of the last [`INLINE_BACKOFF`] calls ran past the budget. Handing a call to a
    /// worker and back costs two wake-ups, more than a short call's EVM run; the workers are
    /// left for what does not fit.
    pub(crate) fn inline_budget(&self, p: &Params<'_>) -> Option<Duration> {
        let budget = self.config.inline_budget;
        if budget.is_zero() {
            return None;
        }
        let small = p.as_str().is_none_or(|text| text.len() <= INLINE_PARAMS);
        // One of the backoff's calls taken, if any are left.
        let backing_off = self
            .inline_backoff
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if !small || backing_off {
            metrics::counter!(COUNTER, "outcome" => "pool").increment(1);
            return None;
        }
        Some(budget.min(self.config.call_timeout))
    }

    /// Counts a call that ran within its inline budget.
    pub(crate) fn inline_fitted(&self) {
        metrics::counter!(COUNTER, "outcome" => "inline").increment(1);
    }

    /// Counts a call that ran past its inline budget (it runs again on the pool) and sends the
    /// next [`INLINE_BACKOFF`] calls straight to the pool.
    pub(crate) fn inline_overran(&self) {
        self.inline_backoff.store(INLINE_BACKOFF, Ordering::Relaxed);
        metrics::counter!(COUNTER, "outcome" => "overran").increment(1);
    }
}
