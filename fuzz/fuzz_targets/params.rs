//! Each method's parameter parsing: the input is `method\nparams` (params as JSON text, any
//! bytes); the answer is a result or an error that is not an internal one (-32603) or a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        let seeds = loupe_fuzz::example_calls()
            .into_iter()
            .map(|(m, p)| format!("{m}\n{p}").into_bytes());
        loupe_fuzz::write_seeds(seeds);
    },
    |data: &[u8]| {
        let text = String::from_utf8_lossy(data);
        let (method, params) = text.split_once('\n').unwrap_or((&text, "[]"));
        let method = serde_json::Value::String(method.to_string());
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":{method},"params":{params}}}"#);
        let (status, out) = loupe_fuzz::dev_node().post(body.into_bytes());
        assert_ne!(status, 500, "HTTP 500: {}", String::from_utf8_lossy(&out));
        let Ok(answer) = serde_json::from_slice::<serde_json::Value>(&out) else {
            // Invalid JSON params make the whole request invalid: 400 with a JSON-RPC error
            // or an empty answer are both fine; anything else is not.
            assert!(status == 400 || out.is_empty(), "{status}: {}", String::from_utf8_lossy(&out));
            return;
        };
        assert_ne!(answer["error"]["code"], -32603, "internal error for {method}: {answer}");
    }
);
