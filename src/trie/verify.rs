//! [`verify`]: rebuild every trie from the state tables and check each stored node, cached
//! storage root and the head's state root against it (`loupe verify`).
//!
//! Memory stays bounded whatever the state size: the rebuild streams the leaves in key order
//! and checks emitted nodes as they complete, never holding the trie.

use alloy_primitives::{B256, keccak256};
use alloy_trie::{BranchNodeCompact, EMPTY_ROOT_HASH, Nibbles};
use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata};

use super::TrieError;
use super::codec::{concat, decode_node, encode_node, pack_path, unpack_path};
use super::db::{AccountLeaves, StorageLeaves, decode_row};
use super::walk::{LeafSource, NoNodes, PrefixSet, walk};
use crate::storage::history::index::check_index;
use crate::storage::history::keys::{row_block, row_entity, row_epoch};
use crate::storage::history::lookup::SnapshotHistory;
use crate::storage::history::nodes::{FULL_ROW_EVERY, NodeRow, node_row, resolve_node_row};
use crate::storage::segments::Kind;
use crate::storage::{Reader, TrieTables};

/// What [`verify`] checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The head block whose state was checked.
    pub head: u64,
    /// Its state root (equal to the header's).
    pub root: B256,
    /// Accounts in the state.
    pub accounts: u64,
    /// Non-zero storage slots in the state.
    pub slots: u64,
    /// Stored account-trie nodes, each checked.
    pub account_nodes: u64,
    /// Stored storage-trie nodes, each checked.
    pub storage_nodes: u64,
}

fn path_hex(path: &Nibbles) -> String {
    let s: String = path.iter().map(|n| char::from_digit(n as u32, 16).unwrap_or('?')).collect();
    if s.is_empty() { "(root)".into() } else { format!("0x{s}") }
}

fn location(owner: Option<&B256>, path: &Nibbles) -> String {
    match owner {
        None => format!("account trie path {}", path_hex(path)),
        Some(a) => format!("storage trie of hashed account {a} path {}", path_hex(path)),
    }
}

