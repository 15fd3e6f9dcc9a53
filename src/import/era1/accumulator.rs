//! The era1 accumulator (SSZ `hash_tree_root(List[HeaderRecord, 8192])` over the blocks'
//! (hash, total difficulty)) and the known epoch roots of mainnet's pre-merge history.
//!
//! Written here by hand (SHA-256 from `sha2`): no maintained crate computes it without pulling
//! in an SSZ stack or an old alloy.

use alloy_primitives::{B256, U256};
use sha2::{Digest, Sha256};

/// Blocks in one era1 epoch, and the most one file holds.
pub(crate) const EPOCH_BLOCKS: u64 = 8192;

/// Depth of the tree of an epoch's 8,192 header records.
const EPOCH_DEPTH: usize = 13;

/// Depth of the tree of EIP-7643's `historical_epochs: List[Bytes32, MAX_HISTORICAL_EPOCHS]`,
/// whose limit is 2,048 = 2^11 epochs (2^13 gives another root than the EIP's).
#[cfg(test)]
const HISTORICAL_EPOCHS_DEPTH: usize = 11;

/// mainnet's historical hashes accumulator (EIP-7643), as SSZ: two 4-byte little-endian offsets
/// (`historical_epochs`, `current_epoch`), then the 1,897 epoch roots of the pre-merge history,
/// then the empty current epoch. Public chain data, from status-im/portal-mainnet `config/`.
const MAINNET_SSZ: &[u8] = include_bytes!("mainnet-epochs.ssz");

/// Pre-merge epochs of mainnet (the last one ends at block 15,537,393).
pub(crate) const MAINNET_EPOCHS: usize = 1897;

// The embedded list has the shape the parser expects, checked when the binary is built.
const _: () = {
    assert!(MAINNET_SSZ.len() == 8 + MAINNET_EPOCHS * 32);
    assert!(
        u32::from_le_bytes([MAINNET_SSZ[0], MAINNET_SSZ[1], MAINNET_SSZ[2], MAINNET_SSZ[3]]) == 8
    );
    assert!(
        u32::from_le_bytes([MAINNET_SSZ[4], MAINNET_SSZ[5], MAINNET_SSZ[6], MAINNET_SSZ[7]])
            as usize
            == MAINNET_SSZ.len()
    );
};

/// sha256(a ‖ b).
fn sha256_pair(a: &[u8], b: &[u8]) -> B256 {
    let mut h = Sha256::new();
    h.update(a);
    h.update(b);
    B256::from_slice(&h.finalize())
}

/// The root of `leaves` padded with zero chunks to `2^depth` leaves (SSZ `merkleize` with a
/// limit). `leaves` must not hold more than `2^depth`.
fn merkleize(leaves: &[B256], depth: usize) -> B256 {
    let mut zero = B256::ZERO;
    let mut level: Vec<B256> = leaves.to_vec();
    for _ in 0..depth {
        if level.is_empty() {
            zero = sha256_pair(zero.as_slice(), zero.as_slice());
            continue;
        }
        let next = level
            .chunks(2)
            .map(|pair| {
                let right = pair.get(1).unwrap_or(&zero);
                sha256_pair(pair[0].as_slice(), right.as_slice())
            })
            .collect();
        level = next;
        zero = sha256_pair(zero.as_slice(), zero.as_slice());
    }
    level.first().copied().unwrap_or(zero)
}

/// SSZ `mix_in_length`: sha256(root ‖ length as 32 bytes little-endian).
fn mix_in_length(root: B256, len: usize) -> B256 {
    sha256_pair(root.as_slice(), &U256::from(len).to_le_bytes::<32>())
}

/// `hash_tree_root` of one header record: sha256(block hash ‖ total difficulty, 32 bytes LE).
pub(crate) fn header_record_root(hash: B256, total_difficulty: U256) -> B256 {
    sha256_pair(hash.as_slice(), &total_difficulty.to_le_bytes::<32>())
}

/// The accumulator root of an era1 file: `hash_tree_root(List[HeaderRecord, 8192])` of its
/// blocks' (hash, total difficulty), in order. At most [`EPOCH_BLOCKS`] records.
pub(crate) fn accumulator_root(records: &[(B256, U256)]) -> B256 {
    let leaves: Vec<B256> = records.iter().map(|(h, td)| header_record_root(*h, *td)).collect();
    mix_in_length(merkleize(&leaves, EPOCH_DEPTH), leaves.len())
}

