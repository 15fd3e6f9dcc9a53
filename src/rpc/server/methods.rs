//! [`Methods`]: the one table of the JSON-RPC methods loupe serves, by name. The HTTP and
//! WebSocket servers both dispatch on it (`dispatch.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use jsonrpsee::types::Params;

use crate::rpc::request::json::Raw;
use crate::rpc::request::params;
use crate::rpc::server::pages::CallByName;
use crate::rpc::server::pool::{WorkerPool, panic_message};
use crate::rpc::{NAMESPACES, RpcContext, RpcError, RpcResult};

/// A method that reads storage and returns JSON, with no EVM: run inline ([`Handler::Sync`]) or
/// on the read pool ([`Handler::Read`]).
pub(crate) type SyncFn = fn(&RpcContext, Params<'_>) -> RpcResult<Raw>;

/// What an EVM method returns: it waits for the worker pool.
pub(crate) type CallFuture = Pin<Box<dyn Future<Output = RpcResult<Raw>> + Send>>;

/// A method that runs EVM work on the worker pool (`pool.rs`) and awaits it.
pub(crate) type AsyncFn = fn(Arc<RpcContext>, Params<'static>) -> CallFuture;

/// How a method runs.
#[derive(Clone, Copy)]
pub(crate) enum Handler {
    /// Inline, on the server's thread: point reads, a few µs of storage reads and JSON.
    Sync(SyncFn),
    /// On the read pool (`RpcContext::reads`): reads whose cost grows with a block's size or a
    /// range's length, which would otherwise hold a server thread for milliseconds or more.
    Read(SyncFn),
    /// On the EVM worker pool.
    Async(AsyncFn),
}

/// Largest parameters, in bytes of JSON, with which a [`Handler::Sync`] method runs inline; with
/// larger ones it runs on the read pool.
const SYNC_PARAMS: usize = 16 * 1024;

/// The methods served, by name, after `--http.api`.
#[derive(Clone)]
pub(crate) struct Methods {
    table: HashMap<&'static str, Handler>,
}

impl std::fmt::Debug for Methods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Methods").field("len", &self.table.len()).finish()
    }
}

