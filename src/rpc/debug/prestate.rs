//! geth's `prestateTracer` answer, built from the transaction's touched state and the state
//! before it, with the rules of geth's `eth/tracers/native/prestate.go`.
//!
//! revm-inspectors 0.44's builder (and alloy's `AccountState`) differ from geth: no `codeHash`
//! (geth reports it for every account with code, even under `disableCode`, and in `post` when
//! it changed), `includeEmpty` unknown (geth then keeps accounts that were empty before the
//! transaction, and refuses it with `diffMode`), a self-destructed account's `pre` storage
//! pruned (geth keeps that account's `pre` whole: every slot read or written, zero or not), and
//! code cleared by an EIP-7702 delegation reset missing from `post` (geth writes `"code":
//! "0x"`). The accounts reported are revm's touched ones, as before.

use std::collections::BTreeMap;

use alloy_primitives::{Address, B256, Bytes, KECCAK256_EMPTY, U256};
use revm::DatabaseRef;
use revm::state::{Account, AccountInfo, EvmState};
use serde::{Deserialize, Serialize};

/// `tracerConfig` of `prestateTracer`, geth's `PrestateTracerConfig`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PrestateConfig {
    /// Report `pre` and `post` of what changed instead of the pre-state.
    #[serde(default)]
    pub diff_mode: bool,
    /// Leave out code.
    #[serde(default)]
    pub disable_code: bool,
    /// Leave out storage.
    #[serde(default)]
    pub disable_storage: bool,
    /// Keep accounts that were empty before the transaction.
    #[serde(default)]
    pub include_empty: bool,
}

impl PrestateConfig {
    /// geth's check: `diffMode` needs empty accounts left out.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self.diff_mode && self.include_empty {
            return Err("cannot use diffMode with includeEmpty");
        }
        Ok(())
    }
}

/// One account as geth's prestate tracer writes it (field order and `omitempty` as geth's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct AccountOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    balance: Option<U256>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<Bytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code_hash: Option<B256>,
    #[serde(skip_serializing_if = "is_zero")]
    nonce: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    storage: BTreeMap<B256, B256>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The `diffMode` answer: `post` before `pre`, as geth writes it.
#[derive(Debug, Serialize)]
struct Diff {
    post: BTreeMap<Address, AccountOut>,
    pre: BTreeMap<Address, AccountOut>,
}

/// The prestate tracer's answer for a transaction that changed `state`, over `db`, the state
/// before it.
pub(crate) fn prestate<DB: DatabaseRef>(
    state: &EvmState,
    db: &DB,
    config: &PrestateConfig,
) -> Result<serde_json::Value, String>
where
    DB::Error: std::fmt::Display,
{
    let mut pre = BTreeMap::new();
    let mut post = BTreeMap::new();
    for (addr, acc) in state {
        let before = db.basic_ref(*addr).map_err(|e| e.to_string())?.unwrap_or_default();
        let code = code_of(db, &before)?;
        // Accounts empty before the transaction are left out of `pre` unless asked for (never
        // in diff mode, where they may still be in `post`).
        let was_empty = before.nonce == 0 && before.balance.is_zero() && code.is_empty();
        let keep_pre = !was_empty || config.include_empty;
        if !keep_pre && !config.diff_mode {
            continue;
        }
        let mut account = AccountOut {
            balance: Some(before.balance),
            code: (!config.disable_code && !code.is_empty()).then(|| code.clone()),
            code_hash: has_code(before.code_hash).then_some(before.code_hash),
            nonce: before.nonce,
            storage: BTreeMap::new(),
        };
        if !config.disable_storage {
            account.storage = acc
                .storage
                .iter()
                .map(|(k, slot)| (B256::from(*k), B256::from(slot.original_value)))
                .collect();
        }
        if !config.diff_mode || acc.is_selfdestructed() {
            // A self-destructed account's pre-state is kept whole; it has no post-state.
            if keep_pre {
                pre.insert(*addr, account);
            }
            continue;
        }
        if let Some(after) = changes(&mut account, &before, &code, acc, config) {
            post.insert(*addr, after);
            if keep_pre {
                pre.insert(*addr, account);
            }
        }
    }
    let value = if config.diff_mode {
        serde_json::to_value(Diff { post, pre })
    } else {
        serde_json::to_value(pre)
    };
    value.map_err(|e| e.to_string())
}

/// What changed in `acc` against `pre` (geth's `processDiffState`), pruning `pre`'s storage to
/// the changed, non-zero slots; `None` if nothing changed.
fn changes(
    pre: &mut AccountOut,
    before: &AccountInfo,
    code: &Bytes,
    acc: &Account,
    config: &PrestateConfig,
) -> Option<AccountOut> {
    let mut post = AccountOut::default();
    let mut modified = false;
    if acc.info.balance != before.balance {
        modified = true;
        post.balance = Some(acc.info.balance);
    }
    if acc.info.nonce != before.nonce {
        modified = true;
        post.nonce = acc.info.nonce;
    }
    let new_hash = acc.info.code_hash;
    if new_hash != before.code_hash {
        modified = true;
        post.code_hash = Some(new_hash);
        if !config.disable_code {
            // Cleared code (an EIP-7702 delegation reset) is written as "0x".
            let new_code = acc.info.code.as_ref().map(|c| c.original_bytes()).unwrap_or_default();
            if new_code != *code {
                post.code = Some(new_code);
            }
        }
    }
    if !config.disable_storage {
        for (key, slot) in &acc.storage {
            let key = B256::from(*key);
            if slot.original_value.is_zero() || slot.original_value == slot.present_value {
                pre.storage.remove(&key);
            }
            if slot.original_value != slot.present_value {
                modified = true;
                if !slot.present_value.is_zero() {
                    post.storage.insert(key, B256::from(slot.present_value));
                }
            }
        }
    }
    modified.then_some(post)
}

