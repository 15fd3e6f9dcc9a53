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
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::time::Instant;

use alloy_primitives::{Address, B256, Bloom, BloomInput, U128};
use alloy_rpc_types_eth::Log;
use jsonrpsee::types::Params;
use serde_json::Value;

use crate::rpc::eth::convert::block_logs;
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, block_ref, invalid};
use crate::rpc::server::budget::check;
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::Reader;

/// What a log must match: any of `addresses` (none: any address), and at each topic position
/// any of the listed topics (an empty list: any topic). The lists are sorted, so a log's
/// address and topics are looked up in O(log n), and each item's three bloom bits are worked
/// out once per filter, not once per block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogFilter {
    addresses: Vec<Address>,
    topics: Vec<Vec<B256>>,
    address_bits: Vec<BloomBits>,
    topic_bits: Vec<Vec<BloomBits>>,
}

/// The bytes and masks of the (at most three) bits an item sets in a logs bloom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BloomBits([(u8, u8); 3]);

impl BloomBits {
    fn of(item: &[u8]) -> Self {
        let mut bloom = Bloom::ZERO;
        bloom.accrue(BloomInput::Raw(item));
        let mut bits = [(0u8, 0u8); 3];
        let set = bloom.0.iter().enumerate().filter(|(_, b)| **b != 0);
        for (slot, (i, b)) in bits.iter_mut().zip(set) {
            // A bloom is 256 bytes: the index fits in a u8.
            *slot = (i as u8, *b);
        }
        Self(bits)
    }

    fn in_bloom(&self, bloom: &Bloom) -> bool {
        self.0.iter().all(|&(i, mask)| bloom.0[usize::from(i)] & mask == mask)
    }
}

/// The most addresses, and topic alternatives at one position, a log filter may list
/// (`--rpc.max-filter-addresses`, `--rpc.max-filter-topics`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilterLimits {
    /// Most addresses.
    pub(crate) addresses: usize,
    /// Most alternatives at one topic position.
    pub(crate) topics: usize,
}

impl LogFilter {
    fn new(mut addresses: Vec<Address>, mut topics: Vec<Vec<B256>>) -> Self {
        addresses.sort_unstable();
        addresses.dedup();
        for t in &mut topics {
            t.sort_unstable();
            t.dedup();
        }
        let address_bits = addresses.iter().map(|a| BloomBits::of(a.as_slice())).collect();
        let topic_bits = topics
            .iter()
            .map(|t| t.iter().map(|t| BloomBits::of(t.as_slice())).collect())
            .collect();
        Self { addresses, topics, address_bits, topic_bits }
    }

    /// Whether a log with `address` and `topics` matches.
    fn matches_parts(&self, address: &Address, topics: &[B256]) -> bool {
        if !self.addresses.is_empty() && self.addresses.binary_search(address).is_err() {
            return false;
        }
        self.topics.iter().enumerate().all(|(i, wanted)| {
            wanted.is_empty() || topics.get(i).is_some_and(|t| wanted.binary_search(t).is_ok())
        })
    }

    /// Whether a block with `bloom` may hold a matching log.
    fn may_match(&self, bloom: &Bloom) -> bool {
        let any = |bits: &[BloomBits]| bits.is_empty() || bits.iter().any(|b| b.in_bloom(bloom));
        any(&self.address_bits) && self.topic_bits.iter().all(|t| any(t))
    }
}

/// Where a query looks: one block by hash, or a range of references resolved at query time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Hash(B256),
    Range { from: BlockRef, to: BlockRef },
}

/// A parsed filter object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilterQuery {
    scope: Scope,
    filter: LogFilter,
}

/// Reported blocks a filter remembers to find where a reorg started (deeper reorgs restart at
/// the oldest of them).
const REMEMBERED: usize = 128;

const FILTER_FIELDS: &[&str] = &["fromBlock", "toBlock", "blockHash", "address", "topics"];

/// The address and topic filter of a `logs` subscription (block bounds are not used: a
/// subscription follows the head).
pub(crate) fn subscription_filter(
    a: &Args,
    i: usize,
    limits: FilterLimits,
) -> RpcResult<LogFilter> {
    if a.get(i).is_none_or(serde_json::Value::is_null) {
        return Ok(LogFilter::default());
    }
    Ok(parse_query(a, i, limits)?.filter)
}

