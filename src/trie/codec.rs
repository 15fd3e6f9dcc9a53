//! Byte layouts of trie keys and nodes, and the key-range arithmetic the walk needs.
//!
//! A path of up to 64 nibbles is stored as 32 packed bytes (zero-padded) plus its length, so
//! byte order is nibble order: a prefix sorts before its extensions, and siblings in nibble
//! order (reth's pitfall #17906 was an encoding that did not). A node is its three masks (u16
//! BE each: state, tree, hash) and one 32-byte hash per bit of the hash mask; the root hash
//! alloy-trie attaches to the root node is never stored.

use alloy_primitives::B256;
use alloy_trie::{BranchNodeCompact, Nibbles, TrieMask};

/// Packs `path` into the 33-byte sortable key.
pub(crate) fn pack_path(path: &Nibbles) -> [u8; 33] {
    let mut out = [0u8; 33];
    path.pack_to(&mut out[..32]);
    out[32] = path.len() as u8;
    out
}

/// Unpacks a 33-byte path key; rejects lengths over 64 and non-zero padding.
pub(crate) fn unpack_path(key: &[u8; 33]) -> Result<Nibbles, String> {
    let len = key[32] as usize;
    if len > 64 {
        return Err(format!("path length {len} over 64"));
    }
    let path = Nibbles::unpack(&key[..32]).slice(..len);
    if pack_path(&path) != *key {
        return Err("path key has non-zero padding".into());
    }
    Ok(path)
}

/// Encodes a branch node for storage.
pub(crate) fn encode_node(node: &BranchNodeCompact) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + 32 * node.hashes.len());
    out.extend_from_slice(&node.state_mask.get().to_be_bytes());
    out.extend_from_slice(&node.tree_mask.get().to_be_bytes());
    out.extend_from_slice(&node.hash_mask.get().to_be_bytes());
    for h in node.hashes.iter() {
        out.extend_from_slice(h.as_slice());
    }
    out
}

/// Decodes a stored branch node, checking the invariants alloy-trie asserts (so a corrupt row
/// is an error, never a panic): tree and hash masks within the state mask, one hash per hash
/// bit, and at least two children.
pub(crate) fn decode_node(bytes: &[u8]) -> Result<BranchNodeCompact, String> {
    if bytes.len() < 6 {
        return Err(format!("node of {} bytes", bytes.len()));
    }
    let mask = |i: usize| TrieMask::new(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
    let (state_mask, tree_mask, hash_mask) = (mask(0), mask(2), mask(4));
    if !tree_mask.is_subset_of(state_mask) || !hash_mask.is_subset_of(state_mask) {
        return Err("tree or hash mask outside the state mask".into());
    }
    if state_mask.count_bits() < 2 {
        return Err("branch node with fewer than two children".into());
    }
    let want = 6 + 32 * hash_mask.count_bits() as usize;
    if bytes.len() != want {
        return Err(format!("node of {} bytes, want {want} for its hash mask", bytes.len()));
    }
    let hashes = bytes[6..].chunks_exact(32).map(B256::from_slice).collect::<Vec<_>>();
    Ok(BranchNodeCompact {
        state_mask,
        tree_mask,
        hash_mask,
        hashes: hashes.into(),
        root_hash: None,
    })
}

/// The smallest 32-byte key under `prefix` (the prefix padded with zero nibbles).
pub(crate) fn lower_key(prefix: &Nibbles) -> B256 {
    let mut out = B256::ZERO;
    prefix.pack_to(&mut out.0);
    out
}

/// The smallest 32-byte key after every key under `prefix`; `None` when nothing comes after.
pub(crate) fn upper_key(prefix: &Nibbles) -> Option<B256> {
    prefix.increment().map(|p| lower_key(&p))
}

/// Keys of a sub-trie as they sort in a table keyed `owner ++ rest`.
pub(crate) fn concat<const N: usize>(owner: &B256, rest: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out[..32].copy_from_slice(owner.as_slice());
    out[32..32 + rest.len()].copy_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_paths_sort_in_nibble_order() {
        let paths = [
            vec![],
            vec![0x0],
            vec![0x0, 0xf],
            vec![0x1],
            vec![0x1, 0x0],
            vec![0x1, 0x0, 0x0],
            vec![0x1, 0x1],
            vec![0xf; 64],
        ];
        let nibbles: Vec<_> = paths.iter().map(Nibbles::from_nibbles).collect();
        for w in nibbles.windows(2) {
            assert!(w[0] < w[1]);
            assert!(pack_path(&w[0]) < pack_path(&w[1]), "{:?} {:?}", w[0], w[1]);
        }
        for n in &nibbles {
            assert_eq!(unpack_path(&pack_path(n)).unwrap(), *n);
        }
        let mut bad = pack_path(&Nibbles::from_nibbles([0x1]));
        bad[0] = 0x11;
        assert!(unpack_path(&bad).is_err());
        bad[32] = 65;
        assert!(unpack_path(&bad).is_err());
    }

    #[test]
    fn node_round_trip_and_rejects() {
        let node = BranchNodeCompact::new(
            TrieMask::new(0b1011),
            TrieMask::new(0b0010),
            TrieMask::new(0b1010),
            vec![B256::repeat_byte(1), B256::repeat_byte(2)],
            None,
        );
        let bytes = encode_node(&node);
        assert_eq!(decode_node(&bytes).unwrap(), node);
        assert!(decode_node(&bytes[..bytes.len() - 1]).is_err());
        let mut bad = bytes;
        bad[3] = 0b0100; // tree bit outside the state mask
        assert!(decode_node(&bad).is_err());
    }

    #[test]
    fn key_bounds() {
        let p = Nibbles::from_nibbles([0x1, 0xf]);
        assert_eq!(lower_key(&p).0[0], 0x1f);
        assert_eq!(upper_key(&p).unwrap().0[0], 0x20);
        assert_eq!(upper_key(&Nibbles::from_nibbles([0xf, 0xf])), None);
        assert_eq!(upper_key(&Nibbles::default()), None);
    }
}