impl Methods {
    /// Every method of the namespaces in `config.apis` (plus the `loupe_test*` methods when the
    /// config asks for them).
    pub(crate) fn new(config: &crate::rpc::RpcConfig) -> Self {
        let mut table: HashMap<&'static str, Handler> = HashMap::new();
        // `Sync` or `Read`: the same kind of method, run inline or on the read pool.
        macro_rules! storage_reads {
            ($kind:ident: $($name:literal => $f:ident),* $(,)?) => {$(
                table.insert($name, Handler::$kind(|ctx, p| ctx.$f(p)));
            )*};
        }
        storage_reads! { Sync:
            "eth_getTransactionByBlockNumberAndIndex" => tx_by_number_and_index,
            "eth_getTransactionByBlockHashAndIndex" => tx_by_hash_and_index,
            "eth_getTransactionByHash" => tx_by_hash,
            "eth_getBlockTransactionCountByNumber" => tx_count_by_number,
            "eth_getBlockTransactionCountByHash" => tx_count_by_hash,
            "eth_getTransactionReceipt" => receipt,
            "eth_getBalance" => balance,
            "eth_getTransactionCount" => nonce,
            "eth_getCode" => code,
            "eth_getStorageAt" => storage_at,
            "eth_blockNumber" => block_number,
            "eth_chainId" => chain_id,
            "net_version" => net_version,
            "eth_syncing" => syncing,
            "debug_getRawHeader" => raw_header,
            "eth_gasPrice" => gas_price,
            "eth_maxPriorityFeePerGas" => max_priority_fee,
            "eth_baseFee" => base_fee,
            "eth_blobBaseFee" => blob_base_fee,
            "eth_newFilter" => new_filter,
            "eth_newBlockFilter" => new_block_filter,
            "eth_uninstallFilter" => uninstall_filter,
            "eth_config" => eth_config,
            "eth_capabilities" => capabilities,
            "eth_accounts" => accounts,
            "net_listening" => net_listening,
            "net_peerCount" => net_peer_count,
            "web3_sha3" => web3_sha3,
            "eth_getUncleByBlockNumberAndIndex" => uncle_by_number_and_index,
            "eth_getUncleByBlockHashAndIndex" => uncle_by_hash_and_index,
            "eth_getUncleCountByBlockNumber" => uncle_count_by_number,
            "eth_getUncleCountByBlockHash" => uncle_count_by_hash,
            "eth_getRawTransactionByHash" => raw_transaction,
            "debug_getRawTransaction" => raw_transaction,
        }
        // Whole blocks, receipts, block ranges and up to 1,024 slots: off the server's threads.
        storage_reads! { Read:
            "eth_getBlockByNumber" => block_by_number,
            "eth_getBlockByHash" => block_by_hash,
            "eth_getBlockReceipts" => block_receipts,
            "debug_getRawBlock" => raw_block,
            "eth_feeHistory" => fee_history,
            "eth_getLogs" => get_logs,
            "eth_getFilterChanges" => filter_changes,
            "eth_getFilterLogs" => filter_logs,
            "eth_getStorageValues" => storage_values,
            "debug_getRawReceipts" => raw_receipts,
            "eth_getBlockAccessList" => block_access_list,
            "debug_getRawBlockAccessList" => raw_block_access_list,
        }
        table.insert(
            "web3_clientVersion",
            Handler::Sync(|_, p| {
                params::Args::new(&p, 0)?;
                crate::rpc::request::json::to_value(concat!("loupe/v", env!("CARGO_PKG_VERSION")))
            }),
        );
        macro_rules! evm {
            ($($name:literal => $f:ident),* $(,)?) => {$(
                table.insert($name, Handler::Async(|ctx, p| Box::pin(ctx.$f(p))));
            )*};
        }
        evm! {
            "trace_call" => trace_call,
            "eth_call" => eth_call,
            "eth_getProof" => get_proof,
            "eth_sendRawTransaction" => send_raw_transaction,
            "eth_estimateGas" => estimate_gas,
            "eth_createAccessList" => create_access_list,
            "eth_simulateV1" => simulate_v1,
            "debug_traceTransaction" => debug_trace_transaction,
            "debug_traceBlockByNumber" => debug_trace_block_by_number,
            "debug_traceBlockByHash" => debug_trace_block_by_hash,
            "debug_traceCall" => debug_trace_call,
            "debug_executionWitness" => debug_execution_witness,
            "debug_executionWitnessByBlockHash" => debug_execution_witness_by_block_hash,
            "trace_callMany" => trace_call_many,
            "trace_rawTransaction" => trace_raw_transaction,
            "trace_replayTransaction" => trace_replay_transaction,
            "trace_replayBlockTransactions" => trace_replay_block_transactions,
            "trace_transaction" => trace_transaction,
            "trace_get" => trace_get,
            "trace_block" => trace_block,
            "trace_filter" => trace_filter,
        }
        // `--http.api`: a method outside the namespaces chosen is not served (-32601).
        table.retain(|name, _| {
            let ns = name.split('_').next().unwrap_or("");
            !NAMESPACES.contains(&ns) || config.apis.iter().any(|a| a == ns)
        });
        if config.test_methods {
            table.insert("loupe_testPanic", Handler::Sync(|_, _| panic!("test panic")));
            table.insert("loupe_testHold", Handler::Read(|ctx, _| ctx.test_holds.hold()));
            table.insert("loupe_testHolding", Handler::Sync(|ctx, _| ctx.test_holds.holding()));
            table.insert("loupe_testRelease", Handler::Sync(|ctx, _| ctx.test_holds.release()));
        }
        Self { table }
    }

    /// The method called `name`, with its name as a `'static` label for logs and metrics.
    pub(crate) fn get(&self, name: &str) -> Option<(&'static str, Handler)> {
        self.table.get_key_value(name).map(|(k, h)| (*k, *h))
    }

