//! WebSocket (issue 13): `eth_subscribe` `newHeads` delivers every stored block in order with no
//! gaps, through a reorg; `logs` delivers the logs of new blocks that match; a subscriber that
//! stops reading is disconnected while blocks keep coming.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy_primitives::{Address, Bytes, U256};
use alloy_signer::SignerSync;
use jsonrpsee::core::client::{Subscription, SubscriptionClientT};
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::WsClientBuilder;
use serde_json::{Value, json};
use support::{Node, dev_chain};

fn ws_node(
    dir: &std::path::Path,
) -> (Node, std::sync::Arc<loupe::storage::Database>, loupe::chain::ChainSpec) {
    let (db, spec, _) = dev_chain(dir);
    let node = Node::serve(db.clone(), spec.clone(), |c| {
        c.ws = Some("127.0.0.1:0".parse().unwrap());
        c.ws_ping = Duration::from_millis(200);
    });
    (node, db, spec)
}

async fn next(sub: &mut Subscription<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("a notification within 10 s")
        .expect("subscription open")
        .expect("notification decodes")
}

#[test]
fn new_heads_arrive_for_every_block_in_order_through_a_reorg() {
    let dir = tempfile::tempdir().unwrap();
    let (node, db, spec) = ws_node(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = node.ws_url.clone().unwrap();
    let client = rt.block_on(WsClientBuilder::default().build(&url)).unwrap();
    let mut sub: Subscription<Value> = rt
        .block_on(client.subscribe("eth_subscribe", rpc_params!["newHeads"], "eth_unsubscribe"))
        .unwrap();
    // Subscription ids are strings as geth makes them (viem, for one, needs a string).
    match sub.kind() {
        jsonrpsee::core::client::SubscriptionKind::Subscription(
            jsonrpsee::types::SubscriptionId::Str(id),
        ) => assert!(id.starts_with("0x") && id.len() == 34, "{id}"),
        other => panic!("subscription id {other:?}"),
    }
    let head = |n: &Node| {
        let h = n.call("eth_blockNumber", json!([])).unwrap();
        u64::from_str_radix(h.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    };
    let tip = head(&node);
    let build = || loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
    // Several blocks between two polls, and one at a time.
    for _ in 0..3 {
        build();
    }
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        build();
        std::thread::sleep(Duration::from_millis(150));
    }
    for n in tip + 1..=tip + 5 {
        let h = rt.block_on(next(&mut sub));
        let stored = node.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).unwrap();
        assert_eq!(h["number"], json!(format!("{n:#x}")));
        assert_eq!(h["hash"], stored["hash"]);
        assert_eq!(h["parentHash"], stored["parentHash"]);
        assert_eq!(h["stateRoot"], stored["stateRoot"]);
    }
    // A reorg: the five new blocks and the history's last unwound, seven empty blocks built in
    // their place (they differ from the start: the history's last block had transactions);
    // the new branch arrives from the fork point on.
    let mut w = db.begin_write().unwrap();
    for _ in 0..6 {
        w.unwind_head().unwrap();
    }
    w.commit(true).unwrap();
    let branch: Vec<_> = (0..7).map(|_| build().header.hash_slow()).collect();
    for (k, hash) in branch.iter().enumerate() {
        let h = rt.block_on(next(&mut sub));
        assert_eq!(h["number"], json!(format!("{:#x}", tip + k as u64)), "{h}");
        assert_eq!(h["hash"], json!(hash));
    }
    assert_eq!(head(&node), tip + 6);
    // Over HTTP there is no subscription: the method is WebSocket's only.
    let e = node.call("eth_subscribe", json!(["newHeads"])).unwrap_err();
    assert!(e["code"].is_i64(), "{e}");
}

#[test]
fn log_subscriptions_get_the_matching_logs_of_new_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (node, db, spec) = ws_node(dir.path());
    let logs = node.call("eth_getLogs", json!([{"fromBlock": "0x0"}])).unwrap();
    let token: Address = serde_json::from_value(logs[0]["address"].clone()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client =
        rt.block_on(WsClientBuilder::default().build(node.ws_url.clone().unwrap())).unwrap();
    let filter = json!({"address": token});
    let mut sub: Subscription<Value> = rt
        .block_on(client.subscribe("eth_subscribe", rpc_params!["logs", filter], "eth_unsubscribe"))
        .unwrap();
    let mut none: Subscription<Value> = rt
        .block_on(client.subscribe(
            "eth_subscribe",
            rpc_params!["logs", json!({"address": "0x00000000000000000000000000000000000000aa"})],
            "eth_unsubscribe",
        ))
        .unwrap();
    let block = transfer_in_a_new_block(&node, &db, &spec, token);
    let log = rt.block_on(next(&mut sub));
    let n = format!("{:#x}", block.header.number);
    let stored = node.call("eth_getLogs", json!([{"fromBlock": n, "toBlock": n}])).unwrap();
    assert_eq!(stored.as_array().unwrap().len(), 1, "{stored}");
    assert_eq!(log, stored[0]);
    // The other subscription matched nothing in that block: its next message is nothing.
    let quiet =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(500), none.next()).await });
    assert!(quiet.is_err(), "a log for an address no transaction touched");
}

