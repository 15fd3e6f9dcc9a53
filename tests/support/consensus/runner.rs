//! Runs a suite's tests on all cores, one test at a time on each, and prints the counts, the
//! skips with their reasons, the refusals beside the suite's exceptions, and the failures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use super::genesis::Unrunnable;
use super::rules::Refusal;

/// What one test gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every block as the suite has it, the head its `lastblockhash`.
    Pass,
    /// Not run, for this reason.
    Skip(&'static str),
    /// Why it failed.
    Fail(String),
    /// An Amsterdam test the suite's version of the fork takes and revm's refuses, listed under
    /// the difference of the two versions (`under`), with what its block gave (`reason`).
    Differs {
        /// The difference it is listed under.
        under: &'static str,
        /// What the block gave.
        reason: String,
    },
}

impl From<Unrunnable> for Outcome {
    fn from(u: Unrunnable) -> Self {
        match u {
            Unrunnable::Skip(why) => Self::Skip(why),
            Unrunnable::Fail(e) => Self::Fail(e),
        }
    }
}

/// The counts of a suite's run.
#[derive(Default)]
pub struct Tally {
    /// Tests passed.
    pub pass: usize,
    /// The slowest tests: (seconds, name).
    pub slowest: Vec<(f64, String)>,
    /// Skipped tests, by reason.
    pub skipped: BTreeMap<&'static str, Vec<String>>,
    /// Failed tests (file :: name) and why.
    pub failed: Vec<(String, String)>,
    /// Every invalid block refused: (test, the suite's `expectException`, loupe's reason).
    pub refused: Vec<(String, String, String)>,
    /// Amsterdam tests whose versions of the fork differ, by the difference.
    pub differ: BTreeMap<&'static str, Vec<(String, String)>>,
}

/// A folder for a test's datadir: `/dev/shm` where there is one (the tests write many small
/// databases), else the temporary directory.
pub fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() }
}

/// Runs `run` on every test of `tests` but those whose names contain one of `left_out`, on all
/// cores; `run` gets the test's name and JSON and records each invalid block's refusal. Prints
/// the counts and lists skips, refusals and failures.
pub fn run_tests<F>(suite: &str, tests: &[(String, PathBuf)], left_out: &[&str], run: F) -> Tally
where
    F: Fn(&str, &Value, &mut Vec<Refusal>) -> Outcome + Sync,
{
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut cached: Option<(PathBuf, Value)> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((name, file)) = tests.get(i) else { break };
                    if cached.as_ref().is_none_or(|(f, _)| f != file) {
                        let v = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
                        cached = Some((file.clone(), v));
                    }
                    let test = &cached.as_ref().unwrap().1[name];
                    if left_out.iter().any(|p| name.contains(p)) {
                        let mut t = tally.lock().unwrap();
                        t.skipped
                            .entry("slow in a debug build: run by the full suite")
                            .or_default()
                            .push(name.clone());
                        continue;
                    }
                    let began = std::time::Instant::now();
                    let mut refusals = Vec::new();
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run(name, test, &mut refusals)
                    }))
                    .unwrap_or_else(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        Outcome::Fail(format!("panicked: {msg}"))
                    });
                    let mut t = tally.lock().unwrap();
                    t.refused.extend(refusals.into_iter().map(|(e, r)| (name.clone(), e, r)));
                    t.slowest.push((began.elapsed().as_secs_f64(), name.clone()));
                    t.slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
                    t.slowest.truncate(40);
                    match outcome {
                        Outcome::Pass => t.pass += 1,
                        Outcome::Skip(why) => t.skipped.entry(why).or_default().push(name.clone()),
                        Outcome::Differs { under, reason } => {
                            t.differ.entry(under).or_default().push((name.clone(), reason))
                        }
                        Outcome::Fail(e) => {
                            t.failed.push((format!("{} :: {name}", file.display()), e))
                        }
                    }
                }
            });
        }
    });
    let t = tally.into_inner().unwrap();
    let skipped: usize = t.skipped.values().map(Vec::len).sum();
    let differ: usize = t.differ.values().map(Vec::len).sum();
    println!(
        "{suite}: {} tests: {} passed, {} failed, {skipped} skipped, {differ} listed under a \
         difference of the fork's versions, in {:.1}s",
        tests.len(),
        t.pass,
        t.failed.len(),
        started.elapsed().as_secs_f64()
    );
    for (why, names) in &t.differ {
        println!("  listed ({why}): {}", names.len());
        for (n, reason) in names {
            println!("    {n}: {reason}");
        }
    }
    for (secs, name) in &t.slowest {
        println!("  slow: {secs:.2}s {name}");
    }
    for (why, names) in &t.skipped {
        println!("  skipped ({why}): {}", names.len());
        for n in names {
            println!("    {n}");
        }
    }
    if !t.refused.is_empty() {
        println!(
            "  invalid blocks refused: {} (the suite's exception, then loupe's reason)",
            t.refused.len()
        );
        for (name, expected, reason) in &t.refused {
            println!("    {name}\n      expected {expected}\n      loupe:   {reason}");
        }
    }
    for (name, e) in &t.failed {
        println!("  FAILED {name}: {e}");
    }
    t
}