    /// Runs the method called `name` with `params` (the JSON text of its parameters; `None`
    /// for none) as a request runs it: inline, on the read pool or on the EVM pool, logged and
    /// counted. A name not in the table gives -32601.
    pub(crate) async fn call(
        &self,
        ctx: &Arc<RpcContext>,
        name: &str,
        params: Option<&str>,
    ) -> RpcResult<Raw> {
        match self.get(name) {
            None => Err(RpcError::MethodNotFound(name.to_owned())),
            // A point read's parameters are a few hundred bytes; large ones (whatever they hold)
            // are parsed on the read pool, so that they never hold up the server's threads.
            Some((name, Handler::Sync(f))) if params.is_some_and(|p| p.len() > SYNC_PARAMS) => {
                call_read(ctx.clone(), name, f, Params::new(params).into_owned()).await
            }
            Some((name, Handler::Sync(f))) => call_sync(ctx, name, f, Params::new(params)),
            Some((name, Handler::Read(f))) => {
                call_read(ctx.clone(), name, f, Params::new(params).into_owned()).await
            }
            Some((name, Handler::Async(f))) => {
                call_async(ctx.clone(), name, f, Params::new(params).into_owned()).await
            }
        }
    }
}

/// The method table with the context it runs on: what an [`RpcCaller`](crate::rpc::RpcCaller)
/// calls.
pub(crate) struct Served {
    pub(crate) ctx: Arc<RpcContext>,
    pub(crate) methods: Arc<Methods>,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.methods.fmt(f)
    }
}

impl CallByName for Served {
    fn call<'a>(
        &'a self,
        method: &'a str,
        params: &'a str,
    ) -> Pin<Box<dyn Future<Output = RpcResult<Raw>> + Send + 'a>> {
        Box::pin(self.methods.call(&self.ctx, method, Some(params)))
    }

    fn reads(&self) -> &WorkerPool {
        &self.ctx.reads
    }
}

/// Runs a sync method: catches a panic (→ -32603; the server keeps serving), logs and counts
/// the outcome.
pub(crate) fn call_sync(
    ctx: &RpcContext,
    name: &'static str,
    f: SyncFn,
    p: Params<'_>,
) -> RpcResult<Raw> {
    let started = Instant::now();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| f(ctx, p)))
        .unwrap_or_else(|panic| Err(panicked(name, &*panic)));
    log_outcome(name, started, &result);
    result
}

/// Runs a read method on the read pool: as [`call_sync`], awaiting a read worker.
pub(crate) async fn call_read(
    ctx: Arc<RpcContext>,
    name: &'static str,
    f: SyncFn,
    p: Params<'static>,
) -> RpcResult<Raw> {
    let started = Instant::now();
    let worker_ctx = ctx.clone();
    let result = ctx
        .reads
        .run(move || {
            std::panic::catch_unwind(AssertUnwindSafe(|| f(&worker_ctx, p)))
                .unwrap_or_else(|panic| Err(panicked(name, &*panic)))
        })
        .await;
    log_outcome(name, started, &result);
    result
}

/// Runs an EVM method: as [`call_sync`], awaiting the worker pool.
pub(crate) async fn call_async(
    ctx: Arc<RpcContext>,
    name: &'static str,
    f: AsyncFn,
    p: Params<'static>,
) -> RpcResult<Raw> {
    let started = Instant::now();
    let result = AssertUnwindSafe(f(ctx, p))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(panicked(name, &*panic)));
    log_outcome(name, started, &result);
    result
}

fn panicked(name: &str, panic: &(dyn std::any::Any + Send)) -> RpcError {
    RpcError::Internal(format!("panic in {name}: {}", panic_message(panic)))
}

/// Logs a handled call and counts it (`loupe_rpc_requests_total`, `loupe_rpc_errors_total`,
/// `loupe_rpc_request_duration_seconds`, each labelled `method`).
pub(crate) fn log_outcome<T>(method: &'static str, started: Instant, result: &RpcResult<T>) {
    let elapsed = started.elapsed();
    let micros = elapsed.as_micros() as u64;
    metrics::counter!("loupe_rpc_requests_total", "method" => method).increment(1);
    metrics::histogram!("loupe_rpc_request_duration_seconds", "method" => method)
        .record(elapsed.as_secs_f64());
    match result {
        Ok(_) => tracing::debug!(target: "rpc", method, micros, "ok"),
        Err(e) => {
            metrics::counter!("loupe_rpc_errors_total", "method" => method).increment(1);
            tracing::debug!(target: "rpc", method, micros, error = %e, "error");
        }
    }
}
