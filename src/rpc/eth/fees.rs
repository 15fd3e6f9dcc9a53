//! Fee methods derived from stored blocks: `eth_gasPrice`, `eth_maxPriorityFeePerGas`,
//! `eth_feeHistory`, `eth_baseFee`, `eth_blobBaseFee`.
//!
//! The suggested tip follows geth's oracle: from each of the last [`TIP_BLOCKS`] blocks, the
//! [`TIP_SAMPLES`] lowest effective tips (ignoring tips under [`TIP_IGNORE`] wei and
//! transactions sent by the block's fee recipient); the [`TIP_PERCENTILE`]th percentile of those,
//! capped at [`TIP_MAX`]; [`TIP_DEFAULT`] when the blocks hold no transaction. `eth_gasPrice` is
//! that tip plus the base fee of the next block.
//!
//! The blob base fee of the block after the head (`eth_blobBaseFee`, and the last entry of
//! `eth_feeHistory`'s `baseFeePerBlobGas` when `newestBlock` is the head) is that block's: its
//! excess blob gas from the head's (EIP-4844, with EIP-7918's reserve price from Osaka) under
//! the target and maximum of the fork in force at that block's time, and its price under that
//! fork's update fraction. Its time is taken as one slot ([`NEXT_BLOCK_DELAY`]) after the
//! head's, so across a BPO boundary the head just before it already answers with the new
//! fork's parameters. (geth prices it with the head's parameters: the head's own blob base fee
//! for `eth_blobBaseFee`, the head's fork for `eth_feeHistory`.)

use alloy_consensus::Header;
use alloy_eips::eip1559::{BaseFeeParams, INITIAL_BASE_FEE};
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{B256, U256};
use alloy_rpc_types_eth::FeeHistory;
use jsonrpsee::types::Params;

use crate::rpc::eth::tips::{TipsCache, sorted_tips};
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, invalid};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::Reader;

/// Blocks the tip oracle looks at, ending at the head.
pub(crate) const TIP_BLOCKS: u64 = 20;
/// Lowest tips taken from each block.
pub(crate) const TIP_SAMPLES: usize = 3;
/// Percentile of the samples that is suggested.
pub(crate) const TIP_PERCENTILE: usize = 60;
/// Tips below this (wei) are not sampled.
pub(crate) const TIP_IGNORE: u128 = 2;
/// The suggestion never exceeds this (500 gwei).
pub(crate) const TIP_MAX: u128 = 500_000_000_000;
/// The suggestion when no block in the window has a transaction (1 gwei).
pub(crate) const TIP_DEFAULT: u128 = 1_000_000_000;
/// Most blocks one `eth_feeHistory` call covers (more are clamped, as geth does).
pub(crate) const FEE_HISTORY_MAX_BLOCKS: u64 = 1024;
/// Seconds from the head to the block after it, for the fork that block falls in: one slot.
pub(crate) const NEXT_BLOCK_DELAY: u64 = 12;

impl RpcContext {
    /// The suggested tip at the head, computed once per head.
    fn suggested_tip(&self, r: &Reader) -> RpcResult<u128> {
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let head_hash = r.canonical_hash(head)?.unwrap_or_default();
        if let Ok(cache) = self.tip_cache.lock()
            && let Some((hash, tip)) = *cache
            && hash == head_hash
        {
            return Ok(tip);
        }
        let mut samples = Vec::new();
        for n in head.saturating_sub(TIP_BLOCKS - 1)..=head {
            let Some(entry) = r.header_and_hash(n)? else { continue };
            let header = &entry.0;
            let base_fee = header.base_fee_per_gas.unwrap_or(0);
            let mut tips: Vec<u128> = r
                .transaction_fees(n)?
                .iter()
                .filter(|t| t.sender != header.beneficiary)
                .filter_map(|t| t.effective_tip(base_fee))
                .filter(|tip| *tip >= TIP_IGNORE)
                .collect();
            tips.sort_unstable();
            samples.extend(tips.into_iter().take(TIP_SAMPLES));
        }
        samples.sort_unstable();
        let tip = if samples.is_empty() {
            TIP_DEFAULT
        } else {
            samples[(samples.len() - 1) * TIP_PERCENTILE / 100].min(TIP_MAX)
        };
        if let Ok(mut cache) = self.tip_cache.lock() {
            *cache = Some((head_hash, tip));
        }
        Ok(tip)
    }

