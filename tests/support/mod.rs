//! Test harness: the fixture chain imported once per test binary, served in-process on a free
//! port, and a small blocking JSON-RPC client.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use loupe::chain::ChainSpec;
use loupe::rpc::{RpcConfig, RpcServer};
use loupe::storage::Database;
use serde_json::{Value, json};

mod fixtures;
pub mod witness;
pub use fixtures::fixtures;

/// The fixture chain imported into a temporary datadir, shared by all tests of one binary.
pub struct Chain {
    pub db: Arc<Database>,
    pub spec: ChainSpec,
    pub dir: PathBuf,
}

/// This process's datadir for the shared chain. A static is never dropped, so a `TempDir` held
/// by one would outlive every test process (18 MB each); instead the datadir is named after the
/// process, and those of processes that have ended are removed here.
fn process_datadir() -> PathBuf {
    const PREFIX: &str = "loupe-test-fixture-chain-";
    let base = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(pid) = name.strip_prefix(PREFIX).and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(format!("{PREFIX}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Imports the fixture chain once per process.
pub fn chain() -> Option<&'static Chain> {
    static CHAIN: OnceLock<Option<Chain>> = OnceLock::new();
    CHAIN
        .get_or_init(|| {
            let fx = fixtures()?;
            let datadir = process_datadir();
            let db = Database::open(&datadir).expect("open db");
            let genesis = std::fs::read_to_string(fx.join("genesis.json")).expect("genesis");
            let (spec, _) = loupe::import::init_genesis(&db, &genesis).expect("init");
            let s =
                loupe::import::import_files(&db, &spec, &[fx.join("chain.rlp")]).expect("import");
            assert_eq!(s.head, 54);
            Some(Chain { db: Arc::new(db), spec, dir: fx })
        })
        .as_ref()
}

/// A server on 127.0.0.1:0 over the shared chain, with its own runtime.
pub struct Node {
    pub url: String,
    /// `ws://` URL when the config enabled WebSocket.
    pub ws_url: Option<String>,
    pub client: reqwest::blocking::Client,
    server: Option<RpcServer>,
    rt: tokio::runtime::Runtime,
}

impl Node {
    /// Starts a node; `tweak` adjusts the default config (the port is always 0).
    pub fn start(tweak: impl FnOnce(&mut RpcConfig)) -> Option<Self> {
        let chain = chain()?;
        Some(Self::serve(chain.db.clone(), chain.spec.clone(), tweak))
    }

    /// Serves any database (the dev chain, a chain a test builds).
    pub fn serve(db: Arc<Database>, spec: ChainSpec, tweak: impl FnOnce(&mut RpcConfig)) -> Self {
        // Tests fill a pool from one address (127.0.0.1) on purpose, so one client may take it
        // all here; the tests of the per-client share (tests/connections.rs) set it.
        let mut config =
            RpcConfig { test_methods: true, client_share: 100, ..RpcConfig::default() };
        tweak(&mut config);
        config.addr = "127.0.0.1:0".parse().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(loupe::rpc::start(db, spec, config)).expect("start server");
        let url = format!("http://{}/", server.addr);
        let ws_url = server.ws_addr.map(|a| format!("ws://{a}"));
        let client = reqwest::blocking::Client::new();
        Self { url, ws_url, client, server: Some(server), rt }
    }

    /// POSTs a raw body with `Content-Type: application/json`; returns (status, body text).
    pub fn post_raw(&self, body: impl Into<String>) -> (u16, String) {
        let r = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .body(body.into())
            .send()
            .expect("send");
        let status = r.status().as_u16();
        (status, r.text().unwrap_or_default())
    }

    /// Sends one request and returns the whole response object.
    pub fn request(&self, body: &Value) -> Value {
        let (status, text) = self.post_raw(body.to_string());
        assert_eq!(status, 200, "HTTP {status}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON {text:?}: {e}"))
    }

    /// Calls `method` with `params`; returns `Ok(result)` or `Err(error object)`.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let resp =
            self.request(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        match (resp.get("result"), resp.get("error")) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(e)) => Err(e.clone()),
            _ => panic!("malformed response {resp}"),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.stop());
        }
    }
}

/// The dev chain with its sample history in `dir`: database, spec, head.
pub fn dev_chain(dir: &std::path::Path) -> (Arc<Database>, ChainSpec, u64) {
    let db = Database::open(dir).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
    let tip = loupe::dev::build_sample_history(&db, &spec).unwrap();
    (Arc::new(db), spec, tip)
}

/// splitmix64: a deterministic PRNG, seeded from an iteration number (the kill moments of the
/// crash tests).
pub fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
