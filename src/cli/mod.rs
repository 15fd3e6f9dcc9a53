//! Command line: `loupe [node|init|import|export]`, logging set-up.

mod args;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use eyre::{Context, Result};

pub use args::{DatadirArgs, LogArgs};

use crate::import::{import_files, init_genesis, load_spec};
use crate::storage::Database;

/// loupe — a fast, lightweight Ethereum archive node serving JSON-RPC over HTTP.
#[derive(Debug, Parser)]
#[command(name = "loupe", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Logging options.
    #[command(flatten)]
    pub log: LogArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Initialise a datadir from a geth-style genesis.json.
    Init(InitCmd),
    /// Import RLP chain files (concatenated blocks), executing and verifying every block.
    Import(ImportCmd),
}

/// `loupe init`.
#[derive(Debug, clap::Args)]
pub struct InitCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Path to a geth-style genesis.json.
    #[arg(long, value_name = "FILE")]
    pub genesis: PathBuf,
}

/// `loupe import`.
#[derive(Debug, clap::Args)]
pub struct ImportCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Initialise an empty datadir with this genesis first.
    #[arg(long, value_name = "FILE")]
    pub genesis: Option<PathBuf>,
    /// RLP chain files, imported in the order given.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

impl Cli {
    /// Runs the chosen command.
    pub fn run(self) -> Result<()> {
        match self.command {
            Some(Command::Init(cmd)) => cmd.run(),
            Some(Command::Import(cmd)) => cmd.run(),
            None => Err(eyre::eyre!("no command given; see `loupe --help`")),
        }
    }
}

fn read_genesis(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).wrap_err_with(|| format!("cannot read genesis file {}", path.display()))
}

impl InitCmd {
    fn run(self) -> Result<()> {
        let db = Database::open(&self.datadir.datadir)?;
        let (spec, created) = init_genesis(&db, &read_genesis(&self.genesis)?)?;
        if created {
            println!("initialised {} with genesis {} (chain id {})", self.datadir.datadir.display(), spec.genesis_hash(), spec.chain_id());
        } else {
            println!("already initialised with genesis {}; nothing to do", spec.genesis_hash());
        }
        Ok(())
    }
}

impl ImportCmd {
    fn run(self) -> Result<()> {
        let db = Database::open(&self.datadir.datadir)?;
        let spec = match &self.genesis {
            Some(path) => init_genesis(&db, &read_genesis(path)?)?.0,
            None => load_spec(&db)?.ok_or(crate::import::ImportError::NotInitialised)?,
        };
        let summary = import_files(&db, &spec, &self.files)?;
        println!("{summary}");
        Ok(())
    }
}

/// Installs the `tracing` subscriber (stderr; `RUST_LOG` or `--log.filter`).
pub fn init_logging(args: &LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&args.filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
