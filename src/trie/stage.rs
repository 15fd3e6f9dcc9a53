//! The trie-history stage: per-block trie history for the blocks a bulk import checked one state
//! root per epoch for, built after the fact from the state history, one range of an epoch at a
//! time, each block's root checked against its header.
//!
//! A grouped import (`import`, `--proof-history all`) leaves the trie exact at each epoch's end
//! and its history rows written there; the state history is exact at every block, except the
//! storage roots the account rows carry, which change at the epoch's end only. For a range
//! `from..=to` of one epoch the stage reads, from one snapshot:
//! - the state history rows of the range: every key each block changed, with its value before;
//!   the value after a block is the key's next row's, or its value after `to`;
//! - the trie as it was before the range (exact: the range starts after an epoch's end or after
//!   a per-block block), through the history sources of `history`;
//! - the leaves after `to`, through the same sources (or, one range at a time after a bulk
//!   import, the current rows with the keys changed since laid over them, kept from range to
//!   range: `later`), with the values each block had laid over them (`overlay::Merged`): the
//!   keys changed after the block take their value before their next change.
//!
//! Then block by block it walks each changed storage trie and the account trie (`walk`) over
//! the nodes it computed for the range's earlier blocks laid over the trie before the range,
//! checks the root against the block's header, and keeps every node version and storage root.
//! `storage::Writer::adopt_staged` writes them in place of the grouped rows. Cost grows with
//! what the range's blocks changed, not with the state or the chain.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use alloy_primitives::B256;
use alloy_trie::{BranchNodeCompact, EMPTY_ROOT_HASH, Nibbles};

use super::TrieError;
use super::codec::{concat, encode_node, pack_path};
use super::db::{decode_account, storage_leaf};
use super::history::{self, AccountLeavesAt, StorageLeavesAt, Versioned, last_path_key, successor};
use super::later::{Changed, Kept, LATER_BYTES, Later};
use super::memo::{LeafMemo, Memoised};
use super::overlay::{Merged, Overlay};
use super::walk::{NodeSource, PrefixSet, WalkOutput, walk};
use crate::storage::history::keys::{row_block, row_entity, row_key};
use crate::storage::history::staged::{NodeVersions, RootVersions, StagedRange};
use crate::storage::{Database, Reader};

/// What one block changed, from the state history.
#[derive(Debug, Default)]
struct BlockChanges {
    /// Accounts whose row the block wrote.
    accounts: Vec<B256>,
    /// Slots the block wrote, by account.
    slots: BTreeMap<B256, Vec<B256>>,
}

/// A node's key and bytes.
type Entry<const N: usize> = ([u8; N], Vec<u8>);

/// The versions of one key over the range: its value before each block that changed it, in
/// block order.
type Rows = Vec<(u64, Vec<u8>)>;

/// A node table's nodes as the range's blocks so far left them, over the trie before the range.
struct Nodes<'t, const N: usize, const H: usize, const I: usize> {
    /// The trie before the range.
    base: Versioned<'t, N, H, I, &'static [u8], &'static [u8]>,
    /// Every node the range changed so far, with its versions: the last is the node now.
    versions: BTreeMap<[u8; N], NodeVersions>,
    /// The table's name, for errors.
    name: &'static str,
}

impl<const N: usize, const H: usize, const I: usize> Nodes<'_, N, H, I> {
    /// The node at `key` now (`None`: absent).
    fn get(&self, key: &[u8; N]) -> Result<Option<Vec<u8>>, TrieError> {
        match self.versions.get(key) {
            Some(versions) => Ok(versions.now().map(<[u8]>::to_vec)),
            None => self.base.get(key),
        }
    }

    /// The first node now in `from..=last`.
    fn next(&self, from: &[u8; N], last: &[u8; N]) -> Result<Option<Entry<N>>, TrieError> {
        // A walk may seek past the end of the subtree it is in (a branch's last child): an
        // empty range, which `BTreeMap::range` would refuse with a panic.
        if from > last {
            return Ok(None);
        }
        let changed =
            self.versions.range(*from..=*last).find_map(|(k, v)| v.now().map(|v| (*k, v.to_vec())));
        let bound = changed.as_ref().map_or(*last, |(k, _)| *k);
        let mut cursor = *from;
        while cursor <= bound {
            let Some((key, value)) = self.base.next(&cursor, &bound)? else { break };
            if !self.versions.contains_key(&key) {
                return Ok(Some((key, value)));
            }
            match successor(&key) {
                Some(next) => cursor = next,
                None => break,
            }
        }
        Ok(changed)
    }

    /// Records that `block` set the node at `key` to `node` (`None`: removed), if it differs.
    fn set(&mut self, block: u64, key: [u8; N], node: Option<Vec<u8>>) -> Result<(), TrieError> {
        let before = self.get(&key)?;
        if before == node {
            return Ok(());
        }
        self.versions
            .entry(key)
            .or_insert_with(|| NodeVersions::new(before.unwrap_or_default()))
            .push(block, node)?;
        Ok(())
    }

    /// Applies a walk's removals and updates for `block`, keyed by `key`.
    fn apply(
        &mut self,
        block: u64,
        out: &WalkOutput,
        key: impl Fn(&Nibbles) -> [u8; N],
    ) -> Result<(), TrieError> {
        for path in &out.removed {
            self.set(block, key(path), None)?;
        }
        for (path, node) in &out.updates {
            self.set(block, key(path), Some(encode_node(node)))?;
        }
        Ok(())
    }

    fn decode(&self, key: &[u8], value: &[u8]) -> Result<(Nibbles, BranchNodeCompact), TrieError> {
        super::db::decode_row(self.name, key, value)
    }
}

/// The account trie's nodes, as a walk reads them.
struct AccountNodes<'a, 't>(&'a Nodes<'t, 33, 45, 37>);

impl NodeSource for AccountNodes<'_, '_> {
    fn seek(
        &mut self,
        from: &Nibbles,
        within: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        match self.0.next(&pack_path(from), &last_path_key(within))? {
            Some((k, v)) => self.0.decode(&k, &v).map(Some),
            None => Ok(None),
        }
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key = pack_path(path);
        match self.0.get(&key)? {
            Some(v) => Ok(Some(self.0.decode(&key, &v)?.1)),
            None => Ok(None),
        }
    }
}

/// One account's storage-trie nodes, as a walk reads them.
struct StorageNodes<'a, 't> {
    nodes: &'a Nodes<'t, 65, 77, 69>,
    account: B256,
}

