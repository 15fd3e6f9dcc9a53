//! The limits of state override sets (`--rpc.max-override-accounts`, `--rpc.max-override-slots`),
//! checked before the set is built and applied: a set over either is refused with -32602 naming
//! the limit and its flag. Every method taking overrides checks them (`eth_call`,
//! `eth_estimateGas`, `eth_createAccessList`, `trace_call`, `debug_traceCall`; `eth_simulateV1`
//! over all its blocks' sets together), first on the request's text ([`RawSets`]: counted
//! without building anything, so a set far over the limit costs one scan of its text), then on
//! the parsed JSON.

use std::fmt;

use jsonrpsee::types::Params;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::rpc::request::params::invalid;
use crate::rpc::{RpcContext, RpcResult};

/// Accounts and storage slots of override sets.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OverrideCount {
    accounts: usize,
    slots: usize,
}

impl OverrideCount {
    /// Adds the set `v` (an object of accounts; anything else counts nothing and is left to
    /// the parser to refuse).
    pub(crate) fn add(&mut self, v: Option<&Value>) {
        let Some(Value::Object(accounts)) = v else { return };
        self.accounts += accounts.len();
        for account in accounts.values() {
            for key in ["state", "stateDiff"] {
                if let Some(Value::Object(slots)) = account.get(key) {
                    self.slots += slots.len();
                }
            }
        }
    }
}

/// Where a method's override sets sit in its parameters (positional, as JSON text).
#[derive(Debug, Clone, Copy)]
pub(crate) enum RawSets {
    /// The parameter at this index is a set (`eth_call`: 2, `trace_call`: 3).
    At(usize),
    /// The parameter at this index is an options object with a `stateOverrides` set
    /// (`debug_traceCall`: 2).
    InOptions(usize),
    /// `eth_simulateV1`: each `blockStateCalls[].stateOverrides` of the payload at 0.
    Simulate,
}

#[derive(serde::Deserialize)]
struct Options<'a> {
    #[serde(borrow, default, rename = "stateOverrides")]
    state_overrides: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct Payload<'a> {
    #[serde(borrow, default, rename = "blockStateCalls")]
    blocks: Vec<Options<'a>>,
}

impl RawSets {
    /// The accounts and slots of the sets in `params`; `None` when the text is not of the
    /// expected shape (the parser then says what is wrong).
    fn count(self, params: &str) -> Option<OverrideCount> {
        let list: Vec<&RawValue> = serde_json::from_str(params).ok()?;
        let sets: Vec<&RawValue> = match self {
            Self::At(i) => list.get(i).copied().into_iter().collect(),
            Self::InOptions(i) => {
                let opts: Options<'_> = serde_json::from_str(list.get(i)?.get()).ok()?;
                opts.state_overrides.into_iter().collect()
            }
            Self::Simulate => {
                let payload: Payload<'_> = serde_json::from_str(list.first()?.get()).ok()?;
                payload.blocks.into_iter().filter_map(|b| b.state_overrides).collect()
            }
        };
        let mut total = OverrideCount::default();
        for set in sets {
            let SetCount(c) = serde_json::from_str(set.get()).ok()?;
            total.accounts += c.accounts;
            total.slots += c.slots;
        }
        Some(total)
    }
}

/// An override set's counts, read from its text without building it.
struct SetCount(OverrideCount);

impl<'de> Deserialize<'de> for SetCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Set;
        impl<'de> Visitor<'de> for Set {
            type Value = OverrideCount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a state override set")
            }
            fn visit_unit<E>(self) -> Result<OverrideCount, E> {
                Ok(OverrideCount::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<OverrideCount, A::Error> {
                let mut c = OverrideCount::default();
                while let Some((IgnoredAny, AccountSlots(slots))) = m.next_entry()? {
                    c.accounts += 1;
                    c.slots += slots;
                }
                Ok(c)
            }
        }
        d.deserialize_any(Set).map(SetCount)
    }
}

/// The slots (`state` and `stateDiff` entries) of one account's override.
struct AccountSlots(usize);

