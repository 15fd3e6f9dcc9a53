//! Shared set-up of loupe's fuzz targets: the dev chain in a temporary datadir, the server's
//! request path over it (`loupe::rpc::InProcess`), and seed inputs made from it.
//!
//! Seeds are written, when `LOUPE_FUZZ_SEEDS` names a directory, by each target's `init` (so
//! they always match the current dev chain); `run.sh` passes that directory to libFuzzer after
//! the committed corpus.

pub mod checks;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use loupe::chain::ChainSpec;
use loupe::rpc::{InProcess, RpcConfig};
use loupe::storage::Database;
use serde_json::{Value, json};

/// The dev chain with its 20-block sample history and the request path over it.
pub struct DevNode {
    /// Runs the request path (EVM methods wait on the worker pool from here).
    pub rt: tokio::runtime::Runtime,
    /// The server's request path.
    pub node: InProcess,
    /// The database.
    pub db: Arc<Database>,
    /// The chain's rules.
    pub spec: ChainSpec,
    _dir: tempfile::TempDir,
}

/// Builds the dev chain in a fresh temporary datadir.
pub fn dev_chain() -> (tempfile::TempDir, Arc<Database>, ChainSpec) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path()).expect("open");
    let (spec, _) =
        loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).expect("init");
    loupe::dev::build_sample_history(&db, &spec).expect("history");
    (dir, Arc::new(db), spec)
}

/// The shared dev node (built on first use).
pub fn dev_node() -> &'static DevNode {
    static NODE: LazyLock<DevNode> = LazyLock::new(|| {
        let (dir, db, spec) = dev_chain();
        let config = RpcConfig {
            // Small limits keep a slow input from hiding the rest.
            max_request_body: 256 * 1024,
            call_timeout: std::time::Duration::from_secs(2),
            workers: 1,
            queue: 4,
            read_workers: 1,
            read_queue: 4,
            max_filters: 64,
            max_logs: 1000,
            max_trace_filter_results: 1000,
            ..RpcConfig::default()
        };
        let node = InProcess::new(db.clone(), spec.clone(), config).expect("request path");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        DevNode { rt, node, db, spec, _dir: dir }
    });
    &NODE
}

impl DevNode {
    /// POSTs `body` to `/`.
    pub fn post(&self, body: Vec<u8>) -> (u16, Vec<u8>) {
        self.rt.block_on(self.node.request("POST", "/", body))
    }

    /// Calls `method`; the result (`null` on error).
    pub fn call(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (_, out) = self.post(body.to_string().into_bytes());
        serde_json::from_slice::<Value>(&out).map(|v| v["result"].clone()).unwrap_or(Value::Null)
    }
}

