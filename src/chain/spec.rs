//! [`ChainSpec`]: chain id, fork activations and blob parameters of one chain.

use std::sync::Arc;

use alloy_consensus::Header;
use alloy_eips::eip7840::BlobParams;
use alloy_eips::eip7892::BlobScheduleBlobParams;
use alloy_evm::eth::spec::EthExecutorSpec;
use alloy_genesis::Genesis;
use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork, EthereumHardforks, ForkCondition};
use alloy_primitives::{Address, B256, U256};

use super::dialect::{self, GenesisReading};
use super::{ChainError, DifficultyRules, HeaderPolicy, Network, genesis_header};

/// Everything loupe needs to know about a chain to execute its blocks.
///
/// Cheap to clone (the data sits behind an [`Arc`]); the block executor needs `Clone`.
#[derive(Debug, Clone)]
pub struct ChainSpec {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    genesis: Genesis,
    genesis_header: Header,
    genesis_hash: B256,
    hardforks: EthereumChainHardforks,
    blob_schedule: BlobScheduleBlobParams,
    /// The named network, recognised by chain id and genesis hash.
    network: Option<Network>,
    /// The datadir's header policy (`Strict` until [`ChainSpec::with_header_policy`]).
    header_policy: HeaderPolicy,
    /// How the genesis file was read (its dialect, what was dropped, a fixed difficulty).
    reading: GenesisReading,
}