impl<'de> Deserialize<'de> for AccountSlots {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Account;
        impl<'de> Visitor<'de> for Account {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an account override")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<usize, A::Error> {
                let mut n = 0;
                while let Some(key) = m.next_key::<Key>()? {
                    match key {
                        Key::Slots => n += m.next_value::<Entries>()?.0,
                        Key::Other => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(n)
            }
        }
        d.deserialize_map(Account).map(AccountSlots)
    }
}

/// A field of an account override: `state` or `stateDiff`, or another.
enum Key {
    Slots,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(if matches!(v, "state" | "stateDiff") { Key::Slots } else { Key::Other })
            }
        }
        d.deserialize_str(Name)
    }
}

/// The entries of a JSON object (0 for `null`).
struct Entries(usize);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Count;
        impl<'de> Visitor<'de> for Count {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of storage slots")
            }
            fn visit_unit<E>(self) -> Result<usize, E> {
                Ok(0)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<usize, A::Error> {
                let mut n = 0;
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(n)
            }
        }
        d.deserialize_any(Count).map(Entries)
    }
}

impl RpcContext {
    /// Refuses a request whose override sets, counted on its text (`sets` says where they
    /// are), are over the limits; `what` names the argument. Run before the parameters are
    /// parsed, so a set far over the limit is never built.
    pub(crate) fn precheck_overrides(
        &self,
        p: &Params<'_>,
        sets: RawSets,
        what: &str,
    ) -> RpcResult<()> {
        match p.as_str().and_then(|text| sets.count(text)) {
            Some(count) => self.check_overrides(count, what),
            None => Ok(()),
        }
    }

    /// Refuses override sets of more accounts or slots than the operator allows; `what` names
    /// the argument in the message.
    pub(crate) fn check_overrides(&self, count: OverrideCount, what: &str) -> RpcResult<()> {
        let (max_accounts, max_slots) =
            (self.config.max_override_accounts, self.config.max_override_slots);
        if count.accounts > max_accounts {
            return Err(invalid(format!(
                "invalid argument {what}: {} accounts overridden, over the limit of \
                 {max_accounts} (--rpc.max-override-accounts)",
                count.accounts
            )));
        }
        if count.slots > max_slots {
            return Err(invalid(format!(
                "invalid argument {what}: {} storage slots overridden, over the limit of \
                 {max_slots} (--rpc.max-override-slots)",
                count.slots
            )));
        }
        Ok(())
    }

    /// [`Self::check_overrides`] of the one set `v`.
    pub(crate) fn check_override_set(&self, v: Option<&Value>, what: &str) -> RpcResult<()> {
        let mut count = OverrideCount::default();
        count.add(v);
        self.check_overrides(count, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accounts_and_both_kinds_of_slots() {
        let set = serde_json::json!({
            "0x0000000000000000000000000000000000000001": {"balance": "0x1"},
            "0x0000000000000000000000000000000000000002": {"state": {"0x1": "0x2", "0x2": "0x3"}},
            "0x0000000000000000000000000000000000000003": {"stateDiff": {"0x1": "0x2"}},
        });
        let mut c = OverrideCount::default();
        c.add(Some(&set));
        c.add(Some(&Value::Null));
        assert_eq!((c.accounts, c.slots), (3, 3));
        // The same counts from the text, wherever a method keeps its sets.
        let text = set.to_string();
        let at = RawSets::At(1).count(&format!("[{{}}, {text}]")).unwrap();
        let opts = RawSets::InOptions(2)
            .count(&format!("[{{}}, \"latest\", {{\"stateOverrides\": {text}}}]"));
        let sim = RawSets::Simulate.count(&format!(
            "[{{\"blockStateCalls\": [{{\"stateOverrides\": {text}}}, {{}}, {{\"stateOverrides\": {text}}}]}}]"
        ));
        assert_eq!((at.accounts, at.slots), (3, 3));
        let opts = opts.unwrap();
        assert_eq!((opts.accounts, opts.slots), (3, 3));
        let sim = sim.unwrap();
        assert_eq!((sim.accounts, sim.slots), (6, 6));
        // Not of the shape: nothing counted, the parser will say what is wrong.
        assert!(RawSets::At(0).count("[[1]]").is_none());
    }
}