impl NodeSource for StorageNodes<'_, '_> {
    fn seek(
        &mut self,
        from: &Nibbles,
        within: &Nibbles,
    ) -> Result<Option<(Nibbles, BranchNodeCompact)>, TrieError> {
        let lo: [u8; 65] = concat(&self.account, &pack_path(from));
        let hi: [u8; 65] = concat(&self.account, &last_path_key(within));
        match self.nodes.next(&lo, &hi)? {
            Some((k, v)) => self.nodes.decode(&k, &v).map(Some),
            None => Ok(None),
        }
    }

    fn get(&mut self, path: &Nibbles) -> Result<Option<BranchNodeCompact>, TrieError> {
        let key: [u8; 65] = concat(&self.account, &pack_path(path));
        match self.nodes.get(&key)? {
            Some(v) => Ok(Some(self.nodes.decode(&key, &v)?.1)),
            None => Ok(None),
        }
    }
}

/// For each key, its rows in the range: the value before each block that changed it.
fn scan_rows<const K: usize, const H: usize, const I: usize>(
    history: &crate::storage::history::lookup::SnapshotHistory<'_, H, I, &'static [u8]>,
    epoch: u32,
    from: u64,
    to: u64,
) -> Result<BTreeMap<[u8; K], Rows>, TrieError> {
    let lo: [u8; H] = row_key(epoch, &[0u8; K], 0);
    let hi: [u8; H] = row_key(epoch, &[0xffu8; K], u64::MAX);
    let mut out: BTreeMap<[u8; K], Rows> = BTreeMap::new();
    history.scan::<H, &'static [u8]>(&lo, &hi, |k, v| {
        let block = row_block(k);
        if (from..=to).contains(&block) {
            out.entry(row_entity::<K, H>(k)).or_default().push((block, v.to_vec()));
        }
        Ok(true)
    })?;
    Ok(out)
}

/// The value of a key after the block at `rows[i]`: the next row's, or the one after the range.
fn after<'r>(rows: &'r Rows, i: usize, last: &'r Option<Vec<u8>>) -> Option<&'r [u8]> {
    match rows.get(i + 1) {
        Some((_, v)) => (!v.is_empty()).then_some(v.as_slice()),
        None => last.as_deref(),
    }
}

/// The RLP leaf of a hashed-account row with `storage_root` in place of the row's own.
fn account_leaf(
    row: &[u8],
    hashed: &B256,
    storage_root: Option<B256>,
) -> Result<Vec<u8>, TrieError> {
    let mut account = decode_account(row, hashed)?;
    if let Some(root) = storage_root {
        account.storage_root = root;
    }
    let mut buf = Vec::with_capacity(110);
    alloy_rlp::Encodable::encode(&account.trie_account(), &mut buf);
    Ok(buf)
}

