//! geth's `flatCallTracer` built as geth builds it: the `callTracer`'s tree flattened.
//!
//! revm-inspectors 0.44 answers `flatCallTracer` from its Parity builder, which differs from
//! geth's `eth/tracers/native/call_flat.go` in three ways: its root `gasUsed` is execution gas
//! (geth's is the receipt's, as in `callTracer`), its errors are always Parity's wording (geth
//! uses its own unless `convertParityErrors`), and it hides every zero-value call to a
//! precompile (geth hides only `CALL` and `STATICCALL` to one, whatever the value, unless
//! `includePrecompiles`). So loupe runs the `callTracer` and flattens its frame here, with
//! geth's rules: a child without a value gets zero, a failed frame other than a revert has no
//! `result` (a revert keeps it, a reverted create without `address`), and `convertParityErrors`
//! maps geth's error strings with geth's table.
//!
//! The precompiles hidden are those active at the transaction's fork (geth's
//! `vm.ActivePrecompiles(rules)`: a precompile moved by a state override is not one of them).

use alloy_primitives::{Address, U256};
use alloy_rpc_types_eth::TransactionInfo;
use alloy_rpc_types_trace::geth::{CallFrame, FlatCallConfig};
use alloy_rpc_types_trace::parity::{
    Action, CallAction, CallOutput, CallType, CreateAction, CreateOutput, CreationMethod,
    LocalizedTransactionTrace, SelfdestructAction, TraceOutput, TransactionTrace,
};
use revm::precompile::{PrecompileSpecId, Precompiles};
use revm::primitives::hardfork::SpecId;

/// geth's `parityErrorMapping`: whole error strings.
const PARITY_ERRORS: [(&str, &str); 10] = [
    ("contract creation code storage out of gas", "Out of gas"),
    ("out of gas", "Out of gas"),
    ("gas uint64 overflow", "Out of gas"),
    ("max code size exceeded", "Out of gas"),
    ("invalid jump destination", "Bad jump destination"),
    ("execution reverted", "Reverted"),
    ("return data out of bounds", "Out of bounds"),
    ("stack limit reached 1024 (1023)", "Out of stack"),
    ("precompiled failed", "Built-in failed"),
    ("invalid input length", "Built-in failed"),
];

/// geth's `parityErrorMappingStartingWith`: error prefixes.
const PARITY_ERROR_PREFIXES: [(&str, &str); 2] =
    [("invalid opcode:", "Bad instruction"), ("stack underflow", "Stack underflow")];

/// geth's wording of a revert, the one failure whose `result` is kept.
const REVERTED: &str = "execution reverted";

/// The `flatCallTracer` answer for one transaction from its `callTracer` frame (traced with the
/// default `callTracer` config), at fork `spec`, located by `info`.
pub(crate) fn flatten(
    root: &CallFrame,
    config: &FlatCallConfig,
    spec: SpecId,
    info: &TransactionInfo,
) -> Vec<LocalizedTransactionTrace> {
    let rules = Rules {
        parity_errors: config.convert_parity_errors.unwrap_or_default(),
        precompiles: (!config.include_precompiles.unwrap_or_default())
            .then(|| Precompiles::new(PrecompileSpecId::from_spec_id(spec))),
    };
    let mut out = Vec::new();
    rules.push(root, Vec::new(), &mut out);
    out.into_iter()
        .map(|trace| LocalizedTransactionTrace {
            trace,
            block_hash: info.block_hash,
            block_number: info.block_number,
            transaction_hash: info.hash,
            transaction_position: info.index,
        })
        .collect()
}

/// The traces as geth writes them: a reverted create's `result` without `address`.
pub(crate) fn to_json(
    traces: &[LocalizedTransactionTrace],
) -> Result<serde_json::Value, serde_json::Error> {
    let mut out = serde_json::to_value(traces)?;
    if let Some(list) = out.as_array_mut() {
        for (json, trace) in list.iter_mut().zip(traces) {
            let t = &trace.trace;
            if matches!(t.action, Action::Create(_))
                && t.error.is_some()
                && let Some(result) = json.get_mut("result").and_then(|r| r.as_object_mut())
            {
                result.remove("address");
            }
        }
    }
    Ok(out)
}

