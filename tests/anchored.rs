//! Anchored datadirs (`import::anchor`): for blocks of the dev chain and the execution-apis
//! chain, the pre-state that block N reads is recorded while executing it over the full
//! archive, an anchored datadir is built from that state and the headers up to N−1, block N is
//! imported with its header's state root, and the RPC answers of both datadirs for block N are
//! compared byte for byte (in process, and through `loupe node`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use alloy_consensus::{Block, BlockBody, Header, TxEnvelope};
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256};
use loupe::chain::ChainSpec;
use loupe::import::{
    AnchorAccount, ImportError, TrustedRoots, import_block_trusted_root, init_anchored_db,
};
use loupe::storage::history::keys::Epochs;
use loupe::storage::{Database, Reader, StateAt};
use revm::bytecode::Bytecode;
use revm::database::DatabaseRef;
use revm::state::AccountInfo;
use serde_json::{Value, json};
use support::{Node, dev_chain};

/// Every account, slot and code a block's execution reads from its parent state.
#[derive(Debug)]
struct Recording {
    inner: StateAt,
    accounts: RefCell<BTreeMap<Address, Option<AccountInfo>>>,
    slots: RefCell<BTreeMap<Address, BTreeMap<U256, U256>>>,
}

impl DatabaseRef for Recording {
    type Error = loupe::storage::StorageError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        let info = self.inner.basic_ref(address)?;
        self.accounts.borrow_mut().insert(address, info.clone());
        Ok(info)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        self.inner.code_by_hash_ref(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        let value = self.inner.storage_ref(address, index)?;
        self.slots.borrow_mut().entry(address).or_default().insert(index, value);
        Ok(value)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        self.inner.block_hash_ref(number)
    }
}

/// Block `n` as stored, with its senders.
fn stored_block(r: &Reader, n: u64) -> (Block<TxEnvelope>, Vec<Address>) {
    let header = r.header(n).unwrap().unwrap();
    let (body, _) = r.body(n).unwrap().unwrap();
    let txs = r.transactions(n).unwrap();
    let senders = txs.iter().map(|t| t.sender).collect();
    let body = BlockBody { transactions: txs.into_iter().map(|t| t.tx).collect(), ..body };
    (Block { header, body }, senders)
}

/// The parent state block `n` reads (recorded while executing it), and the headers from up to
/// 256 blocks back (for `BLOCKHASH`) to its parent.
fn witness_of(db: &Database, spec: &ChainSpec, n: u64) -> (Vec<Header>, Vec<AnchorAccount>) {
    let r = db.begin_read().unwrap();
    let (block, senders) = stored_block(&r, n);
    let rec = Recording {
        inner: r.state_at(n - 1).unwrap(),
        accounts: RefCell::default(),
        slots: RefCell::default(),
    };
    let outcome =
        loupe::evm::execute_block(spec, &rec, &block, &senders, |_| Ok::<B256, String>(B256::ZERO))
            .unwrap();
    assert_eq!(outcome.gas_used, block.header.gas_used, "block {n} re-executed");
    let slots = rec.slots.take();
    let mut addresses: BTreeSet<Address> = rec.accounts.borrow().keys().copied().collect();
    addresses.extend(slots.keys().copied());
    let accounts = addresses
        .into_iter()
        .map(|address| {
            let info = match rec.accounts.borrow().get(&address) {
                Some(info) => info.clone(),
                None => rec.inner.basic_ref(address).unwrap(),
            };
            let code = info
                .as_ref()
                .filter(|i| i.code_hash != KECCAK256_EMPTY)
                .map(|i| rec.inner.code_by_hash_ref(i.code_hash).unwrap().original_bytes());
            let storage = slots.get(&address).map(|s| s.clone().into_iter().collect());
            AnchorAccount { address, info, code, storage: storage.unwrap_or_default() }
        })
        .collect();
    let headers = (n.saturating_sub(257)..n).map(|i| r.header(i).unwrap().unwrap()).collect();
    (headers, accounts)
}

fn tag(n: u64) -> String {
    format!("{n:#x}")
}

/// The raw response body of one call.
fn raw(node: &Node, method: &str, params: &Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, text) = node.post_raw(body.to_string());
    assert_eq!(status, 200, "{method} {params}: HTTP {status}: {text}");
    text
}

#[test]
fn anchored_dev_chain_blocks_answer_as_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    anchored_blocks_answer_as_the_archive(&db, &spec, |_| true);
}

