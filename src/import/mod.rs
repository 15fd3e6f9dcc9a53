//! Import: turn a genesis file and RLP chain files or era1 history files into verified, stored
//! blocks.
//!
//! Flow per block (see `docs/design.md`): decode → order and parent checks → static roots
//! (transactions, ommers, withdrawals) → sender recovery → execution on the stored parent state
//! → state written into one write transaction with history → post-execution checks (gas, receipts
//! root, bloom, requests, blob gas, state root) → commit. A failed check drops the transaction,
//! so nothing of the bad block is stored and every earlier block stays. A file import decodes,
//! hashes and recovers senders on one thread and executes on another, each a few blocks ahead of
//! the thread that verifies roots and stores (`ahead`). An era1 file is checked whole on the
//! reading thread before any of its blocks is handed on (`era1`).

mod ahead;
mod anchor;
mod block;
pub mod era1;
mod error;
mod genesis;
mod header;
mod item;
mod progress;
mod source;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use anchor::{AnchorAccount, init_anchored, init_anchored_db};
pub use block::{
    BlockStatus, TrustedRoots, import_block, import_block_on_writer, import_block_trusted_root,
    import_block_uncommitted,
};
use block::{Prepared, Senders};
pub use error::{ImportError, Rule};
pub use genesis::{
    GenesisSource, InitOptions, init_genesis, init_genesis_file, init_with, load_spec,
};
pub use header::{
    DAO_EXTRA_DATA, MAX_GAS_LIMIT, MAX_RLP_BLOCK_SIZE, has_sidecar, without_sidecars,
};
use item::{FileItem, Item, Next};
pub use source::{BlockReader, SourceError};

use crate::chain::ChainSpec;
use crate::storage::Database;
pub use progress::{Progress, StatusLine};

/// Totals of one import run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ImportSummary {
    /// Blocks executed and stored.
    pub imported: u64,
    /// Blocks already stored with the same hash, skipped.
    pub skipped: u64,
    /// Of the imported blocks, those executed on the execution thread ahead of the writer
    /// (the others were executed inline: pre-Byzantium blocks, and blocks after a gap in what
    /// that thread could see).
    pub executed_ahead: u64,
    /// Transactions in the imported blocks.
    pub transactions: u64,
    /// Gas used by the imported blocks.
    pub gas: u64,
    /// Head after the run.
    pub head: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// The run was stopped before the end of its files ([`ImportOptions::stop`]).
    pub interrupted: bool,
    /// What the trie-history stage did after the blocks were stored
    /// ([`ImportOptions::trie_history`]), and how long it took.
    pub staged: crate::trie::stage::StageSummary,
    /// Wall time of the stage after the blocks were stored (included in [`Self::elapsed`]).
    pub stage_elapsed: Duration,
    /// Blocks the stage built while the import was still storing blocks (counted in
    /// [`Self::staged`] too), on the core the import leaves idle.
    pub staged_beside: u64,
}

impl std::fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.interrupted {
            write!(f, "stopped by a signal after the last whole block: ")?;
        }
        if self.imported == 0 {
            write!(
                f,
                "nothing to import: all {} blocks already stored (head #{})",
                self.skipped, self.head
            )?;
            return self.fmt_stage(f);
        }
        // The blocks' own time: the stage after them is reported apart.
        let secs = self.elapsed.saturating_sub(self.stage_elapsed).as_secs_f64().max(1e-9);
        write!(
            f,
            "imported {} blocks ({} txs, {:.3} Mgas) in {:.2}s — {:.0} blocks/s, {:.0} txs/s, \
             {:.2} Mgas/s; skipped {} already stored; head #{}",
            self.imported,
            self.transactions,
            self.gas as f64 / 1e6,
            secs,
            self.imported as f64 / secs,
            self.transactions as f64 / secs,
            self.gas as f64 / 1e6 / secs,
            self.skipped,
            self.head
        )?;
        self.fmt_stage(f)
    }
}

