//! `loupe verify`: rebuild the state trie and check every stored trie node and the head's root.

use eyre::{Context, Result};

use super::args::DatadirArgs;

/// `loupe verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Also resolve every trie-node history row (the nodes proofs at old blocks read); its
    /// cost grows with the chain's history, not the state.
    #[arg(long)]
    pub history: bool,
}

impl VerifyCmd {
    pub(super) fn run(self) -> Result<()> {
        let db = self.datadir.open_initialised(false)?;
        let started = std::time::Instant::now();
        let report = crate::trie::verify(&db.begin_read()?)
            .wrap_err_with(|| format!("verify failed for {}", self.datadir.datadir.display()))?;
        println!(
            "verified head #{}: state root {} matches the header; {} accounts, {} storage slots, \
             {} account-trie and {} storage-trie nodes checked in {:.2}s",
            report.head,
            report.root,
            report.accounts,
            report.slots,
            report.account_nodes,
            report.storage_nodes,
            started.elapsed().as_secs_f64()
        );
        if self.history {
            let started = std::time::Instant::now();
            let rows = crate::trie::verify_history(&db.begin_read()?).wrap_err_with(|| {
                format!("verify --history failed for {}", self.datadir.datadir.display())
            })?;
            println!(
                "verified trie history: {rows} trie-history rows resolved in {:.2}s",
                started.elapsed().as_secs_f64()
            );
        }
        Ok(())
    }
}
