//! Simulated calls (`eth_call`, `trace_call`): the call environment of block N and its rules.
//!
//! The environment is block N's own header on the state after block N. Switched off, as for
//! every node's `eth_call`: nonce check, EIP-3607, fee-cap-vs-base-fee, block gas limit and the
//! EIP-7825 per-transaction cap. Kept: intrinsic gas, and the balance check for priced calls.

use std::time::{Duration, Instant};

use alloy_consensus::Header;
use alloy_evm::overrides::{apply_block_overrides, apply_state_overrides};
use alloy_evm::rpc::TryIntoTxEnv;
use alloy_evm::{EthEvmFactory, Evm, EvmEnv, EvmFactory};
use alloy_primitives::map::AddressSet;
use alloy_primitives::{Address, U256};
use alloy_rpc_types_eth::state::StateOverride;
use alloy_rpc_types_eth::{BlockOverrides, TransactionRequest};
use revm::context::TxEnv;
use revm::context::result::{EVMError, InvalidTransaction, ResultAndState};
use revm::context::{ContextTr, JournalTr};
use revm::database::{DatabaseRef, State, WrapDatabaseRef};
use revm::interpreter::{
    CallInputs, CallOutcome, CreateInputs, CreateOutcome, InstructionResult, Interpreter,
    InterpreterTypes,
};
use revm::{Database, Inspector};

use super::block_env;
use crate::chain::ChainSpec;

/// Why a call could not run (a failing call that ran is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The request is malformed or contradictory.
    #[error("{0}")]
    InvalidRequest(String),
    /// Gas limit below the intrinsic cost.
    #[error("intrinsic gas too low: have {have}, want {want}")]
    IntrinsicGasTooLow {
        /// Gas given.
        have: u64,
        /// Gas needed.
        want: u64,
    },
    /// The sender cannot afford gas × price + value.
    #[error("insufficient funds for gas * price + value: have {have}, want {want}")]
    InsufficientFunds {
        /// Balance.
        have: U256,
        /// Needed.
        want: U256,
    },
    /// The deadline passed.
    #[error("execution timeout after {0:?}")]
    Timeout(Duration),
    /// Another pre-execution rejection.
    #[error("{0}")]
    Rejected(String),
    /// Reading state failed.
    #[error("state read failed: {0}")]
    Database(String),
}

/// A call and its optional overrides, as `eth_call` and `trace_call` receive them.
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    /// The transaction request.
    pub tx: TransactionRequest,
    /// Per-account overrides.
    pub state_overrides: Option<StateOverride>,
    /// Block environment overrides.
    pub block_overrides: Option<BlockOverrides>,
}

/// A call ready to execute: the state view (with overrides applied), environment and tx.
#[derive(Debug)]
pub struct PreparedCall<DB: DatabaseRef> {
    /// The state view; after execution it still holds the pre-call values (nothing is committed).
    pub state: State<WrapDatabaseRef<DB>>,
    /// Config and block environment.
    pub env: EvmEnv,
    /// The transaction.
    pub tx: TxEnv,
    /// Precompiles moved by `movePrecompileToAddress` overrides: (from, to).
    pub precompile_moves: Vec<PrecompileMove>,
}

fn db_err(e: impl std::fmt::Display) -> CallError {
    CallError::Database(e.to_string())
}

/// Builds the environment for `req` at block `header` with state `db` (the state after it).
pub fn prepare_call<DB>(
    spec: &ChainSpec,
    header: &Header,
    db: DB,
    req: CallRequest,
    gas_cap: u64,
) -> Result<PreparedCall<DB>, CallError>
where
    DB: DatabaseRef,
    DB::Error: std::fmt::Display,
{
    prepare_call_on(spec, header, State::builder().with_database_ref(db).build(), req, gas_cap)
}

