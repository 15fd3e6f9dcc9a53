//! The `loupe` binary: parse the command line and run it.

use std::process::ExitCode;

/// mimalloc: the request paths allocate a lot of small, short-lived objects (BENCHMARKS.md).
/// The `system-allocator` feature leaves it out, so heap profilers that wrap malloc
/// (heaptrack) can see every allocation.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match loupe::cli::Cli::parse_with_config() {
        Ok(cli) => cli,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    loupe::cli::init_logging(&cli.log);
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