impl ImportSummary {
    /// The trie-history stage's line, when it built anything.
    fn fmt_stage(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.staged.blocks > 0 {
            write!(
                f,
                "\ntrie history: built per block for {} blocks ({} ranges; {} beside the import, then {:.2}s after it), every block's state root checked; per block to #{}",
                self.staged.blocks,
                self.staged.ranges,
                self.staged_beside,
                self.stage_elapsed.as_secs_f64(),
                self.staged.staged_to.unwrap_or(0)
            )?;
        }
        Ok(())
    }
}

/// How an import commits, and when it stops early.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Checked before each block: once set, the import stops there (the blocks before it are
    /// committed, durably) and reports itself interrupted. `loupe import` sets it on SIGTERM
    /// and SIGINT.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Make every Nth block's commit durable (fsync); the ones between are committed without
    /// fsync and become durable with the next durable one. After a crash the head is the last
    /// durable block: never a half-stored one. 1 = every block.
    pub sync_every: u64,
    /// Blocks imported in one write transaction (1 = a commit per block). A group commits
    /// whole or not at all, so a crash still leaves a last whole block as the head; a block
    /// that fails a check is reported after the group's blocks before it are committed.
    pub batch: u64,
    /// How often the state root is computed and checked.
    pub state_root: StateRootCheck,
    /// Run the trie-history stage (`trie::stage`) once the blocks are stored, until every
    /// block has its own trie history (blocks an earlier run left waiting included); stopped
    /// by [`Self::stop`] too. Off: the blocks wait for the next import, `loupe node` or
    /// `loupe follow`.
    pub trie_history: bool,
    /// Ranges (whole epochs) the trie-history stage builds at once after the blocks
    /// ([`crate::trie::stage::run`]; `loupe import --import.stage-ranges`): more is faster on
    /// more cores and takes a range's memory for each.
    pub stage_ranges: usize,
}

/// Default of [`ImportOptions::stage_ranges`]: one, which keeps a bulk import of the
/// 10,000-block chain over 1M accounts under 1 GiB (945 MiB); two took the stage after its
/// blocks from 399.9 to 267.0 s, and its peak to 1,126 MiB (docs/benchmarks/issue-62.md).
pub const DEFAULT_STAGE_RANGES: usize = 1;

/// How often a bulk import computes and checks the state root ([`ImportOptions::state_root`],
/// `loupe import --state-root`). Every other check (parent hash, transactions, receipts and
/// withdrawals roots, gas, bloom, requests, blob gas) is made at every block either way, and a
/// follower checks every block's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateRootCheck {
    /// [`Self::Group`].
    #[default]
    Auto,
    /// Every block's root, with its trie nodes stored: proofs and unwinding at every block.
    Block,
    /// One root per commit group, at its last block, as reth's pipeline does: the trie work of
    /// keys changed again within the group is done once. In a datadir that keeps trie history
    /// at every block (`--proof-history all`) the root is also checked at each epoch's last
    /// block, and the trie-history stage (`trie::stage`) then builds every block's history and
    /// checks every block's root. A group whose root differs from its last header's is dropped
    /// and imported again block by block, which names the first bad block and keeps the ones
    /// before it. Unwinding reaches back to the last group's end and no further; proofs reach
    /// the blocks the stage has built, and (`--proof-history window`) the last group's end.
    Group,
}

impl StateRootCheck {
    /// The name `--state-root` takes.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Block => "block",
            Self::Group => "group",
        }
    }

    /// The choice called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Auto, Self::Block, Self::Group].into_iter().find(|c| c.name() == name)
    }

    /// Whether roots are checked per group in the datadir `reader` reads, and the epoch
    /// length to check them at each epoch's end too (a datadir that keeps trie history at
    /// every block, where the trie-history stage starts from those ends).
    fn per_group(
        self,
        reader: &crate::storage::Reader,
    ) -> Result<Option<Option<u64>>, ImportError> {
        if self == Self::Block {
            return Ok(None);
        }
        if reader.proof_history()? == crate::storage::segments::ProofHistory::Window {
            return Ok(Some(None));
        }
        Ok(Some(Some(reader.trie_tables().epochs.len)))
    }
}

