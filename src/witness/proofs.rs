//! [`parse_proofs`] and [`parse_zeth`]: a witness from `eth_getProof` answers at the parent
//! block (what zk provers' hosts collect), such as risc0/zeth's host cache files.
//!
//! Where the block deletes an account or slot, the trie collapses the branch above it into the
//! sibling, whose node a proof of the deleted key at the parent does not hold. A prover's host
//! takes it from the proofs of the same keys at the block itself: the node that replaced the
//! branch there is the sibling with the branch's nibble (and any extension above) prepended,
//! so the sibling is that node with its path shortened. [`parse_proofs`] adds those shortened
//! forms of every post-state leaf and extension; only the ones some parent node refers to by
//! hash are ever read.

use std::io::Read;

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::Bytes;
use alloy_rlp::{Decodable, Encodable};
use alloy_rpc_types_eth::EIP1186AccountProofResponse;
use alloy_trie::nodes::{ExtensionNode, LeafNode, TrieNode};
use serde_json::Value;

use super::block::block_from_json;
use super::{Witness, WitnessError};

const ZETH: &str = "zeth host cache";

/// A witness from the proofs at the parent (`parent_proofs`), the same keys' proofs at the
/// block (`block_proofs`, for the siblings of deleted keys), the code the block runs and the
/// ancestor headers.
pub fn parse_proofs(
    parent_proofs: &[EIP1186AccountProofResponse],
    block_proofs: &[EIP1186AccountProofResponse],
    codes: impl IntoIterator<Item = Bytes>,
    headers: Vec<alloy_consensus::Header>,
) -> Witness {
    let mut witness = Witness { headers, ..Witness::default() };
    for proof in parent_proofs {
        let storage = proof.storage_proof.iter().flat_map(|s| s.proof.iter());
        for node in proof.account_proof.iter().chain(storage) {
            witness.add_node(node.clone());
        }
    }
    for proof in block_proofs {
        let storage = proof.storage_proof.iter().flat_map(|s| s.proof.iter());
        for node in proof.account_proof.iter().chain(storage) {
            add_shortened(&mut witness, node);
        }
    }
    for code in codes {
        if !code.is_empty() {
            witness.add_code(code);
        }
    }
    witness
}

/// Adds `node` and each form of it with a shorter path (see the module's doc).
fn add_shortened(witness: &mut Witness, node: &Bytes) {
    witness.add_node(node.clone());
    let Ok(decoded) = TrieNode::decode(&mut node.as_ref()) else { return };
    let mut add = |n: TrieNode| {
        let mut rlp = Vec::new();
        n.encode(&mut rlp);
        // Shorter ones are embedded in their parent, never looked up by hash.
        if rlp.len() >= 32 {
            witness.add_node(rlp.into());
        }
    };
    match decoded {
        TrieNode::Leaf(leaf) => {
            for cut in 1..leaf.key.len() {
                add(TrieNode::Leaf(LeafNode::new(leaf.key.slice(cut..), leaf.value.clone())));
            }
        }
        TrieNode::Extension(ext) => {
            for cut in 1..ext.key.len() {
                add(TrieNode::Extension(ExtensionNode::new(
                    ext.key.slice(cut..),
                    ext.child.clone(),
                )));
            }
        }
        TrieNode::Branch(_) | TrieNode::EmptyRoot => {}
    }
}

/// Reads a risc0/zeth host cache (gzipped or not): `{full_blocks, proofs, code, …}`, each a
/// list of `[query, answer]` pairs; the block is the highest of `full_blocks`, its parent the
/// one before, the proofs at the parent's number the pre-state.
pub fn parse_zeth(bytes: &[u8]) -> Result<(Witness, Block<TxEnvelope>), WitnessError> {
    let mut text = Vec::new();
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut text)
            .map_err(|e| WitnessError::format(ZETH, format!("gzip: {e}")))?;
        &text[..]
    } else {
        bytes
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| WitnessError::format(ZETH, e))?;
    let pairs = |field: &str| -> Result<Vec<(Value, Value)>, WitnessError> {
        let list = value
            .get(field)
            .and_then(Value::as_array)
            .ok_or_else(|| WitnessError::format(ZETH, format!("no `{field}` list")))?;
        list.iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([q, a]) => Ok((q.clone(), a.clone())),
                _ => Err(WitnessError::format(
                    ZETH,
                    format!("`{field}`: not a [query, answer] pair"),
                )),
            })
            .collect()
    };
    let block_no = |q: &Value| q.get("block_no").and_then(Value::as_u64);
    let mut blocks = pairs("full_blocks")?;
    blocks.sort_by_key(|(q, _)| block_no(q));
    let (Some((_, block)), Some((_, parent))) = (blocks.pop(), blocks.pop()) else {
        return Err(WitnessError::format(ZETH, "`full_blocks` holds fewer than two blocks"));
    };
    let block = block_from_json(block)?;
    let parent = block_from_json(parent)?.header;
    let parent_number = parent.number;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for (q, answer) in pairs("proofs")? {
        let proof: EIP1186AccountProofResponse = serde_json::from_value(answer)
            .map_err(|e| WitnessError::format(ZETH, format!("proof: {e}")))?;
        if block_no(&q) == Some(parent_number) { before.push(proof) } else { after.push(proof) }
    }
    let mut codes = Vec::new();
    for (_, answer) in pairs("code")? {
        codes.push(
            serde_json::from_value::<Bytes>(answer)
                .map_err(|e| WitnessError::format(ZETH, format!("code: {e}")))?,
        );
    }
    let mut headers = vec![parent];
    for (_, answer) in blocks {
        headers.push(block_from_json(answer)?.header);
    }
    Ok((parse_proofs(&before, &after, codes, headers), block))
}
