//! [`RpcContext`]: the state every handler shares (the database, the chain, the config, the
//! worker pools, caches, filters and the rest); each namespace's file adds its methods.

use std::sync::Arc;

use crate::chain::ChainSpec;
use crate::rpc::RpcConfig;
use crate::rpc::eth::filters::Filters;
use crate::rpc::eth::tips::TipsCache;
use crate::rpc::request::cache;
use crate::rpc::request::inline_gate::InlineState;
use crate::rpc::server::heads::Heads;
use crate::rpc::server::pool;
use crate::rpc::server::test_holds::TestHolds;
use crate::storage::Database;

/// Shared state of all handlers.
#[derive(Debug)]
pub struct RpcContext {
    pub(super) db: Arc<Database>,
    pub(super) spec: ChainSpec,
    pub(super) config: RpcConfig,
    /// EVM work.
    pub(super) pool: pool::WorkerPool,
    /// Reads of whole blocks and block ranges (`methods::Handler::Read`).
    pub(super) reads: pool::WorkerPool,
    /// Client for forwarding to the upstream, made on first use.
    pub(super) upstream: std::sync::OnceLock<Result<jsonrpsee::http_client::HttpClient, String>>,
    /// The suggested tip and the head it was computed at (`eth/fees.rs`).
    pub(super) tip_cache: std::sync::Mutex<Option<(alloy_primitives::B256, u128)>>,
    /// Installed polling filters (`eth/filters.rs`; their methods: `eth/logs.rs`).
    pub(super) filters: Filters,
    /// The stored head, watched for WebSocket subscriptions (`server/heads.rs`); `None`
    /// without `--ws`.
    pub(super) heads: Option<Heads>,
    /// Transaction objects already serialized (`request/cache.rs`).
    pub(super) tx_cache: cache::TxCache,
    /// Block objects and block receipts already serialized (`request/cache.rs`).
    pub(super) block_cache: cache::BlockCache,
    /// Each recent block's sorted tips, for `eth_feeHistory` (`eth/tips.rs`).
    pub(super) tips_cache: TipsCache,
    /// State of the test-only methods (`RpcConfig::test_methods`, `server/test_holds.rs`).
    pub(super) test_holds: TestHolds,
    /// Whether short EVM calls run inline now (`request/inline_gate.rs`).
    pub(super) inline: InlineState,
}

impl RpcContext {
    /// Handler state without a server: for benchmarks and tools that call methods in-process.
    pub fn new(db: Arc<Database>, spec: ChainSpec, config: RpcConfig) -> Self {
        let timeout = config.call_timeout;
        let pool =
            pool::WorkerPool::new(pool::PoolKind::Evm, config.workers, config.queue, timeout)
                .with_client_share(config.client_share);
        let reads = pool::WorkerPool::new(
            pool::PoolKind::Read,
            config.read_workers,
            config.read_queue,
            timeout,
        )
        .with_client_share(config.client_share);
        // Typical sizes: a transaction object, and a block's objects on a busy chain.
        let tx_cache = cache::TxCache::new(config.tx_cache_bytes, 1024);
        let block_cache = cache::BlockCache::new(config.block_cache_bytes, 256 * 1024);
        Self {
            db,
            spec,
            config,
            pool,
            reads,
            upstream: std::sync::OnceLock::new(),
            tip_cache: std::sync::Mutex::new(None),
            filters: Filters::default(),
            heads: None,
            tx_cache,
            block_cache,
            tips_cache: TipsCache::default(),
            test_holds: TestHolds::default(),
            inline: InlineState::default(),
        }
    }
}
