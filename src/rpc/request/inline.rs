//! Short EVM calls (`eth_call`, `trace_call`, `debug_traceCall`) run on the server's thread
//! that parsed them, within a budget of µs: whether a call may, whether its trace is small
//! enough to answer there, the gate that sends calls to the pool when the server is saturated,
//! the backoff after a call that overran, and the counters of each way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use alloy_evm::eth::EthEvmContext;
use jsonrpsee::types::Params;
use revm::Inspector;
use revm::context::result::ResultAndState;
use revm::database::{State, WrapDatabaseRef};
use revm_inspectors::tracing::{DebugInspector, TracingInspector};

use crate::evm::{CallRequest, PreparedCall, execute_call, execute_call_within};
use crate::rpc::request::json::Raw;
use crate::rpc::request::params::BlockRef;
use crate::rpc::{RpcContext, RpcResult};
use crate::storage::StateAt;

/// Largest call parameters, in bytes of JSON, that may run inline: they bound what preparing
/// the call costs (state overrides' code is analysed as it is loaded).
const INLINE_PARAMS: usize = 16 * 1024;

/// Most frames, bytes of call data, output and log data, changed storage slots and recorded
/// opcode steps of a trace whose answer is built inline; a larger one is built on the EVM
/// pool. Building costs about as much per frame, byte, slot and step as running them did, and
/// these bound it to a few µs.
const INLINE_FRAMES: usize = 64;
const INLINE_TRACE_BYTES: usize = 16 * 1024;
const INLINE_SLOTS: usize = 256;
const INLINE_STEPS: usize = 256;

/// Whether the answer of a call that ran inline with `tracer` may be built inline too.
pub(crate) fn small_trace(tracer: &TracingInspector, res: &ResultAndState) -> bool {
    let nodes = tracer.traces().nodes();
    let bytes: usize = nodes
        .iter()
        .map(|n| {
            let logs: usize = n.logs.iter().map(|l| l.raw_log.data.len()).sum();
            n.trace.data.len() + n.trace.output.len() + logs
        })
        .sum();
    let steps: usize = nodes.iter().map(|n| n.trace.steps.len()).sum();
    let slots: usize = res.state.values().map(|a| a.storage.len()).sum();
    nodes.len() <= INLINE_FRAMES
        && bytes <= INLINE_TRACE_BYTES
        && slots <= INLINE_SLOTS
        && steps <= INLINE_STEPS
}

/// [`small_trace`] for a geth tracer: the 4byte and noop tracers' answers are always small, a
/// mux tracer's always goes to the pool.
pub(crate) fn small_debug_trace(inspector: &DebugInspector, res: &ResultAndState) -> bool {
    match inspector {
        DebugInspector::FourByte(_)
        | DebugInspector::Noop(_)
        | DebugInspector::StateGasTracer(_) => true,
        DebugInspector::CallTracer(t, _)
        | DebugInspector::PreStateTracer(t, _)
        | DebugInspector::FlatCallTracer(t)
        | DebugInspector::Erc7562Tracer(t, _)
        | DebugInspector::Default(t, _) => small_trace(t, res),
        _ => false,
    }
}

/// A kind of traced call (`trace_call`, `debug_traceCall`), as [`RpcContext::traced_call`] runs
/// it: its inspector, whether an answer is small enough to build inline, and the answer.
pub(crate) trait Traced: Send + 'static {
    /// The inspector that records the call.
    type Inspector: for<'a> Inspector<EthEvmContext<&'a mut State<WrapDatabaseRef<StateAt>>>>
        + Send
        + 'static;
    /// A fresh inspector.
    fn inspector(&self) -> RpcResult<Self::Inspector>;
    /// Whether the answer of a call that ran inline may be built inline too.
    fn small(inspector: &Self::Inspector, res: &ResultAndState) -> bool;
    /// The call's answer from what the inspector recorded.
    fn answer(
        &self,
        call: &PreparedCall<StateAt>,
        inspector: Self::Inspector,
        res: &ResultAndState,
    ) -> RpcResult<Raw>;
    /// The call's deadline.
    fn timeout(&self) -> Duration;
}

/// How many calls go straight to the EVM pool after one ran past its inline budget: a load of
/// long calls then spends at most one budget on the server's thread in this many calls, and a
/// load of short ones loses inline execution only briefly.
pub(crate) const INLINE_BACKOFF: u32 = 32;

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

