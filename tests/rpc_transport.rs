//! JSON-RPC 2.0 over HTTP: one test per transport rule of `behaviour.md` §1 (status codes,
//! JSON-RPC error codes, ids, notifications, batches, limits, panics, CORS).
#![allow(clippy::unwrap_used)]

use crate::support;

use serde_json::{Value, json};
use support::Node;

const CHAIN_ID: &str = "0xc72dd9d5e883e";
const TX_BY_NUM: &str = "eth_getTransactionByBlockNumberAndIndex";

fn node() -> Option<Node> {
    Node::start(|_| {})
}

/// POSTs `body` as JSON; returns status and the parsed body (`Value::Null` for an empty body).
fn post(node: &Node, body: &str) -> (u16, Value) {
    let (status, text) = node.post_raw(body.to_string());
    if text.trim().is_empty() {
        return (status, Value::Null);
    }
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON {text:?}: {e}"));
    (status, v)
}

/// Asserts a response object is an error with `code`, `"jsonrpc":"2.0"` and exactly `id`;
/// returns the message.
fn expect_error(resp: &Value, code: i64, id: &Value) -> String {
    assert_eq!(resp["jsonrpc"], "2.0", "{resp}");
    assert_eq!(&resp["id"], id, "id not echoed: {resp}");
    assert!(resp.get("result").is_none(), "result next to error: {resp}");
    assert_eq!(resp["error"]["code"], code, "{resp}");
    resp["error"]["message"].as_str().unwrap_or_else(|| panic!("no message: {resp}")).to_string()
}

/// Asserts a response object is a result with `"jsonrpc":"2.0"` and exactly `id`.
fn expect_result<'a>(resp: &'a Value, id: &Value) -> &'a Value {
    assert_eq!(resp["jsonrpc"], "2.0", "{resp}");
    assert_eq!(&resp["id"], id, "id not echoed: {resp}");
    assert!(resp.get("error").is_none(), "unexpected error: {resp}");
    resp.get("result").unwrap_or_else(|| panic!("no result: {resp}"))
}

fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn batch_mixed_valid_and_invalid_items() {
    let Some(node) = node() else { return };
    let body = r#"[
        {"jsonrpc":"2.0","id":1,"method":"eth_chainId"},
        {"jsonrpc":"2.0","id":2,"method":"no_suchMethod","params":[]},
        {"jsonrpc":"2.0","id":3},
        1,
        {"jsonrpc":"2.0","method":"eth_chainId"},
        {"jsonrpc":"2.0","id":"x","method":"eth_blockNumber"},
        {"jsonrpc":"1.0","id":4,"method":"eth_chainId"},
        {"jsonrpc":"2.0","id":5,"method":"eth_getTransactionByBlockNumberAndIndex","params":["0x1"]}
    ]"#;
    let (status, v) = post(&node, body);
    assert_eq!(status, 200);
    let items = v.as_array().unwrap_or_else(|| panic!("batch answer is not an array: {v}"));
    // 8 items, one a notification: 7 responses.
    assert_eq!(items.len(), 7, "{v}");
    let by_id = |id: Value| -> &Value {
        let mut found = items.iter().filter(|r| r["id"] == id);
        let r = found.next().unwrap_or_else(|| panic!("no response with id {id}: {v}"));
        assert!(found.next().is_none(), "two responses with id {id}: {v}");
        r
    };
    assert_eq!(expect_result(by_id(json!(1)), &json!(1)), CHAIN_ID);
    expect_error(by_id(json!(2)), -32601, &json!(2));
    expect_error(by_id(json!(3)), -32600, &json!(3)); // no method
    expect_error(by_id(Value::Null), -32600, &Value::Null); // not an object
    assert_eq!(expect_result(by_id(json!("x")), &json!("x")), "0x36");
    expect_error(by_id(json!(4)), -32600, &json!(4)); // jsonrpc "1.0"
    let msg = expect_error(by_id(json!(5)), -32602, &json!(5));
    assert!(msg.contains("argument 1"), "{msg}");
}

#[test]
fn empty_batch_is_one_invalid_request_error() {
    let Some(node) = node() else { return };
    let (status, v) = post(&node, "[]");
    println!("[] → HTTP {status} {v}");
    assert_eq!(status, 200);
    assert!(v.is_object(), "want a single error object, got {v}");
    expect_error(&v, -32600, &Value::Null);
}