/// One valid call of every method on the dev chain: (method, params).
pub fn example_calls() -> Vec<(&'static str, Value)> {
    let node = dev_node();
    let tx = node.call("eth_getTransactionByBlockNumberAndIndex", json!(["0x5", "0x0"]));
    let tx_hash = tx["hash"].clone();
    let block_hash = node.call("eth_getBlockByNumber", json!(["0x6", false]))["hash"].clone();
    let a0 = format!("{:#x}", loupe::dev::dev_accounts()[0]);
    let a1 = format!("{:#x}", loupe::dev::dev_accounts()[1]);
    let counter = format!("{:#x}", loupe::dev::COUNTER);
    let call = json!({"from": a0, "to": counter, "data": "0x", "gas": "0x30000"});
    let transfer = json!({"from": a0, "to": a1, "value": "0x1"});
    vec![
        ("eth_getTransactionByBlockNumberAndIndex", json!(["0x2", "0x1"])),
        ("eth_getTransactionByBlockHashAndIndex", json!([block_hash, "0x0"])),
        ("eth_getTransactionByHash", json!([tx_hash])),
        ("eth_getBlockByNumber", json!(["latest", true])),
        ("eth_getBlockByHash", json!([block_hash, false])),
        ("eth_getBlockTransactionCountByNumber", json!(["0x2"])),
        ("eth_getBlockTransactionCountByHash", json!([block_hash])),
        ("eth_getTransactionReceipt", json!([tx_hash])),
        ("eth_getBlockReceipts", json!(["0x5"])),
        ("eth_getBalance", json!([a1, "0x7"])),
        ("eth_getTransactionCount", json!([a0, "pending"])),
        ("eth_getCode", json!([counter, "latest"])),
        ("eth_getStorageAt", json!([counter, "0x0", "0xc"])),
        ("eth_getStorageValues", json!([{ counter.clone(): ["0x0", "0x1"] }, "latest"])),
        ("eth_getProof", json!([counter, ["0x0"], "0x10"])),
        ("eth_blockNumber", json!([])),
        ("eth_chainId", json!([])),
        ("net_version", json!([])),
        ("net_listening", json!([])),
        ("net_peerCount", json!([])),
        ("web3_clientVersion", json!([])),
        ("web3_sha3", json!(["0x68656c6c6f"])),
        ("eth_syncing", json!([])),
        ("eth_accounts", json!([])),
        ("eth_config", json!([])),
        ("eth_capabilities", json!([])),
        ("eth_gasPrice", json!([])),
        ("eth_maxPriorityFeePerGas", json!([])),
        ("eth_baseFee", json!([])),
        ("eth_blobBaseFee", json!([])),
        ("eth_feeHistory", json!(["0x4", "latest", [25, 75]])),
        ("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest", "address": counter}])),
        ("eth_newFilter", json!([{"fromBlock": "0x1", "topics": [null]}])),
        ("eth_newBlockFilter", json!([])),
        ("eth_getFilterChanges", json!(["0x1"])),
        ("eth_getFilterLogs", json!(["0x1"])),
        ("eth_uninstallFilter", json!(["0x1"])),
        ("eth_getUncleByBlockNumberAndIndex", json!(["0x1", "0x0"])),
        ("eth_getUncleByBlockHashAndIndex", json!([block_hash, "0x0"])),
        ("eth_getUncleCountByBlockNumber", json!(["0x1"])),
        ("eth_getUncleCountByBlockHash", json!([block_hash])),
        ("eth_getRawTransactionByHash", json!([tx_hash])),
        ("debug_getRawTransaction", json!([tx_hash])),
        ("debug_getRawReceipts", json!(["0x6"])),
        ("debug_getRawHeader", json!(["0x6"])),
        ("debug_getRawBlock", json!(["0x6"])),
        ("eth_call", json!([call, "latest", {counter.clone(): {"balance": "0x1"}}])),
        ("eth_estimateGas", json!([transfer, "latest"])),
        ("eth_createAccessList", json!([call, "latest"])),
        ("eth_sendRawTransaction", json!(["0x02"])),
        (
            "eth_simulateV1",
            json!([{"blockStateCalls": [{"calls": [transfer]}], "traceTransfers": true, "validation": false}, "latest"]),
        ),
        ("trace_call", json!([call, ["trace", "stateDiff"], "latest"])),
        ("trace_callMany", json!([[[call, ["trace"]], [transfer, ["stateDiff"]]], "latest"])),
        (
            "trace_rawTransaction",
            json!([node.call("eth_getRawTransactionByHash", json!([tx_hash])), ["trace"]]),
        ),
        ("trace_replayTransaction", json!([tx_hash, ["trace", "stateDiff"]])),
        ("trace_replayBlockTransactions", json!(["0x6", ["trace"]])),
        ("trace_transaction", json!([tx_hash])),
        ("trace_get", json!([tx_hash, ["0x0"]])),
        ("trace_block", json!(["0x6"])),
        (
            "trace_filter",
            json!([{"fromBlock": "0x1", "toBlock": "0x8", "toAddress": [counter], "count": 3}]),
        ),
        ("debug_traceTransaction", json!([tx_hash, {"tracer": "callTracer"}])),
        (
            "debug_traceBlockByNumber",
            json!(["0x6", {"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}}]),
        ),
        ("debug_traceBlockByHash", json!([block_hash, {}])),
        ("debug_traceCall", json!([call, "latest", {"tracer": "4byteTracer"}])),
    ]
}

/// Writes `seeds` into `$LOUPE_FUZZ_SEEDS` (when set), one file each.
pub fn write_seeds(seeds: impl IntoIterator<Item = Vec<u8>>) {
    let Some(dir) = std::env::var_os("LOUPE_FUZZ_SEEDS").map(PathBuf::from) else { return };
    std::fs::create_dir_all(&dir).expect("seed directory");
    for (i, seed) in seeds.into_iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:03}")), seed).expect("write seed");
    }
}