/// Whether a code hash is of code (geth leaves `codeHash` out for codeless accounts).
fn has_code(hash: B256) -> bool {
    hash != KECCAK256_EMPTY && hash != B256::ZERO
}

/// An account's code before the transaction.
fn code_of<DB: DatabaseRef>(db: &DB, info: &AccountInfo) -> Result<Bytes, String>
where
    DB::Error: std::fmt::Display,
{
    if !has_code(info.code_hash) {
        return Ok(Bytes::new());
    }
    match &info.code {
        Some(code) => Ok(code.original_bytes()),
        None => db
            .code_by_hash_ref(info.code_hash)
            .map(|c| c.original_bytes())
            .map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{address, keccak256};
    use revm::bytecode::Bytecode;
    use revm::database::{CacheDB, EmptyDB};
    use revm::state::{EvmStorageSlot, TransactionId};
    use serde_json::json;

    const A: Address = address!("0x00000000000000000000000000000000000000aa");
    const TARGET: Address = address!("0x00000000000000000000000000000000000000bb");

    fn info(balance: u64, nonce: u64, code: &[u8]) -> AccountInfo {
        let code = Bytecode::new_raw(Bytes::copy_from_slice(code));
        AccountInfo::new(U256::from(balance), nonce, code.hash_slow(), code)
    }

    fn slot(original: u64, present: u64) -> EvmStorageSlot {
        EvmStorageSlot::new_changed(U256::from(original), U256::from(present), TransactionId::ZERO)
    }

    fn word(n: u64) -> String {
        format!("{:#066x}", n)
    }

    /// A self-destructed account (pre-Cancun, or created in the transaction over an account
    /// that had a balance) keeps its whole pre-state in diff mode: balance, nonce, code and
    /// codeHash, and every slot it touched, the unchanged and the zero ones too (geth skips it
    /// in `processDiffState`). It has no post-state.
    #[test]
    fn a_self_destructed_accounts_pre_state_is_kept_whole() {
        let code = [0x60, 0x00, 0xff];
        let mut db = CacheDB::new(EmptyDB::default());
        db.insert_account_info(A, info(7, 1, &code));
        let mut acc = Account::from(info(0, 1, &code));
        acc.storage.insert(U256::from(1), slot(5, 5));
        acc.storage.insert(U256::from(2), slot(0, 0));
        acc.storage.insert(U256::from(3), slot(9, 0));
        acc.mark_touch();
        acc.mark_selfdestruct();
        let state: EvmState = [(A, acc)].into_iter().collect();
        let config = PrestateConfig { diff_mode: true, ..Default::default() };
        let got = prestate(&state, &db, &config).unwrap();
        let expected = json!({
            "post": {},
            "pre": {format!("{A:#x}"): {
                "balance": "0x7",
                "code": "0x6000ff",
                "codeHash": format!("{:#x}", keccak256(code)),
                "nonce": 1,
                "storage": {word(1): word(5), word(2): word(0), word(3): word(9)},
            }},
        });
        assert_eq!(got, expected);
    }

    /// An EIP-7702 delegation reset (to the zero address) clears the authority's code: `post`
    /// has `"code": "0x"` and the empty code hash, beside the bumped nonce.
    #[test]
    fn cleared_delegation_code_is_in_post() {
        let mut designator = vec![0xef, 0x01, 0x00];
        designator.extend_from_slice(TARGET.as_slice());
        let mut db = CacheDB::new(EmptyDB::default());
        db.insert_account_info(A, info(100, 3, &designator));
        let mut acc = Account::from(info(100, 4, &[]));
        acc.mark_touch();
        let state: EvmState = [(A, acc)].into_iter().collect();
        let config = PrestateConfig { diff_mode: true, ..Default::default() };
        let got = prestate(&state, &db, &config).unwrap();
        let a = format!("{A:#x}");
        let expected = json!({
            "post": {a.clone(): {"code": "0x", "codeHash": format!("{KECCAK256_EMPTY:#x}"), "nonce": 4}},
            "pre": {a: {
                "balance": "0x64",
                "code": format!("0x{}", alloy_primitives::hex::encode(&designator)),
                "codeHash": format!("{:#x}", keccak256(&designator)),
                "nonce": 3,
            }},
        });
        assert_eq!(got, expected);
    }

    /// geth refuses `includeEmpty` with `diffMode`.
    #[test]
    fn include_empty_is_refused_in_diff_mode() {
        let config = PrestateConfig { diff_mode: true, include_empty: true, ..Default::default() };
        assert_eq!(config.check(), Err("cannot use diffMode with includeEmpty"));
        assert_eq!(PrestateConfig { include_empty: true, ..Default::default() }.check(), Ok(()));
    }
}
