//! `loupe generate`: a deterministic, mainnet-shaped chain (genesis.json and chain.rlp).

use std::path::PathBuf;

use eyre::Result;

/// `loupe generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateCmd {
    /// Output directory (genesis.json and chain.rlp are written there).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Funded accounts in the genesis (besides 256 senders and the contracts).
    #[arg(long, value_name = "N")]
    pub accounts: u64,
    /// Storage slots of one big contract in the genesis, which ~15% of the transactions update,
    /// clear and add to (default: no big contract).
    #[arg(long, value_name = "M", default_value_t = 0)]
    pub contract_slots: u64,
    /// Blocks to build after genesis.
    #[arg(long, value_name = "B")]
    pub blocks: u64,
    /// Seed: the same seed and flags give byte-identical files.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Most transactions per block (default: as many as fit the gas limit, about 550 at 30M).
    #[arg(long, value_name = "T")]
    pub txs_per_block: Option<usize>,
    /// Block gas limit.
    #[arg(long, value_name = "G", default_value_t = crate::dev::generate::DEFAULT_GAS_LIMIT)]
    pub gas_limit: u64,
    /// Keep the work datadir (DIR/.work, a complete loupe datadir of the chain).
    #[arg(long)]
    pub keep_datadir: bool,
}

impl GenerateCmd {
    pub(super) fn run(self) -> Result<()> {
        let config = crate::dev::generate::GenerateConfig {
            out: self.out.clone(),
            accounts: self.accounts,
            contract_slots: self.contract_slots,
            blocks: self.blocks,
            seed: self.seed,
            txs_per_block: self.txs_per_block,
            gas_limit: self.gas_limit,
            keep_datadir: self.keep_datadir,
            quiet: false,
        };
        let summary = crate::dev::generate::generate(&config)?;
        print!("{summary}");
        println!(
            "wrote {} and {}",
            self.out.join("genesis.json").display(),
            self.out.join("chain.rlp").display()
        );
        if self.keep_datadir {
            println!(
                "kept the datadir {}",
                self.out.join(crate::dev::generate::WORK_DIR).display()
            );
        }
        Ok(())
    }
}
