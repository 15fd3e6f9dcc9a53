//! `loupe generate`: a deterministic, seeded generator of a mainnet-shaped chain — a
//! `genesis.json` with any number of funded accounts (written streaming) and a `chain.rlp` of
//! blocks filled near the gas limit with a mix of transfers, ERC-20 transfers, swaps,
//! creations (some self-destructing), storage set and cleared, and all five transaction types.
//! Optionally (`--contract-slots M`) the genesis also holds one big contract with `M` storage
//! slots, which about 15% of the transactions update, clear and add to.
//!
//! Blocks are built on the dev path ([`BlockBuilder`]) in a work datadir, so each is executed
//! and stored through import, which verifies every root; the stored blocks are then written out
//! in the import format. The same seed and flags always give byte-identical files.
//!
//! With a fixed gas limit, EIP-1559 raises the base fee by up to 12.5% after every full block,
//! so full blocks alone would push it past any balance (and past `u64`) within a few hundred
//! blocks. Once the base fee is above [`MAX_BASE_FEE`], the generator builds *light* blocks
//! (a tenth of the gas limit) until it falls back below: the chain then alternates full and
//! light blocks, averaging about half full, as mainnet does.

pub mod contracts;
mod export;
pub mod genesis;
mod mix;
mod progress;
mod rng;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use alloy_consensus::Transaction;
use alloy_eips::Typed2718;
use alloy_eips::eip1559::BaseFeeParams;
use alloy_primitives::{Address, B256};

pub use contracts::{
    BIG, BIG_RUNTIME, COUNTER, POOL, SCRATCH, SELFDESTRUCT_INIT, TOKEN, TRANSFER_TOPIC,
    fill_selector, swap_selector, swap_topic, token_balance_slot,
};
pub use export::write_blocks;
pub use genesis::{
    GENERATED_CHAIN_ID, GENESIS_BASE_FEE, SENDERS, big_slot, big_slot_value, funded_account,
    funded_balance, sender_key, sender_signers,
};
pub use mix::Action;

use super::{BLOCK_TIME, BlockBuilder, DevError};
use crate::import::init_genesis_file;
use crate::storage::Database;
use genesis::{GenesisPlan, write_genesis};
use mix::{Fees, Mix};
use progress::GeneratorProgress;

/// Default block gas limit.
pub const DEFAULT_GAS_LIMIT: u64 = 30_000_000;

/// Smallest gas limit accepted: a light block (a tenth of it) must still hold the largest
/// transaction of the mix.
pub const MIN_GAS_LIMIT: u64 = 5_000_000;

/// Base fee (wei) above which the next block is built light (see the module docs): 100 gwei.
pub const MAX_BASE_FEE: u64 = 100_000_000_000;

/// The work datadir, inside the output directory.
pub const WORK_DIR: &str = ".work";

/// Blocks between the work datadir's durable commits. The blocks are committed without fsync;
/// a durable commit lets the database reuse the pages those commits freed and removes the
/// segment files merges replaced, which otherwise all stayed until the end (at block 7,300 of
/// 10,000 over 1M accounts, the work datadir held 4.6 GB).
pub const DURABLE_EVERY: u64 = 512;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateConfig {
    /// Output directory: `genesis.json` and `chain.rlp` are written there.
    pub out: PathBuf,
    /// Funded genesis accounts (besides the senders and contracts).
    pub accounts: u64,
    /// Storage slots of the big contract ([`BIG`]) at genesis; 0: no big contract, and the
    /// chain is exactly what it is without this option.
    pub contract_slots: u64,
    /// Blocks to build after genesis.
    pub blocks: u64,
    /// The seed everything is derived from.
    pub seed: u64,
    /// Most transactions per block (none: as many as fit the gas limit).
    pub txs_per_block: Option<usize>,
    /// Block gas limit.
    pub gas_limit: u64,
    /// Keep the work datadir (`OUT/.work`, a complete loupe datadir) instead of removing it.
    pub keep_datadir: bool,
    /// No progress output (bar or log lines).
    pub quiet: bool,
}

impl GenerateConfig {
    /// A configuration with the defaults (seed 1, 30M gas, blocks as full as fit, no big
    /// contract).
    pub fn new(out: impl Into<PathBuf>, accounts: u64, blocks: u64) -> Self {
        Self {
            out: out.into(),
            accounts,
            contract_slots: 0,
            blocks,
            seed: 1,
            txs_per_block: None,
            gas_limit: DEFAULT_GAS_LIMIT,
            keep_datadir: false,
            quiet: false,
        }
    }

