//! WebSocket (issue 13): `eth_subscribe` `newHeads` delivers every stored block in order with no
//! gaps, through a reorg; `logs` delivers the logs of new blocks that match; a subscriber that
//! stops reading is disconnected while blocks keep coming.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

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

/// A WebSocket client written by hand over a `TcpStream`, to send what no library sends:
/// frames unmasked, with reserved bits, bad opcodes, lengths no one means.
struct RawWs {
    tcp: std::net::TcpStream,
    buf: Vec<u8>,
}

impl RawWs {
    fn connect(url: &str) -> Self {
        let addr = url.trim_start_matches("ws://");
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            tcp,
            "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut ws = Self { tcp, buf: Vec::new() };
        let end = loop {
            if let Some(i) = ws.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            assert!(ws.fill(), "closed during the handshake");
        };
        let head = String::from_utf8_lossy(&ws.buf[..end]).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        // RFC 6455 §1.3's example key and its accept value.
        assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
        ws.buf.drain(..end);
        ws
    }

    /// Reads more bytes; false at end of stream.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 64 * 1024];
        match self.tcp.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => false,
            Err(e) => panic!("read: {e}"),
        }
    }

    /// The frame header for `first` (FIN, RSV and opcode bits) and a payload of `len` bytes,
    /// with `mask` when given.
    fn header(first: u8, len: u64, mask: Option<[u8; 4]>) -> Vec<u8> {
        let m = if mask.is_some() { 0x80 } else { 0 };
        let mut h = vec![first];
        match len {
            0..=125 => h.push(m | len as u8),
            126..=0xffff => {
                h.push(m | 126);
                h.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                h.push(m | 127);
                h.extend_from_slice(&len.to_be_bytes());
            }
        }
        h.extend(mask.into_iter().flatten());
        h
    }

    /// Sends one frame; masked as a client must unless `masked` is false.
    fn frame(&mut self, first: u8, payload: &[u8], masked: bool) {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        let mask = masked.then_some(key);
        let mut f = Self::header(first, payload.len() as u64, mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| if masked { b ^ key[i % 4] } else { *b }));
        self.tcp.write_all(&f).unwrap();
    }

    /// The next frame from the server: (first byte, payload); `None` at end of stream.
    fn next_frame(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                assert_eq!(self.buf[1] & 0x80, 0, "a server frame is never masked");
                let (len, at) = match self.buf[1] & 0x7f {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                    }
                    127 if self.buf.len() >= 10 => {
                        (u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize, 10)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if at > 0 && self.buf.len() >= at + len {
                    let first = self.buf[0];
                    let payload = self.buf[at..at + len].to_vec();
                    self.buf.drain(..at + len);
                    return Some((first, payload));
                }
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// The next text message's JSON (pings skipped).
    fn json(&mut self) -> Value {
        loop {
            let (first, payload) = self.next_frame().expect("a message");
            match first & 0x0f {
                0x1 => return serde_json::from_slice(&payload).unwrap(),
                0x9 | 0xa => continue,
                other => panic!("opcode {other:#x}: {payload:?}"),
            }
        }
    }

    /// Reads until the server's close frame and returns its code; the server then ends the
    /// connection.
    fn close_code(&mut self) -> u16 {
        let code = loop {
            let Some((first, payload)) = self.next_frame() else {
                panic!("the connection ended without a close frame")
            };
            if first & 0x0f == 0x8 {
                assert_eq!(first & 0x80, 0x80, "a close frame is final");
                assert!(payload.len() >= 2, "a close frame without a code");
                break u16::from_be_bytes([payload[0], payload[1]]);
            }
        };
        let started = Instant::now();
        while self.fill() {
            assert!(started.elapsed() < Duration::from_secs(10), "still open after its close");
        }
        code
    }
}

/// A node serving WebSocket with a small request limit.
fn small_limit_node(dir: &std::path::Path) -> Node {
    let (db, spec, _) = dev_chain(dir);
    Node::serve(db, spec, |c| {
        c.ws = Some("127.0.0.1:0".parse().unwrap());
        c.max_request_body = 4096;
    })
}

/// A normal call on a fresh connection, checked against the HTTP server's answer.
fn still_serves(node: &Node) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "eth_getBlockByNumber",
        "params": ["0x1", false]});
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    ws.frame(0x81, body.to_string().as_bytes(), true);
    assert_eq!(ws.json(), node.request(&body));
}

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#;

