//! [`execute_block`]: run one block on a state view and return receipts and state changes.

use std::borrow::Cow;

use alloy_consensus::TxReceipt;
use alloy_consensus::proofs::calculate_receipt_root;
use alloy_consensus::transaction::Recovered;
use alloy_consensus::{Block, Eip658Value, ReceiptEnvelope, TxEnvelope};
use alloy_eip7928::BlockAccessList;
use alloy_eips::eip7685::Requests;
use alloy_evm::block::BlockExecutor;
use alloy_evm::eth::dao_fork::{DAO_HARDFORK_ACCOUNTS, DAO_HARDFORK_BENEFICIARY};
use alloy_evm::eth::receipt_builder::AlloyReceiptBuilder;
use alloy_evm::eth::spec::EthExecutorSpec;
use alloy_evm::eth::{EthBlockExecutionCtx, EthBlockExecutor};
use alloy_evm::{EthEvmFactory, Evm, EvmFactory};
use alloy_hardforks::EthereumHardforks;
use alloy_hardforks::{EthereumHardfork, ForkCondition};
use alloy_primitives::{Address, B256, Bloom};
use revm::database::states::StateChangeset;
use revm::database::states::bundle_state::BundleRetention;
use revm::database::{DatabaseRef, OriginalValuesKnown, State};
use revm::state::bal::BlockAccessIndex;

use super::{EvmError, block_env};
use crate::chain::ChainSpec;

/// What executing a block produced.
#[derive(Debug)]
pub struct BlockOutcome {
    /// One receipt per transaction; pre-Byzantium receipts carry the intermediate state root.
    pub receipts: Vec<ReceiptEnvelope>,
    /// The root of the receipts' trie, as a header commits to it. Computed where the block
    /// executes: a bulk import executes on a thread of its own, ahead of the writer, which
    /// took 2.3 % of its samples for this on the 10,000-block chain.
    pub receipts_root: B256,
    /// The union of the receipts' blooms, as a header commits to it.
    pub logs_bloom: Bloom,
    /// EIP-7685 requests (Prague+).
    pub requests: Requests,
    /// Gas used by all transactions.
    pub gas_used: u64,
    /// Blob gas used (Cancun+).
    pub blob_gas_used: u64,
    /// The state changes of the whole block, rewards and withdrawals included.
    pub changes: StateChangeset,
    /// Every account the block's execution loaded (senders, callees, created and destroyed
    /// accounts, precompiles called, the author, ommer authors, withdrawal recipients), sorted:
    /// a superset of the addresses its traces name.
    pub touched: Vec<alloy_primitives::Address>,
    /// The block access list (EIP-7928) its execution built, from Amsterdam on: every account
    /// and slot the block read or changed, each change at its index (0 the system calls before
    /// the transactions, `i + 1` transaction `i`, `n + 1` what follows the last of `n`).
    pub access_list: Option<BlockAccessList>,
}

