//! The Parity trace namespace over stored blocks: `trace_replayTransaction`,
//! `trace_replayBlockTransactions`, `trace_transaction`, `trace_get`, `trace_block` and
//! `trace_filter`.
//!
//! A transaction replays on the state after the previous transaction of its block, with that
//! block's environment and system calls ([`RpcContext::replay_stored`]), so its gas and effects
//! are those it had when mined. Output follows `trace_call`'s rules (`behaviour.md` §3.3).
//! Pre-merge blocks end with `reward` traces for the block's author and each ommer's, as
//! OpenEthereum gives them. Every method runs on the tracing pool under one deadline.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_consensus::TxEnvelope;
use alloy_eips::BlockNumHash;
use alloy_evm::block::calc::{base_block_reward, block_reward, ommer_reward};
use alloy_primitives::map::HashSet;
use alloy_primitives::{B256, U256};
use alloy_rpc_types_eth::TransactionInfo;
use alloy_rpc_types_trace::filter::{TraceFilter, TraceFilterMode};
use alloy_rpc_types_trace::parity::{
    LocalizedTransactionTrace, RewardAction, RewardType, TraceResults,
    TraceResultsWithTransactionHash, TraceType,
};
use jsonrpsee::types::Params;
use revm::primitives::hardfork::SpecId;
use revm_inspectors::tracing::{TracingInspector, TracingInspectorConfig};
use serde_json::Value;

use crate::evm::block_env;
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, block_ref, invalid};
use crate::rpc::server::budget::check;
use crate::rpc::stored_replay::StoredBlock;
use crate::rpc::trace::trace_call::normalize;
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::Reader;