/// RFC 6455 §8.1: a text message that is not UTF-8 fails the connection with 1007.
#[test]
fn invalid_utf8_text_closes_with_1007() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    ws.frame(0x81, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}", true);
    assert_eq!(ws.close_code(), 1007);
    // Also when the bad bytes come in a continuation frame.
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    ws.frame(0x01, b"{\"jsonrpc\":", true);
    ws.frame(0x80, b"\"\xc3\x28\"}", true);
    assert_eq!(ws.close_code(), 1007);
    still_serves(&node);
}

/// RFC 6455 §5.1: the server closes a connection whose client sends an unmasked frame (1002).
#[test]
fn an_unmasked_frame_closes_with_1002() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    ws.frame(0x81, CALL, false);
    assert_eq!(ws.close_code(), 1002);
    still_serves(&node);
}

/// A frame announcing 2^62 bytes is refused from its header: 1009, and the connection ends
/// without the server waiting for the payload.
#[test]
fn a_frame_header_of_2_pow_62_bytes_closes_with_1009() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    let header = RawWs::header(0x81, 1 << 62, Some([1, 2, 3, 4]));
    ws.tcp.write_all(&header).unwrap();
    ws.tcp.write_all(&[0x20; 1000]).unwrap();
    let started = Instant::now();
    assert_eq!(ws.close_code(), 1009);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed only after {:?}",
        started.elapsed()
    );
    still_serves(&node);
}

/// A message over `--rpc.max-request-size` closes with 1009: in one frame (refused from its
/// header, while the client is still sending it) and in fragments each under the limit.
#[test]
fn a_message_over_the_request_limit_closes_with_1009() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    // Under the limit: answered.
    let padded = |n: usize| {
        let mut body = CALL[..CALL.len() - 1].to_vec();
        body.extend_from_slice(br#","pad":""#);
        body.resize(n - 2, b'x');
        body.extend_from_slice(b"\"}");
        body
    };
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    ws.frame(0x81, &padded(4096), true);
    assert_eq!(ws.json()["result"], node.call("eth_blockNumber", json!([])).unwrap());
    // Over it, in one frame: the client is still writing a megabyte when the server refuses.
    let writer_ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    let mut reader = RawWs { tcp: writer_ws.tcp.try_clone().unwrap(), buf: writer_ws.buf };
    let mut tcp = writer_ws.tcp;
    let writer = std::thread::spawn(move || {
        let payload = vec![b' '; 1 << 20];
        let mut f = RawWs::header(0x81, payload.len() as u64, Some([0; 4]));
        f.extend_from_slice(&payload);
        let _ = tcp.write_all(&f);
    });
    assert_eq!(reader.close_code(), 1009);
    writer.join().unwrap();
    // Over it in two fragments of 3,000 bytes.
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    let body = padded(6000);
    ws.frame(0x01, &body[..3000], true);
    ws.frame(0x80, &body[3000..], true);
    assert_eq!(ws.close_code(), 1009);
    still_serves(&node);
}

/// A frame to send: its first byte (FIN, RSV, opcode) and its payload.
type Frame<'a> = (u8, &'a [u8]);