impl ChainSpec {
    /// Reads a `genesis.json` (geth's or Besu's dialect) from disk.
    pub fn from_genesis_file(path: &std::path::Path) -> Result<Self, ChainError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ChainError::Read { path: path.display().to_string(), error })?;
        Self::from_genesis_json(&text).map_err(|e| e.at(path))
    }

    /// Parses a genesis from JSON text, in geth's or Besu's dialect (`chain::dialect`: field
    /// names matched ignoring case, unknown fields dropped, Besu's cumulative milestones and
    /// fixed difficulty); [`ChainSpec::genesis_reading`] says how it was read.
    pub fn from_genesis_json(text: &str) -> Result<Self, ChainError> {
        let (genesis, reading) = read_genesis_json(text)?;
        Self::build(genesis, None, reading)
    }

    /// Builds the spec of a genesis whose allocation was streamed into a database (its `alloc`
    /// is empty): `state_root` is the root the database computed for that allocation. The
    /// genesis is taken as geth reads it, without a fixed difficulty: for one read from a file,
    /// see [`ChainSpec::from_genesis_read`].
    pub fn from_genesis_with_state_root(
        genesis: Genesis,
        state_root: B256,
    ) -> Result<Self, ChainError> {
        Self::build(genesis, Some(state_root), GenesisReading::default())
    }

    /// [`ChainSpec::from_genesis_with_state_root`] for a genesis read from a file
    /// ([`read_genesis_json`], [`super::stream_genesis`]), with how it was read (a fixed
    /// difficulty comes with the reading).
    pub fn from_genesis_read(
        genesis: Genesis,
        reading: GenesisReading,
        state_root: B256,
    ) -> Result<Self, ChainError> {
        Self::build(genesis, Some(state_root), reading)
    }

    /// Builds the spec from a parsed genesis: fork list as reth derives it, with two
    /// corrections — the DAO fork only when `daoForkSupport` is set, and the merge placed at
    /// `mergeNetsplitBlock` (never guessed as block 0 for a chain with a non-zero TTD). The
    /// genesis of a named network (its chain id and genesis hash) gets the network's schedule
    /// from code instead, whatever its configuration says.
    pub fn from_genesis(genesis: Genesis) -> Result<Self, ChainError> {
        Self::build(genesis, None, GenesisReading::default())
    }

    fn build(
        genesis: Genesis,
        state_root: Option<B256>,
        reading: GenesisReading,
    ) -> Result<Self, ChainError> {
        let c = &genesis.config;
        let mut forks = vec![(EthereumHardfork::Frontier, ForkCondition::Block(0))];
        let block_forks = [
            (EthereumHardfork::Homestead, c.homestead_block),
            (EthereumHardfork::Dao, c.dao_fork_block.filter(|_| c.dao_fork_support)),
            (EthereumHardfork::Tangerine, c.eip150_block),
            (EthereumHardfork::SpuriousDragon, c.eip155_block),
            (EthereumHardfork::Byzantium, c.byzantium_block),
            (EthereumHardfork::Constantinople, c.constantinople_block),
            (EthereumHardfork::Petersburg, c.petersburg_block),
            (EthereumHardfork::Istanbul, c.istanbul_block),
            (EthereumHardfork::MuirGlacier, c.muir_glacier_block),
            (EthereumHardfork::Berlin, c.berlin_block),
            (EthereumHardfork::London, c.london_block),
            (EthereumHardfork::ArrowGlacier, c.arrow_glacier_block),
            (EthereumHardfork::GrayGlacier, c.gray_glacier_block),
        ];
        forks.extend(
            block_forks.into_iter().filter_map(|(f, b)| Some((f, ForkCondition::Block(b?)))),
        );
        // The merge: placed at `mergeNetsplitBlock` here, and moved to a named network's real
        // first proof-of-stake block below, once the genesis hash says which network this is.
        let ttd = c.terminal_total_difficulty;
        let placed =
            ttd.map(|ttd| (c.merge_netsplit_block.or_else(|| ttd.is_zero().then_some(0)), ttd));
        if let Some((activation, ttd)) = placed {
            forks.push((
                EthereumHardfork::Paris,
                ForkCondition::TTD {
                    activation_block_number: activation.unwrap_or(u64::MAX),
                    fork_block: c.merge_netsplit_block,
                    total_difficulty: ttd,
                },
            ));
        }
        let time_forks = [
            (EthereumHardfork::Shanghai, c.shanghai_time),
            (EthereumHardfork::Cancun, c.cancun_time),
            (EthereumHardfork::Prague, c.prague_time),
            (EthereumHardfork::Osaka, c.osaka_time),
            (EthereumHardfork::Bpo1, c.bpo1_time),
            (EthereumHardfork::Bpo2, c.bpo2_time),
            (EthereumHardfork::Bpo3, c.bpo3_time),
            (EthereumHardfork::Bpo4, c.bpo4_time),
            (EthereumHardfork::Bpo5, c.bpo5_time),
            (EthereumHardfork::Amsterdam, c.amsterdam_time),
        ];
        forks.extend(
            time_forks.into_iter().filter_map(|(f, t)| Some((f, ForkCondition::Timestamp(t?)))),
        );
        let mut hardforks = EthereumChainHardforks::new(forks);
        let blob_schedule = blob_schedule_of(c);
        let mut genesis_header = genesis_header(&genesis, &hardforks);
        if let Some(root) = state_root {
            genesis_header.state_root = root;
        }
        let genesis_hash = genesis_header.hash_slow();
        // A named network's genesis, however its configuration was written: its fork schedule
        // is the network's, from code (as reth does), with the merge at its first PoS block.
        let network = Network::recognise(c.chain_id, genesis_hash);
        if let Some(n) = network {
            hardforks = EthereumChainHardforks::new(n.hardforks());
        } else if let Some((None, ttd)) = placed
            && Network::from_chain_id(c.chain_id).is_none()
        {
            // (A named network's chain id with another genesis keeps the merge unplaced: `init`
            // refuses it, naming both genesis hashes.)
            return Err(ChainError::MergeBlockUnknown { ttd });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                genesis,
                genesis_header,
                genesis_hash,
                hardforks,
                blob_schedule,
                network,
                header_policy: HeaderPolicy::Strict,
                reading,
            }),
        })
    }

    /// The spec of a named network, with its genesis allocation (the binary's own copy) in
    /// [`ChainSpec::genesis`]. Fails only if the embedded genesis does not give the network's
    /// known hash, which would be a broken build.
    pub fn named(network: Network) -> Result<Self, ChainError> {
        let json = network.genesis_json().map_err(|message| ChainError::Embedded { message })?;
        let spec = Self::from_genesis_json(&json)?;
        if spec.genesis_hash() != network.genesis_hash() {
            return Err(ChainError::Embedded {
                message: format!(
                    "the embedded {network} genesis gives hash {}, not the network's {}",
                    spec.genesis_hash(),
                    network.genesis_hash()
                ),
            });
        }
        Ok(spec)
    }

    /// The same spec under another header policy (the datadir's).
    pub fn with_header_policy(self, policy: HeaderPolicy) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(Inner {
                genesis: inner.genesis.clone(),
                genesis_header: inner.genesis_header.clone(),
                genesis_hash: inner.genesis_hash,
                hardforks: inner.hardforks.clone(),
                blob_schedule: inner.blob_schedule.clone(),
                network: inner.network,
                header_policy: policy,
                reading: inner.reading.clone(),
            }),
        }
    }

    /// The named network this chain is (recognised by its chain id and genesis hash).
    pub fn network(&self) -> Option<Network> {
        self.inner.network
    }

    /// How strictly headers are checked (recorded in the datadir at `init`).
    pub fn header_policy(&self) -> HeaderPolicy {
        self.inner.header_policy
    }

    /// The DAO fork's block and whether this chain took it (`daoForkSupport`): from the
    /// configuration, so that a chain that declares the block without support is held to the
    /// other side of the extra-data rule (geth's rule).
    pub fn dao_fork(&self) -> Option<(u64, bool)> {
        if let Some(n) = self.inner.network {
            return (n == Network::Mainnet)
                .then_some((alloy_hardforks::ethereum::MAINNET_DAO_BLOCK, true));
        }
        let c = &self.inner.genesis.config;
        c.dao_fork_block.map(|b| (b, c.dao_fork_support))
    }

    /// The chain id (EIP-155).
    pub fn chain_id(&self) -> u64 {
        self.inner.genesis.config.chain_id
    }

    /// The parsed genesis file.
    pub fn genesis(&self) -> &Genesis {
        &self.inner.genesis
    }

    /// How the genesis file was read: its dialect, the fields dropped, the forks a Besu
    /// reading implied, a fixed difficulty.
    pub fn genesis_reading(&self) -> &GenesisReading {
        &self.inner.reading
    }

    /// The genesis block header (block 0).
    pub fn genesis_header(&self) -> &Header {
        &self.inner.genesis_header
    }

    /// Hash of the genesis block.
    pub fn genesis_hash(&self) -> B256 {
        self.inner.genesis_hash
    }

    /// Blob parameters in force at `timestamp`: a scheduled BPO entry if one is active, else
    /// those of the newest of Osaka, Prague, Cancun that is active, else none (pre-Cancun).
    pub fn blob_params_at(&self, timestamp: u64) -> Option<BlobParams> {
        let s = &self.inner.blob_schedule;
        if let Some(p) = s.active_scheduled_params_at_timestamp(timestamp) {
            return Some(*p);
        }
        if self.is_osaka_active_at_timestamp(timestamp) {
            Some(s.osaka)
        } else if self.is_prague_active_at_timestamp(timestamp) {
            Some(s.prague)
        } else if self.is_cancun_active_at_timestamp(timestamp) {
            Some(s.cancun)
        } else {
            None
        }
    }

    /// Whether Constantinople rules apply at `block` (used to correct revm's missing
    /// Constantinople spec, see `evm::env`).
    pub fn is_constantinople_active_at_block(&self, block: u64) -> bool {
        self.ethereum_fork_activation(EthereumHardfork::Constantinople).active_at_block(block)
    }

    /// Total difficulty at which the merge happened, if the chain merged.
    pub fn terminal_total_difficulty(&self) -> Option<U256> {
        self.inner.genesis.config.terminal_total_difficulty
    }
}

