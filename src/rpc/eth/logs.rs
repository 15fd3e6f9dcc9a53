//! `eth_getLogs` and the polling filters (`eth_newFilter`, `eth_newBlockFilter`,
//! `eth_getFilterChanges`, `eth_getFilterLogs`, `eth_uninstallFilter`).
//!
//! A range query reads each block's header and checks its logs bloom; only blocks whose bloom
//! may match have their receipts (and, when a log matches, their transactions) read. Limits:
//! `--rpc.max-logs-range` blocks per query and `--rpc.max-logs` results, each refused with
//! -32005 and a message naming the flag. Filters live in memory: at most
//! [`RpcConfig::max_filters`](crate::rpc::RpcConfig), of which at most
//! [`RpcConfig::max_filters_per_ip`](crate::rpc::RpcConfig) installed by one client, each
//! dropped after
//! [`RpcConfig::filter_idle`](crate::rpc::RpcConfig) without a poll.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use alloy_primitives::{B256, U128};
use alloy_rpc_types_eth::Log;
use jsonrpsee::types::Params;
use serde_json::Value;

use crate::rpc::eth::convert::block_logs;
use crate::rpc::eth::filters::{
    FilterKind, FilterLimits, FilterQuery, Installed, LogFilter, REMEMBERED, Scope, parse_query,
};
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
use crate::rpc::server::budget::check;
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::Reader;

impl RpcContext {
    /// The limits of a log filter's lists.
    pub(crate) fn filter_limits(&self) -> FilterLimits {
        FilterLimits {
            addresses: self.config.max_filter_addresses,
            topics: self.config.max_filter_topics,
        }
    }

    /// The inclusive block range of a range scope, checked against the head and the limit.
    fn logs_range(&self, r: &Reader, from: BlockRef, to: BlockRef) -> RpcResult<(u64, u64)> {
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let resolve = |b: BlockRef| -> RpcResult<u64> {
            match b {
                BlockRef::Number(n) if n > head => {
                    Err(invalid("block range extends beyond current head block"))
                }
                b => self.resolve_required(r, b),
            }
        };
        let (from, to) = (resolve(from)?, resolve(to)?);
        if from > to {
            return Err(invalid("invalid block range params"));
        }
        let max = self.config.max_logs_range;
        if to - from >= max {
            return Err(RpcError::Limit(format!(
                "query covers {} blocks, over the limit of {max} (--rpc.max-logs-range)",
                to - from + 1
            )));
        }
        Ok((from, to))
    }

    /// Matching logs of blocks `from..=to`, in order; over `--rpc.max-logs` is an error.
    fn collect_logs(&self, r: &Reader, f: &LogFilter, from: u64, to: u64) -> RpcResult<Vec<Log>> {
        let mut out = Vec::new();
        // The least the answer's JSON takes so far: past the response limit it is refused
        // now, not once the whole list is built.
        let mut least = 0u64;
        let max_response = u64::from(self.config.max_response_body);
        for n in from..=to {
            // Stops once the client is gone or the deadline passed (`server/budget.rs`).
            check()?;
            let entry = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
            let before = out.len();
            self.block_matches(r, f, &entry.0, entry.1, &mut out)?;
            least += out[before..].iter().map(least_json).sum::<u64>();
            if least > max_response {
                return Err(RpcError::ResponseTooLarge(self.config.max_response_body));
            }
            if out.len() > self.config.max_logs {
                return Err(RpcError::Limit(format!(
                    "query returned more than {} results (--rpc.max-logs); the range {from:#x}-{:#x} \
                     is within the limit",
                    self.config.max_logs,
                    n.saturating_sub(1).max(from)
                )));
            }
        }
        Ok(out)
    }

    pub(crate) fn block_matches(
        &self,
        r: &Reader,
        f: &LogFilter,
        header: &alloy_consensus::Header,
        hash: B256,
        out: &mut Vec<Log>,
    ) -> RpcResult<()> {
        if !f.may_match(&header.logs_bloom) {
            return Ok(());
        }
        let found =
            r.logs_matching(header.number, &|a, t| f.matches_parts(a, t))?.unwrap_or_default();
        // Only the transactions with a matching log are read (for their hashes).
        let tx_hash = |index| match r.transaction(header.number, index)? {
            Some(tx) => Ok(*tx.tx.tx_hash()),
            None => Err(RpcError::Internal(format!(
                "block {} has a receipt {index} but no transaction {index}",
                header.number
            ))),
        };
        out.extend(block_logs(header, hash, found, tx_hash)?);
        Ok(())
    }

