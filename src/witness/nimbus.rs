//! [`parse_nimbus`]: nimbus-eth1's PersistBlockTests dumps (`blockN.json`): every key/value a
//! nimbus node read or wrote while executing block N, as `{blockNumber, state: {key: value}}`.
//!
//! 32-byte keys are keccak256 of their value: trie nodes (state, storage and the block's
//! transaction trie), code, and the ommers list (under the header's ommers hash). Headers (and ommers lists) are
//! under prefix 0x00 + hash, block numbers' hashes under 0x01 + the number as 32 little-endian
//! bytes, code under 0x06 + hash, slot preimages under 0x05 + hash. The block comes out of the dump as nimbus's test rebuilt it: its header by number,
//! its transactions from the transaction trie under its transactions root, its ommers from the
//! list under its ommers hash.

use std::collections::HashMap;
use std::sync::Arc;

use alloy_consensus::{Block, BlockBody, EMPTY_OMMER_ROOT_HASH, Header, TxEnvelope};
use alloy_eips::eip2718::Decodable2718;
use alloy_primitives::{B256, Bytes, U256, hex, keccak256};
use alloy_rlp::Decodable;
use serde_json::Value;

use super::nodes::TrieReader;
use super::{Witness, WitnessError};

const FORMAT: &str = "nimbus PersistBlockTests dump";

/// Reads a nimbus-eth1 PersistBlockTests dump: the witness and the block.
pub fn parse_nimbus(value: &Value) -> Result<(Witness, Block<TxEnvelope>), WitnessError> {
    let fail = |m: String| WitnessError::format(FORMAT, m);
    let number = value
        .get("blockNumber")
        .and_then(Value::as_str)
        .and_then(|n| u64::from_str_radix(n.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| fail("no hex `blockNumber`".into()))?;
    let entries = value
        .get("state")
        .and_then(Value::as_object)
        .ok_or_else(|| fail("no `state` object".into()))?;
    let mut witness = Witness::default();
    let mut headers: HashMap<B256, Header> = HashMap::new();
    let mut hashes: HashMap<u64, B256> = HashMap::new();
    let mut preimages: HashMap<B256, Bytes> = HashMap::new();
    for (key, value) in entries {
        let key = hex::decode(key).map_err(|e| fail(format!("key {key}: {e}")))?;
        let value = value
            .as_str()
            .map(hex::decode)
            .and_then(Result::ok)
            .map(Bytes::from)
            .ok_or_else(|| fail(format!("value of {} is not hex", hex::encode(&key))))?;
        match (key.len(), key.first()) {
            (32, _) => {
                let hash = B256::from_slice(&key);
                if keccak256(&value) == hash {
                    witness.nodes.insert(hash, value.clone());
                    witness.codes.insert(hash, value.clone());
                    preimages.insert(hash, value);
                }
            }
            // Headers, and the ommers lists (keyed by the ommers hash).
            (33, Some(0x00)) => match Header::decode(&mut value.as_ref()) {
                Ok(header) => drop(headers.insert(B256::from_slice(&key[1..]), header)),
                Err(_) => drop(preimages.insert(B256::from_slice(&key[1..]), value)),
            },
            (33, Some(0x01)) => {
                let n = U256::from_le_slice(&key[1..]);
                let hash = B256::decode(&mut value.as_ref())
                    .map_err(|e| fail(format!("hash of block {n}: {e}")))?;
                if let Ok(n) = u64::try_from(n) {
                    hashes.insert(n, hash);
                }
            }
            (33, Some(0x06)) => {
                let hash = B256::from_slice(&key[1..]);
                if keccak256(&value) == hash {
                    witness.codes.insert(hash, value);
                }
            }
            (33, Some(0x05)) => witness.keys.push(value),
            _ => {}
        }
    }
    let hash = hashes.get(&number).ok_or_else(|| fail(format!("no hash of block {number}")))?;
    let header =
        headers.remove(hash).ok_or_else(|| fail(format!("no header of block {number}")))?;
    witness.headers = headers.into_values().collect();

    let reader = TrieReader::new(Arc::new(witness));
    let mut transactions = Vec::new();
    for index in 0u64.. {
        let key = alloy_rlp::encode(index);
        let needed_for = || format!("read transaction {index} of block {number}");
        let Some(raw) = reader.get(header.transactions_root, &key, &needed_for)? else { break };
        let tx = TxEnvelope::decode_2718(&mut raw.as_slice())
            .map_err(|e| fail(format!("transaction {index}: {e}")))?;
        transactions.push(tx);
    }
    let ommers = if header.ommers_hash == EMPTY_OMMER_ROOT_HASH {
        Vec::new()
    } else {
        let raw = preimages
            .get(&header.ommers_hash)
            .ok_or_else(|| fail(format!("no ommers list {}", header.ommers_hash)))?;
        Vec::<Header>::decode(&mut raw.as_ref()).map_err(|e| fail(format!("ommers: {e}")))?
    };
    let witness = reader.witness().clone();
    let body = BlockBody { transactions, ommers, withdrawals: None };
    Ok((witness, Block { header, body }))
}