/// How often a follower's catch-up makes a commit durable (`--follow.sync-every`; see
/// BENCHMARKS.md, "import commit grouping").
pub const DEFAULT_SYNC_EVERY: u64 = 128;

/// Default of [`ImportOptions::batch`] and of [`ImportOptions::sync_every`]: each group of a
/// bulk import is one durable commit. Groups of 512 blocks took 15–20 % off the last 907
/// blocks of the 10,000-block chain against 128, for 130–150 MiB more peak memory (the rows
/// held to the commit, and redb's bookkeeping of a larger transaction); BENCHMARKS.md, "Larger
/// import groups, session 25".
pub const DEFAULT_BATCH: u64 = 512;

impl ImportOptions {
    /// The default commit grouping, never stopped early.
    pub fn new() -> Self {
        Self {
            stop: None,
            sync_every: DEFAULT_BATCH,
            batch: DEFAULT_BATCH,
            state_root: StateRootCheck::Auto,
            trie_history: true,
            stage_ranges: DEFAULT_STAGE_RANGES,
        }
    }
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// Imports every block of the chain files in `paths`, in order, into `db`, with the default
/// [`ImportOptions`].
pub fn import_files(
    db: &Database,
    spec: &ChainSpec,
    paths: &[impl AsRef<Path>],
) -> Result<ImportSummary, ImportError> {
    import_files_with(db, spec, paths, ImportOptions::new())
}

/// Imports every block of the chain files in `paths`, in order, into `db`: RLP chain files,
/// era1 files, and folders, each standing for the `*.era1` files inside it in name order.
///
/// Blocks already stored are skipped; a gap, a conflicting block or a failed check stops the
/// import with an error naming the block. An era1 file that fails a check is refused before
/// any of its blocks runs ([`ImportError::Era1`]). The last commit is always made durable.
pub fn import_files_with(
    db: &Database,
    spec: &ChainSpec,
    paths: &[impl AsRef<Path>],
    options: ImportOptions,
) -> Result<ImportSummary, ImportError> {
    let started = Instant::now();
    let given: Vec<&Path> = paths.iter().map(AsRef::as_ref).collect();
    let files = era1::expand(&given)?;
    let mut summary = ImportSummary::default();
    let mut progress = Progress::new("importing");
    let stopped =
        || options.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
    // The open write transaction and the blocks it holds, committed every `batch` blocks.
    let mut group: Option<Group> = None;
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let paths = paths.as_slice();
    let chain_id = spec.chain_id();
    let per_group = options.state_root.per_group(&db.begin_read()?)?;
    let budget = ahead::Budget::new(ahead::EXECUTE_AHEAD_BYTES);
    // Set when the writer's loop ends, however it ends: the stage beside the import stops.
    let blocks_done = std::sync::atomic::AtomicBool::new(false);
    let mut beside = crate::trie::stage::StageSummary::default();
    // The stage beside the import lives in a scope around the pipeline's and the last group's
    // commit: the commits of its ranges wait for the writer's open group.
    let result = std::thread::scope(|outer| {
        let stage = match options.trie_history {
            true => Some(
                std::thread::Builder::new()
                    .name("loupe-trie-stage".into())
                    .spawn_scoped(outer, || stage_beside(db, &blocks_done))
                    .map_err(|error| ImportError::Thread { error })?,
            ),
            false => None,
        };
        let mut result = std::thread::scope(|scope| {
            // A pipeline of three threads over all the files in turn. Decoding, hashing and sender
            // recovery run a few blocks ahead of execution: they do not need the parent's state.
            // Execution runs on the next thread, ahead of the writer, on the committed state plus
            // the blocks it executed since (`ahead`), across file boundaries. This thread verifies
            // the roots and stores. The bounded channels keep at most PREPARE_AHEAD prepared and
            // EXECUTE_AHEAD executed blocks (and no more than EXECUTE_AHEAD_BYTES of the latter) in
            // memory; when this thread stops reading (the end, an error, a stop), the senders fail,
            // the budget closes and the other threads end.
            let thread_error = |error| ImportError::Thread { error };
            let stored = db.begin_read()?.head()?;
            let (tx, rx) = std::sync::mpsc::sync_channel(PREPARE_AHEAD);
            std::thread::Builder::new()
                .name("loupe-prepare".into())
                .spawn_scoped(scope, move || {
                    yield_to_the_writer();
                    prepare_ahead(paths, &mut era1::Run::new(db, chain_id, stored), &tx)
                })
                .map_err(thread_error)?;
            let (executed_tx, executed_rx) = std::sync::mpsc::sync_channel(EXECUTE_AHEAD);
            let budget = &budget;
            std::thread::Builder::new()
                .name("loupe-execute".into())
                .spawn_scoped(scope, move || {
                    yield_to_the_writer();
                    ahead::execute_ahead(db, spec, rx, &executed_tx, budget)
                })
                .map_err(thread_error)?;
            // However this loop ends, the execution thread must not wait on the budget forever,
            // and the stage beside the import stops after its range.
            let _closed = CloseOnDrop(budget, &blocks_done);
            let mut file: Option<FileImport<'_>> = None;
            for (index, item, executed, weight) in executed_rx {
                if stopped() {
                    summary.interrupted = true;
                    break;
                }
                let path = paths[index];
                if file.as_ref().is_some_and(|f| f.index != index) {
                    file = None;
                }
                let file = file.get_or_insert(FileImport { path, index, last_in_file: None });
                let next = match item {
                    FileItem::Open(error) => {
                        return Err(ImportError::Open { path: path.display().to_string(), error });
                    }
                    FileItem::Refused(error) => {
                        return Err(ImportError::Era1 { path: path.display().to_string(), error });
                    }
                    FileItem::Block(next) => *next,
                };
                file.block(
                    db,
                    spec,
                    next,
                    executed,
                    &mut group,
                    &mut summary,
                    &mut progress,
                    (&options, per_group),
                )?;
                budget.give(weight);
            }
            Ok::<(), ImportError>(())
        });
        // Whatever happened, make what was committed durable, the open group's blocks included.
        if let Some(Err(e)) = group.take().map(|g| g.commit(db, spec, true)) {
            result = result.and(Err(e));
        }
        // A panic of the stage's thread loses only its count: the run after the blocks goes on.
        beside = stage.and_then(|s| s.join().ok()).unwrap_or_default();
        result
    });
    let mut result = result;
    if let Err(e) = db.make_durable() {
        result = result.and(Err(e.into()));
    }
    progress.finish();
    result?;
    summary.head = db.begin_read()?.head()?.unwrap_or(0);
    if options.trie_history && !summary.interrupted {
        let stage_started = Instant::now();
        let never = std::sync::atomic::AtomicBool::new(false);
        let stop = options.stop.as_deref().unwrap_or(&never);
        summary.staged = crate::trie::stage::run(db, stop, options.stage_ranges)?;
        // The stage froze the epochs it completed and started their segment merges on a
        // thread of their own, which only a later freeze adopted: the import leaves them
        // merged, as it does the blocks' (on the 10,000-block chain over 1M accounts the
        // storage trie's first 64 epochs were left in 15 files, docs/benchmarks/issue-62.md).
        if summary.staged.ranges > 0 {
            db.make_durable()?;
        }
        summary.stage_elapsed = stage_started.elapsed();
        summary.staged_beside = beside.blocks;
        summary.staged.blocks += beside.blocks;
        summary.staged.ranges += beside.ranges;
    }
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// How much lower the preparing and executing threads run than the writer, in nice steps.
/// The writer is the import's critical path; with three busy threads on two cores the
/// scheduler otherwise gives about an eighth of its time to the others, which then only run
/// further ahead until their channels fill (BENCHMARKS.md, session 39).
const AHEAD_NICE: libc::c_int = 5;

/// Lowers the calling thread's scheduling priority by [`AHEAD_NICE`] (Linux: niceness is per
/// thread). Best effort: where the call fails the thread runs at the writer's priority, as it
/// did before, and nothing else changes.
fn yield_to_the_writer() {
    crate::storage::lower_thread_priority(AHEAD_NICE);
}

/// Closes the execution budget and sets the blocks-done flag when the writer's loop ends,
/// however it ends.
struct CloseOnDrop<'b>(&'b ahead::Budget, &'b std::sync::atomic::AtomicBool);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
        self.1.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How much lower the stage beside the import runs than the writer, in nice steps: below the
/// preparing and executing threads too, so it takes the time the pipeline leaves idle (the
/// writer is the critical path and keeps about one core of two busy).
const STAGE_NICE: libc::c_int = 10;

/// The trie-history stage beside the import: each epoch the writer's groups complete gives it
/// a range to build, on the core the pipeline leaves idle, until `done` (the writer's loop
/// ended); what is left then is built after the blocks. An error ends it quietly: the run after
/// the blocks meets it again and reports it (a bad root is recorded by the range that found it).
fn stage_beside(
    db: &Database,
    done: &std::sync::atomic::AtomicBool,
) -> crate::trie::stage::StageSummary {
    crate::storage::lower_thread_priority(STAGE_NICE);
    let mut total = crate::trie::stage::StageSummary::default();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        match crate::trie::stage::run_beside_import(db, done, total.ranges == 0) {
            Ok(s) => {
                total.ranges += s.ranges;
                total.blocks += s.blocks;
            }
            Err(e) => {
                tracing::debug!(target: "trie", "the stage beside the import stopped: {e}");
                break;
            }
        }
        // Nothing waits for it until the writer's next group commits.
        for _ in 0..10 {
            if done.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    total
}

/// Blocks [`prepare_ahead`] keeps decoded and prepared ahead of execution.
const PREPARE_AHEAD: usize = 4;

/// Executed blocks waiting for the writer. The writer stalls for seconds at a group's end (its
/// state root, the commit, an epoch frozen into segments); with room for 128 blocks the
/// execution thread goes on meanwhile. On the 1,000-block chain over 200k accounts that took
/// 10–17 % off the import against room for 4, for 15–20 MiB more peak memory (BENCHMARKS.md,
/// "State roots per commit group"). [`ahead::EXECUTE_AHEAD_BYTES`] bounds them in bytes too.
const EXECUTE_AHEAD: usize = 128;

/// Reads every block of every file in turn and prepares it, until the files end, a file does
/// not open, a block does not decode, an era1 file fails its checks ([`era1::prepare_file`]), or
/// the receiving side is gone. A block at or below the head when the import began
/// ([`era1::Run::stored`]) is only hashed: the import compares it with the stored block of its
/// number and skips it.
fn prepare_ahead(paths: &[&Path], run: &mut era1::Run<'_>, tx: &std::sync::mpsc::SyncSender<Item>) {
    let stored = run.stored();
    for (index, path) in paths.iter().enumerate() {
        if era1::is_era1(path) {
            if era1::prepare_file(index, path, run, tx) {
                continue;
            }
            return;
        }
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(error) => {
                let _ = tx.send((index, FileItem::Open(error)));
                return;
            }
        };
        let mut reader = BlockReader::new(std::io::BufReader::with_capacity(1 << 20, file));
        while let Some(next) = reader.next_block() {
            let failed = next.is_err();
            let next = next.map(|(offset, block)| {
                let prepared = if stored.is_some_and(|head| block.header.number <= head) {
                    Prepared::hash_only(&block)
                } else {
                    Prepared::new(&block, Senders::AllCores)
                };
                run.read(block.header.number, prepared.hash());
                (offset, block, prepared)
            });
            if tx.send((index, FileItem::Block(Box::new(next)))).is_err() || failed {
                return;
            }
        }
    }
}

/// One chain file being imported.
struct FileImport<'p> {
    path: &'p Path,
    /// Its place in the list of files.
    index: usize,
    /// The last block read from the file.
    last_in_file: Option<u64>,
}

impl FileImport<'_> {
    /// Imports the next block of the file into `group`, committing it when it is full or the
    /// block is due a durable commit.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &mut self,
        db: &Database,
        spec: &ChainSpec,
        next: Next,
        ahead: Option<block::Ahead>,
        group: &mut Option<Group>,
        summary: &mut ImportSummary,
        progress: &mut Progress,
        (options, per_group): (&ImportOptions, PerGroup),
    ) -> Result<(), ImportError> {
        let (offset, block, prepared) = match next {
            Ok(next) => next,
            Err(error) => {
                // The block the error is inside: the one after the file's last block, or, for
                // the file's first block, the one after the stored head.
                let expected = match (self.last_in_file, &*group) {
                    (Some(n), _) => n + 1,
                    (None, Some(g)) => g.head() + 1,
                    (None, None) => db.begin_read()?.head()?.map_or(0, |h| h + 1),
                };
                let path = self.path.display().to_string();
                return Err(ImportError::Source { path, expected_block: expected, error });
            }
        };
        let number = block.header.number;
        self.last_in_file = Some(number);
        // A block that does not extend the open group (a file starting over) is checked
        // against what is committed.
        if let Some(g) = group.take_if(|g| g.head() + 1 != number) {
            g.commit(db, spec, false)?;
        }
        // Every `sync_every`th block is committed durably; a crash leaves the last durable
        // block as the head, never half a block (behaviour.md §4).
        let durable = number.is_multiple_of(options.sync_every.max(1));
        let (txs, gas) = (block.body.transactions.len() as u64, block.header.gas_used);
        let g = match group.take() {
            Some(g) => g,
            None => {
                let reader = db.begin_read()?;
                let head = reader.head()?.ok_or(ImportError::NotInitialised)?;
                if block::is_stored(&reader, head, number, prepared.hash())
                    .map_err(|e| e.at_offset(offset))?
                {
                    summary.skipped += 1;
                    return Ok(());
                }
                Group::new(db, per_group)?
            }
        };
        let was_ahead = matches!(ahead, Some(Ok(_)));
        let g = g.add(db, spec, block, prepared, ahead).map_err(|e| e.at_offset(offset))?;
        summary.executed_ahead += u64::from(was_ahead);
        if g.blocks.len() >= options.batch.max(1) as usize || durable {
            g.commit(db, spec, durable)?;
        } else {
            *group = Some(g);
        }
        summary.imported += 1;
        summary.transactions += txs;
        summary.gas += gas;
        progress.block(number, txs, gas);
        Ok(())
    }
}

