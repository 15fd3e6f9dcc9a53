//! `trace_call`: a simulated call with its OpenEthereum-shape trace and state diff.

use std::sync::Arc;

use alloy_primitives::map::HashSet;
use alloy_rpc_types_trace::parity::{TraceResults, TraceType};
use jsonrpsee::types::Params;
use revm_inspectors::tracing::{TracingInspector, TracingInspectorConfig};

use super::call::call_request;
use super::eth::{Raw, to_value};
use super::params::{Args, BlockRef, invalid};
use super::{RpcContext, RpcError, RpcResult};
use crate::evm::{CallRequest, execute_call, prepare_call};

impl RpcContext {
    /// `trace_call(call, traceTypes, block?, stateOverrides?, blockOverrides?)`.
    pub(crate) async fn trace_call(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let (req, types, block) = self.trace_call_params(&p)?;
        let ctx = self.clone();
        self.pool.run(move || ctx.trace_call_blocking(req, &types, block)).await
    }

    /// `trace_call` with JSON params, run on the calling thread (no HTTP, no worker pool): the
    /// in-process floor that benchmarks compare the server against.
    pub fn trace_call_direct(&self, params_json: &str) -> RpcResult<Raw> {
        let (req, types, block) = self.trace_call_params(&Params::new(Some(params_json)))?;
        self.trace_call_blocking(req, &types, block)
    }

    fn trace_call_params(
        &self,
        p: &Params<'_>,
    ) -> RpcResult<(CallRequest, HashSet<TraceType>, BlockRef)> {
        let a = Args::new(p, 5)?;
        let req = call_request(&a, 0, 3, 4)?;
        let types = self.trace_types(&a, 1)?;
        let block = a.block(2, "block")?;
        if block == BlockRef::Pending {
            return Err(invalid("pending is not supported for tracing"));
        }
        Ok((req, types, block))
    }

    fn trace_types(&self, a: &Args, i: usize) -> RpcResult<HashSet<TraceType>> {
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

    fn trace_call_blocking(
        &self,
        req: CallRequest,
        types: &HashSet<TraceType>,
        block: BlockRef,
    ) -> RpcResult<Raw> {
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let header = r.header(n)?.ok_or(RpcError::HeaderNotFound)?;
        let state = r.state_at(n)?;
        let mut call = prepare_call(&self.spec, &header, state, req, self.config.gas_cap)?;
        let mut tracer = TracingInspector::new(TracingInspectorConfig::from_parity_config(types));
        let res = execute_call(&mut call, &mut tracer, self.config.call_timeout)?;
        let results = tracer
            .into_parity_builder()
            .into_trace_results_with_state(&res, types, &call.state)
            .map_err(|e| RpcError::Internal(format!("state diff: {e}")))?;
        to_value(normalize(results))
    }
}

/// The one place where revm-inspectors' output is adjusted to `behaviour.md` §3.3. With
/// revm-inspectors 0.44.3 nothing needs changing: it already reports died accounts with `-`,
/// born accounts with `+`, OpenEthereum error wording, and a reverted frame's gas and revert
/// data. Keep corrections here, each with a test, if a future version drifts.
fn normalize(results: TraceResults) -> TraceResults {
    results
}
