//! `loupe witness run`: execute and verify a block from its execution witness, without a
//! datadir (`crate::witness`).

use std::path::PathBuf;

use clap::Subcommand;
use eyre::{Context, Result};

use crate::chain::{ChainSpec, Network};
use crate::witness::{WitnessError, parse_block, read_witness_file, run_block};

/// `loupe witness …`.
#[derive(Debug, Subcommand)]
pub enum WitnessCmd {
    /// Execute a block over its witness and check gas used, receipts root, logs bloom and the
    /// post-state root against its header; exits 0 only if every check holds, else names the
    /// first mismatch (or the node, code or header the witness lacks).
    Run(WitnessRunCmd),
}

/// `loupe witness run`.
#[derive(Debug, clap::Args)]
pub struct WitnessRunCmd {
    /// The witness: `debug_executionWitness` JSON (geth's or reth's, bare or as a JSON-RPC
    /// answer), geth's `ExtWitness` RLP (binary or hex), a zeth host cache (`N.json.gz`, which
    /// holds the block) or a nimbus-eth1 PersistBlockTests dump (which holds the block).
    #[arg(long, value_name = "FILE")]
    pub witness: PathBuf,
    /// The block: RLP (binary or hex) or `eth_getBlockByNumber(n, true)` JSON. Needed unless
    /// the witness file holds the block.
    #[arg(long, value_name = "FILE")]
    pub block: Option<PathBuf>,
    /// The chain's rules: `mainnet` (the default), `sepolia`, `holesky`, `hoodi`, or a
    /// genesis.json.
    #[arg(long = "chain", value_name = "NAME|FILE", conflicts_with = "datadir")]
    pub chain: Option<String>,
    /// Take the chain's rules from this datadir's chain spec (nothing else is read from it).
    #[arg(long, value_name = "DIR")]
    pub datadir: Option<PathBuf>,
}

impl WitnessCmd {
    /// Runs the subcommand.
    pub fn run(self) -> Result<()> {
        match self {
            Self::Run(cmd) => cmd.run(),
        }
    }
}

impl WitnessRunCmd {
    fn spec(&self) -> Result<ChainSpec> {
        if let Some(dir) = &self.datadir {
            if !dir.join("loupe.redb").is_file() {
                eyre::bail!("{} holds no loupe datadir", dir.display());
            }
            let db = crate::storage::Database::open(dir)?;
            return Ok(
                crate::import::load_spec(&db)?.ok_or(crate::import::ImportError::NotInitialised)?
            );
        }
        let chain = self.chain.as_deref().unwrap_or("mainnet");
        Ok(match Network::from_name(chain) {
            Some(network) => ChainSpec::named(network)?,
            None => ChainSpec::from_genesis_file(std::path::Path::new(chain))
                .wrap_err_with(|| format!("--chain {chain}"))?,
        })
    }

    fn run(self) -> Result<()> {
        let spec = self.spec()?;
        let loaded = read_witness_file(&self.witness)?;
        let block = match &self.block {
            Some(path) => {
                let bytes = std::fs::read(path).map_err(|source| WitnessError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                parse_block(&bytes)?
            }
            None => loaded.block.ok_or(WitnessError::NoBlock)?,
        };
        let number = block.header.number;
        let hash = block.header.hash_slow();
        let txs = block.body.transactions.len();
        let out = run_block(&spec, &loaded.witness, &block)
            .map_err(|e| eyre::eyre!("block {number} ({hash}): {e}"))?;
        println!(
            "block {number} ({hash}): {txs} transactions, gas used {}, receipts root, logs bloom \
             and state root {} ok ({} witness: {} accounts and {} slots read)",
            out.gas_used,
            out.state_root,
            loaded.format,
            out.reads.accounts.len(),
            out.reads.storage.values().map(|s| s.len()).sum::<usize>(),
        );
        Ok(())
    }
}
