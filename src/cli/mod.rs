//! Command line: `loupe [node|init|import|export|dev|verify|generate|follow|db|witness]`, one
//! file per subcommand; here the dispatch and logging set-up.

mod admin;
mod args;
mod compact;
mod config;
mod dev;
mod export;
mod follow;
mod generate;
mod import;
mod init;
mod metrics;
mod next_step;
mod node;
mod serve;
mod signals;
mod snapshot;
mod stats;
mod verify;
mod witness;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use eyre::Result;

pub use args::{ChainArgs, DatadirArgs, FollowArgs, LogArgs, RpcArgs};
pub use compact::CompactCmd;
pub use config::ConfigError;
pub use dev::DevCmd;
pub use export::ExportCmd;
pub use follow::FollowCmd;
pub use generate::GenerateCmd;
pub use import::{ImportCmd, ImportCompact};
pub use init::InitCmd;
pub use node::NodeCmd;
pub use serve::serve;
pub use snapshot::SnapshotCmd;
pub use stats::StatsCmd;
pub use verify::VerifyCmd;
pub use witness::{WitnessCmd, WitnessRunCmd, WitnessServeCmd, anchored_datadir};

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
    /// A TOML file of flag values (keys are the flags' long names); flags given here win.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Initialise a datadir: a named network (`--chain mainnet`) or a genesis.json (geth's or
    /// Besu's).
    Init(InitCmd),
    /// Import RLP chain files (concatenated blocks) and era1 history files, executing and
    /// verifying every block.
    Import(ImportCmd),
    /// Serve an initialised datadir over HTTP JSON-RPC.
    Node(NodeCmd),
    /// Write stored blocks as RLP in the import format, or pre-merge epochs as era1 files.
    Export(ExportCmd),
    /// Create (or reopen) the built-in dev chain and serve it (what `loupe` alone does).
    Dev(DevCmd),
    /// Rebuild the state trie from the state tables and check every stored trie node and the
    /// head's state root; names the first mismatch.
    Verify(VerifyCmd),
    /// Generate a deterministic, mainnet-shaped chain: genesis.json and chain.rlp.
    Generate(GenerateCmd),
    /// Follow an upstream node: fetch, verify and store its blocks through reorgs, and serve
    /// JSON-RPC (every flag of `node`).
    Follow(FollowCmd),
    /// Database maintenance.
    #[command(subcommand)]
    Db(DbCmd),
    /// Stateless execution: verify a block from its execution witness, without a datadir.
    #[command(subcommand)]
    Witness(WitnessCmd),
}

/// `loupe db …`.
#[derive(Debug, Subcommand)]
pub enum DbCmd {
    /// Write a consistent copy of a datadir to a new one, even while a loupe serves it (the
    /// copy is then taken by that process, through its admin socket `<datadir>/loupe.sock`).
    /// A new replica starts from the copy.
    Snapshot(SnapshotCmd),
    /// Rewrite a datadir's database file with every table packed, which after an import takes
    /// about two thirds of the space. Needs free disk space for the packed copy, and the datadir to
    /// itself: stop the node first.
    Compact(CompactCmd),
    /// Rows and bytes of every table, and how much of the file each takes. Needs the datadir
    /// to itself: stop the node first (or take a `snapshot` and look at that).
    Stats(StatsCmd),
}

impl Cli {
    /// Runs the chosen command.
    pub fn run(self) -> Result<()> {
        match self.command {
            Some(Command::Init(cmd)) => cmd.run(),
            Some(Command::Import(cmd)) => cmd.run(),
            Some(Command::Node(cmd)) => cmd.run(),
            Some(Command::Export(cmd)) => cmd.run(),
            Some(Command::Dev(cmd)) => cmd.run(),
            Some(Command::Verify(cmd)) => cmd.run(),
            Some(Command::Generate(cmd)) => cmd.run(),
            Some(Command::Follow(cmd)) => cmd.run(),
            Some(Command::Db(DbCmd::Snapshot(cmd))) => cmd.run(),
            Some(Command::Db(DbCmd::Compact(cmd))) => cmd.run(),
            Some(Command::Db(DbCmd::Stats(cmd))) => cmd.run(),
            Some(Command::Witness(cmd)) => cmd.run(),
            None => DevCmd::default().run(),
        }
    }
}

/// Installs the `tracing` subscriber (stderr; `RUST_LOG` or `--log.filter`).
pub fn init_logging(args: &LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&args.filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