/// The other protocol errors of RFC 6455 §5 fail the connection with 1002.
#[test]
fn protocol_errors_close_with_1002() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    let url = node.ws_url.clone().unwrap();
    let cases: [(&str, &[Frame<'_>]); 7] = [
        ("reserved bit 1", &[(0xc1, CALL)]),
        ("reserved bits 2 and 3", &[(0xb1, CALL)]),
        ("data opcode 3", &[(0x83, CALL)]),
        ("control opcode 0xb", &[(0x8b, b"")]),
        ("fragmented ping", &[(0x09, b"a"), (0x80, b"b")]),
        ("ping of 126 bytes", &[(0x89, &[0u8; 126])]),
        ("continuation with nothing to continue", &[(0x80, CALL)]),
    ];
    for (what, frames) in cases {
        let mut ws = RawWs::connect(&url);
        for (first, payload) in frames {
            ws.frame(*first, payload, true);
        }
        assert_eq!(ws.close_code(), 1002, "{what}");
    }
    // A new text message while a fragmented one is unfinished.
    let mut ws = RawWs::connect(&url);
    ws.frame(0x01, &CALL[..10], true);
    ws.frame(0x81, CALL, true);
    assert_eq!(ws.close_code(), 1002, "a new message inside a fragmented one");
    still_serves(&node);
}

/// Over WebSocket every method answers as over HTTP: single calls, errors, batches, a
/// message in fragments, a binary message (answered as geth does, in a text message), a
/// ping answered with its pong; and the client's close is answered with its code.
#[test]
fn calls_over_websocket_answer_as_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    let bodies = [
        json!({"jsonrpc": "2.0", "id": "a", "method": "eth_getBlockByNumber", "params": ["0x2", true]}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "eth_noSuchMethod", "params": []}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "eth_getBalance", "params": ["0x12"]}),
        json!([{"jsonrpc": "2.0", "id": 4, "method": "eth_chainId"},
               {"jsonrpc": "2.0", "method": "eth_chainId"},
               {"jsonrpc": "2.0", "id": 5, "method": "eth_blockNumber", "params": []}]),
        json!([]),
    ];
    for body in &bodies {
        ws.frame(0x81, body.to_string().as_bytes(), true);
        assert_eq!(ws.json(), node.request(body), "{body}");
    }
    let (_, not_json) = node.post_raw("{nope");
    ws.frame(0x81, b"{nope", true);
    assert_eq!(ws.json(), serde_json::from_str::<Value>(&not_json).unwrap());
    let text = bodies[0].to_string();
    ws.frame(0x01, &text.as_bytes()[..20], true);
    ws.frame(0x89, b"between fragments", true);
    ws.frame(0x80, &text.as_bytes()[20..], true);
    let (first, pong) = ws.next_frame().unwrap();
    assert_eq!((first, pong.as_slice()), (0x8a, &b"between fragments"[..]));
    assert_eq!(ws.json(), node.request(&bodies[0]));
    ws.frame(0x82, text.as_bytes(), true);
    assert_eq!(ws.json(), node.request(&bodies[0]), "a binary message");
    // A notification gets no answer: the next message is the next call's.
    ws.frame(0x81, br#"{"jsonrpc":"2.0","method":"eth_chainId"}"#, true);
    ws.frame(0x81, CALL, true);
    assert_eq!(ws.json()["id"], json!(1));
    ws.frame(0x88, &[0x03, 0xe8, b'b', b'y', b'e'], true);
    assert_eq!(ws.close_code(), 1000);
}

/// `--ws.max-subscriptions` per connection (one more: -32005), `eth_unsubscribe` true then
/// false, and subscriptions inside a batch.
#[test]
fn subscriptions_per_connection_are_limited_and_unsubscribe_frees_one() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let node = Node::serve(db.clone(), spec.clone(), |c| {
        c.ws = Some("127.0.0.1:0".parse().unwrap());
        c.ws_max_subscriptions = 2;
    });
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    let sub = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "eth_subscribe", "params": ["newHeads"]});
    ws.frame(0x81, json!([sub(1), sub(2)]).to_string().as_bytes(), true);
    let batch = ws.json();
    let ids: Vec<String> =
        batch.as_array().unwrap().iter().map(|r| r["result"].as_str().unwrap().into()).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    ws.frame(0x81, sub(3).to_string().as_bytes(), true);
    let refused = ws.json();
    assert_eq!(refused["error"]["code"], json!(-32005), "{refused}");
    let unsub = |id: &str| {
        json!({"jsonrpc": "2.0", "id": 4, "method": "eth_unsubscribe", "params": [id]}).to_string()
    };
    ws.frame(0x81, unsub(&ids[0]).as_bytes(), true);
    assert_eq!(ws.json()["result"], json!(true));
    ws.frame(0x81, unsub(&ids[0]).as_bytes(), true);
    assert_eq!(ws.json()["result"], json!(false));
    // A place is free again; the new subscription and the old one both get the next block.
    ws.frame(0x81, sub(5).to_string().as_bytes(), true);
    let third = ws.json()["result"].as_str().unwrap().to_string();
    let block = loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
    let mut got = std::collections::BTreeSet::new();
    for _ in 0..2 {
        let n = ws.json();
        assert_eq!(n["method"], json!("eth_subscription"), "{n}");
        assert_eq!(n["params"]["result"]["hash"], json!(block.header.hash_slow()));
        got.insert(n["params"]["subscription"].as_str().unwrap().to_string());
    }
    assert_eq!(got, [ids[1].clone(), third].into_iter().collect());
}

