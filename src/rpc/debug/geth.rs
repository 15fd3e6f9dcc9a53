//! geth-style tracing: `debug_traceTransaction`, `debug_traceBlockBy*` and `debug_traceCall`.
//!
//! The tracers are revm-inspectors' `DebugInspector` (the struct logger and the built-in
//! `callTracer`, `prestateTracer`, `4byteTracer`, `noopTracer`, `erc7562Tracer`), and
//! `flatCallTracer` flattened from the `callTracer` as geth does ([`flat_call`]); the
//! `prestateTracer`'s answer is built by loupe with geth's rules ([`prestate`]). Stored
//! transactions are replayed with [`crate::evm::replay_block`] (parent state, the block's
//! system calls, then its earlier transactions, as at import); `debug_traceCall` shares
//! `eth_call`'s environment ([`crate::evm::prepare_call`]), so the three agree.
//!
//! Deadlines: the operator's `call_timeout`, lowered (never raised) by the request's `timeout`.
//! It bounds one call, one transaction's replay, or one whole block's replay (geth's applies
//! per transaction: a block trace here gets one deadline for all its transactions).

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::B256;
use alloy_rpc_types_eth::TransactionInfo;
use alloy_rpc_types_trace::geth::erc7562::Erc7562Config;
use alloy_rpc_types_trace::geth::{
    FlatCallConfig, GethDebugBuiltInTracerType, GethDebugTracerType, GethDebugTracingCallOptions,
    GethDebugTracingOptions, GethDefaultTracingOptions, GethTrace, TraceResult,
};
use jsonrpsee::types::Params;
use revm::DatabaseRef;
use revm::context::result::ResultAndState;
use revm::context::{BlockEnv, TxEnv};
use revm::primitives::hardfork::SpecId;
use revm_inspectors::tracing::{DebugInspector, TransactionContext};

use crate::evm::{CallRequest, PreparedCall};
use crate::rpc::debug::flat_call;
use crate::rpc::debug::frontier_create::FrontierCreates;
use crate::rpc::debug::prestate::{self, PrestateConfig};
use crate::rpc::debug::struct_logs::StructLogBudget;
use crate::rpc::eth::block_overrides::{OverridesOf, check_block_overrides};
use crate::rpc::eth::eth_call::call_object;
use crate::rpc::eth::override_limits::RawSets;
use crate::rpc::request::inline::{Traced, small_debug_trace};
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::{Reader, StateAt};

/// The tracers served, as named in requests (no tracer: the struct logger).
const TRACERS: &str =
    "callTracer, prestateTracer, 4byteTracer, noopTracer, flatCallTracer, erc7562Tracer";

/// Validated tracing options and the deadline they give.
#[derive(Debug, Clone)]
struct TraceOptions {
    opts: GethDebugTracingOptions,
    /// `flatCallTracer`'s config: the `callTracer` runs and its frame is flattened
    /// ([`flat_call::flatten`]).
    flat: Option<FlatCallConfig>,
    /// `prestateTracer`'s config: the answer is built by [`prestate::prestate`].
    prestate: Option<PrestateConfig>,
    timeout: Duration,
    /// `--rpc.max-trace-size`: the struct logger's limit.
    max_size: u64,
}

impl TraceOptions {
    /// A fresh tracer, with the struct logger's budget beside it.
    fn tracer(&self) -> RpcResult<(StructLogBudget, FrontierCreates<DebugInspector>)> {
        // Options were validated when parsed; a failure here is a bug.
        let mut opts = self.opts.clone();
        if self.flat.is_some() {
            opts.tracer = Some(GethDebugBuiltInTracerType::CallTracer.into());
            opts.tracer_config = Default::default();
        }
        if self.prestate.is_some() {
            // Its answer is built from the execution result ([`prestate::prestate`]).
            opts.tracer_config = Default::default();
        }
        let inner = DebugInspector::new(opts)
            .map_err(|e| RpcError::Internal(format!("tracer set-up: {e}")))?;
        let struct_logger = match &inner {
            DebugInspector::Default(_, opts) => Some(*opts),
            // erc7562Tracer records every step's stack and memory as the struct logger does:
            // the same bound (`--rpc.max-trace-size`), counted as a struct log with memory.
            DebugInspector::Erc7562Tracer(..) => Some(GethDefaultTracingOptions {
                enable_memory: Some(true),
                disable_storage: Some(true),
                ..Default::default()
            }),
            _ => None,
        };
        let call_tracer = matches!(inner, DebugInspector::CallTracer(..));
        let inner = FrontierCreates::new(inner, call_tracer);
        Ok((StructLogBudget::new(struct_logger, self.max_size), inner))
    }

