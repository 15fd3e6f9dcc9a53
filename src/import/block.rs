//! [`import_block`]: verify, execute and store one block.

use alloy_consensus::proofs::{
    calculate_ommers_root, calculate_transaction_root, calculate_withdrawals_root,
};
use alloy_consensus::transaction::SignerRecoverable;
use alloy_consensus::{Block, TxEnvelope};
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Address, B256};

use super::ImportError;
use super::header::check_block;
use crate::chain::ChainSpec;
use crate::evm::{BlockOutcome, EvmError, execute_block};
use crate::storage::{Database, Writer};
use crate::trie::{DeferredRoot, RootMode, update_state_root};
use revm::database::DatabaseRef;

/// A block's outcome from the execution thread ([`super::ahead`]), used instead of executing it
/// again on the writer's state.
pub(super) type Ahead = Result<BlockOutcome, EvmError>;

/// What [`import_block`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStatus {
    /// Executed, verified and stored.
    Imported,
    /// The same block was already stored; nothing done.
    AlreadyStored,
}

pub(super) fn check<T: PartialEq + std::fmt::Display>(
    number: u64,
    hash: B256,
    what: &'static str,
    expected: T,
    got: T,
) -> Result<(), ImportError> {
    if expected == got {
        Ok(())
    } else {
        Err(ImportError::Mismatch {
            number,
            hash,
            what,
            expected: expected.to_string(),
            got: got.to_string(),
        })
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

/// Imports `block` on top of the stored head. `durable` makes the commit fsync.
pub fn import_block(
    db: &Database,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    durable: bool,
) -> Result<BlockStatus, ImportError> {
    import_block_with(db, spec, block, durable, None)
}

/// State roots a caller computed elsewhere (statelessly, over a witness), for a datadir with no
/// full trie to compute them from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedRoots {
    /// The post-state root; it must be the header's.
    pub state_root: B256,
    /// Before Byzantium: the state root after each transaction, in order, which the receipts
    /// carry (and the header's receipts root commits to). Empty from Byzantium on.
    pub intermediate: Vec<B256>,
}

/// [`import_block`] into an anchored datadir ([`super::init_anchored`]), which holds no full
/// trie to compute the state root from: every other check and the whole store path run, and
/// the state roots are taken from `roots`, which the caller computed (statelessly, over a
/// witness): the post-state root must be the header's, and the receipts built with the
/// intermediate roots must hash to its receipts root. Refused ([`ImportError::NotAnchored`]) on
/// a datadir that starts at genesis. The commit is durable.
pub fn import_block_trusted_root(
    db: &Database,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    roots: &TrustedRoots,
) -> Result<BlockStatus, ImportError> {
    if db.begin_read()?.anchor().is_none() {
        return Err(ImportError::NotAnchored);
    }
    import_block_with(db, spec, block, true, Some(roots))
}

fn import_block_with(
    db: &Database,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    durable: bool,
    trusted_root: Option<&TrustedRoots>,
) -> Result<BlockStatus, ImportError> {
    let header = &block.header;
    let number = header.number;
    let hash = header.hash_slow();
    let reader = db.begin_read()?;
    let head = reader.head()?.ok_or(ImportError::NotInitialised)?;
    if is_stored(&reader, head, number, hash)? {
        return Ok(BlockStatus::AlreadyStored);
    }
    if number != head + 1 {
        return Err(ImportError::OutOfOrder { number, hash, expected: head + 1 });
    }
    let writer = db.begin_write()?;
    let prepared = Prepared::new(block, Senders::AllCores);
    store_on_snapshot(&reader, &writer, spec, block, &prepared, None, None, trusted_root)?;
    // A file's chain is taken as final.
    writer.advance_head_with_markers(number, number, number)?;
    let started = std::time::Instant::now();
    writer.commit(durable)?;
    tracing::debug!(
        target: "import",
        number,
        %hash,
        durable,
        commit_us = started.elapsed().as_micros() as u64,
        "block stored"
    );
    Ok(BlockStatus::Imported)
}

/// Whether `block`'s receipts carry the state root after each of its transactions
/// (pre-Byzantium), which execution computes on the writer's tables: then its parent's state
/// must be stored and its own root is computed on its own. A pre-Byzantium block without
/// transactions has no receipt, so its root can wait for its commit group's like any other.
pub(super) fn needs_intermediate_roots(spec: &ChainSpec, block: &Block<TxEnvelope>) -> bool {
    !block.body.transactions.is_empty() && !spec.is_byzantium_active_at_block(block.header.number)
}

/// Whether block `number` (hash `hash`) is already stored below or at `head`: `false` when it
/// is above the head, [`ImportError::Conflict`] when another block is stored at its height.
pub(super) fn is_stored(
    reader: &crate::storage::Reader,
    head: u64,
    number: u64,
    hash: B256,
) -> Result<bool, ImportError> {
    if number > head {
        return Ok(false);
    }
    let stored = reader.canonical_hash(number)?.unwrap_or_default();
    if stored != hash {
        return Err(ImportError::Conflict { number, hash, stored });
    }
    Ok(true)
}

/// Verifies, executes and stores `block` on top of the head through `writer`, which must have
/// written nothing yet: execution reads the committed head state, which is then the writer's.
/// Only the head marker moves (safe and finalized are the caller's). Nothing is committed.
pub fn import_block_uncommitted(
    db: &Database,
    writer: &Writer,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
) -> Result<B256, ImportError> {
    store_uncommitted(db, writer, spec, block, &Prepared::new(block, Senders::AllCores), None, None)
}

/// [`import_block_uncommitted`] with the block's [`Prepared`] part already done. With
/// `deferred`, the state root is not computed: the block's changes are added to it instead.
pub(super) fn store_uncommitted(
    db: &Database,
    writer: &Writer,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    prepared: &Prepared,
    ahead: Option<Ahead>,
    deferred: Option<&mut DeferredRoot>,
) -> Result<B256, ImportError> {
    let hash = prepared.hash;
    let reader = db.begin_read()?;
    if reader.head()? != writer.head()? {
        return Err(ImportError::WriterNotFresh);
    }
    let head = reader.head()?.ok_or(ImportError::NotInitialised)?;
    let number = block.header.number;
    if number != head + 1 {
        return Err(ImportError::OutOfOrder { number, hash, expected: head + 1 });
    }
    store_on_snapshot(&reader, writer, spec, block, prepared, ahead, deferred, None)?;
    Ok(hash)
}

#[allow(clippy::too_many_arguments)]
fn store_on_snapshot(
    reader: &crate::storage::Reader,
    writer: &Writer,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    prepared: &Prepared,
    ahead: Option<Ahead>,
    deferred: Option<&mut DeferredRoot>,
    trusted_root: Option<&TrustedRoots>,
) -> Result<(), ImportError> {
    let head = reader.head()?.ok_or(ImportError::NotInitialised)?;
    let parent_hash = reader.canonical_hash(head)?.unwrap_or_default();
    let parent = reader.header(head)?.ok_or(ImportError::NotInitialised)?;
    check_block(spec, block, prepared.hash, &parent, reader)?;
    let state = reader.state_at(head)?;
    store_block(writer, spec, block, prepared, parent_hash, state, ahead, deferred, trusted_root)
}

/// Verifies, executes and stores `block` on top of the head of `writer`, reading the state
/// from the writer itself (changes it holds uncommitted included). This is how a new branch is
/// imported in the same transaction as the unwind of the old one. Only the head marker moves.
/// Returns the block hash. Nothing is committed; on error the caller drops the writer.
pub fn import_block_on_writer(
    writer: &Writer,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
) -> Result<B256, ImportError> {
    store_on_writer(writer, spec, block, &Prepared::new(block, Senders::AllCores), None, None)
}

/// [`import_block_on_writer`] with the block's [`Prepared`] part already done; `deferred` as for
/// [`store_uncommitted`].
pub(super) fn store_on_writer(
    writer: &Writer,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    prepared: &Prepared,
    ahead: Option<Ahead>,
    deferred: Option<&mut DeferredRoot>,
) -> Result<B256, ImportError> {
    let number = block.header.number;
    let hash = prepared.hash;
    let head = writer.head()?.ok_or(ImportError::NotInitialised)?;
    if number != head + 1 {
        return Err(ImportError::OutOfOrder { number, hash, expected: head + 1 });
    }
    let parent_hash = writer.canonical_hash(head)?.unwrap_or_default();
    let parent = writer.header(head)?.ok_or(ImportError::NotInitialised)?;
    check_block(spec, block, hash, &parent, writer)?;
    let state = writer.state()?;
    store_block(writer, spec, block, prepared, parent_hash, state, ahead, deferred, None)?;
    Ok(hash)
}

/// Time spent per phase of [`store_block`].
#[derive(Debug, Default)]
struct Timings {
    execute: std::time::Duration,
    state: std::time::Duration,
    root: std::time::Duration,
    block: std::time::Duration,
}

/// Every check of a block against its parent, then execution, the state root and the block's
/// rows, all written through `writer`. The head marker moves to the block. With `deferred` the
/// state root is left to the commit group's end ([`crate::trie::settle_state_root`]): the
/// block's changes are gathered there, and every other check is made here. With
/// `trusted_root` (an anchored datadir, which has no trie) the state root is not computed: the
/// header's must be that one.
#[allow(clippy::too_many_arguments)]
fn store_block<DB: DatabaseRef + std::fmt::Debug>(
    writer: &Writer,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    prepared: &Prepared,
    parent_hash: B256,
    parent_state: DB,
    ahead: Option<Ahead>,
    deferred: Option<&mut DeferredRoot>,
    trusted_root: Option<&TrustedRoots>,
) -> Result<(), ImportError>
where
    DB::Error: std::fmt::Display,
{
    let header = &block.header;
    let number = header.number;
    let hash = prepared.hash;
    if let Some(anchor) = writer.anchor()?
        && trusted_root.is_none()
    {
        return Err(ImportError::Anchored {
            anchor,
            what: "a block imports here only with a state root verified over its witness (import_block_trusted_root)",
        });
    }
    check(number, hash, "parent hash", header.parent_hash, parent_hash)?;

    // Commitments checkable without execution.
    let body = &block.body;
    let checks = prepared.checks_of(block);
    check(number, hash, "transactions root", header.transactions_root, checks.transactions_root)?;
    check(number, hash, "ommers hash", header.ommers_hash, calculate_ommers_root(&body.ommers))?;
    let shanghai = spec.is_shanghai_active_at_timestamp(header.timestamp);
    let withdrawals_root = body.withdrawals.as_ref().map(|w| calculate_withdrawals_root(w));
    if shanghai || header.withdrawals_root.is_some() || withdrawals_root.is_some() {
        check(
            number,
            hash,
            "withdrawals root",
            opt(header.withdrawals_root),
            opt(withdrawals_root),
        )?;
    }

    let senders = match &checks.senders {
        Ok(senders) => senders.as_slice(),
        Err((index, message)) => {
            return Err(ImportError::Signature {
                number,
                hash,
                index: *index,
                message: message.clone(),
            });
        }
    };

    check_system_contracts(spec, header, hash, &parent_state)?;
    let mut timings = Timings::default();
    let started = std::time::Instant::now();
    // Executed on the import's execution thread already, or here on the writer's state.
    let executed_ahead = ahead.is_some();
    let outcome = match ahead {
        Some(outcome) => outcome,
        None => {
            let mut trusted = trusted_root.map(|t| t.intermediate.iter());
            execute_block(spec, &parent_state, block, senders, |changes| {
                // Pre-Byzantium: the cumulative changes so far; the trie is not written until
                // the end. Trusted roots come from the caller (the receipts root checks them).
                writer.apply_changeset(number, changes)?;
                match &mut trusted {
                    Some(roots) => roots.next().copied().ok_or(ImportError::AnchorInput(
                        "fewer intermediate state roots than transactions".into(),
                    )),
                    None => Ok(update_state_root(writer, number, changes, RootMode::Compute)?),
                }
            })
        }
    }
    .map_err(|error| ImportError::Execution { number, hash, error })?;
    timings.execute = started.elapsed();
    writer.apply_changeset(number, &outcome.changes)?;
    timings.state = started.elapsed() - timings.execute;

    check(number, hash, "gas used", header.gas_used, outcome.gas_used)?;
    check(number, hash, "receipts root", header.receipts_root, outcome.receipts_root)?;
    check(number, hash, "logs bloom", header.logs_bloom, outcome.logs_bloom)?;
    if spec.is_prague_active_at_timestamp(header.timestamp) || header.requests_hash.is_some() {
        check(
            number,
            hash,
            "requests hash",
            opt(header.requests_hash),
            opt(Some(outcome.requests.requests_hash())),
        )?;
    }
    if spec.is_cancun_active_at_timestamp(header.timestamp) || header.blob_gas_used.is_some() {
        check(
            number,
            hash,
            "blob gas used",
            opt(header.blob_gas_used),
            opt(Some(outcome.blob_gas_used)),
        )?;
    }
    if let Some(access_list) = &outcome.access_list {
        check_access_list(number, hash, header, access_list)?;
    } else if let Some(expected) = header.block_access_list_hash {
        check(number, hash, "block access list hash", opt(Some(expected)), opt(None::<B256>))?;
    }
    let before_root = started.elapsed();
    match (trusted_root, deferred) {
        (Some(roots), _) => check(number, hash, "state root", header.state_root, roots.state_root)?,
        (None, Some(deferred)) => deferred.add(&outcome.changes),
        (None, None) => {
            let root = update_state_root(writer, number, &outcome.changes, RootMode::Store)?;
            check(number, hash, "state root", header.state_root, root)?;
        }
    }
    timings.root = started.elapsed() - before_root;

    let before_block = started.elapsed();
    // A block holds its transactions in their consensus form; only the dev policy lets one in
    // with blob sidecars (anvil's, whose header commits to them), and they are not stored.
    if block.body.transactions.iter().any(super::header::has_sidecar) {
        let (stripped, _) = super::without_sidecars(block.clone());
        writer.insert_block(
            &stripped,
            hash,
            senders,
            &outcome.receipts,
            outcome.access_list.as_ref(),
        )?;
    } else {
        writer.insert_block(
            block,
            hash,
            senders,
            &outcome.receipts,
            outcome.access_list.as_ref(),
        )?;
    }
    writer.index_trace_addresses(number, &outcome.touched)?;
    writer.advance_head(number)?;
    // Throughput, for import and follow alike (`rate()` of these in Prometheus).
    metrics::counter!("loupe_import_blocks_total").increment(1);
    metrics::counter!("loupe_import_transactions_total").increment(senders.len() as u64);
    metrics::counter!("loupe_import_gas_total").increment(outcome.gas_used);
    timings.block = started.elapsed() - before_block;
    // Where a block's time went, in microseconds per phase (the commit is logged apart).
    tracing::debug!(
        target: "import",
        number,
        %hash,
        txs = body.transactions.len(),
        executed_ahead,
        exec_us = timings.execute.as_micros() as u64,
        state_us = timings.state.as_micros() as u64,
        root_us = timings.root.as_micros() as u64,
        block_us = timings.block.as_micros() as u64,
        "block executed"
    );
    Ok(())
}

/// The system contracts each fork calls after a block's transactions, with the EIP that calls
/// them: a block whose parent state lacks the code of one is invalid (EIP-7002 and EIP-7251
/// from Prague, EIP-8282 from Amsterdam). alloy-evm's executor calls an address without code as
/// an empty contract, so the rule is checked here.
fn check_system_contracts<DB: DatabaseRef>(
    spec: &ChainSpec,
    header: &alloy_consensus::Header,
    hash: B256,
    state: &DB,
) -> Result<(), ImportError>
where
    DB::Error: std::fmt::Display,
{
    use alloy_eips::{eip7002, eip7251, eip8282};
    let time = header.timestamp;
    let prague = [
        ("EIP-7002", "withdrawal request contract", eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS),
        (
            "EIP-7251",
            "consolidation request contract",
            eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
        ),
    ];
    let amsterdam = [
        ("EIP-8282", "builder deposit contract", eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS),
        ("EIP-8282", "builder exit contract", eip8282::BUILDER_EXIT_CONTRACT_ADDRESS),
    ];
    let called = spec
        .is_prague_active_at_timestamp(time)
        .then_some(prague.iter())
        .into_iter()
        .flatten()
        .chain(
            spec.is_amsterdam_active_at_timestamp(time)
                .then_some(amsterdam.iter())
                .into_iter()
                .flatten(),
        );
    for &(eip, name, address) in called {
        let info = state.basic_ref(address).map_err(|e| ImportError::Execution {
            number: header.number,
            hash,
            error: EvmError::Block(format!("reading system contract {address}: {e}")),
        })?;
        if info.is_none_or(|i| i.code_hash == alloy_primitives::KECCAK256_EMPTY) {
            return Err(ImportError::MissingSystemContract {
                number: header.number,
                hash,
                eip,
                name,
                address,
            });
        }
    }
    Ok(())
}

/// EIP-7928: the block access list its execution built fits the gas limit (2,000 gas an account
/// or slot) and hashes to the header's `blockAccessListHash`.
fn check_access_list(
    number: u64,
    hash: B256,
    header: &alloy_consensus::Header,
    access_list: &[alloy_eip7928::AccountChanges],
) -> Result<(), ImportError> {
    let items = alloy_eip7928::total_bal_items(access_list);
    let cost = items.saturating_mul(alloy_eip7928::ITEM_COST as u64);
    if cost > header.gas_limit {
        return Err(ImportError::AccessListTooLarge {
            number,
            hash,
            items,
            cost,
            gas_limit: header.gas_limit,
        });
    }
    check(
        number,
        hash,
        "block access list hash",
        opt(header.block_access_list_hash),
        opt(Some(alloy_eip7928::compute_block_access_list_hash(access_list))),
    )
}

/// Where [`Prepared::new`] recovers the senders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Senders {
    /// On the calling thread only (a block read as already stored that is stored after all).
    ThisThread,
    /// Split over all cores for a large block (recovery is most of a block's CPU time when its
    /// transactions are cheap): a block imported alone, and the blocks a bulk import prepares
    /// ahead, whose recovery then takes the time the writer and the executing thread leave idle
    /// (the preparing thread and its helpers run below the writer's priority).
    AllCores,
}

