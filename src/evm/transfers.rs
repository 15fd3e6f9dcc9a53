//! [`SimInspector`]: the inspector of simulated blocks (`eth_simulateV1`): the request's
//! deadline, and optionally ETH transfers as ERC-20-style `Transfer` logs (`traceTransfers`).
//!
//! As geth does it: logs are kept per call frame, a value transfer is the first log of the
//! frame it enters, a frame that fails drops its logs, and a transaction that fails has none.
//! The logs live here, not in the journal, so receipts (and the block hash) do not change.
//! revm-inspectors' `TransferInspector` logs into the journal before the callee's checkpoint,
//! so a reverted callee would keep its transfer log; hence this small tracker.

use alloy_primitives::{Address, B256, Log, LogData, U256};
use revm::Inspector;
use revm::context::ContextTr;
use revm::interpreter::interpreter::EthInterpreter;
use revm::interpreter::{CallInputs, CallOutcome, CreateInputs, CreateOutcome, Interpreter};
use revm_inspectors::transfer::{TRANSFER_EVENT_TOPIC, TRANSFER_LOG_EMITTER};

use super::call_env::{Deadline, WarmPrecompiles};

/// The deadline of a simulation, plus transfer logs when asked for.
pub struct SimInspector {
    deadline: Deadline,
    /// The block's precompile addresses to keep warm when precompiles were moved.
    pub warm: WarmPrecompiles,
    /// `None` unless transfers are traced.
    transfers: Option<Frames>,
}

/// Logs per open call frame, and those of the last finished transaction, each with its
/// index in the block.
#[derive(Default)]
struct Frames {
    open: Vec<Vec<(u64, Log)>>,
    done: Vec<(u64, Log)>,
    /// Logs captured in this block so far, kept or not: geth numbers them so, which leaves
    /// gaps where a failed frame's logs were dropped.
    captured: u64,
}

impl std::fmt::Debug for SimInspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimInspector").field("transfers", &self.transfers.is_some()).finish()
    }
}

fn transfer_log(from: Address, to: Address, value: U256) -> Log {
    let word = |a: Address| B256::left_padding_from(a.as_slice());
    Log {
        address: TRANSFER_LOG_EMITTER,
        data: LogData::new_unchecked(
            vec![TRANSFER_EVENT_TOPIC, word(from), word(to)],
            value.to_be_bytes::<32>().to_vec().into(),
        ),
    }
}

impl Frames {
    fn enter(&mut self, transfer: Option<Log>) {
        self.open.push(Vec::new());
        if let Some(log) = transfer {
            self.push(log);
        }
    }

    fn push(&mut self, log: Log) {
        if let Some(frame) = self.open.last_mut() {
            frame.push((self.captured, log));
            self.captured += 1;
        }
    }

    fn exit(&mut self, ok: bool) {
        let Some(frame) = self.open.pop() else { return };
        match self.open.last_mut() {
            Some(parent) if ok => parent.extend(frame),
            Some(_) => {}
            None => self.done = if ok { frame } else { Vec::new() },
        }
    }
}

impl SimInspector {
    /// Halts execution once `timeout` has passed; logs transfers when `transfers` is set.
    pub fn new(timeout: std::time::Duration, transfers: bool) -> Self {
        Self {
            deadline: Deadline::new(timeout),
            warm: WarmPrecompiles::default(),
            transfers: transfers.then(Frames::default),
        }
    }

    /// Whether execution was halted because the deadline passed.
    pub fn expired(&self) -> bool {
        self.deadline.expired()
    }

    /// Whether execution was halted because the work was cancelled (`super::cancel`).
    pub fn cancelled(&self) -> bool {
        self.deadline.cancelled()
    }

    /// Checks the clock between transactions.
    pub fn check_now(&mut self) -> bool {
        self.deadline.check_now()
    }

    /// Starts numbering logs for a new block.
    pub fn start_block(&mut self) {
        if let Some(f) = self.transfers.as_mut() {
            f.captured = 0;
        }
    }

    /// The last transaction's logs with its transfers among them, in order, each with its
    /// index in the block; `None` when transfers are not traced.
    pub fn take_logs(&mut self) -> Option<Vec<(u64, Log)>> {
        self.transfers.as_mut().map(|f| {
            f.open.clear();
            std::mem::take(&mut f.done)
        })
    }
}

impl<CTX: ContextTr> Inspector<CTX, EthInterpreter> for SimInspector {
    fn step(&mut self, interp: &mut Interpreter<EthInterpreter>, context: &mut CTX) {
        Inspector::<CTX, EthInterpreter>::step(&mut self.deadline, interp, context);
    }

    fn log(&mut self, _context: &mut CTX, log: Log) {
        if let Some(f) = self.transfers.as_mut() {
            f.push(log);
        }
    }

    fn call(&mut self, context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        Inspector::<CTX, EthInterpreter>::call(&mut self.warm, context, inputs);
        if let Some(f) = self.transfers.as_mut() {
            let transfer = inputs
                .transfer_value()
                .filter(|v| !v.is_zero())
                .map(|v| transfer_log(inputs.transfer_from(), inputs.transfer_to(), v));
            f.enter(transfer);
        }
        None
    }

    fn call_end(&mut self, _context: &mut CTX, _inputs: &CallInputs, outcome: &mut CallOutcome) {
        if let Some(f) = self.transfers.as_mut() {
            f.exit(outcome.result.result.is_ok());
        }
    }

    fn create(&mut self, context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        Inspector::<CTX, EthInterpreter>::create(&mut self.warm, context, inputs);
        if let Some(f) = self.transfers.as_mut() {
            // The new address is known at the end; the log holds the frame's first place.
            let value = inputs.value();
            f.enter(
                (!value.is_zero()).then(|| transfer_log(inputs.caller(), Address::ZERO, value)),
            );
        }
        None
    }

    fn create_end(
        &mut self,
        _context: &mut CTX,
        inputs: &CreateInputs,
        outcome: &mut CreateOutcome,
    ) {
        let Some(f) = self.transfers.as_mut() else { return };
        if let (Some(address), Some(frame)) = (outcome.address, f.open.last_mut())
            && !inputs.value().is_zero()
            && let Some(first) = frame.first_mut()
        {
            first.1 = transfer_log(inputs.caller(), address, inputs.value());
        }
        f.exit(outcome.result.result.is_ok());
    }

    fn selfdestruct(&mut self, contract: Address, target: Address, value: U256) {
        if let Some(f) = self.transfers.as_mut()
            && !value.is_zero()
        {
            f.push(transfer_log(contract, target, value));
        }
    }
}
