//! `eth_estimateGas` and `eth_createAccessList`: repeated simulated calls in `eth_call`'s
//! environment (`evm::prepare_call`), on the worker pool, under one deadline for all runs.
//!
//! The estimate follows geth's search: the upper bound is the call's gas, else the block's gas
//! limit, capped by `--rpc.gascap`, by EIP-7825's per-transaction cap from Osaka on, and, for a
//! priced call, by what the sender can pay. A plain transfer is tried at 21,000 first. Then a
//! run at the bound (its failure is the answer: the revert, or `gas required exceeds allowance`),
//! an optimistic try at used + refund + 2,300 scaled by 64/63, and a binary search that stops
//! when the interval is within 1.5% of the bound.

use std::sync::Arc;
use std::time::Instant;

use alloy_eips::eip2930::AccessList;
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Bytes, U256};
use alloy_rpc_types_eth::AccessListResult;
use jsonrpsee::types::Params;
use revm::context::result::{ExecutionResult, HaltReason, OutOfGasError, ResultAndState};
use revm::inspector::NoOpInspector;
use revm_inspectors::access_list::AccessListInspector;

use crate::evm::{CallError, CallRequest, execute_call, prepare_call};
use crate::rpc::eth::eth_call::{halt_message, revert_reason};
use crate::rpc::eth::override_limits::RawSets;
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::StateAt;

/// Gas of a plain value transfer.
const TRANSFER_GAS: u64 = 21_000;
/// EIP-7825: the most gas one transaction may use from Osaka on.
const MAX_TX_GAS_OSAKA: u64 = 1 << 24;
/// The search stops once `(hi - lo) / hi` is below this.
const ESTIMATE_ERROR_RATIO: f64 = 0.015;
/// Rounds of `eth_createAccessList` before giving up on a list that keeps changing.
const ACCESS_LIST_ROUNDS: usize = 10;

/// The block, its state and the clock shared by the runs of one request.
struct Runs<'a> {
    ctx: &'a RpcContext,
    header: alloy_consensus::Header,
    state: StateAt,
    started: Instant,
}

