//! [`RpcConfig`]: the server's limits and switches, with their defaults, and the namespaces
//! `--http.api` chooses from.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::rpc::Pages;

/// Server limits and switches; defaults are those of `../shared/spec/behaviour.md`.
#[derive(Debug, Clone)]
pub struct RpcConfig {
    /// Address to listen on.
    pub addr: SocketAddr,
    /// Largest request body in bytes (larger → HTTP 413).
    pub max_request_body: u32,
    /// Largest response in bytes (larger → -32008).
    pub max_response_body: u32,
    /// Most requests in one batch (more → one -32010 error).
    pub max_batch: u32,
    /// Most concurrent connections.
    pub max_connections: u32,
    /// Most concurrent connections from one IP address (more are closed at accept; loopback
    /// included).
    pub max_connections_per_ip: u32,
    /// Longest a request body may take to arrive, from its head (then HTTP 408 and the
    /// connection is closed).
    pub body_timeout: Duration,
    /// Slowest a request body may arrive, in bytes per second on average since its head, once
    /// [`BODY_GRACE`] has passed (slower: HTTP 408 and the connection is closed); 0: no minimum.
    pub min_body_rate: u32,
    /// Longest a connection may wait for the whole head of its next request, idle keep-alive
    /// time included (hyper's header read timeout); then it is closed.
    pub idle_timeout: Duration,
    /// The share of each worker pool one client (IP address) may hold, in percent: of the
    /// workers (at least one) and of the queue; 100: no per-client share (`server/pool.rs`).
    pub client_share: u32,
    /// Most bytes of request bodies held at once, every client's together (one client: its
    /// `client_share` of it); a body that does not fit is refused with 503 and -32005.
    pub max_body_memory: usize,
    /// CORS allowed origins (`*` for any); `None` sends no CORS headers.
    pub cors: Option<String>,
    /// Gas cap of `eth_call`/`trace_call` (missing or larger gas is lowered to it).
    pub gas_cap: u64,
    /// Deadline of one EVM call.
    pub call_timeout: Duration,
    /// How long a short `eth_call` or `trace_call` may run on the server's thread that parsed it
    /// before it goes to the EVM pool instead (`--rpc.inline-budget-us`); zero: every call goes
    /// to the pool. While the server is saturated every call goes there (`request/inline.rs`).
    pub inline_budget: Duration,
    /// EVM worker threads.
    pub workers: usize,
    /// Calls that may wait for a worker before new ones are refused with -32005.
    pub queue: usize,
    /// Worker threads for reads of whole blocks and block ranges (logs, receipts, fee history).
    pub read_workers: usize,
    /// Such reads that may wait for a worker before new ones are refused with -32005.
    pub read_queue: usize,
    /// Threads of the server's async runtime (HTTP and cheap reads); `None`: CPU cores.
    pub io_threads: Option<usize>,
    /// Bytes of serialized transaction objects kept (`request/cache.rs`); 0: none.
    pub tx_cache_bytes: u64,
    /// Bytes of serialized block objects and block receipts kept (`request/cache.rs`); 0: none.
    pub block_cache_bytes: u64,
    /// Serve `vmTrace`.
    pub vm_trace: bool,
    /// Most blocks one logs query (or one filter poll) covers.
    pub max_logs_range: u64,
    /// Most logs one query returns.
    pub max_logs: usize,
    /// Most filters installed at once.
    pub max_filters: usize,
    /// Most filters installed at once by one client (IP address); in-process callers are not
    /// counted.
    pub max_filters_per_ip: usize,
    /// Most addresses one log filter lists (`eth_getLogs`, `eth_newFilter`, `logs`
    /// subscriptions), and one `trace_filter` `fromAddress` or `toAddress` (more: -32602).
    pub max_filter_addresses: usize,
    /// Most alternatives at one topic position of a log filter (more: -32602).
    pub max_filter_topics: usize,
    /// Most accounts one state override set names (`eth_call`, `eth_estimateGas`,
    /// `eth_createAccessList`, `trace_call`, `debug_traceCall`, each `eth_simulateV1` block;
    /// more: -32602).
    pub max_override_accounts: usize,
    /// Most storage slots one state override set gives, over all its accounts (more: -32602).
    pub max_override_slots: usize,
    /// Largest answer the struct logger may build, in bytes of JSON, counted while the call
    /// runs (more: -32008): it bounds the memory of one `debug_trace*` call.
    pub max_trace_size: u64,
    /// A filter not polled for this long is removed.
    pub filter_idle: Duration,
    /// Namespaces served (`--http.api`, of [`NAMESPACES`]); other methods get -32601.
    pub apis: Vec<String>,
    /// WebSocket listen address (`--ws`); `None`: no WebSocket server, no subscriptions.
    pub ws: Option<SocketAddr>,
    /// Most subscriptions one WebSocket connection may hold.
    pub ws_max_subscriptions: u32,
    /// Interval of the WebSocket pings; a connection that misses three is closed.
    pub ws_ping: Duration,
    /// Where Prometheus metrics are served (`--metrics`); the CLI installs the exporter.
    pub metrics: Option<SocketAddr>,
    /// Most blocks one `trace_filter` covers.
    pub max_trace_filter_range: u64,
    /// Most traces one `trace_filter` returns.
    pub max_trace_filter_results: usize,
    /// Register the `loupe_test*` methods (tests only): `loupe_testPanic` panics,
    /// `loupe_testHold` holds a read worker until `loupe_testRelease`.
    pub test_methods: bool,
    /// Progress against an upstream, when following one (`eth_syncing`, `GET /health`,
    /// where `eth_sendRawTransaction` goes).
    pub sync: Arc<crate::chain::SyncStatus>,
    /// Pages served on the HTTP listener beside JSON-RPC (the CLI sets the explorer here with
    /// `--http.explorer`); `None`: every path but `/` and `/health` is 404.
    pub pages: Option<Arc<dyn Pages>>,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8545)),
            max_request_body: 10 * 1024 * 1024,
            max_response_body: 128 * 1024 * 1024,
            max_batch: 1000,
            max_connections: 1024,
            max_connections_per_ip: 128,
            body_timeout: Duration::from_secs(10),
            min_body_rate: 1024,
            idle_timeout: Duration::from_secs(30),
            client_share: 50,
            max_body_memory: 128 << 20,
            cors: None,
            gas_cap: 50_000_000,
            call_timeout: Duration::from_secs(5),
            inline_budget: Duration::from_micros(INLINE_BUDGET_US),
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            queue: 64,
            read_workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            read_queue: 64,
            io_threads: None,
            tx_cache_bytes: 16 * 1024 * 1024,
            block_cache_bytes: 32 * 1024 * 1024,
            vm_trace: false,
            max_logs_range: 100_000,
            max_logs: 20_000,
            max_filters: 1024,
            max_filters_per_ip: 64,
            max_filter_addresses: 1000,
            max_filter_topics: 1000,
            max_override_accounts: MAX_OVERRIDE_ACCOUNTS,
            max_override_slots: MAX_OVERRIDE_SLOTS,
            max_trace_size: MAX_TRACE_SIZE,
            filter_idle: Duration::from_secs(300),
            apis: NAMESPACES.iter().map(|s| s.to_string()).collect(),
            ws: None,
            ws_max_subscriptions: 64,
            ws_ping: Duration::from_secs(10),
            metrics: None,
            max_trace_filter_range: 10_000,
            max_trace_filter_results: 10_000,
            test_methods: false,
            sync: Arc::default(),
            pages: None,
        }
    }
}

