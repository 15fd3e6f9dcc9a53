//! The follower's decoding of upstream responses: an upstream that answers anything (the input)
//! gets a `FollowError` naming the method, never a panic, and blocks it accepts are the ones
//! asked for.
//!
//! Input: one byte choosing the call (chain id, a block reference, blocks 1-3 as raw RLP,
//! blocks 1-3 as JSON), then the HTTP response body. A small loopback server answers with the
//! body, `"$id0"`…`"$id9"` replaced by the ids of the request (so mutations of a valid answer
//! reach the decoding rather than the id check).
#![no_main]

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{LazyLock, Mutex};

use libfuzzer_sys::fuzz_target;
use loupe::follow::Upstream;
use serde_json::{Value, json};

static BODY: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// The answer to one request: the current body with the request's ids put in.
fn answer(request: &[u8]) -> Vec<u8> {
    let ids: Vec<String> = match serde_json::from_slice::<Value>(request) {
        Ok(Value::Array(a)) => a.iter().map(|r| r["id"].to_string()).collect(),
        Ok(r) => vec![r["id"].to_string()],
        Err(_) => vec![],
    };
    let mut body = BODY.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for (i, id) in ids.iter().enumerate().take(10) {
        let needle = format!("\"$id{i}\"");
        let text = String::from_utf8_lossy(&body).replace(&needle, id);
        body = text.into_bytes();
    }
    body
}

fn serve(stream: std::net::TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    stream.set_nodelay(true)?;
    let mut out = stream;
    loop {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut request = vec![0; length];
        reader.read_exact(&mut request)?;
        let body = answer(&request);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        // One write: a head and body in two segments would wait on delayed ACKs.
        let mut response = head.into_bytes();
        response.extend(body);
        out.write_all(&response)?;
    }
}

struct Fake {
    rt: tokio::runtime::Runtime,
    raw: Mutex<Upstream>,
    json: Mutex<Upstream>,
}

static FAKE: LazyLock<Fake> = LazyLock::new(|| {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    let timeout = std::time::Duration::from_secs(5);
    let mut raw = Upstream::new(&url, timeout).expect("client");
    raw.set_raw_blocks(true);
    let mut json = Upstream::new(&url, timeout).expect("client");
    json.set_raw_blocks(false);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    Fake { rt, raw: Mutex::new(raw), json: Mutex::new(json) }
});

fn seed(mode: u8, body: Value) -> Vec<u8> {
    let mut s = vec![mode];
    s.extend(body.to_string().into_bytes());
    s
}

fuzz_target!(
    init: {
        let node = loupe_fuzz::dev_node();
        let one = |id: usize, result: Value| json!({"jsonrpc": "2.0", "id": format!("$id{id}"), "result": result});
        let batch = |method: &str, extra: Option<bool>| {
            Value::Array(
                (1..=3u64)
                    .map(|n| {
                        let mut p = vec![json!(format!("{n:#x}"))];
                        p.extend(extra.map(Value::Bool));
                        one(n as usize - 1, node.call(method, Value::Array(p)))
                    })
                    .collect(),
            )
        };
        let latest = node.call("eth_getBlockByNumber", json!(["latest", false]));
        loupe_fuzz::write_seeds([
            seed(0, one(0, node.call("eth_chainId", json!([])))),
            seed(1, one(0, latest)),
            seed(1, one(0, Value::Null)),
            seed(2, batch("debug_getRawBlock", None)),
            seed(3, batch("eth_getBlockByNumber", Some(true))),
            seed(0, json!({"jsonrpc": "2.0", "id": "$id0", "error": {"code": -32000, "message": "no"}})),
        ]);
    },
    |data: &[u8]| {
        let Some((&mode, body)) = data.split_first() else { return };
        *BODY.lock().unwrap_or_else(|e| e.into_inner()) = body.to_vec();
        let fake = &*FAKE;
        match mode % 4 {
            0 => {
                let _ = fake.rt.block_on(fake.raw.lock().expect("lock").chain_id());
            }
            1 => {
                let _ = fake.rt.block_on(fake.raw.lock().expect("lock").block_ref("latest"));
            }
            m => {
                let upstream = if m == 2 { &fake.raw } else { &fake.json };
                let mut upstream = upstream.lock().expect("lock");
                // The dev policy accepts every form a strict one does, and blob sidecars too.
                match fake.rt.block_on(upstream.blocks(1, 3, loupe::chain::HeaderPolicy::Dev)) {
                    Ok(blocks) => {
                        for (i, b) in blocks.iter().enumerate() {
                            assert_eq!(b.header.number, 1 + i as u64, "a block not asked for");
                        }
                    }
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
            }
        }
    }
);
