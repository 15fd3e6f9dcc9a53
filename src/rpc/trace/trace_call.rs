//! `trace_call`, `trace_callMany` and `trace_rawTransaction`: simulated calls with their
//! OpenEthereum-shape traces and state diffs. Nothing is stored; `trace_callMany` carries each
//! call's changes to the next in memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_consensus::TxEnvelope;
use alloy_consensus::transaction::{Recovered, SignerRecoverable};
use alloy_eips::eip2718::Decodable2718;
use alloy_rpc_types_eth::TransactionRequest;
use revm::DatabaseCommit;
use revm::database::State;
use serde_json::Value;

use alloy_primitives::map::HashSet;
use alloy_primitives::{Bytes, KECCAK256_EMPTY, U64};
use alloy_rpc_types_trace::parity::{AccountDiff, Delta, TraceResults, TraceType};
use jsonrpsee::types::Params;
use revm::DatabaseRef;
use revm::context::result::ResultAndState;
use revm::primitives::hardfork::SpecId;
use revm::state::EvmState;
use revm_inspectors::tracing::{TracingInspector, TracingInspectorConfig};

use crate::evm::{CallError, CallRequest, PreparedCall, execute_call, prepare_call_on};
use crate::rpc::eth::eth_call::call_object;
use crate::rpc::eth::override_limits::RawSets;
use crate::rpc::request::inline::{Traced, small_trace, traced_whole};
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
use crate::rpc::trace::json::{trace_results, trace_results_list};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::StateAt;

/// Most calls one `trace_callMany` takes.
const MAX_CALL_MANY: usize = 1000;

impl RpcContext {
    /// `trace_call(call, traceTypes, block?, stateOverrides?, blockOverrides?)`.
    ///
    /// A short call runs on the server's thread that parsed it, within
    /// `--rpc.inline-budget-us` ([`Self::inline_budget`], [`Self::traced_call`]); one that
    /// does not finish within it runs again on the EVM pool, from the state already read, and
    /// so does the building of a large trace. Either way the call holds a place in the pool
    /// while it runs, so a full pool refuses it (-32005).
    pub(crate) async fn trace_call(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let inline = self.inline_budget(&p);
        self.traced_call(inline, move |ctx| {
            let (req, types, block) = ctx.trace_call_params(&p)?;
            Ok((req, block, ParityTrace { types, timeout: ctx.config.call_timeout }))
        })
        .await
    }

    /// `trace_call` with JSON params, run on the calling thread (no HTTP, no worker pool): the
    /// in-process floor that benchmarks compare the server against.
    pub fn trace_call_direct(&self, params_json: &str) -> RpcResult<String> {
        let (req, types, block) = self.trace_call_params(&Params::new(Some(params_json)))?;
        let mut call = self.prepared_call(req, block)?;
        let traced = ParityTrace { types, timeout: self.config.call_timeout };
        traced_whole(&mut call, &traced).map(Raw::into_string)
    }

    fn trace_call_params(
        &self,
        p: &Params<'_>,
    ) -> RpcResult<(CallRequest, HashSet<TraceType>, BlockRef)> {
        self.precheck_overrides(p, RawSets::At(3), "3 (stateOverrides)")?;
        let a = Args::new(p, 5)?;
        let req = self.call_request(&a, 0, 3, 4)?;
        let types = self.trace_types(&a, 1)?;
        let block = a.block(2, "block")?;
        if block == BlockRef::Pending {
            return Err(invalid("pending is not supported for tracing"));
        }
        Ok((req, types, block))
    }

    pub(crate) fn trace_types(&self, a: &Args, i: usize) -> RpcResult<HashSet<TraceType>> {
        let names: Vec<String> = a.req(i, "traceTypes")?;
        let mut types = HashSet::default();
        for name in names {
            types.insert(match name.as_str() {
                "trace" => TraceType::Trace,
                "stateDiff" => TraceType::StateDiff,
                "vmTrace" if self.config.vm_trace => TraceType::VmTrace,
                "vmTrace" => return Err(RpcError::NotEnabled("vmTrace is not supported")),
                other => {
                    return Err(invalid(format!(
                        "invalid argument {i} (traceTypes): unknown trace type {other:?} (want \"trace\", \"stateDiff\"{})",
                        if self.config.vm_trace { ", \"vmTrace\"" } else { "" }
                    )));
                }
            });
        }
        Ok(types)
    }

