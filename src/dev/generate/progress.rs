//! Generator progress, shown the way import shows its own: an indicatif line on a terminal,
//! periodic log lines otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often a log line is written when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Progress of one generator run.
#[derive(Debug)]
pub(crate) struct Progress {
    quiet: bool,
    bar: Option<ProgressBar>,
    started: Instant,
    last_log: Instant,
    blocks: u64,
    txs: u64,
    gas: u64,
}

impl Progress {
    /// A bar on a terminal, log lines otherwise; nothing at all when `quiet`.
    pub(crate) fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let now = Instant::now();
        Self { quiet, bar, started: now, last_log: now, blocks: 0, txs: 0, gas: 0 }
    }

    fn log_due(&mut self) -> bool {
        if !self.quiet && self.last_log.elapsed() >= LOG_EVERY {
            self.last_log = Instant::now();
            true
        } else {
            false
        }
    }

    /// `done` of `total` genesis accounts written.
    pub(crate) fn accounts(&mut self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("genesis.json: {done}/{total} accounts"));
        } else if self.log_due() {
            tracing::info!(target: "generate", done, total, "writing genesis accounts");
        }
    }

    /// `done` of `total` storage slots of the big contract written.
    pub(crate) fn slots(&mut self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("genesis.json: {done}/{total} big-contract slots"));
        } else if self.log_due() {
            tracing::info!(target: "generate", done, total, "writing the big contract's slots");
        }
    }

    /// A phase that has no count (initialising the work datadir, writing chain.rlp).
    pub(crate) fn phase(&mut self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
        } else if !self.quiet {
            tracing::info!(target: "generate", "{what}");
        }
    }

    /// Block `number` of `total` built, with `txs` transactions using `gas`.
    pub(crate) fn block(&mut self, number: u64, total: u64, txs: u64, gas: u64) {
        if self.blocks == 0 {
            self.started = Instant::now();
        }
        self.blocks += 1;
        self.txs += txs;
        self.gas += gas;
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let mgas = self.gas as f64 / 1e6 / secs;
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "block #{number}/{total} | {} txs | {mgas:.2} Mgas/s",
                self.txs
            ));
        } else if self.log_due() {
            tracing::info!(target: "generate", number, total, txs = self.txs, mgas_per_s = format!("{mgas:.2}"), "building");
        }
    }

    /// Clears the bar.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
