//! `eth_call`, and the call-object parsing shared with `trace_call`.

use std::sync::Arc;

use alloy_eips::eip2930::AccessList;
use alloy_eips::eip7702::SignedAuthorization;
use alloy_primitives::{Address, B256, Bytes, TxKind, U256};
use alloy_rpc_types_eth::{TransactionInput, TransactionRequest};
use alloy_sol_types::{Panic, Revert, SolError};
use jsonrpsee::types::Params;
use revm::context::result::{ExecutionResult, HaltReason};
use revm::inspector::NoOpInspector;
use serde::Deserialize;
use serde_json::Value;

use super::block_overrides::{OverridesOf, check_block_overrides};
use crate::evm::{
    CallError, CallRequest, PreparedCall, execute_call, execute_call_within, prepare_call,
};
use crate::rpc::eth::override_limits::RawSets;
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
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

impl RpcContext {
    /// Parses the call object at `i` and the overrides at `so` (state, within the limits of
    /// `eth/override_limits.rs`) and `bo` (block, its keys checked by `eth/block_overrides.rs`).
    pub(crate) fn call_request(
        &self,
        a: &Args,
        i: usize,
        so: usize,
        bo: usize,
    ) -> RpcResult<CallRequest> {
        if let Some(v) = a.get(bo) {
            check_block_overrides(v, OverridesOf::Call)
                .map_err(|e| invalid(format!("invalid argument {bo} (blockOverrides): {e}")))?;
        }
        self.check_override_set(a.get(so), &format!("{so} (stateOverrides)"))?;
        Ok(CallRequest {
            tx: call_object(a, i)?,
            state_overrides: a.opt(so, "stateOverrides")?,
            block_overrides: a.opt(bo, "blockOverrides")?,
        })
    }
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
    // An object the plain fields do not take is parsed again the long way, whose error names
    // the problem as it always has.
    match CallFields::deserialize(v) {
        Ok(fields) => Ok(fields.into()),
        Err(_) => a.req(i, "transaction"),
    }
}

/// A call object's fields, as [`TransactionRequest`] reads them but without its flattened
/// `input` and blob sidecar. serde's `flatten` buffers every field and then tries each sidecar
/// form on them, a few µs of a trace_call's CPU (BENCHMARKS.md, issue 42); a call object never
/// carries a sidecar ([`CALL_FIELDS`]). Same field names, same number forms (`quantity::opt`
/// where `TransactionRequest` has it), so both give the same request
/// (`tests::plain_fields_parse_as_transaction_request_does`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallFields {
    #[serde(default)]
    from: Option<Address>,
    #[serde(default)]
    to: Option<TxKind>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    gas_price: Option<u128>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    max_fee_per_gas: Option<u128>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    max_priority_fee_per_gas: Option<u128>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    max_fee_per_blob_gas: Option<u128>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    gas: Option<u64>,
    #[serde(default)]
    value: Option<U256>,
    #[serde(default)]
    input: Option<Bytes>,
    #[serde(default)]
    data: Option<Bytes>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    nonce: Option<u64>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    chain_id: Option<u64>,
    #[serde(default)]
    access_list: Option<AccessList>,
    #[serde(default, rename = "type", with = "alloy_serde::quantity::opt")]
    transaction_type: Option<u8>,
    #[serde(default)]
    blob_versioned_hashes: Option<Vec<B256>>,
    #[serde(default)]
    authorization_list: Option<Vec<SignedAuthorization>>,
}

impl From<CallFields> for TransactionRequest {
    fn from(f: CallFields) -> Self {
        Self {
            from: f.from,
            to: f.to,
            gas_price: f.gas_price,
            max_fee_per_gas: f.max_fee_per_gas,
            max_priority_fee_per_gas: f.max_priority_fee_per_gas,
            max_fee_per_blob_gas: f.max_fee_per_blob_gas,
            gas: f.gas,
            value: f.value,
            input: TransactionInput { input: f.input, data: f.data },
            nonce: f.nonce,
            chain_id: f.chain_id,
            access_list: f.access_list,
            transaction_type: f.transaction_type,
            blob_versioned_hashes: f.blob_versioned_hashes,
            sidecar: None,
            authorization_list: f.authorization_list,
        }
    }
}