    fn validate(&self) -> Result<(), DevError> {
        if self.blocks == 0 {
            return Err(DevError::Config("--blocks must be at least 1".into()));
        }
        if !(MIN_GAS_LIMIT..=i64::MAX as u64).contains(&self.gas_limit) {
            return Err(DevError::Config(format!(
                "--gas-limit must be between {MIN_GAS_LIMIT} and {}",
                i64::MAX
            )));
        }
        if self.txs_per_block == Some(0) {
            return Err(DevError::Config("--txs-per-block must be at least 1".into()));
        }
        Ok(())
    }
}

/// Per-action totals of a run.
#[derive(Debug, Clone, Copy)]
pub struct ActionStats {
    /// The action.
    pub action: Action,
    /// Transactions.
    pub count: u64,
    /// Gas they used.
    pub gas_used: u64,
    /// Smallest unused gas (limit − used) of any of them: how tight the gas limits are.
    pub min_headroom: u64,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct GenerateSummary {
    /// Hash of the genesis block.
    pub genesis_hash: B256,
    /// Hash of the last block.
    pub head_hash: B256,
    /// Blocks built.
    pub blocks: u64,
    /// Of those, light blocks (built while the base fee was above [`MAX_BASE_FEE`]).
    pub light_blocks: u64,
    /// Transactions in all blocks.
    pub transactions: u64,
    /// Gas used by all blocks.
    pub gas_used: u64,
    /// Per action, in [`Action::ALL`] order.
    pub actions: Vec<ActionStats>,
    /// Transactions per type (0 legacy, 1 access list, 2 EIP-1559, 3 blob, 4 set-code).
    pub tx_types: [u64; 5],
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl std::fmt::Display for GenerateSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        writeln!(
            f,
            "generated {} blocks ({} light), {} txs, {:.1} Mgas in {secs:.1}s; genesis {}, head {}",
            self.blocks,
            self.light_blocks,
            self.transactions,
            self.gas_used as f64 / 1e6,
            self.genesis_hash,
            self.head_hash
        )?;
        let [legacy, access, eip1559, blob, setcode] = self.tx_types;
        writeln!(
            f,
            "  types: {legacy} legacy, {access} access-list, {eip1559} EIP-1559, {blob} blob, \
             {setcode} set-code"
        )?;
        for a in &self.actions {
            if a.action == Action::BigStorageWrite && a.count == 0 {
                continue; // no big contract
            }
            let avg = a.gas_used.checked_div(a.count).unwrap_or(0);
            writeln!(
                f,
                "  {:<22} {:>9} txs, avg {avg:>7} gas, least unused {:>6}",
                a.action.name(),
                a.count,
                a.min_headroom
            )?;
        }
        Ok(())
    }
}

