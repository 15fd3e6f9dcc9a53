//! Trie-node history rows: the whole node, or only the child hashes that differ from the node's
//! next version, with a whole node at least every [`FULL_ROW_EVERY`] rows so a read stays bounded.
//!
//! A row of `account_trie_history` / `storage_trie_history` at `epoch ++ path ++ block` holds the node
//! *before* `block`. Most changes to a branch node replace one or two of its up to 16 child
//! hashes, so storing the whole node (6 + 32 × 16 bytes) for each version repeats what the next
//! version holds. A delta row stores the old node's masks and only the hashes that differ from
//! the node *after* the block, which is the next row's node (or the current one). Reading a node
//! at an old block walks forward from the first row after it to the next whole row or to the
//! current table, then applies the deltas back in order.
//!
//! Encodings, told apart by length (a branch node is 6 + 32n bytes, a delta 9 + 32m):
//! - empty: the node did not exist before the block;
//! - whole: the stored node bytes (`state`, `tree`, `hash` masks as u16 BE, then one 32-byte
//!   hash per bit of the hash mask), as every row of storage format 4 was;
//! - delta: `run` (u8: deltas in a row ending with this one, 1..[`FULL_ROW_EVERY`]) ++ the old
//!   node's three masks ++ `differs` (u16 BE, a subset of its hash mask) ++ one hash per bit of
//!   `differs`. A hash-mask bit not in `differs` takes the next version's hash at that nibble.

use redb::{ReadableTable, Table};

use crate::storage::{StorageError, StorageResult};

/// At most this many rows in a row of one node's history are deltas; then a whole node is
/// stored. A read at an old block applies at most `FULL_ROW_EVERY - 1` deltas.
pub const FULL_ROW_EVERY: u8 = 32;

const MASKS: usize = 6;
const HASH: usize = 32;
const DELTA_HEAD: usize = 1 + MASKS + 2;

/// What a history row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRow<'a> {
    /// The node did not exist before the block.
    Absent,
    /// The whole node.
    Whole(&'a [u8]),
    /// A delta against the next version; `run` counts the deltas in a row ending here.
    Delta {
        /// Deltas in a row ending with this one.
        run: u8,
        /// The row bytes.
        bytes: &'a [u8],
    },
}

/// Classifies a stored history row by its length.
pub fn node_row(row: &[u8]) -> Result<NodeRow<'_>, String> {
    if row.is_empty() {
        Ok(NodeRow::Absent)
    } else if row.len() >= MASKS && (row.len() - MASKS).is_multiple_of(HASH) {
        Ok(NodeRow::Whole(row))
    } else if row.len() >= DELTA_HEAD && (row.len() - DELTA_HEAD).is_multiple_of(HASH) {
        Ok(NodeRow::Delta { run: row[0], bytes: row })
    } else {
        Err(format!("trie history row of {} bytes is neither a node nor a delta", row.len()))
    }
}