/// The default of [`RpcConfig::inline_budget`], in µs (`--rpc.inline-budget-us`). A short
/// `eth_call`, `trace_call` or `debug_traceCall` run on the server's thread spares the two
/// wake-ups of a hand-off to a worker and back: about a third less CPU per call with one client
/// and 30 % less with eight, on two cores shared with the load generator (BENCHMARKS.md, issue
/// 42, sessions 42 and 44).
pub const INLINE_BUDGET_US: u64 = 100;

/// How long a request body may arrive slower than [`RpcConfig::min_body_rate`] before the rate
/// is enforced: a client whose first segments were lost may stall for a retransmission or two.
pub const BODY_GRACE: Duration = Duration::from_secs(2);
/// The default of [`RpcConfig::max_override_accounts`] (`--rpc.max-override-accounts`).
pub const MAX_OVERRIDE_ACCOUNTS: usize = 10_000;

/// The default of [`RpcConfig::max_override_slots`] (`--rpc.max-override-slots`).
pub const MAX_OVERRIDE_SLOTS: usize = 100_000;

/// The default of [`RpcConfig::max_trace_size`] (`--rpc.max-trace-size`), in bytes.
pub const MAX_TRACE_SIZE: u64 = 32 * 1024 * 1024;

/// The namespaces `--http.api` chooses from (a method's namespace is its name up to `_`).
pub const NAMESPACES: [&str; 5] = ["eth", "net", "web3", "trace", "debug"];
