//! The archive's own execution witness of a stored block, run back statelessly: the same roots
//! as the header, and no node that the run does without.

#![allow(unreachable_pub, dead_code)]
use loupe::chain::ChainSpec;
use loupe::storage::Database;
use loupe::witness::{build_witness, parse_execution_witness, run_block, stored_block};

/// What one block's round trip gave.
#[derive(Debug, Default, Clone, Copy)]
pub struct Trip {
    /// Nodes in the witness.
    pub nodes: usize,
    /// Codes in the witness.
    pub codes: usize,
}

/// Builds block `n`'s witness from the archive as `debug_executionWitness` serves it (its
/// JSON), runs the block on it statelessly and checks the run against the stored header. With
/// `minimal`, each node is then dropped in turn and the run must fail without it.
pub fn round_trip(db: &Database, spec: &ChainSpec, n: u64, minimal: bool) -> Result<Trip, String> {
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let built = build_witness(&r, spec, n, None).map_err(|e| format!("block {n}: build: {e}"))?;
    let json = serde_json::to_value(&built.witness).map_err(|e| e.to_string())?;
    let witness = parse_execution_witness(json).map_err(|e| format!("block {n}: parse: {e}"))?;
    let (block, _) = stored_block(&r, n).map_err(|e| e.to_string())?;
    let out = run_block(spec, &witness, &block).map_err(|e| format!("block {n}: run: {e}"))?;
    if out.state_root != block.header.state_root {
        return Err(format!("block {n}: root {} is not the header's", out.state_root));
    }
    let stored = r.receipts(n).map_err(|e| e.to_string())?.unwrap_or_default();
    if stored != out.receipts {
        return Err(format!("block {n}: the stateless receipts differ from the stored ones"));
    }
    if minimal {
        for hash in witness.nodes.keys() {
            let mut less = witness.clone();
            less.remove_node(hash);
            if run_block(spec, &less, &block).is_ok() {
                return Err(format!("block {n}: node {hash} is not needed, yet in the witness"));
            }
        }
    }
    Ok(Trip { nodes: witness.nodes.len(), codes: witness.codes.len() })
}

/// Every trace loupe serves for block `n` (with `struct_logs`, the struct logger's too), from
/// an anchored datadir built from the archive's witness of it (what `loupe witness serve`
/// serves), byte for byte as the archive's own: both through the server's request path.
pub fn traces_match(
    db: &std::sync::Arc<Database>,
    spec: &ChainSpec,
    n: u64,
    struct_logs: bool,
) -> Result<(), String> {
    use serde_json::json;
    let r = db.begin_read().map_err(|e| e.to_string())?;
    let built = build_witness(&r, spec, n, None).map_err(|e| format!("block {n}: build: {e}"))?;
    let json = serde_json::to_value(&built.witness).map_err(|e| e.to_string())?;
    let witness = parse_execution_witness(json).map_err(|e| format!("block {n}: parse: {e}"))?;
    let (block, _) = stored_block(&r, n).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (anchored, _) = loupe::cli::anchored_datadir(dir.path(), spec, &witness, &block)
        .map_err(|e| format!("block {n}: anchored datadir: {e}"))?;
    let config = || loupe::rpc::RpcConfig { vm_trace: true, ..Default::default() };
    let full = loupe::rpc::InProcess::new(db.clone(), spec.clone(), config())
        .map_err(|e| e.to_string())?;
    let from_witness =
        loupe::rpc::InProcess::new(std::sync::Arc::new(anchored), spec.clone(), config())
            .map_err(|e| e.to_string())?;
    let b = format!("{n:#x}");
    let mut calls = vec![
        ("trace_replayBlockTransactions", json!([b, ["trace", "stateDiff", "vmTrace"]])),
        ("trace_block", json!([b])),
        (
            "debug_traceBlockByNumber",
            json!([b, {"tracer": "callTracer", "tracerConfig": {"withLog": true}}]),
        ),
        ("debug_traceBlockByNumber", json!([b, {"tracer": "flatCallTracer"}])),
        ("debug_traceBlockByNumber", json!([b, {"tracer": "prestateTracer"}])),
        (
            "debug_traceBlockByNumber",
            json!([b, {"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}}]),
        ),
        ("debug_traceBlockByNumber", json!([b, {"tracer": "4byteTracer"}])),
        ("eth_getBlockReceipts", json!([b])),
        ("eth_getBlockByNumber", json!([b, true])),
    ];
    if struct_logs {
        calls.push(("debug_traceBlockByNumber", json!([b, {}])));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    for (method, params) in calls {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let body = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        let (_, want) = rt.block_on(full.request("POST", "/", body.clone()));
        let (_, got) = rt.block_on(from_witness.request("POST", "/", body));
        if got != want {
            return Err(format!(
                "block {n}: {method} {params} from the witness differs: {} against {}",
                String::from_utf8_lossy(&got).chars().take(300).collect::<String>(),
                String::from_utf8_lossy(&want).chars().take(300).collect::<String>()
            ));
        }
    }
    Ok(())
}
