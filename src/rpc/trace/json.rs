//! Parity trace results written straight to JSON text: the bytes serde would write for
//! alloy's `TraceResults`, without serde's per-byte escape scan of every hex string (a quarter of
//! an in-process storage-writing `trace_call` went to serialization; BENCHMARKS.md, issue 14).
//!
//! serde_json has no way to write a string it need not escape, so this is written by hand. In
//! debug builds (every test) each result is also serialized by serde and the two must be equal
//! byte for byte; the vmTrace, when asked for, is written by serde.

use alloy_primitives::hex;
use alloy_primitives::{Address, B256, Bytes, U64, U256};
use alloy_rpc_types_trace::parity::{
    AccountDiff, Action, CallType, CreationMethod, Delta, RewardType, TraceOutput, TraceResults,
    TransactionTrace,
};

use crate::rpc::RpcResult;
use crate::rpc::request::json::{Raw, to_value};

/// `results` as JSON.
pub(crate) fn trace_results(results: &TraceResults) -> RpcResult<Raw> {
    let mut w = Writer(Vec::with_capacity(1024));
    w.results(results)?;
    let raw = Raw::from_ascii(w.0)?;
    #[cfg(debug_assertions)]
    {
        let by_serde = to_value(results)?;
        assert_eq!(raw.as_str(), by_serde.as_str(), "trace_json differs from serde");
    }
    Ok(raw)
}

/// A list of results (`trace_callMany`) as a JSON array.
pub(crate) fn trace_results_list(list: &[TraceResults]) -> RpcResult<Raw> {
    let mut text = Vec::with_capacity(1024 * list.len() + 2);
    text.push(b'[');
    for (i, results) in list.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        text.extend_from_slice(trace_results(results)?.as_str().as_bytes());
    }
    text.push(b']');
    Raw::from_ascii(text)
}

struct Writer(Vec<u8>);

impl Writer {
    fn raw(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    /// `"0x…"` with every byte.
    fn hex(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(b"\"0x");
        let start = self.0.len();
        self.0.resize(start + 2 * bytes.len(), 0);
        // The output slice is exactly twice the input: encoding cannot fail.
        let _ = hex::encode_to_slice(bytes, &mut self.0[start..]);
        self.0.push(b'"');
    }

    fn address(&mut self, a: &Address) {
        self.hex(a.as_slice());
    }

    fn b256(&mut self, b: &B256) {
        self.hex(b.as_slice());
    }

    /// A quantity: `"0x"` and hex without leading zeros, `"0x0"` for zero.
    fn quantity(&mut self, v: &U256) {
        let bytes = v.to_be_bytes::<32>();
        self.quantity_bytes(&bytes);
    }

    fn quantity_u64(&mut self, v: u64) {
        self.quantity_bytes(&v.to_be_bytes());
    }

    fn quantity_bytes(&mut self, be: &[u8]) {
        let Some(first) = be.iter().position(|b| *b != 0) else {
            self.raw("\"0x0\"");
            return;
        };
        let digits = &be[first..];
        self.0.extend_from_slice(b"\"0x");
        let start = self.0.len();
        self.0.resize(start + 2 * digits.len(), 0);
        let _ = hex::encode_to_slice(digits, &mut self.0[start..]);
        // One leading zero nibble at most (the first byte is not zero).
        if self.0[start] == b'0' {
            self.0.remove(start);
        }
        self.0.push(b'"');
    }

    fn usize(&mut self, v: usize) {
        self.raw(itoa::Buffer::new().format(v));
    }

    fn results(&mut self, r: &TraceResults) -> RpcResult<()> {
        self.raw("{\"output\":");
        self.hex(&r.output);
        self.raw(",\"stateDiff\":");
        match &r.state_diff {
            None => self.raw("null"),
            Some(diff) => {
                self.0.push(b'{');
                for (i, (address, account)) in diff.iter().enumerate() {
                    if i > 0 {
                        self.0.push(b',');
                    }
                    self.address(address);
                    self.0.push(b':');
                    self.account(account);
                }
                self.0.push(b'}');
            }
        }
        self.raw(",\"trace\":[");
        for (i, t) in r.trace.iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            self.trace(t)?;
        }
        self.raw("],\"vmTrace\":");
        match &r.vm_trace {
            None => self.raw("null"),
            Some(vm) => self.raw(to_value(vm)?.as_str()),
        }
        self.0.push(b'}');
        Ok(())
    }