/// What a block needs that does not depend on its parent's state: its hash, its transactions
/// root and its senders (with the transactions' hashes cached in them). A bulk import makes it
/// on a second thread while the blocks before it execute (`import_files_with`).
#[derive(Debug)]
pub(super) struct Prepared {
    hash: B256,
    /// `None` for a block that was already stored when it was read ([`Prepared::hash_only`]).
    checks: Option<Checks>,
}

/// The parts of [`Prepared`] that only a block about to be stored needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Checks {
    transactions_root: B256,
    /// The senders, or the first transaction whose signature does not recover (index and why).
    senders: Result<Vec<Address>, (usize, String)>,
}

impl Checks {
    fn new(block: &Block<TxEnvelope>, senders: Senders) -> Self {
        let txs = &block.body.transactions;
        let transactions_root = calculate_transaction_root(txs);
        // The hash is cached in each transaction; storing the block reads it (lookup rows).
        for tx in txs {
            tx.tx_hash();
        }
        // The cores are asked only for a block large enough to split: the call reads the
        // cgroup's CPU limits from files, which cost more than an empty block's other checks
        // (a profile of mainnet's first 16,384 blocks, docs/benchmarks/issue-62.md).
        let threads = match senders {
            Senders::AllCores if txs.len() >= SPLIT_FROM => {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            }
            _ => 1,
        };
        Self { transactions_root, senders: recover_senders(txs, threads) }
    }
}

