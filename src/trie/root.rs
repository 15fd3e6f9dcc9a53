//! [`update_state_root`]: the state root after a block, from the stored trie and the block's
//! changes, written in the block's own write transaction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::MutexGuard;

use alloy_primitives::{B256, keccak256};
use alloy_trie::{BranchNodeCompact, Nibbles};
use redb::{ReadableTable, Table, WriteTransaction};
use revm::database::states::StateChangeset;

use super::TrieError;
use super::codec::{concat, encode_node, pack_path};
use super::db::{AccountLeaves, AccountNodes, StorageLeaves, StorageNodes};
use super::walk::{NoNodes, PrefixSet, WalkOutput, walk};
use crate::storage::codec::account::row_stamp;
use crate::storage::history::changes::{ChangeKind, record_changes};
use crate::storage::history::index::stamp_replaced;
use crate::storage::history::keys::{hashed_account_history_key, history_epochs};
use crate::storage::tables;
use crate::storage::{TrieNodes, Writer};

/// Whether [`update_state_root`] stores the trie nodes it computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootMode {
    /// Compute the root only. Stored nodes stay as they were, so later calls in the same block
    /// must pass the block's cumulative changes (pre-Byzantium per-transaction roots).
    Compute,
    /// Compute the root and store the new nodes (with history), once per block.
    Store,
}

/// The hashed keys a changeset touches.
#[derive(Debug, Default)]
struct Touched {
    /// Every account whose leaf may have changed.
    accounts: Vec<B256>,
    /// Per account: its storage was wiped, and the slots written.
    storage: BTreeMap<B256, (bool, Vec<B256>)>,
    /// Accounts deleted by the changeset.
    deleted: Vec<B256>,
}

fn touched(changes: &StateChangeset) -> Touched {
    let mut t = Touched::default();
    for (address, info) in &changes.accounts {
        let h = keccak256(address);
        t.accounts.push(h);
        if info.is_none() {
            t.deleted.push(h);
        }
    }
    for change in &changes.storage {
        let h = keccak256(change.address);
        t.accounts.push(h);
        let entry = t.storage.entry(h).or_default();
        entry.0 |= change.wipe_storage;
        entry.1.extend(change.storage.iter().map(|(slot, _)| keccak256(slot.to_be_bytes::<32>())));
    }
    t
}

/// What the blocks of a bulk import's commit group changed, gathered for one state root at the
/// group's last block ([`settle_state_root`]) instead of one per block. Its size grows with the
/// keys the group touches, which the group's length bounds.
#[derive(Debug, Default)]
pub struct DeferredRoot {
    blocks: u64,
    accounts: HashSet<B256>,
    deleted: HashSet<B256>,
    /// Per account: its storage was wiped (or the account deleted) in one of the blocks, and
    /// the slots written.
    storage: HashMap<B256, (bool, HashSet<B256>)>,
}

impl DeferredRoot {
    /// Adds one block's changes, which the storage writer has applied to the hashed state.
    pub fn add(&mut self, changes: &StateChangeset) {
        self.blocks += 1;
        let t = touched(changes);
        self.accounts.extend(t.accounts);
        for (account, (wiped, slots)) in t.storage {
            let entry = self.storage.entry(account).or_default();
            entry.0 |= wiped;
            entry.1.extend(slots);
        }
        for account in t.deleted {
            // Storage written before the deletion is gone with it: if the account comes back
            // later in the group, its storage trie is built again from its leaves.
            self.storage.entry(account).or_default().0 = true;
            self.deleted.insert(account);
        }
    }

    /// Whether no block has been added since the last settle.
    pub fn is_empty(&self) -> bool {
        self.blocks == 0
    }

    /// Blocks added since the last settle.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    fn take(&mut self) -> Touched {
        let p = std::mem::take(self);
        let mut storage = BTreeMap::new();
        for (account, (wiped, slots)) in p.storage {
            let slots = if wiped { Vec::new() } else { slots.into_iter().collect() };
            storage.insert(account, (wiped, slots));
        }
        Touched {
            accounts: p.accounts.into_iter().collect(),
            storage,
            deleted: p.deleted.into_iter().collect(),
        }
    }
}

/// The state root after `block`, the last of the blocks gathered in `deferred`, computed once
/// for all of them and stored like [`update_state_root`]'s [`RootMode::Store`]: the trie
/// history and change lists of every node the group changed are recorded under `block`, so the
/// trie is exact at `block` and not at the blocks before it in the group. `deferred` is left
/// empty. Cost grows with the keys the group touched, not with the state size.
pub fn settle_state_root(
    writer: &Writer,
    block: u64,
    deferred: &mut DeferredRoot,
) -> Result<B256, TrieError> {
    update_touched(writer, block, deferred.take(), RootMode::Store)
}

/// The trie's current nodes in one write transaction, with the changes it holds
/// ([`Writer::trie_nodes`]) laid over them.
struct TrieTables<'t> {
    txn: &'t WriteTransaction,
    account_trie: Table<'t, &'static [u8; 33], &'static [u8]>,
    storage_trie: Table<'t, &'static [u8; 65], &'static [u8]>,
    held: MutexGuard<'t, TrieNodes>,
    /// Keys of the history rows added, for the block's change index.
    changed_account_paths: Vec<u8>,
    changed_storage_keys: Vec<u8>,
}