    fn query_logs(&self, r: &Reader, q: &FilterQuery) -> RpcResult<Vec<Log>> {
        match q.scope {
            Scope::Hash(h) => {
                let n = r
                    .block_number(&h)?
                    .ok_or_else(|| RpcError::Execution(format!("unknown block {h}")))?;
                let entry = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
                let mut out = Vec::new();
                self.block_matches(r, &q.filter, &entry.0, entry.1, &mut out)?;
                Ok(out)
            }
            Scope::Range { from, to } => {
                let (from, to) = self.logs_range(r, from, to)?;
                self.collect_logs(r, &q.filter, from, to)
            }
        }
    }

    /// `eth_getLogs(filter)`.
    pub(crate) fn get_logs(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let q = parse_query(&a, 0, self.filter_limits())?;
        let r = self.db.begin_read()?;
        to_value(self.query_logs(&r, &q)?)
    }

    fn install(&self, kind: FilterKind) -> RpcResult<Raw> {
        let r = self.db.begin_read()?;
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let hash = r.canonical_hash(head)?.unwrap_or_default();
        let mut map = self.lock_filters()?;
        self.expire(&mut map);
        if map.len() >= self.config.max_filters {
            return Err(RpcError::Limit(format!(
                "too many installed filters (limit {}, --rpc.max-filters); uninstall some or let \
                 idle ones expire",
                self.config.max_filters
            )));
        }
        let owner = crate::rpc::server::client::current();
        let per_ip = self.config.max_filters_per_ip;
        if owner.is_some() && map.values().filter(|f| f.owner == owner).count() >= per_ip {
            return Err(RpcError::Limit(format!(
                "too many filters installed by this client (limit {per_ip}, \
                 --rpc.max-filters-per-ip); uninstall some or let idle ones expire"
            )));
        }
        let id = self.filters.new_id();
        let recent = VecDeque::from([(head, hash)]);
        let polled = Instant::now();
        map.insert(id, Installed { kind, next: head + 1, recent, polled, owner });
        to_value(id)
    }

