//! Simulated calls (`eth_call`, `trace_call`): the call environment of block N and its rules.
//!
//! The environment is block N's own header on the state after block N. Switched off
//! (behaviour.md §3.2): nonce check, EIP-3607, fee-cap-vs-base-fee (a cap below the base fee is
//! charged the cap; geth and reth refuse it unless every fee field is zero), block gas limit and
//! the EIP-7825 per-transaction cap. Kept: intrinsic gas, and the balance check for priced
//! calls.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use alloy_consensus::Header;
use alloy_evm::overrides::{apply_block_overrides, apply_state_overrides};
use alloy_evm::rpc::TryIntoTxEnv;
use alloy_evm::{Evm, EvmEnv};
use alloy_primitives::map::AddressSet;
use alloy_primitives::{Address, Bytes, U256};
use alloy_rpc_types_eth::state::StateOverride;
use alloy_rpc_types_eth::{BlockOverrides, TransactionRequest};
use revm::context::TxEnv;
use revm::context::result::{EVMError, InvalidTransaction, ResultAndState};
use revm::context::{ContextTr, JournalTr};
use revm::database::{DatabaseRef, State, WrapDatabaseRef};
use revm::interpreter::interpreter_types::{Jumps, StackTr};
use revm::interpreter::{
    CallInputs, CallOutcome, CreateInputs, CreateOutcome, Gas, InstructionResult, Interpreter,
    InterpreterResult, InterpreterTypes,
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
    /// The thread's cancellation flag was set (`super::cancel`: the client went away).
    #[error("cancelled")]
    Cancelled,
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
    // A fee cap below the base fee is not refused: behaviour.md §3.2 switches that check off
    // (revm's `disable_base_fee` above). alloy-evm refuses it while pricing the request, so the
    // request is priced against a base fee lowered to the cap: the effective price is then
    // min(cap, base fee + tip) = the cap, the price geth's formula gives a call. revm charges
    // it and pays the coinbase the part above the block's real base fee: nothing.
    let base_fee = env.block_env.basefee;
    if tx.gas_price.is_none()
        && let Some(cap) = tx.max_fee_per_gas
        && cap < u128::from(base_fee)
    {
        env.block_env.basefee = u64::try_from(cap).unwrap_or(base_fee);
    }
    let tx_env = tx.try_into_tx_env(&env);
    env.block_env.basefee = base_fee;
    let mut tx_env: TxEnv = tx_env.map_err(|e| CallError::InvalidRequest(e.to_string()))?;
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
    let result = execute_with(call, inspector, &mut deadline);
    if deadline.cancelled() {
        return Err(CallError::Cancelled);
    }
    if deadline.expired() {
        return Err(CallError::Timeout(timeout));
    }
    result
}

/// Executes a prepared call with `inspector` if it finishes within `budget` ([`Deadline::inline`]:
/// the clock read every 16 steps and at every frame, no precompile, no memory access past
/// [`INLINE_MEMORY`]); `Ok(None)` when it does not, and then `inspector` holds a partial run to
/// be discarded. The state's cache holds only values read, never the call's changes, so the
/// same `call` can run again under [`execute_call`]. Nothing is committed.
pub fn execute_call_within<DB, I>(
    call: &mut PreparedCall<DB>,
    inspector: I,
    budget: Duration,
) -> Result<Option<ResultAndState>, CallError>
where
    DB: DatabaseRef + std::fmt::Debug,
    DB::Error: std::fmt::Display + Send + Sync + 'static,
    I: for<'a> Inspector<alloy_evm::eth::EthEvmContext<&'a mut State<WrapDatabaseRef<DB>>>>,
{
    if !call.precompile_moves.is_empty() {
        // A moved precompile answers at any address: the budget could not tell it apart.
        return Ok(None);
    }
    let mut deadline = Deadline::inline(budget);
    let result = execute_with(call, inspector, &mut deadline);
    if deadline.expired() {
        return Ok(None);
    }
    result.map(Some)
}

