//! `loupe import`: RLP and era1 chain files into a datadir, then its file compacted.

use std::path::PathBuf;

use eyre::{Context, Result};

use super::args::{ChainArgs, DatadirArgs};
use super::signals::stop_on_signal;
use super::stats::mib;
use crate::storage::Database;

/// `loupe import`.
#[derive(Debug, clap::Args)]
pub struct ImportCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// The chain (initialises an empty datadir).
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Chain files, imported in the order given: RLP chain files, era1 files, and folders (each
    /// stands for the `*.era1` files inside it, in name order, which is epoch order). Each era1
    /// file is checked whole (its hash chain, roots, total difficulties and accumulator root,
    /// against the network's known epoch roots for mainnet) before any of its blocks runs.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Make every Nth block's commit durable (fsync); after a crash the head is the last
    /// durable block. 1 syncs every block.
    #[arg(long = "import.sync-every", value_name = "N", default_value_t = crate::import::DEFAULT_BATCH)]
    pub sync_every: u64,
    /// Import N blocks in one write transaction: each group is committed whole, so after a
    /// crash the head is still a whole block. 1 commits every block.
    #[arg(long = "import.batch", value_name = "N", default_value_t = crate::import::DEFAULT_BATCH)]
    pub batch: u64,
    /// How often the state root is computed and checked: `block` (every block), `group` (once
    /// per commit group, at its last block; a mismatch re-runs the group block by block to name
    /// the first bad block), or `auto` (`group`). In a `--proof-history all` datadir the
    /// trie-history stage then builds every block's trie history and checks every block's
    /// root (README). Every other check is made at every block either way.
    #[arg(long = "state-root", value_name = "auto|block|group", default_value = "auto")]
    pub state_root: String,
    /// What the import does with the database file when it has run to the end of its files and
    /// stored a block: `packed` rewrites it with every B-tree leaf full, as `loupe db compact`
    /// does (needs free disk space for the copy); `in-place` only gives back the pages its
    /// commits freed, as `loupe db compact --in-place` does; `auto`, when the import at least
    /// doubled the file, packs when the file system has room for a copy as large as the file,
    /// else gives back in place; `off` leaves the
    /// free pages for later writes to reuse.
    #[arg(long = "import.compact", value_enum, default_value_t = ImportCompact::Auto)]
    pub compact: ImportCompact,
    /// In a `--proof-history all` datadir: how many ranges (whole epochs) the trie-history stage
    /// builds at once after the blocks, up to the cores. Each takes a range's memory: 2 made the
    /// stage after the blocks a third faster and took the 10,000-block import over 1M accounts
    /// from 945 MiB to 1,126 MiB at its peak, when a range's walks took one thread (each takes
    /// three now, so one range at a time keeps both cores busy).
    #[arg(long = "import.stage-ranges", value_name = "N", default_value_t = crate::import::DEFAULT_STAGE_RANGES)]
    pub stage_ranges: usize,
}

impl ImportCmd {
    pub(super) fn run(self) -> Result<()> {
        check_chain_files(&self.files)?;
        let stop = stop_on_signal()?;
        let (db, spec) = self.chain.open(&self.datadir)?;
        let Some(state_root) = crate::import::StateRootCheck::from_name(&self.state_root) else {
            eyre::bail!("--state-root {:?}: expected auto, block or group", self.state_root);
        };
        let options = crate::import::ImportOptions {
            sync_every: self.sync_every.max(1),
            batch: self.batch.max(1),
            stop: Some(stop),
            state_root,
            trie_history: true,
            stage_ranges: self.stage_ranges.max(1),
        };
        let file_before = file_bytes(&self.datadir);
        let summary = crate::import::import_files_with(&db, &spec, &self.files, options)?;
        println!("{summary}");
        if summary.imported == 0 || summary.interrupted {
            return Ok(());
        }
        compact_after_import(db, &self.datadir, self.compact, file_before)
    }
}

/// Refuses, before anything is opened or created, a chain file that is not there or is empty
/// (0 bytes: no block in it), naming it.
fn check_chain_files(files: &[PathBuf]) -> Result<()> {
    for path in files {
        let meta = std::fs::metadata(path)
            .wrap_err_with(|| format!("{}: no such chain file or folder", path.display()))?;
        if meta.is_file() && meta.len() == 0 {
            eyre::bail!(
                "{} is empty (0 bytes): a chain file holds at least one block (RLP, as `geth \
                 export` writes, or an era1 file)",
                path.display()
            );
        }
    }
    Ok(())
}

/// Length of a datadir's database file in bytes (0 when it cannot be read).
fn file_bytes(datadir: &DatadirArgs) -> u64 {
    std::fs::metadata(datadir.datadir.join(crate::storage::DB_FILE)).map_or(0, |m| m.len())
}

/// What `loupe import` does with the database file when it has run to the end of its files
/// (`--import.compact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportCompact {
    /// `packed` when the file system has room for a copy as large as the file, else `in-place`.
    Auto,
    /// Rewrite the file with every B-tree leaf full (`loupe db compact`).
    Packed,
    /// Give back only the pages the import's commits freed (`loupe db compact --in-place`).
    InPlace,
    /// Leave the free pages for later writes to reuse.
    Off,
}

/// `loupe import --import.compact` (not `off`). `auto` compacts only a file the import at
/// least doubled (`file_before`: its length when the import began), so that a short import onto
/// a large datadir does not rewrite it all: the cost stays within a few times what the import
/// wrote. Then it packs when the file system has room for a copy as large as the file, else
/// gives back in place. Every block is stored and durable by now: a failure here costs disk
/// space, never a row, so it is reported as a warning and the import still counts as done.
fn compact_after_import(
    db: Database,
    datadir: &DatadirArgs,
    choice: ImportCompact,
    file_before: u64,
) -> Result<()> {
    let file_now = file_bytes(datadir);
    let packed = match choice {
        ImportCompact::Packed => true,
        ImportCompact::InPlace => false,
        ImportCompact::Off => return Ok(()),
        ImportCompact::Auto if file_now < file_before.saturating_mul(2) => return Ok(()),
        ImportCompact::Auto => {
            let room = crate::storage::free_bytes(&datadir.datadir).unwrap_or(0);
            let reserve = datadir.min_free_mb.saturating_mul(1024 * 1024);
            room >= file_now.saturating_add(reserve)
        }
    };
    let started = std::time::Instant::now();
    let done = if packed {
        db.compact().map(|c| (c.before, c.after, "packed the file (every leaf full)"))
    } else {
        db.release_free_pages()
            .map(|(b, a)| (b, a, "gave back the free pages the import's commits left"))
    };
    match done {
        Ok((before, after, what)) => println!(
            "{what}: {:.1} -> {:.1} MiB on disk in {:.2}s",
            mib(before),
            mib(after),
            started.elapsed().as_secs_f64()
        ),
        Err(e) => eprintln!(
            "warning: the import is done, but compacting {} failed ({e}); every block is \
             stored, and `loupe db compact` (or `--in-place`) compacts it later",
            datadir.datadir.display()
        ),
    }
    Ok(())
}
