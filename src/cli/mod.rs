//! Command line: `loupe [node|init|import|export|dev|verify|generate|follow|db|witness]`, logging set-up.

mod admin;
mod args;
mod config;
pub use config::ConfigError;
mod metrics;
mod next_step;
mod witness;
pub use witness::{WitnessCmd, WitnessRunCmd, WitnessServeCmd, anchored_datadir};

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use eyre::{Context, Result};

pub use args::{ChainArgs, DatadirArgs, FollowArgs, LogArgs, RpcArgs};

use crate::import::init_genesis;
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

/// `loupe db stats`.
#[derive(Debug, clap::Args)]
pub struct StatsCmd {
    /// Data directory to look at.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Print JSON (one object with a `tables` array) instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl StatsCmd {
    fn run(self) -> Result<()> {
        let stats = admin::stats(&self.datadir.datadir, self.datadir.cache_bytes())?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&stats_json(&stats))?);
        } else {
            print!("{}", stats_text(&stats));
        }
        Ok(())
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `loupe db stats` as a table: one line per table, then the totals and the file.
fn stats_text(stats: &crate::storage::DatabaseStats) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let head = stats.head.map_or_else(|| "none".to_string(), |h| format!("#{h}"));
    let _ = writeln!(out, "head {head}");
    let _ = writeln!(
        out,
        "{:<26} {:>13} {:>6} {:>12} {:>12} {:>12} {:>8}",
        "table", "rows", "height", "stored MiB", "free MiB", "pages MiB", "of file"
    );
    let file = stats.file_bytes.max(1) as f64;
    let line = |out: &mut String, name: &str, rows: u64, height: String, stored, free, occ| {
        let _ = writeln!(
            out,
            "{name:<26} {rows:>13} {height:>6} {:>12.1} {:>12.1} {:>12.1} {:>7.1}%",
            mib(stored),
            mib(free),
            mib(occ),
            100.0 * occ as f64 / file
        );
    };
    for t in &stats.tables {
        let occupied = t.occupied_bytes();
        line(
            &mut out,
            t.name,
            t.entries,
            t.height.to_string(),
            t.stored_bytes,
            t.fragmented_bytes,
            occupied,
        );
    }
    let sum = |f: fn(&crate::storage::TableStats) -> u64| stats.tables.iter().map(f).sum::<u64>();
    let occupied = sum(crate::storage::TableStats::occupied_bytes);
    line(
        &mut out,
        "(all tables)",
        sum(|t| t.entries),
        String::new(),
        sum(|t| t.stored_bytes),
        sum(|t| t.fragmented_bytes),
        occupied,
    );
    let _ = writeln!(
        out,
        "file {:.1} MiB; {:.1} MiB in no table (free pages and redb's own)",
        mib(stats.file_bytes),
        mib(stats.file_bytes.saturating_sub(occupied))
    );
    let _ = writeln!(out, "segments (epochs below {} frozen):", stats.frozen_to);
    let _ = writeln!(out, "{:<26} {:>13} {:>6} {:>12}", "kind", "rows", "files", "MiB");
    for s in &stats.segments {
        let _ =
            writeln!(out, "{:<26} {:>13} {:>6} {:>12.1}", s.kind, s.rows, s.files, mib(s.bytes));
    }
    let seg_bytes: u64 = stats.segments.iter().map(|s| s.bytes).sum();
    let _ = writeln!(
        out,
        "datadir {:.1} MiB: the file and {:.1} MiB of segments",
        mib(stats.file_bytes + seg_bytes),
        mib(seg_bytes)
    );
    if let Some(stage) = &stats.trie_stage {
        let _ = writeln!(out, "{}", trie_stage_text(stage));
    }
    out
}

/// Where the trie-history stage stands, in a line.
fn trie_stage_text(stage: &crate::storage::history::staged::TrieStage) -> String {
    match stage.failed {
        Some((block, header, computed)) => format!(
            "trie history: the stage stopped at block {block}: its header state root {header} is not the root of its state {computed}"
        ),
        None if stage.pending() => format!(
            "trie history: per block up to #{}; blocks #{}..=#{} wait for the trie-history stage (it runs in `loupe import` and beside `loupe node`)",
            stage.staged_to,
            stage.staged_to + 1,
            stage.grouped_to
        ),
        None => format!(
            "trie history: per block at every block (last grouped import to #{})",
            stage.grouped_to
        ),
    }
}

