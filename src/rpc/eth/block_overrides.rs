//! The keys a `blockOverrides` object may carry, checked before alloy's `BlockOverrides` reads
//! it: that type skips a key it does not know, and behaviour.md §3.1 never accepts and ignores
//! (a typo such as `numbr` would run the call at the head). State override entries need no such
//! check: alloy's `AccountOverride` already refuses an unknown key, naming it.

use serde_json::Value;

/// Which method's overrides: the keys each one applies differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OverridesOf {
    /// `eth_call`, `trace_call`, `eth_estimateGas`, `eth_createAccessList`, `debug_traceCall`:
    /// the call runs in block N's environment, so no system call reads a beacon root.
    Call,
    /// `eth_simulateV1`'s blocks: built whole, with their beacon root, without `blockHash`.
    Simulate,
}

/// Keys both kinds apply, with alloy's aliases (`blockNumber`, `feeRecipient`, `prevRandao`,
/// `baseFeePerGas`).
const APPLIED: &[&str] = &[
    "number",
    "blockNumber",
    "difficulty",
    "time",
    "gasLimit",
    "coinbase",
    "feeRecipient",
    "random",
    "prevRandao",
    "baseFee",
    "baseFeePerGas",
    "blobBaseFee",
];

/// Keys a call applies, besides [`APPLIED`]: the hashes `BLOCKHASH` answers.
const CALL_ONLY: &[&str] = &["blockHash"];

/// Keys a simulated block applies, besides [`APPLIED`]: its beacon root (EIP-4788's system
/// call stores it).
const SIMULATE_ONLY: &[&str] = &["beaconRoot", "parentBeaconBlockRoot"];

/// Keys geth knows but the other kind of method cannot apply (geth refuses `beaconRoot` and
/// `withdrawals` in `eth_call` with this wording).
const NOT_FOR_THIS: &[&str] = &["beaconRoot", "parentBeaconBlockRoot", "blockHash", "withdrawals"];

/// Checks the keys of the `blockOverrides` object `v` for `of`. The message names the first
/// key refused (in the object's order) and, for an unknown key, the keys accepted; a value
/// that is not an object is left to serde, whose message says so.
pub(crate) fn check_block_overrides(v: &Value, of: OverridesOf) -> Result<(), String> {
    let Value::Object(map) = v else { return Ok(()) };
    let own = match of {
        OverridesOf::Call => CALL_ONLY,
        OverridesOf::Simulate => SIMULATE_ONLY,
    };
    for key in map.keys().map(String::as_str) {
        if APPLIED.contains(&key) || own.contains(&key) {
            continue;
        }
        if NOT_FOR_THIS.contains(&key) {
            return Err(format!("block override {key:?} is not supported for this RPC method"));
        }
        let known: Vec<&str> = APPLIED.iter().chain(own).copied().collect();
        return Err(format!("unknown field {key:?} (want one of {})", known.join(", ")));
    }
    Ok(())
}

/// [`check_block_overrides`] on every `blockStateCalls[k].blockOverrides` of an
/// `eth_simulateV1` payload `v`; the message names the block.
pub(crate) fn check_simulate_payload(v: &Value) -> Result<(), String> {
    let Some(Value::Array(blocks)) = v.get("blockStateCalls") else { return Ok(()) };
    for (k, block) in blocks.iter().enumerate() {
        if let Some(o) = block.get("blockOverrides") {
            check_block_overrides(o, OverridesOf::Simulate)
                .map_err(|e| format!("blockStateCalls[{k}].blockOverrides: {e}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_key_alloy_reads_is_listed() {
        // Every key given is read by alloy's type: serialising what it parsed gives each one
        // back (under its own name, not the alias).
        let hash = format!("0x{}", "11".repeat(32));
        let all = json!({
            "number": "0x1", "difficulty": "0x2", "time": "0x3", "gasLimit": "0x4",
            "coinbase": format!("0x{}", "22".repeat(20)), "random": hash, "baseFee": "0x5",
            "blobBaseFee": "0x6", "beaconRoot": hash, "blockHash": {"1": hash},
        });
        let parsed: alloy_rpc_types_eth::BlockOverrides =
            serde_json::from_value(all.clone()).unwrap();
        assert_eq!(serde_json::to_value(parsed).unwrap(), all);
        for key in all.as_object().unwrap().keys() {
            let known = APPLIED.contains(&key.as_str())
                || CALL_ONLY.contains(&key.as_str())
                || SIMULATE_ONLY.contains(&key.as_str());
            assert!(known, "{key}");
        }
    }

    #[test]
    fn unknown_and_unapplied_keys_are_named() {
        let err = check_block_overrides(&json!({"numbr": "0x99"}), OverridesOf::Call);
        assert!(err.as_ref().is_err_and(|e| e.contains("\"numbr\"")), "{err:?}");
        let err = check_block_overrides(&json!({"beaconRoot": "0x"}), OverridesOf::Call);
        assert!(err.is_err_and(|e| e.contains("\"beaconRoot\" is not supported")));
        assert!(check_block_overrides(&json!({"beaconRoot": "0x"}), OverridesOf::Simulate).is_ok());
        let err = check_block_overrides(&json!({"blockHash": {}}), OverridesOf::Simulate);
        assert!(err.is_err_and(|e| e.contains("\"blockHash\" is not supported")));
        let ok = json!({"blockNumber": "0x1", "feeRecipient": "0x", "prevRandao": "0x"});
        assert!(check_block_overrides(&ok, OverridesOf::Call).is_ok());
    }
}
