//! The genesis block header, computed from the genesis file and its allocation.

use alloy_consensus::{
    EMPTY_OMMER_ROOT_HASH, EMPTY_ROOT_HASH, Header, constants::EMPTY_WITHDRAWALS,
};
use alloy_eip7928::EMPTY_BLOCK_ACCESS_LIST_HASH;
use alloy_eips::{eip1559::INITIAL_BASE_FEE, eip7685::EMPTY_REQUESTS_HASH};
use alloy_genesis::Genesis;
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{B64, B256};

/// Builds block 0 from `genesis`. Fork-dependent fields appear only when their fork is active
/// at genesis: base fee (London), withdrawals root (Shanghai), blob gas and beacon root
/// (Cancun), requests hash (Prague), block access list hash and slot number (Amsterdam) — the
/// same rule geth and reth apply.
pub fn genesis_header(genesis: &Genesis, forks: &impl EthereumHardforks) -> Header {
    let ts = genesis.timestamp;
    let london = forks.is_london_active_at_block(0);
    let cancun = forks.is_cancun_active_at_timestamp(ts);
    let amsterdam = forks.is_amsterdam_active_at_timestamp(ts);
    Header {
        parent_hash: genesis.parent_hash.unwrap_or_default(),
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: genesis.coinbase,
        state_root: alloy_trie::root::state_root_ref_unhashed(&genesis.alloc),
        transactions_root: EMPTY_ROOT_HASH,
        receipts_root: EMPTY_ROOT_HASH,
        logs_bloom: Default::default(),
        difficulty: genesis.difficulty,
        number: genesis.number.unwrap_or_default(),
        gas_limit: genesis.gas_limit,
        gas_used: 0,
        timestamp: ts,
        extra_data: genesis.extra_data.clone(),
        mix_hash: genesis.mix_hash,
        nonce: B64::from(genesis.nonce),
        base_fee_per_gas: london
            .then(|| genesis.base_fee_per_gas.map(|f| f as u64).unwrap_or(INITIAL_BASE_FEE)),
        withdrawals_root: forks.is_shanghai_active_at_timestamp(ts).then_some(EMPTY_WITHDRAWALS),
        blob_gas_used: cancun.then(|| genesis.blob_gas_used.unwrap_or_default()),
        excess_blob_gas: cancun.then(|| genesis.excess_blob_gas.unwrap_or_default()),
        parent_beacon_block_root: cancun.then_some(B256::ZERO),
        requests_hash: forks.is_prague_active_at_timestamp(ts).then_some(EMPTY_REQUESTS_HASH),
        block_access_list_hash: amsterdam.then_some(EMPTY_BLOCK_ACCESS_LIST_HASH),
        slot_number: amsterdam.then(|| genesis.slot_number.unwrap_or_default()),
    }
}