/// Builds the per-block trie history of blocks `from..=to` (one epoch's, all waiting for the
/// stage) from `reader`'s snapshot, checking each block's state root against its header; the
/// leaves its walks read are memoised up to `memo_bytes`. The storage tries' walks run on a
/// second thread ahead of the account trie's ([`StorageSide`], [`AccountSide`]).
///
/// `later`, when it holds the keys changed after `to` in this snapshot, answers the leaves after
/// `to` without history reads; when it holds those after `from - 1` (a second range built beside
/// the first, which the set stands after), the range's own keys with their values after `to`
/// are laid over it. The set is not moved here ([`move_past`] does, as the range is written).
/// `rows`: the range's state history rows, when the caller has scanned them from this snapshot.
pub(crate) fn stage_range(
    reader: &Reader,
    from: u64,
    to: u64,
    memo_bytes: usize,
    later: Option<&Later>,
    rows: Option<RangeRows>,
) -> Result<StagedRange, TrieError> {
    let started = std::time::Instant::now();
    let t = reader.trie_tables();
    let epoch = t.epochs.of(from);
    if t.epochs.of(to) != epoch || to < from || from == 0 {
        return Err(TrieError::Stage(format!("blocks {from}..={to} are not one epoch's")));
    }
    let (account_rows, slot_rows) = match rows {
        Some(rows) => rows,
        None => range_rows(reader, from, to)?,
    };
    let before = history::at(t, from - 1);
    let plain = history::at(t, to);
    // The values after `to` of the keys the range changed come from the history tables unless
    // `later` stands after `to` already; standing before `from`, the set takes those values
    // laid over it, and `move_past` moves it past the range when the range is written.
    let later = later.filter(|l| l.at == to || l.at + 1 == from);
    let ahead = later.is_some_and(|l| l.at == to);
    let last = match later.filter(|_| ahead) {
        Some(l) => with_later(&plain, l, None),
        None => plain,
    };

    // What each block changed.
    let mut blocks: BTreeMap<u64, BlockChanges> = BTreeMap::new();
    for (key, rows) in &account_rows {
        for (b, _) in rows {
            blocks.entry(*b).or_default().accounts.push(B256::from(*key));
        }
    }
    for (key, rows) in &slot_rows {
        let (account, slot) = (B256::from_slice(&key[..32]), B256::from_slice(&key[32..]));
        for (b, _) in rows {
            blocks.entry(*b).or_default().slots.entry(account).or_default().push(slot);
        }
    }

    // Each changed key's value after the range, and its value before the range's blocks.
    let mut account_last: HashMap<B256, Option<Vec<u8>>> = HashMap::new();
    for key in account_rows.keys() {
        account_last.insert(B256::from(*key), last.accounts.get(key)?);
    }
    let mut slot_last: HashMap<[u8; 64], Option<Vec<u8>>> = HashMap::new();
    for key in slot_rows.keys() {
        slot_last.insert(*key, last.slots.get(key)?);
    }
    let own = match later {
        Some(_) if !ahead => {
            let then = |v: Option<&Vec<u8>>| -> Box<[u8]> {
                v.map_or_else(Box::default, |v| v.as_slice().into())
            };
            let accounts = account_rows
                .keys()
                .map(|k| (*k, then(account_last.get(&B256::from(*k)).and_then(Option::as_ref))))
                .collect();
            let slots = slot_rows
                .keys()
                .map(|k| (*k, then(slot_last.get(k).and_then(Option::as_ref))))
                .collect();
            Some((Changed::of(accounts), Changed::of(slots)))
        }
        _ => None,
    };
    let last = match later {
        Some(l) => with_later(&plain, l, own.as_ref()),
        None => plain,
    };
    // The account rows each block sees, for the accounts that change after it: their value
    // before their next change (the others read as after the range).
    let rows_now = RowsNow {
        rows: account_rows
            .iter()
            .map(|(k, rows)| {
                (B256::from(*k), rows.first().and_then(|(_, v)| (!v.is_empty()).then(|| v.clone())))
            })
            .collect(),
        next: HashMap::new(),
    };
    // Slot leaves each block sees, by account: the same for slots.
    let mut slots_now: BTreeMap<B256, Overlay> = BTreeMap::new();
    let mut buf = Vec::with_capacity(40);
    for (key, rows) in &slot_rows {
        let (account, slot) = (B256::from_slice(&key[..32]), B256::from_slice(&key[32..]));
        let value = match rows.first() {
            Some((_, v)) if !v.is_empty() => {
                storage_leaf(v, &mut buf)?;
                Some(buf.clone())
            }
            _ => None,
        };
        slots_now.entry(account).or_default().insert(slot, value);
    }

    // Storage roots of the accounts whose storage the range changes, from before the range:
    // their rows in the range (and after it, for an account whose root ends where it began)
    // carry the root from before the range until the epoch's end rewrites it.
    let mut root_before: HashMap<B256, B256> = HashMap::new();
    for account in slots_now.keys() {
        let root = match rows_now.row_of(account, &last)? {
            Some(row) => decode_account(&row, account)?.storage_root,
            None => EMPTY_ROOT_HASH,
        };
        root_before.insert(*account, root);
    }
    // Account leaves each block sees for the accounts the range changes: their row then, with
    // the storage root the stage computed.
    let mut leaves_now: Overlay = Overlay::new();
    for account in rows_now.rows.keys().chain(root_before.keys()).collect::<BTreeSet<_>>() {
        leaves_now.insert(*account, rows_now.leaf_of(account, &root_before, &last)?);
    }
    // The leaves after `to`, as the range's walks read them: one snapshot, so read once.
    // Read through the kept keys, a span costs a cursor over the current rows and a search in
    // the set: the memo keeps less, and the set has the memory. Each side keeps half.
    let side_memo = match later {
        Some(_) => memo_bytes.min(KEPT_MEMO_BYTES),
        None => memo_bytes,
    } / 2;
    let input = RangeInput {
        blocks: &blocks,
        account_rows: &account_rows,
        account_last: &account_last,
        slot_rows: &slot_rows,
        slot_last: &slot_last,
        root_before: &root_before,
        last,
    };
    // The storage tries in two parts, each walked on a thread of its own: the accounts
    // whose storage the range changes, heaviest first (by the slot writes of the range), each
    // to the part with fewer writes so far.
    let mut weights: HashMap<B256, usize> = HashMap::new();
    for changes in blocks.values() {
        for (account, slots) in &changes.slots {
            *weights.entry(*account).or_default() += slots.len();
        }
    }
    let mut by_weight: Vec<(B256, usize)> = weights.into_iter().collect();
    by_weight.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (mut second, mut loads) = (HashSet::new(), [0usize; 2]);
    for (account, weight) in by_weight {
        let part = usize::from(loads[1] < loads[0]);
        loads[part] += weight;
        if part == 1 {
            second.insert(account);
        }
    }
    let (slots_second, slots_first): (BTreeMap<_, _>, BTreeMap<_, _>) =
        slots_now.into_iter().partition(|(account, _)| second.contains(account));
    let storage_part = |slots_now, in_second| StorageSide {
        nodes: Nodes {
            base: before.storage_nodes,
            versions: BTreeMap::new(),
            name: "storage_trie",
        },
        memo: LeafMemo::bounded(side_memo / 2),
        rows_now: rows_now.clone(),
        slots_now,
        slot_next: HashMap::new(),
        root_now: root_before.clone(),
        roots: BTreeMap::new(),
        busy: std::time::Duration::ZERO,
        part: (&second, in_second),
    };
    let storage = [storage_part(slots_first, false), storage_part(slots_second, true)];
    let accounts = AccountSide {
        nodes: Nodes {
            base: before.account_nodes,
            versions: BTreeMap::new(),
            name: "account_trie",
        },
        memo: LeafMemo::bounded(side_memo),
        rows_now,
        root_now: root_before.clone(),
        leaves_now,
        waited: std::time::Duration::ZERO,
    };
    // The storage tries on two threads of their own (two parts of them), block by block ahead
    // of the account trie, which waits for each block's storage roots from both: the storage
    // tries took 33 % of the stage's samples and the account trie 21 % on one thread
    // (docs/benchmarks/issue-62.md), and with them on one thread of their own that thread was
    // the critical path, the account trie waiting a third of the walks (the debug log's
    // `account_waits_us`). Each side holds only its own nodes, so memory stays one range's.
    let walks = std::time::Instant::now();
    let (accounts, storage) = std::thread::scope(|scope| {
        let mut receivers = Vec::with_capacity(storage.len());
        let threads = storage.map(|side| {
            let (roots_tx, roots_rx) = std::sync::mpsc::channel();
            receivers.push(roots_rx);
            let input = &input;
            std::thread::Builder::new()
                .name("loupe-trie-storage".into())
                .spawn_scoped(scope, move || side.walk_range(input, roots_tx))
                .map_err(|e| TrieError::Stage(format!("cannot start a storage tries' thread: {e}")))
        });
        let accounts = if threads.iter().all(Result::is_ok) {
            accounts.walk_range(reader, &input, from, to, receivers)
        } else {
            // The sides that started stop at their next block's send.
            drop(receivers);
            Err(None)
        };
        let [first, second] = threads.map(|thread| {
            thread.and_then(|thread| {
                thread.join().unwrap_or_else(|_| {
                    Err(TrieError::Stage("a range's storage-trie thread panicked".into()))
                })
            })
        });
        let storage = first.and_then(|first| second.map(|second| first.absorb(second)));
        match (accounts, storage) {
            (Ok(accounts), Ok(storage)) => Ok((accounts, storage)),
            (Err(Some(e)), _) => Err(e),
            (_, Err(e)) => Err(e),
            (Err(None), Ok(_)) => {
                Err(TrieError::Stage("the storage tries' walks ended before the range's".into()))
            }
        }
    })?;
    let (account_nodes, storage_nodes) = (&accounts.nodes, &storage.nodes);
    // A range that stops short of its epoch's end: the nodes it left unchanged that have rows
    // after it in the epoch, with their value (see `StagedRange::unchanged_account_nodes`).
    let (mut unchanged_account_nodes, mut unchanged_storage_nodes) =
        (BTreeMap::new(), BTreeMap::new());
    if t.epochs.of(to + 1) == epoch {
        let history = t.history(
            &t.account_trie_history,
            &t.account_trie_epochs,
            crate::storage::segments::Kind::AccountTrieHistory,
        );
        for key in nodes_after::<33, 45, 37>(&history, epoch, to)? {
            if !account_nodes.versions.contains_key(&key) {
                unchanged_account_nodes.insert(key, account_nodes.get(&key)?.unwrap_or_default());
            }
        }
        let history = t.history(
            &t.storage_trie_history,
            &t.storage_trie_epochs,
            crate::storage::segments::Kind::StorageTrieHistory,
        );
        for key in nodes_after::<65, 77, 69>(&history, epoch, to)? {
            if !storage_nodes.versions.contains_key(&key) {
                unchanged_storage_nodes.insert(key, storage_nodes.get(&key)?.unwrap_or_default());
            }
        }
    }
    let (memo, storage_memo) = (&accounts.memo, &storage.memo);
    tracing::debug!(
        target: "trie",
        from,
        to,
        leaf_spans_read = memo.misses + storage_memo.misses,
        leaf_spans_memoised = memo.hits + storage_memo.hits,
        before_walks_us = walks.duration_since(started).as_micros() as u64,
        walks_us = walks.elapsed().as_micros() as u64,
        storage_walks_us = storage.busy.as_micros() as u64,
        account_waits_us = accounts.waited.as_micros() as u64,
        "trie-history stage: leaf reads"
    );
    if tracing::enabled!(target: "trie", tracing::Level::DEBUG) {
        // What the range holds at its end, roughly (entries' bytes and a map entry's
        // overhead), for the log: a range's share of a bulk import's peak RSS.
        const ENTRY: usize = 48 + 24;
        let opt = |v: &Option<Vec<u8>>| v.as_ref().map_or(0, Vec::capacity);
        let rows = |k: usize, r: &Rows| {
            k + ENTRY + r.iter().map(|(_, v)| 32 + v.capacity()).sum::<usize>()
        };
        let overlay = |o: &Overlay| o.values().map(|v| 32 + ENTRY + opt(v)).sum::<usize>();
        tracing::debug!(
            target: "trie",
            from,
            to,
            rows = account_rows.values().map(|r| rows(32, r)).sum::<usize>()
                + slot_rows.values().map(|r| rows(64, r)).sum::<usize>(),
            last = account_last.values().map(|v| 32 + ENTRY + opt(v)).sum::<usize>()
                + slot_last.values().map(|v| 64 + ENTRY + opt(v)).sum::<usize>(),
            now = 2 * accounts.rows_now.rows.values().map(|v| 32 + ENTRY + opt(v)).sum::<usize>()
                + storage.slots_now.values().map(|o| 32 + ENTRY + overlay(o)).sum::<usize>()
                + overlay(&accounts.leaves_now),
            blocks = blocks
                .values()
                .map(|c| 32 * c.accounts.len() + c.slots.values().map(|s| 32 + ENTRY + 32 * s.len()).sum::<usize>())
                .sum::<usize>(),
            own = own.as_ref().map_or(0, |(a, s)| a.bytes() + s.bytes()),
            versions = account_nodes.versions.values().map(|v| 33 + ENTRY + v.bytes()).sum::<usize>()
                + storage_nodes.versions.values().map(|v| 65 + ENTRY + v.bytes()).sum::<usize>(),
            memo = memo.bytes() + storage_memo.bytes(),
            "trie-history stage: a range's memory"
        );
    }
    Ok(StagedRange {
        from,
        to,
        account_nodes: accounts.nodes.versions,
        storage_nodes: storage.nodes.versions,
        storage_roots: storage.roots,
        unchanged_account_nodes,
        unchanged_storage_nodes,
    })
}

