//! What the node is and serves: `eth_config` (EIP-7910: the fork in force at the head, the next
//! and the last scheduled one, each with its blob parameters, fork id (EIP-6122 `FORK_HASH`),
//! precompiles and system contracts) and `eth_capabilities` (an archive: everything from
//! genesis on).
//!
//! The forks and their times are the ones the node executes (the spec's schedule: a named
//! network's from code, a genesis file's from its `config`); the fork id gathers the block forks
//! from the genesis configuration as geth does. [`eth_config_at`] computes the answer for any
//! head time; the RPC asks it with the head block's timestamp.

use std::collections::BTreeMap;

use alloy_eips::eip2124::ForkHash;
use alloy_eips::eip7910::{EthConfig, EthForkConfig, SystemContract};
use alloy_evm::eth::spec::EthExecutorSpec;
use alloy_hardforks::{EthereumHardfork, EthereumHardforks};
use alloy_primitives::{Address, Bytes};
use jsonrpsee::types::Params;

use crate::chain::ChainSpec;
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::Args;
use crate::rpc::{RpcContext, RpcError, RpcResult};

/// Which precompile and system-contract set a fork has (a BPO fork has its base fork's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fork {
    Cancun,
    Prague,
    Osaka,
    Amsterdam,
}

/// The timestamp-activated forks EIP-7910 describes, in time order, each with the set it has. A
/// BPO fork keeps the sets of the named fork in force before it (Osaka's, or Amsterdam's for a
/// BPO after Amsterdam); forks scheduled at the same time are one entry, with the later set.
fn timed_forks(spec: &ChainSpec) -> Vec<(Fork, u64)> {
    let mut scheduled: Vec<(Option<Fork>, u64)> = [
        (Some(Fork::Cancun), EthereumHardfork::Cancun),
        (Some(Fork::Prague), EthereumHardfork::Prague),
        (Some(Fork::Osaka), EthereumHardfork::Osaka),
        (None, EthereumHardfork::Bpo1),
        (None, EthereumHardfork::Bpo2),
        (None, EthereumHardfork::Bpo3),
        (None, EthereumHardfork::Bpo4),
        (None, EthereumHardfork::Bpo5),
        (Some(Fork::Amsterdam), EthereumHardfork::Amsterdam),
    ]
    .into_iter()
    .filter_map(|(set, fork)| Some((set, spec.ethereum_fork_activation(fork).as_timestamp()?)))
    .collect();
    // Stable: forks at the same time stay in the order above.
    scheduled.sort_by_key(|(_, t)| *t);
    let mut base = Fork::Cancun;
    let mut forks: Vec<(Fork, u64)> = Vec::new();
    for (set, t) in scheduled {
        base = set.map_or(base, |s| s.max(base));
        match forks.last_mut() {
            Some(last) if last.1 == t => last.0 = base,
            _ => forks.push((base, t)),
        }
    }
    forks
}

/// EIP-2124 fork hash with every fork activated at or before `time` (block forks from the
/// genesis configuration, as geth gathers them, then time forks after genesis).
fn fork_hash(spec: &ChainSpec, time: u64) -> ForkHash {
    let c = &spec.genesis().config;
    let genesis_time = spec.genesis_header().timestamp;
    let mut blocks: Vec<u64> = [
        c.homestead_block,
        c.dao_fork_support.then_some(c.dao_fork_block).flatten(),
        c.eip150_block,
        c.eip155_block,
        c.eip158_block,
        c.byzantium_block,
        c.constantinople_block,
        c.petersburg_block,
        c.istanbul_block,
        c.muir_glacier_block,
        c.berlin_block,
        c.london_block,
        c.arrow_glacier_block,
        c.gray_glacier_block,
        c.merge_netsplit_block,
    ]
    .into_iter()
    .flatten()
    .filter(|b| *b > 0)
    .collect();
    blocks.sort_unstable();
    blocks.dedup();
    let shanghai = spec.ethereum_fork_activation(EthereumHardfork::Shanghai).as_timestamp();
    let mut times: Vec<u64> = shanghai
        .into_iter()
        .chain(timed_forks(spec).into_iter().map(|(_, t)| t))
        .filter(|t| *t > genesis_time && *t <= time)
        .collect();
    times.sort_unstable();
    times.dedup();
    let mut hash = ForkHash::from(spec.genesis_hash());
    for v in blocks.into_iter().chain(times) {
        hash += v;
    }
    hash
}

