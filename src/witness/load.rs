//! [`load_witness`]: a witness file of any format loupe reads, told apart by its content.

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::hex;
use serde_json::Value;

use super::{
    Witness, WitnessError, parse_execution_witness, parse_ext_witness, parse_nimbus, parse_zeth,
};

/// A witness read from a file, with the block when the file holds it (zeth, nimbus).
#[derive(Debug)]
pub struct Loaded {
    /// The witness.
    pub witness: Witness,
    /// The block, where the file holds it.
    pub block: Option<Block<TxEnvelope>>,
    /// The format the file was read as.
    pub format: &'static str,
}

/// Reads a witness file: gzipped or plain zeth host cache, nimbus dump, `debug_executionWitness`
/// JSON (bare, JSON-RPC answer or `{request, response}`), or geth's `ExtWitness` as binary or
/// hex RLP.
pub fn load_witness(bytes: &[u8]) -> Result<Loaded, WitnessError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let (witness, block) = parse_zeth(bytes)?;
        return Ok(Loaded { witness, block: Some(block), format: "zeth" });
    }
    if bytes.first().is_some_and(|b| *b >= 0xc0) {
        let witness = parse_ext_witness(bytes)?;
        return Ok(Loaded { witness, block: None, format: "geth ExtWitness" });
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| WitnessError::format("witness", "neither RLP, gzip, hex nor JSON"))?
        .trim();
    if !(text.starts_with('{') || text.starts_with('[')) {
        let raw =
            hex::decode(text).map_err(|e| WitnessError::format("witness", format!("hex: {e}")))?;
        let witness = parse_ext_witness(&raw)?;
        return Ok(Loaded { witness, block: None, format: "geth ExtWitness" });
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| WitnessError::format("witness JSON", e))?;
    if value.get("full_blocks").is_some() {
        let (witness, block) = parse_zeth(text.as_bytes())?;
        return Ok(Loaded { witness, block: Some(block), format: "zeth" });
    }
    if value.get("blockNumber").is_some() && value.get("state").is_some_and(Value::is_object) {
        let (witness, block) = parse_nimbus(&value)?;
        return Ok(Loaded { witness, block: Some(block), format: "nimbus" });
    }
    let witness = parse_execution_witness(value)?;
    Ok(Loaded { witness, block: None, format: "debug_executionWitness" })
}

/// Reads the witness file at `path` ([`load_witness`]).
pub fn read_witness_file(path: &std::path::Path) -> Result<Loaded, WitnessError> {
    let bytes = std::fs::read(path)
        .map_err(|source| WitnessError::Io { path: path.display().to_string(), source })?;
    load_witness(&bytes)
}
