//! [`TipsCache`]: each recent block's transactions sorted by effective tip, kept for the
//! rewards of `eth_feeHistory` (`fees.rs`).

use std::sync::Arc;

use alloy_consensus::Header;
use alloy_primitives::B256;

use crate::rpc::RpcResult;
use crate::storage::Reader;

/// Memory for [`TipsCache`]: about 520,000 transactions, 1,024 blocks of 500 (the most one
/// `eth_feeHistory` covers).
const TIPS_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// Each block's transactions as (effective tip, gas used), sorted by tip: what the rewards of
/// `eth_feeHistory` are read from. Wallets ask for the rewards of the newest blocks on every
/// refresh, and reading them costs every transaction and receipt of each block. Keyed by
/// block hash, so an entry never goes stale (a reorged block is simply not asked for again);
/// bounded by bytes (quick_cache, as `request/cache.rs`).
pub(crate) struct TipsCache {
    cache: quick_cache::sync::Cache<B256, Arc<[(u128, u64)]>, TipsWeight>,
}

impl std::fmt::Debug for TipsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TipsCache").field("blocks", &self.cache.len()).finish()
    }
}

impl Default for TipsCache {
    fn default() -> Self {
        let blocks = 1024;
        Self {
            cache: quick_cache::sync::Cache::with_weighter(blocks, TIPS_CACHE_BYTES, TipsWeight),
        }
    }
}

/// Weighs a block's entry by its pairs (and the key and bookkeeping around them).
#[derive(Debug, Clone, Copy)]
struct TipsWeight;

impl quick_cache::Weighter<B256, Arc<[(u128, u64)]>> for TipsWeight {
    fn weight(&self, _key: &B256, tips: &Arc<[(u128, u64)]>) -> u64 {
        (tips.len() * std::mem::size_of::<(u128, u64)>()) as u64 + 64
    }
}

/// The block's transactions as (effective tip, gas used), sorted by tip; from `cache` when kept.
pub(crate) fn sorted_tips(
    r: &Reader,
    cache: &TipsCache,
    header: &Header,
    hash: B256,
) -> RpcResult<Arc<[(u128, u64)]>> {
    if let Some(tips) = cache.cache.get(&hash) {
        return Ok(tips);
    }
    let txs = r.transaction_fees(header.number)?;
    let gas = if txs.is_empty() {
        Vec::new()
    } else {
        r.receipts_gas(header.number)?.unwrap_or_default()
    };
    let base_fee = header.base_fee_per_gas.unwrap_or(0);
    let mut prev = 0u64;
    let mut by_tip: Vec<(u128, u64)> = txs
        .iter()
        .zip(gas)
        .map(|(t, cumulative)| {
            let used = cumulative.saturating_sub(prev);
            prev = cumulative;
            (t.effective_tip(base_fee).unwrap_or(0), used)
        })
        .collect();
    by_tip.sort_unstable_by_key(|(tip, _)| *tip);
    let tips: Arc<[(u128, u64)]> = by_tip.into();
    cache.cache.insert(hash, tips.clone());
    Ok(tips)
}