    fn lock_filters(&self) -> RpcResult<std::sync::MutexGuard<'_, HashMap<U128, Installed>>> {
        self.filters.map.lock().map_err(|_| RpcError::Internal("filter table poisoned".into()))
    }

    fn expire(&self, map: &mut HashMap<U128, Installed>) {
        let idle = self.config.filter_idle;
        map.retain(|_, f| f.polled.elapsed() < idle);
    }

    /// `eth_newFilter(filter)`: logs of blocks added after installation, by polling.
    pub(crate) fn new_filter(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let q = parse_query(&a, 0, self.filter_limits())?;
        self.install(FilterKind::Logs(q))
    }

    /// `eth_newBlockFilter()`: hashes of blocks added after installation, by polling.
    pub(crate) fn new_block_filter(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        self.install(FilterKind::Blocks)
    }

    /// `eth_uninstallFilter(id)`: `true` if the filter existed.
    pub(crate) fn uninstall_filter(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let id: U128 = a.req(0, "id")?;
        let mut map = self.lock_filters()?;
        self.expire(&mut map);
        to_value(map.remove(&id).is_some())
    }

    /// `eth_getFilterLogs(id)`: every log the filter's criteria match (as `eth_getLogs`).
    pub(crate) fn filter_logs(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let id: U128 = a.req(0, "id")?;
        let q = {
            let mut map = self.lock_filters()?;
            self.expire(&mut map);
            let f = map.get_mut(&id).ok_or_else(filter_not_found)?;
            f.polled = Instant::now();
            match &f.kind {
                FilterKind::Logs(q) => q.clone(),
                FilterKind::Blocks => {
                    return Err(invalid(
                        "eth_getFilterLogs needs a log filter, not a block filter",
                    ));
                }
            }
        };
        let r = self.db.begin_read()?;
        to_value(self.query_logs(&r, &q)?)
    }

    /// `eth_getFilterChanges(id)`: what arrived since the last poll. After a reorg the changes
    /// restart at the first block of the new branch (the logs of removed blocks are not
    /// reported again with `removed: true`: the unwound receipts are gone). One poll covers at most `--rpc.max-logs-range`
    /// blocks; the rest comes with the next poll.
    pub(crate) fn filter_changes(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let id: U128 = a.req(0, "id")?;
        let r = self.db.begin_read()?;
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let mut map = self.lock_filters()?;
        self.expire(&mut map);
        let f = map.get_mut(&id).ok_or_else(filter_not_found)?;
        f.polled = Instant::now();
        // A reorg replaced blocks already reported: restart after the newest one still ours
        // (or at the oldest remembered one, if none is).
        let mut floor = None;
        while let Some(&(n, h)) = f.recent.back() {
            if r.canonical_hash(n)? == Some(h) {
                break;
            }
            floor = Some(n);
            f.recent.pop_back();
        }
        if let Some(n) = floor {
            f.next = f.recent.back().map_or(n, |(last, _)| last + 1);
        }
        if f.next > head {
            return to_value(Vec::<Value>::new());
        }
        let to = head.min(f.next + self.config.max_logs_range - 1);
        let from = f.next;
        let out = match &f.kind {
            FilterKind::Blocks => {
                let mut hashes = Vec::new();
                for n in from..=to {
                    check()?;
                    hashes.push(r.canonical_hash(n)?.unwrap_or_default());
                }
                to_value(hashes)?
            }
            FilterKind::Logs(q) => {
                // Blocks outside the filter's own range are skipped.
                let (lo, hi) = match q.scope {
                    Scope::Hash(_) => (1, 0),
                    Scope::Range { from: a, to: b } => (
                        explicit(a).unwrap_or(0).max(from),
                        explicit(b).unwrap_or(u64::MAX).min(to),
                    ),
                };
                let logs =
                    if lo <= hi { self.collect_logs(&r, &q.filter, lo, hi)? } else { Vec::new() };
                to_value(logs)?
            }
        };
        f.next = to + 1;
        for n in to.saturating_sub(REMEMBERED as u64 - 1).max(from)..=to {
            f.recent.push_back((n, r.canonical_hash(n)?.unwrap_or_default()));
        }
        while f.recent.len() > REMEMBERED {
            f.recent.pop_front();
        }
        Ok(out)
    }
}

/// The fewest bytes `log` takes in an answer: its data and topics in hex, and its other fields
/// (address, block and transaction hashes, `removed`: over 300 bytes with their names).
fn least_json(log: &Log) -> u64 {
    let data = log.inner.data.data.len() as u64;
    let topics = log.inner.data.topics().len() as u64;
    2 * data + 66 * topics + 300
}

/// The block number a reference names outright (tags move with the head: `None`).
fn explicit(b: BlockRef) -> Option<u64> {
    match b {
        BlockRef::Number(n) => Some(n),
        BlockRef::Earliest => Some(0),
        _ => None,
    }
}

fn filter_not_found() -> RpcError {
    RpcError::Execution("filter not found".into())
}

#[cfg(test)]
mod tests {
    use alloy_primitives::Address;

    use super::*;

    /// The least a log takes in an answer is never more than its JSON: short and long data,
    /// no topics and four, and fields at their shortest (zero numbers, no timestamp).
    #[test]
    fn the_least_json_of_a_log_is_at_most_its_json() {
        for (data, topics) in [(0usize, 0usize), (1, 1), (32, 4), (5000, 2)] {
            let log = Log {
                inner: alloy_primitives::Log::new_unchecked(
                    Address::ZERO,
                    vec![B256::ZERO; topics],
                    vec![0u8; data].into(),
                ),
                block_hash: Some(B256::ZERO),
                block_number: Some(0),
                block_timestamp: None,
                transaction_hash: Some(B256::ZERO),
                transaction_index: Some(0),
                log_index: Some(0),
                removed: false,
            };
            let json = serde_json::to_string(&log).unwrap().len() as u64;
            assert!(least_json(&log) <= json, "{data} {topics}: {} > {json}", least_json(&log));
        }
    }
}