    /// `trace_callMany([[call, traceTypes], ...], block?)`: each call sees the changes of the
    /// ones before it.
    pub(crate) async fn trace_call_many(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        // Parsed on the pool: up to a thousand calls must not hold up the server's threads.
        let ctx = self.clone();
        self.pool
            .run(move || {
                let (calls, block) = ctx.trace_call_many_params(&p)?;
                trace_results_list(&ctx.trace_call_many_blocking(calls, block)?)
            })
            .await
    }

    /// The calls (at most [`MAX_CALL_MANY`]) and the block of `trace_callMany`.
    #[allow(clippy::type_complexity)]
    fn trace_call_many_params(
        &self,
        p: &Params<'_>,
    ) -> RpcResult<(Vec<(TransactionRequest, HashSet<TraceType>)>, BlockRef)> {
        let a = Args::new(p, 2)?;
        let pairs: Vec<Value> = a.req(0, "calls")?;
        if pairs.len() > MAX_CALL_MANY {
            return Err(RpcError::Limit(format!(
                "trace_callMany takes at most {MAX_CALL_MANY} calls, got {}",
                pairs.len()
            )));
        }
        let mut calls = Vec::with_capacity(pairs.len());
        for (k, pair) in pairs.iter().enumerate() {
            let at = |e: RpcError| match e {
                RpcError::InvalidParams(m) => invalid(format!("calls[{k}]: {m}")),
                other => other,
            };
            let Value::Array(items) = pair else {
                return Err(invalid(format!(
                    "invalid argument 0 (calls): calls[{k}] must be [call, traceTypes]"
                )));
            };
            let text = Value::Array(items.clone()).to_string();
            let pa = Args::new(&Params::new(Some(&text)), 2).map_err(at)?;
            let tx = call_object(&pa, 0).map_err(at)?;
            let types = self.trace_types(&pa, 1).map_err(at)?;
            calls.push((tx, types));
        }
        let block = a.block(1, "block")?;
        if block == BlockRef::Pending {
            return Err(invalid("pending is not supported for tracing"));
        }
        Ok((calls, block))
    }

    /// `trace_rawTransaction(rawTx, traceTypes)`: the signed transaction's fields traced as
    /// one call at the latest block (as `trace_callMany` with that one call).
    pub(crate) async fn trace_raw_transaction(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let raw: Bytes = a.req(0, "rawTransaction")?;
        let types = self.trace_types(&a, 1)?;
        let tx = TxEnvelope::decode_2718_exact(&raw).map_err(|e| {
            invalid(format!("invalid argument 0 (rawTransaction): not a transaction: {e}"))
        })?;
        let from = tx.recover_signer().map_err(|e| {
            invalid(format!("invalid argument 0 (rawTransaction): bad signature: {e}"))
        })?;
        let req =
            TransactionRequest::from_recovered_transaction(Recovered::new_unchecked(tx, from));
        let ctx = self.clone();
        self.pool
            .run(move || {
                let mut out = ctx.trace_call_many_blocking(vec![(req, types)], BlockRef::Latest)?;
                match out.pop() {
                    Some(results) => trace_results(&results),
                    None => to_value(()),
                }
            })
            .await
    }