impl RpcContext {
    /// `trace_replayTransaction(txHash, traceTypes)`.
    pub(crate) async fn trace_replay_transaction(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash = a.hash(0, "txHash")?;
        let types = self.trace_types(&a, 1)?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let Some((block, index)) = ctx.locate(&r, &hash)? else {
                    return Err(RpcError::NotTraceable(format!("transaction {hash} not found")));
                };
                let i = index as usize;
                let mut out = ctx.replay_results(&r, &block, i..i + 1, &types)?;
                let results = out.pop().ok_or_else(|| {
                    RpcError::Internal(format!("transaction {hash} missing from its block"))
                })?;
                crate::rpc::trace::json::trace_results(&results.full_trace)
            })
            .await
    }

    /// `trace_replayBlockTransactions(block, traceTypes)`.
    pub(crate) async fn trace_replay_block_transactions(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let block = a.block_req(0, "block")?;
        let types = self.trace_types(&a, 1)?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let Some(n) = ctx.resolve_traceable(&r, block)? else { return to_value(()) };
                let b = ctx.stored_block(&r, n)?;
                if n == 0 {
                    return to_value(Vec::<TraceResultsWithTransactionHash>::new());
                }
                to_value(ctx.replay_results(&r, &b, 0..b.transactions.len(), &types)?)
            })
            .await
    }

    /// `trace_transaction(txHash)`: the transaction's traces, localized.
    pub(crate) async fn trace_transaction(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash = a.hash(0, "txHash")?;
        let ctx = self.clone();
        self.pool.run(move || to_value(ctx.transaction_traces(&hash)?)).await
    }

    /// `trace_get(txHash, [index])`: entry `index` of `trace_transaction` (`null` if absent, or
    /// if the list does not hold exactly one index).
    pub(crate) async fn trace_get(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash = a.hash(0, "txHash")?;
        let indices: Vec<Value> = a.req(1, "indices")?;
        let indices = indices
            .iter()
            .map(crate::rpc::request::params::quantity)
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|e| invalid(format!("invalid argument 1 (indices): {e}")))?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let [index] = indices[..] else { return to_value(()) };
                let traces = ctx.transaction_traces(&hash)?;
                match traces
                    .and_then(|t| usize::try_from(index).ok().and_then(|i| t.into_iter().nth(i)))
                {
                    Some(trace) => to_value(trace),
                    None => to_value(()),
                }
            })
            .await
    }

    /// `trace_block(block)`: every transaction's localized traces in order, then the rewards.
    pub(crate) async fn trace_block(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let block = a.block_req(0, "block")?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let Some(n) = ctx.resolve_traceable(&r, block)? else { return to_value(()) };
                let b = ctx.stored_block(&r, n)?;
                to_value(ctx.block_traces(&r, &b, ctx.config.call_timeout)?)
            })
            .await
    }

    /// `trace_filter(filter)`.
    pub(crate) async fn trace_filter(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let mut raw: serde_json::Map<String, Value> = a.req(0, "filter")?;
        // Block bounds take tags too (`latest`, …), which alloy's filter type does not.
        let from = raw.remove("fromBlock");
        let to = raw.remove("toBlock");
        let filter: TraceFilter = serde_json::from_value(Value::Object(raw))
            .map_err(|e| invalid(format!("invalid argument 0 (filter): {e}")))?;
        // `pending` is refused as by every trace method (behaviour.md §3.1): this node builds
        // no pending block to trace.
        let bound = |v: Option<Value>, name: &str, default: BlockRef| match v {
            None | Some(Value::Null) => Ok(default),
            Some(v) => match block_ref(&v, false) {
                Ok(BlockRef::Pending) => Err(invalid(format!(
                    "invalid argument 0 (filter.{name}): pending is not supported for tracing"
                ))),
                Ok(b) => Ok(b),
                Err(e) => Err(invalid(format!("invalid argument 0 (filter.{name}): {e}"))),
            },
        };
        let from = bound(from, "fromBlock", BlockRef::Earliest)?;
        let to = bound(to, "toBlock", BlockRef::Latest)?;
        let max = self.config.max_filter_addresses;
        for (name, list) in
            [("fromAddress", &filter.from_address), ("toAddress", &filter.to_address)]
        {
            if list.len() > max {
                return Err(invalid(format!(
                    "invalid argument 0 (filter.{name}): {} addresses, over the limit of {max} \
                     (--rpc.max-filter-addresses)",
                    list.len()
                )));
            }
        }
        let ctx = self.clone();
        self.pool.run(move || ctx.filter_traces(from, to, &filter)).await
    }

    /// The block a trace method names, `None` if it is not stored (the answer is `null`).
    fn resolve_traceable(&self, r: &Reader, block: BlockRef) -> RpcResult<Option<u64>> {
        if block == BlockRef::Pending {
            return Err(invalid("pending is not supported for tracing"));
        }
        match self.resolve(r, block) {
            Ok(n) => Ok(n),
            Err(RpcError::HeaderNotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The block holding transaction `hash`, and its index there.
    fn locate(&self, r: &Reader, hash: &B256) -> RpcResult<Option<(StoredBlock, u32)>> {
        let Some((n, index)) = r.transaction_location(hash)? else { return Ok(None) };
        Ok(Some((self.stored_block(r, n)?, index)))
    }

    /// `trace_transaction`'s answer; `None` for an unknown transaction.
    fn transaction_traces(&self, hash: &B256) -> RpcResult<Option<Vec<LocalizedTransactionTrace>>> {
        let r = self.db.begin_read()?;
        let Some((block, index)) = self.locate(&r, hash)? else { return Ok(None) };
        let i = index as usize;
        let mut out = self.localized(&r, &block, i..i + 1, self.config.call_timeout)?;
        Ok(out.pop())
    }

    /// `trace_block`'s answer for a stored block.
    pub(crate) fn block_traces(
        &self,
        r: &Reader,
        b: &StoredBlock,
        timeout: Duration,
    ) -> RpcResult<Vec<LocalizedTransactionTrace>> {
        let mut out: Vec<LocalizedTransactionTrace> = if b.number() == 0 {
            Vec::new()
        } else {
            self.localized(r, b, 0..b.transactions.len(), timeout)?.into_iter().flatten().collect()
        };
        out.extend(self.rewards(b));
        Ok(out)
    }

    /// The localized traces of transactions `range` of a block, one list per transaction.
    fn localized(
        &self,
        r: &Reader,
        b: &StoredBlock,
        range: std::ops::Range<usize>,
        timeout: Duration,
    ) -> RpcResult<Vec<Vec<LocalizedTransactionTrace>>> {
        let config = TracingInspectorConfig::default_parity();
        let make = || TracingInspector::new(config);
        self.replay_stored_par(r, b, range, make, timeout, |t| {
            let tx: &TxEnvelope = &b.transactions[t.index];
            let info = TransactionInfo {
                hash: Some(*tx.tx_hash()),
                index: Some(t.index as u64),
                block_hash: Some(b.hash),
                block_number: Some(b.number()),
                base_fee: b.header.base_fee_per_gas,
                block_timestamp: Some(b.header.timestamp),
            };
            let used = std::mem::replace(t.inspector, TracingInspector::new(config));
            Ok(used.into_parity_builder().into_localized_transaction_traces(info))
        })
    }

    /// Full trace results (`trace`, `stateDiff`, `vmTrace` as asked) of transactions `range`.
    fn replay_results(
        &self,
        r: &Reader,
        b: &StoredBlock,
        range: std::ops::Range<usize>,
        types: &HashSet<TraceType>,
    ) -> RpcResult<Vec<TraceResultsWithTransactionHash>> {
        let config = TracingInspectorConfig::from_parity_config(types);
        let spec: SpecId = block_env(&self.spec, &b.header).cfg_env.spec;
        let make = || TracingInspector::new(config);
        self.replay_stored_par(r, b, range, make, self.config.call_timeout, |t| {
            let used = std::mem::replace(t.inspector, TracingInspector::new(config));
            let results: TraceResults = used
                .into_parity_builder()
                .into_trace_results_with_state(t.result, types, t.state)
                .map_err(|e| RpcError::Internal(format!("state diff: {e}")))?;
            let full_trace = normalize(results, &t.result.state, t.state, spec)?;
            let transaction_hash = *b.transactions[t.index].tx_hash();
            Ok(TraceResultsWithTransactionHash { full_trace, transaction_hash })
        })
    }

    /// The reward traces of a pre-merge block: its author's (base reward plus 1/32 per ommer),
    /// then each ommer's author's, as OpenEthereum lists them. None after the merge.
    fn rewards(&self, b: &StoredBlock) -> Vec<LocalizedTransactionTrace> {
        let n = b.number();
        let Some(base) = base_block_reward(&self.spec, n) else { return Vec::new() };
        if n == 0 {
            return Vec::new();
        }
        let at = BlockNumHash::new(n, b.hash);
        let mut out = vec![
            RewardAction {
                author: b.header.beneficiary,
                reward_type: RewardType::Block,
                value: U256::from(block_reward(base, b.ommers.len())),
            }
            .into_localized_trace(at),
        ];
        for ommer in &b.ommers {
            out.push(
                RewardAction {
                    author: ommer.beneficiary,
                    reward_type: RewardType::Uncle,
                    value: U256::from(ommer_reward(base, n, ommer.number)),
                }
                .into_localized_trace(at),
            );
        }
        out
    }

    /// `trace_filter` over `from..=to`: only the blocks that may match are replayed.
    fn filter_traces(&self, from: BlockRef, to: BlockRef, filter: &TraceFilter) -> RpcResult<Raw> {
        let r = self.db.begin_read()?;
        let from = self.resolve_required(&r, from)?;
        let to = self.resolve_required(&r, to)?;
        if from > to {
            return Err(invalid(format!(
                "invalid argument 0 (filter): fromBlock {from} is after toBlock {to}"
            )));
        }
        let span = to - from + 1;
        if span > self.config.max_trace_filter_range {
            return Err(RpcError::Limit(format!(
                "trace_filter range of {span} blocks is over the limit of {} \
                 (--trace.max-filter-range)",
                self.config.max_trace_filter_range
            )));
        }
        let matcher = filter.matcher();
        let mut skip = filter.after.unwrap_or(0);
        let want = filter.count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
        let cap = self.config.max_trace_filter_results;
        let mut out = Vec::new();
        // One deadline for the whole filter.
        let started = Instant::now();
        let timeout = self.config.call_timeout;
        for n in candidate_blocks(&r, filter, from, to)? {
            if out.len() >= want {
                break;
            }
            // Stops once the client is gone (`server/budget.rs`).
            check()?;
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(RpcError::Timeout(timeout));
            }
            let b = self.stored_block(&r, n)?;
            if b.transactions.is_empty() && base_block_reward(&self.spec, n).is_none() {
                continue;
            }
            for trace in self.block_traces(&r, &b, left)? {
                if !matcher.matches(&trace.trace) {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                if out.len() >= want {
                    break;
                }
                if out.len() >= cap {
                    return Err(RpcError::Limit(format!(
                        "trace_filter matched more than {cap} traces (--trace.max-filter-results); \
                         narrow the range or the addresses, or page with after and count"
                    )));
                }
                out.push(trace);
            }
        }
        to_value(out)
    }
}

/// The blocks of `from..=to` that can hold a trace matching `filter`: with addresses, those the
/// trace-address index lists for them (every block before the index starts, too); without,
/// all. Both sets given in intersection mode: blocks touching one of each.
fn candidate_blocks(r: &Reader, filter: &TraceFilter, from: u64, to: u64) -> RpcResult<Vec<u64>> {
    if filter.from_address.is_empty() && filter.to_address.is_empty() {
        return Ok((from..=to).collect());
    }
    let indexed = r.trace_index_from()?.unwrap_or(u64::MAX).max(from);
    let touching = |addresses: &[alloy_primitives::Address]| -> RpcResult<BTreeSet<u64>> {
        let mut set = BTreeSet::new();
        if indexed <= to {
            for a in addresses {
                check()?;
                set.extend(r.blocks_touching(a, indexed, to)?);
            }
        }
        Ok(set)
    };
    let both = !filter.from_address.is_empty() && !filter.to_address.is_empty();
    let mut blocks: BTreeSet<u64> = if both && filter.mode == TraceFilterMode::Intersection {
        let f = touching(&filter.from_address)?;
        let t = touching(&filter.to_address)?;
        f.intersection(&t).copied().collect()
    } else {
        let mut all = filter.from_address.clone();
        all.extend(&filter.to_address);
        touching(&all)?
    };
    blocks.extend(from..indexed.min(to.saturating_add(1)));
    Ok(blocks.into_iter().collect())
}