/// The blob schedule of `config`, with geth's spelling of Amsterdam's entry (`amsterdam`) read
/// too: alloy-genesis 2.5 reads only `Amsterdam` and would drop it silently.
fn blob_schedule_of(config: &alloy_genesis::ChainConfig) -> BlobScheduleBlobParams {
    match config.blob_schedule.get("amsterdam") {
        Some(params) if !config.blob_schedule.contains_key("Amsterdam") => {
            let mut c = config.clone();
            c.blob_schedule.insert("Amsterdam".to_string(), *params);
            c.blob_schedule_blob_params()
        }
        _ => config.blob_schedule_blob_params(),
    }
}

impl EthereumHardforks for ChainSpec {
    fn ethereum_fork_activation(&self, fork: EthereumHardfork) -> ForkCondition {
        self.inner.hardforks.ethereum_fork_activation(fork)
    }
}

impl DifficultyRules for ChainSpec {
    fn fixed_difficulty(&self) -> Option<U256> {
        self.inner.reading.fixed_difficulty
    }
}

impl EthExecutorSpec for ChainSpec {
    fn deposit_contract_address(&self) -> Option<Address> {
        self.inner.genesis.config.deposit_contract_address
    }
}

/// Reads genesis JSON text in geth's or Besu's dialect: the genesis (allocation included) and
/// how it was read.
pub fn read_genesis_json(text: &str) -> Result<(Genesis, GenesisReading), ChainError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| ChainError::Parse { path: "<json>".into(), error })?;
    let serde_json::Value::Object(map) = value else {
        return Err(ChainError::Dialect {
            path: "<json>".into(),
            message: "a genesis is a JSON object".into(),
        });
    };
    let read = dialect::read(map, Default::default())?;
    Ok((read.genesis, read.reading))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Amsterdam's blob parameters are read under geth's key as under alloy's.
    #[test]
    fn amsterdam_blob_parameters_under_either_spelling() {
        for key in ["amsterdam", "Amsterdam"] {
            let json = format!(
                r#"{{"config":{{"chainId":7,"terminalTotalDifficulty":0,"shanghaiTime":0,
                "cancunTime":0,"pragueTime":0,"osakaTime":0,"amsterdamTime":100,
                "blobSchedule":{{"{key}":{{"target":20,"max":30,"baseFeeUpdateFraction":9000000}}}}}},
                "difficulty":"0x0","gasLimit":"0x1000000","alloc":{{}}}}"#
            );
            let spec = ChainSpec::from_genesis_json(&json).unwrap();
            assert_eq!(spec.blob_params_at(99).map(|p| p.max_blob_count), Some(9), "{key}");
            let at = spec.blob_params_at(100).unwrap();
            assert_eq!((at.target_blob_count, at.max_blob_count), (20, 30), "{key}");
            assert_eq!(at.update_fraction, 9_000_000, "{key}");
        }
    }

    #[test]
    fn dao_fork_needs_support_flag() {
        // (Homestead named: geth refuses a DAO fork without it, and loupe then reads the file
        // as Besu's, which has no support flag.)
        let json = r#"{"config":{"chainId":1,"homesteadBlock":0,"daoForkBlock":5,"daoForkSupport":false},
            "difficulty":"0x1","gasLimit":"0x1000000","alloc":{}}"#;
        let spec = ChainSpec::from_genesis_json(json).unwrap();
        assert_eq!(spec.ethereum_fork_activation(EthereumHardfork::Dao), ForkCondition::Never);
        let json = json.replace("\"daoForkSupport\":false", "\"daoForkSupport\":true");
        let spec = ChainSpec::from_genesis_json(&json).unwrap();
        assert_eq!(spec.ethereum_fork_activation(EthereumHardfork::Dao), ForkCondition::Block(5));
    }

    #[test]
    fn merge_without_netsplit_block_is_refused_unless_ttd_zero() {
        let json = r#"{"config":{"chainId":7,"terminalTotalDifficulty":100},
            "difficulty":"0x1","gasLimit":"0x1000000","alloc":{}}"#;
        assert!(matches!(
            ChainSpec::from_genesis_json(json),
            Err(ChainError::MergeBlockUnknown { .. })
        ));
        let zero = json.replace("100", "0");
        let spec = ChainSpec::from_genesis_json(&zero).unwrap();
        assert!(spec.is_paris_active_at_block(0));
        // Under a named network's chain id with another genesis, the spec builds with the merge
        // unplaced, for `init` to refuse naming both genesis hashes.
        let claims_mainnet = json.replace("\"chainId\":7", "\"chainId\":1");
        let spec = ChainSpec::from_genesis_json(&claims_mainnet).unwrap();
        assert_eq!(spec.network(), None);
        assert!(!spec.is_paris_active_at_block(u64::MAX - 1));
    }
}
