//! The per-block change index ([`tables::BLOCK_CHANGES`]): what each block changed, which
//! [`crate::storage::Writer::unwind_head`] (`storage::write::unwind`) walks to take the head
//! block back out of every table.
//!
//! History tables are keyed by epoch, then entity (`epoch ++ key ++ block`), which serves "as of
//! block N" reads with a few seeks but cannot list what one block changed without a scan of its
//! epoch. So every history row a block writes is also named in the change index, under the
//! block, and unwinding the block walks that list: each history row puts its value back into
//! the current table and is removed, which leaves every table exactly as it was before the
//! block.
//!
//! Unwinding serves reorgs, which end at finality, so only the newest blocks keep their lists
//! ([`DEFAULT_UNWIND_DEPTH`], or [`crate::storage::Writer::set_unwind_depth`]): as the head moves on, the lists
//! of the block that falls out of that window are removed ([`prune_changes`]). On a long chain
//! they were the fifth largest table, and nothing but an unwind reads them.

use redb::{ReadableTable, Table, WriteTransaction};

use crate::storage::codec::u64_value;
use crate::storage::tables::{self, meta};
use crate::storage::{StorageError, StorageResult};

/// Which history table a list of changed keys belongs to; the discriminant is the last byte of
/// the [`tables::BLOCK_CHANGES`] key (plus `0x10` for a packed list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ChangeKind {
    // 0 and 1 named the plain-state history tables of schema 3.
    /// Hashed addresses (32 bytes) with a row in [`tables::HASHED_ACCOUNT_HISTORY`].
    HashedAccounts = 2,
    /// Hashed `address ++ slot` (64 bytes) with a row in [`tables::HASHED_STORAGE_HISTORY`].
    HashedStorage = 3,
    /// Packed account-trie paths (33 bytes) with a row in [`tables::ACCOUNT_TRIE_HISTORY`].
    AccountTrie = 4,
    /// Storage-trie keys (65 bytes) with a row in [`tables::STORAGE_TRIE_HISTORY`].
    StorageTrie = 5,
    /// Addresses (20 bytes) with a row in [`tables::TRACE_ADDRESSES`] (an index, not history:
    /// unwinding removes the rows).
    TraceAddresses = 6,
}

impl ChangeKind {
    pub(in crate::storage) const ALL: [Self; 5] = [
        Self::HashedAccounts,
        Self::HashedStorage,
        Self::AccountTrie,
        Self::StorageTrie,
        Self::TraceAddresses,
    ];

    /// Width of one key of this kind.
    pub fn key_len(self) -> usize {
        match self {
            Self::HashedAccounts => 32,
            Self::HashedStorage => 64,
            Self::AccountTrie => 33,
            Self::StorageTrie => 65,
            Self::TraceAddresses => 20,
        }
    }
}

/// Added to a kind's discriminant in a [`tables::BLOCK_CHANGES`] key whose row is packed
/// ([`pack_keys`]). Rows under the bare discriminant (written by format 4) hold the keys
/// concatenated; both are read.
const PACKED: u8 = 0x10;

fn change_key(block: u64, kind: ChangeKind, packed: bool) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..8].copy_from_slice(&block.to_be_bytes());
    k[8] = kind as u8 + if packed { PACKED } else { 0 };
    k
}

/// A key in the short form it is packed in: a trie path key (`packed nibbles 32 ++ length`,
/// after the owner for storage tries) becomes `length ++ the bytes its nibbles use`.
fn compact(kind: ChangeKind, key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let path_at = match kind {
        ChangeKind::AccountTrie => 0,
        ChangeKind::StorageTrie => 32,
        _ => {
            out.extend_from_slice(key);
            return;
        }
    };
    // Paths are at most 64 nibbles (`trie::codec::pack_path`).
    let len = key[path_at + 32].min(64);
    out.extend_from_slice(&key[..path_at]);
    out.push(len);
    out.extend_from_slice(&key[path_at..path_at + usize::from(len).div_ceil(2)]);
}

