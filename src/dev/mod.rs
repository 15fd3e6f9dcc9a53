//! The built-in dev chain: a genesis with well-known (insecure!) dev keys, a deterministic
//! block builder on the import path, and a sample history so a new node has answers at once.

mod builder;
pub mod contracts;
mod datadir;
mod error;
pub mod generate;
mod sample;

use alloy_primitives::{Address, B256, U256, hex};
use alloy_signer_local::PrivateKeySigner;
use serde_json::json;

pub use builder::{BLOCK_TIME, BlockBuilder};
pub use datadir::{
    SCRATCH, build_dev_datadir, is_complete as is_dev_chain_complete, remove_scratch,
};
pub use error::DevError;
pub use sample::{
    COUNTER, COUNTER_INIT, COUNTER_RUNTIME, FAIL_SELECTOR, HISTORY_BLOCKS, PROBE_SELECTOR,
    SampleContracts, build_sample_history, sample_contracts,
};

/// Chain id of the dev chain.
pub const DEV_CHAIN_ID: u64 = 1337;

/// Private keys of the dev accounts: the widely published "test test … junk" mnemonic keys.
/// They are public knowledge — never send anything of value to these accounts.
pub const DEV_KEYS: [&str; 3] = [
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
];

/// The dev signers, in [`DEV_KEYS`] order.
pub fn dev_signers() -> Vec<PrivateKeySigner> {
    DEV_KEYS
        .iter()
        .filter_map(|k| B256::try_from(hex::decode(k).ok()?.as_slice()).ok())
        .filter_map(|k| PrivateKeySigner::from_bytes(&k).ok())
        .collect()
}

/// The dev accounts' addresses.
pub fn dev_accounts() -> Vec<Address> {
    dev_signers().iter().map(|s| s.address()).collect()
}

/// The `config` of a geth-style genesis with every fork through Osaka active from block 0 and
/// the merge at genesis (TTD 0): the dev chain's and the generated chains'.
pub fn all_forks_config(chain_id: u64) -> serde_json::Value {
    let blob = |target: u64, max: u64, fraction: u64| json!({"target": target, "max": max, "baseFeeUpdateFraction": fraction});
    json!({
        "chainId": chain_id,
        "homesteadBlock": 0, "eip150Block": 0, "eip155Block": 0, "eip158Block": 0,
        "byzantiumBlock": 0, "constantinopleBlock": 0, "petersburgBlock": 0,
        "istanbulBlock": 0, "muirGlacierBlock": 0, "berlinBlock": 0, "londonBlock": 0,
        "arrowGlacierBlock": 0, "grayGlacierBlock": 0, "mergeNetsplitBlock": 0,
        "terminalTotalDifficulty": 0,
        "shanghaiTime": 0, "cancunTime": 0, "pragueTime": 0, "osakaTime": 0,
        "depositContractAddress": "0x0000000000000000000000000000000000000000",
        "blobSchedule": {
            "cancun": blob(3, 6, 3338477),
            "prague": blob(6, 9, 5007716),
            "osaka": blob(6, 9, 5007716)
        }
    })
}

/// The fork a dev chain runs from its genesis (`loupe dev --fork`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DevFork {
    /// Every fork through Osaka, mainnet's fork: the default dev chain.
    #[default]
    Osaka,
    /// Osaka's forks and Amsterdam (`amsterdamTime: 0`), with EIP-8282's predeploys.
    Amsterdam,
}

impl DevFork {
    /// The fork's name as `--fork` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Osaka => "osaka",
            Self::Amsterdam => "amsterdam",
        }
    }

    /// The name of the chain's default datadir under `$XDG_DATA_HOME/loupe` (each fork has its
    /// own, so the chains never share one).
    pub fn datadir_name(self) -> &'static str {
        match self {
            Self::Osaka => "dev",
            Self::Amsterdam => "dev-amsterdam",
        }
    }

    /// The dev genesis of this fork: [`dev_genesis_json`] or [`amsterdam_dev_genesis_json`]
    /// with Amsterdam at genesis.
    pub fn genesis_json(self) -> String {
        match self {
            Self::Osaka => dev_genesis_json(),
            Self::Amsterdam => amsterdam_dev_genesis_json(0),
        }
    }
}

