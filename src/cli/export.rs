//! `loupe export`: stored blocks as an RLP chain file, or pre-merge epochs as era1 files.

use std::path::PathBuf;

use eyre::{Context, Result};

use super::args::DatadirArgs;
use crate::storage::Database;

/// `loupe export`.
#[derive(Debug, clap::Args)]
pub struct ExportCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Output file (RLP).
    #[arg(value_name = "FILE", required_unless_present = "era1", conflicts_with = "era1")]
    pub file: Option<PathBuf>,
    /// Write era1 files into DIR instead, one per 8,192-block epoch of the stored pre-merge
    /// blocks (those with a difficulty), named `<network>-<epoch>-<root>.era1`: whole epochs,
    /// from the one of --from to the one of --to, ending at the merge.
    #[arg(long, value_name = "DIR")]
    pub era1: Option<PathBuf>,
    /// First block to write.
    #[arg(long, default_value_t = 1)]
    pub from: u64,
    /// Last block to write (default: head).
    #[arg(long)]
    pub to: Option<u64>,
}

impl ExportCmd {
    pub(super) fn run(self) -> Result<()> {
        use std::io::Write;
        let db = self.datadir.open_initialised(false)?;
        let head = db.begin_read()?.head()?.ok_or(crate::import::ImportError::NotInitialised)?;
        let to = self.to.unwrap_or(head).min(head);
        let Some(path) = self.file else {
            let dir = self.era1.unwrap_or_default();
            let spec =
                crate::import::load_spec(&db)?.ok_or(crate::import::ImportError::NotInitialised)?;
            return export_era1(&db, spec.chain_id(), &dir, self.from, to);
        };
        let file = std::fs::File::create(&path)
            .wrap_err_with(|| format!("cannot create {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        crate::dev::generate::write_blocks(&db, self.from, to, &mut out)?;
        out.flush()?;
        println!("exported blocks {}..={to} to {}", self.from, path.display());
        Ok(())
    }
}

/// `loupe export --era1 DIR`: the era1 files of the epochs of `from..=to`, and why it stopped.
fn export_era1(
    db: &Database,
    chain_id: u64,
    dir: &std::path::Path,
    from: u64,
    to: u64,
) -> Result<()> {
    use crate::import::era1::Era1Stop;
    let done = crate::import::era1::export_era1(db, chain_id, dir, from, to)?;
    for f in &done.files {
        println!(
            "wrote {}: blocks {}..={}, accumulator root {}",
            f.path.display(),
            f.first,
            f.last,
            f.root
        );
    }
    match done.stop {
        Era1Stop::Done => {}
        Era1Stop::Merge { first_pos } => {
            println!("era1 history ends at the merge: block {first_pos} has no difficulty");
        }
        Era1Stop::Incomplete { epoch, head } => println!(
            "epoch {epoch} not written: its blocks are stored only up to the head #{head}, \
             before its end and before the merge"
        ),
    }
    if done.files.is_empty() {
        println!("no era1 file written to {}", dir.display());
    }
    Ok(())
}
