//! Connection hygiene and per-client shares of the HTTP server (issue 60): stalled and slow
//! request bodies are cut (HTTP 408, connection closed), idle connections are closed, one IP
//! address holds at most its share of connections, of each worker pool and of the filter
//! table, while another address is served. Attackers connect from 127.0.0.2 (Linux routes all
//! of 127.0.0.0/8 to loopback), the good client from 127.0.0.1; one test per rule.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Node;

const ATTACKER: &str = "127.0.0.2";
const GOOD: &str = "127.0.0.1";

/// The fixture chain's head (`support::chain` checks it at import).
const HEAD: &str = "0x36";

/// An account of the fixture chain with ether.
const FUNDED: &str = "0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2";

fn addr(node: &Node) -> SocketAddr {
    node.url.trim_start_matches("http://").trim_end_matches('/').parse().unwrap()
}

/// A TCP connection to `to` from the local address `from`.
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from.parse().unwrap(), 0).into()).unwrap();
    socket.connect(&to.into()).unwrap();
    socket.into()
}

/// A blocking HTTP client whose connections come from `from`.
fn client_from(from: &str) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .local_address(from.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Calls `method` through `client`: `Ok(result)` or `Err(error object)`.
fn call(
    client: &reqwest::blocking::Client,
    node: &Node,
    method: &str,
    params: Value,
) -> Result<Value, Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp: Value = client.post(&node.url).json(&body).send().unwrap().json().unwrap();
    match (resp.get("result"), resp.get("error")) {
        (Some(r), None) => Ok(r.clone()),
        (None, Some(e)) => Err(e.clone()),
        _ => panic!("malformed response {resp}"),
    }
}

/// `/health` and `eth_blockNumber` from 127.0.0.1, each answered within `within`.
fn good_client_is_served(node: &Node, within: Duration) {
    let client = client_from(GOOD);
    let asked = Instant::now();
    let health = client.get(format!("{}health", node.url)).send().unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(call(&client, node, "eth_blockNumber", json!([])).unwrap(), HEAD);
    let took = asked.elapsed();
    assert!(took < within, "the good client waited {took:?}");
}

/// The head of a `POST /` whose body is `length` bytes.
fn post_head(length: usize) -> String {
    format!(
        "POST / HTTP/1.1\r\nHost: loupe\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n\r\n"
    )
}

/// [`post_head`] asking the server to close the connection after its answer.
fn closing_head(length: usize) -> String {
    post_head(length).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
}

/// Reads what the server sends until it closes the connection, for at most `limit`: the text,
/// or `None` when the connection is still open then.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let until = Instant::now() + limit;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = until.checked_duration_since(Instant::now())?;
        stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None;
            }
            Err(_) => return Some(String::from_utf8_lossy(&out).into_owned()), // reset
        }
    }
}