/// The execution-apis chain (proof-of-work to block 35, with rewards and ommers): its blocks
/// with transactions, among them every one with ommers (the ommer rules read the ancestors'
/// headers).
#[test]
fn anchored_execution_apis_blocks_answer_as_the_archive() {
    let Some(chain) = support::chain() else { return };
    let r = chain.db.begin_read().unwrap();
    let with_ommers: Vec<u64> = (1..=r.head().unwrap().unwrap())
        .filter(|n| !r.body(*n).unwrap().unwrap().0.ommers.is_empty())
        .collect();
    let with_txs = |n: &u64| r.transaction_count(*n).unwrap().unwrap_or(0) > 0;
    let byzantium = |n: &u64| chain.spec.is_byzantium_active_at_block(*n);
    assert!(
        with_ommers.iter().filter(|n| byzantium(n)).any(with_txs),
        "Byzantium blocks with ommers and transactions: none in {with_ommers:?}"
    );
    // Before Byzantium a receipt commits to the state root after its transaction, which needs
    // the trie: without those roots given, such a block is refused, naming why.
    let early = (1..).find(|n| with_txs(n) && !byzantium(n)).unwrap();
    let (headers, accounts) = witness_of(&chain.db, &chain.spec, early);
    let block = stored_block(&r, early).0;
    let dir = tempfile::tempdir().unwrap();
    let anchored =
        loupe::import::init_anchored(dir.path(), &chain.spec, &headers, &accounts).unwrap();
    let err = import_block_trusted_root(
        &anchored,
        &chain.spec,
        &block,
        &root_only(block.header.state_root),
    )
    .unwrap_err();
    assert!(err.to_string().contains("fewer intermediate state roots"), "{err}");
    anchored_blocks_answer_as_the_archive(&chain.db, &chain.spec, |n| {
        with_ommers.contains(&n) || n == early
    });
}