impl From<CallError> for RpcError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::InvalidRequest(m) => Self::InvalidParams(m),
            CallError::InsufficientFunds { have, want } => Self::InsufficientFunds { have, want },
            CallError::Timeout(d) => Self::Timeout(d),
            CallError::Cancelled => Self::Cancelled,
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
    ///
    /// A short call runs on the server's thread that parsed it, within `--rpc.inline-budget-us`
    /// (`request/inline.rs`); one that does not finish within it runs again on the EVM pool, from
    /// the state already read. Either way it holds a place in the pool while it runs. A call
    /// that may not run inline (large parameters among others) is parsed on the pool too, so a
    /// large state override never holds up the server's threads.
    pub(crate) async fn eth_call(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let inline = self.inline_budget(&p);
        let parse = |ctx: &Self, p: &Params<'_>| -> RpcResult<(CallRequest, BlockRef)> {
            ctx.precheck_overrides(p, RawSets::At(2), "2 (stateOverrides)")?;
            let a = Args::new(p, 4)?;
            Ok((ctx.call_request(&a, 0, 2, 3)?, a.block(1, "block")?))
        };
        let Some(budget) = inline else {
            let ctx = self.clone();
            return self
                .pool
                .run(move || {
                    let (req, block) = parse(&ctx, &p)?;
                    ctx.eth_call_blocking(req, block)
                })
                .await;
        };
        let (req, block) = parse(&self, &p)?;
        let admitted = self.pool.admit()?;
        let mut call = self.prepared_call(req, block)?;
        if let Some(res) = execute_call_within(&mut call, NoOpInspector, budget)? {
            self.inline_fitted();
            return call_answer(res.result);
        }
        self.inline_overran();
        let timeout = self.config.call_timeout;
        let again = move || call_answer(execute_call(&mut call, NoOpInspector, timeout)?.result);
        self.pool.run_in(admitted, again).await
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
        call_answer(execute_call(&mut call, NoOpInspector, self.config.call_timeout)?.result)
    }
}

/// `eth_call`'s answer: the output, or the revert or halt as an error.
fn call_answer(result: ExecutionResult) -> RpcResult<Raw> {
    match result {
        ExecutionResult::Success { output, .. } => to_value(output.into_data()),
        ExecutionResult::Revert { output, .. } => Err(RpcError::Reverted {
            reason: revert_reason(&output),
            data: Bytes::from(output.to_vec()),
        }),
        ExecutionResult::Halt { reason, .. } => Err(RpcError::Execution(halt_message(&reason))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Call objects of the execution-apis cases (eth_call, eth_estimateGas,
    /// eth_createAccessList) and hand-written ones in every form the fields take.
    fn samples() -> (Vec<Value>, usize) {
        let fx = std::env::var("LOUPE_FIXTURES").unwrap_or_else(|_| {
            format!("{}/../shared/fixtures/execution-apis", env!("CARGO_MANIFEST_DIR"))
        });
        let mut out = Vec::new();
        for method in ["eth_call", "eth_estimateGas", "eth_createAccessList"] {
            let dir = std::fs::read_dir(format!("{fx}/{method}")).unwrap_or_else(|e| {
                panic!(
                    "{fx}/{method}: {e}; fetch the execution-apis fixtures with \
                     scripts/fetch-fixtures.sh execution-apis, or set LOUPE_FIXTURES"
                )
            });
            for entry in dir {
                let text = std::fs::read_to_string(entry.expect("entry").path()).expect("case");
                for line in text.lines().filter_map(|l| l.strip_prefix(">> ")) {
                    let req: Value = serde_json::from_str(line).expect("request");
                    out.push(req["params"][0].clone());
                }
            }
        }
        let from_fixtures = out.len();
        let a = "0x0000000000000000000000000000000000000aaa";
        let hand = [
            serde_json::json!({}),
            serde_json::json!({"to": null, "from": null, "gas": null, "value": null}),
            serde_json::json!({"to": a, "value": 7, "gas": 21000, "nonce": 3, "gasPrice": 9}),
            serde_json::json!({"to": a, "value": "0x10", "gas": "0x5208", "type": "0x2",
                "chainId": "0x1", "maxFeePerGas": "0x3b9aca00", "maxPriorityFeePerGas": "0x1"}),
            serde_json::json!({"input": "0x01", "data": "0x02"}),
            serde_json::json!({"data": "0xabcdef"}),
            serde_json::json!({"to": a, "accessList": [{"address": a, "storageKeys":
                ["0x0000000000000000000000000000000000000000000000000000000000000001"]}]}),
            serde_json::json!({"to": a, "maxFeePerBlobGas": "0x1", "blobVersionedHashes":
                ["0x0100000000000000000000000000000000000000000000000000000000000001"]}),
            serde_json::json!({"to": a, "authorizationList": [{"chainId": "0x1", "address": a,
                "nonce": "0x0", "yParity": "0x1", "r": "0x1", "s": "0x2"}]}),
            // Refused both ways: the long way's error is the one answered.
            serde_json::json!({"gas": "0x01"}),
            serde_json::json!({"gas": "12"}),
            serde_json::json!({"value": -1}),
            serde_json::json!({"to": "0x12"}),
            serde_json::json!({"type": "0x100"}),
            serde_json::json!({"input": 5}),
        ];
        out.extend(hand);
        (out, from_fixtures)
    }

    #[test]
    fn plain_fields_parse_as_transaction_request_does() {
        let (samples, from_fixtures) = samples();
        assert!(from_fixtures >= 10, "only {from_fixtures} call objects in the fixtures");
        let mut plain = 0;
        for v in &samples {
            let long = TransactionRequest::deserialize(v);
            // A refusal here leaves the answer to the long way, whatever it says.
            if let Ok(fields) = CallFields::deserialize(v) {
                plain += 1;
                let long = long.unwrap_or_else(|e| panic!("{v}: only the plain way takes it: {e}"));
                assert_eq!(<TransactionRequest as From<CallFields>>::from(fields), long, "{v}");
            }
        }
        // Every fixture object and the nine valid hand-written ones take the plain way.
        assert!(plain >= from_fixtures + 9, "{plain} of {} parsed the plain way", samples.len());
    }
}