impl<'t> TrieTables<'t> {
    fn open(writer: &'t Writer) -> Result<Self, TrieError> {
        let txn = writer.transaction();
        Ok(Self {
            txn,
            account_trie: txn.open_table(tables::ACCOUNT_TRIE)?,
            storage_trie: txn.open_table(tables::STORAGE_TRIE)?,
            held: writer.trie_nodes(),
            changed_account_paths: Vec::new(),
            changed_storage_keys: Vec::new(),
        })
    }

    /// Sets or removes the account-trie node at `path`, recording the old one for `block`.
    fn put_account(
        &mut self,
        block: u64,
        path: &Nibbles,
        node: Option<&BranchNodeCompact>,
    ) -> Result<(), TrieError> {
        let key = pack_path(path);
        let table = &self.account_trie;
        let stored = || Ok(table.get(&key)?.map(|v| v.value().to_vec()));
        if self.held.account.put(&key, block, node.map(encode_node), stored)? {
            self.changed_account_paths.extend_from_slice(&key);
        }
        self.bound()
    }

    /// Writes the held changes before going on if this block has made too many
    /// ([`TrieNodes::overfull`]: a block that deletes a large storage trie). A node changed
    /// again later in the block then gets its history row re-encoded (`storage::history::nodes`),
    /// and its key listed twice in the block's change index, which keeps it once.
    fn bound(&mut self) -> Result<(), TrieError> {
        if self.held.overfull() {
            let held = self.held.take();
            held.write_with(self.txn, &mut self.account_trie, &mut self.storage_trie)?;
        }
        Ok(())
    }

    /// Sets or removes one storage-trie node, recording the old one for `block`.
    fn put_storage(
        &mut self,
        block: u64,
        key: &[u8; 65],
        node: Option<Vec<u8>>,
    ) -> Result<(), TrieError> {
        let table = &self.storage_trie;
        let stored = || Ok(table.get(key)?.map(|v| v.value().to_vec()));
        if self.held.storage.put(key, block, node, stored)? {
            self.changed_storage_keys.extend_from_slice(key);
        }
        self.bound()
    }

    /// Removes every storage-trie node of `account`.
    fn clear_storage(&mut self, block: u64, account: &B256) -> Result<(), TrieError> {
        let lo: [u8; 65] = concat(account, &[0u8; 33]);
        let hi: [u8; 65] = concat(account, &[0xff; 33]);
        let mut keys = std::collections::BTreeSet::new();
        for item in self.storage_trie.range::<&[u8; 65]>(&lo..=&hi)? {
            let key = *item?.0.value();
            if self.held.storage.get(&key).is_none() {
                keys.insert(key);
            }
        }
        keys.extend(
            self.held.storage.range(&lo, &hi).filter(|(_, n)| n.is_some()).map(|(k, _)| *k),
        );
        for key in keys {
            self.put_storage(block, &key, None)?;
        }
        Ok(())
    }

    fn apply_storage(
        &mut self,
        block: u64,
        account: &B256,
        out: &WalkOutput,
    ) -> Result<(), TrieError> {
        for path in &out.removed {
            self.put_storage(block, &concat(account, &pack_path(path)), None)?;
        }
        for (path, node) in &out.updates {
            let key = concat(account, &pack_path(path));
            self.put_storage(block, &key, Some(encode_node(node)))?;
        }
        Ok(())
    }
}

/// Computes the state root after `block` from the stored trie and `changes`, which the storage
/// `writer` has already applied to the hashed state. Storage roots are refreshed in the hashed
/// accounts (with history). With [`RootMode::Store`] the new trie nodes are stored too, each
/// old one kept in the trie history under `block`: the writer holds them
/// ([`Writer::trie_nodes`]) and writes them at its commit, and every later walk in the same
/// transaction reads through them.
///
/// Cost grows with what `changes` touches times the trie depth, not with the state size.
pub fn update_state_root(
    writer: &Writer,
    block: u64,
    changes: &StateChangeset,
    mode: RootMode,
) -> Result<B256, TrieError> {
    update_touched(writer, block, touched(changes), mode)
}

