//! [`RootsAhead`]: blocks' state roots computed beside the import's writer, on the last committed
//! snapshot with the hashed state and trie nodes of the blocks computed since laid over it.
//!
//! A block's walks need only the state after it and the trie after its parent, not the writer's
//! transaction. So a bulk import walks here, on its own thread, while the writer stores the
//! blocks before; the writer then stores what the walks produced ([`super::store_state_root`])
//! once their root matched the block's header. The overlays mirror what the writer holds: an
//! entry is tagged with the block that wrote it, and a newer snapshot drops what it already has
//! ([`RootsAhead::rebase`]), as the execution thread's state overlay does (`import::ahead`).

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::{B256, U256, keccak256};
use alloy_trie::{EMPTY_ROOT_HASH, TrieAccount};
use revm::database::states::StateChangeset;

use super::TrieError;
use super::codec::{concat, encode_node, pack_path};
use super::db::{AccountLeaves, AccountNodes, HeldNodes, StorageLeaves, StorageNodes};
use super::overlay::{Merged, Overlay};
use super::root::touched;
use super::walk::{NoNodes, PrefixSet, WalkOutput, walk};
use crate::storage::{StoredAccount, TrieTables};

/// What the walks of one block produced, for the writer to store ([`super::store_state_root`]).
#[derive(Debug)]
pub struct RootUpdate {
    block: u64,
    root: B256,
    /// Each changed storage trie's walk, by hashed address.
    pub(super) storage: HashMap<B256, WalkOutput>,
    /// The account trie's walk.
    pub(super) account: WalkOutput,
}

impl RootUpdate {
    /// The block the walks were made for.
    pub fn block(&self) -> u64 {
        self.block
    }

    /// The state root after the block.
    pub fn root(&self) -> B256 {
        self.root
    }
}

/// Trie nodes changed by the blocks computed ahead, each tagged with the block that last set it
/// (`None`: removed).
#[derive(Debug, Default)]
struct TaggedNodes<const K: usize>(BTreeMap<[u8; K], (u64, Option<Vec<u8>>)>);

impl<const K: usize> TaggedNodes<K> {
    fn set(&mut self, key: [u8; K], block: u64, node: Option<Vec<u8>>) {
        self.0.insert(key, (block, node));
    }

    /// Forgets what a snapshot at `head` holds.
    fn rebase(&mut self, head: u64) {
        self.0.retain(|_, (block, _)| *block > head);
    }
}

impl<const K: usize> HeldNodes<K> for TaggedNodes<K> {
    fn get(&self, key: &[u8; K]) -> Option<Option<&[u8]>> {
        self.0.get(key).map(|(_, node)| node.as_deref())
    }

    fn first_present(&self, from: &[u8; K], to: &[u8; K]) -> Option<([u8; K], &[u8])> {
        self.0.range(*from..=*to).find_map(|(k, (_, node))| node.as_deref().map(|n| (*k, n)))
    }
}

/// One account's storage changed by the blocks computed ahead.
#[derive(Debug, Default)]
struct Slots {
    /// The last block that wiped it (self-destruct, re-creation): the snapshot's slots are gone.
    wiped_at: Option<u64>,
    /// Storage leaves by hashed slot (`None`: cleared).
    leaves: Overlay,
    /// The block that last wrote each leaf.
    tags: HashMap<B256, u64>,
}

/// An account as the trie sees it: its fields and its storage root.
type Leaf = (StoredAccount, B256);

/// The hashed state and trie nodes of the blocks computed since the last committed snapshot.
#[derive(Debug, Default)]
pub struct RootsAhead {
    /// Accounts by hashed address, with the block that last changed them (`None`: deleted).
    accounts: HashMap<B256, (u64, Option<Leaf>)>,
    /// The same accounts as trie leaves.
    account_leaves: Overlay,
    storage: HashMap<B256, Slots>,
    account_nodes: TaggedNodes<33>,
    storage_nodes: TaggedNodes<65>,
}

fn rlp<T: alloy_rlp::Encodable>(value: &T) -> Vec<u8> {
    let mut buf = Vec::new();
    value.encode(&mut buf);
    buf
}