/// For the first, a middle and the last block with transactions (and every block `also` picks),
/// (before Byzantium too, with the intermediate roots its receipts carry): an anchored datadir
/// at its parent answers as `db`.
fn anchored_blocks_answer_as_the_archive(
    db: &Arc<Database>,
    spec: &ChainSpec,
    also: impl Fn(u64) -> bool,
) {
    let full = Node::serve(db.clone(), spec.clone(), |_| {});
    let tip = db.begin_read().unwrap().head().unwrap().unwrap();
    let with_txs: Vec<u64> = {
        let r = db.begin_read().unwrap();
        (1..=tip).filter(|n| r.transaction_count(*n).unwrap().unwrap_or(0) > 0).collect()
    };
    assert!(with_txs.len() >= 3, "blocks with transactions: {with_txs:?}");
    let mut picked = vec![with_txs[0], with_txs[with_txs.len() / 2], with_txs[with_txs.len() - 1]];
    picked.extend(with_txs.iter().copied().filter(|n| also(*n)));
    picked.sort_unstable();
    picked.dedup();
    let (db, spec) = (db.as_ref(), spec);
    for n in picked {
        let (headers, accounts) = witness_of(db, spec, n);
        let block = stored_block(&db.begin_read().unwrap(), n).0;
        let anchored_dir = tempfile::tempdir().unwrap();
        // Epochs of 2 blocks: the anchor and block N fall in different history epochs for some N.
        let anchored = Database::open_with_epochs(anchored_dir.path(), Epochs { len: 2 }).unwrap();
        init_anchored_db(&anchored, spec, &headers, &accounts).unwrap();

        // A root other than the header's is refused, and nothing is stored.
        let mut wrong = stored_roots(db, n);
        wrong.state_root = B256::repeat_byte(7);
        let wrong = import_block_trusted_root(&anchored, spec, &block, &wrong);
        match wrong {
            Err(ImportError::Mismatch { what: "state root", .. }) => {}
            other => panic!("block {n} with a wrong trusted root: {other:?}"),
        }
        assert_eq!(anchored.begin_read().unwrap().head().unwrap(), Some(n - 1));
        // The ordinary import (which computes the root over the trie) is refused.
        let refused = loupe::import::import_block(&anchored, spec, &block, false);
        assert!(
            matches!(refused, Err(ImportError::Anchored { anchor, .. }) if anchor == n - 1),
            "{refused:?}"
        );
        import_block_trusted_root(&anchored, spec, &block, &stored_roots(db, n)).unwrap();

        // The node reads the chain spec back from the datadir, as `loupe node` does.
        let stored_spec = loupe::import::load_spec(&anchored).unwrap().unwrap();
        assert_eq!(stored_spec.genesis_hash(), spec.genesis_hash());
        let node = Node::serve(Arc::new(anchored), stored_spec, |_| {});
        let b = tag(n);
        let txs = full.call("eth_getBlockByNumber", json!([b, false])).unwrap();
        let first_tx = txs["transactions"][0].as_str().unwrap().to_string();
        let sender = full.call("eth_getTransactionByHash", json!([first_tx])).unwrap()["from"]
            .as_str()
            .unwrap()
            .to_string();
        let same = [
            ("eth_getBlockByNumber", json!([b, true])),
            ("eth_getBlockReceipts", json!([b])),
            ("eth_getTransactionByHash", json!([first_tx])),
            ("eth_getTransactionReceipt", json!([first_tx])),
            ("trace_replayBlockTransactions", json!([b, ["trace", "stateDiff"]])),
            ("trace_block", json!([b])),
            ("debug_traceBlockByNumber", json!([b, {"tracer": "callTracer"}])),
            ("debug_traceBlockByNumber", json!([b, {"tracer": "prestateTracer"}])),
            (
                "debug_traceBlockByNumber",
                json!([b, {"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}}]),
            ),
            ("eth_getBalance", json!([sender, tag(n - 1)])),
            ("eth_getBalance", json!([sender, b])),
            ("eth_getTransactionCount", json!([sender, b])),
        ];
        assert_eq!(node.call("eth_blockNumber", json!([])).unwrap(), json!(b));
        for (method, params) in &same {
            let (ours, archive) = (raw(&node, method, params), raw(&full, method, params));
            assert_eq!(ours, archive, "block {n}: {method} {params}");
            let answer: Value = serde_json::from_str(&ours).unwrap();
            assert!(answer.get("error").is_none(), "block {n}: {method} {params}: {ours}");
        }
        // `eth_call` of the block's first transaction at N−1, as `trace_call` too.
        let tx = full.call("eth_getTransactionByHash", json!([first_tx])).unwrap();
        let call =
            json!({"from": tx["from"], "to": tx["to"], "input": tx["input"], "value": tx["value"]});
        for (method, params) in [
            ("eth_call", json!([call, tag(n - 1)])),
            ("trace_call", json!([call, ["trace", "stateDiff"], tag(n - 1)])),
        ] {
            assert_eq!(raw(&node, method, &params), raw(&full, method, &params), "{method}");
        }

        // Below the anchor: no block, and the state is refused naming the anchor.
        if n >= 2 {
            let below = tag(n - 2);
            let block = node.call("eth_getBlockByNumber", json!([below, false])).unwrap();
            assert_eq!(block, Value::Null, "block {} below the anchor", n - 2);
            let err = node.call("eth_getBalance", json!([sender, below])).unwrap_err();
            let message = err["message"].as_str().unwrap();
            assert!(message.contains(&format!("anchor block {}", n - 1)), "{err}");
            assert!(full.call("eth_getBalance", json!([sender, below])).is_ok());
        }
        // What assumes a chain from genesis answers without an internal error (and the anchor
        // block, whose body is not held, as not found).
        let anchor = tag(n - 1);
        for (method, params) in [
            ("eth_syncing", json!([])),
            ("eth_getBlockByNumber", json!(["earliest", false])),
            ("eth_getBlockByNumber", json!([anchor, true])),
            ("eth_getBlockReceipts", json!([anchor])),
            ("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest"}])),
            ("trace_filter", json!([{"fromBlock": "0x0", "toBlock": "latest"}])),
            ("eth_feeHistory", json!(["0x4", "latest", [50]])),
            ("trace_block", json!([anchor])),
            ("debug_traceBlockByNumber", json!([anchor, {"tracer": "callTracer"}])),
            ("eth_getBalance", json!([sender, "earliest"])),
        ] {
            let text = raw(&node, method, &params);
            assert!(!text.contains("-32603"), "block {n}: {method} {params}: {text}");
        }
        let none = node.call("eth_getBlockByNumber", json!([anchor, false])).unwrap();
        assert_eq!(none, Value::Null, "the anchor block's body is not held");
        let err = node.call("eth_getProof", json!([sender, [], b])).unwrap_err();
        assert!(
            err["message"].as_str().unwrap().contains("holds only the state of a witness"),
            "{err}"
        );
        assert!(full.call("eth_getProof", json!([sender, [], b])).is_ok());
    }
}

#[test]
fn anchored_init_refuses_broken_headers() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let r = db.begin_read().unwrap();
    let headers: Vec<Header> = vec![r.header(1).unwrap().unwrap(), r.header(3).unwrap().unwrap()];
    let other = tempfile::tempdir().unwrap();
    let err = loupe::import::init_anchored(other.path(), &spec, &headers, &[]).unwrap_err();
    assert!(matches!(err, ImportError::AnchorInput(_)), "{err}");
    // A datadir that starts at genesis takes no trusted root.
    let (block, _) = stored_block(&r, 1);
    let err = import_block_trusted_root(&db, &spec, &block, &root_only(block.header.state_root))
        .unwrap_err();
    assert!(matches!(err, ImportError::NotAnchored), "{err}");
}