fn update_touched(
    writer: &Writer,
    block: u64,
    touched: Touched,
    mode: RootMode,
) -> Result<B256, TrieError> {
    let txn = writer.transaction();
    let epochs = history_epochs(txn)?;
    let mut trie = TrieTables::open(writer)?;
    let mut accounts = txn.open_table(tables::HASHED_ACCOUNTS)?;
    let account_history = txn.open_table(tables::HASHED_ACCOUNT_HISTORY)?;
    let mut account_index = txn.open_table(tables::HASHED_ACCOUNT_EPOCHS)?;
    let storage = txn.open_table(tables::HASHED_STORAGE)?;
    let store = mode == RootMode::Store;
    let mut changed_hashed_accounts = Vec::new();

    if store {
        for account in &touched.deleted {
            trie.clear_storage(block, account)?;
        }
    }
    for (account, (wiped, slots)) in &touched.storage {
        let Some(row) = accounts.get(&account.0)?.map(|v| v.value().to_vec()) else {
            // Deleted in this block: its storage is gone with it.
            continue;
        };
        let mut leaves = StorageLeaves { table: &storage, account: *account };
        let out = if *wiped {
            walk(&mut NoNodes, &mut leaves, &PrefixSet::all(), None)?
        } else {
            let mut nodes = StorageNodes {
                table: &trie.storage_trie,
                held: &trie.held.storage,
                account: *account,
            };
            walk(&mut nodes, &mut leaves, &PrefixSet::new(slots.clone()), None)?
        };
        if store {
            if *wiped {
                trie.clear_storage(block, account)?;
            }
            trie.apply_storage(block, account, &out)?;
        }
        let mut hashed = super::db::decode_account(&row, account)?;
        if hashed.storage_root != out.root {
            let stamp = row_stamp(&row, "hashed_accounts")?;
            stamp_replaced(&mut account_index, epochs, &account.0, stamp, block)?;
            let hkey = hashed_account_history_key(epochs, account, block);
            if writer.record_account_history(&account_history, &hkey, row.as_slice())? {
                changed_hashed_accounts.extend_from_slice(account.as_slice());
            }
            hashed.storage_root = out.root;
            accounts.insert(&account.0, hashed.encode(block).as_slice())?;
        }
    }

    let changed = PrefixSet::new(touched.accounts);
    let mut nodes = AccountNodes { table: &trie.account_trie, held: &trie.held.account };
    let out = walk(&mut nodes, &mut AccountLeaves(&accounts), &changed, None)?;
    if store {
        for path in &out.removed {
            trie.put_account(block, path, None)?;
        }
        for (path, node) in &out.updates {
            trie.put_account(block, path, Some(node))?;
        }
    }
    let (paths, keys) = (trie.changed_account_paths, trie.changed_storage_keys);
    drop((trie.account_trie, trie.storage_trie, trie.held));
    drop((accounts, account_history, account_index, storage));
    record_changes(txn, block, ChangeKind::HashedAccounts, &changed_hashed_accounts)?;
    record_changes(txn, block, ChangeKind::AccountTrie, &paths)?;
    record_changes(txn, block, ChangeKind::StorageTrie, &keys)?;
    if store {
        writer.trie_nodes_done()?;
    }
    Ok(out.root)
}

/// Builds every trie of the hashed state in `txn` from scratch and stores its nodes, without
/// history: used once, at genesis, on empty trie tables. Memory stays bounded whatever the
/// state size: leaves stream in key order and nodes are written as they complete.
pub fn build_state_root(txn: &WriteTransaction) -> Result<B256, TrieError> {
    let mut storage_trie = txn.open_table(tables::STORAGE_TRIE)?;
    let mut account_trie = txn.open_table(tables::ACCOUNT_TRIE)?;
    let mut accounts = txn.open_table(tables::HASHED_ACCOUNTS)?;
    let storage = txn.open_table(tables::HASHED_STORAGE)?;

    // Each account with storage, found with one seek past the previous one.
    let mut from = [0u8; 64];
    loop {
        let account = match storage.range::<&[u8; 64]>(&from..)?.next() {
            Some(item) => B256::from_slice(&item?.0.value()[..32]),
            None => break,
        };
        let mut sink = |path: Nibbles, node: BranchNodeCompact| -> Result<(), TrieError> {
            let key: [u8; 65] = concat(&account, &pack_path(&path));
            storage_trie.insert(&key, encode_node(&node).as_slice())?;
            Ok(())
        };
        let mut leaves = StorageLeaves { table: &storage, account };
        let out = walk(&mut NoNodes, &mut leaves, &PrefixSet::all(), Some(&mut sink))?;
        let row = accounts.get(&account.0)?.map(|v| v.value().to_vec());
        let Some(row) = row else {
            return Err(TrieError::Mismatch {
                what: "storage of an account that does not exist",
                location: format!("hashed account {account}"),
                stored: "slots".into(),
                expected: "none".into(),
            });
        };
        let mut hashed = super::db::decode_account(&row, &account)?;
        hashed.storage_root = out.root;
        // The genesis allocation: stamp 0.
        accounts.insert(&account.0, hashed.encode(0).as_slice())?;
        let next = alloy_primitives::U256::from_be_bytes(account.0)
            .checked_add(alloy_primitives::U256::from(1));
        let Some(next) = next else { break };
        from = concat(&B256::from(next.to_be_bytes::<32>()), &[]);
    }

    let mut sink = |path: Nibbles, node: BranchNodeCompact| -> Result<(), TrieError> {
        account_trie.insert(&pack_path(&path), encode_node(&node).as_slice())?;
        Ok(())
    };
    let out =
        walk(&mut NoNodes, &mut AccountLeaves(&accounts), &PrefixSet::all(), Some(&mut sink))?;
    Ok(out.root)
}
