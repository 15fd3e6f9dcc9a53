//! `--metrics`: the Prometheus exporter on its own listener, and the node-level gauges sampled
//! once a second (head, safe and finalized; the upstream's head and the lag when following;
//! database size; process RSS, open files and CPU through `metrics-process`).
//!
//! Request, pool, import and follow counters are recorded where they happen (`rpc`, `import`,
//! `follow`) through the `metrics` facade; without an exporter they cost nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use eyre::{Result, WrapErr};
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::chain::SyncStatus;
use crate::storage::Database;

/// Histogram buckets of request latency, in seconds (100 µs to 30 s).
const LATENCY_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

/// Installs the exporter on `addr` and starts sampling the gauges. Call inside the runtime.
pub(super) fn start(addr: SocketAddr, db: Arc<Database>, sync: Arc<SyncStatus>) -> Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(&LATENCY_BUCKETS)
        .wrap_err("metrics histogram buckets")?
        .install()
        .wrap_err_with(|| format!("cannot serve metrics on {addr}"))?;
    describe();
    let process = metrics_process::Collector::default();
    process.describe();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            process.collect();
            sample(&db, &sync);
        }
    });
    tracing::info!(target: "rpc", url = %format!("http://{addr}/metrics"), "serving metrics");
    Ok(())
}

fn sample(db: &Database, sync: &SyncStatus) {
    metrics::gauge!("loupe_database_size_bytes").set(db.file_size() as f64);
    let Ok(markers) = db.begin_read().and_then(|r| r.markers()) else { return };
    let Some(m) = markers else { return };
    metrics::gauge!("loupe_chain_head_block").set(m.head as f64);
    metrics::gauge!("loupe_chain_safe_block").set(m.safe as f64);
    metrics::gauge!("loupe_chain_finalized_block").set(m.finalized as f64);
    if let Ok(Some(stage)) = db.begin_read().and_then(|r| r.trie_stage()) {
        metrics::gauge!("loupe_trie_history_staged_to").set(stage.staged_to as f64);
        let waiting = stage.grouped_to.saturating_sub(stage.staged_to);
        metrics::gauge!("loupe_trie_history_waiting_blocks").set(waiting as f64);
        let failed = stage.failed.map_or(0.0, |f| f.0 as f64);
        metrics::gauge!("loupe_trie_history_failed_block").set(failed);
    }
    let s = sync.get();
    if s.following {
        if let Some(up) = s.upstream_head {
            metrics::gauge!("loupe_follow_upstream_head_block").set(up as f64);
            metrics::gauge!("loupe_follow_lag_blocks").set(up.saturating_sub(m.head) as f64);
        }
        metrics::gauge!("loupe_follow_upstream_up").set(if s.upstream_ok { 1.0 } else { 0.0 });
    }
}

/// Help texts and units, as the exposition shows them.
fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!("loupe_rpc_requests_total", "JSON-RPC calls handled, by method");
    describe_counter!("loupe_rpc_errors_total", "JSON-RPC calls answered with an error, by method");
    describe_histogram!(
        "loupe_rpc_request_duration_seconds",
        Unit::Seconds,
        "Time to answer a JSON-RPC call, by method"
    );
    describe_gauge!("loupe_rpc_pool_busy_workers", "EVM workers running a call");
    describe_gauge!("loupe_rpc_pool_queue_depth", "Calls waiting for an EVM worker");
    describe_counter!(
        "loupe_rpc_pool_rejections_total",
        "Calls refused because the queue was full"
    );
    describe_gauge!(
        "loupe_rpc_read_pool_busy_workers",
        "Read workers running a block, receipts, logs or fee-history call"
    );
    describe_gauge!("loupe_rpc_read_pool_queue_depth", "Calls waiting for a read worker");
    describe_counter!(
        "loupe_rpc_read_pool_rejections_total",
        "Block, receipts, logs and fee-history calls refused because the read queue was full"
    );
    describe_gauge!("loupe_chain_head_block", "Number of the head block");
    describe_gauge!("loupe_chain_safe_block", "Number of the safe block");
    describe_gauge!("loupe_chain_finalized_block", "Number of the finalized block");
    describe_gauge!("loupe_follow_upstream_head_block", "The upstream's head, as last seen");
    describe_gauge!("loupe_follow_lag_blocks", "Blocks the head trails the upstream's");
    describe_gauge!("loupe_follow_upstream_up", "1 if the last request to the upstream succeeded");
    describe_gauge!(
        "loupe_trie_history_staged_to",
        "The trie-history stage's progress: every block up to it has per-block trie history"
    );
    describe_gauge!(
        "loupe_trie_history_waiting_blocks",
        "Blocks a grouped import checked per epoch that wait for the trie-history stage"
    );
    describe_gauge!(
        "loupe_trie_history_failed_block",
        "The block whose header state root the stage found wrong (0: none)"
    );
    describe_counter!("loupe_follow_reorgs_total", "Reorgs followed");
    describe_counter!("loupe_follow_reorged_blocks_total", "Blocks unwound by reorgs");
    describe_counter!("loupe_import_blocks_total", "Blocks imported (import and follow)");
    describe_counter!("loupe_import_transactions_total", "Transactions imported");
    describe_counter!("loupe_import_gas_total", "Gas of the blocks imported");
    describe_gauge!("loupe_database_size_bytes", Unit::Bytes, "Size of the database file");
}
