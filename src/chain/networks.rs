//! The public networks loupe knows by name (`--chain mainnet|sepolia|holesky|hoodi`): their
//! genesis allocations (embedded, zstd-compressed), fork schedules from code, the merge pinned
//! at its real first proof-of-stake block, and their known genesis hashes.

use alloy_hardforks::{EthereumHardfork, ForkCondition, ethereum};
use alloy_primitives::{B256, U256, b256};
use serde_json::{Value, json};

/// A public network loupe ships the genesis of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Network {
    /// Ethereum mainnet (chain id 1).
    Mainnet,
    /// Sepolia (chain id 11155111).
    Sepolia,
    /// Holesky (chain id 17000).
    Holesky,
    /// Hoodi (chain id 560048).
    Hoodi,
}

/// The blob schedule all four networks share (geth `params/config.go`, alloy-eips EIP-7840
/// and EIP-7892): target, max, base-fee update fraction.
const BLOB_SCHEDULE: [(&str, u64, u64, u64); 5] = [
    ("cancun", 3, 6, 3_338_477),
    ("prague", 6, 9, 5_007_716),
    ("osaka", 6, 9, 5_007_716),
    ("bpo1", 10, 15, 8_346_193),
    ("bpo2", 14, 21, 11_684_671),
];

impl Network {
    /// Every network, in the order `--chain` lists them.
    pub const ALL: [Self; 4] = [Self::Mainnet, Self::Sepolia, Self::Holesky, Self::Hoodi];

