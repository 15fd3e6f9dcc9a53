//! Command line: `loupe [node|init|import|export]`, logging set-up.

mod args;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use eyre::{Context, Result};

pub use args::{DatadirArgs, LogArgs, RpcArgs};

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
    /// Serve an initialised datadir over HTTP JSON-RPC.
    Node(NodeCmd),
}

/// `loupe node`.
#[derive(Debug, clap::Args)]
pub struct NodeCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Server flags.
    #[command(flatten)]
    pub rpc: RpcArgs,
}

impl NodeCmd {
    fn run(self) -> Result<()> {
        let db = Database::open(&self.datadir.datadir)?;
        let spec = load_spec(&db)?.ok_or(crate::import::ImportError::NotInitialised)?;
        let config = self.rpc.to_config()?;
        serve(std::sync::Arc::new(db), spec, config, None)
    }
}

/// Runs the server until SIGINT/SIGTERM. `banner` is printed once the server listens.
pub fn serve(
    db: std::sync::Arc<Database>,
    spec: crate::chain::ChainSpec,
    config: crate::rpc::RpcConfig,
    banner: Option<Box<dyn FnOnce(std::net::SocketAddr) + Send>>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let head = db.begin_read()?.head()?.unwrap_or(0);
        let server = crate::rpc::start(db, spec, config).await.wrap_err("cannot start the RPC server")?;
        tracing::info!(target: "rpc", url = %format!("http://{}", server.addr), head, "serving JSON-RPC");
        if let Some(banner) = banner {
            banner(server.addr);
        }
        shutdown_signal().await;
        tracing::info!(target: "rpc", "shutting down");
        server.stop().await;
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
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
            Some(Command::Node(cmd)) => cmd.run(),
            None => Err(eyre::eyre!("no command given; see `loupe --help`")),
        }
    }
}

fn read_genesis(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path)
        .wrap_err_with(|| format!("cannot read genesis file {}", path.display()))
}

impl InitCmd {
    fn run(self) -> Result<()> {
        let db = Database::open(&self.datadir.datadir)?;
        let (spec, created) = init_genesis(&db, &read_genesis(&self.genesis)?)?;
        if created {
            println!(
                "initialised {} with genesis {} (chain id {})",
                self.datadir.datadir.display(),
                spec.genesis_hash(),
                spec.chain_id()
            );
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
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