/// Inverse of [`compact`]; `None` if the bytes cannot be a key of `kind`.
fn expand(kind: ChangeKind, short: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    let path_at = match kind {
        ChangeKind::AccountTrie => 0,
        ChangeKind::StorageTrie => 32,
        _ => {
            (short.len() == kind.key_len()).then(|| out.extend_from_slice(short))?;
            return Some(());
        }
    };
    let len = *short.get(path_at)?;
    let used = usize::from(len).div_ceil(2);
    if len > 64 || short.len() != path_at + 1 + used {
        return None;
    }
    out.extend_from_slice(&short[..path_at]);
    out.extend_from_slice(&short[path_at + 1..]);
    out.resize(path_at + 32, 0);
    out.push(len);
    Some(())
}

/// Packs sorted, distinct keys of `kind`: each key's short form ([`compact`]) as `shared u8`
/// (bytes in common with the previous short form) `++ rest length u8 ++ rest`. Keys of one
/// block sort together by owner and path, so a storage-trie key costs a few bytes instead of
/// 65, an account-trie path 3–5 instead of 33. Written by hand: the change index needs only
/// this front coding, and its rows must stay readable byte for byte across versions.
fn pack_keys(kind: ChangeKind, keys: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(keys.len() * 8);
    let (mut prev, mut short) = (Vec::new(), Vec::new());
    for key in keys {
        compact(kind, key, &mut short);
        let shared = prev.iter().zip(&short).take_while(|(a, b)| a == b).count().min(255);
        out.push(shared as u8);
        out.push((short.len() - shared) as u8);
        out.extend_from_slice(&short[shared..]);
        std::mem::swap(&mut prev, &mut short);
    }
    out
}