    /// The answer for transaction `done`, traced by `tracer` over `db` (the state before it),
    /// in geth's shape: [`geth_shape`], the `callTracer` frame flattened for `flatCallTracer`,
    /// and `prestateTracer` built by [`prestate::prestate`].
    fn result<DB: DatabaseRef>(
        &self,
        tracer: &mut FrontierCreates<DebugInspector>,
        context: Option<TransactionContext>,
        info: &TransactionInfo,
        done: &Done<'_>,
        db: &DB,
    ) -> RpcResult<GethTrace>
    where
        DB::Error: std::fmt::Display,
    {
        if let Some(config) = &self.prestate {
            let value = prestate::prestate(&done.res.state, db, config)
                .map_err(|e| RpcError::Internal(format!("prestate: {e}")))?;
            return Ok(GethTrace::JS(value));
        }
        let mut db = db;
        let trace = tracer
            .inner
            .get_result(context, done.tx, done.block, done.res, &mut db)
            .map_err(|e| RpcError::Internal(format!("trace result: {e}")))?;
        Ok(match (&self.flat, trace) {
            (Some(config), GethTrace::CallTracer(frame)) => {
                let traces = flat_call::flatten(&frame, config, done.spec, info);
                let json = flat_call::to_json(&traces)
                    .map_err(|e| RpcError::Internal(format!("flat call trace: {e}")))?;
                GethTrace::JS(json)
            }
            (_, trace) => geth_shape(trace),
        })
    }
}

/// `debug_traceCall`'s kind of traced call: the geth tracer asked for, under its deadline.
impl Traced for TraceOptions {
    type Inspector = (StructLogBudget, FrontierCreates<DebugInspector>);

    fn inspector(&self) -> RpcResult<Self::Inspector> {
        self.tracer()
    }

    fn small(inspector: &Self::Inspector, res: &ResultAndState) -> bool {
        inspector.0.result().is_err() || small_debug_trace(&inspector.1.inner, res)
    }

    /// The geth-shape answer.
    fn answer(
        &self,
        call: &PreparedCall<StateAt>,
        (budget, mut inspector): Self::Inspector,
        res: &ResultAndState,
    ) -> RpcResult<Raw> {
        budget.result()?;
        let info = TransactionInfo {
            block_number: Some(call.env.block_env.number.saturating_to()),
            ..Default::default()
        };
        let done =
            Done { tx: &call.tx, block: &call.env.block_env, res, spec: call.env.cfg_env.spec };
        to_value(self.result(&mut inspector, None, &info, &done, &call.state)?)
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// One executed transaction, as the tracers' answers need it.
struct Done<'a> {
    tx: &'a TxEnv,
    block: &'a BlockEnv,
    res: &'a ResultAndState,
    /// The fork it ran under.
    spec: SpecId,
}

/// Which stored transactions of a block to trace.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The transaction at this index.
    One(usize),
    /// All of them.
    All,
}