impl std::fmt::Display for DevFork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DevFork {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "osaka" => Ok(Self::Osaka),
            "amsterdam" | "glamsterdam" => Ok(Self::Amsterdam),
            _ => Err(format!("unknown dev fork {s:?} (osaka or amsterdam)")),
        }
    }
}

/// The dev genesis as geth-style JSON: every fork active from block 0 (through Osaka), merged
/// from genesis (TTD 0), Prague system contracts deployed, each dev account with 10,000 ETH.
pub fn dev_genesis_json() -> String {
    dev_genesis(None).to_string()
}

/// The dev genesis with Amsterdam scheduled at `amsterdam_time` (0: from genesis; later: a
/// chain that crosses the fork at the first block at or after it), and EIP-8282's builder
/// deposit and exit contracts deployed, which every Amsterdam block requires (EIP-8282,
/// "Deployment": the contracts must be in place before the fork).
pub fn amsterdam_dev_genesis_json(amsterdam_time: u64) -> String {
    dev_genesis(Some(amsterdam_time)).to_string()
}

/// EIP-8282's excess inhibitor (`2**256 - 1` in slot 0): while it is stored, a request to the
/// contract reverts; the first system call after the fork replaces it by an excess of 0.
const EXCESS_INHIBITOR: &str = "0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

fn dev_genesis(amsterdam_time: Option<u64>) -> serde_json::Value {
    use alloy_eips::{eip2935, eip4788, eip7002, eip7251, eip8282};
    let mut alloc = serde_json::Map::new();
    let balance = U256::from(10_000u64) * U256::from(10u64).pow(U256::from(18u64));
    for a in dev_accounts() {
        alloc.insert(format!("{a:#x}"), json!({ "balance": format!("{balance:#x}") }));
    }
    for (address, code) in [
        (eip4788::BEACON_ROOTS_ADDRESS, &eip4788::BEACON_ROOTS_CODE),
        (eip2935::HISTORY_STORAGE_ADDRESS, &eip2935::HISTORY_STORAGE_CODE),
        (
            eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS,
            &eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_CODE,
        ),
        (
            eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
            &eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_CODE,
        ),
    ] {
        alloc.insert(
            format!("{address:#x}"),
            json!({ "balance": "0x0", "nonce": "0x1", "code": code.to_string() }),
        );
    }
    let mut config = all_forks_config(DEV_CHAIN_ID);
    if let Some(time) = amsterdam_time {
        config["amsterdamTime"] = json!(time);
        // EIP-8282 deploys both contracts through a CREATE2 factory before the fork; a genesis
        // entry is the state that deployment leaves. The exit contract's constructor stores the
        // excess inhibitor in slot 0 (requests revert until the fork's first system call resets
        // it), the deposit contract's stores nothing (its fee getter answers at once on the
        // devnets that deploy it so). (The EIP-7002 and EIP-7251 entries above
        // carry no storage, as in geth's dev genesis, so that the default chain stays as it was;
        // under Prague from genesis their first system call would clear the inhibitor anyway.)
        alloc.insert(
            format!("{:#x}", eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS),
            json!({
                "balance": "0x0",
                "nonce": "0x1",
                "code": eip8282::BUILDER_DEPOSIT_CONTRACT_CODE.to_string(),
            }),
        );
        alloc.insert(
            format!("{:#x}", eip8282::BUILDER_EXIT_CONTRACT_ADDRESS),
            json!({
                "balance": "0x0",
                "nonce": "0x1",
                "code": eip8282::BUILDER_EXIT_CONTRACT_CODE.to_string(),
                "storage": { format!("{:#x}", B256::ZERO): EXCESS_INHIBITOR },
            }),
        );
    }
    json!({
        "config": config,
        "nonce": "0x0",
        "timestamp": "0x0",
        "extraData": "0x6c6f75706520646576",
        "gasLimit": "0x1c9c380",
        "difficulty": "0x0",
        "mixHash": "0x0000000000000000000000000000000000000000000000000000000000000000",
        "coinbase": "0x0000000000000000000000000000000000000000",
        "baseFeePerGas": "0x3b9aca00",
        "alloc": alloc
    })
}
