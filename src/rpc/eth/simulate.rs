//! `eth_simulateV1`: calls in a sequence of simulated blocks on top of a stored block, each
//! block built as import builds one (system calls, receipts, requests), state carried from
//! block to block, with per-block state and block overrides.
//!
//! Rules, after geth: block numbers and timestamps must increase (gaps are filled with empty
//! blocks, timestamps step by 12 s); without `validation` the base fee is 0 unless overridden
//! and nonces, balances for fees and the base fee are not checked; a call without gas gets what
//! is left of the block's gas limit (capped by `--rpc.gascap`); without a nonce, the sender's.
//! At most [`MAX_BLOCKS`] blocks and [`MAX_CALLS`] calls per request, all under one
//! `--rpc.evm-timeout` deadline.
//!
//! Each block's `stateRoot` is the incremental walk over the trie at the base block with the
//! simulation's changes laid over it (`trie::overlay_state_root`), so block hashes are geth's.
//! Pre-execution failures give geth's codes (-38010…-38015) and wording; with `validation`
//! nonces are checked first, as geth does.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use alloy_consensus::proofs::{calculate_receipt_root, calculate_transaction_root};
use alloy_consensus::transaction::Recovered;
use alloy_consensus::{
    BlockBody, EMPTY_OMMER_ROOT_HASH, Header, ReceiptEnvelope, SignableTransaction, TxEnvelope,
    TxReceipt,
};
use alloy_eips::eip1559::BaseFeeParams;
use alloy_eips::eip7685::EMPTY_REQUESTS_HASH;
use alloy_evm::FromRecoveredTx;
use alloy_evm::block::{BlockExecutionError, BlockExecutor, BlockValidationError};
use alloy_evm::eth::receipt_builder::AlloyReceiptBuilder;
use alloy_evm::eth::{EthBlockExecutionCtx, EthBlockExecutor};
use alloy_evm::overrides::apply_state_overrides;
use alloy_evm::{EthEvmFactory, Evm, EvmFactory};
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Address, B256, Bloom, Bytes, Signature, U256};
use alloy_rpc_types_eth::simulate::{
    SimCallResult, SimulateError, SimulatePayload, SimulatedBlock,
};
use alloy_rpc_types_eth::{Log, TransactionRequest};
use jsonrpsee::types::Params;
use revm::Database;
use revm::DatabaseCommit;
use revm::context::TxEnv;
use revm::context::result::ExecutionResult;
use revm::context::result::InvalidTransaction;
use revm::database::states::bundle_state::BundleRetention;
use revm::database::{State, WrapDatabaseRef};
use serde_json::Value;

use crate::evm::{SimInspector, block_env, move_precompiles, precompile_moves_of};
use crate::rpc::eth::block_overrides::check_simulate_payload;
use crate::rpc::eth::convert::{BlockTxs, rpc_block};
use crate::rpc::eth::eth_call::{halt_message, revert_reason};
use crate::rpc::eth::override_limits::{OverrideCount, RawSets};
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::{Reader, StateAt};
use crate::trie::overlay_state_root;

/// Most simulated blocks (gaps included) per request.
pub(crate) const MAX_BLOCKS: u64 = 256;
/// Most calls per request.
pub(crate) const MAX_CALLS: usize = 1000;
/// Seconds between simulated blocks whose timestamp is not given.
const BLOCK_TIME: u64 = 12;

/// geth's error codes for simulation.
mod code {
    pub(super) const NONCE_TOO_LOW: i32 = -38010;
    pub(super) const NONCE_TOO_HIGH: i32 = -38011;
    pub(super) const BASE_FEE_TOO_LOW: i32 = -38012;
    pub(super) const INTRINSIC_GAS: i32 = -38013;
    pub(super) const INSUFFICIENT_FUNDS: i32 = -38014;
    pub(super) const BLOCK_GAS_LIMIT: i32 = -38015;
    pub(super) const BLOCK_NUMBER_ORDER: i32 = -38020;
    pub(super) const TIMESTAMP_ORDER: i32 = -38021;
    pub(super) const CLIENT_LIMIT: i32 = -38026;
    pub(super) const INVALID_TX: i32 = -32000;
    pub(super) const INTERNAL: i32 = -32603;
    pub(super) const VM_ERROR: i32 = -32015;
    pub(super) const REVERTED: i32 = 3;
}

fn sim_err(code: i32, message: impl Into<String>) -> RpcError {
    RpcError::Simulate { code, message: message.into() }
}

