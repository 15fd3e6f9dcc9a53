//! `loupe follow`: follow an upstream node's blocks and serve what is stored.

use eyre::Result;

use super::args::{ChainArgs, DatadirArgs, FollowArgs, RpcArgs};
use super::serve::{serve, with_explorer};

/// `loupe follow`.
#[derive(Debug, clap::Args)]
pub struct FollowCmd {
    /// Data directory (made by `loupe init`, or initialised from `--chain`).
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// The chain (initialises an empty datadir).
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Following flags.
    #[command(flatten)]
    pub follow: FollowArgs,
    /// Server flags.
    #[command(flatten)]
    pub rpc: RpcArgs,
}

impl FollowCmd {
    pub(super) fn run(self) -> Result<()> {
        let (db, spec) = self.chain.open(&self.datadir)?;
        let db = std::sync::Arc::new(db);
        tracing::info!(target: "follow", policy = %spec.header_policy(), "header policy");
        let mut config = self.rpc.to_config()?;
        with_explorer(&mut config, self.rpc.explorer.unwrap_or(false));
        let follow = self.follow.to_config()?;
        let status = std::sync::Arc::new(crate::chain::SyncStatus::new());
        status.update(|s| {
            s.max_lag = self.follow.max_lag;
            s.forward_to = (!self.follow.no_forward_tx).then(|| follow.upstream.clone());
        });
        config.sync = status.clone();
        let follower = crate::follow::spawn(db.clone(), spec.clone(), status, follow)?;
        serve(db, spec, config, None, Some(follower))
    }
}