/// What both sides of a range's walks read and neither changes.
#[derive(Clone, Copy)]
struct RangeInput<'r, 't> {
    /// What each block changed.
    blocks: &'r BTreeMap<u64, BlockChanges>,
    /// Each changed account's rows in the range, and its value after it.
    account_rows: &'r BTreeMap<[u8; 32], Rows>,
    account_last: &'r HashMap<B256, Option<Vec<u8>>>,
    /// Each changed slot's rows in the range, and its value after it.
    slot_rows: &'r BTreeMap<[u8; 64], Rows>,
    slot_last: &'r HashMap<[u8; 64], Option<Vec<u8>>>,
    /// The storage roots before the range of the accounts whose storage it changes.
    root_before: &'r HashMap<B256, B256>,
    /// The leaves after the range.
    last: history::Sources<'t>,
}

/// The account rows a block sees for the accounts the range changes after it (their value
/// before their next change; the others read as after the range), moved block by block.
#[derive(Clone)]
struct RowsNow {
    rows: HashMap<B256, Option<Vec<u8>>>,
    /// Each account's next row in the range.
    next: HashMap<B256, usize>,
}

impl RowsNow {
    /// Moves past a block that wrote the rows of `accounts`.
    fn advance(&mut self, accounts: &[B256], input: &RangeInput<'_, '_>) {
        for account in accounts {
            let (Some(rows), Some(last)) =
                (input.account_rows.get(&account.0), input.account_last.get(account))
            else {
                continue;
            };
            let i = self.next.entry(*account).or_insert(0);
            let value = after(rows, *i, last).map(<[u8]>::to_vec);
            *i += 1;
            match rows.get(*i) {
                Some(_) => self.rows.insert(*account, value),
                None => self.rows.remove(account),
            };
        }
    }

    /// The account's row now (`None`: absent).
    fn row_of(
        &self,
        account: &B256,
        last: &history::Sources<'_>,
    ) -> Result<Option<Vec<u8>>, TrieError> {
        match self.rows.get(account) {
            Some(row) => Ok(row.clone()),
            None => last.accounts.get(&account.0),
        }
    }

    /// The account's leaf now, with the storage root `roots` give it (`None`: absent).
    fn leaf_of(
        &self,
        account: &B256,
        roots: &HashMap<B256, B256>,
        last: &history::Sources<'_>,
    ) -> Result<Option<Vec<u8>>, TrieError> {
        match self.row_of(account, last)? {
            Some(row) => account_leaf(&row, account, roots.get(account).copied()).map(Some),
            None => Ok(None),
        }
    }
}

/// The storage tries' side of a range: each block's changed storage tries walked, their nodes
/// and roots kept; each block's new roots sent to the account trie's side.
struct StorageSide<'t> {
    nodes: Nodes<'t, 65, 77, 69>,
    memo: LeafMemo,
    rows_now: RowsNow,
    /// Slot leaves each block sees, by account (as `rows_now` for accounts).
    slots_now: BTreeMap<B256, Overlay>,
    slot_next: HashMap<[u8; 64], usize>,
    /// Each changed storage trie's root now, and every root it had in the range.
    root_now: HashMap<B256, B256>,
    roots: BTreeMap<B256, RootVersions>,
    /// The time it spent walking (for the stage's debug log).
    busy: std::time::Duration,
    /// The accounts of the second part, and whether this side walks that part (else the
    /// first: every other account).
    part: (&'t HashSet<B256>, bool),
}

