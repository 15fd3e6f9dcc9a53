//! `loupe node`: serve an initialised datadir over JSON-RPC.

use eyre::Result;

use super::args::{ChainArgs, DatadirArgs, RpcArgs};
use super::next_step;
use super::serve::{serve, with_explorer};

/// `loupe node`.
#[derive(Debug, clap::Args)]
pub struct NodeCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// The chain (initialises an empty datadir).
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Server flags.
    #[command(flatten)]
    pub rpc: RpcArgs,
}

impl NodeCmd {
    pub(super) fn run(self) -> Result<()> {
        let (db, spec) = self.chain.open(&self.datadir)?;
        if db.begin_read()?.head()? == Some(0) {
            let datadir = &self.datadir.datadir;
            tracing::warn!(target: "rpc", "{}", next_step::at_genesis(&spec, datadir));
        }
        let mut config = self.rpc.to_config()?;
        with_explorer(&mut config, self.rpc.explorer.unwrap_or(false));
        serve(std::sync::Arc::new(db), spec, config, None, None)
    }
}
