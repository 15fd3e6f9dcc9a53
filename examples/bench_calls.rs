//! Prints the benchmark `trace_call` params (one JSON array per line: name, params) for
//! `benches/http.sh`, so the HTTP load and the criterion floor measure the same calls.
//! Usage: `cargo run --example bench_calls -- BLOCK [FUNDED_SENDER]`.

#[path = "../benches/common/calls.rs"]
mod calls;

fn main() {
    let block = std::env::args().nth(1).unwrap_or_else(|| "latest".into());
    let funded = std::env::args().nth(2).unwrap_or_else(|| calls::FUNDED.into());
    for (name, params) in calls::params_from(&block, &funded) {
        println!("{name}\t{params}");
    }
}