impl StorageSide<'_> {
    /// This side with `other`'s nodes, roots and leaves added (the other part's: no key is
    /// in both), for what follows the walks.
    fn absorb(mut self, other: Self) -> Self {
        self.nodes.versions.extend(other.nodes.versions);
        self.roots.extend(other.roots);
        self.slots_now.extend(other.slots_now);
        self.memo.absorb(other.memo);
        self.busy = self.busy.max(other.busy);
        self
    }

    /// Walks every block of the range that changed anything, in order, sending the storage
    /// roots each computed (empty for a block that changed no slot). Stops quietly when the
    /// account side has stopped: its error is the range's.
    fn walk_range(
        mut self,
        input: &RangeInput<'_, '_>,
        roots_tx: std::sync::mpsc::Sender<Vec<(B256, B256)>>,
    ) -> Result<Self, TrieError> {
        let mut buf = Vec::with_capacity(40);
        let started = std::time::Instant::now();
        let (second, in_second) = self.part;
        let mine = |account: &B256| second.contains(account) == in_second;
        for (&block, changes) in input.blocks {
            self.rows_now.advance(&changes.accounts, input);
            let mut computed = Vec::with_capacity(changes.slots.len());
            // This block's values become what the block sees from here on.
            for (account, slots) in changes.slots.iter().filter(|(a, _)| mine(a)) {
                let over = self.slots_now.entry(*account).or_default();
                for slot in slots {
                    let key: [u8; 64] = concat(account, slot.as_slice());
                    let (Some(rows), Some(last)) =
                        (input.slot_rows.get(&key), input.slot_last.get(&key))
                    else {
                        continue;
                    };
                    let i = self.slot_next.entry(key).or_insert(0);
                    let value = after(rows, *i, last);
                    *i += 1;
                    if rows.get(*i).is_some() {
                        let leaf = match value {
                            Some(v) => {
                                storage_leaf(v, &mut buf)?;
                                Some(buf.clone())
                            }
                            None => None,
                        };
                        over.insert(*slot, leaf);
                    } else {
                        over.remove(slot);
                    }
                }
            }
            for (account, slots) in changes.slots.iter().filter(|(a, _)| mine(a)) {
                let root = self.walk_storage(input, block, account, slots)?;
                self.set_root(input, *account, block, root);
                computed.push((*account, root));
            }
            if roots_tx.send(computed).is_err() {
                break;
            }
        }
        self.busy = started.elapsed();
        Ok(self)
    }

    /// One block's walk of `account`'s storage trie over the changed `slots`: its root.
    fn walk_storage(
        &mut self,
        input: &RangeInput<'_, '_>,
        block: u64,
        account: &B256,
        slots: &[B256],
    ) -> Result<B256, TrieError> {
        let key = |path: &Nibbles| -> [u8; 65] { concat(account, &pack_path(path)) };
        if self.rows_now.row_of(account, &input.last)?.is_none() {
            // Deleted: its storage trie is gone with it.
            let lo: [u8; 65] = concat(account, &[0u8; 33]);
            let hi: [u8; 65] = concat(account, &[0xff; 33]);
            let mut cursor = lo;
            let mut gone = Vec::new();
            while let Some((k, _)) = self.nodes.next(&cursor, &hi)? {
                gone.push(k);
                match successor(&k) {
                    Some(next) => cursor = next,
                    None => break,
                }
            }
            for k in gone {
                self.nodes.set(block, k, None)?;
            }
            return Ok(EMPTY_ROOT_HASH);
        }
        let empty = Overlay::new();
        let over = self.slots_now.get(account).unwrap_or(&empty);
        let mut leaves = Merged {
            base: Some(Memoised {
                inner: StorageLeavesAt { slots: input.last.slots, account: *account },
                memo: &mut self.memo,
                trie: Some(*account),
            }),
            over,
        };
        let out = {
            let mut nodes = StorageNodes { nodes: &self.nodes, account: *account };
            walk(&mut nodes, &mut leaves, &PrefixSet::new(slots.to_vec()), None)?
        };
        self.nodes.apply(block, &out, key)?;
        Ok(out.root)
    }

    /// Records `account`'s storage root after `block`.
    fn set_root(&mut self, input: &RangeInput<'_, '_>, account: B256, block: u64, root: B256) {
        if self.root_now.insert(account, root) != Some(root) {
            let before = input.root_before.get(&account).copied().unwrap_or(EMPTY_ROOT_HASH);
            self.roots
                .entry(account)
                .or_insert_with(|| RootVersions { before, changes: Vec::new() })
                .changes
                .push((block, root));
        }
    }
}

/// The account trie's side of a range: each block's walk over the accounts it changed, with
/// the storage roots the storage side sent for it, its root checked against the header.
struct AccountSide<'t> {
    nodes: Nodes<'t, 33, 45, 37>,
    memo: LeafMemo,
    rows_now: RowsNow,
    /// The storage roots now, as the storage side sent them.
    root_now: HashMap<B256, B256>,
    /// Account leaves each block sees for the accounts the range changes.
    leaves_now: Overlay,
    /// The time it waited for the storage side (for the stage's debug log).
    waited: std::time::Duration,
}

impl AccountSide<'_> {
    /// Walks every block of `from..=to`, in order, taking each changed block's storage roots
    /// from every part of the storage side. `Err(None)`: a storage side stopped first (its
    /// error is the range's).
    fn walk_range(
        mut self,
        reader: &Reader,
        input: &RangeInput<'_, '_>,
        from: u64,
        to: u64,
        roots_rx: Vec<std::sync::mpsc::Receiver<Vec<(B256, B256)>>>,
    ) -> Result<Self, Option<TrieError>> {
        for block in from..=to {
            let Some(changes) = input.blocks.get(&block) else {
                // Nothing changed: the root must still be the header's.
                let root =
                    account_root(&self.nodes, &input.last, &self.leaves_now, &mut self.memo)?;
                check_root(reader, block, root)?;
                continue;
            };
            self.rows_now.advance(&changes.accounts, input);
            let waiting = std::time::Instant::now();
            for part in &roots_rx {
                let Ok(roots) = part.recv() else { return Err(None) };
                self.root_now.extend(roots);
            }
            self.waited += waiting.elapsed();
            let mut touched: Vec<B256> = changes.accounts.clone();
            touched.extend(changes.slots.keys().copied());
            for account in &touched {
                let leaf = self.rows_now.leaf_of(account, &self.root_now, &input.last)?;
                self.leaves_now.insert(*account, leaf);
            }
            let out = {
                let mut nodes = AccountNodes(&self.nodes);
                let base = Memoised {
                    inner: AccountLeavesAt(input.last.accounts),
                    memo: &mut self.memo,
                    trie: None,
                };
                let mut leaves = Merged { base: Some(base), over: &self.leaves_now };
                walk(&mut nodes, &mut leaves, &PrefixSet::new(touched), None)?
            };
            check_root(reader, block, out.root)?;
            self.nodes.apply(block, &out, pack_path)?;
        }
        Ok(self)
    }
}