/// Whether the server has sent something (or closed the connection) on `s`, without waiting.
fn answered(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let seen = !matches!(s.peek(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    seen
}

/// A JSON-RPC `eth_blockNumber` request padded with spaces to `length` bytes.
fn padded_request(length: usize) -> Vec<u8> {
    let mut body = br#"{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}"#.to_vec();
    assert!(body.len() <= length);
    body.resize(length, b' ');
    body
}

/// Many connections that send 4 bytes of a 100-byte body and then nothing do not keep
/// 127.0.0.1 from being answered, and each is answered 408 and closed at the body timeout
/// (not before, and not much later).
#[test]
fn stalled_bodies_are_cut_at_the_body_timeout_and_lock_nobody_out() {
    let timeout = Duration::from_secs(2);
    let Some(node) = Node::start(|c| {
        c.max_connections = 64;
        c.body_timeout = timeout;
        c.min_body_rate = 0;
    }) else {
        return;
    };
    let to = addr(&node);
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..48)
        .map(|_| {
            let mut s = connect_from(ATTACKER, to);
            s.write_all(format!("{}{{\"js", post_head(100)).as_bytes()).unwrap();
            s
        })
        .collect();
    good_client_is_served(&node, Duration::from_secs(2));
    for s in &mut stalled {
        let left = (timeout + Duration::from_secs(5)).saturating_sub(started.elapsed());
        let answer = read_until_closed(s, left).expect("a stalled body still open");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
        assert!(answer.contains("--rpc.body-timeout"), "{answer:?}");
    }
    let cut = started.elapsed();
    assert!(cut >= timeout - Duration::from_millis(100), "cut after {cut:?}, before the timeout");
    good_client_is_served(&node, Duration::from_secs(2));
}

/// A body dripped below `--rpc.min-body-rate` is cut once the grace has passed, long before
/// the body timeout; one sent a little above the rate is answered.
#[test]
fn a_body_slower_than_the_minimum_rate_is_cut() {
    let Some(node) = Node::start(|c| {
        c.body_timeout = Duration::from_secs(60);
        c.min_body_rate = 200;
    }) else {
        return;
    };
    let to = addr(&node);
    let drip = |length: usize, chunk: usize, every: Duration| {
        let body = padded_request(length);
        let mut s = connect_from(ATTACKER, to);
        s.write_all(post_head(length).as_bytes()).unwrap();
        let started = Instant::now();
        for part in body.chunks(chunk) {
            if s.write_all(part).is_err() || answered(&s) {
                break; // the server answered or closed the connection: stop sending
            }
            std::thread::sleep(every);
            if started.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let answer = read_until_closed(&mut s, Duration::from_secs(20)).expect("still open");
        (answer, started.elapsed())
    };
    // 10 bytes per 200 ms: 50 B/s, a quarter of the minimum. The 408 may be lost to a reset
    // when a drop was on its way as the server closed; a cut before 10 s can only be the rate's
    // (the body timeout is 60 s).
    let (answer, took) = drip(4000, 10, Duration::from_millis(200));
    assert!(took < Duration::from_secs(10), "cut after {took:?}");
    if !answer.is_empty() {
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
        assert!(answer.contains("--rpc.min-body-rate"), "{answer:?}");
    }
    // 100 bytes per 200 ms: 500 B/s, for 3 s, past the grace.
    let (answer, _) = drip(1500, 100, Duration::from_millis(200));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.contains(&format!("\"result\":\"{HEAD}\"")), "{answer:?}");
}

/// Over `--rpc.max-connections-per-ip`, a connection from 127.0.0.2 is closed at once, while
/// 127.0.0.1 is served; once one of 127.0.0.2's connections closes, it may open another.
#[test]
fn connections_over_the_per_ip_cap_are_closed_while_others_are_served() {
    let Some(node) = Node::start(|c| c.max_connections_per_ip = 4) else { return };
    let to = addr(&node);
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect_from(ATTACKER, to)).collect();
    // The server has accepted the four before the fifth comes (accepts are in order).
    let mut fifth = connect_from(ATTACKER, to);
    let answer = read_until_closed(&mut fifth, Duration::from_secs(5));
    assert_eq!(answer.as_deref(), Some(""), "the fifth connection was not closed at once");
    for s in &mut held {
        assert_eq!(read_until_closed(s, Duration::from_millis(50)), None, "one of four closed");
    }
    good_client_is_served(&node, Duration::from_secs(2));
    drop(held.pop());
    // The server sees the close when it reads; the next connection may come first.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = connect_from(ATTACKER, to);
        let body = padded_request(80);
        s.write_all(post_head(80).as_bytes()).unwrap();
        let _ = s.write_all(&body);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let answer = read_until_closed(&mut s, Duration::from_secs(5)).unwrap_or_default();
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "127.0.0.2 never got its place back: {answer:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With every connection slot taken by connections that sit open, a new one from 127.0.0.1
/// is served: the server closes an idle one of the address holding the most. Connections in a
/// request are never closed for it: with every slot in a request, a new one is closed at once.
#[test]
fn a_full_server_closes_an_idle_connection_for_a_new_one_never_one_in_a_request() {
    let Some(node) = Node::start(|c| {
        c.max_connections = 8;
        c.max_connections_per_ip = 6;
        c.body_timeout = Duration::from_secs(30);
        c.min_body_rate = 0;
    }) else {
        return;
    };
    let to = addr(&node);
    // Six silent connections from 127.0.0.2, two from 127.0.0.3: every slot.
    let mut heavy: Vec<TcpStream> = (0..6).map(|_| connect_from(ATTACKER, to)).collect();
    let mut light: Vec<TcpStream> = (0..2).map(|_| connect_from("127.0.0.3", to)).collect();
    std::thread::sleep(Duration::from_millis(200));
    good_client_is_served(&node, Duration::from_secs(3));
    let closed = |conns: &mut Vec<TcpStream>| {
        conns
            .iter_mut()
            .map(|s| read_until_closed(s, Duration::from_millis(100)).is_some())
            .filter(|closed| *closed)
            .count()
    };
    assert!(closed(&mut heavy) >= 1, "no connection of the heaviest address was closed");
    assert_eq!(closed(&mut light), 0, "a connection of the lighter address was closed");
    drop((heavy, light));
    // Every slot in a request (a body that never comes): a new connection is closed at once.
    std::thread::sleep(Duration::from_millis(300));
    let mut stalled: Vec<TcpStream> = (0..8)
        .map(|i| {
            let from = if i < 6 { ATTACKER } else { "127.0.0.3" };
            let mut s = connect_from(from, to);
            s.write_all(format!("{}{{\"js", post_head(100)).as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut late = connect_from(GOOD, to);
    let answer = read_until_closed(&mut late, Duration::from_secs(5));
    assert_eq!(answer.as_deref(), Some(""), "a connection past the limit was not closed at once");
    assert_eq!(closed(&mut stalled), 0, "a connection in a request was closed for a new one");
}

/// A keep-alive connection left idle after an answer, and one that never sends a request, are
/// closed after `--rpc.idle-timeout`.
#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let idle = Duration::from_secs(1);
    let Some(node) = Node::start(|c| c.idle_timeout = idle) else { return };
    let to = addr(&node);
    let mut silent = connect_from(ATTACKER, to);
    let mut used = connect_from(ATTACKER, to);
    used.write_all(post_head(80).as_bytes()).unwrap();
    used.write_all(&padded_request(80)).unwrap();
    let mut buf = [0u8; 4096];
    let n = used.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&buf[..n]));
    let answered = Instant::now();
    let rest = read_until_closed(&mut used, idle + Duration::from_secs(5));
    assert!(rest.is_some(), "the idle keep-alive connection is still open");
    assert!(answered.elapsed() >= idle - Duration::from_millis(100), "{:?}", answered.elapsed());
    assert!(read_until_closed(&mut silent, Duration::from_secs(5)).is_some(), "silent one open");
}

/// With the read pool's two workers, one client runs at most one hold at a time
/// (`--rpc.client-share` 50 %) and holds at most its share of the places: its next call is
/// refused naming the share, and another client's block read runs at once on the free worker.
#[test]
fn one_client_holds_at_most_its_share_of_a_pool() {
    let Some(node) = Node::start(|c| {
        c.read_workers = 2;
        c.read_queue = 4;
        c.client_share = 50;
    }) else {
        return;
    };
    // Share: 1 running + 2 of the queue = 3 places; four holds from 127.0.0.2, one refused.
    let (tx, rx) = std::sync::mpsc::channel();
    let holds: Vec<_> = (0..4)
        .map(|_| {
            let (tx, url) = (tx.clone(), node.url.clone());
            std::thread::spawn(move || {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "loupe_testHold"});
                let resp: Value =
                    client_from(ATTACKER).post(&url).json(&body).send().unwrap().json().unwrap();
                let _ = tx.send(resp);
            })
        })
        .collect();
    let refused = rx.recv_timeout(Duration::from_secs(10)).expect("no hold was refused");
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("--rpc.client-share"), "{message}");
    assert!(message.contains("3 of 6 places"), "{message}");
    let good = client_from(GOOD);
    let deadline = Instant::now() + Duration::from_secs(10);
    while call(&good, &node, "loupe_testHolding", json!([])).unwrap() != json!(1) {
        assert!(Instant::now() < deadline, "the first hold never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The other client's read runs on the second worker at once.
    let asked = Instant::now();
    let block = call(&good, &node, "eth_getBlockByNumber", json!([HEAD, false])).unwrap();
    assert_eq!(block["number"], HEAD);
    assert!(asked.elapsed() < Duration::from_secs(2), "waited {:?}", asked.elapsed());
    // Still one hold running: the admitted ones wait for their client's own.
    assert_eq!(call(&good, &node, "loupe_testHolding", json!([])).unwrap(), json!(1));
    call(&good, &node, "loupe_testRelease", json!([])).unwrap();
    for h in holds {
        h.join().unwrap();
    }
    let answered: Vec<Value> = rx.try_iter().collect();
    assert_eq!(answered.len(), 3, "{answered:?}");
    assert!(answered.iter().all(|r| r["result"] == json!(true)), "{answered:?}");
}

/// `eth_call` of an endless loop: with both EVM workers and one client's share of one of them
/// taken by its loops, another client's call runs at once on the other worker.
#[test]
fn another_client_s_call_runs_beside_one_client_s_endless_calls() {
    let Some(node) = Node::start(|c| {
        c.workers = 2;
        c.queue = 8;
        c.client_share = 50;
        c.inline_budget = Duration::ZERO;
        c.call_timeout = Duration::from_secs(3);
        c.gas_cap = u64::MAX / 2;
    }) else {
        return;
    };
    let looping = "0x900000000000000000000000000000000000000e";
    let endless =
        json!([{"from": FUNDED, "to": looping}, "latest", {looping: {"code": "0x5b600056"}}]);
    let started = Instant::now();
    let loops: Vec<_> = (0..2)
        .map(|_| {
            let (endless, url) = (endless.clone(), node.url.clone());
            std::thread::spawn(move || {
                let body =
                    json!({"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": endless});
                let r: Value =
                    client_from(ATTACKER).post(&url).json(&body).send().unwrap().json().unwrap();
                (r, started.elapsed())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // RET42 at another address: returns 42.
    let short = "0x900000000000000000000000000000000000000f";
    let params = json!([{"from": FUNDED, "to": short}, "latest", {short: {"code": "0x602a60005260206000f3"}}]);
    let asked = Instant::now();
    let out = call(&client_from(GOOD), &node, "eth_call", params).unwrap();
    let waited = asked.elapsed();
    assert_eq!(out, format!("0x{:064x}", 42));
    assert!(waited < Duration::from_millis(1500), "the other client's call waited {waited:?}");
    let mut ended: Vec<Duration> = Vec::new();
    for l in loops {
        let (r, at) = l.join().unwrap();
        assert_eq!(r["error"]["message"], "execution timeout after 3s", "{r}");
        ended.push(at);
    }
    ended.sort();
    // The client's second loop waited for its first: one at a time.
    assert!(ended[1] >= Duration::from_millis(5500), "both loops ran at once: {ended:?}");
}

/// `--rpc.max-filters-per-ip` caps the filters one address installs, beside the global
/// `--rpc.max-filters`, each refusal naming its flag; any client may poll or uninstall a filter,
/// and an uninstalled one gives its owner its place back.
#[test]
fn filters_are_counted_per_client() {
    let Some(node) = Node::start(|c| {
        c.max_filters = 5;
        c.max_filters_per_ip = 3;
    }) else {
        return;
    };
    let (attacker, good) = (client_from(ATTACKER), client_from(GOOD));
    let mut theirs = Vec::new();
    for _ in 0..3 {
        theirs.push(call(&attacker, &node, "eth_newBlockFilter", json!([])).unwrap());
    }
    let e = call(&attacker, &node, "eth_newFilter", json!([{"fromBlock": "0x1"}])).unwrap_err();
    assert_eq!(e["code"], -32005, "{e}");
    assert!(e["message"].as_str().unwrap().contains("--rpc.max-filters-per-ip"), "{e}");
    let e = call(&attacker, &node, "eth_newBlockFilter", json!([])).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("--rpc.max-filters-per-ip"), "{e}");
    // The other client still installs filters, up to the global limit.
    for _ in 0..2 {
        call(&good, &node, "eth_newBlockFilter", json!([])).unwrap();
    }
    let e = call(&good, &node, "eth_newBlockFilter", json!([])).unwrap_err();
    assert_eq!(e["code"], -32005, "{e}");
    assert!(e["message"].as_str().unwrap().contains("--rpc.max-filters)"), "{e}");
    // Anyone polls and uninstalls any filter; the owner gets its place back.
    assert_eq!(call(&good, &node, "eth_getFilterChanges", json!([theirs[0]])).unwrap(), json!([]));
    assert_eq!(call(&good, &node, "eth_uninstallFilter", json!([theirs[0]])).unwrap(), json!(true));
    call(&attacker, &node, "eth_newBlockFilter", json!([])).unwrap();
}

/// The flags of these rules reach the server's configuration, their defaults are
/// `RpcConfig`'s, and a timeout that is not a positive number of seconds is refused by name.
#[test]
fn the_flags_set_the_rules_and_default_to_the_config_s_defaults() {
    let rpc = |extra: &[&str]| {
        let args = ["loupe", "node", "--datadir", "/tmp/loupe-connections-test"];
        let cli =
            loupe::cli::Cli::parse_with_config_from(args.iter().chain(extra).copied()).unwrap();
        let Some(loupe::cli::Command::Node(node)) = cli.command else { panic!("not node") };
        node.rpc.to_config()
    };
    let set = rpc(&[
        "--rpc.max-connections-per-ip=7",
        "--rpc.body-timeout=1.5",
        "--rpc.min-body-rate=9",
        "--rpc.idle-timeout=4",
        "--rpc.client-share=30",
        "--rpc.max-filters-per-ip=5",
        "--rpc.max-body-memory=3",
    ])
    .unwrap();
    let got = |c: &loupe::rpc::RpcConfig| {
        (
            c.max_connections_per_ip,
            c.body_timeout,
            c.min_body_rate,
            c.idle_timeout,
            c.client_share,
            c.max_filters_per_ip,
            c.max_body_memory,
        )
    };
    let s = Duration::from_secs_f64;
    assert_eq!(got(&set), (7, s(1.5), 9, s(4.0), 30, 5, 3 << 20));
    assert_eq!(got(&rpc(&[]).unwrap()), got(&loupe::rpc::RpcConfig::default()));
    for bad in ["--rpc.body-timeout=0", "--rpc.idle-timeout=-1", "--rpc.body-timeout=inf"] {
        let e = rpc(&[bad]).unwrap_err().to_string();
        let flag = bad.split('=').next().unwrap();
        assert!(e.contains(flag), "{bad}: {e}");
    }
}

/// The bodies held at once are bounded in all and per client (`--rpc.max-body-memory` and the
/// client's share of it): a body announced past its client's share gets 503 and -32005 naming
/// the flag while another client's fits, and the bytes come back when the held body ends.
#[test]
fn request_bodies_held_at_once_are_bounded_per_client_and_in_all() {
    let Some(node) = Node::start(|c| {
        c.max_request_body = 100_000;
        c.max_body_memory = 300_000;
        c.client_share = 50;
    }) else {
        return;
    };
    // Holds 100 kB of the attacker's 150 kB share: announced, 4 bytes sent.
    let mut held = connect_from(ATTACKER, addr(&node));
    held.write_all(format!("{}{{\"js", post_head(100_000)).as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // One more from the same client would pass its share: refused at once, named.
    let mut second = connect_from(ATTACKER, addr(&node));
    second.write_all(closing_head(100_000).as_bytes()).unwrap();
    second.write_all(&padded_request(100_000)).unwrap();
    let text = read_until_closed(&mut second, Duration::from_secs(10)).unwrap_or_default();
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("-32005") && text.contains("--rpc.max-body-memory"), "{text}");
    // Another client's body fits in what is left of the total.
    let mut other = connect_from(GOOD, addr(&node));
    other.write_all(closing_head(100_000).as_bytes()).unwrap();
    other.write_all(&padded_request(100_000)).unwrap();
    let text = read_until_closed(&mut other, Duration::from_secs(10)).unwrap_or_default();
    assert!(text.starts_with("HTTP/1.1 200") && text.contains(HEAD), "{text}");
    // Once the held body ends (here: its client leaves), the share is free again.
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let mut again = connect_from(ATTACKER, addr(&node));
    again.write_all(closing_head(100_000).as_bytes()).unwrap();
    again.write_all(&padded_request(100_000)).unwrap();
    let text = read_until_closed(&mut again, Duration::from_secs(10)).unwrap_or_default();
    assert!(text.starts_with("HTTP/1.1 200") && text.contains(HEAD), "{text}");
}
