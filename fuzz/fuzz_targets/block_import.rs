//! Fuzz target `block_import`: seeds are the dev chain's blocks as RLP;
//! `loupe_fuzz::checks::block_import` says what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;

use loupe_fuzz::checks::HEAD;

fuzz_target!(
    init: {
        let node = loupe_fuzz::dev_node();
        let _ = loupe_fuzz::checks::bases();
        let seeds = (1..=HEAD).map(|n| {
            let raw = node.call("debug_getRawBlock", json!([format!("{n:#x}")]));
            let hex = raw.as_str().unwrap_or_default().trim_start_matches("0x").to_string();
            alloy_primitives::hex::decode(hex).unwrap_or_default()
        });
        loupe_fuzz::write_seeds(seeds);
    },
    |data: &[u8]| loupe_fuzz::checks::block_import(data)
);
