//! Generator progress, shown the way import shows its own: an indicatif line on a terminal,
//! periodic log lines otherwise.

use std::time::Instant;

use crate::import::StatusLine;

/// Progress of one generator run.
#[derive(Debug)]
pub(crate) struct GeneratorProgress {
    line: StatusLine,
    started: Instant,
    blocks: u64,
    txs: u64,
    gas: u64,
}

impl GeneratorProgress {
    /// A spinner on a terminal, log lines otherwise; nothing at all when `quiet`.
    pub(crate) fn new(quiet: bool) -> Self {
        Self { line: StatusLine::new(quiet), started: Instant::now(), blocks: 0, txs: 0, gas: 0 }
    }

    /// `done` of `total` genesis accounts written.
    pub(crate) fn accounts(&mut self, done: u64, total: u64) {
        if self.line.show(|| format!("genesis.json: {done}/{total} accounts")) {
            tracing::info!(target: "generate", done, total, "writing genesis accounts");
        }
    }

    /// `done` of `total` storage slots of the big contract written.
    pub(crate) fn slots(&mut self, done: u64, total: u64) {
        if self.line.show(|| format!("genesis.json: {done}/{total} big-contract slots")) {
            tracing::info!(target: "generate", done, total, "writing the big contract's slots");
        }
    }

    /// A phase that has no count (initialising the work datadir, writing chain.rlp).
    pub(crate) fn phase(&mut self, what: &str) {
        if self.line.always(what) {
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
        let txs = self.txs;
        if self.line.show(|| format!("block #{number}/{total} | {txs} txs | {mgas:.2} Mgas/s")) {
            tracing::info!(target: "generate", number, total, txs, mgas_per_s = format!("{mgas:.2}"), "building");
        }
    }

    /// Clears the spinner.
    pub(crate) fn finish(&self) {
        self.line.finish();
    }
}
