//! Stored blocks replayed for the tracers (`debug_trace*`, `trace_*`): a block loaded with its
//! transactions and ommers, and [`crate::evm::replay_block`] run on its parent's state with
//! errors mapped once.

use std::ops::Range;
use std::time::Duration;

use alloy_consensus::transaction::Recovered;
use alloy_consensus::{Header, TxEnvelope};
use alloy_evm::eth::EthEvmContext;
use alloy_primitives::B256;
use revm::Inspector;

use crate::evm::{ReplayBlock, ReplayError, ReplayState, Traced, replay_block};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::{Reader, StateAt};

/// A stored block as a replay needs it.
#[derive(Debug)]
pub(crate) struct StoredBlock {
    /// Its header.
    pub(crate) header: Header,
    /// Its hash.
    pub(crate) hash: B256,
    /// Its transactions with their senders.
    pub(crate) transactions: Vec<Recovered<TxEnvelope>>,
    /// Its ommers' headers (rewards of pre-merge blocks).
    pub(crate) ommers: Vec<Header>,
}

impl StoredBlock {
    /// The block's number.
    pub(crate) fn number(&self) -> u64 {
        self.header.number
    }
}

/// Cost of executing a transaction untraced, relative to tracing it (measured: BENCHMARKS.md,
/// "Parallel block replay"); sets where a split block's parts start.
const UNTRACED_COST: f64 = 0.7;
/// Fewest traced transactions worth splitting across threads.
const SPLIT_MIN: usize = 64;

/// Splits `range` into at most `parts` consecutive ranges of equal cost, where a part starting
/// `x` transactions into the range first executes those `x` untraced. With `e` the untraced
/// cost, part k starts at `x_k = C (1 - (1 - e)^k) / e` for the common cost
/// `C = n e / (1 - (1 - e)^parts)`.
fn split(range: &Range<usize>, parts: usize) -> Vec<Range<usize>> {
    let n = range.len() as f64;
    let keep = 1.0 - UNTRACED_COST;
    let cost = n * UNTRACED_COST / (1.0 - keep.powi(parts as i32));
    let mut out = Vec::with_capacity(parts);
    let mut start = range.start;
    for k in 1..parts {
        let x = (cost * (1.0 - keep.powi(k as i32)) / UNTRACED_COST).round() as usize;
        let end = (range.start + x).clamp(start, range.end);
        if end > start {
            out.push(start..end);
            start = end;
        }
    }
    if start < range.end || out.is_empty() {
        out.push(start..range.end);
    }
    out
}

impl RpcContext {
    /// Block `n` with its transactions and ommers.
    pub(crate) fn stored_block(&self, r: &Reader, n: u64) -> RpcResult<StoredBlock> {
        let entry = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
        let transactions = r
            .transactions_to_execute(n)?
            .into_iter()
            .map(|t| Recovered::new_unchecked(t.tx, t.sender))
            .collect();
        let ommers = r.body(n)?.map(|(body, _)| body.ommers).unwrap_or_default();
        Ok(StoredBlock { header: entry.0.clone(), hash: entry.1, transactions, ommers })
    }

    /// Replays `block` on its parent's state, `on_traced` called for each transaction in
    /// `traced` (run with `inspector`), all under one `timeout`. The genesis block has no
    /// parent: it is refused here (callers that treat it as empty check first).
    pub(crate) fn replay_stored<I, T>(
        &self,
        r: &Reader,
        block: &StoredBlock,
        traced: Range<usize>,
        inspector: &mut I,
        timeout: Duration,
        on_traced: impl FnMut(Traced<'_, I, StateAt>) -> RpcResult<T>,
    ) -> RpcResult<Vec<T>>
    where
        I: for<'s> Inspector<EthEvmContext<&'s mut ReplayState<StateAt>>>,
    {
        let n = block.number();
        if n == 0 {
            return Err(RpcError::NotTraceable("genesis is not traceable".into()));
        }
        let replay = ReplayBlock { header: &block.header, transactions: &block.transactions };
        let state = r.state_at(n - 1)?;
        let out = replay_block(&self.spec, state, replay, traced, inspector, timeout, on_traced)
            .map_err(|e| match e {
                ReplayError::Timeout(d) => RpcError::Timeout(d),
                ReplayError::Cancelled => RpcError::Cancelled,
                other => RpcError::Internal(format!("replay of block {n}: {other}")),
            })?;
        out.into_iter().collect()
    }
}

impl RpcContext {
    /// [`Self::replay_stored`] split across idle worker cores when the block is big enough: each
    /// part runs on its own thread, first executing the transactions before it untraced. One
    /// core when the pool is busy (the split's untraced prefixes would cost throughput).
    pub(crate) fn replay_stored_par<I, T>(
        &self,
        r: &Reader,
        block: &StoredBlock,
        traced: Range<usize>,
        make: impl Fn() -> I + Sync,
        timeout: Duration,
        on_traced: impl Fn(Traced<'_, I, StateAt>) -> RpcResult<T> + Sync,
    ) -> RpcResult<Vec<T>>
    where
        I: for<'s> Inspector<EthEvmContext<&'s mut ReplayState<StateAt>>>,
        T: Send,
    {
        let traced = traced.start..traced.end.min(block.transactions.len());
        let parts = (self.pool.idle_workers() + 1).min(traced.len() / SPLIT_MIN).max(1);
        if parts == 1 {
            return self.replay_stored(r, block, traced, &mut make(), timeout, &on_traced);
        }
        let ranges = split(&traced, parts);
        // The parts stop with the call: its deadline and its client's leaving hold for them.
        let budget = crate::rpc::server::budget::current();
        let results: Vec<RpcResult<Vec<T>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ranges[1..]
                .iter()
                .map(|range| {
                    let (make, on_traced, budget) = (&make, &on_traced, budget.clone());
                    scope.spawn(move || {
                        let _budget = budget.map(|b| b.install());
                        self.replay_stored(r, block, range.clone(), &mut make(), timeout, on_traced)
                    })
                })
                .collect();
            let first =
                self.replay_stored(r, block, ranges[0].clone(), &mut make(), timeout, &on_traced);
            std::iter::once(first)
                .chain(handles.into_iter().map(|h| {
                    h.join().unwrap_or_else(|p| {
                        Err(RpcError::Internal(format!(
                            "panic in a replay thread: {}",
                            crate::rpc::server::pool::panic_message(&p)
                        )))
                    })
                }))
                .collect()
        });
        let mut out = Vec::with_capacity(traced.len());
        for part in results {
            out.extend(part?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_cover_the_range_in_order_at_equal_cost() {
        for (range, parts) in [(0..20, 2), (0..100, 3), (5..9, 4), (0..1, 2), (3..40, 2)] {
            let got = split(&range, parts);
            assert!(!got.is_empty() && got.len() <= parts, "{got:?}");
            assert_eq!(got.first().unwrap().start, range.start);
            assert_eq!(got.last().unwrap().end, range.end);
            for w in got.windows(2) {
                assert_eq!(w[0].end, w[1].start, "{got:?}");
            }
            // Each part's cost: its untraced prefix (within the range) plus what it traces.
            let costs: Vec<f64> = got
                .iter()
                .map(|p| super::UNTRACED_COST * (p.start - range.start) as f64 + p.len() as f64)
                .collect();
            let spread = costs.iter().cloned().fold(f64::MIN, f64::max)
                - costs.iter().cloned().fold(f64::MAX, f64::min);
            assert!(spread <= 1.0 + super::UNTRACED_COST, "{got:?} {costs:?}");
        }
    }
}