/// The EVM of one call: what `EthEvmFactory::create_evm_with_inspector` builds, but with an
/// empty frame stack. revm's constructors give every EVM eight default frames up front, each
/// with its own stack and memory allocated, and drop them after the call: 5.6 % of an
/// in-process `trace_call` (BENCHMARKS.md, session 43), where most calls use one frame. With an
/// empty stack revm initialises a frame in place when the call reaches that depth.
fn call_evm<DB: alloy_evm::Database, I: Inspector<alloy_evm::eth::EthEvmContext<DB>>>(
    db: DB,
    env: &EvmEnv,
    inspector: I,
) -> alloy_evm::EthEvm<DB, I, alloy_evm::precompiles::PrecompilesMap> {
    use revm::context::{Context, Evm as RevmEvm};
    use revm::context_interface::local::FrameStack;
    use revm::handler::MainContext;
    use revm::handler::instructions::EthInstructions;
    use revm::precompile::{PrecompileSpecId, Precompiles};
    let spec = env.cfg_env.spec;
    let ctx = Context::mainnet()
        .with_block(env.block_env.clone())
        .with_cfg(env.cfg_env.clone())
        .with_db(db);
    let inner = RevmEvm {
        ctx,
        inspector,
        instruction: EthInstructions::new_mainnet_with_spec(spec),
        precompiles: alloy_evm::precompiles::PrecompilesMap::from_static(Precompiles::new(
            PrecompileSpecId::from_spec_id(spec),
        )),
        frame_stack: FrameStack::new(),
    };
    alloy_evm::EthEvm::new(inner, true)
}

