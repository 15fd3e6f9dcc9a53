//! [`StructLogBudget`]: the struct logger's answer counted while the call runs, so that one
//! `debug_trace*` call cannot hold more than a bounded amount of memory (`--rpc.max-trace-size`).
//!
//! The struct logger (revm-inspectors' `TracingInspector` behind `DebugInspector::Default`)
//! records every step, then builds one struct log per step, then its JSON: all three are held
//! at once, and an endless loop records steps until its deadline (2.1 GB in 5 s, measured on
//! issue 60). This inspector runs beside it and adds, at each step, the most that step's struct
//! log can take in the answer: its fixed fields, its stack (each item at its longest hex), its
//! memory, its return data, and the storage map geth's format repeats at every `SLOAD` and
//! `SSTORE` (every slot the contract has touched so far). Past the limit it halts every frame,
//! as the deadline does, and the call answers -32008 ([`RpcError::TraceTooLarge`]).

use std::collections::{HashMap, HashSet};

use alloy_primitives::{Address, U256};
use alloy_rpc_types_trace::geth::GethDefaultTracingOptions;
use revm::Inspector;
use revm::interpreter::interpreter_types::{InputsTr, Jumps, MemoryTr, ReturnData, StackTr};
use revm::interpreter::{InstructionResult, Interpreter, InterpreterTypes};

use crate::rpc::{RpcError, RpcResult};

/// A struct log's fields besides its stack, memory, return data and storage, at their longest:
/// `{"pc":…,"op":"…","gas":…,"gasCost":…,"depth":…,"error":…}` and the list's comma.
const STEP: u64 = 128;
/// One stack item: `"0x"` and 64 hex digits, quoted, and a comma.
const STACK_ITEM: u64 = 69;
/// One 32-byte word of memory: 64 hex digits, quoted, and a comma.
const MEMORY_WORD: u64 = 67;
/// One storage entry: two quoted 64-digit keys, a colon and a comma.
const STORAGE_ENTRY: u64 = 134;

/// Counts the struct logger's answer as it grows; inert for other tracers.
#[derive(Debug, Clone)]
pub(crate) struct StructLogBudget {
    /// The options of the struct logger; `None`: not one, nothing is counted.
    opts: Option<GethDefaultTracingOptions>,
    limit: u64,
    used: u64,
    /// Slots each contract touched so far: geth's struct log repeats them at each access.
    slots: HashMap<Address, HashSet<U256>>,
    over: bool,
}

impl StructLogBudget {
    /// A budget of `limit` bytes for the struct logger with `opts`, or an inert one (`None`).
    pub(crate) fn new(opts: Option<GethDefaultTracingOptions>, limit: u64) -> Self {
        Self { opts, limit, used: 0, slots: HashMap::new(), over: false }
    }

    /// The next traced transaction of a block starts: geth's storage maps start empty again.
    pub(crate) fn next_transaction(&mut self) {
        self.slots.clear();
    }

    /// `Err` when the answer passed the limit (the call was halted).
    pub(crate) fn result(&self) -> RpcResult<()> {
        if self.over { Err(RpcError::TraceTooLarge(self.limit)) } else { Ok(()) }
    }

    /// The most a step with this stack, memory, return data and storage access adds.
    fn step_size<INTR: InterpreterTypes>(&mut self, interp: &Interpreter<INTR>) -> u64 {
        let Some(opts) = &self.opts else { return 0 };
        let mut size = STEP;
        if opts.is_stack_enabled() {
            size += STACK_ITEM * interp.stack.len() as u64;
        }
        if opts.is_memory_enabled() {
            size += MEMORY_WORD * (interp.memory.size() as u64).div_ceil(32);
        }
        if opts.is_return_data_enabled() {
            size += 2 * interp.return_data.buffer().len() as u64 + 8;
        }
        let op = interp.bytecode.opcode();
        if opts.is_storage_enabled() && matches!(op, 0x54 | 0x55) {
            // SLOAD, SSTORE: the key is on top of the stack.
            if let Some(key) = interp.stack.data().last() {
                let slots = self.slots.entry(interp.input.target_address()).or_default();
                slots.insert(*key);
                size += STORAGE_ENTRY * slots.len() as u64;
            }
        }
        size
    }
}

impl<CTX, INTR: InterpreterTypes> Inspector<CTX, INTR> for StructLogBudget {
    fn step(&mut self, interp: &mut Interpreter<INTR>, _context: &mut CTX) {
        if !self.over && self.opts.is_some() {
            self.used = self.used.saturating_add(self.step_size(interp));
            self.over = self.used > self.limit;
        }
        if self.over {
            interp.halt(InstructionResult::OutOfGas);
        }
    }
}
