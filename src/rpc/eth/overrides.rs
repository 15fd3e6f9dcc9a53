//! The limits of state override sets (`--rpc.max-override-accounts`, `--rpc.max-override-slots`),
//! checked on the parsed JSON before the set is built and applied: a set over either is refused
//! with -32602 naming the limit and its flag. Every method taking overrides checks them
//! (`eth_call`, `eth_estimateGas`, `eth_createAccessList`, `trace_call`, `debug_traceCall`;
//! `eth_simulateV1` over all its blocks' sets together).

use serde_json::Value;

use crate::rpc::server::params::invalid;
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

impl RpcContext {
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
    }
}