fn parse_query(a: &Args, i: usize, limits: FilterLimits) -> RpcResult<FilterQuery> {
    let bad = |msg: String| invalid(format!("invalid argument {i} (filter): {msg}"));
    let Some(v) = a.get(i) else {
        return Err(invalid(format!("missing value for required argument {i} (filter)")));
    };
    let Value::Object(map) = v else { return Err(bad("expected an object".into())) };
    if let Some(k) = map.keys().find(|k| !FILTER_FIELDS.contains(&k.as_str())) {
        return Err(bad(format!("unknown field {k:?}")));
    }
    let field = |k: &str| map.get(k).filter(|v| !v.is_null());
    let block = |k: &str| -> RpcResult<BlockRef> {
        field(k).map_or(Ok(BlockRef::Latest), |v| {
            block_ref(v, false).map_err(|e| bad(format!("{k}: {e}")))
        })
    };
    let scope = match field("blockHash") {
        Some(h) => {
            if field("fromBlock").is_some() || field("toBlock").is_some() {
                return Err(bad("cannot specify both BlockHash and FromBlock/ToBlock, choose \
                                one or the other"
                    .into()));
            }
            let hash =
                serde_json::from_value(h.clone()).map_err(|e| bad(format!("blockHash: {e}")))?;
            Scope::Hash(hash)
        }
        None => Scope::Range { from: block("fromBlock")?, to: block("toBlock")? },
    };
    let addresses = match field("address") {
        None => Vec::new(),
        Some(Value::Array(items)) if items.len() > limits.addresses => {
            return Err(bad(format!(
                "{} addresses, over the limit of {} (--rpc.max-filter-addresses)",
                items.len(),
                limits.addresses
            )));
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| serde_json::from_value(v.clone()))
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("address: {e}")))?,
        Some(v) => {
            vec![serde_json::from_value(v.clone()).map_err(|e| bad(format!("address: {e}")))?]
        }
    };
    let mut topics = Vec::new();
    match field("topics") {
        None => {}
        Some(Value::Array(positions)) => {
            if positions.len() > 4 {
                return Err(bad(format!("{} topic positions (at most 4)", positions.len())));
            }
            for (p, v) in positions.iter().enumerate() {
                let parsed: Vec<B256> = match v {
                    Value::Null => Vec::new(),
                    Value::Array(items) if items.len() > limits.topics => {
                        return Err(bad(format!(
                            "topics[{p}]: {} alternatives, over the limit of {} \
                             (--rpc.max-filter-topics)",
                            items.len(),
                            limits.topics
                        )));
                    }
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(j, t)| topic(t).map_err(|e| bad(format!("topics[{p}][{j}]: {e}"))))
                        .collect::<Result<_, _>>()?,
                    t => vec![topic(t).map_err(|e| bad(format!("topics[{p}]: {e}")))?],
                };
                topics.push(parsed);
            }
        }
        Some(other) => return Err(bad(format!("topics: expected an array, got {other}"))),
    }
    // Trailing wildcards match everything: drop them so blooms are not asked about them.
    while topics.last().is_some_and(Vec::is_empty) {
        topics.pop();
    }
    Ok(FilterQuery { scope, filter: LogFilter::new(addresses, topics) })
}

/// One topic of a filter's topic position: a 32-byte hash. The message says what a position
/// takes, since a nested array (`[[[T]]]`) or a short hash is the usual mistake.
fn topic(v: &Value) -> Result<B256, String> {
    const TAKES: &str = "a topic position is null, a 32-byte hash or an array of 32-byte hashes";
    match v {
        Value::String(s) => s
            .parse::<B256>()
            .map_err(|_| format!("{s:?} is not a 32-byte hash (0x and 64 hex digits): {TAKES}")),
        Value::Array(_) => Err(format!("an array inside an array: {TAKES}")),
        other => Err(format!("expected a 32-byte hash, got {other}: {TAKES}")),
    }
}

/// One installed filter.
#[derive(Debug)]
struct Installed {
    kind: FilterKind,
    /// The first block not reported yet.
    next: u64,
    /// The last blocks reported (number, hash), newest last, at most [`REMEMBERED`]: after a
    /// reorg, reporting restarts after the newest of them that is still canonical.
    recent: VecDeque<(u64, B256)>,
    polled: Instant,
    /// The client that installed it, counted against `--rpc.max-filters-per-ip` (any client
    /// may poll or uninstall it); `None` in-process.
    owner: Option<std::net::IpAddr>,
}

#[derive(Debug)]
enum FilterKind {
    Blocks,
    Logs(FilterQuery),
}

/// The filters installed by clients.
#[derive(Debug, Default)]
pub(crate) struct Filters {
    map: Mutex<HashMap<U128, Installed>>,
    counter: std::sync::atomic::AtomicU64,
    seed: std::collections::hash_map::RandomState,
}

impl Filters {
    fn new_id(&self) -> U128 {
        let n = self.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut h = self.seed.build_hasher();
        h.write_u64(n);
        // High half random-looking, low half the counter: unique, and not guessable in order.
        U128::from(h.finish()) << 64 | U128::from(n)
    }
}

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
    use super::*;

    /// The bits worked out once per item say what alloy's bloom check says, for blooms that
    /// hold the item, others and none; the sorted lists match what `contains` would.
    #[test]
    fn precomputed_bloom_bits_and_sorted_lists_agree_with_alloy() {
        let items: Vec<Address> =
            (0u64..64).map(|i| Address::left_padding_from(&i.to_be_bytes())).collect();
        let mut bloom = Bloom::ZERO;
        for a in items.iter().step_by(3) {
            bloom.accrue(BloomInput::Raw(a.as_slice()));
        }
        for a in &items {
            let bits = BloomBits::of(a.as_slice());
            assert_eq!(bits.in_bloom(&bloom), bloom.contains_input(BloomInput::Raw(a.as_slice())));
            assert!(bits.in_bloom(&{
                let mut b = Bloom::ZERO;
                b.accrue(BloomInput::Raw(a.as_slice()));
                b
            }));
            assert!(!bits.in_bloom(&Bloom::ZERO));
        }
        let wanted: Vec<Address> = items.iter().rev().step_by(5).copied().collect();
        let topic = B256::repeat_byte(9);
        let f = LogFilter::new(wanted.clone(), vec![vec![], vec![topic, B256::ZERO, topic]]);
        for a in &items {
            let want = wanted.contains(a);
            assert_eq!(f.matches_parts(a, &[B256::ZERO, topic]), want);
            assert!(!f.matches_parts(a, &[topic, B256::repeat_byte(1)]));
            assert!(!f.matches_parts(a, &[topic]));
        }
    }

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
