//! In-process floor of `trace_call`: EVM + tracer + result building + JSON, no HTTP, no pool.
//! Run: `cargo bench --bench trace_call` (needs the execution-apis fixtures).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};

/// Same allocator as the binary, so the floor is comparable with the server.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use loupe::rpc::{RpcConfig, RpcContext};
use loupe::storage::Database;

#[path = "common/calls.rs"]
mod calls;

fn bench(c: &mut Criterion) {
    let fx = std::env::var("LOUPE_FIXTURES").unwrap_or_else(|_| {
        format!("{}/../shared/fixtures/execution-apis", env!("CARGO_MANIFEST_DIR"))
    });
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Database::open(tmp.path()).expect("db");
    let genesis = std::fs::read_to_string(format!("{fx}/genesis.json")).expect("genesis");
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).expect("init");
    loupe::import::import_files(&db, &spec, &[format!("{fx}/chain.rlp")]).expect("import");
    let ctx = RpcContext::new(Arc::new(db), spec, RpcConfig::default());
    // Block 10 is the history read `benches/sidebyside.sh` loads; block 30 that of issue 4.
    for block in ["latest", "0xa", "0x1e"] {
        for (name, params) in calls::params_from(block, calls::FUNDED) {
            ctx.trace_call_direct(&params).expect("trace_call works");
            c.bench_function(&format!("trace_call/{name}/{block}"), |b| {
                b.iter(|| ctx.trace_call_direct(&params).expect("ok"))
            });
        }
    }
}

/// A call into a contract of the maximum size (24 KiB, EIP-170) held in the state, not given by
/// an override: what reading and analysing a large contract's code costs a call. The fixture
/// genesis with one more account, at block 0.
fn bench_large_code(c: &mut Criterion) {
    let fx = std::env::var("LOUPE_FIXTURES").unwrap_or_else(|_| {
        format!("{}/../shared/fixtures/execution-apis", env!("CARGO_MANIFEST_DIR"))
    });
    let text = std::fs::read_to_string(format!("{fx}/genesis.json")).expect("genesis");
    let mut genesis: serde_json::Value = serde_json::from_str(&text).expect("genesis json");
    // SLOAD slot 0 and stop, then 24 KiB of PUSH/JUMPDEST-mixed bytes never executed.
    let mut code = String::from("0x60005450");
    code.push_str("00");
    let mut x: u64 = 0x9e37_79b9;
    while code.len() < 2 + 2 * 24 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        code.push_str(&format!("{:02x}", (x >> 24) as u8));
    }
    let big = "0x00000000000000000000000000000000000b1600";
    genesis["alloc"][big] = serde_json::json!({"balance": "0x0", "code": code});
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Database::open(tmp.path()).expect("db");
    let (spec, _) = loupe::import::init_genesis(&db, &genesis.to_string())
        .expect("init with the large contract");
    let ctx = RpcContext::new(Arc::new(db), spec, RpcConfig::default());
    let params =
        format!(r#"[{{"from":"{}","to":"{big}"}},["trace","stateDiff"],"latest"]"#, calls::FUNDED);
    ctx.trace_call_direct(&params).expect("trace_call works");
    c.bench_function("trace_call/large_code/0x0", |b| {
        b.iter(|| ctx.trace_call_direct(&params).expect("ok"))
    });
}

criterion_group!(benches, bench, bench_large_code);
criterion_main!(benches);