/// Executes `block` (whose senders are `senders`) on top of `parent_state`.
///
/// Before Byzantium a receipt holds the state root after its transaction (without the block
/// reward, which is paid at the end, as geth does). For those blocks `intermediate_root` is
/// called after each transaction with the cumulative changes of the block so far and must
/// return the state root of parent state + those changes. It is not called from Byzantium on.
pub fn execute_block<DB, F, E>(
    spec: &ChainSpec,
    parent_state: DB,
    block: &Block<TxEnvelope>,
    senders: &[Address],
    mut intermediate_root: F,
) -> Result<BlockOutcome, EvmError>
where
    DB: DatabaseRef + std::fmt::Debug,
    F: FnMut(&StateChangeset) -> Result<B256, E>,
    E: std::fmt::Display,
{
    let header = &block.header;
    let pre_byzantium = !spec.is_byzantium_active_at_block(header.number);
    let amsterdam = spec.is_amsterdam_active_at_timestamp(header.timestamp);
    // From Amsterdam on the state records what each step reads and writes, at the step's
    // index (EIP-7928), which is set below before each transaction and before `finish`.
    let mut state = State::builder()
        .with_database_ref(parent_state)
        .with_bundle_update()
        .with_bal_builder_if(amsterdam)
        .build();
    apply_dao_fork(spec, header.number, &mut state)?;
    let env = block_env(spec, header);
    // System calls get execution-specs' gas (`system_gas`).
    let evm = super::system_gas::SystemGasEvm(
        EthEvmFactory::default().create_evm(&mut state, env).into_inner(),
    );
    let ctx = EthBlockExecutionCtx {
        parent_hash: header.parent_hash,
        parent_beacon_block_root: header.parent_beacon_block_root,
        ommers: &block.body.ommers,
        withdrawals: block.body.withdrawals.as_ref().map(|w| Cow::Borrowed(w.as_slice())),
        extra_data: header.extra_data.clone(),
        tx_count_hint: Some(block.body.transactions.len()),
        slot_number: header.slot_number,
    };
    let mut executor =
        EthBlockExecutor::new(evm, ctx, WithoutDao(spec), AlloyReceiptBuilder::default());
    executor.apply_pre_execution_changes().map_err(|e| EvmError::Block(e.to_string()))?;
    for (index, (tx, sender)) in block.body.transactions.iter().zip(senders).enumerate() {
        // EIP-7928: transaction `i` reads and writes at index `i + 1`.
        executor.evm_mut().db_mut().set_bal_index(BlockAccessIndex::new(index as u64 + 1));
        executor
            .execute_transaction(Recovered::new_unchecked(tx, *sender))
            .map_err(|e| EvmError::Transaction { index, message: e.to_string() })?;
        if pre_byzantium {
            let db = executor.evm_mut().db_mut();
            db.merge_transitions(BundleRetention::PlainState);
            // `No`: every touched value, so that re-applying the cumulative set also resets
            // slots that went back to their original value within the block.
            let changes = db.bundle_state.to_plain_state(OriginalValuesKnown::No);
            let root = intermediate_root(&changes)
                .map_err(|e| EvmError::IntermediateRoot { index, message: e.to_string() })?;
            if let Some(r) =
                executor.receipts.last_mut().and_then(|r| r.as_receipt_with_bloom_mut())
            {
                r.receipt.status = Eip658Value::PostState(root);
            }
        }
    }
    // The requests' system calls, withdrawals and rewards come after the last transaction
    // (alloy-evm's `finish` leaves the index where the last transaction put it).
    let post_execution = block.body.transactions.len() as u64 + 1;
    executor.evm_mut().db_mut().set_bal_index(BlockAccessIndex::new(post_execution));
    let (evm, result) = executor.finish().map_err(|e| EvmError::Block(e.to_string()))?;
    drop(evm);
    let access_list = state.take_built_alloy_bal();
    let mut touched: Vec<_> = state.cache.accounts.keys().copied().collect();
    touched.sort_unstable();
    state.merge_transitions(BundleRetention::Reverts);
    let bundle = state.take_bundle();
    let known = if pre_byzantium { OriginalValuesKnown::No } else { OriginalValuesKnown::Yes };
    let changes = bundle.to_plain_state(known);
    let receipts_root = calculate_receipt_root(&result.receipts);
    let logs_bloom = result.receipts.iter().fold(Bloom::ZERO, |mut bloom, r| {
        bloom.accrue_bloom(&r.bloom());
        bloom
    });
    Ok(BlockOutcome {
        receipts: result.receipts,
        receipts_root,
        logs_bloom,
        requests: result.requests,
        gas_used: result.gas_used,
        blob_gas_used: result.blob_gas_used,
        changes,
        touched,
        access_list,
    })
}

/// The chain's forks as alloy-evm's block executor sees them: without the DAO fork, whose
/// balance transfer the executor would make after the block's transactions. EIP-779 (and
/// geth) make it before them; [`apply_dao_fork`] does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WithoutDao<'a>(pub(crate) &'a ChainSpec);

impl EthereumHardforks for WithoutDao<'_> {
    fn ethereum_fork_activation(&self, fork: EthereumHardfork) -> ForkCondition {
        match fork {
            EthereumHardfork::Dao => ForkCondition::Never,
            other => self.0.ethereum_fork_activation(other),
        }
    }
}

impl EthExecutorSpec for WithoutDao<'_> {
    fn deposit_contract_address(&self) -> Option<Address> {
        self.0.deposit_contract_address()
    }
}

/// EIP-779: at the DAO fork block, before its transactions run, the balances of the DAO and
/// its child contracts move to the refund contract (geth's `ApplyDAOHardFork`). Before EIP-161
/// an account this leaves empty (or creates, as the refund contract may be) stays in the
/// state, as in geth: it is committed as created, since revm's direct commits otherwise clear
/// touched empty accounts by EIP-161's rule.
pub(crate) fn apply_dao_fork<DB: revm::Database + revm::DatabaseCommit>(
    spec: &ChainSpec,
    number: u64,
    db: &mut DB,
) -> Result<(), EvmError>
where
    DB::Error: std::fmt::Display,
{
    use revm::state::{Account, TransactionId};
    if !spec.ethereum_fork_activation(EthereumHardfork::Dao).transitions_at_block(number) {
        return Ok(());
    }
    let fail = |e: DB::Error| EvmError::Block(format!("DAO fork balance transfer: {e}"));
    let keep_empty = !spec.is_spurious_dragon_active_at_block(number);
    let load = |db: &mut DB, address| -> Result<Account, EvmError> {
        let mut account = match db.basic(address).map_err(fail)? {
            Some(info) => Account::from(info),
            None => Account::new_not_existing(TransactionId::ZERO),
        };
        account.mark_touch();
        Ok(account)
    };
    let mut changes = Vec::with_capacity(DAO_HARDFORK_ACCOUNTS.len() + 1);
    let mut drained = alloy_primitives::U256::ZERO;
    for address in DAO_HARDFORK_ACCOUNTS {
        let mut account = load(db, address)?;
        drained += std::mem::take(&mut account.info.balance);
        changes.push((address, account));
    }
    let mut refund = load(db, DAO_HARDFORK_BENEFICIARY)?;
    refund.info.balance += drained;
    changes.push((DAO_HARDFORK_BENEFICIARY, refund));
    for (_, account) in &mut changes {
        if keep_empty && account.info.is_empty() {
            account.mark_created();
        }
    }
    db.commit_iter(&mut changes.into_iter());
    Ok(())
}