/// Whether an import checks state roots per group ([`StateRootCheck::per_group`]): `None`
/// every block's, `Some(None)` each group's, `Some(Some(len))` each group's and each epoch's of
/// `len` blocks.
type PerGroup = Option<Option<u64>>;

/// Blocks imported into one write transaction and not yet committed. The import keeps one
/// open only while it holds at least one block.
struct Group {
    writer: crate::storage::Writer,
    /// The blocks `writer` holds, in order, kept to store them again if a later one fails.
    blocks: Vec<(alloy_consensus::Block<alloy_consensus::TxEnvelope>, Prepared)>,
    /// With [`StateRootCheck::Group`]: what the blocks since the last root changed.
    deferred: Option<crate::trie::DeferredRoot>,
    /// The epoch length, when the root is also checked at each epoch's last block.
    epoch_len: Option<u64>,
}

impl Group {
    /// An empty group on a new write transaction, checking the state root as `per_group` says.
    fn new(db: &Database, per_group: PerGroup) -> Result<Self, ImportError> {
        let deferred = per_group.map(|_| crate::trie::DeferredRoot::default());
        let epoch_len = per_group.flatten();
        // The group's head moves freeze what they leave behind once, at its commit.
        let mut writer = db.begin_write()?;
        writer.freeze_at_commit();
        Ok(Self { writer, blocks: Vec::new(), deferred, epoch_len })
    }

