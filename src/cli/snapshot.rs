//! `loupe db snapshot`: a consistent copy of a datadir written to a new one.

use std::path::PathBuf;

use eyre::Result;

use super::admin;
use super::args::DatadirArgs;

/// `loupe db snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotCmd {
    /// Data directory to copy.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// New data directory to write (must not hold a database yet).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

impl SnapshotCmd {
    pub(super) fn run(self) -> Result<()> {
        let started = std::time::Instant::now();
        let copy = admin::snapshot(&self.datadir.datadir, &self.out)?;
        let head = copy.head.map_or_else(|| "none".to_string(), |h| format!("#{h}"));
        println!(
            "snapshot of {} at head {head} written to {}: {} tables, {} entries, {} bytes in {:.2}s",
            self.datadir.datadir.display(),
            copy.file.display(),
            copy.tables,
            copy.entries,
            copy.bytes,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}
