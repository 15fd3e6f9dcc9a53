//! Reusable clap argument groups.

use std::path::PathBuf;

/// Where the database lives.
#[derive(Debug, Clone, clap::Args)]
pub struct DatadirArgs {
    /// Data directory holding the archive database.
    #[arg(long, value_name = "DIR")]
    pub datadir: PathBuf,
    /// Memory for the database's page cache, in MiB (it fills with the pages read and written,
    /// up to this size).
    #[arg(long = "db.cache-mb", value_name = "MIB", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub cache_mb: u64,
    /// Free space to keep on the datadir's file system, in MiB: below it, writes stop with an
    /// error that says the disk is full (an import then resumes when re-run with space freed; a
    /// follower retries and serves what it has meanwhile).
    #[arg(long = "db.min-free-mb", value_name = "MIB", default_value_t = 64)]
    pub min_free_mb: u64,
}

impl DatadirArgs {
    /// Opens the database with the page cache and the free-space reserve asked for.
    pub fn open(&self) -> crate::storage::StorageResult<crate::storage::Database> {
        let db = crate::storage::Database::open_with_cache(&self.datadir, self.cache_bytes())?;
        db.set_min_free(self.min_free_mb.saturating_mul(1024 * 1024));
        Ok(db)
    }

    /// `--db.cache-mb` in bytes.
    pub fn cache_bytes(&self) -> usize {
        usize::try_from(self.cache_mb << 20).unwrap_or(usize::MAX)
    }

    /// Opens a datadir that holds a chain already, for a command that reads one (`verify`,
    /// `export`; `node`, `import` and `follow` without `--chain`). A path without a database is
    /// refused before anything is created there, and one whose database holds no genesis is
    /// left as it was found; either error names the path and the `loupe init` to run.
    /// `chain_flag`: the command also takes `--chain`, which the error then offers.
    pub fn open_initialised(&self, chain_flag: bool) -> eyre::Result<crate::storage::Database> {
        let dir = &self.datadir;
        let or_chain = if chain_flag { ", or give --chain NAME|FILE here" } else { "" };
        let init = format!(
            "initialise one with `loupe init --datadir {} --chain NAME|FILE` (mainnet, sepolia, \
             holesky, hoodi, or a genesis.json){or_chain}",
            shell_word(&dir.display().to_string())
        );
        if !dir.join(crate::storage::DB_FILE).is_file() {
            let what = if dir.is_dir() {
                format!("holds no {}", crate::storage::DB_FILE)
            } else if dir.exists() {
                "is not a folder".to_string()
            } else {
                "does not exist".to_string()
            };
            eyre::bail!(
                "{} is not a loupe datadir (it {what}), and nothing was created there: {init}",
                dir.display()
            );
        }
        let before = Before::of(dir);
        let db = self.open()?;
        if db.begin_read()?.head()?.is_none() {
            drop(db);
            before.undo();
            eyre::bail!(
                "{} holds no chain (no genesis block is stored), and was left as it was: {init}",
                dir.display()
            );
        }
        Ok(db)
    }
}

/// `s` as one shell word: as it is when it needs no quoting, else in single quotes.
pub(crate) fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%~".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// What was at a datadir's path before a command opened it there, so that a command refused
/// before the datadir holds a chain leaves the path as it found it ([`Before::undo`]).
#[derive(Debug)]
struct Before {
    /// The datadir.
    dir: PathBuf,
    /// The folders `Database::open` would create, innermost first: the datadir and those of
    /// its ancestors that do not exist.
    new_dirs: Vec<PathBuf>,
    /// Whether the database file was there.
    db_file: bool,
    /// Whether the segments folder was there.
    segments: bool,
}

