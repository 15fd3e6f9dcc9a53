//! [`parse_execution_witness`]: the JSON of `debug_executionWitness` as geth and reth serve it.
//!
//! `{state: [node], codes: [code], keys: [preimage] | null, headers: [header]}`, bare, inside a
//! JSON-RPC answer (`{"result": …}`) or a recorded `{request, response}` pair (or a list of
//! them). geth gives the headers as JSON objects, reth as RLP hex: both are read.
//! alloy-rpc-types-debug's `ExecutionWitness` takes headers as bytes only and no `null` keys,
//! so the answer is read here as JSON values.

use alloy_consensus::Header;
use alloy_primitives::{Bytes, hex};
use alloy_rlp::Decodable;
use serde_json::Value;

use super::block::header_from_json;
use super::{Witness, WitnessError};

const FORMAT: &str = "debug_executionWitness JSON";

/// Reads a `debug_executionWitness` answer.
pub fn parse_execution_witness(value: Value) -> Result<Witness, WitnessError> {
    let value = unwrap_answer(value);
    let mut witness = Witness::default();
    for node in list(&value, "state")? {
        witness.add_node(bytes(node, "state")?);
    }
    for code in list(&value, "codes")? {
        witness.add_code(bytes(code, "codes")?);
    }
    if !value.get("keys").is_none_or(Value::is_null) {
        for key in list(&value, "keys")? {
            witness.keys.push(bytes(key, "keys")?);
        }
    }
    for header in list(&value, "headers")? {
        let header = match header {
            Value::String(_) => {
                let raw = bytes(header, "headers")?;
                Header::decode(&mut raw.as_ref())
                    .map_err(|e| WitnessError::format(FORMAT, format!("header RLP: {e}")))?
            }
            other => header_from_json(other.clone())?,
        };
        witness.headers.push(header);
    }
    Ok(witness)
}

/// The witness object inside a recorded exchange or a JSON-RPC answer.
fn unwrap_answer(mut value: Value) -> Value {
    loop {
        value = match value {
            Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
            Value::Object(mut map) if map.contains_key("response") => {
                map.remove("response").unwrap_or_default()
            }
            Value::Object(mut map) if map.contains_key("result") => {
                map.remove("result").unwrap_or_default()
            }
            other => return other,
        }
    }
}

fn list<'a>(value: &'a Value, field: &str) -> Result<&'a Vec<Value>, WitnessError> {
    value
        .get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| WitnessError::format(FORMAT, format!("no `{field}` list")))
}

fn bytes(value: &Value, field: &str) -> Result<Bytes, WitnessError> {
    let text = value
        .as_str()
        .ok_or_else(|| WitnessError::format(FORMAT, format!("`{field}` holds a non-string")))?;
    hex::decode(text)
        .map(Bytes::from)
        .map_err(|e| WitnessError::format(FORMAT, format!("`{field}`: {e}")))
}