/// The state history rows of a range: of the accounts, then of the slots.
type RangeRows = (BTreeMap<[u8; 32], Rows>, BTreeMap<[u8; 64], Rows>);

/// The state history rows of blocks `from..=to` (one epoch's) in `reader`'s snapshot.
fn range_rows(reader: &Reader, from: u64, to: u64) -> Result<RangeRows, TrieError> {
    let t = reader.trie_tables();
    let epoch = t.epochs.of(from);
    Ok((
        scan_rows::<32, 44, 36>(&t.account_history(), epoch, from, to)?,
        scan_rows::<64, 76, 68>(&t.storage_history(), epoch, from, to)?,
    ))
}

/// Moves `later`, standing at `from - 1`, past the range `from..=to` whose rows in `reader`'s
/// snapshot are `rows`: the keys the range changed take their values after it, read through
/// the history tables.
fn move_past(
    reader: &Reader,
    later: &mut Later,
    from: u64,
    to: u64,
    rows: &RangeRows,
) -> Result<(), TrieError> {
    if later.at + 1 != from {
        return Ok(());
    }
    let plain = history::at(reader.trie_tables(), to);
    let then = |v: Option<Vec<u8>>| -> Box<[u8]> { v.unwrap_or_default().into_boxed_slice() };
    let accounts = rows
        .0
        .keys()
        .map(|k| Ok((*k, then(plain.accounts.get(k)?))))
        .collect::<Result<Vec<_>, TrieError>>()?;
    let slots = rows
        .1
        .keys()
        .map(|k| Ok((*k, then(plain.slots.get(k)?))))
        .collect::<Result<Vec<_>, TrieError>>()?;
    later.advance(to, accounts, slots);
    Ok(())
}

/// `sources` with its hashed state read through `later`, with `own` (a range's keys with their
/// values after it) laid over it.
fn with_later<'t>(
    sources: &history::Sources<'t>,
    later: &'t Later,
    own: Option<&'t (Changed<32>, Changed<64>)>,
) -> history::Sources<'t> {
    history::Sources {
        accounts: sources
            .accounts
            .with_later(Kept { over: own.map(|o| &o.0), set: &later.accounts }),
        slots: sources.slots.with_later(Kept { over: own.map(|o| &o.1), set: &later.slots }),
        ..*sources
    }
}

/// The nodes with history rows after block `to` in `epoch`.
fn nodes_after<const K: usize, const H: usize, const I: usize>(
    history: &crate::storage::history::lookup::SnapshotHistory<'_, H, I, &'static [u8]>,
    epoch: u32,
    to: u64,
) -> Result<BTreeSet<[u8; K]>, TrieError> {
    let lo: [u8; H] = row_key(epoch, &[0u8; K], 0);
    let hi: [u8; H] = row_key(epoch, &[0xffu8; K], u64::MAX);
    let mut out = BTreeSet::new();
    history.scan::<H, &'static [u8]>(&lo, &hi, |k, _| {
        if row_block(k) > to {
            out.insert(row_entity::<K, H>(k));
        }
        Ok(true)
    })?;
    Ok(out)
}

/// The account trie's root as the block before left it (a block that changed nothing).
fn account_root(
    nodes: &Nodes<'_, 33, 45, 37>,
    last: &history::Sources<'_>,
    leaves_now: &Overlay,
    memo: &mut LeafMemo,
) -> Result<B256, TrieError> {
    let mut n = AccountNodes(nodes);
    let base = Memoised { inner: AccountLeavesAt(last.accounts), memo, trie: None };
    let mut leaves = Merged { base: Some(base), over: leaves_now };
    Ok(walk(&mut n, &mut leaves, &PrefixSet::default(), None)?.root)
}

/// Checks a computed root against block `block`'s header.
fn check_root(reader: &Reader, block: u64, computed: B256) -> Result<(), TrieError> {
    let header = reader.header(block)?.ok_or(TrieError::UnknownBlock(block))?;
    if header.state_root != computed {
        return Err(TrieError::StageRootMismatch { block, header: header.state_root, computed });
    }
    Ok(())
}

/// Milliseconds to pause after building each range and again before its commit: a
/// fault-injection hook for the crash tests, which kill the process there. Unset: no pause.
pub const TEST_PAUSE_ENV: &str = "LOUPE_STAGE_TEST_PAUSE_MS";

fn test_pause() {
    static PAUSE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ms = *PAUSE.get_or_init(|| {
        std::env::var(TEST_PAUSE_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
    });
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// What [`run`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageSummary {
    /// Ranges built and written.
    pub ranges: u64,
    /// Blocks they covered.
    pub blocks: u64,
    /// Of those ranges, the ones whose leaves after the range came from the keys changed since,
    /// kept from range to range (`trie/later.rs`), not from the history tables.
    pub kept_ranges: u64,
    /// Where the stage stands after the run (`None`: no import checked roots per group).
    pub staged_to: Option<u64>,
}

/// Runs the stage until no block waits for it or `stop` is set: range by range, each
/// written in a durable commit of its own, so a kill loses at most the range being built. A
/// block whose header root differs from its state's is recorded
/// ([`crate::storage::history::staged::TrieStage::failed`]) and returned as [`TrieError::StageRootMismatch`]; a datadir with such
/// a block refuses to run the stage again.
///
/// `at_once` ranges are built side by side (at most the cores; 0 counts as 1): after the range
/// the stage stands at, every range is a whole epoch, which starts from the trie its
/// predecessor's end left exact (the grouped import checked the root and wrote the trie's rows
/// there), so ranges need not wait for each other's rows; they are written in order. The first
/// two read through the keys kept from range to range (`later.rs`), any other through the
/// history tables. Their leaf memos share [`super::memo::MEMO_BYTES`], but each holds its own
/// rows and node versions: on the 10,000-block chain over 1M accounts two at once took the
/// import's peak RSS to 1,126 MiB (docs/benchmarks/issue-62.md), over the 1 GiB a bulk import
/// keeps to with one (945 MiB), when a range's walks took one thread; each range takes three now
/// ([`stage_range`]).
pub fn run(
    db: &Database,
    stop: &std::sync::atomic::AtomicBool,
    at_once: usize,
) -> Result<StageSummary, TrieError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    run_with(db, stop, true, false, at_once.clamp(1, cores))
}

/// [`run`] beside a grouped import that is still storing blocks: only whole epochs, the ones
/// the import has left behind, so that no group of the import writes trie-history rows into
/// an epoch after the stage (an epoch's node rows are one delta chain, `storage::history::nodes`,
/// written by one of them); the rest waits for [`run`] after the blocks. The whole epochs it
/// finds are built in turn and written in one transaction ([`write_batch`]), so a kill loses
/// at most those. Announced in the log only when `announce` is set: it starts anew at each
/// group the import commits.
pub fn run_beside_import(
    db: &Database,
    stop: &std::sync::atomic::AtomicBool,
    announce: bool,
) -> Result<StageSummary, TrieError> {
    run_with(db, stop, announce, true, BESIDE_RANGES)
}

