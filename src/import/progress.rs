//! Progress of long runs: an indicatif spinner on a terminal, periodic log lines otherwise.
//! [`StatusLine`] is shared with the chain generator; [`Progress`] is import's own counter.

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

pub(super) struct Progress {
    line: StatusLine,
    started: Instant,
    blocks: u64,
    txs: u64,
    gas: u64,
}

impl Progress {
    pub(super) fn new() -> Self {
        Self { line: StatusLine::new(false), started: Instant::now(), blocks: 0, txs: 0, gas: 0 }
    }

    pub(super) fn block(&mut self, number: u64, txs: u64, gas: u64) {
        self.blocks += 1;
        self.txs += txs;
        self.gas += gas;
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let mgas = self.gas as f64 / 1e6 / secs;
        let (blocks, total_txs) = (self.blocks, self.txs);
        if self.line.show(|| {
            format!("block #{number} | {blocks} blocks, {total_txs} txs | {mgas:.2} Mgas/s")
        }) {
            tracing::info!(target: "import", number, blocks, txs = total_txs, mgas_per_s = format!("{mgas:.2}"), "importing");
        }
    }

    pub(super) fn finish(&self) {
        self.line.finish();
    }
}
