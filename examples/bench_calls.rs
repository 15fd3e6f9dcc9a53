//! Prints the benchmark `trace_call` params (one JSON array per line: name, params) for
//! `benches/http.sh`, so the HTTP load and the criterion floor measure the same calls.
//! Usage: `cargo run --example bench_calls -- BLOCK`.

#[path = "../benches/common/calls.rs"]
mod calls;

fn main() {
    let block = std::env::args().nth(1).unwrap_or_else(|| "latest".into());
    for (name, params) in calls::params(&block) {
        println!("{name}\t{params}");
    }
}
