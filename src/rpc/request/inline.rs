//! Short EVM calls (`eth_call`, `trace_call`, `debug_traceCall`) run on the server's thread
//! that parsed them, within a budget of µs: whether a call may, whether its trace is small
//! enough to answer there, the gate that sends calls to the pool when the server is saturated,
//! the backoff after a call that overran, and the counters of each way.

use std::sync::Arc;
use std::sync::atomic::Ordering;
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

/// The counter of calls by where they ran: `inline`, `overran` (tried inline, then run on the
/// pool) or `pool` (sent there at once).
const COUNTER: &str = "loupe_rpc_inline_calls_total";

impl RpcContext {
    /// The budget of a call run inline, if this one may be: inline execution is on
    /// (`--rpc.inline-budget-us` not 0), its parameters are at most [`INLINE_PARAMS`] bytes,
    /// the gate is open ([`InlineState::gate_open`]) and none of the last [`INLINE_BACKOFF`]
    /// calls ran past the budget. Handing a call to a worker and back costs two wake-ups, more
    /// than a short call's EVM run; the workers are left for what does not fit.
    ///
    /// [`InlineState::gate_open`]: super::inline_gate::InlineState::gate_open
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
