//! The EVM environment (config + block env) a block executes in.

use alloy_consensus::Header;
use alloy_evm::EvmEnv;
use revm::primitives::hardfork::SpecId;

use crate::chain::ChainSpec;

/// The environment of block `header` on `spec`: fork rules, chain id, block fields and blob fee.
///
/// One correction to alloy-evm: revm has no Constantinople spec, so a block where
/// Constantinople is active but Petersburg is not would run as Byzantium (no SHL/SHR/SAR,
/// CREATE2, EXTCODEHASH). We run it as Petersburg, which has those opcodes; only EIP-1283 net
/// gas metering (which Petersburg removed) is missing. Mainnet activated both together.
pub fn block_env(spec: &ChainSpec, header: &Header) -> EvmEnv {
    let mut env =
        EvmEnv::for_eth_block(header, spec, spec.chain_id(), spec.blob_params_at(header.timestamp));
    if env.cfg_env.spec == SpecId::BYZANTIUM
        && spec.is_constantinople_active_at_block(header.number)
    {
        env.cfg_env.spec = SpecId::PETERSBURG;
    }
    env
}
