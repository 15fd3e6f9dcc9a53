//! `loupe init`: initialise a datadir from a named network or a genesis.json.

use eyre::Result;

use super::args::{ChainArgs, DatadirArgs};
use super::next_step;

/// `loupe init`.
#[derive(Debug, clap::Args)]
pub struct InitCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// The chain.
    #[command(flatten)]
    pub chain: ChainArgs,
}

impl InitCmd {
    pub(super) fn run(self) -> Result<()> {
        let (db, spec, created) = self.chain.init(&self.datadir)?;
        if created {
            let network = spec.network().map(|n| format!(", {n}")).unwrap_or_default();
            println!(
                "initialised {} with genesis {} (chain id {}{network}, header policy {})",
                self.datadir.datadir.display(),
                spec.genesis_hash(),
                spec.chain_id(),
                spec.header_policy()
            );
        } else {
            println!("already initialised with genesis {}; nothing to do", spec.genesis_hash());
        }
        if db.begin_read()?.head()? == Some(0) {
            print!("\n{}", next_step::after_init(&spec, &self.datadir.datadir));
        }
        Ok(())
    }
}