/// An anchor far from genesis (a mainnet height, many history epochs from block 0): the
/// datadir opens at once, holds the given state at the anchor and refuses the state below.
#[test]
fn anchored_far_from_genesis() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, spec, _) = dev_chain(dir.path());
    let anchor = 15_537_393;
    let parent = Header { number: anchor - 1, ..Default::default() };
    let header = Header { number: anchor, parent_hash: parent.hash_slow(), ..Default::default() };
    let address = Address::repeat_byte(0x11);
    let info = AccountInfo { balance: U256::from(5), nonce: 3, ..Default::default() };
    let account = AnchorAccount {
        address,
        info: Some(info),
        code: None,
        storage: vec![(U256::from(1), U256::from(9)), (U256::from(2), U256::ZERO)],
    };
    let other = tempfile::tempdir().unwrap();
    let db =
        loupe::import::init_anchored(other.path(), &spec, &[parent, header], &[account]).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!((r.head().unwrap(), r.anchor()), (Some(anchor), Some(anchor)));
    let state = r.state_at(anchor).unwrap();
    let got = state.basic_ref(address).unwrap().unwrap();
    assert_eq!((got.balance, got.nonce), (U256::from(5), 3));
    assert_eq!(state.storage_ref(address, U256::from(1)).unwrap(), U256::from(9));
    assert!(r.state_at(anchor - 1).is_err());
    assert_eq!(
        r.canonical_hash(anchor - 1).unwrap(),
        Some(Header { number: anchor - 1, ..Default::default() }.hash_slow())
    );
    assert!(loupe::import::load_spec(&db).unwrap().is_some());
}

/// `loupe node --datadir` over an anchored datadir: it starts, serves block N as the archive
/// does and stops on SIGTERM; `loupe verify` refuses the datadir, naming why.
#[test]
fn loupe_node_serves_an_anchored_datadir() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, tip) = dev_chain(dir.path());
    let n = {
        let r = db.begin_read().unwrap();
        (1..=tip).rev().find(|n| r.transaction_count(*n).unwrap().unwrap_or(0) > 0).unwrap()
    };
    let (headers, accounts) = witness_of(&db, &spec, n);
    let block = stored_block(&db.begin_read().unwrap(), n).0;
    let anchored_dir = tempfile::tempdir().unwrap();
    let anchored =
        loupe::import::init_anchored(anchored_dir.path(), &spec, &headers, &accounts).unwrap();
    import_block_trusted_root(&anchored, &spec, &block, &stored_roots(&db, n)).unwrap();
    drop(anchored);

    let out = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["verify", "--datadir"])
        .arg(anchored_dir.path())
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("holds only the state of a witness"), "{text}");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["node", "--datadir"])
        .arg(anchored_dir.path())
        .args(["--http.port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let client = reqwest::blocking::Client::new();
    let post = |method: &str, params: &Value| -> Option<String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        client.post(&url).json(&body).send().ok()?.text().ok()
    };
    let started = std::time::Instant::now();
    while post("eth_chainId", &json!([])).is_none() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("loupe node exited with {status} before serving");
        }
        assert!(started.elapsed().as_secs() < 120, "the node did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let full = Node::serve(db, spec, |_| {});
    let served = (|| {
        let number = post("eth_blockNumber", &json!([]))?;
        let b = tag(n);
        let same = ["trace_block", "eth_getBlockReceipts"]
            .iter()
            .all(|m| post(m, &json!([b])).as_deref() == Some(raw(&full, m, &json!([b])).as_str()));
        Some((number, same))
    })();
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed().as_secs() > 60 {
            let _ = child.kill();
            panic!("loupe node did not stop on SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (number, same) = served.expect("the node answered");
    assert!(number.contains(&format!("\"{}\"", tag(n))), "{number}");
    assert!(same, "trace_block and eth_getBlockReceipts of block {n} as the archive's");
}

/// The roots block `n` was stored with: its header's state root and, before Byzantium, the
/// state root after each transaction as its stored receipts carry them.
fn stored_roots(db: &Database, n: u64) -> TrustedRoots {
    let r = db.begin_read().unwrap();
    let header = r.header(n).unwrap().unwrap();
    let intermediate = r
        .receipts(n)
        .unwrap()
        .unwrap_or_default()
        .iter()
        .filter_map(|rc| match rc.as_receipt().map(|r| r.status) {
            Some(alloy_consensus::Eip658Value::PostState(root)) => Some(root),
            _ => None,
        })
        .collect();
    TrustedRoots { state_root: header.state_root, intermediate }
}

/// `root` as the post-state root, no intermediate roots.
fn root_only(root: B256) -> TrustedRoots {
    TrustedRoots { state_root: root, intermediate: Vec::new() }
}