/// A simulated block as answered: the block object and its calls' results.
type SimBlockOut =
    SimulatedBlock<alloy_rpc_types_eth::Block<alloy_rpc_types_eth::Transaction<TxEnvelope>>>;

/// One block to simulate after sanitising: its number and timestamp fixed, gaps filled.
struct Planned {
    number: u64,
    timestamp: u64,
    block: alloy_rpc_types_eth::simulate::SimBlock,
}

fn plan(
    base: &Header,
    blocks: Vec<alloy_rpc_types_eth::simulate::SimBlock>,
) -> RpcResult<Vec<Planned>> {
    let mut out = Vec::new();
    let (mut number, mut time) = (base.number, base.timestamp);
    for block in blocks {
        let o = block.block_overrides.as_ref();
        let n = match o.and_then(|o| o.number) {
            Some(n) => u64::try_from(n).map_err(|_| invalid("block number override too large"))?,
            None => number + 1,
        };
        if n <= number {
            return Err(sim_err(
                code::BLOCK_NUMBER_ORDER,
                format!("block numbers must be in order: {n} <= {number}"),
            ));
        }
        if n - base.number > MAX_BLOCKS {
            return Err(sim_err(
                code::CLIENT_LIMIT,
                format!("too many blocks: {} > {MAX_BLOCKS}", n - base.number),
            ));
        }
        for gap in number + 1..n {
            time += BLOCK_TIME;
            out.push(Planned { number: gap, timestamp: time, block: Default::default() });
        }
        let t = match o.and_then(|o| o.time) {
            Some(t) if t <= time => {
                return Err(sim_err(
                    code::TIMESTAMP_ORDER,
                    format!("block timestamps must be in order: {t} <= {time}"),
                ));
            }
            Some(t) => t,
            None => time + BLOCK_TIME,
        };
        (number, time) = (n, t);
        out.push(Planned { number: n, timestamp: t, block });
    }
    Ok(out)
}

/// The error a call's failed pre-execution checks give the whole request, with geth's code
/// and wording (`err: … (supplied gas N)`).
fn tx_error(e: BlockExecutionError, from: Address, tx: &TxEnvelope, base_fee: u64) -> RpcError {
    use alloy_consensus::Transaction;
    let gas = tx.gas_limit();
    let wrap =
        |code: i32, message: String| sim_err(code, format!("err: {message} (supplied gas {gas})"));
    let invalid = match &e {
        BlockExecutionError::Validation(
            BlockValidationError::TransactionGasLimitMoreThanAvailableBlockGas { .. },
        ) => return sim_err(code::BLOCK_GAS_LIMIT, e.to_string()),
        BlockExecutionError::Validation(BlockValidationError::InvalidTx { error, .. }) => {
            error.as_invalid_tx_err()
        }
        _ => None,
    };
    let Some(invalid) = invalid else { return sim_err(code::INVALID_TX, e.to_string()) };
    match invalid {
        InvalidTransaction::NonceTooLow { tx, state } => wrap(
            code::NONCE_TOO_LOW,
            format!("nonce too low: address {from}, tx: {tx} state: {state}"),
        ),
        InvalidTransaction::NonceTooHigh { tx, state } => wrap(
            code::NONCE_TOO_HIGH,
            format!("nonce too high: address {from}, tx: {tx} state: {state}"),
        ),
        InvalidTransaction::NonceOverflowInTransaction => wrap(
            code::INTERNAL,
            format!("nonce has max value: address {from}, nonce: {}", u64::MAX),
        ),
        InvalidTransaction::GasPriceLessThanBasefee => wrap(
            code::BASE_FEE_TOO_LOW,
            format!(
                "max fee per gas less than block base fee: address {from}, maxFeePerGas: {}, \
                 baseFee: {base_fee}",
                tx.max_fee_per_gas()
            ),
        ),
        InvalidTransaction::LackOfFundForMaxFee { fee, balance } => wrap(
            code::INSUFFICIENT_FUNDS,
            format!(
                "insufficient funds for gas * price + value: address {from} have {balance} want {fee}"
            ),
        ),
        InvalidTransaction::CallGasCostMoreThanGasLimit { initial_gas, gas_limit } => wrap(
            code::INTRINSIC_GAS,
            format!("intrinsic gas too low: have {gas_limit}, want {initial_gas}"),
        ),
        InvalidTransaction::GasFloorMoreThanGasLimit { gas_floor, gas_limit } => wrap(
            code::INTRINSIC_GAS,
            format!("insufficient gas for floor data gas cost: have {gas_limit}, want {gas_floor}"),
        ),
        other => wrap(code::INVALID_TX, other.to_string()),
    }
}

