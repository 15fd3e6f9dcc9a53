//! Fuzz target `http_request`: seeds are every method's example call as a request, a batch and
//! a few odd forms; `loupe_fuzz::checks::http_request` says what must hold.
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
    |data: &[u8]| loupe_fuzz::checks::http_request(data)
);