/// How frames are flattened.
struct Rules {
    /// `convertParityErrors`.
    parity_errors: bool,
    /// The precompiles whose `CALL`s and `STATICCALL`s are hidden (`None`: `includePrecompiles`).
    precompiles: Option<&'static Precompiles>,
}

impl Rules {
    /// Whether a child frame is left out (geth's `OnExit` drops it from its parent).
    fn hidden(&self, frame: &CallFrame) -> bool {
        let Some(precompiles) = self.precompiles else { return false };
        matches!(frame.typ.as_str(), "CALL" | "STATICCALL")
            && frame.to.is_some_and(|to| precompiles.contains(&to))
    }

    /// Appends `frame` at `at`, then its shown children (geth's `flatFromNested`).
    fn push(&self, frame: &CallFrame, at: Vec<usize>, out: &mut Vec<TransactionTrace>) {
        let children: Vec<&CallFrame> =
            frame.calls.iter().filter(|child| !self.hidden(child)).collect();
        let error = frame.error.as_deref().map(|e| self.error(e));
        let failed = frame.error.as_deref().is_some_and(|e| e != REVERTED);
        // geth: "child calls must have a value, even if it's zero".
        let value = frame.value.unwrap_or(U256::ZERO);
        let gas = saturating_u64(frame.gas);
        let gas_used = saturating_u64(frame.gas_used);
        let output = frame.output.clone().unwrap_or_default();
        let (action, result) = match frame.typ.as_str() {
            "CREATE" | "CREATE2" => {
                let creation_method = if frame.typ == "CREATE2" {
                    CreationMethod::Create2
                } else {
                    CreationMethod::Create
                };
                let action = Action::Create(CreateAction {
                    from: frame.from,
                    gas,
                    init: frame.input.clone(),
                    value,
                    creation_method,
                });
                // A reverted create keeps its result (the revert data as `code`) but has no
                // address: geth's `callTracer` drops its `to`. Parity's create output needs
                // one; [`to_json`] takes the placeholder out.
                let address = frame.to.unwrap_or(Address::ZERO);
                let result = TraceOutput::Create(CreateOutput { address, code: output, gas_used });
                (action, Some(result))
            }
            "SELFDESTRUCT" => {
                let action = Action::Selfdestruct(SelfdestructAction {
                    address: frame.from,
                    balance: value,
                    refund_address: frame.to.unwrap_or(Address::ZERO),
                });
                (action, None)
            }
            kind => {
                let call_type = match kind {
                    "STATICCALL" => CallType::StaticCall,
                    "DELEGATECALL" => CallType::DelegateCall,
                    "CALLCODE" => CallType::CallCode,
                    _ => CallType::Call,
                };
                let action = Action::Call(CallAction {
                    from: frame.from,
                    call_type,
                    gas,
                    input: frame.input.clone(),
                    to: frame.to.unwrap_or(Address::ZERO),
                    value,
                });
                (action, (!failed).then_some(TraceOutput::Call(CallOutput { gas_used, output })))
            }
        };
        out.push(TransactionTrace {
            action,
            error,
            result: if failed { None } else { result },
            subtraces: children.len(),
            trace_address: at.clone(),
        });
        for (i, child) in children.into_iter().enumerate() {
            let mut child_at = at.clone();
            child_at.push(i);
            self.push(child, child_at, out);
        }
    }

    /// A frame's error as geth's flat tracer words it.
    fn error(&self, geth: &str) -> String {
        if !self.parity_errors {
            return geth.to_owned();
        }
        PARITY_ERRORS
            .iter()
            .find(|(g, _)| *g == geth)
            .or_else(|| PARITY_ERROR_PREFIXES.iter().find(|(g, _)| geth.starts_with(g)))
            .map_or_else(|| geth.to_owned(), |(_, parity)| (*parity).to_owned())
    }
}

