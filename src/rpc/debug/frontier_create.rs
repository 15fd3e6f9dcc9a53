//! A Frontier create whose code deposit ran out of gas, as geth's `callTracer` reports it.
//!
//! Before Homestead (EIP-2), a create that cannot pay for its code deposit succeeds and leaves
//! an empty contract. revm then empties the frame's output before the inspector sees it, so
//! revm-inspectors' `callTracer` reports no `output`; geth reports the init code's return data.
//! [`FrontierCreates`] wraps the tracer: it keeps what each create frame's init code returned
//! and, only for a successful pre-Homestead create whose output revm emptied, shows that data
//! to the inner tracer's `create_end` (and puts the empty output back for the EVM).

use alloy_primitives::{Address, Bytes, Log, U256};
use revm::Inspector;
use revm::bytecode::opcode::RETURN;
use revm::context_interface::{Cfg, ContextTr};
use revm::handler::FrameResult;
use revm::interpreter::interpreter_types::{Jumps, MemoryTr};
use revm::interpreter::{
    CallInputs, CallOutcome, CreateInputs, CreateOutcome, FrameInput, Interpreter,
};
use revm::primitives::hardfork::SpecId;

/// Return data larger than this is not kept (no pre-Homestead code comes near it).
const MAX_KEPT: usize = 1 << 20;

/// A tracer wrapped to see a Frontier create's init code output (see the module doc).
#[derive(Debug)]
pub(crate) struct FrontierCreates<I> {
    /// The wrapped tracer.
    pub(crate) inner: I,
    /// Whether to look at all (the call tracers only).
    enabled: bool,
    /// One entry per open frame while before Homestead: `None` for a call, `Some(returned)`
    /// for a create, with what its init code's `RETURN` gave (empty until then).
    frames: Vec<Option<Bytes>>,
}

impl<I> FrontierCreates<I> {
    /// `inner`, wrapped if `enabled`.
    pub(crate) fn new(inner: I, enabled: bool) -> Self {
        Self { inner, enabled, frames: Vec::new() }
    }

    /// Forgets the frames of a transaction that did not finish.
    pub(crate) fn reset(&mut self) {
        self.frames.clear();
    }
}

/// Whether the transaction runs before Homestead.
fn frontier<CTX: ContextTr>(context: &CTX) -> bool {
    let spec: SpecId = context.cfg().spec().into();
    !spec.is_enabled_in(SpecId::HOMESTEAD)
}

impl<CTX: ContextTr, I: Inspector<CTX>> Inspector<CTX> for FrontierCreates<I> {
    fn initialize_interp(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        self.inner.initialize_interp(interp, context)
    }

    fn step(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        if let Some(Some(returned)) = self.frames.last_mut()
            && interp.bytecode.opcode() == RETURN
            && let [.., size, offset] = interp.stack.data().as_slice()
            && let (Ok(offset), Ok(size)) = (usize::try_from(*offset), usize::try_from(*size))
            && size <= MAX_KEPT
        {
            // RETURN's memory past the current size reads as zeros.
            let mut data = vec![0u8; size];
            let have = interp.memory.size().saturating_sub(offset).min(size);
            if have > 0 {
                data[..have].copy_from_slice(&interp.memory.slice(offset..offset + have));
            }
            *returned = data.into();
        }
        self.inner.step(interp, context)
    }

    fn step_end(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        self.inner.step_end(interp, context)
    }

    fn log(&mut self, context: &mut CTX, log: Log) {
        self.inner.log(context, log)
    }

    fn log_full(&mut self, interp: &mut Interpreter, context: &mut CTX, log: Log) {
        self.inner.log_full(interp, context, log)
    }

    fn call(&mut self, context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        if self.enabled && frontier(context) {
            self.frames.push(None);
        }
        self.inner.call(context, inputs)
    }

    fn call_end(&mut self, context: &mut CTX, inputs: &CallInputs, outcome: &mut CallOutcome) {
        if self.enabled && frontier(context) {
            self.frames.pop();
        }
        self.inner.call_end(context, inputs, outcome)
    }

    fn create(&mut self, context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        if self.enabled && frontier(context) {
            self.frames.push(Some(Bytes::new()));
        }
        self.inner.create(context, inputs)
    }

    fn create_end(
        &mut self,
        context: &mut CTX,
        inputs: &CreateInputs,
        outcome: &mut CreateOutcome,
    ) {
        let returned = if self.enabled && frontier(context) {
            self.frames.pop().flatten().unwrap_or_default()
        } else {
            Bytes::new()
        };
        // Only a successful create whose output revm emptied: its code deposit ran out of gas.
        if returned.is_empty() || !outcome.result.is_ok() || !outcome.result.output.is_empty() {
            return self.inner.create_end(context, inputs, outcome);
        }
        outcome.result.output = returned;
        self.inner.create_end(context, inputs, outcome);
        outcome.result.output = Bytes::new();
    }

    fn selfdestruct(&mut self, contract: Address, target: Address, value: U256) {
        self.inner.selfdestruct(contract, target, value)
    }

    fn frame_start(
        &mut self,
        context: &mut CTX,
        frame_input: &mut FrameInput,
    ) -> Option<FrameResult> {
        self.inner.frame_start(context, frame_input)
    }

    fn frame_end(
        &mut self,
        context: &mut CTX,
        frame_input: &FrameInput,
        frame_result: &mut FrameResult,
    ) {
        self.inner.frame_end(context, frame_input, frame_result)
    }
}