impl RpcContext {
    /// `debug_traceTransaction(txHash, options?)`.
    pub(crate) async fn debug_trace_transaction(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash: B256 = a.req(0, "txHash")?;
        let opts = self.trace_options(&a, 1)?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let Some((n, index)) = r.transaction_location(&hash)? else {
                    return Err(RpcError::NotTraceable("transaction not found".into()));
                };
                let mut traces = ctx.replay(&r, n, Target::One(index as usize), &opts)?;
                let (_, trace) = traces.pop().ok_or_else(|| {
                    RpcError::Internal(format!("transaction {hash} missing from block {n}"))
                })?;
                to_value(trace)
            })
            .await
    }

    /// `debug_traceBlockByNumber(block, options?)`.
    pub(crate) async fn debug_trace_block_by_number(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let block = a.block_number(0, "block")?;
        let opts = self.trace_options(&a, 1)?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let n = ctx.resolve(&r, block)?.ok_or_else(|| match block {
                    BlockRef::Number(n) => RpcError::NotTraceable(format!("block #{n} not found")),
                    _ => RpcError::HeaderNotFound,
                })?;
                ctx.geth_trace_block(&r, n, &opts)
            })
            .await
    }

    /// `debug_traceBlockByHash(blockHash, options?)`.
    pub(crate) async fn debug_trace_block_by_hash(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash: B256 = a.req(0, "blockHash")?;
        let opts = self.trace_options(&a, 1)?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let Some(n) = r.block_number(&hash)? else {
                    return Err(RpcError::NotTraceable(format!("block {hash} not found")));
                };
                ctx.geth_trace_block(&r, n, &opts)
            })
            .await
    }

    /// `debug_traceCall(call, block?, options?)`: `eth_call`'s environment and rules, with
    /// `stateOverrides` and `blockOverrides` read from the options.
    ///
    /// As `trace_call`, a short call runs on the server's thread that parsed it, within
    /// `--rpc.inline-budget-us` (and the request's own timeout); one that does not finish
    /// within it runs again on the EVM pool, and so does the building of a large trace (an
    /// opcode log of more than a few hundred steps, a mux tracer's).
    pub(crate) async fn debug_trace_call(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let inline = self.inline_budget(&p);
        self.traced_call(inline, move |ctx| ctx.debug_trace_call_params(&p)).await
    }

    /// The call, block and tracing options of `debug_traceCall`.
    fn debug_trace_call_params(
        &self,
        p: &Params<'_>,
    ) -> RpcResult<(CallRequest, BlockRef, TraceOptions)> {
        let what = "2 (options.stateOverrides)";
        self.precheck_overrides(p, RawSets::InOptions(2), what)?;
        let a = Args::new(p, 3)?;
        let tx = call_object(&a, 0)?;
        let block = a.block(1, "block")?;
        if block == BlockRef::Pending {
            return Err(invalid("pending is not supported for tracing"));
        }
        if let Some(o) = a.get(2).and_then(|o| o.get("blockOverrides")) {
            check_block_overrides(o, OverridesOf::Call).map_err(|e| {
                invalid(format!("invalid argument 2 (options): blockOverrides: {e}"))
            })?;
        }
        let overrides = a.get(2).and_then(|o| o.get("stateOverrides"));
        self.check_override_set(overrides, what)?;
        let call_opts: GethDebugTracingCallOptions = a.opt(2, "options")?.unwrap_or_default();
        if call_opts.tx_index.is_some() {
            return Err(invalid("invalid argument 2 (options): txIndex is not supported"));
        }
        let opts = self.check_options(call_opts.tracing_options, 2)?;
        let req = CallRequest {
            tx,
            state_overrides: call_opts.state_overrides,
            block_overrides: call_opts.block_overrides,
        };
        Ok((req, block, opts))
    }

    /// Every transaction of block `n` traced, as geth answers: `[{txHash, result}, ...]`.
    fn geth_trace_block(&self, r: &Reader, n: u64, opts: &TraceOptions) -> RpcResult<Raw> {
        let traces = self.replay(r, n, Target::All, opts)?;
        let out: Vec<TraceResult> = traces
            .into_iter()
            .map(|(hash, trace)| TraceResult::new_success(trace, Some(hash)))
            .collect();
        to_value(out)
    }

    /// Replays block `n` on the state after its parent and traces `target`.
    fn replay(
        &self,
        r: &Reader,
        n: u64,
        target: Target,
        opts: &TraceOptions,
    ) -> RpcResult<Vec<(B256, GethTrace)>> {
        let block = self.stored_block(r, n)?;
        let traced = match target {
            Target::One(i) => i..i.saturating_add(1),
            Target::All => 0..block.transactions.len(),
        };
        let spec = crate::evm::block_env(&self.spec, &block.header).cfg_env.spec;
        let mut inspector = opts.tracer()?;
        self.replay_stored(r, &block, traced, &mut inspector, opts.timeout, |t| {
            let (budget, tracer) = &mut *t.inspector;
            budget.result()?;
            budget.next_transaction();
            let hash = *block.transactions[t.index].tx_hash();
            let context = TransactionContext {
                block_hash: Some(block.hash),
                tx_index: Some(t.index),
                tx_hash: Some(hash),
            };
            let info = TransactionInfo {
                hash: Some(hash),
                index: Some(t.index as u64),
                block_hash: Some(block.hash),
                block_number: Some(n),
                ..Default::default()
            };
            let done = Done { tx: t.tx, block: t.block, res: t.result, spec };
            let trace = opts.result(tracer, Some(context), &info, &done, t.state)?;
            tracer.reset();
            tracer.inner.fuse().map_err(|e| RpcError::Internal(format!("tracer reset: {e}")))?;
            Ok((hash, trace))
        })
    }

    /// The tracing options at argument `i` (absent: the struct logger with geth's defaults).
    fn trace_options(&self, a: &Args, i: usize) -> RpcResult<TraceOptions> {
        let opts: GethDebugTracingOptions = a.opt(i, "options")?.unwrap_or_default();
        self.check_options(opts, i)
    }

    /// Refuses tracers loupe does not serve and malformed tracer configs, naming them, and
    /// works out the deadline.
    fn check_options(&self, opts: GethDebugTracingOptions, i: usize) -> RpcResult<TraceOptions> {
        let bad = |what: String| invalid(format!("invalid argument {i} (options): {what}"));
        let config = opts.tracer_config.clone();
        let (mut flat, mut prestate) = (None, None);
        let config_error =
            |name: &str, e: serde_json::Error| bad(format!("tracerConfig of {name}: {e}"));
        match &opts.tracer {
            None => {}
            Some(GethDebugTracerType::JsTracer(code)) if code.is_empty() => {}
            Some(GethDebugTracerType::BuiltInTracer(builtin)) => match builtin {
                GethDebugBuiltInTracerType::CallTracer => {
                    config.into_call_config().map_err(|e| config_error("callTracer", e))?;
                }
                GethDebugBuiltInTracerType::PreStateTracer => {
                    let parsed: PrestateConfig = if config.is_null() {
                        PrestateConfig::default()
                    } else {
                        config.from_value().map_err(|e| config_error("prestateTracer", e))?
                    };
                    parsed
                        .check()
                        .map_err(|e| bad(format!("tracerConfig of prestateTracer: {e}")))?;
                    prestate = Some(parsed);
                }
                GethDebugBuiltInTracerType::FlatCallTracer => {
                    flat = Some(
                        config
                            .into_flat_call_config()
                            .map_err(|e| config_error("flatCallTracer", e))?,
                    );
                }
                GethDebugBuiltInTracerType::Erc7562Tracer => {
                    if !config.is_null() {
                        config
                            .from_value::<Erc7562Config>()
                            .map_err(|e| config_error("erc7562Tracer", e))?;
                    }
                }
                GethDebugBuiltInTracerType::FourByteTracer
                | GethDebugBuiltInTracerType::NoopTracer => {}
                other => {
                    let name = GethDebugTracerType::BuiltInTracer(*other);
                    return Err(bad(format!(
                        "tracer {:?} is not supported (supported: {TRACERS}, or none for the \
                         struct logger)",
                        name.as_str()
                    )));
                }
            },
            Some(GethDebugTracerType::JsTracer(code)) => return Err(bad(unknown_tracer(code))),
        }
        let timeout = match &opts.timeout {
            None => self.config.call_timeout,
            Some(t) => go_duration(t)
                .map_err(|e| bad(format!("timeout: {e}")))?
                .min(self.config.call_timeout),
        };
        Ok(TraceOptions { opts, flat, prestate, timeout, max_size: self.config.max_trace_size })
    }
}