/// [`prepare_call`] on a state that may already hold changes (calls after calls:
/// `trace_callMany` commits each call's changes before preparing the next).
pub fn prepare_call_on<DB>(
    spec: &ChainSpec,
    header: &Header,
    mut state: State<WrapDatabaseRef<DB>>,
    req: CallRequest,
    gas_cap: u64,
) -> Result<PreparedCall<DB>, CallError>
where
    DB: DatabaseRef,
    DB::Error: std::fmt::Display,
{
    let mut env = block_env(spec, header);
    env.cfg_env.disable_block_gas_limit = true;
    env.cfg_env.disable_eip3607 = true;
    env.cfg_env.disable_base_fee = true;
    env.cfg_env.disable_nonce_check = true;
    env.cfg_env.tx_gas_limit_cap = Some(u64::MAX);
    env.cfg_env.memory_limit = u64::from(u32::MAX);

    if let Some(overrides) = req.block_overrides {
        apply_block_overrides(overrides, &mut state, &mut env.block_env);
    }
    let mut precompile_moves = Vec::new();
    if let Some(overrides) = req.state_overrides {
        precompile_moves = precompile_moves_of(&overrides);
        apply_state_overrides(overrides, &mut state)
            .map_err(|e| CallError::InvalidRequest(e.to_string()))?;
    }

    let mut tx = req.tx;
    if let (Some(data), Some(input)) = (&tx.input.data, &tx.input.input)
        && data != input
    {
        return Err(CallError::InvalidRequest(
            "both \"data\" and \"input\" are set and not equal. Please use \"input\" to pass \
             transaction call data"
                .into(),
        ));
    }
    let gas_given = tx.gas.is_some();
    tx.gas = Some(tx.gas.map_or(gas_cap, |g| g.min(gas_cap)));
    let from = tx.from.unwrap_or_default();
    tx.from = Some(from);
    let sender = state.basic(from).map_err(db_err)?;
    tx.nonce = Some(sender.as_ref().map_or(0, |a| a.nonce));
    // A call that names no price pays none, as in geth: the base fee (and, without a blob fee
    // cap, the blob base fee) is taken as 0 before alloy-evm fills in defaults, which would
    // otherwise price a blob call at the block's base fee.
    let unpriced = [tx.gas_price, tx.max_fee_per_gas, tx.max_priority_fee_per_gas]
        .iter()
        .all(|p| p.is_none_or(|p| p == 0));
    if unpriced {
        env.block_env.basefee = 0;
    }
    if tx.max_fee_per_blob_gas.is_none_or(|p| p == 0)
        && let Some(blob) = env.block_env.blob_excess_gas_and_price.as_mut()
    {
        blob.blob_gasprice = 0;
    }
    let mut tx_env: TxEnv =
        tx.try_into_tx_env(&env).map_err(|e| CallError::InvalidRequest(e.to_string()))?;
    if tx_env.gas_price == 0 {
        env.block_env.basefee = 0;
    } else if !gas_given {
        // A priced call without gas gets what the sender can pay for (as reth does), so that
        // the default cap does not turn every priced call into "insufficient funds".
        let balance = sender.as_ref().map_or(U256::ZERO, |a| a.balance);
        let allowance = balance.saturating_sub(tx_env.value) / U256::from(tx_env.gas_price);
        tx_env.gas_limit = tx_env.gas_limit.min(u64::try_from(allowance).unwrap_or(u64::MAX));
    }
    Ok(PreparedCall { state, env, tx: tx_env, precompile_moves })
}

/// Executes a prepared call with `inspector` under a deadline. Nothing is committed.
pub fn execute_call<DB, I>(
    call: &mut PreparedCall<DB>,
    inspector: I,
    timeout: Duration,
) -> Result<ResultAndState, CallError>
where
    DB: DatabaseRef + std::fmt::Debug,
    DB::Error: std::fmt::Display + Send + Sync + 'static,
    I: for<'a> Inspector<alloy_evm::eth::EthEvmContext<&'a mut State<WrapDatabaseRef<DB>>>>,
{
    let mut deadline = Deadline::new(timeout);
    let result = {
        let mut evm = EthEvmFactory::default().create_evm_with_inspector(
            &mut call.state,
            call.env.clone(),
            ((&mut deadline, WarmPrecompiles::default()), inspector),
        );
        // `movePrecompileToAddress`: the precompile answers at its new address; the old one is
        // an ordinary account (with the code an override gave it).
        evm.inspector_mut().0.1 = move_precompiles(evm.precompiles_mut(), &call.precompile_moves)
            .map_err(CallError::InvalidRequest)?;
        evm.transact(call.tx.clone())
    };
    if deadline.expired() {
        return Err(CallError::Timeout(timeout));
    }
    result.map_err(|e| match e {
        EVMError::Transaction(InvalidTransaction::CallGasCostMoreThanGasLimit {
            initial_gas,
            gas_limit,
        }) => CallError::IntrinsicGasTooLow { have: gas_limit, want: initial_gas },
        EVMError::Transaction(InvalidTransaction::GasFloorMoreThanGasLimit {
            gas_floor,
            gas_limit,
        }) => CallError::IntrinsicGasTooLow { have: gas_limit, want: gas_floor },
        EVMError::Transaction(InvalidTransaction::LackOfFundForMaxFee { fee, balance }) => {
            CallError::InsufficientFunds { have: *balance, want: *fee }
        }
        EVMError::Transaction(other) => CallError::Rejected(other.to_string()),
        EVMError::Header(h) => CallError::Rejected(h.to_string()),
        EVMError::Database(d) => db_err(d),
        other => CallError::Rejected(other.to_string()),
    })
}

