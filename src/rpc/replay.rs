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

use super::{RpcContext, RpcError, RpcResult};
use crate::evm::{ReplayBlock, ReplayError, ReplayState, Traced, replay_block};
use crate::storage::{Reader, StateAt};

/// A stored block as a replay needs it.
#[derive(Debug)]
pub(super) struct StoredBlock {
    /// Its header.
    pub(super) header: Header,
    /// Its hash.
    pub(super) hash: B256,
    /// Its transactions with their senders.
    pub(super) transactions: Vec<Recovered<TxEnvelope>>,
    /// Its ommers' headers (rewards of pre-merge blocks).
    pub(super) ommers: Vec<Header>,
}

impl StoredBlock {
    /// The block's number.
    pub(super) fn number(&self) -> u64 {
        self.header.number
    }
}

impl RpcContext {
    /// Block `n` with its transactions and ommers.
    pub(super) fn stored_block(&self, r: &Reader, n: u64) -> RpcResult<StoredBlock> {
        let entry = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
        let transactions = r
            .transactions(n)?
            .into_iter()
            .map(|t| Recovered::new_unchecked(t.tx, t.sender))
            .collect();
        let ommers = r.body(n)?.map(|(body, _)| body.ommers).unwrap_or_default();
        Ok(StoredBlock { header: entry.0.clone(), hash: entry.1, transactions, ommers })
    }

    /// Replays `block` on its parent's state, `on_traced` called for each transaction in
    /// `traced` (run with `inspector`), all under one `timeout`. The genesis block has no
    /// parent: it is refused here (callers that treat it as empty check first).
    pub(super) fn replay_stored<I, T>(
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
                other => RpcError::Internal(format!("replay of block {n}: {other}")),
            })?;
        out.into_iter().collect()
    }
}