    fn account(&mut self, a: &AccountDiff) {
        self.raw("{\"balance\":");
        self.delta(&a.balance, Self::quantity);
        self.raw(",\"code\":");
        self.delta(&a.code, |w, c: &Bytes| w.hex(c));
        self.raw(",\"nonce\":");
        self.delta(&a.nonce, |w, n: &U64| w.quantity_u64(n.to::<u64>()));
        self.raw(",\"storage\":{");
        for (i, (slot, delta)) in a.storage.iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            self.b256(slot);
            self.0.push(b':');
            self.delta(delta, Self::b256);
        }
        self.raw("}}");
    }

    fn delta<T>(&mut self, d: &Delta<T>, value: impl Fn(&mut Self, &T)) {
        match d {
            Delta::Unchanged => self.raw("\"=\""),
            Delta::Added(v) => {
                self.raw("{\"+\":");
                value(self, v);
                self.0.push(b'}');
            }
            Delta::Removed(v) => {
                self.raw("{\"-\":");
                value(self, v);
                self.0.push(b'}');
            }
            Delta::Changed(c) => {
                self.raw("{\"*\":{\"from\":");
                value(self, &c.from);
                self.raw(",\"to\":");
                value(self, &c.to);
                self.raw("}}");
            }
        }
    }

    fn trace(&mut self, t: &TransactionTrace) -> RpcResult<()> {
        match &t.action {
            Action::Call(c) => {
                self.raw("{\"type\":\"call\",\"action\":{\"from\":");
                self.address(&c.from);
                self.raw(",\"callType\":\"");
                self.raw(match c.call_type {
                    CallType::None => "none",
                    CallType::Call => "call",
                    CallType::CallCode => "callcode",
                    CallType::DelegateCall => "delegatecall",
                    CallType::StaticCall => "staticcall",
                    CallType::AuthCall => "authcall",
                });
                self.raw("\",\"gas\":");
                self.quantity_u64(c.gas);
                self.raw(",\"input\":");
                self.hex(&c.input);
                self.raw(",\"to\":");
                self.address(&c.to);
                self.raw(",\"value\":");
                self.quantity(&c.value);
            }
            Action::Create(c) => {
                self.raw("{\"type\":\"create\",\"action\":{\"from\":");
                self.address(&c.from);
                self.raw(",\"gas\":");
                self.quantity_u64(c.gas);
                self.raw(",\"init\":");
                self.hex(&c.init);
                self.raw(",\"value\":");
                self.quantity(&c.value);
                self.raw(",\"creationMethod\":\"");
                self.raw(match c.creation_method {
                    CreationMethod::None => "none",
                    CreationMethod::Create => "create",
                    CreationMethod::Create2 => "create2",
                    CreationMethod::EofCreate => "eofcreate",
                });
                self.0.push(b'"');
            }
            Action::Selfdestruct(s) => {
                self.raw("{\"type\":\"suicide\",\"action\":{\"address\":");
                self.address(&s.address);
                self.raw(",\"balance\":");
                self.quantity(&s.balance);
                self.raw(",\"refundAddress\":");
                self.address(&s.refund_address);
            }
            Action::Reward(r) => {
                self.raw("{\"type\":\"reward\",\"action\":{\"author\":");
                self.address(&r.author);
                self.raw(",\"rewardType\":\"");
                self.raw(match r.reward_type {
                    RewardType::Block => "block",
                    RewardType::Uncle => "uncle",
                });
                self.raw("\",\"value\":");
                self.quantity(&r.value);
            }
        }
        self.0.push(b'}');
        if let Some(error) = &t.error {
            self.raw(",\"error\":");
            // Error texts are free text: escaped by serde.
            self.raw(to_value(error)?.as_str());
        }
        self.raw(",\"result\":");
        match &t.result {
            None => self.raw("null"),
            Some(TraceOutput::Call(c)) => {
                self.raw("{\"gasUsed\":");
                self.quantity_u64(c.gas_used);
                self.raw(",\"output\":");
                self.hex(&c.output);
                self.0.push(b'}');
            }
            Some(TraceOutput::Create(c)) => {
                self.raw("{\"address\":");
                self.address(&c.address);
                self.raw(",\"code\":");
                self.hex(&c.code);
                self.raw(",\"gasUsed\":");
                self.quantity_u64(c.gas_used);
                self.0.push(b'}');
            }
        }
        self.raw(",\"subtraces\":");
        self.usize(t.subtraces);
        self.raw(",\"traceAddress\":[");
        for (i, a) in t.trace_address.iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            self.usize(*a);
        }
        self.raw("]}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(f: impl FnOnce(&mut Writer)) -> String {
        let mut w = Writer(Vec::new());
        f(&mut w);
        String::from_utf8(w.0).unwrap_or_default()
    }

    proptest! {
        /// Quantities and byte strings are written as serde writes them.
        #[test]
        fn scalars_match_serde(limbs in any::<[u64; 4]>(), shift in 0usize..256, bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let v = U256::from_limbs(limbs) >> shift;
            prop_assert_eq!(written(|w| w.quantity(&v)), serde_json::to_string(&v).unwrap_or_default());
            let n = limbs[0] >> (shift % 64);
            prop_assert_eq!(written(|w| w.quantity_u64(n)), serde_json::to_string(&U64::from(n)).unwrap_or_default());
            let b = Bytes::from(bytes);
            prop_assert_eq!(written(|w| w.hex(&b)), serde_json::to_string(&b).unwrap_or_default());
        }
    }
}