fn execute_with<DB, I>(
    call: &mut PreparedCall<DB>,
    inspector: I,
    deadline: &mut Deadline,
) -> Result<ResultAndState, CallError>
where
    DB: DatabaseRef + std::fmt::Debug,
    DB::Error: std::fmt::Display + Send + Sync + 'static,
    I: for<'a> Inspector<alloy_evm::eth::EthEvmContext<&'a mut State<WrapDatabaseRef<DB>>>>,
{
    let result = {
        let mut evm = call_evm(
            &mut call.state,
            &call.env,
            ((deadline, WarmPrecompiles::default()), inspector),
        );
        // `movePrecompileToAddress`: the precompile answers at its new address; the old one is
        // an ordinary account (with the code an override gave it).
        evm.inspector_mut().0.1 = move_precompiles(evm.precompiles_mut(), &call.precompile_moves)
            .map_err(CallError::InvalidRequest)?;
        evm.transact(call.tx.clone())
    };
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

/// Highest memory byte (exclusive) a call run inline may touch: past it the call goes to the
/// worker pool. One instruction's work over memory (KECCAK256, a copy, a log, call data) is
/// then at most 16 KiB, some 40 µs of hashing at worst, so one instruction cannot overrun the
/// inline budget by more than that.
pub const INLINE_MEMORY: u64 = 16 * 1024;

/// Bytes of memory read or written by one instruction at or above which [`Deadline::inline`] reads the clock
/// before and after it, instead of every 16 steps.
const INLINE_HEAVY: u64 = 512;

/// The memory instruction `op` would touch with `stack` (top last): the highest byte
/// (exclusive) and the bytes it reads or writes, both 0 for an instruction that touches none.
/// Saturates: a range past `u64::MAX` reads as `u64::MAX`. A missing operand reads as 0 (the
/// instruction then fails with a stack underflow, touching nothing).
fn memory_use(op: u8, stack: &[U256]) -> (u64, u64) {
    let at = |i: usize| stack.len().checked_sub(i + 1).map_or(U256::ZERO, |j| stack[j]);
    let span = |offset: usize, size: usize| {
        let size = at(size);
        if size.is_zero() {
            (0, 0)
        } else {
            (at(offset).saturating_add(size).saturating_to::<u64>(), size.saturating_to::<u64>())
        }
    };
    let both = |(r1, n1): (u64, u64), (r2, n2): (u64, u64)| (r1.max(r2), n1.saturating_add(n2));
    let word =
        |offset: usize, len: u64| (at(offset).saturating_to::<u64>().saturating_add(len), len);
    match op {
        // KECCAK256, LOG0-4, RETURN, REVERT: (offset, size).
        0x20 | 0xa0..=0xa4 | 0xf3 | 0xfd => span(0, 1),
        // CALLDATACOPY, CODECOPY, RETURNDATACOPY: (dest, offset, size).
        0x37 | 0x39 | 0x3e => span(0, 2),
        // EXTCODECOPY: (address, dest, offset, size).
        0x3c => span(1, 3),
        // MCOPY: (dest, source, size).
        0x5e => both(span(0, 2), span(1, 2)),
        // MLOAD, MSTORE; MSTORE8.
        0x51 | 0x52 => word(0, 32),
        0x53 => word(0, 1),
        // CREATE, CREATE2: (value, offset, size, [salt]).
        0xf0 | 0xf5 => span(1, 2),
        // CALL, CALLCODE: (gas, address, value, argsOffset, argsSize, retOffset, retSize).
        0xf1 | 0xf2 => both(span(3, 4), span(5, 6)),
        // DELEGATECALL, STATICCALL: (gas, address, argsOffset, argsSize, retOffset, retSize).
        0xf4 | 0xfa => both(span(2, 3), span(4, 5)),
        _ => (0, 0),
    }
}

/// Whether a call to `address` may reach a precompile: every precompile of every fork sits
/// below `0x10000` (`0x01`-`0x11`, `0x100`). Precompiles run in one step each, some for
/// milliseconds (KZG, pairings, big `modexp`), so a call run inline runs none but
/// [`cheap_precompile`]s.
fn low_address(address: &Address) -> bool {
    address.0[..18].iter().all(|b| *b == 0)
}

/// The precompiles a call run inline may call: `ecrecover`, SHA-256 and identity, at `0x01`,
/// `0x02` and `0x04` in every fork. One call of any of them costs tens of µs at most on the
/// 16 KiB of memory an inline call may pass ([`INLINE_MEMORY`]; an `ecrecover` about 30 µs with
/// revm's `secp256k1` feature, against some 260 µs with the pure-Rust `k256` it falls back to),
/// no more than one hashing instruction over that memory. Signature checks (permits,
/// account abstraction) call `ecrecover`; without it such a call would always leave inline
/// execution and set off the server's backoff.
fn cheap_precompile(address: &Address) -> bool {
    low_address(address) && address.0[18] == 0 && matches!(address.0[19], 0x01 | 0x02 | 0x04)
}

/// Stops execution once a deadline passes or the thread's cancellation flag is set
/// (`super::cancel`): checks both every 1024 steps, then halts every frame still running so
/// the whole call unwinds quickly. Shared by calls and block replays
/// (`super::block_replay`), combined with the caller's inspector as a tuple inspector.
///
/// [`Deadline::inline`] is the budget of a call run on a server thread (`execute_call_within`):
/// the clock every 16 steps, at every frame and around every instruction over
/// [`INLINE_HEAVY`] bytes of memory; a precompile call or memory past [`INLINE_MEMORY`] ends
/// the run at once, as an expired deadline.
#[derive(Debug)]
pub(crate) struct Deadline {
    until: Instant,
    steps: u32,
    expired: bool,
    /// Steps between two reads of the clock, minus one (a power of two, minus one).
    every: u32,
    inline: bool,
    /// The thread's cancellation flag when the deadline was made.
    cancel: Option<Arc<AtomicBool>>,
    /// Whether execution was halted because the flag was set.
    cancelled: bool,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            until: Instant::now() + timeout,
            steps: 0,
            expired: false,
            every: 1023,
            inline: false,
            cancel: super::cancel::current(),
            cancelled: false,
        }
    }

    /// The budget of a call run inline, `budget` from now.
    pub(crate) fn inline(budget: Duration) -> Self {
        Self {
            until: Instant::now() + budget,
            steps: 0,
            expired: false,
            every: 15,
            inline: true,
            cancel: super::cancel::current(),
            cancelled: false,
        }
    }

    /// Whether execution was halted because the deadline passed or the work was cancelled.
    pub(crate) fn expired(&self) -> bool {
        self.expired
    }

    /// Whether execution was halted because the work was cancelled ([`Self::expired`] too).
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled
    }

    /// Whether the deadline has passed or the work was cancelled, as of now; marks it expired.
    fn over_now(&mut self) -> bool {
        if super::cancel::is_set(self.cancel.as_ref()) {
            self.cancelled = true;
            self.expired = true;
        } else if Instant::now() >= self.until {
            self.expired = true;
        }
        self.expired
    }

    /// Checks the clock outside execution (between transactions); marks the deadline expired
    /// once it has passed (or the work was cancelled).
    pub(crate) fn check_now(&mut self) -> bool {
        self.expired || self.over_now()
    }

    /// For an inline budget, at the start of a frame: whether the run must stop here.
    fn frame_over_budget(&mut self, to: Option<&Address>) -> bool {
        if !self.inline {
            return false;
        }
        let precompile = to.is_some_and(|a| low_address(a) && !cheap_precompile(a));
        if precompile {
            self.expired = true;
        }
        self.expired || self.over_now()
    }
}

impl<CTX, INTR: InterpreterTypes> Inspector<CTX, INTR> for Deadline {
    fn step(&mut self, interp: &mut Interpreter<INTR>, _context: &mut CTX) {
        if !self.expired {
            if self.inline {
                let (reach, bytes) = memory_use(interp.bytecode.opcode(), interp.stack.data());
                if reach > INLINE_MEMORY {
                    self.expired = true;
                    interp.halt(InstructionResult::OutOfGas);
                    return;
                }
                if bytes >= INLINE_HEAVY {
                    // Read the clock now and at the next step: this one may take a while.
                    self.steps |= self.every;
                    if !self.over_now() {
                        return;
                    }
                    interp.halt(InstructionResult::OutOfGas);
                    return;
                }
            }
            self.steps = self.steps.wrapping_add(1);
            if self.steps & self.every != 0 || !self.over_now() {
                return;
            }
        }
        interp.halt(InstructionResult::OutOfGas);
    }