    /// Base fee of the block after `header` (`None` before London).
    fn next_base_fee(&self, header: &Header) -> Option<u64> {
        match header.next_block_base_fee(BaseFeeParams::ethereum()) {
            Some(fee) => Some(fee),
            None if self.spec.is_london_active_at_block(header.number + 1) => {
                Some(INITIAL_BASE_FEE)
            }
            None => None,
        }
    }

    /// Blob base fee of the block after `header` (`None` if that block is before Cancun): its
    /// excess blob gas and price under the blob parameters at its time (see the module docs).
    /// A parent before Cancun counts as no excess and no blob gas used (EIP-4844).
    fn next_blob_base_fee(&self, header: &Header) -> Option<u128> {
        let params = self.spec.blob_params_at(header.timestamp.saturating_add(NEXT_BLOCK_DELAY))?;
        let excess = params.next_block_excess_blob_gas_osaka(
            header.excess_blob_gas.unwrap_or(0),
            header.blob_gas_used.unwrap_or(0),
            header.base_fee_per_gas.unwrap_or(0),
        );
        Some(params.calc_blob_fee(excess))
    }

    fn head_header(&self, r: &Reader) -> RpcResult<std::sync::Arc<(Header, B256)>> {
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        r.header_and_hash(head)?.ok_or(RpcError::HeaderNotFound)
    }

    /// `eth_maxPriorityFeePerGas()`: the suggested tip.
    pub(crate) fn max_priority_fee(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        to_value(U256::from(self.suggested_tip(&r)?))
    }

    /// `eth_gasPrice()`: the suggested tip plus the next block's base fee.
    pub(crate) fn gas_price(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        let head = self.head_header(&r)?;
        let base = self.next_base_fee(&head.0).unwrap_or(0);
        to_value(U256::from(self.suggested_tip(&r)?) + U256::from(base))
    }

    /// `eth_baseFee()`: the base fee of the next block (`null` before London).
    pub(crate) fn base_fee(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        let head = self.head_header(&r)?;
        to_value(self.next_base_fee(&head.0).map(U256::from))
    }

    /// `eth_blobBaseFee()`: the blob base fee of the next block.
    pub(crate) fn blob_base_fee(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        let head = self.head_header(&r)?;
        let fee = self.next_blob_base_fee(&head.0).ok_or_else(|| {
            RpcError::Execution("blob fees are not active (before Cancun)".into())
        })?;
        to_value(U256::from(fee))
    }