impl Prepared {
    /// The block's hash.
    pub(super) fn hash(&self) -> B256 {
        self.hash
    }

    /// The recovered senders (`None`: a signature did not recover, or they were not
    /// recovered, [`Prepared::hash_only`]).
    pub(super) fn senders(&self) -> Option<&[Address]> {
        self.checks.as_ref()?.senders.as_deref().ok()
    }

    /// Computes it all for `block`.
    pub(super) fn new(block: &Block<TxEnvelope>, senders: Senders) -> Self {
        Self { hash: block.header.hash_slow(), checks: Some(Checks::new(block, senders)) }
    }

    /// Only the hash, for a block at or below the stored head, which is only compared with the
    /// stored block of its number: re-running an import over a stored prefix then costs no
    /// sender recovery. Storing it anyway computes the rest then.
    pub(super) fn hash_only(block: &Block<TxEnvelope>) -> Self {
        Self { hash: block.header.hash_slow(), checks: None }
    }

    /// The transactions root and senders of `block` (the block this was made from).
    pub(super) fn checks_of(&self, block: &Block<TxEnvelope>) -> std::borrow::Cow<'_, Checks> {
        match &self.checks {
            Some(checks) => std::borrow::Cow::Borrowed(checks),
            None => std::borrow::Cow::Owned(Checks::new(block, Senders::ThisThread)),
        }
    }
}