    /// Whether the root is checked at `number` before the group ends: it ends an epoch.
    fn settles_at(&self, number: u64) -> bool {
        self.deferred.is_some()
            && self.epoch_len.is_some_and(|len| (number + 1).is_multiple_of(len.max(1)))
    }

    /// The last block the group holds.
    fn head(&self) -> u64 {
        self.blocks.last().map_or(0, |(b, _)| b.header.number)
    }

    /// Imports `block` into the group's transaction: the first on the committed state, the
    /// next ones on the state the group holds. When `block` fails a check the transaction is
    /// dropped, the group's earlier blocks are stored again, each with its own state root, and
    /// committed durably, and the error of the first block that fails is returned: nothing of
    /// a bad block is stored, every block before it is.
    fn add(
        mut self,
        db: &Database,
        spec: &ChainSpec,
        block: alloy_consensus::Block<alloy_consensus::TxEnvelope>,
        prepared: Prepared,
        ahead: Option<block::Ahead>,
    ) -> Result<Self, ImportError> {
        let number = block.header.number;
        match self.store(db, spec, &block, &prepared, ahead) {
            Ok(()) => {
                self.blocks.push((block, prepared));
                if self.settles_at(number)
                    && let Err(e) = self.settle()
                {
                    return self.redo_failed_root(db, spec, &e);
                }
                Ok(self)
            }
            Err(e) => {
                self.again_block_by_block(db, spec)?.commit(db, spec, true)?;
                tracing::debug!(target: "import", number, "block refused: {e}");
                Err(e)
            }
        }
    }

