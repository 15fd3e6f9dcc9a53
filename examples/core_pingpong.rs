//! How long one cache line takes to go from CPU 0 to CPU 1 and back, for the benchmark scripts.
//!
//! On the VMs these benchmarks run on, the host places the two vCPUs either on one physical
//! core's siblings (about 50 ns a round trip) or far apart (about 400 ns), and moves them
//! minutes apart. A server under load hands requests, sockets and wake-ups between its cores, so
//! its CPU per call moves with the placement (BENCHMARKS.md, issue 42, session 44); the scripts
//! print this figure beside theirs. Hand-written: a spin on one atomic is the whole measure.
//! Usage: `cargo run --release --example core_pingpong [ROUND_TRIPS]` (prints the median of
//! five runs, in ns).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Pins the calling thread to `cpu`; false if the kernel refused (fewer CPUs).
fn pin(cpu: usize) -> bool {
    // SAFETY: `set` is a zeroed, properly sized cpu_set_t on this thread's stack, and
    // sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// ns per round trip of `n` round trips between CPUs 0 and 1; `None` without two CPUs.
fn round_trip(n: u64) -> Option<f64> {
    if !pin(0) {
        return None;
    }
    let line = Arc::new(AtomicU64::new(0));
    let other = line.clone();
    let echo = std::thread::spawn(move || {
        if !pin(1) {
            return false;
        }
        // Ready: the main thread starts at 1.
        other.store(1, Ordering::Release);
        for i in (2..2 * n + 1).step_by(2) {
            while other.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            other.store(i + 1, Ordering::Release);
        }
        true
    });
    while line.load(Ordering::Acquire) != 1 {
        if echo.is_finished() {
            return None;
        }
        std::hint::spin_loop();
    }
    let start = Instant::now();
    for i in (1..2 * n).step_by(2) {
        line.store(i + 1, Ordering::Release);
        while line.load(Ordering::Acquire) != i + 2 {
            std::hint::spin_loop();
        }
    }
    let took = start.elapsed();
    echo.join().ok()?.then(|| took.as_nanos() as f64 / n as f64)
}

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let mut runs: Vec<f64> = Vec::new();
    for _ in 0..5 {
        match round_trip(n) {
            Some(ns) => runs.push(ns),
            None => {
                println!("n/a (fewer than two CPUs)");
                return;
            }
        }
    }
    runs.sort_by(f64::total_cmp);
    println!("{:.0}", runs[2]);
}
