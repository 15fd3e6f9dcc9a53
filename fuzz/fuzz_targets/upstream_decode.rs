//! Fuzz target `upstream_decode`: seeds are a mode byte and valid upstream answers (ids as
//! `"$id0"`…); `loupe_fuzz::checks::upstream_decode` says what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

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
    |data: &[u8]| loupe_fuzz::checks::upstream_decode(data)
);