    fn store(
        &mut self,
        db: &Database,
        spec: &ChainSpec,
        block: &alloy_consensus::Block<alloy_consensus::TxEnvelope>,
        prepared: &Prepared,
        ahead: Option<block::Ahead>,
    ) -> Result<(), ImportError> {
        let number = block.header.number;
        // A pre-Byzantium block computes a root after each transaction on the stored trie,
        // which must be the parent's: the group's root is settled first, and this block's is
        // computed on its own. One without transactions has no receipt to carry a root.
        let deferred = if !block::needs_intermediate_roots(spec, block) {
            self.deferred.as_mut()
        } else {
            self.settle()?;
            None
        };
        if self.blocks.is_empty() {
            block::store_uncommitted(db, &self.writer, spec, block, prepared, ahead, deferred)?;
        } else {
            block::store_on_writer(&self.writer, spec, block, prepared, ahead, deferred)?;
        }
        Ok(self.writer.advance_head_with_markers(number, number, number)?)
    }

    /// Computes the state root of the blocks gathered since the last one, once, at the
    /// group's last block, and checks it against that block's header.
    fn settle(&mut self) -> Result<(), ImportError> {
        let Some(deferred) = self.deferred.as_mut().filter(|p| !p.is_empty()) else {
            return Ok(());
        };
        let Some((last, prepared)) = self.blocks.last() else { return Ok(()) };
        let (number, blocks) = (last.header.number, deferred.blocks());
        let started = Instant::now();
        let root = crate::trie::settle_state_root(&self.writer, number, deferred)?;
        block::check(number, prepared.hash(), "state root", last.header.state_root, root)?;
        if blocks > 1 {
            self.writer.set_group_root_at(number + 1 - blocks, number)?;
        }
        let root_us = started.elapsed().as_micros() as u64;
        tracing::debug!(target: "import", number, blocks, root_us, "group state root checked");
        Ok(())
    }

