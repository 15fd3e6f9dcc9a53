//! Progress of long runs: an indicatif spinner on a terminal, periodic log lines otherwise.
//! [`StatusLine`] is shared with the chain generator; [`Progress`] counts blocks for import
//! and for the follower's catch-up.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often a log line is written when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// One status line: a spinner on a terminal, else a log line at most every 5 s.
#[derive(Debug)]
pub struct StatusLine {
    bar: Option<ProgressBar>,
    last_log: Instant,
    quiet: bool,
}

impl StatusLine {
    /// A spinner on a terminal, log lines otherwise; nothing at all when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self { bar, last_log: Instant::now(), quiet }
    }

    /// Shows `message` on the spinner. Without one, returns whether a log line is due (the
    /// caller writes it, with its own target and fields).
    pub fn show(&mut self, message: impl FnOnce() -> String) -> bool {
        if let Some(bar) = &self.bar {
            bar.set_message(message());
            false
        } else if !self.quiet && self.last_log.elapsed() >= LOG_EVERY {
            self.last_log = Instant::now();
            true
        } else {
            false
        }
    }

    /// Shows `message` now, on the spinner or as a log line (a phase change).
    pub fn always(&mut self, message: &str) -> bool {
        match &self.bar {
            Some(bar) => {
                bar.set_message(message.to_string());
                false
            }
            None => !self.quiet,
        }
    }

    /// Clears the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Blocks, transactions and gas imported so far, shown as a status line.
#[derive(Debug)]
pub struct Progress {
    label: &'static str,
    line: StatusLine,
    started: Instant,
    blocks: u64,
    txs: u64,
    gas: u64,
}

impl Progress {
    /// A counter whose lines say `label` (`importing`, `following`).
    pub fn new(label: &'static str) -> Self {
        let line = StatusLine::new(false);
        Self { label, line, started: Instant::now(), blocks: 0, txs: 0, gas: 0 }
    }

    /// Counts one imported block.
    pub fn block(&mut self, number: u64, txs: u64, gas: u64) {
        self.blocks += 1;
        self.txs += txs;
        self.gas += gas;
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let mgas = self.gas as f64 / 1e6 / secs;
        let (blocks, total_txs, label) = (self.blocks, self.txs, self.label);
        if self.line.show(|| {
            format!("{label} block #{number} | {blocks} blocks, {total_txs} txs | {mgas:.2} Mgas/s")
        }) {
            tracing::info!(target: "import", number, blocks, txs = total_txs, mgas_per_s = format!("{mgas:.2}"), "{label}");
        }
    }

    /// Clears the status line.
    pub fn finish(&self) {
        self.line.finish();
    }
}
