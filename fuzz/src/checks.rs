//! What each fuzz target checks of one input, shared by the targets (`fuzz_targets/`) and by
//! the replay of their committed corpora in loupe's test suite (`tests/fuzz_corpus.rs`). A
//! broken property panics, naming it.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{LazyLock, Mutex};

use loupe::follow::Upstream;
use loupe::storage::Database;
use serde_json::Value;

/// `http_request`: any bytes POSTed to `/` get an answer: never a panic, never HTTP 500, and a
/// 200 always carries JSON (or nothing, for notifications).
pub fn http_request(data: &[u8]) {
    let node = super::dev_node();
    let (status, body) = node.post(data.to_vec());
    assert_ne!(status, 500, "HTTP 500: {}", String::from_utf8_lossy(&body));
    if status == 200 && !body.is_empty() {
        let parsed = serde_json::from_slice::<serde_json::Value>(&body);
        assert!(parsed.is_ok(), "200 without JSON: {}", String::from_utf8_lossy(&body));
    }
}

/// `params`: the input is `method\nparams` (params as JSON text, any bytes); the answer is a
/// result or an error that is not an internal one (-32603) or a panic.
pub fn params(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (method, params) = text.split_once('\n').unwrap_or((&text, "[]"));
    let method = serde_json::Value::String(method.to_string());
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":{method},"params":{params}}}"#);
    let (status, out) = super::dev_node().post(body.into_bytes());
    assert_ne!(status, 500, "HTTP 500: {}", String::from_utf8_lossy(&out));
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(&out) else {
        // Invalid JSON params make the whole request invalid: 400 with a JSON-RPC error
        // or an empty answer are both fine; anything else is not.
        assert!(status == 400 || out.is_empty(), "{status}: {}", String::from_utf8_lossy(&out));
        return;
    };
    assert_ne!(answer["error"]["code"], -32603, "internal error for {method}: {answer}");
}

/// The dev chain's head: `block_import` imports block n on a copy whose head is n-1.
pub const HEAD: u64 = 20;

/// `block_import`: RLP block decoding (the import file reader) and block import on mutated
/// valid blocks: a decoding or verification error names what was wrong, never a panic, and
/// nothing is stored.
///
/// A decoded block numbered n is imported on top of a copy of the dev chain whose head is n-1
/// (one copy per height, made at start by unwinding, so an execution imports one block and
/// unwinds nothing), with `import_block_on_writer` in a write transaction that is then dropped:
/// the same `store_block` as `import_block`. The committed chains never change. A block other
/// than the stored one may import only if its body is the stored block's and its header
/// differs in fields the consensus layer chooses within the header rules (FUZZING.md:
/// `prevRandao`, `extraData`, gas limit, timestamp).
pub fn block_import(data: &[u8]) {
    let node = super::dev_node();
    let mut reader = loupe::import::BlockReader::new(data);
    let block = match reader.next_block() {
        None => return,
        Some(Err(e)) => {
            assert!(!e.to_string().is_empty());
            return;
        }
        Some(Ok((_, block))) => block,
    };
    let n = block.header.number;
    let stored = |n| node.db.begin_read().and_then(|r| r.canonical_hash(n)).ok().flatten();
    let before = stored(n);
    if n == 0 || n > HEAD {
        // Genesis is never imported; past the head, the parent is missing.
        let r = loupe::import::import_block(&node.db, &node.spec, &block, false);
        assert!(!matches!(r, Ok(loupe::import::BlockStatus::Imported)), "block {n} imported");
    } else {
        let base = &bases()[n as usize - 1];
        let writer = base.begin_write().expect("writer");
        match loupe::import::import_block_on_writer(&writer, &node.spec, &block) {
            Ok(hash) if Some(hash) != before => {
                let reader = node.db.begin_read().expect("reader");
                let (mut body, _) = reader.body(n).ok().flatten().expect("stored body");
                let txs = reader.transactions(n).expect("stored transactions");
                body.transactions = txs.into_iter().map(|t| t.tx).collect();
                assert_eq!(body, block.body, "another body imported as #{n}");
                // Only what the consensus layer chooses may differ, within the header
                // rules: prevRandao, extraData within its 32 bytes, the gas limit within
                // 1/1024 of the parent's (and not below the gas used), and a timestamp not
                // before the parent's. The roots catch any effect on execution.
                let mut header = reader.header(n).ok().flatten().expect("stored header");
                let parent = reader.header(n - 1).ok().flatten().expect("stored parent");
                let theirs = &block.header;
                header.mix_hash = theirs.mix_hash;
                if theirs.extra_data.len() <= 32 {
                    header.extra_data = theirs.extra_data.clone();
                }
                let step = parent.gas_limit / 1024;
                if theirs.gas_limit.abs_diff(parent.gas_limit) < step
                    && theirs.gas_limit >= theirs.gas_used.max(5000)
                {
                    header.gas_limit = theirs.gas_limit;
                }
                if theirs.timestamp >= parent.timestamp {
                    header.timestamp = theirs.timestamp;
                }
                assert_eq!(header, block.header, "an invalid header imported as #{n}");
            }
            Ok(_) => {}
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        drop(writer);
        let base_head = base.begin_read().and_then(|r| r.head()).ok().flatten();
        assert_eq!(base_head, Some(n - 1), "the copy's head moved");
    }
    let head = node.db.begin_read().and_then(|r| r.head()).ok().flatten();
    assert_eq!(head, Some(HEAD), "the stored head moved");
    assert_eq!(stored(n), before, "block {n} changed");
}

/// Copies of the dev chain with heads 0..HEAD-1 (index n-1 holds the parent of block n).
pub fn bases() -> &'static [Database] {
    static BASES: LazyLock<(tempfile::TempDir, Vec<Database>)> = LazyLock::new(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().join("work");
        super::dev_node().db.copy_to(&work).expect("copy");
        let work = Database::open(&work).expect("open copy");
        let mut bases = Vec::new();
        for n in (0..HEAD).rev() {
            let mut writer = work.begin_write().expect("writer");
            while writer.head().ok().flatten().is_some_and(|h| h > n) {
                writer.unwind_head().expect("unwind");
            }
            writer.commit(true).expect("commit");
            let at = dir.path().join(format!("head-{n}"));
            work.copy_to(&at).expect("copy");
            bases.push(Database::open(&at).expect("open copy"));
        }
        bases.reverse();
        (dir, bases)
    });
    &BASES.1
}

/// `upstream_decode`: the follower's decoding of upstream responses: an upstream that answers
/// anything gets a `FollowError` naming the method, never a panic, and blocks it accepts are
/// the ones asked for.
///
/// Input: one byte choosing the call (chain id, a block reference, blocks 1-3 as raw RLP,
/// blocks 1-3 as JSON), then the HTTP response body. A small loopback server answers with the
/// body, `"$id0"`…`"$id9"` replaced by the ids of the request (so mutations of a valid answer
/// reach the decoding rather than the id check).
pub fn upstream_decode(data: &[u8]) {
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
