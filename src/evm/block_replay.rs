//! [`replay_block`]: re-execute a stored block on its parent's state, inspecting some transactions.
//!
//! A transaction's trace must see exactly the state it saw when the block was imported: the
//! state after the parent block, the block's pre-execution system calls (EIP-2935 history,
//! EIP-4788 beacon root), and the block's earlier transactions. The replay therefore drives the
//! same alloy-evm `EthBlockExecutor` as import ([`super::execute_block`]), with the inspector
//! switched off for the transactions before the first traced one.

use std::ops::Range;
use std::time::Duration;

use alloy_consensus::transaction::Recovered;
use alloy_consensus::{Header, TxEnvelope};
use alloy_evm::block::BlockExecutor;
use alloy_evm::eth::receipt_builder::AlloyReceiptBuilder;
use alloy_evm::eth::{EthBlockExecutionCtx, EthBlockExecutor, EthEvmContext};
use alloy_evm::{EthEvmFactory, Evm, EvmFactory, FromRecoveredTx};
use revm::Inspector;
use revm::context::result::ResultAndState;
use revm::context::{BlockEnv, TxEnv};
use revm::database::{DatabaseRef, State, WrapDatabaseRef};

use super::block_env;
use super::call_env::Deadline;
use crate::chain::ChainSpec;

/// The state a replay executes on: the parent's state with the block's changes so far cached
/// on top. Read through it (it is a `DatabaseRef`) to see the state before a traced transaction.
pub type ReplayState<DB> = State<WrapDatabaseRef<DB>>;

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The deadline passed.
    #[error("execution timeout after {0:?}")]
    Timeout(Duration),
    /// The thread's cancellation flag was set (`super::cancel`).
    #[error("cancelled")]
    Cancelled,
    /// The block's pre-execution system calls failed.
    #[error("block-level execution: {0}")]
    Block(String),
    /// A transaction could not be executed (a stored block executed at import, so this means a
    /// state read failed or the stored data is inconsistent).
    #[error("transaction {index}: {message}")]
    Transaction {
        /// Index of the transaction in the block.
        index: usize,
        /// What the executor said.
        message: String,
    },
}

/// A stored block to replay: its header and its transactions with their senders.
#[derive(Debug, Clone, Copy)]
pub struct ReplayBlock<'a> {
    /// The block's header.
    pub header: &'a Header,
    /// The block's transactions, in order, senders recovered.
    pub transactions: &'a [Recovered<TxEnvelope>],
}

/// One traced transaction, handed to the caller right after it executed (before its changes
/// are committed to the replay state).
#[derive(Debug)]
pub struct Traced<'a, I, DB: DatabaseRef> {
    /// Index of the transaction in the block.
    pub index: usize,
    /// The inspector, holding what it recorded for this transaction. Reset it here
    /// if it must not carry anything over to the next traced transaction.
    pub inspector: &'a mut I,
    /// The transaction's environment.
    pub tx: &'a TxEnv,
    /// The block's environment.
    pub block: &'a BlockEnv,
    /// The execution result and the state it changed.
    pub result: &'a ResultAndState,
    /// The state before this transaction (parent state, system calls, earlier transactions).
    pub state: &'a ReplayState<DB>,
}

/// Replays `block` on `parent_state`, the state after its parent, and calls `on_traced` for
/// each transaction in `traced`, which ran with `inspector` enabled. Transactions before
/// `traced.start` run without inspection; those from `traced.end` on are not executed. Returns
/// what `on_traced` returned, in order.
///
/// `timeout` bounds the whole replay, the untraced transactions included: one deadline per
/// call, checked by the EVM inside traced transactions and by the clock before each
/// transaction.
pub fn replay_block<DB, I, T>(
    spec: &ChainSpec,
    parent_state: DB,
    block: ReplayBlock<'_>,
    traced: Range<usize>,
    inspector: &mut I,
    timeout: Duration,
    mut on_traced: impl FnMut(Traced<'_, I, DB>) -> T,
) -> Result<Vec<T>, ReplayError>
where
    DB: DatabaseRef + std::fmt::Debug,
    DB::Error: std::fmt::Display + Send + Sync + 'static,
    I: for<'s> Inspector<EthEvmContext<&'s mut ReplayState<DB>>>,
{
    let ReplayBlock { header, transactions } = block;
    let end = traced.end.min(transactions.len());
    let mut state = State::builder().with_database_ref(parent_state).build();
    super::execute::apply_dao_fork(spec, header.number, &mut state)
        .map_err(|e| ReplayError::Block(e.to_string()))?;
    let env = block_env(spec, header);
    let block_env = env.block_env.clone();
    let mut deadline = Deadline::new(timeout);
    let mut out = Vec::with_capacity(end.saturating_sub(traced.start));
    let mut evm = EthEvmFactory::default().create_evm_with_inspector(
        &mut state,
        env,
        (&mut deadline, &mut *inspector),
    );
    evm.disable_inspector();
    let ctx = EthBlockExecutionCtx {
        parent_hash: header.parent_hash,
        parent_beacon_block_root: header.parent_beacon_block_root,
        // Ommers and withdrawals only matter after the last transaction (rewards), which
        // a replay never reaches.
        ommers: &[],
        withdrawals: None,
        extra_data: header.extra_data.clone(),
        tx_count_hint: Some(end),
        slot_number: header.slot_number,
    };
    let mut executor = EthBlockExecutor::new(
        evm,
        ctx,
        super::execute::WithoutDao(spec),
        AlloyReceiptBuilder::default(),
    );
    executor.apply_pre_execution_changes().map_err(|e| ReplayError::Block(e.to_string()))?;
    let tx_error = |index: usize| {
        move |e: alloy_evm::block::BlockExecutionError| ReplayError::Transaction {
            index,
            message: e.to_string(),
        }
    };
    for (index, tx) in transactions.iter().enumerate().take(end) {
        let deadline = &mut executor.evm_mut().inspector_mut().0;
        if deadline.check_now() {
            return Err(if deadline.cancelled() {
                ReplayError::Cancelled
            } else {
                ReplayError::Timeout(timeout)
            });
        }
        let tx_env = TxEnv::from_recovered_tx(tx.inner(), tx.signer());
        if index < traced.start {
            executor.execute_transaction((tx_env, tx)).map_err(tx_error(index))?;
            continue;
        }
        executor.evm_mut().enable_inspector();
        let output = executor
            .execute_transaction_without_commit((tx_env.clone(), tx))
            .map_err(tx_error(index))?;
        let (db, (deadline, inspector), _) = executor.evm_mut().components_mut();
        // Halted by the deadline: the result is cut short, not the transaction's.
        if deadline.cancelled() {
            return Err(ReplayError::Cancelled);
        }
        if deadline.expired() {
            return Err(ReplayError::Timeout(timeout));
        }
        out.push(on_traced(Traced {
            index,
            inspector: &mut **inspector,
            tx: &tx_env,
            block: &block_env,
            result: &output.result,
            state: &**db,
        }));
        if index + 1 < end {
            executor.commit_transaction(output);
        }
    }
    Ok(out)
}
