//! The HTTP request path: any bytes POSTed to `/` get an answer: never a panic, never HTTP 500,
//! and a 200 always carries JSON (or nothing, for notifications).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(
    init: {
        let calls = loupe_fuzz::example_calls();
        let mut seeds: Vec<Vec<u8>> = calls
            .iter()
            .map(|(m, p)| json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": p}).to_string().into_bytes())
            .collect();
        let batch: Vec<_> = calls
            .iter()
            .take(8)
            .enumerate()
            .map(|(i, (m, p))| json!({"jsonrpc": "2.0", "id": i, "method": m, "params": p}))
            .collect();
        seeds.push(serde_json::to_vec(&batch).unwrap_or_default());
        seeds.push(br#"{"jsonrpc":"2.0","method":"eth_chainId"}"#.to_vec());
        seeds.push(br#"[]"#.to_vec());
        seeds.push(br#"{"jsonrpc":"2.0","id":"x","method":"eth_getBalance","params":{"a":1}}"#.to_vec());
        loupe_fuzz::write_seeds(seeds);
    },
    |data: &[u8]| {
        let node = loupe_fuzz::dev_node();
        let (status, body) = node.post(data.to_vec());
        assert_ne!(status, 500, "HTTP 500: {}", String::from_utf8_lossy(&body));
        if status == 200 && !body.is_empty() {
            let parsed = serde_json::from_slice::<serde_json::Value>(&body);
            assert!(parsed.is_ok(), "200 without JSON: {}", String::from_utf8_lossy(&body));
        }
    }
);