    /// The name `--chain` takes.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Mainnet => "mainnet",
            Self::Sepolia => "sepolia",
            Self::Holesky => "holesky",
            Self::Hoodi => "hoodi",
        }
    }

    /// The network called `name` (as `--chain` spells it), if loupe knows it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.name().eq_ignore_ascii_case(name))
    }

    /// The network with chain id `id`, if loupe knows it.
    pub fn from_chain_id(id: u64) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.chain_id() == id)
    }

    /// EIP-155 chain id.
    pub const fn chain_id(self) -> u64 {
        match self {
            Self::Mainnet => 1,
            Self::Sepolia => 11_155_111,
            Self::Holesky => 17_000,
            Self::Hoodi => 560_048,
        }
    }

    /// The published hash of block 0; the genesis built from the embedded allocation must
    /// give it.
    pub const fn genesis_hash(self) -> B256 {
        match self {
            Self::Mainnet => {
                b256!("d4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3")
            }
            Self::Sepolia => {
                b256!("25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9")
            }
            Self::Holesky => {
                b256!("b5f7f912443c940f21fd611f12828d75b534364ed9e95ca4e307729a4661bde4")
            }
            Self::Hoodi => {
                b256!("bbe312868b376a3001692a646dd2d7d1e4406380dfd86b98aa8a34d1557c971b")
            }
        }
    }

    /// The network whose chain id and genesis hash these are.
    pub fn recognise(chain_id: u64, genesis_hash: B256) -> Option<Self> {
        Self::from_chain_id(chain_id).filter(|n| n.genesis_hash() == genesis_hash)
    }

    /// The embedded genesis file (header fields and allocation, zstd-compressed), copied from
    /// reth's `crates/chainspec/res/genesis/` (public chain data).
    fn compressed_alloc(self) -> &'static [u8] {
        match self {
            Self::Mainnet => include_bytes!("networks/mainnet.alloc.json.zst"),
            Self::Sepolia => include_bytes!("networks/sepolia.alloc.json.zst"),
            Self::Holesky => include_bytes!("networks/holesky.alloc.json.zst"),
            Self::Hoodi => include_bytes!("networks/hoodi.alloc.json.zst"),
        }
    }

    /// The network's first proof-of-stake block, the block from which the merge's rules apply
    /// (no block reward, no difficulty), and its terminal total difficulty. On Sepolia this is
    /// not the `mergeNetsplitBlock` of its configuration (1,735,371), which only marks the fork
    /// id.
    pub fn merge(self) -> (u64, U256) {
        match self {
            Self::Mainnet => (ethereum::MAINNET_PARIS_BLOCK, ethereum::MAINNET_PARIS_TTD),
            Self::Sepolia => (ethereum::SEPOLIA_PARIS_BLOCK, ethereum::SEPOLIA_PARIS_TTD),
            Self::Holesky | Self::Hoodi => (0, U256::ZERO),
        }
    }

    /// Total difficulty of the last proof-of-work block (`None` for a network that started
    /// under proof of stake).
    pub fn final_total_difficulty(self) -> Option<U256> {
        match self {
            Self::Mainnet => Some(ethereum::MAINNET_PARIS_FINAL_TD),
            Self::Sepolia => Some(ethereum::SEPOLIA_PARIS_FINAL_TD),
            Self::Holesky | Self::Hoodi => None,
        }
    }

    /// The fork schedule: alloy-hardforks' table, without the DAO fork where the network never
    /// had it (the testnets' tables put it at block 0), and the merge at its real first
    /// proof-of-stake block.
    pub fn hardforks(self) -> Vec<(EthereumHardfork, ForkCondition)> {
        let table: Vec<_> = match self {
            Self::Mainnet => EthereumHardfork::mainnet().to_vec(),
            Self::Sepolia => EthereumHardfork::sepolia().to_vec(),
            Self::Holesky => EthereumHardfork::holesky().to_vec(),
            Self::Hoodi => EthereumHardfork::hoodi().to_vec(),
        };
        let (block, ttd) = self.merge();
        table
            .into_iter()
            .filter(|(f, _)| self == Self::Mainnet || *f != EthereumHardfork::Dao)
            .map(|(f, c)| match (f, c) {
                (EthereumHardfork::Paris, ForkCondition::TTD { fork_block, .. }) => (
                    f,
                    ForkCondition::TTD {
                        activation_block_number: block,
                        fork_block,
                        total_difficulty: ttd,
                    },
                ),
                other => other,
            })
            .collect()
    }

    /// The geth-style `config` of the network (what geth's `params/config.go` holds), so that
    /// everything read from a genesis configuration (`eth_config`'s fork ids, the blob
    /// schedule, the deposit contract) is the network's.
    pub fn config(self) -> Value {
        let blob_schedule: serde_json::Map<String, Value> = BLOB_SCHEDULE
            .iter()
            .map(|(name, target, max, fraction)| {
                (
                    (*name).to_string(),
                    json!({"target": target, "max": max, "baseFeeUpdateFraction": fraction}),
                )
            })
            .collect();
        let mut c = match self {
            Self::Mainnet => json!({
                "homesteadBlock": 1_150_000, "daoForkBlock": 1_920_000, "daoForkSupport": true,
                "eip150Block": 2_463_000, "eip155Block": 2_675_000, "eip158Block": 2_675_000,
                "byzantiumBlock": 4_370_000, "constantinopleBlock": 7_280_000,
                "petersburgBlock": 7_280_000, "istanbulBlock": 9_069_000,
                "muirGlacierBlock": 9_200_000, "berlinBlock": 12_244_000,
                "londonBlock": 12_965_000, "arrowGlacierBlock": 13_773_000,
                "grayGlacierBlock": 15_050_000,
                "terminalTotalDifficulty": ethereum::MAINNET_PARIS_TTD,
                "shanghaiTime": 1_681_338_455u64, "cancunTime": 1_710_338_135u64,
                "pragueTime": 1_746_612_311u64, "osakaTime": 1_764_798_551u64,
                "bpo1Time": 1_765_290_071u64, "bpo2Time": 1_767_747_671u64,
                "depositContractAddress": "0x00000000219ab540356cbb839cbe05303d7705fa",
            }),
            Self::Sepolia => json!({
                "homesteadBlock": 0, "eip150Block": 0, "eip155Block": 0, "eip158Block": 0,
                "byzantiumBlock": 0, "constantinopleBlock": 0, "petersburgBlock": 0,
                "istanbulBlock": 0, "muirGlacierBlock": 0, "berlinBlock": 0, "londonBlock": 0,
                "terminalTotalDifficulty": ethereum::SEPOLIA_PARIS_TTD,
                "mergeNetsplitBlock": ethereum::SEPOLIA_PARIS_FORK_BLOCK,
                "shanghaiTime": 1_677_557_088u64, "cancunTime": 1_706_655_072u64,
                "pragueTime": 1_741_159_776u64, "osakaTime": 1_760_427_360u64,
                "bpo1Time": 1_761_017_184u64, "bpo2Time": 1_761_607_008u64,
                "amsterdamTime": ethereum::SEPOLIA_AMSTERDAM_TIMESTAMP,
                "depositContractAddress": "0x7f02c3e3c98b133055b8b348b2ac625669ed295d",
            }),
            Self::Holesky => json!({
                "homesteadBlock": 0, "eip150Block": 0, "eip155Block": 0, "eip158Block": 0,
                "byzantiumBlock": 0, "constantinopleBlock": 0, "petersburgBlock": 0,
                "istanbulBlock": 0, "berlinBlock": 0, "londonBlock": 0,
                "terminalTotalDifficulty": 0, "mergeNetsplitBlock": 0,
                "shanghaiTime": 1_696_000_704u64, "cancunTime": 1_707_305_664u64,
                "pragueTime": 1_740_434_112u64, "osakaTime": 1_759_308_480u64,
                "bpo1Time": 1_759_800_000u64, "bpo2Time": 1_760_389_824u64,
                "depositContractAddress": "0x4242424242424242424242424242424242424242",
            }),
            Self::Hoodi => json!({
                "homesteadBlock": 0, "eip150Block": 0, "eip155Block": 0, "eip158Block": 0,
                "byzantiumBlock": 0, "constantinopleBlock": 0, "petersburgBlock": 0,
                "istanbulBlock": 0, "berlinBlock": 0, "londonBlock": 0,
                "terminalTotalDifficulty": 0, "mergeNetsplitBlock": 0,
                "shanghaiTime": 0, "cancunTime": 0,
                "pragueTime": 1_742_999_832u64, "osakaTime": 1_761_677_592u64,
                "bpo1Time": 1_762_365_720u64, "bpo2Time": 1_762_955_544u64,
                "depositContractAddress": "0x00000000219ab540356cbb839cbe05303d7705fa",
            }),
        };
        if let Value::Object(map) = &mut c {
            map.insert("chainId".into(), json!(self.chain_id()));
            if matches!(self, Self::Holesky | Self::Hoodi) {
                map.insert("terminalTotalDifficultyPassed".into(), json!(true));
            }
            map.insert("blobSchedule".into(), Value::Object(blob_schedule));
        }
        c
    }

    /// The network's `genesis.json`: the embedded header fields and allocation with
    /// [`Network::config`] as its `config`.
    pub fn genesis_json(self) -> Result<String, String> {
        let bytes = zstd::decode_all(self.compressed_alloc()).map_err(|e| {
            format!("the embedded {} genesis does not decompress: {e}", self.name())
        })?;
        let mut genesis: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the embedded {} genesis is not JSON: {e}", self.name()))?;
        let Value::Object(map) = &mut genesis else {
            return Err(format!("the embedded {} genesis is not a JSON object", self.name()));
        };
        map.insert("config".into(), self.config());
        Ok(genesis.to_string())
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How strictly headers are checked, recorded in the datadir at `init`.
///
/// `Strict` applies every consensus rule. `Dev` exists for anvil (and hardhat), which mine
/// blocks with the parent's timestamp on purpose and let their user set the next base fee: it
/// relaxes exactly those two rules (a timestamp equal to the parent's is taken, and the base
/// fee's value is not checked, though the field is still required from London on). It is the
/// default only for chain id 31337 and refused for the named networks and their chain ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeaderPolicy {
    /// Every rule.
    #[default]
    Strict,
    /// Every rule but a strictly later timestamp and the base fee's value.
    Dev,
}

/// anvil's and hardhat's chain id, whose datadirs default to [`HeaderPolicy::Dev`].
pub const ANVIL_CHAIN_ID: u64 = 31_337;

impl HeaderPolicy {
    /// The name `--header-policy` takes and the datadir records.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Dev => "dev",
        }
    }

    /// The policy called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "strict" => Some(Self::Strict),
            "dev" => Some(Self::Dev),
            _ => None,
        }
    }

    /// The policy a new datadir of chain `chain_id` gets when none is asked for.
    pub const fn default_for(chain_id: u64) -> Self {
        if chain_id == ANVIL_CHAIN_ID { Self::Dev } else { Self::Strict }
    }
}

impl std::fmt::Display for HeaderPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
