//! `loupe witness run` and `loupe witness serve`: execute and verify a block from its execution
//! witness without a datadir (`crate::witness`), and serve the block and its parent's state
//! from an anchored datadir built from the run ([`anchored_datadir`]).

use std::path::PathBuf;

use clap::Subcommand;
use eyre::{Context, Result};

use crate::chain::{ChainSpec, Network};
use alloy_consensus::{Block, Eip658Value, Header, TxEnvelope};

use crate::import::{AnchorAccount, TrustedRoots, import_block_trusted_root, init_anchored};
use crate::storage::Database;
use crate::witness::{
    StatelessOutcome, Witness, WitnessError, parse_block, read_witness_file, run_block,
    run_block_with,
};

/// `loupe witness …`.
#[derive(Debug, Subcommand)]
pub enum WitnessCmd {
    /// Execute a block over its witness and check gas used, receipts root, logs bloom and the
    /// post-state root against its header; exits 0 only if every check holds, else names the
    /// first mismatch (or the node, code or header the witness lacks).
    Run(WitnessRunCmd),
    /// Verify the block as `run` does, then serve JSON-RPC for it and its parent's state
    /// (blocks, receipts, traces, calls at either block) through the node's ordinary read
    /// paths, from a temporary datadir holding what the witness proves. State the witness does
    /// not hold reads as absent; `eth_getProof` is refused.
    Serve(Box<WitnessServeCmd>),
}

/// `loupe witness serve`.
#[derive(Debug, clap::Args)]
pub struct WitnessServeCmd {
    /// The witness, the block and the chain, as for `loupe witness run`.
    #[command(flatten)]
    pub input: WitnessRunCmd,
    /// Server flags, as for `loupe node`.
    #[command(flatten)]
    pub rpc: super::args::RpcArgs,
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
    /// Read through a trie node the witness lacks as an absent account or an unset slot (as
    /// geth reads an incomplete witness) instead of failing; such reads are listed, and every
    /// check against the header is still made. `run` only.
    #[arg(long)]
    pub missing_as_absent: bool,
}

impl WitnessCmd {
    /// Runs the subcommand.
    pub fn run(self) -> Result<()> {
        match self {
            Self::Run(cmd) => cmd.run(),
            Self::Serve(cmd) => cmd.run(),
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

    /// The chain's rules, the witness and the block the flags name.
    fn load(&self) -> Result<(ChainSpec, Witness, Block<TxEnvelope>, &'static str)> {
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
        Ok((spec, loaded.witness, block, loaded.format))
    }

    fn run(self) -> Result<()> {
        let (spec, witness, block, format) = self.load()?;
        let number = block.header.number;
        let hash = block.header.hash_slow();
        let txs = block.body.transactions.len();
        let out = run_block_with(&spec, &witness, &block, self.missing_as_absent)
            .map_err(|e| eyre::eyre!("block {number} ({hash}): {e}"))?;
        println!(
            "block {number} ({hash}): {txs} transactions, gas used {}, receipts root, logs bloom \
             and state root {} ok ({} witness: {} accounts and {} slots read)",
            out.gas_used,
            out.state_root,
            format,
            out.reads.accounts.len(),
            out.reads.storage.values().map(|s| s.len()).sum::<usize>(),
        );
        for read in &out.unresolved {
            println!("taken as absent (--missing-as-absent): {read}");
        }
        Ok(())
    }
}

impl WitnessServeCmd {
    fn run(self) -> Result<()> {
        if self.input.missing_as_absent {
            eyre::bail!(
                "--missing-as-absent is for `loupe witness run`: serving reads must not guess"
            );
        }
        let (spec, witness, block, _) = self.input.load()?;
        let number = block.header.number;
        let dir = tempfile::Builder::new().prefix("loupe-witness-").tempdir()?;
        let (db, out) = anchored_datadir(dir.path(), &spec, &witness, &block)
            .map_err(|e| eyre::eyre!("block {number}: {e}"))?;
        tracing::info!(
            target: "witness",
            number,
            state_root = %out.state_root,
            accounts = out.reads.accounts.len(),
            datadir = %dir.path().display(),
            "block verified from its witness; serving it and its parent's state"
        );
        let mut config = self.rpc.to_config()?;
        super::serve::with_explorer(&mut config, self.rpc.explorer.unwrap_or(false));
        let served = super::serve(std::sync::Arc::new(db), spec, config, None, None);
        drop(dir);
        served
    }
}

/// Runs `block` over `witness` ([`run_block`]: every root checked against the header), then
/// builds in `dir` a datadir anchored at its parent that holds what the run read (accounts,
/// slots, the code it loaded, the ancestor headers the witness links to the parent), and imports
/// the block into it on the roots the run computed: the node's ordinary paths then serve the
/// block and both states.
pub fn anchored_datadir(
    dir: &std::path::Path,
    spec: &ChainSpec,
    witness: &Witness,
    block: &Block<TxEnvelope>,
) -> Result<(Database, StatelessOutcome)> {
    let out = run_block(spec, witness, block)?;
    let accounts: Vec<AnchorAccount> = out
        .reads
        .accounts
        .iter()
        .map(|(address, info)| AnchorAccount {
            address: *address,
            code: info.as_ref().and_then(|i| witness.codes.get(&i.code_hash).cloned()),
            info: info.clone(),
            storage: out
                .reads
                .storage
                .get(address)
                .map(|slots| slots.iter().map(|(k, v)| (*k, *v)).collect())
                .unwrap_or_default(),
        })
        .collect();
    // The parent, then each ancestor the witness holds, linked by parent hashes.
    let mut headers: Vec<Header> = Vec::new();
    let mut next = Some(block.header.parent_hash);
    while let Some(header) = next.and_then(|hash| witness.header_by_hash(hash)) {
        next = (header.number > 0).then_some(header.parent_hash);
        headers.push(header.clone());
    }
    headers.reverse();
    let db = init_anchored(dir, spec, &headers, &accounts)?;
    let intermediate = out
        .receipts
        .iter()
        .filter_map(|r| match r.as_receipt().map(|r| r.status) {
            Some(Eip658Value::PostState(root)) => Some(root),
            _ => None,
        })
        .collect();
    let roots = TrustedRoots { state_root: out.state_root, intermediate };
    import_block_trusted_root(&db, spec, block, &roots)?;
    Ok((db, out))
}
