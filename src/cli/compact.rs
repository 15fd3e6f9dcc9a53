//! `loupe db compact`: a datadir's database file rewritten packed, or its free pages given back.

use eyre::Result;

use super::admin;
use super::args::DatadirArgs;

/// `loupe db compact`.
#[derive(Debug, clap::Args)]
pub struct CompactCmd {
    /// Data directory to compact.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Only give the file's free pages back, in place: no copy, so no extra disk space, and
    /// every row stays where it is (after a large import a quarter to a third of the file is
    /// free pages; the tables' half-full pages stay as they are).
    #[arg(long)]
    pub in_place: bool,
}

impl CompactCmd {
    pub(super) fn run(self) -> Result<()> {
        let started = std::time::Instant::now();
        if self.in_place {
            let (before, after) =
                admin::release_free_pages(&self.datadir.datadir, self.datadir.cache_bytes())?;
            println!(
                "gave back the free pages of {} in place: {before} -> {after} bytes on disk \
                 ({:.0} %) in {:.2}s",
                self.datadir.datadir.display(),
                100.0 * after as f64 / before.max(1) as f64,
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        let done = admin::compact(&self.datadir.datadir, self.datadir.cache_bytes())?;
        let head = done.copy.head.map_or_else(|| "none".to_string(), |h| format!("#{h}"));
        println!(
            "compacted {} at head {head}: {} -> {} bytes on disk ({:.0} %), {} entries in {:.2}s",
            done.copy.file.display(),
            done.before,
            done.after,
            100.0 * done.after as f64 / done.before.max(1) as f64,
            done.copy.entries,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}