impl Before {
    fn of(dir: &std::path::Path) -> Self {
        let new_dirs = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists());
        Self {
            dir: dir.to_path_buf(),
            new_dirs: new_dirs.map(std::path::Path::to_path_buf).collect(),
            db_file: dir.join(crate::storage::DB_FILE).exists(),
            segments: dir.join(crate::storage::segments::SEGMENTS_DIR).exists(),
        }
    }

    /// Removes what opening the database created: its file, the empty segments folder, and
    /// the folders made for them (each only if empty, so nothing else is ever removed). Call
    /// once the database is closed.
    fn undo(&self) {
        if !self.segments {
            let _ = std::fs::remove_dir(self.dir.join(crate::storage::segments::SEGMENTS_DIR));
        }
        if !self.db_file {
            for name in [
                crate::storage::DB_FILE.to_string(),
                format!("{}.creating", crate::storage::DB_FILE),
            ] {
                let _ = std::fs::remove_file(self.dir.join(name));
            }
        }
        for dir in &self.new_dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Which chain a datadir holds, given where a datadir may be initialised.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ChainArgs {
    /// The chain: `mainnet`, `sepolia`, `holesky` or `hoodi` (built in), or the path of a
    /// genesis.json (geth's or Besu's). An empty datadir is initialised with it; an initialised
    /// one must hold the same genesis.
    #[arg(long = "chain", visible_alias = "genesis", value_name = "NAME|FILE")]
    pub chain: Option<String>,
    /// How strictly headers are checked, recorded at init: `strict` (every consensus rule) or
    /// `dev` (also takes a timestamp equal to the parent's and any base fee, as anvil and
    /// hardhat mine). Default: `dev` for chain id 31337, else `strict`; `dev` is refused for
    /// the named networks.
    #[arg(long = "header-policy", value_name = "strict|dev", value_parser = ["strict", "dev"])]
    pub header_policy: Option<String>,
    /// Which trie history to keep, recorded at init: `all` (proofs at every block, the
    /// default) or `window` (trie nodes for the unwind window only, about half the datadir on
    /// a busy chain; `eth_getProof` below the window answers an error naming this choice).
    #[arg(long = "proof-history", value_name = "all|window", value_parser = ["all", "window"])]
    pub proof_history: Option<String>,
    /// Take a genesis file whose chain id is a named network's (1 is mainnet's) but whose
    /// genesis is not that network's: a private chain under a public chain id, as the
    /// consensus test suites, test chains and shadow forks use. Without it such a file is
    /// refused, naming both genesis hashes. Applies at init only.
    #[arg(long = "allow-foreign-genesis")]
    pub allow_foreign_genesis: bool,
}

impl ChainArgs {
    /// Where the genesis comes from, if `--chain` was given.
    pub fn source(&self) -> Option<crate::import::GenesisSource<'_>> {
        let chain = self.chain.as_deref()?;
        Some(match crate::chain::Network::from_name(chain) {
            Some(n) => crate::import::GenesisSource::Network(n),
            None => crate::import::GenesisSource::File(std::path::Path::new(chain)),
        })
    }

    /// The init options these flags ask for.
    pub fn options(&self) -> crate::import::InitOptions {
        crate::import::InitOptions {
            policy: self.header_policy.as_deref().and_then(crate::chain::HeaderPolicy::from_name),
            proof_history: self
                .proof_history
                .as_deref()
                .and_then(crate::storage::segments::ProofHistory::from_name),
            foreign_chain_id: self.allow_foreign_genesis,
        }
    }

    /// Opens `datadir` with its chain spec, for `node`, `import` and `follow`: with `--chain`,
    /// initialising a datadir that holds none yet (if that is refused, what opening created is
    /// removed again, and a genesis file that is not there is refused before anything is
    /// created); without it, a datadir that holds a chain already
    /// ([`DatadirArgs::open_initialised`]).
    pub fn open(
        &self,
        datadir: &DatadirArgs,
    ) -> eyre::Result<(crate::storage::Database, crate::chain::ChainSpec)> {
        if self.source().is_none() {
            let db = datadir.open_initialised(true)?;
            let spec = self.spec(&db)?;
            return Ok((db, spec));
        }
        self.check_file()?;
        let before = Before::of(&datadir.datadir);
        let opened =
            datadir.open().map_err(eyre::Report::from).and_then(|db| match self.spec(&db) {
                Ok(spec) => Ok((db, spec)),
                Err(e) => Err(e.into()),
            });
        if opened.is_err() {
            before.undo();
        }
        opened
    }

    /// Initialises `datadir` with `--chain` for `loupe init` (a no-op on a datadir that holds
    /// the same genesis already): the database, the spec, and whether it was created now. Refused before
    /// anything is created without `--chain` or with a genesis file that is not there; if the
    /// initialisation itself is refused, what opening created is removed again.
    pub fn init(
        &self,
        datadir: &DatadirArgs,
    ) -> eyre::Result<(crate::storage::Database, crate::chain::ChainSpec, bool)> {
        let Some(source) = self.source() else {
            eyre::bail!(
                "loupe init needs --chain NAME|FILE (mainnet, sepolia, holesky, hoodi, or a \
                 genesis.json); nothing was created"
            );
        };
        self.check_file()?;
        let before = Before::of(&datadir.datadir);
        let done = datadir.open().map_err(eyre::Report::from).and_then(|db| {
            let (spec, created) = crate::import::init_with(&db, source, self.options())?;
            Ok((db, spec, created))
        });
        if done.is_err() {
            before.undo();
        }
        done
    }

    /// Refuses a `--chain` that names neither a network nor a file that is there.
    fn check_file(&self) -> eyre::Result<()> {
        if let Some(crate::import::GenesisSource::File(path)) = self.source()
            && !path.is_file()
        {
            eyre::bail!(
                "--chain {}: no such genesis file, and not a network's name (mainnet, sepolia, \
                 holesky, hoodi); nothing was created",
                path.display()
            );
        }
        Ok(())
    }

    /// The datadir's chain spec: initialised from `--chain` when given (a no-op, or a refusal
    /// naming both genesis hashes, on a datadir that holds a chain already), else read back.
    pub fn spec(
        &self,
        db: &crate::storage::Database,
    ) -> Result<crate::chain::ChainSpec, crate::import::ImportError> {
        match self.source() {
            Some(source) => {
                let (spec, created) = crate::import::init_with(db, source, self.options())?;
                if created {
                    tracing::info!(
                        target: "import",
                        genesis = %spec.genesis_hash(),
                        chain_id = spec.chain_id(),
                        network = spec.network().map_or("none", |n| n.name()),
                        policy = %spec.header_policy(),
                        "initialised the datadir"
                    );
                }
                Ok(spec)
            }
            None => {
                if self.header_policy.is_some() {
                    tracing::warn!(target: "import", "--header-policy applies only at init (with --chain)");
                }
                if self.allow_foreign_genesis {
                    tracing::warn!(target: "import", "--allow-foreign-genesis applies only at init (with --chain)");
                }
                crate::import::load_spec(db)?.ok_or(crate::import::ImportError::NotInitialised)
            }
        }
    }
}