#[test]
fn notifications_get_no_response_object() {
    let Some(node) = node() else { return };
    let mut wrong = Vec::new();
    // A single notification, a notification of an unknown method, a batch of notifications only
    // (JSON-RPC 2.0: "should return nothing at all", not an empty array): empty HTTP body.
    for body in [
        r#"{"jsonrpc":"2.0","method":"eth_chainId","params":[]}"#,
        r#"{"jsonrpc":"2.0","method":"no_suchMethod"}"#,
        r#"[{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","method":"eth_blockNumber"}]"#,
    ] {
        let (status, text) = node.post_raw(body);
        if !(status == 200 || status == 204) || !text.trim().is_empty() {
            wrong.push(format!("{body}\n  → HTTP {status}, body {text:?} (want an empty body)"));
        }
    }
    // In a batch with a call: only the call's entry.
    let (_, v) = post(
        &node,
        r#"[{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":9,"method":"eth_chainId"}]"#,
    );
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), 1, "{v}");
    assert_eq!(expect_result(&items[0], &json!(9)), CHAIN_ID);
    assert!(wrong.is_empty(), "notifications answered:\n{}", wrong.join("\n"));
}

#[test]
fn parse_error_has_id_null() {
    let Some(node) = node() else { return };
    for body in [r#"{"jsonrpc":"#, r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId""#, "[{]"] {
        let (status, v) = post(&node, body);
        assert!(status == 200 || status == 400, "HTTP {status} for {body:?}");
        expect_error(&v, -32700, &Value::Null);
    }
}