/// `hash_tree_root` of EIP-7643's `HistoricalHashesAccumulator` with these epoch roots and an
/// empty current epoch (what the embedded list is checked against).
#[cfg(test)]
fn historical_hashes_root(epochs: &[B256]) -> B256 {
    let historical = mix_in_length(merkleize(epochs, HISTORICAL_EPOCHS_DEPTH), epochs.len());
    let current = mix_in_length(merkleize(&[], EPOCH_DEPTH), 0);
    sha256_pair(historical.as_slice(), current.as_slice())
}

/// The epoch roots in an SSZ `HistoricalHashesAccumulator`: two 4-byte offsets, then the roots;
/// `None` when the bytes are not that shape (or the current epoch is not empty).
pub(crate) fn parse_epoch_roots(ssz: &[u8]) -> Option<Vec<B256>> {
    let offset = |at: usize| -> Option<usize> {
        let b = ssz.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let (first, second) = (offset(0)?, offset(4)?);
    if first != 8 || second < first || second != ssz.len() || (second - first) % 32 != 0 {
        return None;
    }
    Some(ssz[first..second].chunks_exact(32).map(B256::from_slice).collect())
}

/// The known epoch roots of a network's pre-merge history: its name and the roots, by chain id.
/// Only mainnet's are embedded (Sepolia's list was not available to embed).
pub(crate) fn known_epoch_roots(chain_id: u64) -> Option<(&'static str, &'static [B256])> {
    static MAINNET: std::sync::OnceLock<Vec<B256>> = std::sync::OnceLock::new();
    match chain_id {
        // The shape is checked at build time; were it wrong anyway, no epoch would be known and
        // every mainnet file would be refused, naming the epoch.
        1 => Some((
            "mainnet",
            MAINNET.get_or_init(|| parse_epoch_roots(MAINNET_SSZ).unwrap_or_default()),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::b256;

    /// EIP-7643: the root of mainnet's historical hashes accumulator.
    const EIP_7643_ROOT: B256 =
        b256!("0xec8e040fd6c557b41ca8ddd38f7e9d58a9281918dc92bdb72342a38fb085e701");

    #[test]
    fn the_embedded_epoch_list_is_eip_7643s_accumulator() {
        let epochs = parse_epoch_roots(MAINNET_SSZ).expect("the embedded list parses");
        assert_eq!(epochs.len(), MAINNET_EPOCHS);
        assert_eq!(
            epochs[0],
            b256!("0x5ec1ffb8c3b146f42606c74ced973dc16ec5a107c0345858c343fc94780b4218")
        );
        assert_eq!(historical_hashes_root(&epochs), EIP_7643_ROOT);
        let (name, known) = known_epoch_roots(1).expect("mainnet's are known");
        assert_eq!((name, known), ("mainnet", epochs.as_slice()));
        assert!(known_epoch_roots(11_155_111).is_none());
        assert!(known_epoch_roots(1337).is_none());
    }

    #[test]
    fn malformed_epoch_lists_do_not_parse() {
        assert!(parse_epoch_roots(&[]).is_none());
        assert!(parse_epoch_roots(&[8, 0, 0, 0, 9, 0, 0, 0, 1]).is_none());
        assert!(parse_epoch_roots(&[8, 0, 0, 0, 40, 0, 0, 0]).is_none());
        let mut one = vec![8, 0, 0, 0, 40, 0, 0, 0];
        one.extend_from_slice(&[7u8; 32]);
        assert_eq!(parse_epoch_roots(&one), Some(vec![B256::repeat_byte(7)]));
    }

    #[test]
    fn merkleize_pads_with_zero_subtrees() {
        // Two leaves at depth 1 are one hash; padded to depth 2, the right subtree is the zero
        // subtree of depth 1.
        let (a, b) = (B256::repeat_byte(1), B256::repeat_byte(2));
        let ab = sha256_pair(a.as_slice(), b.as_slice());
        assert_eq!(merkleize(&[a, b], 1), ab);
        let z1 = sha256_pair(&[0; 32], &[0; 32]);
        assert_eq!(merkleize(&[a, b], 2), sha256_pair(ab.as_slice(), z1.as_slice()));
        assert_eq!(merkleize(&[], 1), z1);
        assert_eq!(merkleize(&[], 0), B256::ZERO);
    }
}