impl Runs<'_> {
    /// Runs `req` with `gas` and `inspector`; nothing is committed.
    fn run<I>(&self, req: &CallRequest, gas: u64, inspector: I) -> RpcResult<ResultAndState>
    where
        I: for<'b> revm::Inspector<
                alloy_evm::eth::EthEvmContext<
                    &'b mut revm::database::State<revm::database::WrapDatabaseRef<StateAt>>,
                >,
            >,
    {
        let timeout = self.ctx.config.call_timeout;
        let left = timeout.checked_sub(self.started.elapsed()).ok_or(RpcError::Timeout(timeout))?;
        let mut req = req.clone();
        req.tx.gas = Some(gas);
        let mut call =
            prepare_call(&self.ctx.spec, &self.header, self.state.clone(), req, u64::MAX)?;
        execute_call(&mut call, inspector, left).map_err(|e| match e {
            CallError::Timeout(_) => RpcError::Timeout(timeout),
            e => e.into(),
        })
    }

    /// Whether the call succeeds with `gas`; a run that cannot start for lack of gas fails.
    fn succeeds(&self, req: &CallRequest, gas: u64) -> RpcResult<bool> {
        match self.run(req, gas, NoOpInspector) {
            Ok(r) => Ok(r.result.is_success()),
            Err(RpcError::Execution(m)) if m.starts_with("intrinsic gas too low") => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The error a failed run at the upper bound answers with.
fn failure(result: &ExecutionResult, hi: u64) -> RpcError {
    match result {
        ExecutionResult::Revert { output, .. } => {
            RpcError::Reverted { reason: revert_reason(output), data: Bytes::from(output.to_vec()) }
        }
        ExecutionResult::Halt { reason: HaltReason::OutOfGas(OutOfGasError::Basic), .. }
        | ExecutionResult::Halt { reason: HaltReason::OutOfGas(_), .. } => {
            RpcError::Execution(format!("gas required exceeds allowance ({hi})"))
        }
        ExecutionResult::Halt { reason, .. } => RpcError::Execution(halt_message(reason)),
        ExecutionResult::Success { .. } => RpcError::Internal("not a failure".into()),
    }
}

impl RpcContext {
    fn runs(&self, block: BlockRef) -> RpcResult<Runs<'_>> {
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let header = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?.0.clone();
        let state = r.state_at(n)?;
        Ok(Runs { ctx: self, header, state, started: Instant::now() })
    }

    /// The call and block of `eth_estimateGas` and `eth_createAccessList`, which take the same
    /// parameters `(call, block?, stateOverrides?, blockOverrides?)`, the overrides within their
    /// limits.
    fn call_params(&self, p: &Params<'_>) -> RpcResult<(CallRequest, BlockRef)> {
        self.precheck_overrides(p, RawSets::At(2), "2 (stateOverrides)")?;
        let a = Args::new(p, 4)?;
        let req = self.call_request(&a, 0, 2, 3)?;
        Ok((req, a.block(1, "block")?))
    }

    /// `eth_estimateGas(call, block?, stateOverrides?, blockOverrides?)`.
    pub(crate) async fn estimate_gas(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        // Parsed on the pool: a large state override must not hold up the server's threads.
        let ctx = self.clone();
        self.pool
            .run(move || {
                let (req, block) = ctx.call_params(&p)?;
                ctx.estimate_blocking(&req, block).and_then(|g| to_value(U256::from(g)))
            })
            .await
    }

    fn estimate_blocking(&self, req: &CallRequest, block: BlockRef) -> RpcResult<u64> {
        let runs = self.runs(block)?;
        let tx = &req.tx;
        let mut hi = match tx.gas {
            Some(g) if g >= TRANSFER_GAS => g,
            _ => runs.header.gas_limit,
        };
        hi = hi.min(self.config.gas_cap);
        if self.spec.is_osaka_active_at_timestamp(runs.header.timestamp) {
            hi = hi.min(MAX_TX_GAS_OSAKA);
        }
        let fee_cap = tx.max_fee_per_gas.or(tx.gas_price).unwrap_or(0);
        if fee_cap > 0 {
            let from = tx.from.unwrap_or_default();
            let balance = revm::DatabaseRef::basic_ref(&runs.state, from)
                .map_err(|e| RpcError::Internal(format!("state read: {e}")))?
                .map_or(U256::ZERO, |a| a.balance);
            let value = tx.value.unwrap_or_default();
            if value > balance {
                return Err(RpcError::Execution("insufficient funds for transfer".into()));
            }
            let allowance = (balance - value) / U256::from(fee_cap);
            hi = hi.min(u64::try_from(allowance).unwrap_or(u64::MAX));
        }
        // A plain transfer (no data, no code at the target, nothing overridden): 21,000 if
        // that runs.
        let plain = tx.to.and_then(|k| k.to().copied()).is_some()
            && tx.input.input().is_none_or(|d| d.is_empty())
            && tx.authorization_list.as_ref().is_none_or(|l| l.is_empty())
            && req.state_overrides.is_none();
        if plain && hi >= TRANSFER_GAS {
            let to = tx.to.and_then(|k| k.to().copied()).unwrap_or_default();
            let code = revm::DatabaseRef::basic_ref(&runs.state, to)
                .map_err(|e| RpcError::Internal(format!("state read: {e}")))?
                .is_some_and(|a| !a.is_empty_code_hash());
            if !code && runs.succeeds(req, TRANSFER_GAS)? {
                return Ok(TRANSFER_GAS);
            }
        }
        let first = match runs.run(req, hi, NoOpInspector) {
            Err(RpcError::Execution(m)) if m.starts_with("intrinsic gas too low") => {
                return Err(RpcError::Execution(format!(
                    "gas required exceeds allowance ({hi}): {m}"
                )));
            }
            other => other?,
        };
        if !first.result.is_success() {
            return Err(failure(&first.result, hi));
        }
        let used = first.result.tx_gas_used();
        let refund = match &first.result {
            ExecutionResult::Success { gas, .. } => gas.inner_refunded(),
            _ => 0,
        };
        let mut lo = used.saturating_sub(1);
        let optimistic = (used + refund + 2300) * 64 / 63;
        if optimistic < hi {
            if runs.succeeds(req, optimistic)? {
                hi = optimistic;
            } else {
                lo = optimistic;
            }
        }
        while lo + 1 < hi {
            if ((hi - lo) as f64 / hi as f64) < ESTIMATE_ERROR_RATIO {
                break;
            }
            let mut mid = lo + (hi - lo) / 2;
            if mid > lo.saturating_mul(2) {
                // Most calls need little gas: probe low first rather than halving a huge range.
                mid = lo * 2;
            }
            if runs.succeeds(req, mid)? {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(hi)
    }

    /// `eth_createAccessList(call, block?, stateOverrides?, blockOverrides?)`: the addresses
    /// and slots the call touches (sender, target and precompiles left out), found by running
    /// it with the list until the list stops changing, and the gas it uses with that list.
    pub(crate) async fn create_access_list(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        // Parsed on the pool: a large state override must not hold up the server's threads.
        let ctx = self.clone();
        self.pool
            .run(move || {
                let (req, block) = ctx.call_params(&p)?;
                ctx.access_list_blocking(req, block)
            })
            .await
    }

    fn access_list_blocking(&self, mut req: CallRequest, block: BlockRef) -> RpcResult<Raw> {
        let runs = self.runs(block)?;
        let gas = req.tx.gas.unwrap_or(self.config.gas_cap).min(self.config.gas_cap);
        let mut list = req.tx.access_list.clone().unwrap_or_default();
        for _ in 0..ACCESS_LIST_ROUNDS {
            req.tx.access_list = Some(list.clone());
            let mut inspector = AccessListInspector::new(list.clone());
            let res = runs.run(&req, gas, &mut inspector)?;
            let found = inspector.into_access_list();
            if same(&found, &list) {
                let error = match &res.result {
                    ExecutionResult::Success { .. } => None,
                    // geth's wording: the reason stays in the revert data, not here.
                    ExecutionResult::Revert { .. } => Some("execution reverted".to_string()),
                    ExecutionResult::Halt { reason, .. } => Some(halt_message(reason)),
                };
                return to_value(AccessListResult {
                    access_list: found,
                    gas_used: U256::from(res.result.tx_gas_used()),
                    error,
                });
            }
            list = found;
        }
        Err(RpcError::Execution(format!(
            "the access list did not settle after {ACCESS_LIST_ROUNDS} runs"
        )))
    }
}

/// Equal as sets of (address, slots).
fn same(a: &AccessList, b: &AccessList) -> bool {
    let norm = |l: &AccessList| {
        let mut v: Vec<_> = l
            .iter()
            .map(|i| {
                let mut keys = i.storage_keys.clone();
                keys.sort();
                keys.dedup();
                (i.address, keys)
            })
            .collect();
        v.sort();
        v
    };
    norm(a) == norm(b)
}