fn mask(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// The hash of each nibble of a whole node (`None` where its hash mask has no bit).
fn child_hashes(node: &[u8]) -> Result<[Option<&[u8]>; 16], String> {
    if node.len() < MASKS {
        return Err(format!("node of {} bytes", node.len()));
    }
    let hash_mask = mask(node, 4);
    let want = MASKS + HASH * hash_mask.count_ones() as usize;
    if node.len() != want {
        return Err(format!("node of {} bytes, want {want} for its hash mask", node.len()));
    }
    let mut out = [None; 16];
    let mut hashes = node[MASKS..].chunks_exact(HASH);
    for (nibble, slot) in out.iter_mut().enumerate() {
        if hash_mask & (1 << nibble) != 0 {
            *slot = hashes.next();
        }
    }
    Ok(out)
}

/// The history row for a node that was `old` (empty: absent) before a block and is `new` after
/// it (`None`: removed), where `prev_run` is the run of the node's newest earlier row in the
/// epoch (0 if that row is whole or absent; `FULL_ROW_EVERY - 1` if there is none, which makes
/// the row whole). Whole when the node is removed or the run is full; otherwise a delta against
/// `new`.
pub(crate) fn encode_node_row(
    old: &[u8],
    new: Option<&[u8]>,
    prev_run: u8,
) -> Result<Vec<u8>, String> {
    let run = prev_run.saturating_add(1);
    let Some(new) = new else { return Ok(old.to_vec()) };
    if old.is_empty() || run >= FULL_ROW_EVERY {
        return Ok(old.to_vec());
    }
    let old_hashes = child_hashes(old)?;
    let new_hashes = child_hashes(new)?;
    let mut differs = 0u16;
    for nibble in 0..16 {
        if let Some(h) = old_hashes[nibble]
            && new_hashes[nibble] != Some(h)
        {
            differs |= 1 << nibble;
        }
    }
    let mut out = Vec::with_capacity(DELTA_HEAD + HASH * differs.count_ones() as usize);
    out.push(run);
    out.extend_from_slice(&old[..MASKS]);
    out.extend_from_slice(&differs.to_be_bytes());
    for (nibble, h) in old_hashes.iter().enumerate() {
        if let Some(h) = h
            && differs & (1 << nibble) != 0
        {
            out.extend_from_slice(h);
        }
    }
    Ok(out)
}

/// The node a history row stands for (empty: absent), given the node's next version `next`
/// (the next row's node, or the current one; empty: absent).
pub fn resolve_node_row(row: &[u8], next: &[u8]) -> Result<Vec<u8>, String> {
    let bytes = match node_row(row)? {
        NodeRow::Absent => return Ok(Vec::new()),
        NodeRow::Whole(node) => return Ok(node.to_vec()),
        NodeRow::Delta { bytes, .. } => bytes,
    };
    if next.is_empty() {
        return Err("delta row with no next version of the node".into());
    }
    let next_hashes = child_hashes(next)?;
    let masks = &bytes[1..1 + MASKS];
    let hash_mask = mask(masks, 4);
    let differs = mask(bytes, 1 + MASKS);
    if differs & !hash_mask != 0 {
        return Err("delta names a hash outside the node's hash mask".into());
    }
    if bytes.len() != DELTA_HEAD + HASH * differs.count_ones() as usize {
        return Err(format!("delta of {} bytes for {} hashes", bytes.len(), differs.count_ones()));
    }
    let mut own = bytes[DELTA_HEAD..].chunks_exact(HASH);
    let mut out = Vec::with_capacity(MASKS + HASH * hash_mask.count_ones() as usize);
    out.extend_from_slice(masks);
    for (nibble, next_hash) in next_hashes.iter().enumerate() {
        if hash_mask & (1 << nibble) == 0 {
            continue;
        }
        let hash = if differs & (1 << nibble) != 0 { own.next() } else { *next_hash };
        let hash = hash.ok_or_else(|| {
            format!("delta takes nibble {nibble:x}'s hash from a next version without one")
        })?;
        out.extend_from_slice(hash);
    }
    Ok(out)
}

/// Re-encodes one node's history rows for a merged segment file (`storage::segments::freeze`):
/// `rows` are the node's rows across the merged parts in block order, and `tail` is where its
/// last part's rows begin. Each part starts the node with a whole row (or an absent one), so
/// every row before `tail` resolves from that row back; those rows are encoded again, each
/// against the node after it, in one run from the first: a whole row is then due only where a
/// run fills, not at every part's start. The rows from `tail` on stay as they are: the last
/// ones are deltas against the node's next version after the file.
pub(crate) fn rechain(rows: &mut [Vec<u8>], tail: usize) -> Result<(), String> {
    let Some(first_of_tail) = rows.get(tail) else { return Ok(()) };
    if matches!(node_row(first_of_tail)?, NodeRow::Delta { .. }) {
        return Err("a node's first row in a segment file is a delta".into());
    }
    // The node before each row's block, from the tail's first row back.
    let mut nodes: Vec<Vec<u8>> = vec![Vec::new(); tail + 1];
    nodes[tail] = first_of_tail.clone();
    for i in (0..tail).rev() {
        nodes[i] = resolve_node_row(&rows[i], &nodes[i + 1])?;
    }
    let mut prev_run = FULL_ROW_EVERY - 1;
    for i in 0..tail {
        let next = nodes[i + 1].as_slice();
        let row = encode_node_row(&nodes[i], (!next.is_empty()).then_some(next), prev_run)?;
        prev_run = match node_row(&row)? {
            NodeRow::Delta { run, .. } => run,
            NodeRow::Whole(_) | NodeRow::Absent => 0,
        };
        rows[i] = row;
    }
    Ok(())
}

fn corrupt(table: &'static str, detail: String) -> StorageError {
    StorageError::Corrupt { table, detail }
}

/// Encodes the history row at `key` (`epoch ++ path ++ block BE`) of a node that was `old`
/// (empty: absent) before the block and is `new` after it (`None`: removed), and returns it with
/// the run to pass as `prev_run` for the node's next row in the epoch. `prev_run` is the run
/// this returned for the node's newest earlier row in the epoch, when the caller has just
/// encoded it (or `FULL_ROW_EVERY - 1` when the epoch holds no row of the node: a whole row);
/// otherwise (`None`) that row is sought in the table. The node's first row in an epoch is
/// whole, so that a read never follows deltas out of an epoch (`storage::history::lookup`). If the table
/// already holds a row at `key` (the block changed the node before, and that change was
/// written), the row returned replaces it: it is re-encoded against `new` so that it still
/// stands for the node before the block, `old` being the node in between.
pub(in crate::storage) fn encode_history_row<const N: usize>(
    history: &Table<'_, &'static [u8; N], &'static [u8]>,
    table: &'static str,
    key: &[u8; N],
    old: &[u8],
    new: Option<&[u8]>,
    prev_run: Option<u8>,
) -> StorageResult<(Vec<u8>, u8)> {
    let (before, prev_run) = match prev_run {
        Some(run) => (old.to_vec(), run),
        None => newest_before(history, table, key, old)?,
    };
    let row = encode_node_row(&before, new, prev_run).map_err(|d| corrupt(table, d))?;
    let run = match node_row(&row).map_err(|d| corrupt(table, d))? {
        NodeRow::Delta { run, .. } => run,
        NodeRow::Whole(_) | NodeRow::Absent => 0,
    };
    Ok((row, run))
}

/// The node before the block of history row `key` and the run of the node's newest earlier
/// row in the epoch (see [`encode_node_row`]), sought in the table.
fn newest_before<const N: usize>(
    history: &Table<'_, &'static [u8; N], &'static [u8]>,
    table: &'static str,
    key: &[u8; N],
    old: &[u8],
) -> StorageResult<(Vec<u8>, u8)> {
    let mut first = *key;
    first[N - 8..].fill(0);
    let newest = match history.range::<&[u8; N]>(&first..=key)?.next_back() {
        Some(item) => {
            let (k, v) = item?;
            Some((*k.value() == *key, v.value().to_vec()))
        }
        None => None,
    };
    Ok(match newest {
        Some((true, row)) => {
            // Written earlier in this block against `old`, the node in between.
            let before = resolve_node_row(&row, old).map_err(|d| corrupt(table, d))?;
            let prev_run = match node_row(&row).map_err(|d| corrupt(table, d))? {
                NodeRow::Delta { run, .. } => run.saturating_sub(1),
                NodeRow::Whole(_) | NodeRow::Absent => FULL_ROW_EVERY,
            };
            (before, prev_run)
        }
        Some((false, row)) => {
            let prev_run = match node_row(&row).map_err(|d| corrupt(table, d))? {
                NodeRow::Delta { run, .. } => run,
                NodeRow::Whole(_) | NodeRow::Absent => 0,
            };
            (old.to_vec(), prev_run)
        }
        // The first row of the node in this epoch: whole.
        None => (old.to_vec(), FULL_ROW_EVERY - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(state: u16, hashes: &[(u8, u8)]) -> Vec<u8> {
        let hash_mask = hashes.iter().fold(0u16, |m, (n, _)| m | 1 << n);
        let mut out = Vec::new();
        out.extend_from_slice(&state.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&hash_mask.to_be_bytes());
        let mut sorted = hashes.to_vec();
        sorted.sort();
        for (_, byte) in sorted {
            out.extend_from_slice(&[byte; 32]);
        }
        out
    }

    #[test]
    fn a_delta_holds_only_the_changed_hashes_and_resolves_to_the_old_node() {
        let old = node(0xffff, &[(0, 1), (3, 2), (9, 3), (15, 4)]);
        let new = node(0xffff, &[(0, 1), (3, 7), (9, 3), (12, 8), (15, 4)]);
        let row = encode_node_row(&old, Some(&new), 0).unwrap();
        assert_eq!(row.len(), DELTA_HEAD + HASH);
        assert!(matches!(node_row(&row).unwrap(), NodeRow::Delta { run: 1, .. }));
        assert_eq!(resolve_node_row(&row, &new).unwrap(), old);
        // Against a next version missing a hash the delta needs: an error, not a wrong node.
        let other = node(0xffff, &[(0, 1), (3, 7), (15, 4)]);
        assert!(resolve_node_row(&row, &other).is_err());
        assert!(resolve_node_row(&row, &[]).is_err());
    }

    #[test]
    fn whole_rows_when_absent_removed_or_the_run_is_full() {
        let old = node(0b11, &[(0, 1), (1, 2)]);
        let new = node(0b11, &[(0, 1), (1, 3)]);
        assert!(encode_node_row(&[], Some(&new), 0).unwrap().is_empty());
        assert_eq!(encode_node_row(&old, None, 0).unwrap(), old);
        assert_eq!(encode_node_row(&old, Some(&new), FULL_ROW_EVERY - 1).unwrap(), old);
        let row = encode_node_row(&old, Some(&new), FULL_ROW_EVERY - 2).unwrap();
        assert!(
            matches!(node_row(&row).unwrap(), NodeRow::Delta { run, .. } if run == FULL_ROW_EVERY - 1)
        );
        // A format-4 row (a whole node) reads as itself.
        assert_eq!(resolve_node_row(&old, &[]).unwrap(), old);
        assert!(node_row(&[0u8; 7]).is_err());
    }

    #[test]
    fn rechained_rows_resolve_to_the_same_nodes_with_whole_rows_only_where_a_run_fills() {
        // Three parts of a node's history, each starting whole (as freezes write them), the
        // node changing one child hash per block; then the node's current version.
        let version = |v: u8| node(0b111, &[(0, 1), (1, v), (2, 200)]);
        let versions: Vec<Vec<u8>> = (0..80u8).map(version).collect();
        let current = version(80);
        let next_of = |i: usize| versions.get(i + 1).cloned().unwrap_or_else(|| current.clone());
        let part_starts = [0usize, 30, 50];
        let mut rows = Vec::new();
        let mut prev_run = FULL_ROW_EVERY - 1;
        for (i, version) in versions.iter().enumerate() {
            if part_starts.contains(&i) {
                prev_run = FULL_ROW_EVERY - 1;
            }
            let row = encode_node_row(version, Some(&next_of(i)), prev_run).unwrap();
            prev_run = match node_row(&row).unwrap() {
                NodeRow::Delta { run, .. } => run,
                _ => 0,
            };
            rows.push(row);
        }
        let whole = |rows: &[Vec<u8>]| {
            rows.iter().filter(|r| matches!(node_row(r).unwrap(), NodeRow::Whole(_))).count()
        };
        assert_eq!(whole(&rows), 3, "one whole row per part");
        let mut merged = rows.clone();
        rechain(&mut merged, 50).unwrap();
        // Rows 0..50 now one run: whole at 0 and 32; the last part keeps its own whole row.
        assert_eq!(whole(&merged), 3);
        assert!(matches!(node_row(&merged[30]).unwrap(), NodeRow::Delta { .. }));
        assert!(matches!(node_row(&merged[32]).unwrap(), NodeRow::Whole(_)));
        assert_eq!(merged[50..], rows[50..]);
        // Every row, walked forward to a whole row and resolved back, is its version.
        for (i, version) in versions.iter().enumerate() {
            let mut j = i;
            while j < merged.len() && matches!(node_row(&merged[j]).unwrap(), NodeRow::Delta { .. })
            {
                j += 1;
            }
            assert!(j - i < usize::from(FULL_ROW_EVERY), "row {i}: a walk of {}", j - i);
            let mut next = if j < merged.len() { merged[j].clone() } else { current.clone() };
            for k in (i..j).rev() {
                next = resolve_node_row(&merged[k], &next).unwrap();
            }
            assert_eq!(&next, version, "row {i}");
        }
        // A tail that starts with a delta is refused, not chained on a guess.
        let mut bad = rows.clone();
        assert!(rechain(&mut bad, 51).is_err());
    }
}
