//! Log filters: what a log must match ([`LogFilter`], with the bloom bits worked out once), a
//! filter object parsed from a request's parameters ([`FilterQuery`]), and the polling filters
//! installed by clients ([`Filters`]; their methods are `logs.rs`).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::time::Instant;

use alloy_primitives::{Address, B256, Bloom, BloomInput, U128};
use serde_json::Value;

use crate::rpc::RpcResult;
use crate::rpc::request::params::{Args, BlockRef, block_ref, invalid};

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
    pub(crate) fn new(mut addresses: Vec<Address>, mut topics: Vec<Vec<B256>>) -> Self {
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
    pub(crate) fn matches_parts(&self, address: &Address, topics: &[B256]) -> bool {
        if !self.addresses.is_empty() && self.addresses.binary_search(address).is_err() {
            return false;
        }
        self.topics.iter().enumerate().all(|(i, wanted)| {
            wanted.is_empty() || topics.get(i).is_some_and(|t| wanted.binary_search(t).is_ok())
        })
    }

    /// Whether a block with `bloom` may hold a matching log.
    pub(crate) fn may_match(&self, bloom: &Bloom) -> bool {
        let any = |bits: &[BloomBits]| bits.is_empty() || bits.iter().any(|b| b.in_bloom(bloom));
        any(&self.address_bits) && self.topic_bits.iter().all(|t| any(t))
    }
}

/// Where a query looks: one block by hash, or a range of references resolved at query time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Hash(B256),
    Range { from: BlockRef, to: BlockRef },
}

/// A parsed filter object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilterQuery {
    pub(crate) scope: Scope,
    pub(crate) filter: LogFilter,
}

/// Reported blocks a filter remembers to find where a reorg started (deeper reorgs restart at
/// the oldest of them).
pub(crate) const REMEMBERED: usize = 128;

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

pub(crate) fn parse_query(a: &Args, i: usize, limits: FilterLimits) -> RpcResult<FilterQuery> {
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
pub(crate) struct Installed {
    pub(crate) kind: FilterKind,
    /// The first block not reported yet.
    pub(crate) next: u64,
    /// The last blocks reported (number, hash), newest last, at most [`REMEMBERED`]: after a
    /// reorg, reporting restarts after the newest of them that is still canonical.
    pub(crate) recent: VecDeque<(u64, B256)>,
    pub(crate) polled: Instant,
    /// The client that installed it, counted against `--rpc.max-filters-per-ip` (any client
    /// may poll or uninstall it); `None` in-process.
    pub(crate) owner: Option<std::net::IpAddr>,
}

#[derive(Debug)]
pub(crate) enum FilterKind {
    Blocks,
    Logs(FilterQuery),
}

/// The filters installed by clients.
#[derive(Debug, Default)]
pub(crate) struct Filters {
    pub(crate) map: Mutex<HashMap<U128, Installed>>,
    counter: std::sync::atomic::AtomicU64,
    seed: std::collections::hash_map::RandomState,
}

impl Filters {
    pub(crate) fn new_id(&self) -> U128 {
        let n = self.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut h = self.seed.build_hasher();
        h.write_u64(n);
        // High half random-looking, low half the counter: unique, and not guessable in order.
        U128::from(h.finish()) << 64 | U128::from(n)
    }
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
}
