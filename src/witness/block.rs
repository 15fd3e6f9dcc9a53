//! [`parse_block`]: a block as RLP (binary or hex text) or as `eth_getBlockByNumber(n, true)`
//! JSON (bare or inside a JSON-RPC envelope).

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::hex;
use alloy_rlp::Decodable;
use serde_json::Value;

use super::WitnessError;

const FORMAT: &str = "block";

/// Reads a block from a file's bytes: binary RLP, hex RLP text, or block JSON.
pub fn parse_block(bytes: &[u8]) -> Result<Block<TxEnvelope>, WitnessError> {
    if bytes.first().is_some_and(|b| *b >= 0xc0) {
        return decode_rlp(bytes);
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| WitnessError::format(FORMAT, "neither RLP, hex nor JSON"))?
        .trim();
    if text.starts_with('{') {
        let value: Value =
            serde_json::from_str(text).map_err(|e| WitnessError::format(FORMAT, e))?;
        return block_from_json(value);
    }
    let raw = hex::decode(text).map_err(|e| WitnessError::format(FORMAT, format!("hex: {e}")))?;
    decode_rlp(&raw)
}

fn decode_rlp(mut raw: &[u8]) -> Result<Block<TxEnvelope>, WitnessError> {
    let block = Block::<TxEnvelope>::decode(&mut raw)
        .map_err(|e| WitnessError::format(FORMAT, format!("RLP: {e}")))?;
    if !raw.is_empty() {
        return Err(WitnessError::format(FORMAT, format!("{} bytes after the block", raw.len())));
    }
    Ok(block)
}

/// A block from `eth_getBlockByNumber(n, true)`'s JSON (or a JSON-RPC answer holding it); its
/// `hash`, where given, must be the hash of the header read.
pub(crate) fn block_from_json(mut value: Value) -> Result<Block<TxEnvelope>, WitnessError> {
    if let Some(result) = value.get_mut("result") {
        value = result.take();
    }
    let rpc: alloy_rpc_types_eth::Block =
        serde_json::from_value(value).map_err(|e| WitnessError::format("block JSON", e))?;
    let given = rpc.header.hash;
    let block = rpc.into_consensus().map_transactions(|tx| tx.into_inner());
    let hash = block.header.hash_slow();
    if hash != given {
        return Err(WitnessError::Mismatch {
            what: "block hash (of the JSON header)",
            expected: given.to_string(),
            got: hash.to_string(),
        });
    }
    Ok(block)
}

/// A header from a JSON header object; its `hash` must be the hash of the header read.
pub(crate) fn header_from_json(value: Value) -> Result<alloy_consensus::Header, WitnessError> {
    let rpc: alloy_rpc_types_eth::Header =
        serde_json::from_value(value).map_err(|e| WitnessError::format("header JSON", e))?;
    let hash = rpc.inner.hash_slow();
    if hash != rpc.hash {
        return Err(WitnessError::Mismatch {
            what: "header hash (of a JSON header)",
            expected: rpc.hash.to_string(),
            got: hash.to_string(),
        });
    }
    Ok(rpc.inner)
}