    /// After the group's state root check failed (`e`): imports its blocks again block by
    /// block, which stores the blocks before the first bad one and returns its error.
    fn redo_failed_root(
        self,
        db: &Database,
        spec: &ChainSpec,
        e: &ImportError,
    ) -> Result<Self, ImportError> {
        tracing::warn!(
            target: "import",
            first = self.blocks.first().map(|(b, _)| b.header.number),
            last = self.head(),
            "a commit group failed its state root check ({e}); importing it again block by block"
        );
        let again = self.again_block_by_block(db, spec)?;
        // Every block passed its own root check: the group's error was not in the chain.
        tracing::warn!(target: "import", "every block of the group passed on its own");
        Ok(again)
    }

    /// Drops the group's write transaction and executes its blocks again on a new one, each
    /// block checked against its own state root: the first bad block's error is returned.
    fn again_block_by_block(self, db: &Database, spec: &ChainSpec) -> Result<Self, ImportError> {
        drop(self.writer);
        let mut again = Self::new(db, None)?;
        for (b, p) in self.blocks {
            again = again.add(db, spec, b, p, None)?;
        }
        Ok(again)
    }

    /// Commits the group's blocks, after checking the state root it left pending. A group
    /// whose root is wrong is imported again block by block, which stores the blocks before
    /// the first bad one and returns its error.
    fn commit(mut self, db: &Database, spec: &ChainSpec, durable: bool) -> Result<(), ImportError> {
        if let Err(e) = self.settle() {
            return self.redo_failed_root(db, spec, &e)?.commit(db, spec, durable);
        }
        let started = Instant::now();
        self.writer.commit(durable)?;
        let commit_us = started.elapsed().as_micros() as u64;
        for (b, _) in &self.blocks {
            tracing::debug!(
                target: "import",
                number = b.header.number,
                txs = b.body.transactions.len(),
                durable,
                group = self.blocks.len(),
                commit_us,
                "block stored"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_consensus::{Block, BlockBody, Header, SignableTransaction, Signed, TxEnvelope};
    use alloy_rlp::Encodable;
    use alloy_signer::SignerSync;
    use alloy_signer_local::PrivateKeySigner;

    /// The preparing and executing threads run below the writer's priority, the thread that
    /// spawned them (the kernel's own per-thread niceness, read back) keeps its own.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_threads_ahead_yield_to_the_writer() {
        // SAFETY: plain integer calls on the calling thread.
        let nice =
            || unsafe { libc::getpriority(libc::PRIO_PROCESS as _, libc::gettid() as libc::id_t) };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            yield_to_the_writer();
            nice()
        })
        .join()
        .unwrap_or(i32::MIN);
        assert_eq!(lowered, (before + AHEAD_NICE).min(19));
        assert_eq!(nice(), before);
    }