/// Logging.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Log filter (tracing `EnvFilter` syntax); `RUST_LOG` overrides it.
    #[arg(long = "log.filter", default_value = "info", global = true)]
    pub filter: String,
}

/// HTTP JSON-RPC server flags (names as reth/geth use them).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "RPC")]
pub struct RpcArgs {
    /// Listen address.
    #[arg(long = "http.addr", default_value = "127.0.0.1")]
    pub addr: std::net::IpAddr,
    /// Listen port (0 picks a free one).
    #[arg(long = "http.port", default_value_t = 8545)]
    pub port: u16,
    /// Allowed CORS origins, comma-separated, or `*`. Off when not given.
    #[arg(long = "http.corsdomain")]
    pub corsdomain: Option<String>,
    /// Largest request body in bytes.
    #[arg(long = "rpc.max-request-size", default_value_t = 10 * 1024 * 1024)]
    pub max_request_size: u32,
    /// Largest response body in bytes.
    #[arg(long = "rpc.max-response-size", default_value_t = 128 * 1024 * 1024)]
    pub max_response_size: u32,
    /// Most requests in one batch.
    #[arg(long = "rpc.max-batch-size", default_value_t = 1000)]
    pub max_batch_size: u32,
    /// Most concurrent connections.
    #[arg(long = "rpc.max-connections", default_value_t = 1024)]
    pub max_connections: u32,
    /// Most concurrent connections from one IP address (one IPv6 /64), loopback included; more
    /// are closed at accept. Behind a proxy every client has the proxy's address.
    #[arg(long = "rpc.max-connections-per-ip", default_value_t = 128)]
    pub max_connections_per_ip: u32,
    /// Seconds a request body may take to arrive after its head; then HTTP 408 and the
    /// connection is closed.
    #[arg(long = "rpc.body-timeout", default_value_t = 10.0)]
    pub body_timeout: f64,
    /// Slowest average rate of a request body, in bytes/s, enforced from 2 s after its head on
    /// (slower: HTTP 408, connection closed); 0: no minimum.
    #[arg(long = "rpc.min-body-rate", default_value_t = 1024)]
    pub min_body_rate: u32,
    /// Seconds a connection may take to send a request's head, idle keep-alive time included;
    /// then it is closed.
    #[arg(long = "rpc.idle-timeout", default_value_t = 30.0)]
    pub idle_timeout: f64,
    /// Percent of each worker pool (EVM, reads) one client (IP address) may hold: of the
    /// workers running its calls (at least one) and of the queue; more gets -32005 naming the
    /// share. 100: no per-client share.
    #[arg(long = "rpc.client-share", default_value_t = 50)]
    pub client_share: u32,
    /// MiB of request bodies held at once, every client's together (one client: its
    /// --rpc.client-share of it, at least one body of --rpc.max-request-size); a body that does
    /// not fit gets 503 and -32005 naming the flag.
    #[arg(long = "rpc.max-body-memory", default_value_t = 128)]
    pub max_body_memory: usize,
    /// Gas cap of eth_call / trace_call.
    #[arg(long = "rpc.gascap", default_value_t = 50_000_000)]
    pub gas_cap: u64,
    /// Execution deadline of one eth_call / trace_call, in seconds.
    #[arg(long = "rpc.evm-timeout", default_value_t = 5.0)]
    pub evm_timeout: f64,
    /// How long a short eth_call, trace_call or debug_traceCall may run on the HTTP thread that
    /// parsed it, in µs, before it goes to the EVM workers instead (0: every call goes to them).
    #[arg(long = "rpc.inline-budget-us", default_value_t = crate::rpc::INLINE_BUDGET_US)]
    pub inline_budget_us: u64,
    /// EVM worker threads for eth_call / trace_call (default: CPU cores).
    #[arg(long = "rpc.trace-workers")]
    pub trace_workers: Option<usize>,
    /// Calls that may wait for a worker before new ones get -32005.
    #[arg(long = "rpc.trace-queue", default_value_t = 64)]
    pub trace_queue: usize,
    /// Worker threads for reads of whole blocks and block ranges: blocks, receipts, logs, fee
    /// history (default: CPU cores).
    #[arg(long = "rpc.read-workers")]
    pub read_workers: Option<usize>,
    /// Such reads that may wait for a worker before new ones get -32005.
    #[arg(long = "rpc.read-queue", default_value_t = 64)]
    pub read_queue: usize,
    /// Threads serving HTTP and the cheap reads (default: CPU cores). On a 2-core machine, 1
    /// favours trace_call throughput and 2 favours eth_ reads (BENCHMARKS.md).
    #[arg(long = "rpc.io-threads")]
    pub io_threads: Option<usize>,
    /// Memory for transaction objects already serialized, in MiB (0: no cache). Keyed by
    /// block hash and index, so a reorg cannot serve a stale one.
    #[arg(long = "rpc.tx-cache-mb", default_value_t = 16)]
    pub tx_cache_mb: u64,
    /// Memory for block objects and block receipts already serialized, in MiB (0: no cache).
    /// Keyed by block hash, so a reorg cannot serve a stale one.
    #[arg(long = "rpc.block-cache-mb", default_value_t = 32)]
    pub block_cache_mb: u64,
    /// Serve `vmTrace` in trace_call (off by default: it is expensive).
    #[arg(long = "trace.vm-trace")]
    pub vm_trace: bool,
    /// Most blocks one eth_getLogs query (or one filter poll) covers.
    #[arg(long = "rpc.max-logs-range", default_value_t = 100_000)]
    pub max_logs_range: u64,
    /// Most logs one eth_getLogs query returns.
    #[arg(long = "rpc.max-logs", default_value_t = 20_000)]
    pub max_logs: usize,
    /// Most polling filters (eth_newFilter, eth_newBlockFilter) installed at once.
    #[arg(long = "rpc.max-filters", default_value_t = 1024)]
    pub max_filters: usize,
    /// Most polling filters one client (IP address) may have installed at once.
    #[arg(long = "rpc.max-filters-per-ip", default_value_t = 64)]
    pub max_filters_per_ip: usize,
    /// Most addresses one log filter (eth_getLogs, eth_newFilter, logs subscriptions) lists,
    /// and one trace_filter fromAddress or toAddress.
    #[arg(long = "rpc.max-filter-addresses", default_value_t = 1000)]
    pub max_filter_addresses: usize,
    /// Most alternatives at one topic position of a log filter.
    #[arg(long = "rpc.max-filter-topics", default_value_t = 1000)]
    pub max_filter_topics: usize,
    /// Most accounts one state override set names.
    #[arg(long = "rpc.max-override-accounts", default_value_t = crate::rpc::MAX_OVERRIDE_ACCOUNTS)]
    pub max_override_accounts: usize,
    /// Most storage slots one state override set gives, over all its accounts.
    #[arg(long = "rpc.max-override-slots", default_value_t = crate::rpc::MAX_OVERRIDE_SLOTS)]
    pub max_override_slots: usize,
    /// Largest answer the struct logger (debug_trace* without a tracer) may build, in bytes,
    /// counted while the call runs; it bounds one trace's memory (about 5x this at peak).
    #[arg(long = "rpc.max-trace-size", default_value_t = crate::rpc::MAX_TRACE_SIZE)]
    pub max_trace_size: u64,
    /// Seconds after which a filter nobody polls is removed.
    #[arg(long = "rpc.filter-timeout", default_value_t = 300)]
    pub filter_timeout: u64,
    /// Namespaces served, comma-separated (of eth, net, web3, trace, debug); a method outside
    /// them gets -32601.
    #[arg(long = "http.api", value_delimiter = ',', default_value = "eth,net,web3,trace,debug")]
    pub http_api: Vec<String>,
    /// Serve JSON-RPC over WebSocket too (with eth_subscribe), on --ws.addr:--ws.port.
    #[arg(long = "ws")]
    pub ws: bool,
    /// WebSocket listen address.
    #[arg(long = "ws.addr", default_value = "127.0.0.1")]
    pub ws_addr: std::net::IpAddr,
    /// WebSocket listen port (0 picks a free one).
    #[arg(long = "ws.port", default_value_t = 8546)]
    pub ws_port: u16,
    /// Most subscriptions one WebSocket connection may hold.
    #[arg(long = "ws.max-subscriptions", default_value_t = 64)]
    pub ws_max_subscriptions: u32,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9001), on a listener of their
    /// own. Off when not given.
    #[arg(long = "metrics", value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Most blocks one trace_filter covers.
    #[arg(long = "trace.max-filter-range", default_value_t = 10_000)]
    pub max_trace_filter_range: u64,
    /// Most traces one trace_filter returns (page with `after` and `count`).
    #[arg(long = "trace.max-filter-results", default_value_t = 10_000)]
    pub max_trace_filter_results: usize,
    /// Serve the explorer's pages under /explorer/ on the HTTP listener (on by default for
    /// `loupe dev`; `--http.explorer=false` turns it off there).
    #[arg(long = "http.explorer", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    pub explorer: Option<bool>,
}

