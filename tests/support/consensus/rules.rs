//! The rule an invalid block must be refused by: the words loupe's reason holds for each of the
//! suites' `expectException` names, and the blocks loupe refuses by another rule, with why.

/// One invalid block's refusal: the suite's `expectException` and loupe's reason.
pub type Refusal = (String, String);

/// What loupe's reason for refusing a block says, for each `expectException` of the suites
/// (several alternatives joined by `|` in the suite): one of these words.
pub fn reason_words(expect: &str) -> &'static [&'static str] {
    match expect.split('.').next_back().unwrap_or_default() {
        "INTRINSIC_GAS_TOO_LOW" => &["call gas cost", "intrinsic", "gas floor"],
        "INTRINSIC_GAS_BELOW_FLOOR_GAS_COST" => &["gas floor"],
        "INVALID_REQUESTS" => &["requests hash"],
        "GAS_LIMIT_EXCEEDS_MAXIMUM" => &["greater than the cap"],
        "INVALID_DEPOSIT_EVENT_LAYOUT" => &["deposit requests", "requests hash"],
        "SENDER_NOT_EOA" => &["senders with deployed code"],
        "TYPE_3_TX_BLOB_COUNT_EXCEEDED" => &["too many blobs"],
        "TYPE_3_TX_MAX_BLOB_GAS_ALLOWANCE_EXCEEDED" => &["blob gas"],
        "SYSTEM_CONTRACT_CALL_FAILED" => &["contract call", "system contract rule"],
        "RLP_BLOCK_LIMIT_EXCEEDED" => &["block size rule"],
        // A type-4 transaction has no creation form: its RLP does not decode.
        "TYPE_4_TX_CONTRACT_CREATION" => &["unexpected length"],
        "TYPE_4_EMPTY_AUTHORIZATION_LIST" => &["empty authorization list"],
        "PRIORITY_GREATER_THAN_MAX_FEE_PER_GAS" => &["priority fee is greater than max fee"],
        "NONCE_MISMATCH_TOO_LOW" => &["too low"],
        "INSUFFICIENT_MAX_FEE_PER_GAS" => &["less than basefee"],
        "GAS_ALLOWANCE_EXCEEDED" | "GAS_USED_OVERFLOW" => &["available gas", "gas used"],
        "INITCODE_SIZE_EXCEEDED" => &["initcode size"],
        "INVALID_BLOCK_ACCESS_LIST" | "INVALID_BAL_HASH" | "INCORRECT_BLOCK_FORMAT" => {
            &["block access list"]
        }
        "BLOCK_ACCESS_LIST_GAS_LIMIT_EXCEEDED" => &["block access list rule"],
        _ => &[],
    }
}

/// Whether loupe's `reason` names the rule of one of the suite's alternatives in `expect`.
pub fn names_the_rule(expect: &str, reason: &str) -> bool {
    expect.split('|').any(|e| reason_words(e).iter().any(|w| reason.contains(w)))
}