/// Writes `path` through a temporary file renamed into place once complete.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<std::fs::File>) -> Result<(), DevError>,
) -> Result<(), DevError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let file = std::fs::File::create(&tmp)
        .map_err(|e| DevError::io(format!("cannot create {}", tmp.display()), e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    write(&mut out)?;
    out.flush().map_err(|e| DevError::io(format!("writing {}", tmp.display()), e))?;
    drop(out);
    std::fs::rename(&tmp, path)
        .map_err(|e| DevError::io(format!("cannot rename {} into place", tmp.display()), e))
}

/// Generates `OUT/genesis.json` and `OUT/chain.rlp` as `config` says.
pub fn generate(config: &GenerateConfig) -> Result<GenerateSummary, DevError> {
    config.validate()?;
    let started = Instant::now();
    let out = &config.out;
    std::fs::create_dir_all(out)
        .map_err(|e| DevError::io(format!("cannot create {}", out.display()), e))?;
    let signers = sender_signers(config.seed)?;
    let senders: Vec<Address> = signers.iter().map(|s| s.address()).collect();
    let mut progress = GeneratorProgress::new(config.quiet);

    // 1. genesis.json, streaming.
    let genesis_path = out.join("genesis.json");
    let plan = GenesisPlan {
        seed: config.seed,
        accounts: config.accounts,
        contract_slots: config.contract_slots,
        gas_limit: config.gas_limit,
        senders: &senders,
    };
    write_atomically(&genesis_path, |w| write_genesis(w, &plan, &mut progress))?;

    // 2. A work datadir initialised with it.
    let work = out.join(WORK_DIR);
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .map_err(|e| DevError::io(format!("cannot remove {}", work.display()), e))?;
    }
    progress.phase("initialising the work datadir");
    let db = Database::open(&work)?;
    // Streamed: any number of accounts initialises in bounded memory.
    let (spec, _) = init_genesis_file(&db, &genesis_path)?;

    // 3. The blocks.
    let builder = BlockBuilder::new(&db, &spec).non_durable();
    let mut mix = Mix::new(config.seed, config.accounts, config.contract_slots, signers)?;
    let mut parent = spec.genesis_header().clone();
    let mut summary = GenerateSummary {
        genesis_hash: spec.genesis_hash(),
        head_hash: spec.genesis_hash(),
        blocks: 0,
        light_blocks: 0,
        transactions: 0,
        gas_used: 0,
        actions: Action::ALL
            .iter()
            .map(|&action| ActionStats { action, count: 0, gas_used: 0, min_headroom: u64::MAX })
            .collect(),
        tx_types: [0; 5],
        elapsed: Duration::ZERO,
    };
    let max_txs = config.txs_per_block.unwrap_or(usize::MAX);
    for number in 1..=config.blocks {
        let base_fee = parent
            .next_block_base_fee(BaseFeeParams::ethereum())
            .ok_or_else(|| DevError::Config("the genesis has no base fee".into()))?;
        let timestamp = parent.timestamp + BLOCK_TIME;
        let blob_fee =
            spec.blob_params_at(timestamp).and_then(|p| parent.next_block_blob_fee(p)).unwrap_or(1);
        let light = base_fee > MAX_BASE_FEE;
        let budget = if light { config.gas_limit / 10 } else { config.gas_limit };
        let planned = mix.block(Fees { base_fee, blob_fee }, budget, max_txs)?;
        let senders: Vec<Address> = planned.iter().map(|p| p.sender).collect();
        let limits: Vec<u64> = planned.iter().map(|p| p.tx.gas_limit()).collect();
        let meta: Vec<(Action, bool)> = planned.iter().map(|p| (p.action, p.succeeds)).collect();
        let txs = planned.into_iter().map(|p| p.tx).collect::<Vec<_>>();
        for tx in &txs {
            if let Some(n) = summary.tx_types.get_mut(usize::from(tx.ty())) {
                *n += 1;
            }
        }
        let block = builder.build(txs, &senders)?;

        // Every transaction must have ended as meant.
        let receipts = db.begin_read()?.receipts(number)?.ok_or(DevError::MissingBlock(number))?;
        let mut cumulative = 0;
        for (index, (receipt, ((action, succeeds), limit))) in
            receipts.iter().zip(meta.iter().zip(&limits)).enumerate()
        {
            if receipt.status() != *succeeds {
                return Err(DevError::UnexpectedOutcome {
                    block: number,
                    index,
                    kind: action.name(),
                    expected_success: *succeeds,
                });
            }
            let used = receipt.cumulative_gas_used() - cumulative;
            cumulative = receipt.cumulative_gas_used();
            let stats = &mut summary.actions[action.index()];
            stats.count += 1;
            stats.gas_used += used;
            stats.min_headroom = stats.min_headroom.min(limit.saturating_sub(used));
        }
        summary.blocks += 1;
        summary.light_blocks += u64::from(light);
        summary.transactions += meta.len() as u64;
        summary.gas_used += block.header.gas_used;
        progress.block(number, config.blocks, meta.len() as u64, block.header.gas_used);
        parent = block.header;
        if number.is_multiple_of(DURABLE_EVERY) {
            db.make_durable()?;
        }
    }
    summary.head_hash = parent.hash_slow();

    // 4. chain.rlp, from the stored blocks.
    progress.phase("writing chain.rlp");
    write_atomically(&out.join("chain.rlp"), |w| write_blocks(&db, 1, config.blocks, w).map(drop))?;
    drop(db);
    if !config.keep_datadir {
        std::fs::remove_dir_all(&work)
            .map_err(|e| DevError::io(format!("cannot remove {}", work.display()), e))?;
    }
    progress.finish();
    for s in &mut summary.actions {
        if s.count == 0 {
            s.min_headroom = 0;
        }
    }
    summary.elapsed = started.elapsed();
    Ok(summary)
}