/// The struct logger's output adjusted to geth's (the other tracers' are in [`flat_call`],
/// [`prestate`] and [`crate::rpc::debug::frontier_create`]): it leaves out a zero `refund`, an empty `memory` and an empty `returnData` (geth's `omitempty`), where
/// revm-inspectors 0.44.3 writes `0`, `[]` and `"0x"`.
fn geth_shape(trace: GethTrace) -> GethTrace {
    let GethTrace::Default(mut frame) = trace else { return trace };
    for log in &mut frame.struct_logs {
        if log.refund_counter == Some(0) {
            log.refund_counter = None;
        }
        if log.memory.as_ref().is_some_and(Vec::is_empty) {
            log.memory = None;
        }
        if log.return_data.as_ref().is_some_and(|d| d.is_empty()) {
            log.return_data = None;
        }
    }
    GethTrace::Default(frame)
}

/// Why a tracer that is not built in is refused: a tracer name we do not know, or JavaScript
/// tracer code (which loupe does not run).
fn unknown_tracer(code: &str) -> String {
    let is_name = code.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if is_name {
        return format!(
            "unknown tracer {code:?} (supported: {TRACERS}, or none for the struct logger)"
        );
    }
    const SHOWN: usize = 60;
    let snippet: String = code.chars().take(SHOWN).collect();
    let more = if code.chars().count() > SHOWN { "…" } else { "" };
    format!(
        "JavaScript tracers are not supported (got tracer code {snippet:?}{more}); use a \
         built-in tracer: {TRACERS}, or none for the struct logger"
    )
}

/// Parses a Go duration (`"5s"`, `"300ms"`, `"1m30s"`, `"1.5h"`, `"0"`), the format of geth's
/// `timeout` option. Negative durations are refused.
fn go_duration(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let value: f64 = number.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("missing unit in duration {s:?}")),
            other => return Err(format!("unknown unit {other:?} in duration {s:?}")),
        };
        total += value * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("invalid duration {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        assert_eq!(go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(go_duration("5s"), Ok(ms(5000)));
        assert_eq!(go_duration("300ms"), Ok(ms(300)));
        assert_eq!(go_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(go_duration("1.5h"), Ok(ms(5_400_000)));
        assert_eq!(go_duration("250us"), Ok(Duration::from_micros(250)));
        for bad in ["", "5", "-5s", "5x", "s", "1..5s", "5 s"] {
            assert!(go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn js_code_and_unknown_names_are_told_apart() {
        assert!(unknown_tracer("fooTracer").starts_with("unknown tracer \"fooTracer\""));
        let js = unknown_tracer("{data: [], step: function(log) {}, result: function() {}}");
        assert!(js.starts_with("JavaScript tracers are not supported"), "{js}");
    }
}