    /// Block `number` with one transfer signed by `signer` (its nonce the block number).
    fn signed_block(number: u64, signer: &PrivateKeySigner) -> Block<TxEnvelope> {
        let tx = block::tests::transfer(number);
        let signature = signer.sign_hash_sync(&tx.signature_hash()).expect("sign");
        let tx = TxEnvelope::Legacy(Signed::new_unhashed(tx, signature));
        let header = Header { number, gas_limit: 30_000_000, ..Default::default() };
        Block { header, body: BlockBody { transactions: vec![tx], ..Default::default() } }
    }

    #[test]
    fn blocks_at_or_below_the_stored_head_are_only_hashed() {
        let signer = PrivateKeySigner::random();
        let blocks: Vec<_> = (1..=4).map(|n| signed_block(n, &signer)).collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chain.rlp");
        let mut bytes = Vec::new();
        for b in &blocks {
            b.encode(&mut bytes);
        }
        std::fs::write(&path, bytes).expect("write chain file");

        let db = Database::open(&dir.path().join("db")).expect("open db");
        let (tx, rx) = std::sync::mpsc::sync_channel(blocks.len() + 1);
        prepare_ahead(&[path.as_path()], &mut era1::Run::new(&db, 1, Some(2)), &tx);
        drop(tx);
        let mut seen = 0;
        for (_, item) in rx {
            let FileItem::Block(next) = item else { panic!("the file opens") };
            let (_, block, prepared) = (*next).expect("the block decodes");
            let n = block.header.number;
            assert_eq!(prepared.hash(), blocks[n as usize - 1].header.hash_slow(), "#{n}");
            // The full checks, made here on the block itself: a second path to them.
            let full = Prepared::new(&block, block::Senders::ThisThread);
            assert_eq!(full.senders(), Some(&[signer.address()][..]), "#{n}");
            if n <= 2 {
                assert_eq!(prepared.senders(), None, "#{n} is stored: no sender recovered");
            } else {
                assert_eq!(prepared.senders(), full.senders(), "#{n}");
            }
            // Whichever was made, the checks a store uses are the same.
            assert_eq!(prepared.checks_of(&block), full.checks_of(&block), "#{n}");
            seen += 1;
        }
        assert_eq!(seen, blocks.len());
    }
}