/// `loupe db stats --json`.
fn stats_json(stats: &crate::storage::DatabaseStats) -> serde_json::Value {
    let tables: Vec<_> = stats
        .tables
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "rows": t.entries,
                "height": t.height,
                "leafPages": t.leaf_pages,
                "branchPages": t.branch_pages,
                "storedBytes": t.stored_bytes,
                "metadataBytes": t.metadata_bytes,
                "fragmentedBytes": t.fragmented_bytes,
                "occupiedBytes": t.occupied_bytes(),
            })
        })
        .collect();
    let segments: Vec<_> = stats
        .segments
        .iter()
        .map(|s| serde_json::json!({"kind": s.kind, "files": s.files, "rows": s.rows, "bytes": s.bytes}))
        .collect();
    serde_json::json!({
        "head": stats.head,
        "fileBytes": stats.file_bytes,
        "tables": tables,
        "frozenTo": stats.frozen_to,
        "segments": segments,
        "trieStage": stats.trie_stage.map(|s| serde_json::json!({
            "stagedTo": s.staged_to,
            "groupedTo": s.grouped_to,
            "pending": s.pending(),
            "failedAt": s.failed.map(|f| f.0),
        })),
    })
}

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
    fn run(self) -> Result<()> {
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
    fn run(self) -> Result<()> {
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
    fn run(self) -> Result<()> {
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

/// `loupe generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateCmd {
    /// Output directory (genesis.json and chain.rlp are written there).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Funded accounts in the genesis (besides 256 senders and the contracts).
    #[arg(long, value_name = "N")]
    pub accounts: u64,
    /// Storage slots of one big contract in the genesis, which ~15% of the transactions update,
    /// clear and add to (default: no big contract).
    #[arg(long, value_name = "M", default_value_t = 0)]
    pub contract_slots: u64,
    /// Blocks to build after genesis.
    #[arg(long, value_name = "B")]
    pub blocks: u64,
    /// Seed: the same seed and flags give byte-identical files.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Most transactions per block (default: as many as fit the gas limit, about 550 at 30M).
    #[arg(long, value_name = "T")]
    pub txs_per_block: Option<usize>,
    /// Block gas limit.
    #[arg(long, value_name = "G", default_value_t = crate::dev::generate::DEFAULT_GAS_LIMIT)]
    pub gas_limit: u64,
    /// Keep the work datadir (DIR/.work, a complete loupe datadir of the chain).
    #[arg(long)]
    pub keep_datadir: bool,
}

impl GenerateCmd {
    fn run(self) -> Result<()> {
        let config = crate::dev::generate::GenerateConfig {
            out: self.out.clone(),
            accounts: self.accounts,
            contract_slots: self.contract_slots,
            blocks: self.blocks,
            seed: self.seed,
            txs_per_block: self.txs_per_block,
            gas_limit: self.gas_limit,
            keep_datadir: self.keep_datadir,
            quiet: false,
        };
        let summary = crate::dev::generate::generate(&config)?;
        print!("{summary}");
        println!(
            "wrote {} and {}",
            self.out.join("genesis.json").display(),
            self.out.join("chain.rlp").display()
        );
        if self.keep_datadir {
            println!(
                "kept the datadir {}",
                self.out.join(crate::dev::generate::WORK_DIR).display()
            );
        }
        Ok(())
    }
}

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
    fn run(self) -> Result<()> {
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
    fn run(self) -> Result<()> {
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

/// Sets the explorer's pages in `config` when `on` (`--http.explorer`); returns `on`.
fn with_explorer(config: &mut crate::rpc::RpcConfig, on: bool) -> bool {
    if on {
        config.pages = Some(std::sync::Arc::new(crate::explorer::Explorer::new()));
    }
    on
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

/// `loupe node`.
#[derive(Debug, clap::Args)]
pub struct NodeCmd {
    /// Data directory.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// The chain (initialises an empty datadir).
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Server flags.
    #[command(flatten)]
    pub rpc: RpcArgs,
}

impl NodeCmd {
    fn run(self) -> Result<()> {
        let (db, spec) = self.chain.open(&self.datadir)?;
        if db.begin_read()?.head()? == Some(0) {
            let datadir = &self.datadir.datadir;
            tracing::warn!(target: "rpc", "{}", next_step::at_genesis(&spec, datadir));
        }
        let mut config = self.rpc.to_config()?;
        with_explorer(&mut config, self.rpc.explorer.unwrap_or(false));
        serve(std::sync::Arc::new(db), spec, config, None, None)
    }
}

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
    fn run(self) -> Result<()> {
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

/// Runs the server until SIGINT/SIGTERM. `banner` is printed once the server listens. With a
/// follower, the process ends with an error if the upstream serves another chain; any other
/// reason the follower stops leaves the server serving what is stored.
pub fn serve(
    db: std::sync::Arc<Database>,
    spec: crate::chain::ChainSpec,
    config: crate::rpc::RpcConfig,
    banner: Option<Box<dyn FnOnce(std::net::SocketAddr) + Send>>,
    follower: Option<crate::follow::FollowHandle>,
) -> Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.io_threads {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build()?;
    let explorer = config.pages.is_some();
    runtime.block_on(async move {
        let head = db.begin_read()?.head()?.unwrap_or(0);
        if let Some(addr) = config.metrics {
            metrics::start(addr, db.clone(), config.sync.clone())?;
        }
        // Without the socket the node still serves; only `loupe db snapshot` must then wait for
        // it to stop (a datadir path too long for a Unix socket, a read-only directory).
        #[cfg(unix)]
        let _admin = admin::listen(db.clone())
            .inspect_err(|e| tracing::warn!(target: "admin", "no admin socket: {e:#}"))
            .ok();
        let stage = crate::trie::stage::spawn(db.clone())?;
        let server = crate::rpc::start(db, spec, config).await.wrap_err("cannot start the RPC server")?;
        tracing::info!(target: "rpc", url = %format!("http://{}", server.addr), head, "serving JSON-RPC");
        if explorer {
            let url = format!("http://{}{}", server.addr, crate::explorer::PREFIX);
            tracing::info!(target: "rpc", %url, "serving the explorer");
        }
        if let Some(ws) = server.ws_addr {
            tracing::info!(target: "rpc", url = %format!("ws://{ws}"), "serving JSON-RPC over WebSocket");
        }
        if let Some(banner) = banner {
            banner(server.addr);
        }
        let mut follower = follower;
        let refused = tokio::select! {
            () = shutdown_signal() => None,
            e = watch_follower(&mut follower) => Some(e),
        };
        tracing::info!(target: "rpc", "shutting down");
        // Stop accepting; requests in flight get up to SHUTDOWN_GRACE to be answered.
        if tokio::time::timeout(SHUTDOWN_GRACE, server.stop()).await.is_err() {
            tracing::warn!(target: "rpc", grace = ?SHUTDOWN_GRACE, "requests still open at shutdown were dropped");
        }
        if let Some(f) = follower {
            // Stopping joins the thread, which may be inside a block's import: off the reactor.
            tokio::task::spawn_blocking(move || f.stop()).await.ok();
        }
        if let Some(s) = stage {
            // It stops after the range it is building (a commit of its own): off the reactor.
            tokio::task::spawn_blocking(move || s.stop()).await.ok();
        }
        match refused {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    })
}

/// A flag set on the first SIGTERM or SIGINT (logged). The handlers are registered before this
/// returns, so a signal that arrives afterwards is never the default (fatal) one.
fn stop_on_signal() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    #[cfg(unix)]
    let (mut term, mut int) = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    })?;
    std::thread::Builder::new().name("loupe-signals".into()).spawn(move || {
        rt.block_on(async {
            #[cfg(unix)]
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
        });
        tracing::info!(target: "import", "stopping after the block being imported");
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    })?;
    Ok(stop)
}

/// How long a shutdown waits for requests in flight (the EVM deadline is 5 s by default).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Resolves with the follower's error if it stops because the upstream is not usable at all
/// (another chain, a bad URL); never resolves otherwise.
async fn watch_follower(
    follower: &mut Option<crate::follow::FollowHandle>,
) -> crate::follow::FollowError {
    loop {
        if follower.as_ref().is_some_and(|f| f.is_finished())
            && let Some(f) = follower.take()
            && let Err(
                e @ (crate::follow::FollowError::WrongChain { .. }
                | crate::follow::FollowError::BadUpstreamUrl { .. }),
            ) = f.stop()
        {
            return e;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
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
    /// The chain.
    #[command(flatten)]
    pub chain: ChainArgs,
}

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
    /// per commit group, at its last block: faster, but proofs and unwinding then reach back
    /// only to the last group's end; needs `--proof-history window`), or `auto` (`group` in a
    /// `--proof-history window` datadir, else `block`). Every other check is made at every
    /// block either way.
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

impl InitCmd {
    fn run(self) -> Result<()> {
        let (db, spec, created) = self.chain.init(&self.datadir)?;
        if created {
            let network = spec.network().map(|n| format!(", {n}")).unwrap_or_default();
            println!(
                "initialised {} with genesis {} (chain id {}{network}, header policy {})",
                self.datadir.datadir.display(),
                spec.genesis_hash(),
                spec.chain_id(),
                spec.header_policy()
            );
        } else {
            println!("already initialised with genesis {}; nothing to do", spec.genesis_hash());
        }
        if db.begin_read()?.head()? == Some(0) {
            print!("\n{}", next_step::after_init(&spec, &self.datadir.datadir));
        }
        Ok(())
    }
}

impl ImportCmd {
    fn run(self) -> Result<()> {
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

/// Installs the `tracing` subscriber (stderr; `RUST_LOG` or `--log.filter`).
pub fn init_logging(args: &LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&args.filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
