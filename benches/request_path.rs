//! In-process cost of cheap requests through the whole HTTP request path (`rpc::InProcess`:
//! paths, body, envelope, dispatch, handler, response), without a socket: what a request
//! costs loupe above the kernel's share. Run: `cargo bench --bench request_path`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};

/// Same allocator as the binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use loupe::rpc::{InProcess, RpcConfig};
use loupe::storage::Database;

fn bench(c: &mut Criterion) {
    let fx = std::env::var("LOUPE_FIXTURES").unwrap_or_else(|_| {
        format!("{}/../shared/fixtures/execution-apis", env!("CARGO_MANIFEST_DIR"))
    });
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Database::open(tmp.path()).expect("db");
    let genesis = std::fs::read_to_string(format!("{fx}/genesis.json")).expect("genesis");
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).expect("init");
    loupe::import::import_files(&db, &spec, &[format!("{fx}/chain.rlp")]).expect("import");
    let db = Arc::new(db);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let node = InProcess::new(db.clone(), spec, RpcConfig::default()).expect("request path");
    let body = |method: &str, params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#).into_bytes()
    };
    // Every (block, index) of the chain, as benches/sidebyside.sh's lookup row cycles them.
    let reader = db.begin_read().expect("read");
    let head = reader.head().expect("head").unwrap_or(0);
    let mut lookups = Vec::new();
    for n in 1..=head {
        for i in 0u32.. {
            if reader.transaction(n, i).expect("tx").is_none() {
                break;
            }
            lookups.push(body(
                "eth_getTransactionByBlockNumberAndIndex",
                &format!(r#"["0x{n:x}","0x{i:x}"]"#),
            ));
        }
    }
    drop(reader);
    let version = body("web3_clientVersion", "[]");
    let (status, answer) = rt.block_on(node.request("POST", "/", lookups[0].clone()));
    assert!(status == 200 && answer.windows(8).any(|w| w == b"\"result\""), "lookup answers");
    c.bench_function("request/web3_clientVersion", |b| {
        b.iter(|| rt.block_on(node.request("POST", "/", version.clone())))
    });
    let mut next = 0;
    c.bench_function("request/eth_getTransactionByBlockNumberAndIndex", |b| {
        b.iter(|| {
            next = (next + 1) % lookups.len();
            rt.block_on(node.request("POST", "/", lookups[next].clone()))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