    fn call(&mut self, _context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        if !self.frame_over_budget(Some(&inputs.bytecode_address)) {
            return None;
        }
        let result = InterpreterResult::new(InstructionResult::OutOfGas, Bytes::new(), Gas::new(0));
        Some(CallOutcome::new(result, inputs.return_memory_offset.clone()))
    }

    fn create(&mut self, _context: &mut CTX, _inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        if !self.frame_over_budget(None) {
            return None;
        }
        let result = InterpreterResult::new(InstructionResult::OutOfGas, Bytes::new(), Gas::new(0));
        Some(CreateOutcome::new(result, None))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack with `top` on top (the operands listed top first, as the Yellow Paper lists them).
    fn stack(top_first: &[u64]) -> Vec<U256> {
        top_first.iter().rev().map(|v| U256::from(*v)).collect()
    }

    #[test]
    fn memory_use_reads_each_instructions_operands() {
        // KECCAK256(offset 64, size 32): bytes 64..96.
        assert_eq!(memory_use(0x20, &stack(&[64, 32])), (96, 32));
        // Zero size touches nothing, whatever the offset.
        assert_eq!(memory_use(0x20, &stack(&[u64::MAX, 0])), (0, 0));
        // CALLDATACOPY(dest 100, offset 0, size 28).
        assert_eq!(memory_use(0x37, &stack(&[100, 0, 28])), (128, 28));
        // EXTCODECOPY(address, dest 10, offset 0, size 5).
        assert_eq!(memory_use(0x3c, &stack(&[0xdead, 10, 0, 5])), (15, 5));
        // MCOPY(dest 0, source 1000, size 24): reads and writes.
        assert_eq!(memory_use(0x5e, &stack(&[0, 1000, 24])), (1024, 48));
        // MSTORE at 0x8000; MSTORE8 at 7.
        assert_eq!(memory_use(0x52, &stack(&[0x8000, 1])), (0x8020, 32));
        assert_eq!(memory_use(0x53, &stack(&[7, 1])), (8, 1));
        // LOG2(offset 0, size 32, topics).
        assert_eq!(memory_use(0xa2, &stack(&[0, 32, 1, 2])), (32, 32));
        // CREATE2(value, offset 0, size 100, salt).
        assert_eq!(memory_use(0xf5, &stack(&[0, 0, 100, 9])), (100, 100));
        // CALL(gas, to, value, args 0..4, ret 64..96).
        assert_eq!(memory_use(0xf1, &stack(&[1, 2, 0, 0, 4, 64, 32])), (96, 36));
        // STATICCALL(gas, to, args 0..0, ret 0..20000).
        assert_eq!(memory_use(0xfa, &stack(&[1, 2, 0, 0, 0, 20000])), (20000, 20000));
        // RETURN past 2^64 saturates.
        let huge = vec![U256::MAX, U256::MAX];
        assert_eq!(memory_use(0xf3, &huge), (u64::MAX, u64::MAX));
        // A missing operand reads as zero; ADD touches no memory.
        assert_eq!(memory_use(0x20, &stack(&[5])), (0, 0));
        assert_eq!(memory_use(0x01, &stack(&[1, 2])), (0, 0));
    }

    #[test]
    fn low_addresses_cover_every_precompile() {
        for p in (1u16..=0x11).chain([0x100]) {
            let mut a = [0u8; 20];
            a[18..].copy_from_slice(&p.to_be_bytes());
            assert!(low_address(&Address::from(a)), "{p:#x}");
        }
        assert!(!low_address(&"0x00000000000000000000000000000000000c0ffe".parse().unwrap()));
    }

    #[test]
    fn only_ecrecover_sha256_and_identity_are_cheap() {
        let at = |p: u16| {
            let mut a = [0u8; 20];
            a[18..].copy_from_slice(&p.to_be_bytes());
            Address::from(a)
        };
        for p in [0x01, 0x02, 0x04] {
            assert!(cheap_precompile(&at(p)), "{p:#x}");
        }
        for p in [0x03].into_iter().chain(0x05..=0x11).chain([0x100, 0x101, 0x201, 0x0401]) {
            assert!(!cheap_precompile(&at(p)), "{p:#x}");
        }
        let mut high = [0u8; 20];
        high[0] = 1;
        high[19] = 1;
        assert!(!cheap_precompile(&Address::from(high)));
    }
}
