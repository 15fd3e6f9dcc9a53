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

criterion_group!(benches, bench);
criterion_main!(benches);
