//! `loupe dev` (and `loupe` alone): the built-in dev chain opened or built, served, and its banner.

use std::path::PathBuf;

use eyre::{Context, Result};

use super::args::RpcArgs;
use super::serve::{serve, with_explorer};
use crate::import::init_genesis;
use crate::storage::Database;

/// `loupe dev` (and `loupe` with no command).
#[derive(Debug, Default, clap::Args)]
pub struct DevCmd {
    /// Data directory of the dev chain (default: $XDG_DATA_HOME/loupe/dev or
    /// ~/.local/share/loupe/dev; with `--fork amsterdam`, loupe/dev-amsterdam).
    #[arg(long, value_name = "DIR")]
    pub datadir: Option<PathBuf>,
    /// The fork the dev chain runs from genesis: `osaka` (mainnet's) or `amsterdam`
    /// (`amsterdamTime: 0`, in its own datadir).
    #[arg(long, value_name = "osaka|amsterdam", default_value_t = crate::dev::DevFork::Osaka)]
    pub fork: crate::dev::DevFork,
    /// Server flags.
    #[command(flatten)]
    pub rpc: Option<RpcArgs>,
}

fn default_dev_datadir(fork: crate::dev::DevFork) -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("loupe").join(fork.datadir_name())
}

impl DevCmd {
    pub(super) fn run(self) -> Result<()> {
        use clap::FromArgMatches;
        let fork = self.fork;
        let dir = self.datadir.unwrap_or_else(|| default_dev_datadir(fork));
        let (db, spec) = open_dev_chain(&dir, fork)?;
        let rpc = match self.rpc {
            Some(rpc) => rpc,
            None => RpcArgs::from_arg_matches(
                &<RpcArgs as clap::Args>::augment_args(clap::Command::new("x"))
                    .get_matches_from(["x"]),
            )?,
        };
        let mut config = rpc.to_config()?;
        let explorer = with_explorer(&mut config, rpc.explorer.unwrap_or(true));
        let banner =
            Box::new(move |addr: std::net::SocketAddr| print_dev_banner(addr, explorer, fork));
        serve(std::sync::Arc::new(db), spec, config, Some(banner), None)
    }
}

/// Opens the dev chain of `fork` in `dir`, building it first when `dir` holds none, an
/// incomplete one (an interrupted build of an older loupe) or one in another storage format:
/// the dev chain is rebuilt the same from its built-in genesis. A build runs in a scratch
/// datadir and is moved into place whole (`crate::dev::build_dev_datadir`), so a kill during it
/// never leaves a partial history to serve.
fn open_dev_chain(
    dir: &std::path::Path,
    fork: crate::dev::DevFork,
) -> Result<(Database, crate::chain::ChainSpec)> {
    let mismatch = |e: crate::import::ImportError| {
        Err(e).wrap_err_with(|| {
            format!(
                "{} holds another dev chain than the {fork} one: give its --fork, or another \
                 --datadir",
                dir.display()
            )
        })
    };
    let build = if !dir.join(crate::storage::DB_FILE).exists() {
        true
    } else {
        match Database::open(dir) {
            Err(crate::storage::StorageError::Schema { found, supported }) => {
                println!(
                    "the dev chain in {} has storage format {found}; rebuilding it in format \
                     {supported}",
                    dir.display()
                );
                true
            }
            Err(e) => return Err(e.into()),
            Ok(db) => {
                let head = db.begin_read()?.head()?;
                if head.is_some() {
                    // Refused before anything is rebuilt: another fork's chain is kept.
                    match init_genesis(&db, &fork.genesis_json()) {
                        Err(e @ crate::import::ImportError::GenesisMismatch { .. }) => {
                            return mismatch(e);
                        }
                        other => drop(other?),
                    }
                }
                let complete = crate::dev::is_dev_chain_complete(&db)?;
                if !complete && let Some(head) = head {
                    println!(
                        "the dev chain in {} is incomplete (its sample history ends at block \
                         {head} of {}: an earlier build was interrupted); rebuilding it",
                        dir.display(),
                        crate::dev::HISTORY_BLOCKS
                    );
                }
                !complete
            }
        }
    };
    if build {
        let built = crate::dev::build_dev_datadir(dir, fork)?;
        let which = match fork {
            crate::dev::DevFork::Osaka => "",
            crate::dev::DevFork::Amsterdam => "Amsterdam ",
        };
        println!(
            "built the {which}dev chain's sample history: {built} blocks in {}",
            dir.display()
        );
    } else {
        crate::dev::remove_scratch(dir)?;
    }
    let db = Database::open(dir)?;
    let (spec, _) = match init_genesis(&db, &fork.genesis_json()) {
        Err(e @ crate::import::ImportError::GenesisMismatch { .. }) => return mismatch(e),
        other => other?,
    };
    Ok((db, spec))
}

fn print_dev_banner(addr: std::net::SocketAddr, explorer: bool, fork: crate::dev::DevFork) {
    let url = format!("http://{addr}");
    // The default chain's banner is the one README shows; the Amsterdam chain names its fork.
    let named = match fork {
        crate::dev::DevFork::Osaka => String::new(),
        crate::dev::DevFork::Amsterdam => ", Amsterdam from genesis".to_string(),
    };
    println!(
        "\nloupe dev chain (chain id {}{named}) serving JSON-RPC at {url}\n",
        crate::dev::DEV_CHAIN_ID
    );
    if explorer {
        println!("Explorer: {url}{}\n", crate::explorer::PREFIX);
    }
    println!(
        "Dev accounts (10,000 ETH each). Their keys are PUBLIC: never use them on a real network."
    );
    for (a, k) in crate::dev::dev_accounts().iter().zip(crate::dev::DEV_KEYS) {
        println!("  {a}  key 0x{k}");
    }
    println!("\nTry:");
    println!(
        "  curl -s -X POST -H 'Content-Type: application/json' --data '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getTransactionByBlockNumberAndIndex\",\"params\":[\"0x1\",\"0x0\"]}}' {url}"
    );
    println!(
        "  curl -s -X POST -H 'Content-Type: application/json' --data '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_call\",\"params\":[{{\"from\":\"{:#x}\",\"to\":\"{:#x}\"}},[\"trace\",\"stateDiff\"],\"latest\"]}}' {url}\n",
        crate::dev::dev_accounts().first().copied().unwrap_or_default(),
        crate::dev::COUNTER
    );
}