#[test]
fn wrong_or_missing_jsonrpc_version_is_invalid_request() {
    let Some(node) = node() else { return };
    let (_, v) = post(&node, r#"{"jsonrpc":"1.0","id":1,"method":"eth_chainId"}"#);
    expect_error(&v, -32600, &json!(1));
    let (_, v) = post(&node, r#"{"id":2,"method":"eth_chainId"}"#);
    expect_error(&v, -32600, &json!(2));
    let (_, v) = post(&node, r#"{"jsonrpc":2.0,"id":3,"method":"eth_chainId"}"#);
    expect_error(&v, -32600, &json!(3));
    // Missing or non-string method.
    let (_, v) = post(&node, r#"{"jsonrpc":"2.0","id":4}"#);
    expect_error(&v, -32600, &json!(4));
    let (_, v) = post(&node, r#"{"jsonrpc":"2.0","id":5,"method":5}"#);
    expect_error(&v, -32600, &json!(5));
}

#[test]
fn invalid_request_objects_without_id_are_invalid_request() {
    let Some(node) = node() else { return };
    // JSON-RPC 2.0 §7 example: `{"jsonrpc": "2.0", "method": 1, "params": "bar"}` → -32600 with
    // id null. A body that is valid JSON but not a request object (behaviour.md: "not an
    // object") is -32600 too, not a parse error.
    let mut wrong = Vec::new();
    for body in [
        r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#,
        r#"{"jsonrpc":"1.0","method":"eth_chainId"}"#,
        r#"{"method":"eth_chainId"}"#,
        r#"{}"#,
        r#"1"#,
        r#""eth_chainId""#,
        r#"null"#,
    ] {
        let (status, text) = node.post_raw(body);
        println!("{body} → HTTP {status} {text}");
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let ok = v["jsonrpc"] == "2.0" && v["id"].is_null() && v["error"]["code"] == -32600;
        if !ok {
            wrong.push(format!("{body} → HTTP {status} {text:?} (want -32600, id null)"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn batch_over_the_limit_is_one_error_naming_the_limit() {
    let Some(node) = Node::start(|cfg| cfg.max_batch = 3) else { return };
    let item = |i: u64| req(json!(i), "eth_chainId", json!([]));
    // At the limit: served.
    let (_, v) = post(&node, &json!([item(1), item(2), item(3)]).to_string());
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{v}");
    // Over it: one error object.
    let (status, v) = post(&node, &json!([item(1), item(2), item(3), item(4)]).to_string());
    println!("batch of 4 (limit 3) → HTTP {status} {v}");
    assert_eq!(status, 200);
    assert!(v.is_object(), "want one error object, got {v}");
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], Value::Null);
    let code = v["error"]["code"].as_i64().unwrap();
    assert!(code == -32600 || code == -32010, "{v}");
    let msg = v["error"]["message"].as_str().unwrap().to_lowercase();
    assert!(msg.contains("batch"), "message does not name the batch limit: {v}");
    // The limit's value is stated (jsonrpsee puts it in `data`: "Exceeded max limit of 3").
    let text = format!("{} {}", v["error"]["message"], v["error"]["data"]);
    assert!(text.contains('3'), "limit value not stated: {v}");
}

/// 413, or HTTP 200 with a JSON-RPC -32600/-32007 error.
fn assert_body_too_large(status: u16, text: &str) {
    if status == 413 {
        return;
    }
    assert_eq!(status, 200, "want 413 or a JSON-RPC error, got HTTP {status}: {text}");
    let v: Value = serde_json::from_str(text).unwrap();
    let code = v["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {v}"));
    assert!(code == -32600 || code == -32007, "{v}");
}

#[test]
fn request_body_over_the_limit_is_rejected() {
    let Some(node) = Node::start(|cfg| cfg.max_request_body = 1024) else { return };
    // ~2 KB of well-formed JSON-RPC, with Content-Length.
    let padding = "0".repeat(2048);
    let body = json!({"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[], "pad": padding});
    let (status, text) = node.post_raw(body.to_string());
    println!("2 KB body (limit 1024) → HTTP {status} {text}");
    assert_body_too_large(status, &text);
    // The same without Content-Length (chunked): the limit still holds.
    let r = node
        .client
        .post(&node.url)
        .header("Content-Type", "application/json")
        .body(reqwest::blocking::Body::new(std::io::Cursor::new(body.to_string().into_bytes())))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    println!("2 KB chunked body (limit 1024) → HTTP {status} {text}");
    assert_body_too_large(status, &text);
    // A small request on the same node still works.
    assert_eq!(node.call("eth_chainId", json!([])).unwrap(), CHAIN_ID);
}

#[test]
fn get_is_method_not_allowed() {
    let Some(node) = node() else { return };
    let r = node.client.get(&node.url).send().unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let r = node.client.put(&node.url).header("Content-Type", "application/json").body("{}").send();
    assert_eq!(r.unwrap().status().as_u16(), 405);
}

#[test]
fn non_json_content_type_is_unsupported_media_type() {
    let Some(node) = node() else { return };
    let body = req(json!(1), "eth_chainId", json!([])).to_string();
    let r = node
        .client
        .post(&node.url)
        .header("Content-Type", "text/plain")
        .body(body.clone())
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let r = node.client.post(&node.url).body(body.clone()).send().unwrap();
    assert_eq!(r.status().as_u16(), 415, "missing Content-Type");
    // application/json with a charset is accepted.
    let r = node
        .client
        .post(&node.url)
        .header("Content-Type", "application/json; charset=utf-8")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().unwrap()["result"], CHAIN_ID);
}

#[test]
fn other_paths_are_not_found() {
    let Some(node) = node() else { return };
    let body = req(json!(1), "eth_chainId", json!([])).to_string();
    for path in ["foo", "foo/", "eth", "%2F"] {
        let url = format!("{}{path}", node.url);
        let r = node
            .client
            .post(&url)
            .header("Content-Type", "application/json")
            .body(body.clone())
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "POST {url}");
    }
    let r = node.client.get(format!("{}foo", node.url)).send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

#[test]
fn unknown_method_is_method_not_found() {
    let Some(node) = node() else { return };
    let v = node.request(&req(json!(1), "eth_noSuchMethod", json!([])));
    expect_error(&v, -32601, &json!(1));
    // Method names are case-sensitive.
    let v = node.request(&req(json!(2), "ETH_CHAINID", json!([])));
    expect_error(&v, -32601, &json!(2));
}

#[test]
fn wrong_param_counts_name_the_parameter() {
    let Some(node) = node() else { return };
    // Too few.
    for (params, missing) in [(json!(["0x1"]), 1), (json!([]), 0), (Value::Null, 0)] {
        let mut r = req(json!(1), TX_BY_NUM, params.clone());
        if params.is_null() {
            r.as_object_mut().unwrap().remove("params");
        }
        let msg = expect_error(&node.request(&r), -32602, &json!(1));
        assert!(msg.contains(&format!("argument {missing}")), "{params}: {msg}");
    }
    // Too many.
    let msg = expect_error(
        &node.request(&req(json!(1), TX_BY_NUM, json!(["0x1", "0x0", "0x0"]))),
        -32602,
        &json!(1),
    );
    assert!(msg.contains("argument") && msg.contains('2'), "{msg}");
    // Params that are not an array.
    let msg = expect_error(
        &node.request(&req(json!(1), TX_BY_NUM, json!({"block": "0x1", "index": "0x0"}))),
        -32602,
        &json!(1),
    );
    assert!(msg.contains("array"), "{msg}");
}

#[test]
fn wrong_param_types_name_the_parameter() {
    let Some(node) = node() else { return };
    let cases = [
        (json!(["0x1", 5]), 1, "index"),
        (json!(["0x1", "5"]), 1, "index"),
        (json!(["0x1", "0x"]), 1, "index"),
        (json!(["0x1", "-0x1"]), 1, "index"),
        (json!(["0x1", "0x10000000000000000"]), 1, "index"),
        (json!(["12", "0x0"]), 0, "block"),
        (json!(["0x", "0x0"]), 0, "block"),
        (json!(["0xZZ", "0x0"]), 0, "block"),
        (json!([-1, "0x0"]), 0, "block"),
        (json!([1, "0x0"]), 0, "block"),
        (json!(["Latest", "0x0"]), 0, "block"),
        (json!(["0x10000000000000000", "0x0"]), 0, "block"),
        (json!([null, "0x0"]), 0, "block"),
        (json!(["0x1", null]), 1, "index"),
    ];
    for (params, i, name) in cases {
        let v = node.request(&req(json!(1), TX_BY_NUM, params.clone()));
        let msg = expect_error(&v, -32602, &json!(1));
        assert!(msg.contains(&format!("argument {i}")), "{params}: message lacks index: {msg}");
        assert!(msg.contains(name), "{params}: message lacks the name {name:?}: {msg}");
    }
}

#[test]
fn ids_of_every_allowed_type_are_echoed_exactly() {
    let Some(node) = node() else { return };
    // behaviour.md: number, string or null, echoed exactly (compared on the raw text too).
    for id in ["7", "0", "18446744073709551615", r#""abc""#, r#""""#, r#""a\"b\u00e9""#, "null"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"eth_chainId"}}"#);
        let (status, text) = node.post_raw(body);
        assert_eq!(status, 200);
        let v: Value = serde_json::from_str(&text).unwrap();
        let want: Value = serde_json::from_str(id).unwrap();
        assert_eq!(expect_result(&v, &want), CHAIN_ID, "id {id}");
        if want.is_number() || want.is_null() {
            assert!(text.contains(&format!(r#""id":{id}"#)), "id {id} not echoed verbatim: {text}");
        }
    }
    // In a batch, each entry keeps its own id.
    let (_, v) = post(
        &node,
        r#"[{"jsonrpc":"2.0","id":"a","method":"eth_chainId"},{"jsonrpc":"2.0","id":null,"method":"eth_chainId"},{"jsonrpc":"2.0","id":0,"method":"eth_chainId"}]"#,
    );
    let ids: Vec<&Value> = v.as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids.len(), 3);
    for want in [json!("a"), Value::Null, json!(0)] {
        assert!(ids.contains(&&want), "{want} missing in {v}");
    }
}

#[test]
fn ids_outside_jsonrpsee_types_are_answered() {
    let Some(node) = node() else { return };
    // jsonrpsee's `Id` is null | u64 | string: fractional, negative and > u64 numbers (and the
    // non-scalar types JSON-RPC 2.0 forbids) cannot be echoed. Whatever happens, the server must
    // answer with a well-formed response: the echoed id, or -32600 (id null when it cannot be
    // represented). Printed for the report.
    let mut wrong = Vec::new();
    for id in ["1.5", "-1", "18446744073709551616", "1e3", "true", "{}", "[1]"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"eth_chainId"}}"#);
        let (status, text) = node.post_raw(body);
        println!("id {id}: HTTP {status} {text:?}");
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let want: Value = serde_json::from_str(id).unwrap();
        let echoed = v["jsonrpc"] == "2.0" && v["id"] == want && v["result"] == CHAIN_ID;
        let rejected = v["jsonrpc"] == "2.0"
            && (v["id"].is_null() || v["id"] == want)
            && v["error"]["code"] == -32600
            && v.get("result").is_none();
        if !(echoed || rejected) {
            wrong.push(format!("id {id}: HTTP {status} body {text:?}"));
        }
    }
    // In a batch, such an entry must not vanish either.
    let (_, v) = post(
        &node,
        r#"[{"jsonrpc":"2.0","id":-1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]"#,
    );
    println!("batch with id -1: {v}");
    if v.as_array().map(Vec::len) != Some(2) {
        wrong.push(format!("batch [id -1, id 1]: {v} (want 2 entries)"));
    }
    assert!(
        wrong.is_empty(),
        "requests with an id must be answered (id echoed, or -32600):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn panic_in_a_handler_is_internal_error_and_server_keeps_serving() {
    let Some(node) = node() else { return };
    let v = node.request(&req(json!(11), "loupe_testPanic", json!([])));
    println!("loupe_testPanic → {v}");
    let msg = expect_error(&v, -32603, &json!(11));
    let lower = msg.to_lowercase();
    assert!(!lower.contains("panic") && !lower.contains("test panic"), "panic text leaked: {msg}");
    assert!(v["error"].get("data").is_none_or(|d| !d.to_string().to_lowercase().contains("panic")));
    // The next request is served.
    assert_eq!(node.call("eth_chainId", json!([])).unwrap(), CHAIN_ID);
    // A panic inside a batch does not take the other entries down.
    let (_, v) = post(
        &node,
        &json!([
            req(json!(1), "loupe_testPanic", json!([])),
            req(json!(2), "eth_chainId", json!([]))
        ])
        .to_string(),
    );
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), 2, "{v}");
    for r in items {
        if r["id"] == 1 {
            expect_error(r, -32603, &json!(1));
        } else {
            assert_eq!(expect_result(r, &json!(2)), CHAIN_ID);
        }
    }
    // Many panics in a row: still serving.
    for _ in 0..20 {
        let _ = node.request(&req(json!(1), "loupe_testPanic", json!([])));
    }
    assert_eq!(node.call("eth_blockNumber", json!([])).unwrap(), "0x36");
}

#[test]
fn response_over_the_limit_is_limit_error() {
    let Some(node) = Node::start(|cfg| cfg.max_response_body = 200) else { return };
    let v = node.request(&req(json!(1), "eth_getBlockByNumber", json!(["latest", true])));
    println!("block 54 with max_response_body 200 → {v}");
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], 1, "{v}");
    let code = v["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {v}"));
    assert!(code == -32005 || code == -32008, "{v}");
    // Small answers still fit.
    assert_eq!(node.call("eth_chainId", json!([])).unwrap(), CHAIN_ID);
}

#[test]
fn cors_header_only_when_configured() {
    let origin = "https://example.com";
    let body = req(json!(1), "eth_chainId", json!([])).to_string();
    let send = |node: &Node, origin: &str| {
        node.client
            .post(&node.url)
            .header("Content-Type", "application/json")
            .header("Origin", origin)
            .body(body.clone())
            .send()
            .unwrap()
    };
    {
        let Some(node) = Node::start(|cfg| cfg.cors = Some(origin.into())) else { return };
        let r = send(&node, origin);
        assert_eq!(r.status().as_u16(), 200);
        let allow = r.headers().get("access-control-allow-origin").map(|h| h.to_str().unwrap());
        assert_eq!(allow, Some(origin));
        assert_eq!(r.json::<Value>().unwrap()["result"], CHAIN_ID);
        // Another origin is not allowed.
        let r = send(&node, "https://evil.example");
        assert!(r.headers().get("access-control-allow-origin").is_none());
        // A browser preflight for a JSON POST succeeds.
        let r = node
            .client
            .request(reqwest::Method::OPTIONS, &node.url)
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header("Access-Control-Request-Headers", "content-type")
            .send()
            .unwrap();
        assert!(r.status().is_success(), "preflight HTTP {}", r.status());
        let h = r.headers();
        assert_eq!(h.get("access-control-allow-origin").map(|h| h.to_str().unwrap()), Some(origin));
        let methods = h.get("access-control-allow-methods").map(|h| h.to_str().unwrap());
        assert!(methods.is_some_and(|m| m.contains("POST")), "{h:?}");
    }
    let Some(node) = node() else { return };
    let r = send(&node, origin);
    assert_eq!(r.status().as_u16(), 200);
    let cors: Vec<_> =
        r.headers().keys().filter(|k| k.as_str().starts_with("access-control-")).collect();
    assert!(cors.is_empty(), "default node sends CORS headers: {cors:?}");
}

/// `eth_syncing`, `GET /health` and `eth_sendRawTransaction` read the shared `SyncStatus`:
/// a node that follows nothing is healthy, never syncing, and refuses to send; a follower
/// behind its upstream reports its progress and is unhealthy past the lag limit, and then
/// refuses requests that carry the health-gate header.
#[test]
fn sync_status_drives_eth_syncing_health_and_transaction_forwarding() {
    let status = std::sync::Arc::new(loupe::chain::SyncStatus::new());
    let Some(node) = support::Node::start(|c| c.sync = status.clone()) else { return };
    let health = || {
        let r = reqwest::blocking::get(format!("{}health", node.url)).unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(node.call("eth_syncing", json!([])).unwrap(), json!(false));
    assert_eq!(health(), (200, "OK\n".to_string()));
    let err = node.call("eth_sendRawTransaction", json!(["0x02"])).unwrap_err();
    assert_eq!(err["code"], json!(-32601), "{err}");
    assert!(err["message"].as_str().unwrap().contains("loupe follow"), "{err}");

    // Following, 46 blocks behind an upstream at 100 (the fixture head is 54).
    status.update(|s| {
        s.following = true;
        s.starting_block = 3;
        s.upstream_head = Some(100);
        s.upstream_ok = true;
        s.max_lag = 8;
    });
    assert_eq!(
        node.call("eth_syncing", json!([])).unwrap(),
        json!({"startingBlock": "0x3", "currentBlock": "0x36", "highestBlock": "0x64"})
    );
    let (code, why) = health();
    assert_eq!(code, 503);
    assert!(why.contains("46 blocks behind"), "{why}");
    // A request marked with the health gate (what the nginx config sends) gets the same 503
    // and reason; an unmarked one is answered.
    let chain_id = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;
    let gated = |gate: bool| {
        let mut req = reqwest::blocking::Client::new()
            .post(&node.url)
            .header("content-type", "application/json")
            .body(chain_id);
        if gate {
            req = req.header(loupe::rpc::HEALTH_GATE, "1");
        }
        let r = req.send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(gated(true), (503, why));
    let (code, body) = gated(false);
    assert_eq!(code, 200);
    assert!(body.contains(r#""result":"0x"#), "{body}");
    // Within the lag limit: healthy, still syncing.
    status.update(|s| s.upstream_head = Some(60));
    assert_eq!(health().0, 200);
    let (code, body) = gated(true);
    assert_eq!(code, 200);
    assert!(body.contains(r#""result":"0x"#), "{body}");
    assert_eq!(node.call("eth_syncing", json!([])).unwrap()["highestBlock"], json!("0x3c"));
    // Upstream unreachable, or following stopped: unhealthy, with the reason.
    status.update(|s| s.upstream_ok = false);
    assert_eq!(health(), (503, "upstream unreachable\n".to_string()));
    status.update(|s| {
        s.upstream_ok = true;
        s.stopped = Some("block #55: state root mismatch".into());
    });
    let (code, why) = health();
    assert_eq!(code, 503);
    assert!(why.contains("following stopped: block #55"), "{why}");
    // Caught up: not syncing.
    status.update(|s| s.upstream_head = Some(54));
    assert_eq!(node.call("eth_syncing", json!([])).unwrap(), json!(false));
}

/// `rpc::InProcess` (the fuzzers' way in) is the server's request path: for good, bad, batched,
/// oversized and misdirected requests it gives the status and body the socket server gives.
#[test]
fn the_in_process_request_path_answers_as_the_server_does() {
    let Some(chain) = support::chain() else { return };
    let config = || loupe::rpc::RpcConfig { max_request_body: 4096, ..Default::default() };
    let node = support::Node::serve(chain.db.clone(), chain.spec.clone(), |c| *c = config());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let local = loupe::rpc::InProcess::new(chain.db.clone(), chain.spec.clone(), config()).unwrap();
    let cases: Vec<(&str, &str, String)> = vec![
        ("POST", "/", r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x2",true]}"#.into()),
        ("POST", "/", r#"[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"nope"}]"#.into()),
        ("POST", "/", r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x12"]}"#.into()),
        ("POST", "/", r#"{"jsonrpc":"2.0","id":1,"method":"trace_block","params":["0x3"]}"#.into()),
        ("POST", "/", "{not json".into()),
        ("POST", "/", format!(r#"{{"jsonrpc":"2.0","id":1,"method":"web3_sha3","params":["0x{}"]}}"#, "ab".repeat(3000))),
        ("POST", "/elsewhere", "{}".into()),
        ("GET", "/health", String::new()),
    ];
    let http = reqwest::blocking::Client::new();
    for (method, path, body) in cases {
        let url = format!("{}{}", node.url.trim_end_matches('/'), path);
        let r = http
            .request(method.parse().unwrap(), &url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .unwrap();
        let want = (r.status().as_u16(), r.text().unwrap());
        let (status, got) = rt.block_on(local.request(method, path, body.into_bytes()));
        assert_eq!((status, String::from_utf8(got).unwrap()), want, "{method} {path}");
    }
}

/// Reads whose cost grows with a block or a range (whole blocks, receipts, logs, fee history,
/// many slots) run on the read pool, not on the server's threads: with both of the test
/// server's threads' worth of reads held on the pool, point reads are still answered, and
/// every such method is refused with -32005 while the pool is full, which shows it was routed
/// there. Run inline, the two holds would stop both server threads and nothing would answer.
#[test]
fn block_and_range_reads_run_on_the_read_pool_not_the_server_threads() {
    let Some(node) = Node::start(|c| {
        c.read_workers = 2;
        c.read_queue = 0;
    }) else {
        return;
    };
    let holds: Vec<_> = (0..2)
        .map(|_| {
            let (client, url) = (node.client.clone(), node.url.clone());
            std::thread::spawn(move || {
                let body = req(json!(1), "loupe_testHold", json!([]));
                let text = client.post(&url).json(&body).send().unwrap().text().unwrap();
                serde_json::from_str::<Value>(&text).unwrap()
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while node.call("loupe_testHolding", json!([])).unwrap() != json!(2) {
        assert!(std::time::Instant::now() < deadline, "the two holds never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Point reads are answered while the read pool is full.
    let tx = node.call(TX_BY_NUM, json!(["0x1", "0x0"])).unwrap();
    let hash = tx["hash"].clone();
    assert_eq!(node.call("eth_getTransactionByHash", json!([hash])).unwrap()["hash"], hash);
    assert_eq!(
        node.call("eth_getTransactionReceipt", json!([hash])).unwrap()["transactionHash"],
        hash
    );
    assert_eq!(node.call("eth_blockNumber", json!([])).unwrap(), "0x36");
    assert!(node.call("eth_getBalance", json!([tx["from"], "0x1"])).is_ok());
    let filter =
        node.call("eth_newFilter", json!([{"fromBlock": "0x1", "toBlock": "0x36"}])).unwrap();
    // Each read-pool method is refused: it would have run there.
    let reads = [
        ("eth_getBlockByNumber", json!(["0x1", false])),
        ("eth_getBlockByHash", json!([tx["blockHash"], true])),
        ("eth_getBlockReceipts", json!(["0x1"])),
        ("debug_getRawBlock", json!(["0x1"])),
        ("debug_getRawReceipts", json!(["0x1"])),
        ("eth_feeHistory", json!(["0x4", "latest", [50]])),
        ("eth_getLogs", json!([{"fromBlock": "0x1", "toBlock": "0x36"}])),
        ("eth_getFilterChanges", json!([filter])),
        ("eth_getFilterLogs", json!([filter])),
        ("eth_getStorageValues", json!([{tx["from"].as_str().unwrap(): ["0x0"]}, "latest"])),
    ];
    for (method, params) in &reads {
        let e = node.call(method, params.clone()).expect_err(method);
        assert_eq!(e["code"], -32005, "{method}: {e}");
        assert_eq!(e["message"], "too many block, receipt and log requests", "{method}: {e}");
    }
    // A point read with parameters over 16 KiB is parsed on the read pool too (refused while it
    // is full), the same read with small ones still inline.
    let data = format!("0x{}", "ab".repeat(10_000));
    let e = node.call("web3_sha3", json!([data])).unwrap_err();
    assert_eq!(e["code"], -32005, "{e}");
    let small = format!("0x{}", "ab".repeat(100));
    assert!(node.call("web3_sha3", json!([small])).is_ok());
    assert_eq!(node.call("loupe_testRelease", json!([])).unwrap(), json!(2));
    for h in holds {
        assert_eq!(expect_result(&h.join().unwrap(), &json!(1)), &json!(true));
    }
    // Once the pool has room, the same calls are answered.
    for (method, params) in &reads {
        assert!(node.call(method, params.clone()).is_ok(), "{method} after the release");
    }
    // With room again, the large one is answered: Keccak-256 of its bytes.
    let want = format!("{:#x}", alloy_primitives::keccak256(vec![0xab_u8; 10_000]));
    assert_eq!(node.call("web3_sha3", json!([data])).unwrap(), json!(want));
}

/// `HEAD` is answered wherever `GET` is (a load balancer may check `/health` with it): the
/// status and headers of the `GET` answer, no body; and a method neither takes is still 405.
#[test]
fn head_is_answered_where_get_is() {
    let Some(node) = Node::start(|_| {}) else { return };
    let http = reqwest::blocking::Client::new();
    let url = format!("{}health", node.url);
    let get = http.get(&url).send().unwrap();
    let head = http.head(&url).send().unwrap();
    assert_eq!(head.status(), get.status());
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers().get("content-type"), get.headers().get("content-type"));
    assert!(head.bytes().unwrap().is_empty());
    assert!(!get.bytes().unwrap().is_empty());
    let put = http.put(&url).send().unwrap();
    assert_ne!(put.status().as_u16(), 200);
}

/// `eth_feeHistory` takes at most 100 reward percentiles, strictly increasing (geth's rules):
/// beyond, or a repeat, is -32602 naming what is wrong, and the node goes on answering.
#[test]
fn fee_history_percentiles_are_bounded_and_strictly_increasing() {
    let Some(node) = Node::start(|_| {}) else { return };
    let fee = |ps: Value| node.call("eth_feeHistory", json!(["0x2", "latest", ps]));
    let hundred: Vec<f64> = (0..100).map(f64::from).collect();
    let ok = fee(json!(hundred)).unwrap();
    assert_eq!(ok["reward"][0].as_array().unwrap().len(), 100);
    let many: Vec<f64> = (0..101).map(|i| f64::from(i) * 0.5).collect();
    let err = fee(json!(many)).unwrap_err();
    assert_eq!(err["code"], json!(-32602), "{err}");
    assert!(err["message"].as_str().unwrap().contains("limit of 100"), "{err}");
    let err = fee(json!([10, 10])).unwrap_err();
    assert_eq!(err["code"], json!(-32602), "{err}");
    assert!(err["message"].as_str().unwrap().contains("strictly increasing"), "{err}");
    let err = fee(json!([50, 101])).unwrap_err();
    assert!(err["message"].as_str().unwrap().contains("from 0 to 100"), "{err}");
    // A negative number is named as one, not as a missing prefix.
    let err = node.call("eth_getBlockByNumber", json!(["-0x1", false])).unwrap_err();
    assert!(err["message"].as_str().unwrap().contains("is negative"), "{err}");
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
}

/// `"-0x1"` is named a negative number wherever a quantity or a block number is read: by
/// loupe's own parser (block numbers, indexes, counts) and by the serde types of call objects,
/// overrides and simulation payloads; the message names the argument.
#[test]
fn a_negative_quantity_is_named_negative_everywhere() {
    let Some(node) = Node::start(|_| {}) else { return };
    let to = "0x9000000000000000000000000000000000000001";
    let hash = format!("0x{}", "11".repeat(32));
    let cases = [
        ("eth_getBlockByNumber", json!(["-0x1", false]), "block"),
        ("eth_getBalance", json!([to, "-0x1"]), "block"),
        ("eth_getBalance", json!([to, {"blockNumber": "-0x1"}]), "block"),
        ("eth_getTransactionByBlockNumberAndIndex", json!(["0x1", "-0x1"]), "index"),
        ("eth_getTransactionByBlockNumberAndIndex", json!(["-0x1", "0x0"]), "block"),
        ("eth_feeHistory", json!(["-0x1", "latest", []]), "blockCount"),
        ("eth_getLogs", json!([{"fromBlock": "-0x1"}]), "fromBlock"),
        ("eth_newFilter", json!([{"toBlock": "-0x1"}]), "toBlock"),
        ("trace_filter", json!([{"fromBlock": "-0x1"}]), "fromBlock"),
        ("trace_block", json!(["-0x1"]), "block"),
        ("trace_get", json!([hash, ["-0x1"]]), "indices"),
        ("eth_getStorageAt", json!([to, "-0x1", "latest"]), "storage key"),
        ("eth_call", json!([{"to": to, "gas": "-0x1"}, "latest"]), "transaction"),
        ("eth_call", json!([{"to": to, "value": "-0x1"}, "latest"]), "transaction"),
        ("eth_call", json!([{"to": to}, "latest", {to: {"balance": "-0x1"}}]), "stateOverrides"),
        ("eth_call", json!([{"to": to}, "latest", null, {"number": "-0x1"}]), "blockOverrides"),
        ("trace_call", json!([{"to": to, "maxFeePerGas": "-0x1"}, ["trace"]]), "transaction"),
        (
            "eth_simulateV1",
            json!([{"blockStateCalls": [{"blockOverrides": {"time": "-0x1"}}]}, "latest"]),
            "payload",
        ),
    ];
    for (method, params, arg) in cases {
        let err = node.call(method, params.clone()).unwrap_err();
        assert_eq!(err["code"], json!(-32602), "{method} {params}: {err}");
        let msg = err["message"].as_str().unwrap();
        assert!(msg.contains("\"-0x1\" is negative"), "{method} {params}: {msg}");
        assert!(msg.contains(arg), "{method} {params}: {msg} should name {arg}");
        assert!(!msg.contains("without 0x prefix"), "{method} {params}: {msg}");
    }
}