/// The fewest transactions whose senders [`recover_senders`] splits over threads: below it a
/// thread's start costs more than the recoveries it takes (about 48 µs each).
const SPLIT_FROM: usize = 32;

/// Recovers every sender, on up to `threads` threads for a large block. The error names the
/// first bad index.
fn recover_senders(txs: &[TxEnvelope], threads: usize) -> Result<Vec<Address>, (usize, String)> {
    let recover = |offset: usize, chunk: &[TxEnvelope]| -> Result<Vec<Address>, (usize, String)> {
        chunk
            .iter()
            .enumerate()
            .map(|(i, tx)| tx.recover_signer_unchecked().map_err(|e| (offset + i, e.to_string())))
            .collect()
    };
    if threads < 2 || txs.len() < SPLIT_FROM {
        return recover(0, txs);
    }
    let size = txs.len().div_ceil(threads);
    // The first chunk on the calling thread, the others on threads of their own (which take the
    // calling thread's priority: a bulk import's preparing thread runs below the writer's).
    let (first, rest) = txs.split_at(size.min(txs.len()));
    let parts: Vec<Result<Vec<Address>, (usize, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .chunks(size)
            .enumerate()
            .map(|(i, chunk)| scope.spawn(move || recover((i + 1) * size, chunk)))
            .collect();
        let mut parts = vec![recover(0, first)];
        parts.extend(handles.into_iter().map(|h| {
            h.join().unwrap_or_else(|_| Err((0, "sender recovery thread panicked".into())))
        }));
        parts
    });
    let mut senders = Vec::with_capacity(txs.len());
    for part in parts {
        senders.extend(part?);
    }
    Ok(senders)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use alloy_consensus::{SignableTransaction, Signed, TxLegacy};
    use alloy_primitives::{Signature, TxKind, U256};
    use alloy_signer::SignerSync;
    use alloy_signer_local::PrivateKeySigner;

    /// An unsigned transfer of `nonce` wei to `0x0909…09` with that nonce, on chain 1.
    pub(in crate::import) fn transfer(nonce: u64) -> TxLegacy {
        TxLegacy {
            chain_id: Some(1),
            nonce,
            gas_price: 7,
            gas_limit: 21_000,
            to: TxKind::Call(Address::repeat_byte(9)),
            value: U256::from(nonce),
            input: Default::default(),
        }
    }

    /// `n` transfers, each signed by a signer of its own; the indices in `bad` carry a signature
    /// that recovers no key. Returns them with their signers' addresses.
    fn transfers(n: u64, bad: &[u64]) -> (Vec<TxEnvelope>, Vec<Address>) {
        (0..n)
            .map(|i| {
                let signer = PrivateKeySigner::random();
                let tx = transfer(i);
                let signature = match bad.contains(&i) {
                    true => Signature::new(U256::MAX, U256::MAX, false),
                    false => signer.sign_hash_sync(&tx.signature_hash()).expect("sign"),
                };
                (TxEnvelope::Legacy(Signed::new_unhashed(tx, signature)), signer.address())
            })
            .unzip()
    }

    /// Recovery split over threads gives the senders in order, as the signers made them, and
    /// names the first bad transaction whichever chunk it is in.
    #[test]
    fn senders_recovered_on_several_threads_keep_their_order_and_name_the_first_bad_one() {
        let (txs, signers) = transfers(70, &[]);
        for threads in [1, 2, 3, 8] {
            assert_eq!(recover_senders(&txs, threads), Ok(signers.clone()), "{threads} threads");
        }
        for (bad, first) in [(vec![69], 69), (vec![40, 3], 3), (vec![24, 47], 24), (vec![0], 0)] {
            let (txs, _) = transfers(70, &bad);
            for threads in [1, 2, 3] {
                let got = recover_senders(&txs, threads).map_err(|(index, _)| index);
                assert_eq!(got, Err(first), "bad {bad:?}, {threads} threads");
            }
        }
    }
}