    /// `eth_feeHistory(blockCount, newestBlock, rewardPercentiles?)`.
    pub(crate) fn fee_history(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 3)?;
        let count = a.quantity(0, "blockCount")?.min(FEE_HISTORY_MAX_BLOCKS);
        let newest = a.block_req(1, "newestBlock")?;
        let percentiles: Option<Vec<f64>> = a.opt(2, "rewardPercentiles")?;
        if let Some(ps) = &percentiles {
            check_percentiles(ps)?;
        }
        let r = self.db.begin_read()?;
        let newest = self.resolve_required(&r, newest)?;
        if count == 0 {
            return to_value(FeeHistory::default());
        }
        let oldest = newest.saturating_sub(count - 1);
        let mut h = FeeHistory { oldest_block: oldest, ..Default::default() };
        let mut rewards = Vec::new();
        let mut last = None;
        for n in oldest..=newest {
            // Stops once the client is gone or the deadline passed (`server/budget.rs`).
            crate::rpc::server::budget::check()?;
            let entry = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
            let header = &entry.0;
            let blob = self.spec.blob_params_at(header.timestamp);
            h.base_fee_per_gas.push(u128::from(header.base_fee_per_gas.unwrap_or(0)));
            h.gas_used_ratio.push(ratio(header.gas_used, header.gas_limit));
            h.base_fee_per_blob_gas.push(blob.and_then(|b| header.blob_fee(b)).unwrap_or(0));
            h.blob_gas_used_ratio.push(blob.map_or(0.0, |b| {
                ratio(header.blob_gas_used.unwrap_or(0), b.max_blob_gas_per_block())
            }));
            if let Some(ps) = &percentiles {
                rewards.push(block_rewards(&r, &self.tips_cache, header, entry.1, ps)?);
            }
            last = Some(entry);
        }
        if let Some(entry) = last {
            let header = &entry.0;
            h.base_fee_per_gas.push(u128::from(self.next_base_fee(header).unwrap_or(0)));
            // The block after `newestBlock` is stored unless `newestBlock` is the head: then its
            // own fee, at its own time, else the estimate `eth_blobBaseFee` gives.
            let next_blob = match r.header_and_hash(header.number + 1)? {
                Some(next) => {
                    self.spec.blob_params_at(next.0.timestamp).and_then(|b| next.0.blob_fee(b))
                }
                None => self.next_blob_base_fee(header),
            };
            h.base_fee_per_blob_gas.push(next_blob.unwrap_or(0));
        }
        if percentiles.is_some() {
            h.reward = Some(rewards);
        }
        to_value(h)
    }
}

fn ratio(used: u64, limit: u64) -> f64 {
    if limit == 0 { 0.0 } else { used as f64 / limit as f64 }
}

/// Most reward percentiles one `eth_feeHistory` takes (geth's limit): each costs a pass over
/// every block's tips, so the list bounds the request's work and memory.
pub(crate) const MAX_REWARD_PERCENTILES: usize = 100;

/// `rewardPercentiles`: at most [`MAX_REWARD_PERCENTILES`], each from 0 to 100, strictly
/// increasing (as geth requires); the refusal names what is wrong.
fn check_percentiles(ps: &[f64]) -> RpcResult<()> {
    if ps.len() > MAX_REWARD_PERCENTILES {
        return Err(invalid(format!(
            "{} reward percentiles, more than the limit of {MAX_REWARD_PERCENTILES}",
            ps.len()
        )));
    }
    for (i, p) in ps.iter().enumerate() {
        if !(0.0..=100.0).contains(p) {
            return Err(invalid(format!(
                "invalid reward percentile {p} at index {i}: want values from 0 to 100"
            )));
        }
        if let Some(prev) = i.checked_sub(1).map(|j| ps[j])
            && *p <= prev
        {
            return Err(invalid(format!(
                "invalid reward percentile {p} at index {i}: not above {prev} at index {}, \
                 want strictly increasing values",
                i - 1
            )));
        }
    }
    Ok(())
}

/// The tips at `percentiles` of the block's gas: transactions sorted by effective tip, each
/// weighted by the gas it used (geth's rule). All zero for an empty block.
fn block_rewards(
    r: &Reader,
    cache: &TipsCache,
    header: &Header,
    hash: B256,
    percentiles: &[f64],
) -> RpcResult<Vec<u128>> {
    let by_tip = sorted_tips(r, cache, header, hash)?;
    if by_tip.is_empty() {
        return Ok(vec![0; percentiles.len()]);
    }
    let mut out = Vec::with_capacity(percentiles.len());
    let mut idx = 0;
    let mut sum = by_tip[0].1;
    for p in percentiles {
        let threshold = (header.gas_used as f64 * p / 100.0) as u64;
        while sum < threshold && idx < by_tip.len() - 1 {
            idx += 1;
            sum += by_tip[idx].1;
        }
        out.push(by_tip[idx].0);
    }
    Ok(out)
}