impl RootsAhead {
    /// Whether nothing is held: the next block is computed on the snapshot alone.
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty() && self.storage.is_empty() && self.account_nodes.0.is_empty()
    }

    /// Forgets everything written at or before block `head`, which a snapshot at `head` holds.
    pub fn rebase(&mut self, head: u64) {
        let leaves = &mut self.account_leaves;
        self.accounts.retain(|hashed, (block, _)| {
            let keep = *block > head;
            if !keep {
                leaves.remove(hashed);
            }
            keep
        });
        self.storage.retain(|_, s| {
            if s.wiped_at.is_some_and(|b| b <= head) {
                s.wiped_at = None;
            }
            let leaves = &mut s.leaves;
            s.tags.retain(|slot, block| {
                let keep = *block > head;
                if !keep {
                    leaves.remove(slot);
                }
                keep
            });
            s.wiped_at.is_some() || !s.tags.is_empty()
        });
        self.account_nodes.rebase(head);
        self.storage_nodes.rebase(head);
    }

    /// Forgets everything: the next block is computed on a snapshot at its parent.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// The account at `hashed` after the blocks computed so far.
    fn account(&self, tables: &TrieTables, hashed: &B256) -> Result<Option<Leaf>, TrieError> {
        if let Some((_, leaf)) = self.accounts.get(hashed) {
            return Ok(*leaf);
        }
        Ok(match tables.hashed_accounts.get(&hashed.0)? {
            Some(row) => {
                let a = super::db::decode_account(row.value(), hashed)?;
                Some((a.account, a.storage_root))
            }
            None => None,
        })
    }

    fn set_account(&mut self, block: u64, hashed: B256, leaf: Option<Leaf>) {
        let encoded = leaf.map(|(a, storage_root)| {
            rlp(&TrieAccount {
                nonce: a.nonce,
                balance: a.balance,
                storage_root,
                code_hash: a.code_hash,
            })
        });
        self.accounts.insert(hashed, (block, leaf));
        self.account_leaves.insert(hashed, encoded);
    }

    /// Removes every storage-trie node of `account`, stored or computed here, at `block`.
    fn clear_nodes(
        &mut self,
        tables: &TrieTables,
        block: u64,
        account: &B256,
    ) -> Result<(), TrieError> {
        let lo: [u8; 65] = concat(account, &[0u8; 33]);
        let hi: [u8; 65] = concat(account, &[0xff; 33]);
        let mut keys = Vec::new();
        for item in tables.storage_trie.range::<&[u8; 65]>(&lo..=&hi)? {
            keys.push(*item?.0.value());
        }
        keys.extend(self.storage_nodes.0.range(lo..=hi).map(|(k, _)| *k));
        for key in keys {
            self.storage_nodes.set(key, block, None);
        }
        Ok(())
    }

    /// Lays `changes`, block `block`'s, over the state, walks every trie it touched and keeps
    /// the walks' nodes for the blocks after it. `tables` is the committed snapshot this holds
    /// the blocks since: `block`'s parent is the last block computed here, or the snapshot's
    /// head. On an error, the caller [`RootsAhead::clear`]s: what was laid over is partial.
    pub fn compute(
        &mut self,
        tables: &TrieTables,
        block: u64,
        changes: &StateChangeset,
    ) -> Result<RootUpdate, TrieError> {
        // The hashed state after the block, as the writer's `apply_changeset` leaves it: a
        // changed account keeps its storage root (the walks below set the new one), a new one
        // starts empty, a deleted one loses its storage.
        for (address, info) in &changes.accounts {
            let hashed = keccak256(address);
            let leaf = match info {
                Some(info) => {
                    let root = self.account(tables, &hashed)?.map_or(EMPTY_ROOT_HASH, |(_, r)| r);
                    let account = StoredAccount {
                        nonce: info.nonce,
                        balance: info.balance,
                        code_hash: info.code_hash,
                    };
                    Some((account, root))
                }
                None => {
                    let s = self.storage.entry(hashed).or_default();
                    s.wiped_at = Some(block);
                    s.leaves.clear();
                    s.tags.clear();
                    None
                }
            };
            self.set_account(block, hashed, leaf);
        }
        for change in &changes.storage {
            let s = self.storage.entry(keccak256(change.address)).or_default();
            if change.wipe_storage {
                s.wiped_at = Some(block);
                s.leaves.clear();
                s.tags.clear();
            }
            for (slot, value) in &change.storage {
                let key = keccak256(slot.to_be_bytes::<32>());
                s.leaves.insert(key, (*value != U256::ZERO).then(|| rlp(value)));
                s.tags.insert(key, block);
            }
        }

        // The storage tries, as the writer's walk does them (`update_touched`).
        let touched = touched(changes);
        for account in &touched.deleted {
            self.clear_nodes(tables, block, account)?;
        }
        let mut storage = HashMap::with_capacity(touched.storage.len());
        for (account, (wiped, slots)) in &touched.storage {
            let Some((fields, old_root)) = self.account(tables, account)? else {
                // Deleted in this block: its storage is gone with it.
                continue;
            };
            let empty = Slots::default();
            let s = self.storage.get(account).unwrap_or(&empty);
            let base = s
                .wiped_at
                .is_none()
                .then_some(StorageLeaves { table: &tables.hashed_storage, account: *account });
            let mut leaves = Merged { base, over: &s.leaves };
            let out = if *wiped {
                walk(&mut NoNodes, &mut leaves, &PrefixSet::all(), None)?
            } else {
                let mut nodes = StorageNodes {
                    table: &tables.storage_trie,
                    held: &self.storage_nodes,
                    account: *account,
                };
                walk(&mut nodes, &mut leaves, &PrefixSet::new(slots.clone()), None)?
            };
            if *wiped {
                self.clear_nodes(tables, block, account)?;
            }
            for path in &out.removed {
                self.storage_nodes.set(concat(account, &pack_path(path)), block, None);
            }
            for (path, node) in &out.updates {
                let key = concat(account, &pack_path(path));
                self.storage_nodes.set(key, block, Some(encode_node(node)));
            }
            if out.root != old_root {
                self.set_account(block, *account, Some((fields, out.root)));
            }
            storage.insert(*account, out);
        }

        // The account trie.
        let changed = PrefixSet::new(touched.accounts);
        let mut nodes = AccountNodes { table: &tables.account_trie, held: &self.account_nodes };
        let mut leaves = Merged {
            base: Some(AccountLeaves(&tables.hashed_accounts)),
            over: &self.account_leaves,
        };
        let account = walk(&mut nodes, &mut leaves, &changed, None)?;
        for path in &account.removed {
            self.account_nodes.set(pack_path(path), block, None);
        }
        for (path, node) in &account.updates {
            self.account_nodes.set(pack_path(path), block, Some(encode_node(node)));
        }
        Ok(RootUpdate { block, root: account.root, storage, account })
    }
}
