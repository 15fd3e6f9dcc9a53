//! Import progress: an indicatif bar on a terminal, periodic log lines otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often a log line is written when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(5);

pub(super) struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_log: Instant,
    blocks: u64,
    txs: u64,
    gas: u64,
}

impl Progress {
    pub(super) fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let now = Instant::now();
        Self { bar, started: now, last_log: now, blocks: 0, txs: 0, gas: 0 }
    }

    pub(super) fn block(&mut self, number: u64, txs: u64, gas: u64) {
        self.blocks += 1;
        self.txs += txs;
        self.gas += gas;
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let mgas = self.gas as f64 / 1e6 / secs;
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "block #{number} | {} blocks, {} txs | {mgas:.2} Mgas/s",
                self.blocks, self.txs
            ));
        } else if self.last_log.elapsed() >= LOG_EVERY {
            self.last_log = Instant::now();
            tracing::info!(target: "import", number, blocks = self.blocks, txs = self.txs, mgas_per_s = format!("{mgas:.2}"), "importing");
        }
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