/// Inverse of [`pack_keys`]: the keys concatenated.
fn unpack_keys(kind: ChangeKind, packed: &[u8]) -> StorageResult<Vec<u8>> {
    let bad = || StorageError::Corrupt {
        table: "block_changes",
        detail: format!("a packed list of {kind:?} keys does not decode"),
    };
    let mut out = Vec::with_capacity(packed.len() * 4);
    let (mut short, mut key) = (Vec::new(), Vec::new());
    let mut rest = packed;
    while let [shared, len, tail @ ..] = rest {
        let (shared, len) = (usize::from(*shared), usize::from(*len));
        if shared > short.len() || len > tail.len() {
            return Err(bad());
        }
        short.truncate(shared);
        short.extend_from_slice(&tail[..len]);
        expand(kind, &short, &mut key).ok_or_else(bad)?;
        out.extend_from_slice(&key);
        rest = &tail[len..];
    }
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// How many of the newest blocks keep their change lists, so that they can be unwound, in a
/// datadir that never set another depth: 16 times `--follow.max-reorg`'s default, far past
/// finality on any proof-of-stake chain.
pub const DEFAULT_UNWIND_DEPTH: u64 = 1024;

pub(in crate::storage) fn meta_u64(
    m: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> StorageResult<Option<u64>> {
    m.get(key)?.map(|v| u64_value("meta", v.value())).transpose()
}

/// Set when a datadir is created, its unwind depth in blocks instead of
/// [`DEFAULT_UNWIND_DEPTH`] (for tests: a small window freezes history early).
pub const UNWIND_DEPTH_ENV: &str = "LOUPE_UNWIND_DEPTH";

/// [`UNWIND_DEPTH_ENV`] for a new datadir, if set.
pub(in crate::storage) fn unwind_depth_for_new_datadir() -> StorageResult<Option<u64>> {
    match std::env::var(UNWIND_DEPTH_ENV) {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(depth) if depth > 0 => Ok(Some(depth)),
            _ => Err(StorageError::Config(format!(
                "{UNWIND_DEPTH_ENV}={v:?} is not a positive number of blocks"
            ))),
        },
        Err(_) => Ok(None),
    }
}

/// The datadir's unwind depth ([`tables::meta::UNWIND_DEPTH`]).
pub(in crate::storage) fn unwind_depth(
    m: &impl ReadableTable<&'static str, &'static [u8]>,
) -> StorageResult<u64> {
    Ok(meta_u64(m, meta::UNWIND_DEPTH)?.unwrap_or(DEFAULT_UNWIND_DEPTH))
}

/// Removes the change lists of every block that has fallen out of the unwind window of a head
/// at `head` (blocks `head - depth` and below), or that a bulk import checked only with its
/// group's state root (up to [`meta::GROUP_ROOT_AT`], where unwinding stops: their lists serve
/// nothing), and records the oldest block still kept, below which the epochs are frozen
/// (`storage::segments::freeze`). Costs one seek when nothing is due; a datadir written
/// before lists were pruned loses all its old ones at its first head move.
pub(in crate::storage) fn prune_changes(txn: &WriteTransaction, head: u64) -> StorageResult<()> {
    let mut m = txn.open_table(tables::META)?;
    let depth = unwind_depth(&m)?;
    let window = head.checked_sub(depth).map(|b| b + 1);
    let grouped = meta_u64(&m, meta::GROUP_ROOT_AT)?.map(|at| at.saturating_add(1));
    let Some(floor) = window.max(grouped) else { return Ok(()) };
    if meta_u64(&m, meta::CHANGES_FROM)?.is_some_and(|kept| kept >= floor) {
        return Ok(());
    }
    m.insert(meta::CHANGES_FROM, floor.to_be_bytes().as_slice())?;
    let end = change_key(floor, ChangeKind::HashedAccounts, false);
    let mut changes = txn.open_table(tables::BLOCK_CHANGES)?;
    changes.retain_in::<&[u8; 9], _>(..&end, |_, _| false)?;
    Ok(())
}

/// Appends `keys` (concatenated, each [`ChangeKind::key_len`] bytes) to what `block` changed.
/// Layers that write history rows of their own in a block's transaction (the trie) call this
/// for every row they add.
pub fn record_changes(
    txn: &WriteTransaction,
    block: u64,
    kind: ChangeKind,
    keys: &[u8],
) -> StorageResult<()> {
    if keys.is_empty() {
        return Ok(());
    }
    merge_changes(&mut txn.open_table(tables::BLOCK_CHANGES)?, block, kind, keys)
}

/// Adds `keys` to the list of `block` and `kind` in `t`.
fn merge_changes(
    t: &mut Table<'_, &'static [u8; 9], &'static [u8]>,
    block: u64,
    kind: ChangeKind,
    keys: &[u8],
) -> StorageResult<()> {
    let key = change_key(block, kind, true);
    let mut all = match t.get(&key)? {
        Some(v) => unpack_keys(kind, v.value())?,
        None => Vec::new(),
    };
    all.extend_from_slice(keys);
    // Sorted, so the same block gives the same row whatever order the changes came in.
    let mut sorted: Vec<&[u8]> = all.chunks_exact(kind.key_len()).collect();
    sorted.sort_unstable();
    sorted.dedup();
    t.insert(&key, pack_keys(kind, &sorted).as_slice())?;
    Ok(())
}

/// Change lists a write transaction holds until it writes them all at once (the writer's
/// deferred rows, `storage::write`): one open of the table for many blocks, where each block
/// opened it for each kind it changed. Only an unwind and the pruning read the lists, and
/// both write the held ones first.
#[derive(Debug, Default)]
pub(in crate::storage) struct HeldChanges {
    lists: std::collections::BTreeMap<(u64, u8), (ChangeKind, Vec<u8>)>,
    keys: usize,
}

impl HeldChanges {
    /// Adds `keys` (as [`record_changes`] takes them) to `block`'s list of `kind`.
    pub(in crate::storage) fn add(&mut self, block: u64, kind: ChangeKind, keys: &[u8]) {
        if keys.is_empty() {
            return;
        }
        let list = self.lists.entry((block, kind as u8)).or_insert_with(|| (kind, Vec::new()));
        list.1.extend_from_slice(keys);
        self.keys += keys.len() / kind.key_len();
    }

    /// Keys held.
    pub(in crate::storage) fn len(&self) -> usize {
        self.keys
    }

    /// Writes the held lists, each merged with the row the table has, and forgets them. The
    /// lists of blocks at or below [`meta::GROUP_ROOT_AT`] are dropped: an unwind stops there,
    /// and [`prune_changes`] would remove them (a bulk import's group, whose root is checked
    /// before its commit, writes none of its lists unless the deferred rows pass their cap
    /// before that check; on the 10,000-block chain the lists were 379 MiB of rows).
    pub(in crate::storage) fn write(&mut self, txn: &WriteTransaction) -> StorageResult<()> {
        let lists = std::mem::take(&mut self.lists);
        self.keys = 0;
        if lists.is_empty() {
            return Ok(());
        }
        let grouped = meta_u64(&txn.open_table(tables::META)?, meta::GROUP_ROOT_AT)?;
        let mut t = txn.open_table(tables::BLOCK_CHANGES)?;
        for ((block, _), (kind, keys)) in lists {
            if grouped.is_none_or(|at| block > at) {
                merge_changes(&mut t, block, kind, &keys)?;
            }
        }
        Ok(())
    }
}

/// Takes out and returns the keys `block` changed in `kind`'s table (both encodings).
pub(in crate::storage) fn take_changes(
    changes: &mut Table<'_, &'static [u8; 9], &'static [u8]>,
    block: u64,
    kind: ChangeKind,
) -> StorageResult<Vec<u8>> {
    let mut keys = changes
        .remove(&change_key(block, kind, false))?
        .map(|v| v.value().to_vec())
        .unwrap_or_default();
    if let Some(v) = changes.remove(&change_key(block, kind, true))? {
        keys.extend(unpack_keys(kind, v.value())?);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trie path key as the trie packs it: nibbles two to a byte, zero-padded, then the length.
    fn path_key(owner: Option<u8>, nibbles: &[u8]) -> Vec<u8> {
        let mut out = owner.map(|o| vec![o; 32]).unwrap_or_default();
        let mut packed = [0u8; 32];
        for (i, n) in nibbles.iter().enumerate() {
            packed[i / 2] |= if i % 2 == 0 { n << 4 } else { *n };
        }
        out.extend_from_slice(&packed);
        out.push(nibbles.len() as u8);
        out
    }

    #[test]
    fn packed_key_lists_round_trip_and_are_small() {
        let mut seed = 7u64;
        let mut rand = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u8
        };
        for kind in ChangeKind::ALL {
            let mut keys: Vec<Vec<u8>> = (0..300)
                .map(|i| match kind {
                    ChangeKind::AccountTrie => {
                        let len = i % 9;
                        path_key(None, &(0..len).map(|_| rand() & 0xf).collect::<Vec<_>>())
                    }
                    ChangeKind::StorageTrie => {
                        let len = i % 9;
                        let nibbles: Vec<u8> = (0..len).map(|_| rand() & 0xf).collect();
                        path_key(Some((i % 3) as u8), &nibbles)
                    }
                    _ => (0..kind.key_len()).map(|_| rand()).collect(),
                })
                .collect();
            keys.push(vec![0; kind.key_len()]);
            if !matches!(kind, ChangeKind::AccountTrie | ChangeKind::StorageTrie) {
                keys.push(vec![0xff; kind.key_len()]);
            }
            if kind == ChangeKind::AccountTrie {
                keys.push(path_key(None, &[0xf; 64]));
            }
            keys.sort();
            keys.dedup();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let packed = pack_keys(kind, &refs);
            assert_eq!(unpack_keys(kind, &packed).unwrap(), keys.concat(), "{kind:?}");
            if matches!(kind, ChangeKind::AccountTrie | ChangeKind::StorageTrie) {
                assert!(packed.len() * 3 < keys.concat().len(), "{kind:?}: {}", packed.len());
            }
            // A truncated list is an error, not a wrong key.
            assert!(unpack_keys(kind, &packed[..packed.len() - 1]).is_err(), "{kind:?}");
        }
    }
}
