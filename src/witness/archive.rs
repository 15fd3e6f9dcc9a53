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
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_consensus::{Block, BlockBody, TxEnvelope};
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Address, B256, Bytes, keccak256};
use alloy_rlp::{Decodable, Encodable};
use alloy_rpc_types_debug::ExecutionWitness;
use alloy_trie::Nibbles;
use alloy_trie::nodes::TrieNode;
use revm::database::DatabaseRef;

use super::record::{ReadKeys, Recorder};
use super::{Witness, WitnessError, WitnessState, post_state_root, run_block};
use crate::chain::ChainSpec;
use crate::evm::execute_block;
use crate::storage::Reader;
use crate::trie::{Multiproof, TrieOwner, node_at, prove_many};

/// Stored block `number` (header, transactions, ommers, withdrawals) with its senders.
pub fn stored_block(
    reader: &Reader,
    number: u64,
) -> Result<(Block<TxEnvelope>, Vec<Address>), WitnessError> {
    let header = reader.header(number)?.ok_or(WitnessError::UnknownBlock(number))?;
    let (body, _) = reader.body(number)?.ok_or(WitnessError::UnknownBlock(number))?;
    let (transactions, senders) =
        reader.transactions_to_execute(number)?.into_iter().map(|t| (t.tx, t.sender)).unzip();
    let body = BlockBody { transactions, ommers: body.ommers, withdrawals: body.withdrawals };
    Ok((Block { header, body }, senders))
}

/// What [`build_witness`] made, with what it took.
#[derive(Debug)]
pub struct Built {
    /// The witness, in reth's `debug_executionWitness` shape.
    pub witness: ExecutionWitness,
    /// Accounts and slots proven.
    pub keys: usize,
    /// Nodes added for branches the block's deletions collapse.
    pub collapsed: usize,
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
    let started = Instant::now();
    let (block, senders) = stored_block(reader, number)?;
    check()?;
    let state = reader.state_at(parent)?;
    let recorder = Recorder::new(&state);
    // Pre-Byzantium receipts carry intermediate roots; only the reads and changes matter here.
    let outcome = execute_block(spec, &recorder, &block, &senders, |_| {
        Ok::<_, std::convert::Infallible>(B256::ZERO)
    })
    .map_err(|e| WitnessError::Archive { number, message: e.to_string() })?;
    let reads = recorder.into_reads();
    check()?;

    let targets: BTreeMap<B256, Vec<B256>> = reads
        .accounts
        .iter()
        .map(|(address, slots)| {
            (keccak256(address), slots.iter().map(|s| keccak256(B256::from(*s))).collect())
        })
        .collect();
    let executed = started.elapsed();
    let mut proof = prove_many(reader, parent, &targets)?;
    let proved = started.elapsed();
    let mut witness = assemble(reader, &state, parent, &reads)?;
    for node in proof.nodes() {
        witness.add_node(node.clone());
    }
    // The post-state root over the witness, with the changes just computed: each node a
    // collapsing branch needs is added until it is the header's (cheap: only the tries are
    // updated). Every read is proven and the root holds, so the witness re-executes the block.
    // Before Byzantium the receipts also carry a root after each transaction, whose
    // intermediate states may collapse other branches: there the whole block is then run
    // statelessly, and a node still missing is added the same way.
    let parent_header = block_parent(reader, parent)?;
    let pre_byzantium = !spec.is_byzantium_active_at_block(number);
    let mut added = 0usize;
    let mut root_holds = false;
    loop {
        check()?;
        let missing = if root_holds {
            run_block(spec, &witness, &block).map(|_| ())
        } else {
            let state = WitnessState::new(Arc::new(witness.clone()), parent_header.clone());
            match post_state_root(&state, &outcome.changes) {
                Ok(root) if root == block.header.state_root => Ok(()),
                Ok(root) => {
                    return Err(WitnessError::Archive {
                        number,
                        message: format!(
                            "the witness gives state root {root}, not the header's {}",
                            block.header.state_root
                        ),
                    });
                }
                Err(e) => Err(e),
            }
        };
        let hash = match missing {
            Ok(()) if root_holds || !pre_byzantium => break,
            Ok(()) => {
                root_holds = true;
                continue;
            }
            Err(WitnessError::MissingNode { hash, .. }) => hash,
            Err(e) => {
                return Err(WitnessError::Archive {
                    number,
                    message: format!("its witness does not re-execute: {e}"),
                });
            }
        };
        let node = place_of(&proof, &hash)
            .map(|(owner, path)| node_at(reader, parent, owner, &path).map(|n| (owner, path, n)))
            .transpose()?;
        let Some((owner, path, Some(node))) =
            node.filter(|(_, _, n)| n.as_ref().is_some_and(|n| keccak256(n) == hash))
        else {
            return Err(WitnessError::Archive {
                number,
                message: format!(
                    "the stateless run needs trie node {hash}, which no proven node names"
                ),
            });
        };
        witness.add_node(node.clone());
        proof.tries.entry(owner).or_default().insert(path, node);
        added += 1;
    }
    // Where a witness's time went, in microseconds per phase.
    tracing::debug!(
        target: "witness",
        number,
        execute_us = executed.as_micros() as u64,
        prove_us = (proved - executed).as_micros() as u64,
        verify_us = (started.elapsed() - proved).as_micros() as u64,
        nodes = witness.nodes.len(),
        collapsed = added,
        "witness built"
    );
    Ok(Built {
        witness: execution_witness(&witness),
        keys: targets.len() + targets.values().map(Vec::len).sum::<usize>(),
        collapsed: added,
    })
}