impl RpcArgs {
    /// The validated server configuration.
    pub fn to_config(&self) -> eyre::Result<crate::rpc::RpcConfig> {
        if !(self.evm_timeout > 0.0 && self.evm_timeout.is_finite()) {
            eyre::bail!("--rpc.evm-timeout must be a positive number of seconds");
        }
        for (flag, secs) in
            [("--rpc.body-timeout", self.body_timeout), ("--rpc.idle-timeout", self.idle_timeout)]
        {
            if !(secs > 0.0 && std::time::Duration::try_from_secs_f64(secs).is_ok()) {
                eyre::bail!("{flag} must be a positive number of seconds");
            }
        }
        for api in &self.http_api {
            if !crate::rpc::NAMESPACES.contains(&api.as_str()) {
                eyre::bail!(
                    "--http.api: unknown namespace {api:?} (known: {})",
                    crate::rpc::NAMESPACES.join(", ")
                );
            }
        }
        let mut c = crate::rpc::RpcConfig {
            addr: std::net::SocketAddr::new(self.addr, self.port),
            max_request_body: self.max_request_size,
            max_response_body: self.max_response_size,
            max_batch: self.max_batch_size,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip.max(1),
            body_timeout: std::time::Duration::from_secs_f64(self.body_timeout),
            min_body_rate: self.min_body_rate,
            idle_timeout: std::time::Duration::from_secs_f64(self.idle_timeout),
            client_share: self.client_share.max(1),
            max_body_memory: self.max_body_memory.saturating_mul(1 << 20),
            cors: self.corsdomain.clone(),
            gas_cap: self.gas_cap,
            call_timeout: std::time::Duration::from_secs_f64(self.evm_timeout),
            inline_budget: std::time::Duration::from_micros(self.inline_budget_us),
            queue: self.trace_queue,
            read_queue: self.read_queue,
            tx_cache_bytes: self.tx_cache_mb.saturating_mul(1024 * 1024),
            block_cache_bytes: self.block_cache_mb.saturating_mul(1024 * 1024),
            vm_trace: self.vm_trace,
            io_threads: self.io_threads.map(|n| n.max(1)),
            max_logs_range: self.max_logs_range.max(1),
            max_logs: self.max_logs,
            max_filters: self.max_filters,
            max_filters_per_ip: self.max_filters_per_ip,
            max_filter_addresses: self.max_filter_addresses,
            max_filter_topics: self.max_filter_topics,
            max_override_accounts: self.max_override_accounts,
            max_override_slots: self.max_override_slots,
            max_trace_size: self.max_trace_size,
            filter_idle: std::time::Duration::from_secs(self.filter_timeout),
            metrics: self.metrics,
            apis: self.http_api.clone(),
            ws: self.ws.then(|| std::net::SocketAddr::new(self.ws_addr, self.ws_port)),
            ws_max_subscriptions: self.ws_max_subscriptions.max(1),
            max_trace_filter_range: self.max_trace_filter_range.max(1),
            max_trace_filter_results: self.max_trace_filter_results.max(1),
            ..Default::default()
        };
        if let Some(w) = self.trace_workers {
            c.workers = w.max(1);
        }
        if let Some(w) = self.read_workers {
            c.read_workers = w.max(1);
        }
        Ok(c)
    }
}

