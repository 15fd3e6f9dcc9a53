//! [`parse_ext_witness`]: geth's RLP `ExtWitness` (`core/stateless`): a list of the headers
//! (RLP header lists), the codes and the state nodes (byte strings), in that order; a trailing
//! field (keys, in newer encodings) is ignored.

use alloy_consensus::Header;
use alloy_primitives::Bytes;
use alloy_rlp::Decodable;

use super::{Witness, WitnessError};

const FORMAT: &str = "geth ExtWitness RLP";

/// Reads geth's `ExtWitness` from its RLP.
pub fn parse_ext_witness(mut raw: &[u8]) -> Result<Witness, WitnessError> {
    let fail = |e: alloy_rlp::Error| WitnessError::format(FORMAT, e);
    let outer = alloy_rlp::Header::decode(&mut raw).map_err(fail)?;
    if !outer.list || outer.payload_length > raw.len() {
        return Err(WitnessError::format(FORMAT, "not an RLP list"));
    }
    let mut body = &raw[..outer.payload_length];
    let headers = Vec::<Header>::decode(&mut body).map_err(fail)?;
    let codes = Vec::<Bytes>::decode(&mut body).map_err(fail)?;
    let state = Vec::<Bytes>::decode(&mut body).map_err(fail)?;
    let mut witness = Witness { headers, ..Witness::default() };
    for code in codes {
        witness.add_code(code);
    }
    for node in state {
        witness.add_node(node);
    }
    Ok(witness)
}
