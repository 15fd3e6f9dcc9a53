//! `eth_call`, and the call-object parsing shared with `trace_call`.

use std::sync::Arc;

use alloy_primitives::Bytes;
use alloy_rpc_types_eth::TransactionRequest;
use alloy_sol_types::{Panic, Revert, SolError};
use jsonrpsee::types::Params;
use revm::context::result::{ExecutionResult, HaltReason};
use revm::inspector::NoOpInspector;
use serde_json::Value;

use crate::evm::{CallError, CallRequest, PreparedCall, execute_call, prepare_call};
use crate::rpc::server::json::{Raw, to_value};
use crate::rpc::server::params::{Args, BlockRef, invalid};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::StateAt;

/// Fields a call object may carry; anything else is refused so that typos (`gasprice`) do not
/// silently change the call.
const CALL_FIELDS: &[&str] = &[
    "from",
    "to",
    "gas",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "maxFeePerBlobGas",
    "value",
    "data",
    "input",
    "nonce",
    "accessList",
    "blobVersionedHashes",
    "authorizationList",
    "chainId",
    "type",
];

/// Parses the call object at `i` and the overrides at `so` (state) and `bo` (block).
pub(crate) fn call_request(a: &Args, i: usize, so: usize, bo: usize) -> RpcResult<CallRequest> {
    Ok(CallRequest {
        tx: call_object(a, i)?,
        state_overrides: a.opt(so, "stateOverrides")?,
        block_overrides: a.opt(bo, "blockOverrides")?,
    })
}

/// Parses the call object at `i` alone (for `debug_traceCall`, whose overrides sit in its
/// options object).
pub(crate) fn call_object(a: &Args, i: usize) -> RpcResult<TransactionRequest> {
    let Some(v) = a.get(i) else {
        return Err(invalid(format!("missing value for required argument {i} (transaction)")));
    };
    let Value::Object(map) = v else {
        return Err(invalid(format!("invalid argument {i} (transaction): expected an object")));
    };
    if let Some(unknown) = map.keys().find(|k| !CALL_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "invalid argument {i} (transaction): unknown field {unknown:?}"
        )));
    }
    a.req(i, "transaction")
}

impl From<CallError> for RpcError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::InvalidRequest(m) => Self::InvalidParams(m),
            CallError::InsufficientFunds { have, want } => Self::InsufficientFunds { have, want },
            CallError::Timeout(d) => Self::Timeout(d),
            CallError::Database(m) => Self::Internal(m),
            other @ (CallError::IntrinsicGasTooLow { .. } | CallError::Rejected(_)) => {
                Self::Execution(other.to_string())
            }
        }
    }
}

/// geth's wording of Solidity panic codes.
fn panic_reason(code: u64) -> String {
    match code {
        0x00 => "generic panic".into(),
        0x01 => "assert(false)".into(),
        0x11 => "arithmetic underflow or overflow".into(),
        0x12 => "division or modulo by zero".into(),
        0x21 => "enum overflow".into(),
        0x22 => "invalid encoded storage byte array accessed".into(),
        0x31 => "out-of-bounds array access; popping on an empty array".into(),
        0x32 => "out-of-bounds access of an array or bytesN".into(),
        0x41 => "out of memory".into(),
        0x51 => "uninitialized function".into(),
        other => format!("unknown panic code: {other:#x}"),
    }
}

/// Decodes `Error(string)` and `Panic(uint256)` revert data.
pub(crate) fn revert_reason(data: &[u8]) -> Option<String> {
    if let Ok(r) = Revert::abi_decode(data) {
        return Some(r.reason);
    }
    Panic::abi_decode(data).ok().map(|p| panic_reason(u64::try_from(p.code).unwrap_or(u64::MAX)))
}

/// geth's wording of an exceptional halt, for `eth_call` errors.
pub(crate) fn halt_message(h: &HaltReason) -> String {
    match h {
        HaltReason::OutOfGas(_) => "out of gas".into(),
        HaltReason::OpcodeNotFound | HaltReason::InvalidFEOpcode | HaltReason::NotActivated => {
            "invalid opcode".into()
        }
        HaltReason::InvalidJump => "invalid jump destination".into(),
        HaltReason::StackUnderflow => "stack underflow".into(),
        HaltReason::StackOverflow => "stack limit reached 1024 (1023)".into(),
        HaltReason::OutOfFunds => "insufficient balance for transfer".into(),
        HaltReason::CallTooDeep => "max call depth exceeded".into(),
        HaltReason::StateChangeDuringStaticCall => "write protection".into(),
        other => format!("execution halted: {other:?}"),
    }
}

impl RpcContext {
    /// `eth_call(call, block?, stateOverrides?, blockOverrides?)`.
    pub(crate) async fn eth_call(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let a = Args::new(&p, 4)?;
        let req = call_request(&a, 0, 2, 3)?;
        let block = a.block(1, "block")?;
        let ctx = self.clone();
        self.pool.run(move || ctx.eth_call_blocking(req, block)).await
    }

    /// `req` ready to run on the state after `block`, in that block's environment (`eth_call`,
    /// `trace_call`, `debug_traceCall`).
    pub(crate) fn prepared_call(
        &self,
        req: CallRequest,
        block: BlockRef,
    ) -> RpcResult<PreparedCall<StateAt>> {
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let header = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
        let state = r.state_at(n)?;
        Ok(prepare_call(&self.spec, &header.0, state, req, self.config.gas_cap)?)
    }

    fn eth_call_blocking(&self, req: CallRequest, block: BlockRef) -> RpcResult<Raw> {
        let mut call = self.prepared_call(req, block)?;
        let res = execute_call(&mut call, NoOpInspector, self.config.call_timeout)?;
        match res.result {
            ExecutionResult::Success { output, .. } => to_value(output.into_data()),
            ExecutionResult::Revert { output, .. } => Err(RpcError::Reverted {
                reason: revert_reason(&output),
                data: Bytes::from(output.to_vec()),
            }),
            ExecutionResult::Halt { reason, .. } => Err(RpcError::Execution(halt_message(&reason))),
        }
    }
}