/// geth's checks that come before any other with `validation` (its order: nonces first).
fn nonce_check(from: Address, tx: u64, state: u64, gas: u64) -> Result<(), RpcError> {
    let wrap =
        |code: i32, message: String| sim_err(code, format!("err: {message} (supplied gas {gas})"));
    if state == u64::MAX {
        return Err(wrap(
            code::INTERNAL,
            format!("nonce has max value: address {from}, nonce: {state}"),
        ));
    }
    match tx.cmp(&state) {
        std::cmp::Ordering::Less => Err(wrap(
            code::NONCE_TOO_LOW,
            format!("nonce too low: address {from}, tx: {tx} state: {state}"),
        )),
        std::cmp::Ordering::Greater => Err(wrap(
            code::NONCE_TOO_HIGH,
            format!("nonce too high: address {from}, tx: {tx} state: {state}"),
        )),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

impl RpcContext {
    /// `eth_simulateV1(payload, block?)`.
    pub(crate) async fn simulate_v1(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        // Parsed on the pool: a large payload must not hold up the server's threads.
        let ctx = self.clone();
        self.pool
            .run(move || {
                let (payload, block) = ctx.simulate_params(&p)?;
                ctx.simulate_blocking(payload, block)
            })
            .await
    }

    /// The payload and block of `eth_simulateV1`, within its limits: [`MAX_CALLS`] calls, and
    /// the state override limits over all its blocks' sets (`eth/override_limits.rs`).
    fn simulate_params(&self, p: &Params<'_>) -> RpcResult<(SimulatePayload, BlockRef)> {
        let what = "0 (payload.blockStateCalls[].stateOverrides)";
        self.precheck_overrides(p, RawSets::Simulate, what)?;
        let a = Args::new(p, 2)?;
        if let Some(v) = a.get(0) {
            check_simulate_payload(v)
                .map_err(|e| invalid(format!("invalid argument 0 (payload): {e}")))?;
        }
        let mut count = OverrideCount::default();
        if let Some(Value::Array(blocks)) = a.get(0).and_then(|v| v.get("blockStateCalls")) {
            for b in blocks {
                count.add(b.get("stateOverrides"));
            }
        }
        self.check_overrides(count, what)?;
        let payload: SimulatePayload = a.req(0, "payload")?;
        let block = a.block(1, "block")?;
        let calls: usize = payload.block_state_calls.iter().map(|b| b.calls.len()).sum();
        if calls > MAX_CALLS {
            return Err(sim_err(
                code::CLIENT_LIMIT,
                format!("too many calls: {calls} > {MAX_CALLS}"),
            ));
        }
        if block == BlockRef::Pending {
            return Err(invalid("pending is not supported for simulation"));
        }
        Ok((payload, block))
    }

    fn simulate_blocking(&self, payload: SimulatePayload, block: BlockRef) -> RpcResult<Raw> {
        let started = Instant::now();
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let base = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
        let planned = plan(&base.0, payload.block_state_calls)?;
        let mut state =
            State::builder().with_database_ref(r.state_at(n)?).with_bundle_update().build();
        let (mut parent, mut parent_hash) = (base.0.clone(), base.1);
        let mut out = Vec::with_capacity(planned.len());
        let mut gas_left = self.config.gas_cap;
        let timeout = self.config.call_timeout;
        let mut inspector =
            SimInspector::new(timeout.saturating_sub(started.elapsed()), payload.trace_transfers);
        for p in planned {
            if inspector.check_now() {
                let cancelled = inspector.cancelled();
                return Err(if cancelled {
                    RpcError::Cancelled
                } else {
                    RpcError::Timeout(timeout)
                });
            }
            let (header, hash, block) = self.simulate_block(
                (&r, n),
                &mut state,
                &parent,
                parent_hash,
                p,
                payload.validation,
                payload.return_full_transactions,
                &mut gas_left,
                &mut inspector,
            )?;
            state.block_hashes.insert(header.number, hash);
            out.push(block);
            (parent, parent_hash) = (header, hash);
        }
        to_value(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn simulate_block(
        &self,
        (reader, base): (&Reader, u64),
        state: &mut State<WrapDatabaseRef<StateAt>>,
        parent: &Header,
        parent_hash: B256,
        p: Planned,
        validation: bool,
        full: bool,
        gas_left: &mut u64,
        inspector: &mut SimInspector,
    ) -> RpcResult<(Header, B256, SimBlockOut)> {
        let spec = &self.spec;
        let o = p.block.block_overrides.clone().unwrap_or_default();
        let mut header = Header {
            parent_hash,
            ommers_hash: EMPTY_OMMER_ROOT_HASH,
            beneficiary: o.coinbase.unwrap_or(parent.beneficiary),
            // The parent's (zero after the merge), as geth builds it.
            difficulty: o.difficulty.unwrap_or(parent.difficulty),
            number: p.number,
            gas_limit: o.gas_limit.unwrap_or(parent.gas_limit),
            timestamp: p.timestamp,
            mix_hash: o.random.unwrap_or_default(),
            ..Default::default()
        };
        if spec.is_london_active_at_block(p.number) {
            header.base_fee_per_gas = Some(match o.base_fee {
                Some(f) => {
                    u64::try_from(f).map_err(|_| invalid("baseFeePerGas override too large"))?
                }
                None if validation => parent
                    .next_block_base_fee(BaseFeeParams::ethereum())
                    .unwrap_or(alloy_eips::eip1559::INITIAL_BASE_FEE),
                None => 0,
            });
        }
        if spec.is_shanghai_active_at_timestamp(p.timestamp) {
            header.withdrawals_root = Some(alloy_consensus::EMPTY_ROOT_HASH);
        }
        let cancun = spec.is_cancun_active_at_timestamp(p.timestamp);
        if cancun {
            header.parent_beacon_block_root = Some(o.beacon_root.unwrap_or_default());
            let excess = spec
                .blob_params_at(parent.timestamp)
                .filter(|_| spec.is_cancun_active_at_timestamp(parent.timestamp))
                .and_then(|b| parent.next_block_excess_blob_gas(b))
                .unwrap_or(0);
            header.excess_blob_gas = Some(excess);
        }
        let mut env = block_env(spec, &header);
        env.cfg_env.disable_nonce_check = !validation;
        env.cfg_env.disable_base_fee = !validation;
        env.cfg_env.disable_eip3607 = true;
        env.cfg_env.tx_gas_limit_cap = Some(u64::MAX);
        if let Some(fee) = o.blob_base_fee
            && let Some(blob) = env.block_env.blob_excess_gas_and_price.as_mut()
        {
            blob.blob_gasprice = u128::try_from(fee).unwrap_or(u128::MAX);
        }
        let mut moves = Vec::new();
        if let Some(overrides) = p.block.state_overrides.clone() {
            moves = precompile_moves_of(&overrides);
            apply_state_overrides(overrides, &mut *state).map_err(|e| invalid(e.to_string()))?;
        }

        let mut txs: Vec<TxEnvelope> = Vec::new();
        let mut senders: Vec<Address> = Vec::new();
        let mut results: Vec<SimCallResult> = Vec::new();
        let withdrawals = spec.is_shanghai_active_at_timestamp(p.timestamp).then(Vec::new);
        let (receipts, requests, gas_used, blob_gas_used) = {
            inspector.start_block();
            let mut evm =
                EthEvmFactory::default().create_evm_with_inspector(&mut *state, env, inspector);
            evm.inspector_mut().warm = move_precompiles(evm.precompiles_mut(), &moves)
                .map_err(|e| sim_err(code::INVALID_TX, e))?;
            let ctx = EthBlockExecutionCtx {
                parent_hash,
                parent_beacon_block_root: header.parent_beacon_block_root,
                ommers: &[],
                withdrawals: withdrawals.as_deref().map(Cow::Borrowed),
                extra_data: Bytes::new(),
                tx_count_hint: Some(p.block.calls.len()),
                slot_number: None,
            };
            let mut executor =
                EthBlockExecutor::new(evm, ctx, spec, AlloyReceiptBuilder::default());
            executor
                .apply_pre_execution_changes()
                .map_err(|e| RpcError::Internal(format!("system calls: {e}")))?;
            let mut used = 0u64;
            for call in &p.block.calls {
                let from = call.from.unwrap_or_default();
                let sender = executor
                    .evm_mut()
                    .db_mut()
                    .basic(from)
                    .map_err(|e| RpcError::Internal(format!("state read: {e}")))?
                    .unwrap_or_default();
                let nonce = call.nonce.unwrap_or(sender.nonce);
                let tx = self.sim_transaction(call, nonce, &header, used, gas_left)?;
                if validation {
                    nonce_check(
                        from,
                        nonce,
                        sender.nonce,
                        alloy_consensus::Transaction::gas_limit(&tx),
                    )?;
                }
                let mut tx_env = TxEnv::from_recovered_tx(&tx, from);
                if !validation {
                    // Unchecked nonces may sit at u64::MAX, which revm refuses even then.
                    tx_env.nonce = 0;
                }
                let mut result = None;
                executor
                    .execute_transaction_with_result_closure(
                        (tx_env, Recovered::new_unchecked(&tx, from)),
                        |r| {
                            result = Some(r.result.result.clone());
                        },
                    )
                    .map_err(|e| tx_error(e, from, &tx, header.base_fee_per_gas.unwrap_or(0)))?;
                if !validation && sender.nonce == u64::MAX {
                    // geth's unchecked nonce wraps to 0; revm's stays at the maximum.
                    wrap_nonce(executor.evm_mut().db_mut(), from)?;
                }
                if executor.evm().inspector().cancelled() {
                    return Err(RpcError::Cancelled);
                }
                if executor.evm().inspector().expired() {
                    return Err(RpcError::Timeout(self.config.call_timeout));
                }
                let result = result.ok_or_else(|| RpcError::Internal("no result".into()))?;
                let tx_gas = result.tx_gas_used();
                used += tx_gas;
                *gas_left = gas_left.saturating_sub(tx_gas);
                let mut res = call_result(&result);
                if let Some(logs) = executor.evm_mut().inspector_mut().take_logs() {
                    res.logs = logs
                        .into_iter()
                        .map(|(i, inner)| Log { inner, log_index: Some(i), ..Default::default() })
                        .collect();
                }
                results.push(res);
                txs.push(tx);
                senders.push(from);
            }
            let (_evm, result) =
                executor.finish().map_err(|e| RpcError::Internal(format!("block end: {e}")))?;
            (result.receipts, result.requests, result.gas_used, result.blob_gas_used)
        };
        header.gas_used = gas_used;
        if cancun {
            header.blob_gas_used = Some(blob_gas_used);
        }
        if spec.is_prague_active_at_timestamp(p.timestamp) {
            header.requests_hash = Some(if requests.is_empty() {
                EMPTY_REQUESTS_HASH
            } else {
                requests.requests_hash()
            });
        }
        header.transactions_root = calculate_transaction_root(&txs);
        let with_bloom: Vec<_> = receipts.iter().map(ReceiptEnvelope::clone).collect();
        header.receipts_root = calculate_receipt_root(&with_bloom);
        header.logs_bloom = receipts.iter().fold(Bloom::ZERO, |acc, r| acc | r.bloom());
        state.merge_transitions(BundleRetention::PlainState);
        header.state_root = overlay_state_root(reader, base, &state.bundle_state)?;
        let hash = header.hash_slow();

        // Logs carry their block, transaction and index.
        let mut log_index = 0u64;
        for (i, (res, tx)) in results.iter_mut().zip(&txs).enumerate() {
            for l in &mut res.logs {
                l.block_hash = Some(hash);
                l.block_number = Some(header.number);
                l.block_timestamp = Some(header.timestamp);
                l.transaction_hash = Some(*tx.tx_hash());
                l.transaction_index = Some(i as u64);
                // Traced transfers come numbered; other logs are numbered in order.
                l.log_index = Some(l.log_index.unwrap_or(log_index));
                log_index += 1;
            }
        }
        let stored: Vec<crate::storage::StoredTransaction> = txs
            .iter()
            .zip(&senders)
            .enumerate()
            .map(|(i, (tx, sender))| crate::storage::StoredTransaction {
                sender: *sender,
                tx: tx.clone(),
                block: header.number,
                index: i as u32,
            })
            .collect();
        let body = BlockBody {
            transactions: Vec::new(),
            ommers: Vec::new(),
            withdrawals: withdrawals.map(Into::into),
        };
        let block = rpc_block(header.clone(), hash, body, BlockTxs::of(stored, full));
        Ok((header, hash, SimulatedBlock { inner: block, calls: results }))
    }

    /// The transaction a call stands for (unsigned: zero signature), with geth's defaults.
    fn sim_transaction(
        &self,
        call: &TransactionRequest,
        nonce: u64,
        header: &Header,
        used: u64,
        gas_left: &u64,
    ) -> RpcResult<TxEnvelope> {
        let mut req = call.clone();
        req.nonce = Some(nonce);
        let remaining = header.gas_limit.saturating_sub(used);
        req.gas = Some(match req.gas {
            Some(g) => g.min(*gas_left),
            None => remaining.min(*gas_left),
        });
        match req.chain_id {
            Some(id) if id != self.spec.chain_id() => {
                return Err(sim_err(
                    code::INVALID_TX,
                    format!(
                        "chainId does not match node's (have={id}, want={})",
                        self.spec.chain_id()
                    ),
                ));
            }
            _ => req.chain_id = Some(self.spec.chain_id()),
        }
        if req.to.is_none() {
            req.to = Some(alloy_primitives::TxKind::Create);
        }
        let legacy_priced = req.gas_price.is_some();
        if header.base_fee_per_gas.is_none() || legacy_priced {
            req.gas_price.get_or_insert(0);
        } else {
            req.max_fee_per_gas.get_or_insert(0);
            req.max_priority_fee_per_gas.get_or_insert(0);
        }
        if req.blob_versioned_hashes.is_some() {
            req.max_fee_per_blob_gas.get_or_insert(0);
        }
        if req.input.input().is_none() {
            req.input = alloy_rpc_types_eth::TransactionInput::new(Bytes::new());
        }
        let sig = Signature::new(U256::ZERO, U256::ZERO, false);
        // A blob call carries hashes, never the blobs: a type-3 transaction without sidecar.
        if req.blob_versioned_hashes.is_some() && req.sidecar.is_none() {
            let t = req.build_4844_without_sidecar().map_err(|e| invalid(e.to_string()))?;
            return Ok(TxEnvelope::Eip4844(t.into_signed(sig).convert()));
        }
        let typed = req
            .build_typed_tx()
            .map_err(|_| invalid("the call object does not make a transaction of any type"))?;
        Ok(match typed {
            alloy_consensus::TypedTransaction::Legacy(t) => t.into_signed(sig).into(),
            alloy_consensus::TypedTransaction::Eip2930(t) => t.into_signed(sig).into(),
            alloy_consensus::TypedTransaction::Eip1559(t) => t.into_signed(sig).into(),
            alloy_consensus::TypedTransaction::Eip4844(t) => {
                let t: alloy_consensus::TxEip4844 = t.into();
                TxEnvelope::Eip4844(t.into_signed(sig).convert())
            }
            alloy_consensus::TypedTransaction::Eip7702(t) => t.into_signed(sig).into(),
        })
    }
}

/// A call's outcome in geth's shape: output on success; on failure, `0x` and an error object
/// (code 3 with the revert data, or -32015 with the halt).
fn call_result(result: &ExecutionResult) -> SimCallResult {
    let gas = result.gas();
    let mut out = SimCallResult {
        gas_used: result.tx_gas_used(),
        // Before refunds, but never below the EIP-7623 calldata floor (as geth counts it).
        max_used_gas: Some(gas.total_gas_spent().max(result.tx_gas_used())),
        status: result.is_success(),
        // A failed call keeps no logs (its receipt has none either).
        logs: if result.is_success() { result.logs() } else { &[] }
            .iter()
            .map(|l| Log { inner: l.clone(), ..Default::default() })
            .collect(),
        ..Default::default()
    };
    match result {
        ExecutionResult::Success { output, .. } => out.return_data = output.data().clone(),
        ExecutionResult::Revert { output, .. } => {
            let reason = revert_reason(output);
            out.error = Some(SimulateError {
                code: code::REVERTED,
                message: match reason {
                    Some(r) => format!("execution reverted: {r}"),
                    None => "execution reverted".into(),
                },
                data: Some(output.clone()),
            });
        }
        ExecutionResult::Halt { reason, .. } => {
            out.error = Some(SimulateError {
                code: code::VM_ERROR,
                message: halt_message(reason),
                data: None,
            });
        }
    }
    out
}

/// Sets `address`'s nonce to 0 (after a transaction at nonce u64::MAX without validation).
fn wrap_nonce(db: &mut State<WrapDatabaseRef<StateAt>>, address: Address) -> RpcResult<()> {
    let info = db
        .basic(address)
        .map_err(|e| RpcError::Internal(format!("state read: {e}")))?
        .unwrap_or_default();
    let mut account = revm::state::Account::from(info);
    account.info.nonce = 0;
    account.mark_touch();
    db.commit(std::iter::once((address, account)).collect());
    Ok(())
}