/// The header of `parent`, the block the witness's state is after.
fn block_parent(reader: &Reader, parent: u64) -> Result<alloy_consensus::Header, WitnessError> {
    reader.header(parent)?.ok_or(WitnessError::UnknownBlock(parent))
}

/// Where the node with hash `hash` sits: the trie and path of the proven node that names it
/// as a child.
fn place_of(proof: &Multiproof, hash: &B256) -> Option<(TrieOwner, Nibbles)> {
    for (owner, nodes) in &proof.tries {
        for (path, rlp) in nodes {
            let Ok(node) = TrieNode::decode(&mut rlp.as_ref()) else { continue };
            match node {
                TrieNode::Branch(branch) => {
                    let mut children = branch.stack.iter();
                    for nibble in 0..16u8 {
                        if !branch.state_mask.is_bit_set(nibble) {
                            continue;
                        }
                        let child = children.next()?;
                        if child.as_hash().as_ref() == Some(hash) {
                            let mut at = *path;
                            at.push(nibble);
                            return Some((*owner, at));
                        }
                    }
                }
                TrieNode::Extension(ext) if ext.child.as_hash().as_ref() == Some(hash) => {
                    let mut at = *path;
                    at.extend(&ext.key);
                    return Some((*owner, at));
                }
                _ => {}
            }
        }
    }
    None
}

/// The witness of `reads` at `parent` without its trie nodes: codes, key preimages, headers.
fn assemble<DB: DatabaseRef>(
    reader: &Reader,
    state: &DB,
    parent: u64,
    reads: &ReadKeys,
) -> Result<Witness, WitnessError>
where
    DB::Error: std::fmt::Display,
{
    let mut witness = Witness::default();
    for hash in &reads.codes {
        let code = state.code_by_hash_ref(*hash).map_err(|e| WitnessError::Archive {
            number: parent + 1,
            message: format!("code {hash}: {e}"),
        })?;
        witness.add_code(code.original_bytes());
    }
    witness.keys = reads.accounts.keys().map(|a| Bytes::copy_from_slice(a.as_slice())).collect();
    for slots in reads.accounts.values() {
        witness.keys.extend(slots.iter().map(|s| Bytes::copy_from_slice(&s.to_be_bytes::<32>())));
    }
    // The parent, and every ancestor back to the oldest whose hash was read (each hash is
    // checked by its child's parent hash).
    let oldest = reads.oldest_hash.map_or(parent, |n| n.min(parent));
    for n in oldest..=parent {
        witness.headers.push(reader.header(n)?.ok_or(WitnessError::UnknownBlock(n))?);
    }
    Ok(witness)
}

/// `witness` in reth's `debug_executionWitness` shape: nodes and codes ordered by hash, keys
/// as read (accounts, then each one's slots), headers as RLP, oldest first.
fn execution_witness(witness: &Witness) -> ExecutionWitness {
    let sorted = |map: &std::collections::HashMap<B256, Bytes>| {
        let mut items: Vec<_> = map.iter().collect();
        items.sort_unstable_by_key(|(hash, _)| **hash);
        items.into_iter().map(|(_, v)| v.clone()).collect()
    };
    let mut headers: Vec<_> = witness.headers.iter().collect();
    headers.sort_by_key(|h| h.number);
    ExecutionWitness {
        state: sorted(&witness.nodes),
        codes: sorted(&witness.codes),
        keys: witness.keys.clone(),
        headers: headers
            .into_iter()
            .map(|h| {
                let mut rlp = Vec::with_capacity(600);
                h.encode(&mut rlp);
                Bytes::from(rlp)
            })
            .collect(),
    }
}