/// The most ranges one write transaction beside an import adopts ([`write_batch`]): a group of
/// the import completes four 128-block epochs.
const BESIDE_RANGES: usize = 16;

fn run_with(
    db: &Database,
    stop: &std::sync::atomic::AtomicBool,
    announce: bool,
    whole_epochs: bool,
    at_once: usize,
) -> Result<StageSummary, TrieError> {
    let mut summary = StageSummary::default();
    if announce
        && let Some(stage) =
            db.begin_read()?.trie_stage()?.filter(|s| s.pending() && s.failed.is_none())
    {
        tracing::info!(
            target: "trie",
            from = stage.staged_to + 1,
            to = stage.grouped_to,
            "trie-history stage: building per-block trie history, checking every block's state root"
        );
    }
    // The keys changed after the range being built, kept from range to range after the blocks
    // (`later.rs`); a build past its bound is tried again some ranges on, when fewer keys have
    // changed since.
    let mut later: Option<Later> = None;
    let mut build_later_at = 0u64;
    loop {
        let reader = db.begin_read()?;
        let Some(stage) = reader.trie_stage()? else { return Ok(summary) };
        summary.staged_to = Some(stage.staged_to);
        if let Some((block, header, computed)) = stage.failed {
            return Err(TrieError::StageRootMismatch { block, header, computed });
        }
        if !stage.pending() || stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(summary);
        }
        let epochs = reader.trie_tables().epochs;
        let from = stage.staged_to + 1;
        let epoch_end = (u64::from(epochs.of(from)) + 1) * epochs.len - 1;
        let to = epoch_end.min(stage.grouped_to);
        if whole_epochs && to < epoch_end {
            return Ok(summary);
        }
        // The whole epochs after it, up to the last grouped block, built beside it (beside an
        // import, only whole epochs: the rest waits for the import's next groups).
        let mut ranges = vec![(from, to)];
        while let Some(&(_, last)) = ranges.last().filter(|_| ranges.len() < at_once.max(1)) {
            if last >= stage.grouped_to {
                break;
            }
            let end = (u64::from(epochs.of(last + 1)) + 1) * epochs.len - 1;
            if whole_epochs && end > stage.grouped_to {
                break;
            }
            ranges.push((last + 1, end.min(stage.grouped_to)));
        }
        let head = reader.head()?.unwrap_or(to);
        // The set is kept after the blocks only; the first range reads it moved past itself,
        // the second its own keys over it (`stage_range`), any later one the history tables.
        if whole_epochs
            || later.as_ref().is_some_and(|l| l.head != head || (l.at + 1 != from && l.at != to))
        {
            later = None;
        }
        if !whole_epochs && later.is_none() && summary.ranges >= build_later_at {
            let read = std::time::Instant::now();
            later = Later::build(reader.trie_tables(), to, head, LATER_BYTES)?;
            match &later {
                Some(l) => tracing::debug!(
                    target: "trie",
                    at = to,
                    accounts = l.accounts.len(),
                    slots = l.slots.len(),
                    bytes = l.bytes(),
                    read_us = read.elapsed().as_micros() as u64,
                    "trie-history stage: the keys changed after the range read"
                ),
                None => build_later_at = summary.ranges + LATER_RETRY_RANGES,
            }
        }
        let started = std::time::Instant::now();
        // The first range's rows, scanned once: to move the set past it, and to build it.
        let mut first_rows = None;
        if let Some(l) = later.as_mut().filter(|l| l.at + 1 == from) {
            let rows = range_rows(&reader, from, to)?;
            move_past(&reader, l, from, to, &rows)?;
            first_rows = Some(rows);
        }
        let memo_bytes = match whole_epochs {
            true => BESIDE_MEMO_BYTES,
            false => super::memo::MEMO_BYTES / ranges.len(),
        };
        let set = later.as_ref();
        if whole_epochs {
            let built = build_one_by_one(&reader, &ranges, memo_bytes);
            drop(reader);
            let built_us = started.elapsed().as_micros() as u64;
            match write_batch(db, &ranges, built, built_us, &mut summary)? {
                true => continue,
                false => return Ok(summary),
            }
        }
        let built: Vec<Result<StagedRange, TrieError>> = std::thread::scope(|scope| {
            let others: Vec<_> = ranges[1..]
                .iter()
                .enumerate()
                .map(|(i, &(from, to))| {
                    let set = set.filter(|_| i == 0);
                    scope.spawn(move || {
                        stage_range(&db.begin_read()?, from, to, memo_bytes, set, None)
                    })
                })
                .collect();
            let first = stage_range(&reader, from, to, memo_bytes, set, first_rows);
            std::iter::once(first)
                .chain(others.into_iter().map(|thread| {
                    thread.join().unwrap_or_else(|_| {
                        Err(TrieError::Stage("a range's thread panicked".into()))
                    })
                }))
                .collect()
        });
        drop(reader);
        let built_us = started.elapsed().as_micros() as u64;
        // Written in order: a range that fails stops the ones after it, and is recorded once
        // the ones before it are written.
        for (i, (&(from, to), range)) in ranges.iter().zip(built).enumerate() {
            let written = std::time::Instant::now();
            let range = match range {
                Ok(range) => range,
                Err(TrieError::StageRootMismatch { block, header, computed }) => {
                    let writer = db.begin_write()?;
                    writer.set_trie_stage_failed(block, header, computed)?;
                    writer.commit(true)?;
                    return Err(TrieError::StageRootMismatch { block, header, computed });
                }
                Err(e) => return Err(e),
            };
            // The set, which stood before the second range while it was built, moves past it
            // from a snapshot after the first range's rows, as it would have built one by one.
            let kept = later.is_some() && i < 2;
            if let Some(l) = later.as_mut().filter(|l| l.at + 1 == from) {
                let reader = db.begin_read()?;
                let rows = range_rows(&reader, from, to)?;
                move_past(&reader, l, from, to, &rows)?;
            }
            test_pause();
            let writer = db.begin_write()?;
            if !writer.adopt_staged(&range)? {
                // Another run took it: the stage is read again.
                break;
            }
            test_pause();
            writer.commit(true)?;
            summary.ranges += 1;
            summary.blocks += to - from + 1;
            summary.kept_ranges += u64::from(kept);
            summary.staged_to = Some(to);
            metrics::gauge!("loupe_trie_history_staged_to").set(to as f64);
            tracing::debug!(
                target: "trie",
                from,
                to,
                at_once = ranges.len(),
                account_nodes = range.account_nodes.len(),
                storage_nodes = range.storage_nodes.len(),
                built_us,
                written_us = written.elapsed().as_micros() as u64,
                "trie history staged"
            );
        }
    }
}