#[test]
fn a_subscriber_that_stops_reading_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let (node, db, spec) = ws_node(dir.path());
    let addr = node.ws_url.clone().unwrap().trim_start_matches("ws://").to_string();
    // A bare WebSocket client: upgrade, subscribe, then never read.
    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        tcp,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#;
    let mut frame = vec![0x81, 0x80 | body.len() as u8, 1, 2, 3, 4];
    frame.extend(body.iter().enumerate().map(|(i, b)| b ^ [1, 2, 3, 4][i % 4]));
    tcp.write_all(&frame).unwrap();
    // Blocks keep coming; the client reads nothing and answers no ping.
    let started = Instant::now();
    let mut closed = false;
    tcp.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    while started.elapsed() < Duration::from_secs(20) {
        loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Peek without consuming: only to see whether the server closed the connection.
        let mut probe = [0u8; 1];
        if started.elapsed() > Duration::from_secs(3) {
            // Drain what was sent before the close, then expect EOF.
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match tcp.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(_) => continue,
                    Err(_) => break,
                }
            }
            if closed {
                break;
            }
        } else {
            let _ = tcp.peek(&mut probe);
        }
    }
    assert!(closed, "the server kept a subscriber that does not read");
    // The node still serves.
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
}

/// A token transfer from the first dev account, in a new block.
fn transfer_in_a_new_block(
    node: &Node,
    db: &loupe::storage::Database,
    spec: &loupe::chain::ChainSpec,
    token: Address,
) -> alloy_consensus::Block<TxEnvelope> {
    let signer = loupe::dev::dev_signers().remove(0);
    let nonce = node.call("eth_getTransactionCount", json!([signer.address(), "latest"])).unwrap();
    let mut input = vec![0xa9, 0x05, 0x9c, 0xbb];
    input.extend_from_slice(&[0u8; 12]);
    input.extend_from_slice(&[0x11; 20]);
    input.extend_from_slice(&U256::from(5).to_be_bytes::<32>());
    let tx = TxEip1559 {
        chain_id: loupe::dev::DEV_CHAIN_ID,
        nonce: u64::from_str_radix(nonce.as_str().unwrap().trim_start_matches("0x"), 16).unwrap(),
        gas_limit: 200_000,
        max_fee_per_gas: 100_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: token.into(),
        value: U256::ZERO,
        access_list: Default::default(),
        input: Bytes::from(input),
    };
    let sig = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    let envelope = TxEnvelope::from(tx.into_signed(sig));
    loupe::dev::BlockBuilder::new(db, spec).build(vec![envelope], &[signer.address()]).unwrap()
}

/// A log subscription reads each new block's logs on the read pool, not on the server's
/// threads: while the pool is held full, the block's head is announced but its log waits; once
/// the pool has room the log arrives, not dropped.
#[test]
fn log_subscriptions_read_on_the_read_pool_and_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let node = Node::serve(db.clone(), spec.clone(), |c| {
        c.ws = Some("127.0.0.1:0".parse().unwrap());
        c.read_workers = 1;
        c.read_queue = 0;
    });
    let logs = node.call("eth_getLogs", json!([{"fromBlock": "0x0"}])).unwrap();
    let token: Address = serde_json::from_value(logs[0]["address"].clone()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client =
        rt.block_on(WsClientBuilder::default().build(node.ws_url.clone().unwrap())).unwrap();
    let mut sub: Subscription<Value> = rt
        .block_on(client.subscribe(
            "eth_subscribe",
            rpc_params!["logs", json!({"address": token})],
            "eth_unsubscribe",
        ))
        .unwrap();
    let mut heads: Subscription<Value> = rt
        .block_on(client.subscribe("eth_subscribe", rpc_params!["newHeads"], "eth_unsubscribe"))
        .unwrap();
    let (http, url) = (node.client.clone(), node.url.clone());
    let hold = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "loupe_testHold", "params": []});
        http.post(&url).json(&body).send().unwrap().json::<Value>().unwrap()
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while node.call("loupe_testHolding", json!([])).unwrap() != json!(1) {
        assert!(std::time::Instant::now() < deadline, "the hold never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let block = transfer_in_a_new_block(&node, &db, &spec, token);
    let head = rt.block_on(next(&mut heads));
    assert_eq!(head["hash"], json!(block.header.hash_slow()));
    let waiting =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(500), sub.next()).await });
    assert!(waiting.is_err(), "a log read while the read pool was full");
    assert_eq!(node.call("loupe_testRelease", json!([])).unwrap(), json!(1));
    assert_eq!(hold.join().unwrap()["result"], json!(true));
    let log = rt.block_on(next(&mut sub));
    let n = format!("{:#x}", block.header.number);
    let stored = node.call("eth_getLogs", json!([{"fromBlock": n, "toBlock": n}])).unwrap();
    assert_eq!(log, stored[0]);
}