/// A gas amount of a call frame (a `U256` there) as Parity's `u64`.
fn saturating_u64(v: U256) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(typ: &str, to: u64, value: Option<u64>) -> CallFrame {
        CallFrame {
            typ: typ.into(),
            to: Some(Address::with_last_byte(to as u8)),
            value: value.map(U256::from),
            ..Default::default()
        }
    }

    /// geth's rule (call_flat.go `OnExit`): only CALL and STATICCALL to a precompile are hidden,
    /// whatever their value; CALLCODE and DELEGATECALL to one are shown.
    #[test]
    fn only_call_and_staticcall_to_precompiles_are_hidden() {
        let mut root = frame("CALL", 0xaa, Some(0));
        root.calls = vec![
            frame("CALL", 2, Some(0)),
            frame("CALL", 2, Some(5)),
            frame("STATICCALL", 4, None),
            frame("CALLCODE", 4, Some(0)),
            frame("DELEGATECALL", 1, Some(0)),
            frame("STATICCALL", 0xbb, None),
        ];
        let info = TransactionInfo::default();
        let hidden = flatten(&root, &FlatCallConfig::default(), SpecId::CANCUN, &info);
        let kinds: Vec<_> = hidden
            .iter()
            .map(|t| match &t.trace.action {
                Action::Call(c) => (c.call_type, c.to.0[19], c.value),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (CallType::Call, 0xaa, U256::ZERO),
                (CallType::CallCode, 4, U256::ZERO),
                (CallType::DelegateCall, 1, U256::ZERO),
                // STATICCALL has no value: geth gives child calls zero.
                (CallType::StaticCall, 0xbb, U256::ZERO),
            ]
        );
        assert_eq!(hidden[0].trace.subtraces, 3);
        assert_eq!(hidden[3].trace.trace_address, [2]);
        let all = FlatCallConfig { include_precompiles: Some(true), ..Default::default() };
        assert_eq!(flatten(&root, &all, SpecId::CANCUN, &info).len(), 7);
    }

    /// geth keeps a reverted create's result (gas used, the revert data as `code`) without an
    /// address, and drops a create's result on any other failure.
    #[test]
    fn a_reverted_create_keeps_its_result_without_address() {
        let mut root = frame("CALL", 0xaa, Some(0));
        let mut reverted = frame("CREATE", 0, Some(0));
        reverted.to = None;
        reverted.error = Some(REVERTED.into());
        reverted.output = Some(vec![0xab].into());
        reverted.gas_used = U256::from(5);
        let mut oog = reverted.clone();
        oog.error = Some("out of gas".into());
        root.calls = vec![reverted, oog];
        let traces =
            flatten(&root, &FlatCallConfig::default(), SpecId::CANCUN, &TransactionInfo::default());
        let json = to_json(&traces).unwrap();
        assert_eq!(json[1]["result"], serde_json::json!({"code": "0xab", "gasUsed": "0x5"}));
        assert_eq!(json[1]["error"], REVERTED);
        assert!(json[2]["result"].is_null(), "{json}");
    }

    /// geth's table: `convertParityErrors` maps whole strings and prefixes; without it geth's
    /// strings stay. A non-revert failure has no result; a revert keeps its output.
    #[test]
    fn errors_follow_convert_parity_errors() {
        let mut root = frame("CALL", 0xaa, Some(0));
        let mut oog = frame("CALL", 0xbb, Some(0));
        oog.error = Some("out of gas".into());
        let mut bad = frame("CALL", 0xbc, Some(0));
        bad.error = Some("invalid opcode: INVALID".into());
        let mut revert = frame("CALL", 0xbd, Some(0));
        revert.error = Some(REVERTED.into());
        revert.output = Some(vec![1, 2].into());
        root.calls = vec![oog, bad, revert];
        let info = TransactionInfo::default();
        let errors = |config: &FlatCallConfig| -> Vec<Option<String>> {
            flatten(&root, config, SpecId::CANCUN, &info)
                .into_iter()
                .map(|t| t.trace.error)
                .collect()
        };
        let geth = errors(&FlatCallConfig::default());
        assert_eq!(
            geth,
            [
                None,
                Some("out of gas".into()),
                Some("invalid opcode: INVALID".into()),
                Some(REVERTED.into())
            ]
        );
        let parity = errors(&FlatCallConfig::default().parity_errors());
        assert_eq!(
            parity,
            [
                None,
                Some("Out of gas".into()),
                Some("Bad instruction".into()),
                Some("Reverted".into())
            ]
        );
        let traces = flatten(&root, &FlatCallConfig::default(), SpecId::CANCUN, &info);
        assert!(traces[1].trace.result.is_none());
        let Some(TraceOutput::Call(out)) = &traces[3].trace.result else { panic!("{traces:?}") };
        assert_eq!(out.output.as_ref(), [1, 2]);
    }
}