/// The precompiles of `fork` by their EIP-7910 names. Amsterdam adds none (revm 43 runs
/// Osaka's set for it, as geth does).
fn precompiles(fork: Fork) -> BTreeMap<String, Address> {
    let mut names = vec![
        (1u16, "ECREC"),
        (2, "SHA256"),
        (3, "RIPEMD160"),
        (4, "ID"),
        (5, "MODEXP"),
        (6, "BN254_ADD"),
        (7, "BN254_MUL"),
        (8, "BN254_PAIRING"),
        (9, "BLAKE2F"),
        (0x0a, "KZG_POINT_EVALUATION"),
    ];
    if fork >= Fork::Prague {
        names.extend([
            (0x0b, "BLS12_G1ADD"),
            (0x0c, "BLS12_G1MSM"),
            (0x0d, "BLS12_G2ADD"),
            (0x0e, "BLS12_G2MSM"),
            (0x0f, "BLS12_PAIRING_CHECK"),
            (0x10, "BLS12_MAP_FP_TO_G1"),
            (0x11, "BLS12_MAP_FP2_TO_G2"),
        ]);
    }
    if fork >= Fork::Osaka {
        names.push((0x100, "P256VERIFY"));
    }
    names
        .into_iter()
        .map(|(a, n)| (n.to_string(), Address::left_padding_from(&a.to_be_bytes())))
        .collect()
}

/// The system contracts of `fork`: EIP-4788's from Cancun; EIP-2935's, EIP-7002's, EIP-7251's
/// and the deposit contract from Prague; EIP-8282's builder deposit and exit contracts from
/// Amsterdam (named `BUILDER_DEPOSIT_CONTRACT_ADDRESS` and `BUILDER_EXIT_CONTRACT_ADDRESS`, as
/// geth and alloy name them).
fn system_contracts(spec: &ChainSpec, fork: Fork) -> BTreeMap<SystemContract, Address> {
    let mut contracts: BTreeMap<SystemContract, Address> =
        SystemContract::cancun().into_iter().collect();
    if fork >= Fork::Prague {
        contracts.extend(SystemContract::prague(spec.deposit_contract_address()));
    }
    if fork >= Fork::Amsterdam {
        contracts.extend(SystemContract::amsterdam());
    }
    contracts
}

fn fork_config(spec: &ChainSpec, fork: Fork, time: u64) -> RpcResult<EthForkConfig> {
    let blob_schedule = spec
        .blob_params_at(time)
        .ok_or_else(|| RpcError::Internal(format!("no blob parameters at {time}")))?;
    // "If a fork is activated at genesis, the value 0 is used" (EIP-7910), as geth does for a
    // fork at or before the genesis time.
    let activation_time = if time <= spec.genesis_header().timestamp { 0 } else { time };
    Ok(EthForkConfig {
        activation_time,
        blob_schedule,
        chain_id: spec.chain_id(),
        fork_id: Bytes::copy_from_slice(&fork_hash(spec, time).0),
        precompiles: precompiles(fork),
        system_contracts: system_contracts(spec, fork),
    })
}

/// The `eth_config` answer (EIP-7910) of `spec`'s chain when its head block has timestamp
/// `head_time`: `current` is the newest timestamp fork active at that time, `next` the first
/// one after it and `last` the last one scheduled (both `None` when nothing is scheduled after
/// `current`). This is what the RPC method serves, with the head block's timestamp. Fails
/// before Cancun, where EIP-7910 describes nothing.
pub fn eth_config_at(spec: &ChainSpec, head_time: u64) -> RpcResult<EthConfig> {
    let forks = timed_forks(spec);
    let Some(&(fork, time)) = forks.iter().rev().find(|(_, t)| *t <= head_time) else {
        return Err(RpcError::Execution(
            "eth_config describes forks from Cancun on; Cancun is not active at the head".into(),
        ));
    };
    let mut upcoming = forks.iter().filter(|(_, t)| *t > head_time);
    let next = upcoming.next().copied();
    let last = upcoming.next_back().copied().or(next);
    Ok(EthConfig {
        current: fork_config(spec, fork, time)?,
        next: next.map(|(f, t)| fork_config(spec, f, t)).transpose()?,
        last: last.map(|(f, t)| fork_config(spec, f, t)).transpose()?,
    })
}

impl RpcContext {
    /// `eth_config()`: [`eth_config_at`] the head block's timestamp.
    pub(crate) fn eth_config(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let head_time = r.header_and_hash(head)?.ok_or(RpcError::HeaderNotFound)?.0.timestamp;
        to_value(eth_config_at(&self.spec, head_time)?)
    }

    /// `eth_capabilities()`: the head, and for each kind of data the oldest block served; an
    /// archive serves all of it from genesis and prunes nothing.
    pub(crate) fn capabilities(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let hash = r.canonical_hash(head)?.unwrap_or_default();
        let all = serde_json::json!({ "disabled": false, "oldestBlock": "0x0" });
        to_value(serde_json::json!({
            "head": { "number": format!("{head:#x}"), "hash": hash },
            "state": all, "tx": all, "logs": all, "receipts": all, "blocks": all,
            "stateproofs": all,
        }))
    }
}