/// `loupe follow` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Following")]
pub struct FollowArgs {
    /// The upstream node's HTTP JSON-RPC URL (geth, reth, Nethermind, Erigon, anvil, loupe).
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Milliseconds between polls of the upstream's head once caught up.
    #[arg(long = "follow.poll-ms", default_value_t = 500)]
    pub poll_ms: u64,
    /// Blocks fetched per batch request during catch-up.
    #[arg(long = "follow.batch", default_value_t = 32)]
    pub batch: u64,
    /// Deepest reorg followed; a deeper one stops following (serving goes on).
    #[arg(long = "follow.max-reorg", default_value_t = 64)]
    pub max_reorg: u64,
    /// `GET /health` answers 503 when the local head trails the upstream's by more blocks.
    #[arg(long = "follow.max-lag", default_value_t = 8)]
    pub max_lag: u64,
    /// Timeout of one upstream request, in milliseconds.
    #[arg(long = "follow.timeout-ms", default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Do not forward eth_sendRawTransaction to the upstream.
    #[arg(long = "follow.no-forward-tx")]
    pub no_forward_tx: bool,
    /// During catch-up, make every Nth block's commit durable (the tip's always is).
    #[arg(long = "follow.sync-every", value_name = "N", default_value_t = crate::import::DEFAULT_SYNC_EVERY)]
    pub sync_every: u64,
}

impl FollowArgs {
    /// The validated follower configuration.
    pub fn to_config(&self) -> eyre::Result<crate::follow::FollowConfig> {
        if self.batch == 0 {
            eyre::bail!("--follow.batch must be at least 1");
        }
        if self.timeout_ms == 0 {
            eyre::bail!("--follow.timeout-ms must be at least 1");
        }
        Ok(crate::follow::FollowConfig {
            upstream: self.upstream.clone(),
            poll: std::time::Duration::from_millis(self.poll_ms),
            batch: self.batch,
            max_reorg: self.max_reorg,
            timeout: std::time::Duration::from_millis(self.timeout_ms),
            sync_every: self.sync_every.max(1),
        })
    }
}
