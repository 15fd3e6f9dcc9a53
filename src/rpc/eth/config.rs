//! What the node is and serves: `eth_config` (EIP-7910: the fork in force at the head, the next
//! and the last scheduled one, each with its blob parameters, fork id (EIP-6122 `FORK_HASH`),
//! precompiles and system contracts, from the chain's genesis configuration) and
//! `eth_capabilities` (an archive: everything from genesis on).

use std::collections::BTreeMap;

use alloy_eips::eip2124::ForkHash;
use alloy_eips::eip7910::{EthConfig, EthForkConfig, SystemContract};
use alloy_evm::eth::spec::EthExecutorSpec;
use alloy_primitives::{Address, Bytes};
use jsonrpsee::types::Params;

use crate::chain::ChainSpec;
use crate::rpc::server::json::{Raw, to_value};
use crate::rpc::server::params::Args;
use crate::rpc::{RpcContext, RpcError, RpcResult};

/// The timestamp-activated forks EIP-7910 describes, in order, with their activation times. A
/// BPO fork keeps the precompiles and system contracts of the fork before it.
fn timed_forks(spec: &ChainSpec) -> Vec<(Fork, u64)> {
    let c = &spec.genesis().config;
    let mut base = Fork::Cancun;
    [
        (Some(Fork::Cancun), c.cancun_time),
        (Some(Fork::Prague), c.prague_time),
        (Some(Fork::Osaka), c.osaka_time),
        (None, c.bpo1_time),
        (None, c.bpo2_time),
        (None, c.bpo3_time),
        (None, c.bpo4_time),
        (None, c.bpo5_time),
    ]
    .into_iter()
    .filter_map(|(f, t)| {
        let t = t?;
        base = f.unwrap_or(base);
        Some((base, t))
    })
    .collect()
}

/// Which precompile and system-contract set a fork has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fork {
    Cancun,
    Prague,
    Osaka,
}

/// EIP-2124 fork hash with every fork activated at or before `time` (block forks, then time
/// forks after genesis), as geth gathers them from the genesis configuration.
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
    let mut times: Vec<u64> = [c.shanghai_time]
        .into_iter()
        .chain(timed_forks(spec).into_iter().map(|(_, t)| Some(t)))
        .flatten()
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

fn fork_config(spec: &ChainSpec, fork: Fork, time: u64) -> RpcResult<EthForkConfig> {
    let blob_schedule = spec
        .blob_params_at(time)
        .ok_or_else(|| RpcError::Internal(format!("no blob parameters at {time}")))?;
    let mut system_contracts: BTreeMap<SystemContract, Address> =
        SystemContract::cancun().into_iter().collect();
    if fork >= Fork::Prague {
        system_contracts.extend(SystemContract::prague(spec.deposit_contract_address()));
    }
    Ok(EthForkConfig {
        activation_time: time,
        blob_schedule,
        chain_id: spec.chain_id(),
        fork_id: Bytes::copy_from_slice(&fork_hash(spec, time).0),
        precompiles: precompiles(fork),
        system_contracts,
    })
}

impl RpcContext {
    /// `eth_config()`: see the module docs. Before Cancun there is nothing EIP-7910 describes.
    pub(crate) fn eth_config(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let r = self.db.begin_read()?;
        let head = r.head()?.ok_or_else(|| RpcError::Internal("no head".into()))?;
        let now = r.header_and_hash(head)?.ok_or(RpcError::HeaderNotFound)?.0.timestamp;
        let forks = timed_forks(&self.spec);
        let Some(&(fork, time)) = forks.iter().rev().find(|(_, t)| *t <= now) else {
            return Err(RpcError::Execution(
                "eth_config describes forks from Cancun on; Cancun is not active at the head"
                    .into(),
            ));
        };
        let upcoming: Vec<(Fork, u64)> = forks.iter().copied().filter(|(_, t)| *t > now).collect();
        let next = upcoming.first().map(|&(f, t)| fork_config(&self.spec, f, t));
        let last = upcoming.last().map(|&(f, t)| fork_config(&self.spec, f, t));
        to_value(EthConfig {
            current: fork_config(&self.spec, fork, time)?,
            next: next.transpose()?,
            last: last.transpose()?,
        })
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