    fn trace_call_many_blocking(
        &self,
        calls: Vec<(TransactionRequest, HashSet<TraceType>)>,
        block: BlockRef,
    ) -> RpcResult<Vec<TraceResults>> {
        let started = Instant::now();
        let timeout = self.config.call_timeout;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let header = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
        let mut state = State::builder().with_database_ref(r.state_at(n)?).build();
        let mut out = Vec::with_capacity(calls.len());
        for (tx, types) in calls {
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(RpcError::Timeout(timeout));
            }
            let req = CallRequest { tx, ..Default::default() };
            let mut call = prepare_call_on(&self.spec, &header.0, state, req, self.config.gas_cap)?;
            let mut tracer =
                TracingInspector::new(TracingInspectorConfig::from_parity_config(&types));
            // Each call runs within what is left of the batch's deadline: when it fires, the
            // deadline that passed is the batch's, not the part of it this call had left.
            let res = execute_call(&mut call, &mut tracer, left).map_err(|e| match e {
                CallError::Timeout(_) => RpcError::Timeout(timeout),
                other => other.into(),
            })?;
            out.push(parity_results(&call, tracer, &res, &types)?);
            call.state.commit(res.state);
            state = call.state;
        }
        Ok(out)
    }
}

/// `trace_call`'s kind of traced call: the trace types asked for, under the operator's deadline.
struct ParityTrace {
    types: HashSet<TraceType>,
    timeout: Duration,
}

impl Traced for ParityTrace {
    type Inspector = TracingInspector;

    fn inspector(&self) -> RpcResult<TracingInspector> {
        Ok(TracingInspector::new(TracingInspectorConfig::from_parity_config(&self.types)))
    }

    fn small(tracer: &TracingInspector, res: &ResultAndState) -> bool {
        small_trace(tracer, res)
    }

    fn answer(
        &self,
        call: &PreparedCall<StateAt>,
        tracer: TracingInspector,
        res: &ResultAndState,
    ) -> RpcResult<Raw> {
        trace_results(&parity_results(call, tracer, res, &self.types)?)
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// revm-inspectors' Parity-shape results of a traced call, [`normalize`]d.
fn parity_results<DB: DatabaseRef>(
    call: &PreparedCall<DB>,
    tracer: TracingInspector,
    res: &ResultAndState,
    types: &HashSet<TraceType>,
) -> RpcResult<TraceResults> {
    let results = tracer
        .into_parity_builder()
        .into_trace_results_with_state(res, types, &call.state)
        .map_err(|e| RpcError::Internal(format!("state diff: {e}")))?;
    normalize(results, &res.state, &call.state, call.env.cfg_env.spec)
}

/// The one place where revm-inspectors' output is adjusted to `behaviour.md` §3.3.
///
/// revm-inspectors 0.44.3 already reports self-destructed accounts with `-`, born accounts with
/// `+`, OpenEthereum error wording, and a reverted frame's gas and revert data. What it misses:
/// an account that existed, was touched and is empty after the call is deleted under EIP-161
/// (Spurious Dragon on), so it died and gets `-` for balance, nonce and code
/// (`tests/trace_golden.rs`, `touched_empty_account_dies_under_eip161`). Its slots cannot be
/// listed: a `DatabaseRef` cannot enumerate storage, and the removed account implies them.
pub(crate) fn normalize<DB: DatabaseRef>(
    mut results: TraceResults,
    post: &EvmState,
    pre: &DB,
    spec: SpecId,
) -> RpcResult<TraceResults> {
    let Some(diff) = results.state_diff.as_mut() else { return Ok(results) };
    if !spec.is_enabled_in(SpecId::SPURIOUS_DRAGON) {
        return Ok(results);
    }
    for (address, account) in post {
        if !account.is_touched() || !account.is_empty() || account.is_selfdestructed() {
            continue;
        }
        let before =
            pre.basic_ref(*address).map_err(|_| RpcError::Internal("state read".into()))?;
        let Some(before) = before else { continue };
        let code = if before.code_hash == KECCAK256_EMPTY {
            Bytes::new()
        } else {
            pre.code_by_hash_ref(before.code_hash)
                .map_err(|_| RpcError::Internal("code read".into()))?
                .original_bytes()
        };
        diff.insert(
            *address,
            AccountDiff {
                balance: Delta::Removed(before.balance),
                nonce: Delta::Removed(U64::from(before.nonce)),
                code: Delta::Removed(code),
                storage: Default::default(),
            },
        );
    }
    Ok(results)
}
