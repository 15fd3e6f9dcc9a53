//! Positional parameter parsing with errors that name the parameter and what was wrong.

use alloy_primitives::{Address, B256, U256};
use jsonrpsee::types::Params;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::rpc::{RpcError, RpcResult};

/// The positional parameters of one call, checked against the method's arity.
#[derive(Debug)]
pub(crate) struct Args {
    values: Vec<Value>,
}

/// A block reference as accepted by the methods (tags, numbers, hashes, EIP-1898 objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockRef {
    /// A block number.
    Number(u64),
    /// `latest` (also what `pending` means for reads on this node).
    Latest,
    /// `earliest` (genesis).
    Earliest,
    /// `pending`.
    Pending,
    /// `safe`.
    Safe,
    /// `finalized`.
    Finalized,
    /// A block hash.
    Hash(B256),
}

impl Args {
    /// Parses `params` (absent, null or an array) of at most `max` values. A missing required
    /// value is reported by the accessor that reads it, which names the parameter.
    pub(crate) fn new(params: &Params<'_>, max: usize) -> RpcResult<Self> {
        let values: Vec<Value> = match params.as_str() {
            None => Vec::new(),
            Some(s) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Array(v)) => v,
                Ok(Value::Null) => Vec::new(),
                Ok(_) => return Err(invalid("params must be an array")),
                Err(e) => return Err(invalid(format!("params: {e}"))),
            },
        };
        if values.len() > max {
            return Err(invalid(format!("too many arguments, want at most {max}")));
        }
        Ok(Self { values })
    }

    /// Raw value of argument `i`, `None` when absent or null.
    pub(crate) fn get(&self, i: usize) -> Option<&Value> {
        self.values.get(i).filter(|v| !v.is_null())
    }

    /// Argument `i` deserialized with serde; absent or null gives `None`.
    pub(crate) fn opt<T: DeserializeOwned>(&self, i: usize, name: &str) -> RpcResult<Option<T>> {
        match self.get(i) {
            None => Ok(None),
            Some(v) => T::deserialize(v).map(Some).map_err(|e| {
                invalid(format!("invalid argument {i} ({name}): {}", serde_message(&e)))
            }),
        }
    }

    /// Required argument `i` deserialized with serde.
    pub(crate) fn req<T: DeserializeOwned>(&self, i: usize, name: &str) -> RpcResult<T> {
        self.opt(i, name)?
            .ok_or_else(|| invalid(format!("missing value for required argument {i} ({name})")))
    }

    /// Required hex quantity that fits in u64.
    pub(crate) fn quantity(&self, i: usize, name: &str) -> RpcResult<u64> {
        match self.get(i) {
            None => Err(invalid(format!("missing value for required argument {i} ({name})"))),
            Some(v) => {
                quantity(v).map_err(|e| invalid(format!("invalid argument {i} ({name}): {e}")))
            }
        }
    }

    /// Required 32-byte hash: `0x` and 64 hex digits.
    pub(crate) fn hash(&self, i: usize, name: &str) -> RpcResult<B256> {
        match self.get(i) {
            None => Err(invalid(format!("missing value for required argument {i} ({name})"))),
            Some(Value::String(s)) if !s.starts_with("0x") => {
                Err(invalid(format!("invalid argument {i} ({name}): hex string without 0x prefix")))
            }
            Some(_) => self.req(i, name),
        }
    }

    /// Required address.
    pub(crate) fn address(&self, i: usize, name: &str) -> RpcResult<Address> {
        self.req(i, name)
    }

    /// Block reference at `i`; absent means `latest`.
    pub(crate) fn block(&self, i: usize, name: &str) -> RpcResult<BlockRef> {
        match self.get(i) {
            None => Ok(BlockRef::Latest),
            Some(v) => block_ref(v, true)
                .map_err(|e| invalid(format!("invalid argument {i} ({name}): {e}"))),
        }
    }

    /// Required block reference at `i` (number, tag, hash or EIP-1898 object).
    pub(crate) fn block_req(&self, i: usize, name: &str) -> RpcResult<BlockRef> {
        if self.get(i).is_none() {
            return Err(invalid(format!("missing value for required argument {i} ({name})")));
        }
        self.block(i, name)
    }

    /// Block number or tag at `i` (no hashes): for the `...ByNumber` methods.
    pub(crate) fn block_number(&self, i: usize, name: &str) -> RpcResult<BlockRef> {
        match self.get(i) {
            None => Err(invalid(format!("missing value for required argument {i} ({name})"))),
            Some(v) => block_ref(v, false)
                .map_err(|e| invalid(format!("invalid argument {i} ({name}): {e}"))),
        }
    }

    /// Required boolean.
    pub(crate) fn boolean(&self, i: usize, name: &str) -> RpcResult<bool> {
        match self.get(i) {
            Some(Value::Bool(b)) => Ok(*b),
            None => Err(invalid(format!("missing value for required argument {i} ({name})"))),
            Some(other) => Err(invalid(format!(
                "invalid argument {i} ({name}): expected a boolean, got {other}"
            ))),
        }
    }

    /// Storage slot key (up to 32 bytes of hex), with geth's messages.
    pub(crate) fn storage_key(&self, i: usize, name: &str) -> RpcResult<U256> {
        let Some(v) = self.get(i) else {
            return Err(invalid(format!("missing value for required argument {i} ({name})")));
        };
        let Value::String(s) = v else {
            return Err(invalid(format!("invalid argument {i} ({name}): expected a hex string")));
        };
        storage_key(s)
    }
}

