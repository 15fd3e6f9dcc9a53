//! [`build_witness`]: the execution witness of a stored block, from the archive's trie history.
//!
//! The block is executed once on its parent's state through a [`Recorder`], which notes each
//! account, slot, code and block hash the execution reads. The nodes that prove those keys at
//! the parent block come from the stored trie as it was then ([`crate::trie::prove_many`]): one
//! walk of the account trie for every account, one of each storage trie for its slots. Nothing
//! is re-executed over an overlay and no trie is rebuilt: the cost follows the block's reads,
//! not the state's size or the block's age.
//!
//! A stateless run needs one more kind of node: where the block deletes a key and a branch is
//! left with one child, the branch collapses into that child, whose node no proof of a touched
//! key holds. Those are found by running the block statelessly on the witness: each node the
//! run misses is fetched by its place ([`crate::trie::node_at`]) and the run is repeated.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use alloy_consensus::{Block, BlockBody};
use alloy_primitives::{B256, Bytes, keccak256};
use alloy_rlp::Encodable;
use alloy_rpc_types_debug::ExecutionWitness;
use revm::database::DatabaseRef;

use super::WitnessError;
use super::record::{Reads, Recorder};
use crate::chain::ChainSpec;
use crate::evm::execute_block;
use crate::storage::Reader;
use crate::trie::{Multiproof, prove_many};

/// The block a witness is built for, loaded from the archive with its senders.
pub(super) struct Loaded {
    pub(super) block: Block<alloy_consensus::TxEnvelope>,
    pub(super) senders: Vec<alloy_primitives::Address>,
}

/// Loads stored block `number` (header, transactions with senders, ommers, withdrawals).
pub(super) fn load_block(reader: &Reader, number: u64) -> Result<Loaded, WitnessError> {
    let header = reader.header(number)?.ok_or(WitnessError::UnknownBlock(number))?;
    let (body, _) = reader.body(number)?.ok_or(WitnessError::UnknownBlock(number))?;
    let (transactions, senders) =
        reader.transactions_to_execute(number)?.into_iter().map(|t| (t.tx, t.sender)).unzip();
    let body = BlockBody { transactions, ommers: body.ommers, withdrawals: body.withdrawals };
    Ok(Loaded { block: Block { header, body }, senders })
}

/// What [`build_witness`] made, with what it took.
#[derive(Debug)]
pub struct Built {
    /// The witness, in reth's `debug_executionWitness` shape.
    pub witness: ExecutionWitness,
    /// Accounts and slots proven.
    pub keys: usize,
}

/// The execution witness of stored block `number` (at least 1): the trie nodes, codes, key
/// preimages and ancestor headers its execution on block `number - 1`'s state needs. Stops with
/// [`WitnessError::Timeout`] once `timeout` has passed, and with [`WitnessError::Cancelled`]
/// when this thread's cancellation flag (`crate::evm::cancel`) is set, checked between steps.
pub fn build_witness(
    reader: &Reader,
    spec: &ChainSpec,
    number: u64,
    timeout: Option<Duration>,
) -> Result<Built, WitnessError> {
    let deadline = timeout.map(|t| (Instant::now() + t, t));
    let check = || -> Result<(), WitnessError> {
        if crate::evm::cancel::current()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
        {
            return Err(WitnessError::Cancelled);
        }
        if let Some((_, timeout)) = deadline.filter(|(until, _)| Instant::now() >= *until) {
            return Err(WitnessError::Timeout(timeout));
        }
        Ok(())
    };
    let parent = number.checked_sub(1).ok_or(WitnessError::Genesis)?;
    let loaded = load_block(reader, number)?;
    check()?;
    let state = reader.state_at(parent)?;
    let recorder = Recorder::new(&state);
    // Pre-Byzantium receipts carry intermediate roots; only the reads matter here.
    execute_block(spec, &recorder, &loaded.block, &loaded.senders, |_| {
        Ok::<_, std::convert::Infallible>(B256::ZERO)
    })
    .map_err(|e| WitnessError::Execution { number, message: e.to_string() })?;
    let reads = recorder.into_reads();
    check()?;

    let targets: BTreeMap<B256, Vec<B256>> = reads
        .accounts
        .iter()
        .map(|(address, slots)| {
            (keccak256(address), slots.iter().map(|s| keccak256(B256::from(*s))).collect())
        })
        .collect();
    let proof = prove_many(reader, parent, &targets)?;
    check()?;
    let witness = assemble(reader, &state, parent, &reads, &proof)?;
    Ok(Built { witness, keys: targets.len() + targets.values().map(Vec::len).sum::<usize>() })
}

/// The witness of `reads` with the nodes of `proof`, at `parent`.
fn assemble<DB: DatabaseRef>(
    reader: &Reader,
    state: &DB,
    parent: u64,
    reads: &Reads,
    proof: &Multiproof,
) -> Result<ExecutionWitness, WitnessError>
where
    DB::Error: std::fmt::Display,
{
    // By hash: each node once, in a stable order.
    let state_nodes: BTreeMap<B256, Bytes> =
        proof.nodes().map(|node| (keccak256(node), node.clone())).collect();
    let mut codes = Vec::with_capacity(reads.codes.len());
    for hash in &reads.codes {
        let code = state
            .code_by_hash_ref(*hash)
            .map_err(|e| WitnessError::Code { hash: *hash, message: e.to_string() })?;
        codes.push(code.original_bytes());
    }
    let mut keys: Vec<Bytes> =
        reads.accounts.keys().map(|a| Bytes::copy_from_slice(a.as_slice())).collect();
    for slots in reads.accounts.values() {
        keys.extend(slots.iter().map(|s| Bytes::copy_from_slice(&s.to_be_bytes::<32>())));
    }
    // The parent, and every ancestor back to the oldest whose hash was read (each hash is
    // checked by its child's parent hash), oldest first.
    let oldest = reads.oldest_hash.map_or(parent, |n| n.min(parent));
    let mut headers = Vec::with_capacity((parent - oldest + 1) as usize);
    for n in oldest..=parent {
        let header = reader.header(n)?.ok_or(WitnessError::UnknownBlock(n))?;
        let mut rlp = Vec::with_capacity(600);
        header.encode(&mut rlp);
        headers.push(Bytes::from(rlp));
    }
    Ok(ExecutionWitness { state: state_nodes.into_values().collect(), codes, keys, headers })
}