/// Stops execution once a deadline passes: checks the clock every 1024 steps, then halts every
/// frame still running so the whole call unwinds quickly. Shared by calls and block replays
/// (`super::replay`), combined with the caller's inspector as a tuple inspector.
#[derive(Debug)]
pub(crate) struct Deadline {
    until: Instant,
    steps: u32,
    expired: bool,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self { until: Instant::now() + timeout, steps: 0, expired: false }
    }

    /// Whether execution was halted because the deadline passed.
    pub(crate) fn expired(&self) -> bool {
        self.expired
    }

    /// Checks the clock outside execution (between transactions); marks the deadline expired
    /// once it has passed.
    pub(crate) fn check_now(&mut self) -> bool {
        if !self.expired && Instant::now() >= self.until {
            self.expired = true;
        }
        self.expired
    }
}

impl<CTX, INTR: InterpreterTypes> Inspector<CTX, INTR> for Deadline {
    fn step(&mut self, interp: &mut Interpreter<INTR>, _context: &mut CTX) {
        if !self.expired {
            self.steps = self.steps.wrapping_add(1);
            if !self.steps.is_multiple_of(1024) || Instant::now() < self.until {
                return;
            }
            self.expired = true;
        }
        interp.halt(InstructionResult::OutOfGas);
    }
}

/// One `movePrecompileToAddress` of a state override set.
#[derive(Debug, Clone, Copy)]
pub struct PrecompileMove {
    /// The precompile's address.
    pub from: Address,
    /// Where it answers instead.
    pub to: Address,
    /// Whether the same override set also overrides the destination.
    pub to_overridden: bool,
}

/// The precompile moves of an override set, by source address (the set itself is unordered;
/// sorting makes the first refusal reported the same every time).
pub fn precompile_moves_of(overrides: &StateOverride) -> Vec<PrecompileMove> {
    let mut moves: Vec<PrecompileMove> = overrides
        .iter()
        .filter_map(|(from, o)| {
            let to = o.move_precompile_to?;
            Some(PrecompileMove { from: *from, to, to_overridden: overrides.contains_key(&to) })
        })
        .collect();
    moves.sort_by_key(|m| m.from);
    moves
}

/// Applies `moves` to an EVM's precompiles, refusing as geth does: a source that is not a
/// precompile of the block's fork, or a destination the same override set also overrides
/// (the account itself included). Two precompiles moved to one address: the later one wins.
///
/// Returns the fork's own precompile addresses when anything moved: geth keeps those warm
/// (EIP-2929) and leaves a destination cold, so [`WarmPrecompiles`] restores that set.
pub fn move_precompiles(
    precompiles: &mut alloy_evm::precompiles::PrecompilesMap,
    moves: &[PrecompileMove],
) -> Result<WarmPrecompiles, String> {
    if moves.is_empty() {
        return Ok(WarmPrecompiles(None));
    }
    let original: AddressSet = precompiles.addresses().copied().collect();
    for m in moves {
        if precompiles.get(&m.from).is_none() {
            return Err(format!("account {} is not a precompile", m.from));
        }
        if m.to_overridden {
            return Err(format!("account {} is already overridden", m.to));
        }
    }
    precompiles
        .move_precompiles(moves.iter().map(|m| (m.from, m.to)))
        .map_err(|e| e.to_string())?;
    Ok(WarmPrecompiles(Some(original)))
}

/// Makes a transaction start with these addresses warm as precompiles, instead of the
/// addresses the (moved) precompile map answers at.
#[derive(Debug, Clone, Default)]
pub struct WarmPrecompiles(Option<AddressSet>);

impl<CTX: ContextTr, INTR: InterpreterTypes> Inspector<CTX, INTR> for WarmPrecompiles {
    fn call(&mut self, context: &mut CTX, _inputs: &mut CallInputs) -> Option<CallOutcome> {
        self.warm(context);
        None
    }

    fn create(&mut self, context: &mut CTX, _inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        self.warm(context);
        None
    }
}

impl WarmPrecompiles {
    fn warm<CTX: ContextTr>(&self, context: &mut CTX) {
        if let Some(set) = &self.0
            && context.journal().depth() == 0
        {
            context.journal_mut().warm_precompiles(set);
        }
    }
}