/// A storage slot as the methods taking slots accept it: hex of up to 32 bytes, leading
/// zeros optional (`0x0` is slot 0), as clients send it for `eth_getStorageAt`.
pub(crate) fn storage_key(s: &str) -> RpcResult<U256> {
    if s.starts_with('-') {
        return Err(invalid(format!("storage key {s:?} is negative: a slot is unsigned")));
    }
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(format!("invalid hex in storage key: \"{s}\"")));
    }
    if digits.len() > 64 {
        return Err(invalid(format!("storage key too long (want at most 32 bytes): \"{s}\"")));
    }
    U256::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
        .map_err(|_| invalid(format!("invalid hex in storage key: \"{s}\"")))
}

/// serde's message for a value that did not parse, with a negative number named as one, as
/// [`quantity`] names it: alloy's number types call `"-0x1"` an "invalid value: string
/// \"-0x1\", expected a 32 byte hex string", which does not say what is wrong.
pub(crate) fn serde_message(e: &impl std::fmt::Display) -> String {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix("invalid value: string \"-")
        && let Some((digits, _)) = rest.split_once('"')
        && !digits.is_empty()
    {
        return format!("\"-{digits}\" is negative: a quantity is a 0x-prefixed unsigned number");
    }
    msg
}

pub(crate) fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::InvalidParams(msg.into())
}

/// A hex quantity: `0x` prefix, 1+ hex digits (leading zeros accepted), fits in u64.
pub(crate) fn quantity(v: &Value) -> Result<u64, String> {
    let Value::String(s) = v else {
        return Err(format!("expected a hex string, got {v}"));
    };
    let Some(digits) = s.strip_prefix("0x") else {
        if s.starts_with('-') {
            return Err(format!("{s:?} is negative: a quantity is a 0x-prefixed unsigned number"));
        }
        return Err(format!("hex string without 0x prefix: {s:?}"));
    };
    if digits.is_empty() {
        return Err("hex string \"0x\" has no digits".into());
    }
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("invalid hex digit in {s:?}"));
    }
    let trimmed = digits.trim_start_matches('0');
    if trimmed.len() > 16 {
        return Err(format!("{s:?} does not fit in 64 bits"));
    }
    u64::from_str_radix(if trimmed.is_empty() { "0" } else { trimmed }, 16)
        .map_err(|e| format!("{s:?}: {e}"))
}

/// A block reference from a JSON value; `allow_hash` admits hashes and EIP-1898 objects.
pub(crate) fn block_ref(v: &Value, allow_hash: bool) -> Result<BlockRef, String> {
    match v {
        Value::String(s) => match s.as_str() {
            "latest" => Ok(BlockRef::Latest),
            "earliest" => Ok(BlockRef::Earliest),
            "pending" => Ok(BlockRef::Pending),
            "safe" => Ok(BlockRef::Safe),
            "finalized" => Ok(BlockRef::Finalized),
            _ if allow_hash && s.len() == 66 && s.starts_with("0x") => s
                .parse::<B256>()
                .map(BlockRef::Hash)
                .map_err(|e| format!("invalid block hash {s:?}: {e}")),
            _ => quantity(v).map(BlockRef::Number).map_err(|e| {
                format!(
                    "{e} (want a block number, or latest, earliest, pending, safe, finalized{})",
                    if allow_hash { ", or a block hash" } else { "" }
                )
            }),
        },
        Value::Object(map) if allow_hash => {
            for key in map.keys() {
                if !matches!(key.as_str(), "blockNumber" | "blockHash" | "requireCanonical") {
                    return Err(format!("unknown field {key:?} in block object"));
                }
            }
            match (map.get("blockNumber"), map.get("blockHash")) {
                (Some(n), None) => block_ref(n, false),
                (None, Some(Value::String(h))) => h
                    .parse::<B256>()
                    .map(BlockRef::Hash)
                    .map_err(|e| format!("invalid blockHash {h:?}: {e}")),
                _ => Err("block object needs exactly one of blockNumber, blockHash".into()),
            }
        }
        other => Err(format!("expected a block number or tag string, got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_follow_behaviour_md() {
        assert_eq!(quantity(&json!("0x0")), Ok(0));
        assert_eq!(quantity(&json!("0x00ff")), Ok(255));
        for bad in [
            json!("0x"),
            json!("12"),
            json!("0xZZ"),
            json!(12),
            json!("-0x1"),
            json!("0x10000000000000000"),
        ] {
            assert!(quantity(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_negative_number_is_named_by_every_parser() {
        for v in [json!("-0x1"), json!("-1")] {
            let e = serde_json::from_value::<alloy_primitives::U256>(v.clone()).unwrap_err();
            assert!(serde_message(&e).contains("is negative"), "{v}: {e}");
            let e = serde_json::from_value::<alloy_primitives::U64>(v.clone()).unwrap_err();
            assert!(serde_message(&e).contains("is negative"), "{v}: {e}");
            assert!(quantity(&v).is_err_and(|e| e.contains("is negative")), "{v}");
        }
        let e = serde_json::from_value::<alloy_primitives::U256>(json!("0xzz")).unwrap_err();
        assert!(!serde_message(&e).contains("negative"), "{e}");
    }

    #[test]
    fn block_refs() {
        assert_eq!(block_ref(&json!("pending"), false), Ok(BlockRef::Pending));
        assert_eq!(block_ref(&json!({"blockNumber": "0x2"}), true), Ok(BlockRef::Number(2)));
        let h = format!("0x{}", "11".repeat(32));
        assert!(matches!(block_ref(&json!(h), true), Ok(BlockRef::Hash(_))));
        assert!(block_ref(&json!(h), false).is_err());
    }
}