/// The counter of calls by where they ran: `inline`, `overran` (tried inline, then run on the
/// pool) or `pool` (sent there at once).
const COUNTER: &str = "loupe_rpc_inline_calls_total";

/// Where the server stands on running calls inline.
#[derive(Debug)]
pub(crate) struct InlineState {
    /// Calls still to send straight to the pool after one overran its budget.
    backoff: AtomicU32,
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
    fn gate_open(&self) -> bool {
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

impl RpcContext {
    /// The budget of a call run inline, if this one may be: inline execution is on
    /// (`--rpc.inline-budget-us` not 0), its parameters are at most [`INLINE_PARAMS`] bytes,
    /// the gate is open ([`InlineState::gate_open`]) and none of the last [`INLINE_BACKOFF`]
    /// calls ran past the budget. Handing a call to a worker and back costs two wake-ups, more
    /// than a short call's EVM run; the workers are left for what does not fit.
    pub(crate) fn inline_budget(&self, p: &Params<'_>) -> Option<Duration> {
        let budget = self.config.inline_budget;
        if budget.is_zero() {
            return None;
        }
        let open = self.inline.gate_open();
        let small = p.as_str().is_none_or(|text| text.len() <= INLINE_PARAMS);
        // One of the backoff's calls taken, if any are left.
        let backing_off = self
            .inline
            .backoff
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if !open || !small || backing_off {
            metrics::counter!(COUNTER, "outcome" => "pool").increment(1);
            return None;
        }
        Some(budget.min(self.config.call_timeout))
    }

    /// Runs a traced call, whose request, block and kind `parse` reads from the parameters:
    /// on the EVM pool when `inline` is `None` (the parsing too, so that large parameters never
    /// hold up the server's threads), else first on this thread within the budget. A call that
    /// does not finish within it runs again on the pool, from the state already read, and so
    /// does the building of an answer that is not [`Traced::small`]. Either way the call holds
    /// a place in the pool while it runs, so a full pool refuses it (-32005).
    pub(crate) async fn traced_call<T: Traced>(
        self: Arc<Self>,
        inline: Option<Duration>,
        parse: impl FnOnce(&Self) -> RpcResult<(CallRequest, BlockRef, T)> + Send + 'static,
    ) -> RpcResult<Raw> {
        let Some(budget) = inline else {
            let ctx = self.clone();
            return self
                .pool
                .run(move || {
                    let (req, block, traced) = parse(&ctx)?;
                    let mut call = ctx.prepared_call(req, block)?;
                    traced_whole(&mut call, &traced)
                })
                .await;
        };
        let (req, block, traced) = parse(&self)?;
        let admitted = self.pool.admit()?;
        let mut call = self.prepared_call(req, block)?;
        let mut inspector = traced.inspector()?;
        match execute_call_within(&mut call, &mut inspector, budget.min(traced.timeout()))? {
            Some(res) if T::small(&inspector, &res) => {
                self.inline_fitted();
                traced.answer(&call, inspector, &res)
            }
            Some(res) => {
                self.inline_fitted();
                let answer = move || traced.answer(&call, inspector, &res);
                self.pool.run_in(admitted, answer).await
            }
            None => {
                self.inline_overran();
                self.pool.run_in(admitted, move || traced_whole(&mut call, &traced)).await
            }
        }
    }

    /// Counts a call that ran within its inline budget.
    pub(crate) fn inline_fitted(&self) {
        metrics::counter!(COUNTER, "outcome" => "inline").increment(1);
    }

    /// Counts a call that ran past its inline budget (it runs again on the pool) and sends the
    /// next [`INLINE_BACKOFF`] calls straight to the pool.
    pub(crate) fn inline_overran(&self) {
        self.inline.backoff.store(INLINE_BACKOFF, Ordering::Relaxed);
        metrics::counter!(COUNTER, "outcome" => "overran").increment(1);
    }
}

/// A traced call run whole under its full deadline with a fresh inspector: on the pool, or on
/// the calling thread for the in-process benches.
pub(crate) fn traced_whole<T: Traced>(
    call: &mut PreparedCall<StateAt>,
    traced: &T,
) -> RpcResult<Raw> {
    let mut inspector = traced.inspector()?;
    let res = execute_call(call, &mut inspector, traced.timeout())?;
    traced.answer(call, inspector, &res)
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
