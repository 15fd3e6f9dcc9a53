//! [`run_block`]: execute a block over its witness and check it against its header.

use std::sync::Arc;

use alloy_consensus::proofs::{
    calculate_ommers_root, calculate_transaction_root, calculate_withdrawals_root,
};
use alloy_consensus::transaction::SignerRecoverable;
use alloy_consensus::{Block, ReceiptEnvelope, TxEnvelope};
use alloy_eips::eip7685::Requests;
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::B256;
use revm::database::states::StateChangeset;

pub use super::state::StateReads;
use super::state::WitnessState;
use super::{Witness, WitnessError, post_state_root};
use crate::chain::ChainSpec;
use crate::evm::execute_block;

/// What a stateless run of a block gave; every check against the header held.
#[derive(Debug)]
pub struct StatelessOutcome {
    /// One receipt per transaction.
    pub receipts: Vec<ReceiptEnvelope>,
    /// EIP-7685 requests (Prague+).
    pub requests: Requests,
    /// Gas used by the block.
    pub gas_used: u64,
    /// The post-state root computed over the witness (equal to the header's).
    pub state_root: B256,
    /// The block's state changes.
    pub changes: StateChangeset,
    /// What the block read from the parent state, as plain values, and the headers it used.
    pub reads: StateReads,
    /// The witness's trie nodes the run resolved: the part of the witness the block needs.
    pub nodes_used: std::collections::HashSet<B256>,
    /// Reads through a node the witness lacks, taken as absent ([`run_block_with`]); empty
    /// otherwise.
    pub unresolved: Vec<String>,
}

fn check<T: PartialEq + std::fmt::Display>(
    what: &'static str,
    expected: T,
    got: T,
) -> Result<(), WitnessError> {
    if expected == got {
        return Ok(());
    }
    Err(WitnessError::Mismatch { what, expected: expected.to_string(), got: got.to_string() })
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

/// Executes `block` over the parent state in `witness` under `spec` and checks, against the
/// block's header: the parent (the witness's header with `parent_hash`), transactions root,
/// ommers hash, withdrawals root, gas used, receipts root, logs bloom, requests hash and blob
/// gas used (where the fork has them) and the post-state root. The first difference is a
/// [`WitnessError::Mismatch`] naming it; a node, code or header the run needs but the witness
/// lacks is an error naming it.
pub fn run_block(
    spec: &ChainSpec,
    witness: &Witness,
    block: &Block<TxEnvelope>,
) -> Result<StatelessOutcome, WitnessError> {
    run_block_with(spec, witness, block, false)
}

/// [`run_block`]; with `missing_as_absent`, a read through a node the witness lacks gives an
/// absent account or an unset slot, as geth reads an incomplete witness
/// ([`WitnessState::missing_as_absent`]); every check against the header is still made, and
/// [`StatelessOutcome::unresolved`] names those reads.
pub fn run_block_with(
    spec: &ChainSpec,
    witness: &Witness,
    block: &Block<TxEnvelope>,
    missing_as_absent: bool,
) -> Result<StatelessOutcome, WitnessError> {
    let header = &block.header;
    let number = header.number;
    let parent = witness
        .header_by_hash(header.parent_hash)
        .ok_or_else(|| WitnessError::MissingHeader { number: number.saturating_sub(1) })?
        .clone();
    check("parent number", number.saturating_sub(1), parent.number)?;

    let body = &block.body;
    check(
        "transactions root",
        header.transactions_root,
        calculate_transaction_root(&body.transactions),
    )?;
    check("ommers hash", header.ommers_hash, calculate_ommers_root(&body.ommers))?;
    let withdrawals_root = body.withdrawals.as_ref().map(|w| calculate_withdrawals_root(w));
    if spec.is_shanghai_active_at_timestamp(header.timestamp)
        || header.withdrawals_root.is_some()
        || withdrawals_root.is_some()
    {
        check("withdrawals root", opt(header.withdrawals_root), opt(withdrawals_root))?;
    }
    let senders = body
        .transactions
        .iter()
        .enumerate()
        .map(|(index, tx)| {
            tx.recover_signer_unchecked()
                .map_err(|e| WitnessError::Signature { index, message: e.to_string() })
        })
        .collect::<Result<Vec<_>, _>>()?;

    let state =
        WitnessState::new(Arc::new(witness.clone()), parent).missing_as_absent(missing_as_absent);
    let executed =
        execute_block(spec, &state, block, &senders, |changes| post_state_root(&state, changes));
    let outcome = match executed {
        Ok(outcome) => outcome,
        // The EVM carries database errors as text: the state kept the first one whole.
        Err(e) => return Err(state.first_error().unwrap_or(WitnessError::Execution(e))),
    };
    if let Some(e) = state.first_error() {
        return Err(e);
    }

    check("gas used", header.gas_used, outcome.gas_used)?;
    check("receipts root", header.receipts_root, outcome.receipts_root)?;
    check("logs bloom", header.logs_bloom, outcome.logs_bloom)?;
    if spec.is_prague_active_at_timestamp(header.timestamp) || header.requests_hash.is_some() {
        check(
            "requests hash",
            opt(header.requests_hash),
            opt(Some(outcome.requests.requests_hash())),
        )?;
    }
    if spec.is_cancun_active_at_timestamp(header.timestamp) || header.blob_gas_used.is_some() {
        check("blob gas used", opt(header.blob_gas_used), opt(Some(outcome.blob_gas_used)))?;
    }
    let state_root = post_state_root(&state, &outcome.changes)?;
    check("state root", header.state_root, state_root)?;
    Ok(StatelessOutcome {
        receipts: outcome.receipts,
        requests: outcome.requests,
        gas_used: outcome.gas_used,
        state_root,
        changes: outcome.changes,
        reads: state.reads(),
        nodes_used: state.nodes_used(),
        unresolved: state.unresolved(),
    })
}