/// Builds `ranges` in turn on this thread, all from `reader`'s snapshot, until one fails (its
/// error ends the list) or those built hold [`BESIDE_BATCH_BYTES`]: what one write
/// transaction beside an import then adopts.
fn build_one_by_one(
    reader: &Reader,
    ranges: &[(u64, u64)],
    memo_bytes: usize,
) -> Vec<Result<StagedRange, TrieError>> {
    let mut built = Vec::with_capacity(ranges.len());
    let mut bytes = 0;
    for &(from, to) in ranges {
        let range = stage_range(reader, from, to, memo_bytes, None, None);
        let failed = range.is_err();
        bytes += range.as_ref().map_or(0, StagedRange::bytes);
        built.push(range);
        if failed || bytes >= BESIDE_BATCH_BYTES {
            break;
        }
    }
    built
}

/// Writes ranges built beside an import in one write transaction and one durable commit, in
/// order; the epochs they complete are frozen at the commit, together. An import holds the
/// write lock but between its groups (512 blocks), so a commit per range let the stage write
/// one 128-block range per group: on mainnet's first 16,384 blocks it had staged 3,199 blocks
/// when the blocks were stored, and built the rest after them (docs/benchmarks/issue-62.md).
/// A range whose root differs is recorded after the ones before it; returns whether the stage
/// goes on (`false`: another run adopted the first range, as [`run_with`] would).
fn write_batch(
    db: &Database,
    ranges: &[(u64, u64)],
    built: Vec<Result<StagedRange, TrieError>>,
    built_us: u64,
    summary: &mut StageSummary,
) -> Result<bool, TrieError> {
    test_pause();
    let written = std::time::Instant::now();
    let mut writer = db.begin_write()?;
    writer.freeze_at_commit();
    let mut adopted = Vec::with_capacity(built.len());
    let mut failure = None;
    for (&(from, to), range) in ranges.iter().zip(built) {
        let range = match range {
            Ok(range) => range,
            Err(TrieError::StageRootMismatch { block, header, computed }) => {
                writer.set_trie_stage_failed(block, header, computed)?;
                failure = Some(TrieError::StageRootMismatch { block, header, computed });
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        if !writer.adopt_staged(&range)? {
            break;
        }
        adopted.push((from, to, range.account_nodes.len(), range.storage_nodes.len()));
    }
    test_pause();
    writer.commit(true)?;
    let written_us = written.elapsed().as_micros() as u64;
    for &(from, to, account_nodes, storage_nodes) in &adopted {
        summary.ranges += 1;
        summary.blocks += to - from + 1;
        summary.staged_to = Some(to);
        tracing::debug!(
            target: "trie",
            from,
            to,
            batch = adopted.len(),
            account_nodes,
            storage_nodes,
            built_us,
            written_us,
            "trie history staged"
        );
    }
    if let Some(&(_, to, _, _)) = adopted.last() {
        metrics::gauge!("loupe_trie_history_staged_to").set(to as f64);
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(!adopted.is_empty()),
    }
}

/// What the ranges built beside an import may hold before they are written: the first is
/// always built. A 128-block range of mainnet's first blocks holds a few kB; one of the
/// 10,000-block chain over 1M accounts tens of MB, so there about one a batch.
const BESIDE_BATCH_BYTES: usize = 32 << 20;

/// The leaf memo's bound when a range reads through the kept keys (`later.rs`).
const KEPT_MEMO_BYTES: usize = 32 << 20;

/// The leaf memo's bound beside an import, whose own group buffers take the memory then: on
/// the 10,000-block chain over 1M accounts the import's RSS rose and fell by some 300 MB with
/// each range's memo, up to about 1 GiB, while the bound (then counting leaves' bytes only)
/// was 192 MiB.
const BESIDE_MEMO_BYTES: usize = 96 << 20;

/// Ranges to build through the history tables before trying again to read the keys changed
/// after the stage's range, when they did not fit [`LATER_BYTES`].
const LATER_RETRY_RANGES: u64 = 16;

/// Whether a datadir's trie history is exact at `block`, for proofs: an error naming the
/// stage's progress when the block waits for it ([`TrieError::ProofsStaging`]), or, in a datadir
/// that keeps trie history for the unwind window only, when the block is in a commit group
/// older than the last one ([`TrieError::ProofsGrouped`]).
pub(crate) fn check_exact(reader: &Reader, block: u64) -> Result<(), TrieError> {
    use crate::storage::segments::ProofHistory;
    match reader.proof_history()? {
        ProofHistory::Window => {
            if let Some(from) = reader.group_root_at()?.filter(|from| block < *from) {
                return Err(TrieError::ProofsGrouped { block, from });
            }
        }
        ProofHistory::All => {
            if let Some(stage) = reader.trie_stage()?
                && !stage.exact_at(block, reader.trie_tables().epochs)
            {
                return Err(TrieError::ProofsStaging {
                    block,
                    staged_to: stage.staged_to,
                    grouped_to: stage.grouped_to,
                });
            }
        }
    }
    Ok(())
}

/// The stage running on a thread of its own beside a serving node (`loupe node`, `loupe follow`),
/// five nice steps below the other threads: [`StageHandle::stop`] ends it between ranges.
#[derive(Debug)]
pub struct StageHandle {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl StageHandle {
    /// Asks the thread to stop after the range it is building and waits for it.
    pub fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// Starts the stage on a thread of its own if blocks of `db` wait for it; `None` otherwise. Its
/// progress is logged, in `loupe_trie_history_staged_to`, in `loupe db stats` and on
/// `/health`; a block whose root differs is logged as an error and recorded.
pub fn spawn(db: std::sync::Arc<Database>) -> Result<Option<StageHandle>, TrieError> {
    let pending = db.begin_read()?.trie_stage()?.filter(|s| s.pending() && s.failed.is_none());
    if pending.is_none() {
        return Ok(None);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("loupe-trie-stage".into())
        .spawn(move || {
            crate::storage::lower_thread_priority(5);
            let started = std::time::Instant::now();
            // One range at a time: the node's requests keep the other core.
            match run_with(&db, &flag, true, false, 1) {
                Ok(s) => tracing::info!(
                    target: "trie",
                    blocks = s.blocks,
                    staged_to = s.staged_to,
                    secs = started.elapsed().as_secs_f64(),
                    "trie-history stage done"
                ),
                Err(e) => tracing::error!(target: "trie", "trie-history stage stopped: {e}"),
            }
        })
        .map_err(|e| TrieError::Stage(format!("cannot start its thread: {e}")))?;
    Ok(Some(StageHandle { stop, thread }))
}