/// Compares a rebuilt node with the stored one, naming the first field that differs.
fn compare(
    owner: Option<&B256>,
    path: &Nibbles,
    stored: Option<&BranchNodeCompact>,
    expected: &BranchNodeCompact,
) -> Result<(), TrieError> {
    let digest = |n: &BranchNodeCompact| keccak256(encode_node(n)).to_string();
    let mismatch = |what, stored: String, expected: String| TrieError::Mismatch {
        what,
        location: location(owner, path),
        stored,
        expected,
    };
    let Some(stored) = stored else {
        return Err(mismatch("missing trie node", "none".into(), digest(expected)));
    };
    if stored.state_mask != expected.state_mask
        || stored.tree_mask != expected.tree_mask
        || stored.hash_mask != expected.hash_mask
    {
        return Err(mismatch(
            "trie node masks (state/tree/hash)",
            format!(
                "{:?} (node {})",
                (stored.state_mask, stored.tree_mask, stored.hash_mask),
                digest(stored)
            ),
            format!(
                "{:?} (node {})",
                (expected.state_mask, expected.tree_mask, expected.hash_mask),
                digest(expected)
            ),
        ));
    }
    for nibble in 0..16u8 {
        if expected.hash_mask.is_bit_set(nibble) {
            let (s, e) = (stored.hash_for_nibble(nibble), expected.hash_for_nibble(nibble));
            if s != e {
                let mut child = *path;
                child.push(nibble);
                return Err(TrieError::Mismatch {
                    what: "trie node child hash",
                    location: location(owner, &child),
                    stored: s.to_string(),
                    expected: e.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Names the first stored row a rebuild does not emit. Runs only once the counts disagree (a
/// corrupt database), so holding the rebuilt paths of one trie is acceptable there.
fn extra_row<L: LeafSource>(
    owner: Option<&B256>,
    leaves: &mut L,
    stored: impl Iterator<Item = Result<Nibbles, TrieError>>,
) -> Result<TrieError, TrieError> {
    let mut emitted = std::collections::BTreeSet::new();
    walk(
        &mut NoNodes,
        leaves,
        &PrefixSet::all(),
        Some(&mut |path, _| {
            emitted.insert(path);
            Ok(())
        }),
    )?;
    for path in stored {
        let path = path?;
        if !emitted.contains(&path) {
            return Ok(TrieError::Mismatch {
                what: "stored trie node that the trie does not have",
                location: location(owner, &path),
                stored: "a node".into(),
                expected: "none".into(),
            });
        }
    }
    Ok(TrieError::Mismatch {
        what: "trie node count",
        location: location(owner, &Nibbles::default()),
        stored: "fewer nodes".into(),
        expected: emitted.len().to_string(),
    })
}

/// Checks one account's storage trie; returns (root, slots, nodes).
fn verify_storage(t: &TrieTables, account: &B256) -> Result<(B256, u64, u64), TrieError> {
    let mut emitted = 0u64;
    let mut slots = 0u64;
    let mut leaves = CountingLeaves {
        inner: StorageLeaves { table: &t.hashed_storage, account: *account },
        count: &mut slots,
    };
    let out = walk(
        &mut NoNodes,
        &mut leaves,
        &PrefixSet::all(),
        Some(&mut |path: Nibbles, node: BranchNodeCompact| {
            emitted += 1;
            let key: [u8; 65] = concat(account, &pack_path(&path));
            let stored = match t.storage_trie.get(&key)? {
                Some(v) => Some(decode_row("storage_trie", &key, v.value())?.1),
                None => None,
            };
            compare(Some(account), &path, stored.as_ref(), &node)
        }),
    )?;
    let lo: [u8; 65] = concat(account, &[0u8; 33]);
    let hi: [u8; 65] = concat(account, &[0xff; 33]);
    let mut stored = 0u64;
    for item in t.storage_trie.range::<&[u8; 65]>(&lo..=&hi)? {
        item?;
        stored += 1;
    }
    if stored != emitted {
        let rows = t.storage_trie.range::<&[u8; 65]>(&lo..=&hi)?.map(|item| {
            let (k, v) = item?;
            Ok(decode_row("storage_trie", k.value(), v.value())?.0)
        });
        let mut leaves = StorageLeaves { table: &t.hashed_storage, account: *account };
        return Err(extra_row(Some(account), &mut leaves, rows)?);
    }
    Ok((out.root, slots, emitted))
}

/// Leaf source wrapper counting the leaves it yields.
struct CountingLeaves<'c, L> {
    inner: L,
    count: &'c mut u64,
}

impl<L: LeafSource> LeafSource for CountingLeaves<'_, L> {
    fn leaves(
        &mut self,
        from: &B256,
        to: Option<&B256>,
        f: &mut super::walk::LeafFn<'_>,
    ) -> Result<(), TrieError> {
        let count = &mut *self.count;
        self.inner.leaves(from, to, &mut |k, v| {
            *count += 1;
            f(k, v)
        })
    }
}

/// Rebuilds every trie of the head state from the hashed tables and checks, in order:
/// every hashed key has its preimage; each account's storage trie (stored nodes and the cached
/// storage root); the account trie's stored nodes; the rebuilt root against the head
/// header's `stateRoot`. Trie-node history is checked apart ([`verify_history`]). The first difference is returned as [`TrieError::Mismatch`], naming
/// the trie, the path and both values.
pub fn verify(reader: &Reader) -> Result<VerifyReport, TrieError> {
    if let Some(anchor) = reader.anchor() {
        return Err(TrieError::Anchored { anchor, what: "verification" });
    }
    let head = reader.head()?.ok_or(TrieError::UnknownBlock(0))?;
    let header = reader.header(head)?.ok_or(TrieError::UnknownBlock(head))?;
    let t = reader.trie_tables();

    // Every hashed key has its preimage: the state can be listed by address and slot.
    let mut accounts = 0u64;
    for item in t.hashed_accounts.iter()? {
        let (k, v) = item?;
        accounts += 1;
        let hash = B256::from(*k.value());
        let address = super::db::decode_account(v.value(), &hash)?.address;
        if keccak256(address) != hash {
            return Err(TrieError::Mismatch {
                what: "account address",
                location: format!("hashed account {hash}"),
                stored: address.to_string(),
                expected: format!("an address whose keccak is {hash}"),
            });
        }
    }
    let mut slots = 0u64;
    for item in t.hashed_storage.iter()? {
        let (k, _) = item?;
        slots += 1;
        check_slot_preimage(t, &B256::from_slice(&k.value()[32..]))?;
    }

    // Storage tries, account by account.
    let mut storage_nodes = 0u64;
    for item in t.hashed_accounts.iter()? {
        let (k, v) = item?;
        let account = B256::from(*k.value());
        let cached = super::db::decode_account(v.value(), &account)?.storage_root;
        let (root, _, nodes) = verify_storage(t, &account)?;
        storage_nodes += nodes;
        if root != cached {
            return Err(TrieError::Mismatch {
                what: "cached storage root",
                location: format!("hashed account {account}"),
                stored: cached.to_string(),
                expected: root.to_string(),
            });
        }
    }
    if t.storage_trie.len()? != storage_nodes {
        // Rows of an account that does not exist.
        for item in t.storage_trie.iter()? {
            let (k, _) = item?;
            let account = B256::from_slice(&k.value()[..32]);
            if t.hashed_accounts.get(&account.0)?.is_none() {
                let mut p = [0u8; 33];
                p.copy_from_slice(&k.value()[32..]);
                let path = unpack_path(&p).unwrap_or_default();
                return Err(TrieError::Mismatch {
                    what: "storage trie node of an account that does not exist",
                    location: location(Some(&account), &path),
                    stored: "a node".into(),
                    expected: "none".into(),
                });
            }
        }
    }

    // The account trie.
    let mut account_nodes = 0u64;
    let out = walk(
        &mut NoNodes,
        &mut AccountLeaves(&t.hashed_accounts),
        &PrefixSet::all(),
        Some(&mut |path: Nibbles, node: BranchNodeCompact| {
            account_nodes += 1;
            let key = pack_path(&path);
            let stored = match t.account_trie.get(&key)? {
                Some(v) => Some(decode_row("account_trie", &key, v.value())?.1),
                None => None,
            };
            compare(None, &path, stored.as_ref(), &node)
        }),
    )?;
    if t.account_trie.len()? != account_nodes {
        let rows = t.account_trie.iter()?.map(|item| {
            let (k, v) = item?;
            Ok(decode_row("account_trie", k.value(), v.value())?.0)
        });
        return Err(extra_row(None, &mut AccountLeaves(&t.hashed_accounts), rows)?);
    }
    let root = if accounts == 0 { EMPTY_ROOT_HASH } else { out.root };
    if root != header.state_root {
        return Err(TrieError::Mismatch {
            what: "state root",
            location: format!("head block {head}"),
            stored: header.state_root.to_string(),
            expected: root.to_string(),
        });
    }
    Ok(VerifyReport { head, root, accounts, slots, account_nodes, storage_nodes })
}

/// Checks the four history tables' epoch indexes against their rows (`storage::history::index::check_index`),
/// then resolves every trie-node history row of both tries ([`check_history`]); returns how
/// many rows it resolved.
/// Its cost grows with the history (about 70 s for 16.5M rows), so `loupe verify` runs it only
/// with `--history`.
pub fn verify_history(reader: &Reader) -> Result<u64, TrieError> {
    if let Some(anchor) = reader.anchor() {
        return Err(TrieError::Anchored { anchor, what: "verification" });
    }
    // The segment files whole, against the manifest's checksums.
    reader.check_segments()?;
    let t = reader.trie_tables();
    let accounts =
        t.history(&t.account_trie_history, &t.account_trie_epochs, Kind::AccountTrieHistory);
    let storage =
        t.history(&t.storage_trie_history, &t.storage_trie_epochs, Kind::StorageTrieHistory);
    // The epoch indexes first: a missing index row would make a read skip its epoch.
    type Unstamped<const K: usize> = ReadOnlyTable<&'static [u8; K], &'static [u8]>;
    check_index::<33, 45, 37, _, Unstamped<33>>(&accounts, "account_trie_epochs", None)?;
    check_index::<65, 77, 69, _, Unstamped<65>>(&storage, "storage_trie_epochs", None)?;
    let (hashed_accounts, hashed_storage) = (Some(&t.hashed_accounts), Some(&t.hashed_storage));
    check_index::<32, 44, 36, _, _>(
        &t.account_history(),
        "hashed_account_epochs",
        hashed_accounts,
    )?;
    check_index::<64, 76, 68, _, _>(&t.storage_history(), "hashed_storage_epochs", hashed_storage)?;
    Ok(check_history(&t.account_trie, accounts, "account_trie_history")?
        + check_history(&t.storage_trie, storage, "storage_trie_history")?)
}

/// Resolves every trie-node history row, newest first within each node and place (an epoch in
/// the B-tree, or a segment file, whose rows of a node run on across its epochs:
/// [`SnapshotHistory::place`]), each row against the node after it: the one resolved before,
/// or the node's next version, which is its first row in a later place or the current row.
/// Checks that each gives a well-formed node, that delta runs count up by one from a whole row
/// and stay under [`FULL_ROW_EVERY`], and that each node's first row in a place is whole.
/// Returns the rows checked. Memory stays bounded: one node at a time.
fn check_history<const K: usize, const H: usize, const I: usize>(
    current: &ReadOnlyTable<&'static [u8; K], &'static [u8]>,
    history: SnapshotHistory<'_, H, I, &'static [u8]>,
    table: &'static str,
) -> Result<u64, TrieError> {
    let mut rows = 0u64;
    // The node and place of the rows being walked.
    let mut group: Option<((bool, u32), [u8; K])> = None;
    let mut next = Vec::new();
    // The run the next older row of this node must have (`None`: the last row was whole).
    let mut want_older: Option<u8> = None;
    let unfinished = |key: &[u8], want: Option<u8>| match want {
        Some(run) => Err(TrieError::CorruptNode {
            table,
            key: alloy_primitives::hex::encode(key),
            detail: format!(
                "the node's first row in its epoch or segment file is a delta (a whole row of run {run} is missing)"
            ),
        }),
        None => Ok(()),
    };
    let mut failed: Option<TrieError> = None;
    let mut each = |key: &[u8; H], row: &[u8]| -> Result<(), TrieError> {
        let corrupt = |detail: String| TrieError::CorruptNode {
            table,
            key: alloy_primitives::hex::encode(key),
            detail,
        };
        let this: [u8; K] = row_entity(key);
        let place = history.place(row_epoch(key));
        if group != Some((place, this)) {
            if let Some((_, node)) = group {
                unfinished(&node, want_older)?;
            }
            next = match history.first_after::<K, H, I, &[u8]>(&this, row_block(key), None)? {
                Some((_, row)) => row,
                None => current.get(&this)?.map(|v| v.value().to_vec()).unwrap_or_default(),
            };
            if matches!(node_row(&next).map_err(corrupt)?, NodeRow::Delta { .. }) {
                return Err(corrupt("the node's next version is a delta".into()));
            }
            group = Some((place, this));
            want_older = None;
        }
        let run = match node_row(row).map_err(corrupt)? {
            NodeRow::Delta { run, .. } => run,
            NodeRow::Whole(_) | NodeRow::Absent => 0,
        };
        if run >= FULL_ROW_EVERY || want_older.is_some_and(|w| w != run) {
            let due = want_older.map_or_else(|| "a run under 32".to_string(), |w| w.to_string());
            return Err(corrupt(format!("delta run {run} where {due} was due")));
        }
        // Before a whole row any run may end; before a delta, the run one shorter.
        want_older = run.checked_sub(1);
        next = resolve_node_row(row, &next).map_err(corrupt)?;
        if !next.is_empty() {
            decode_node(&next).map_err(corrupt)?;
        }
        rows += 1;
        Ok(())
    };
    history
        .for_each_row_rev::<H, &'static [u8]>(|key, row| match each(key, row) {
            Ok(()) => Ok(()),
            Err(e) => {
                failed = Some(e);
                Err(crate::storage::StorageError::Unwind("stopped"))
            }
        })
        .or_else(|e| if failed.is_some() { Ok(()) } else { Err(e) })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some((_, node)) = group {
        unfinished(&node, want_older)?;
    }
    Ok(rows)
}

/// The preimage of the hashed slot `hash` exists, is 32 bytes long and hashes back to `hash`.
fn check_slot_preimage(t: &TrieTables, hash: &B256) -> Result<(), TrieError> {
    let stored = t.preimages.get(&hash.0)?.map(|v| v.value().to_vec());
    match stored {
        Some(p) if p.len() == 32 && keccak256(&p) == *hash => Ok(()),
        other => Err(TrieError::Mismatch {
            what: "preimage",
            location: format!("storage slot hashed {hash}"),
            stored: match other {
                Some(p) => format!("0x{}", alloy_primitives::hex::encode(p)),
                None => "none".into(),
            },
            expected: format!("32 bytes whose keccak is {hash}"),
        }),
    }
}