/// Stopping the server closes its WebSocket connections with 1001 (going away).
#[test]
fn shutdown_closes_connections_with_1001() {
    let dir = tempfile::tempdir().unwrap();
    let node = small_limit_node(dir.path());
    let mut ws = RawWs::connect(node.ws_url.as_ref().unwrap());
    ws.frame(0x81, CALL, true);
    assert_eq!(ws.json()["id"], json!(1));
    let reader = std::thread::spawn(move || ws.close_code());
    drop(node);
    assert_eq!(reader.join().unwrap(), 1001);
}

/// The response limit and the connection limit hold on WebSocket: an answer over
/// `--rpc.max-response-size` is the HTTP server's -32008, and a connection past
/// `--rpc.max-connections` is closed at once, its place free again when one closes.
#[test]
fn response_and_connection_limits_hold_on_websocket() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let node = Node::serve(db, spec, |c| {
        c.ws = Some("127.0.0.1:0".parse().unwrap());
        c.max_response_body = 300;
        c.max_connections = 2;
    });
    let url = node.ws_url.clone().unwrap();
    let mut first = RawWs::connect(&url);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber",
        "params": ["0x2", true]});
    first.frame(0x81, body.to_string().as_bytes(), true);
    let answer = first.json();
    assert_eq!(answer["error"]["code"], json!(-32008), "{answer}");
    assert_eq!(answer, node.request(&body));
    let second = RawWs::connect(&url);
    let refused = handshake_refused;
    assert!(refused(&url), "a third connection was served");
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if !refused(&url) {
            break;
        }
        assert!(Instant::now() < deadline, "the closed connection's place never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(second);
}

/// Whether a WebSocket handshake to `url` is refused (the connection closed before a 101).
fn handshake_refused(url: &str) -> bool {
    let addr = url.trim_start_matches("ws://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = write!(
        tcp,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let mut buf = [0u8; 256];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        Ok(n) => {
            let head = String::from_utf8_lossy(&buf[..n]);
            assert!(head.starts_with("HTTP/1.1 101"), "{head}");
            false
        }
        Err(e) => panic!("read: {e}"),
    }
}

/// `--rpc.max-connections-per-ip` holds on the WebSocket listener too, and a connection's
/// calls count as its address's: a filter made over WebSocket is one of the address's
/// `--rpc.max-filters-per-ip`.
#[test]
fn websocket_connections_and_filters_count_per_address() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, _) = dev_chain(dir.path());
    let node = Node::serve(db, spec, |c| {
        c.ws = Some("127.0.0.1:0".parse().unwrap());
        c.max_connections_per_ip = 2;
        c.max_filters_per_ip = 1;
    });
    let url = node.ws_url.clone().unwrap();
    let mut first = RawWs::connect(&url);
    let _second = RawWs::connect(&url);
    assert!(handshake_refused(&url), "a third connection from one address was served");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_newBlockFilter", "params": []});
    first.frame(0x81, body.to_string().as_bytes(), true);
    let made = first.json();
    assert!(made["result"].is_string(), "{made}");
    let refused = node.request(&body);
    assert_eq!(refused["error"]["code"], json!(-32005), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("--rpc.max-filters-per-ip"), "{message}");
}
