//! [`StateAt`]: the state as of the end of one stored block, as a revm `DatabaseRef`.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256};
use std::sync::Arc;

use redb::ReadableTable;
use revm::bytecode::Bytecode;
use revm::database::DatabaseRef;
use revm::state::AccountInfo;

use super::cache;
use super::codec::account::{
    HashedAccount, StoredAccount, decode_slot, hashed_storage_key, row_stamp,
};
use super::history::keys::row_entity;
use super::snapshot::Snapshot;
use super::{StorageError, StorageResult};

/// Reads accounts, storage, code and block hashes as they were right after block `block`.
///
/// State is keyed by `keccak(address)` and `keccak(slot)`, as the trie keys it (one copy of the
/// state). At the head this reads the current tables directly. At an older block it reads the
/// current row first: one stamped at or before the block (unchanged since) is the answer;
/// otherwise one to three seeks in the history tables, and an index seek when the key changed
/// in a later epoch (see [`super::tables::HASHED_ACCOUNT_HISTORY`]). It borrows
/// nothing: it owns its tables, opened from one read snapshot, so it can move to a worker thread.
/// A clone shares the snapshot (one `Arc`).
#[derive(Clone)]
pub struct StateAt {
    block: u64,
    /// `block` is the head of the snapshot: history can hold nothing newer, skip the seek.
    at_head: bool,
    snap: Arc<Snapshot>,
}

impl std::fmt::Debug for StateAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateAt").field("block", &self.block).finish_non_exhaustive()
    }
}

/// Every account and its non-zero storage, as returned by [`StateAt::dump`].
pub type StateDump = BTreeMap<Address, (StoredAccount, BTreeMap<U256, U256>)>;

impl StateAt {
    pub(super) fn new(snap: Arc<Snapshot>, block: u64, head: u64) -> Self {
        Self { block, at_head: block >= head, snap }
    }

    /// The block whose post-state this reads.
    pub fn block(&self) -> u64 {
        self.block
    }

    /// The account at `address`, `None` if it did not exist.
    pub fn account(&self, address: &Address) -> StorageResult<Option<StoredAccount>> {
        Ok(self.hashed_account(&cache::hashes::hashed_address(address))?.map(|a| a.account))
    }

    /// The account whose hashed address is `hashed`, with its storage root.
    fn hashed_account(&self, hashed: &B256) -> StorageResult<Option<HashedAccount>> {
        let t = &self.snap.trie;
        let current = t.hashed_accounts.get(&hashed.0)?;
        if !self.at_head {
            let stamp =
                current.as_ref().map(|v| row_stamp(v.value(), "hashed_accounts")).transpose()?;
            if let Some((_, v)) = t.account_history().first_after(&hashed.0, self.block, stamp)? {
                return HashedAccount::decode_history(&v);
            }
        }
        current.map(|v| HashedAccount::decode(v.value(), "hashed_accounts")).transpose()
    }

    /// The value of storage `slot` of `address` (zero if unset).
    pub fn storage_value(&self, address: &Address, slot: &U256) -> StorageResult<U256> {
        self.hashed_slot(&cache::hashes::hashed_address(address), &cache::hashes::hashed_slot(slot))
    }

    /// The value of the slot hashed `slot` of the account hashed `account` (zero if unset).
    fn hashed_slot(&self, account: &B256, slot: &B256) -> StorageResult<U256> {
        let t = &self.snap.trie;
        let key = hashed_storage_key(account, slot);
        let current = t.hashed_storage.get(&key)?;
        if !self.at_head {
            let stamp =
                current.as_ref().map(|v| row_stamp(v.value(), "hashed_storage")).transpose()?;
            if let Some((_, v)) = t.storage_history().first_after(&key, self.block, stamp)? {
                return Ok(decode_slot(&v, "hashed_storage_history")?.1);
            }
        }
        match current {
            Some(v) => Ok(decode_slot(v.value(), "hashed_storage")?.1),
            None => Ok(U256::ZERO),
        }
    }

    /// Code with hash `hash` (empty for the empty-code hash).
    pub fn code(&self, hash: &B256) -> StorageResult<Bytecode> {
        if *hash == KECCAK256_EMPTY || hash.is_zero() {
            return Ok(Bytecode::default());
        }
        cache::code::code(hash, || {
            let v = self.snap.bytecodes.get(&hash.0)?.ok_or(StorageError::MissingCode(*hash))?;
            Ok(Bytecode::new_raw(v.value().to_vec().into()))
        })
    }

    /// Every account that exists at this block with its non-zero storage, each read through
    /// the same lookup as [`Self::account`] and [`Self::storage_value`], with addresses from
    /// the account rows and slots from their preimages. Candidates are all keys that exist now or appear in history.
    /// Cost is O(state + history): for checks and tools, not for requests.
    pub fn dump(&self) -> StorageResult<StateDump> {
        let t = &self.snap.trie;
        let mut accounts = BTreeSet::new();
        for item in t.hashed_accounts.iter()? {
            accounts.insert(B256::from(*item?.0.value()));
        }
        t.account_history().for_each_key::<44, &'static [u8]>(|k| {
            accounts.insert(B256::from(row_entity::<32, 44>(k)));
            Ok(())
        })?;
        let mut slots: BTreeMap<B256, BTreeSet<B256>> = BTreeMap::new();
        for item in t.hashed_storage.iter()? {
            let k = *item?.0.value();
            slots.entry(B256::from_slice(&k[..32])).or_default().insert(B256::from_slice(&k[32..]));
        }
        t.storage_history().for_each_key::<76, &'static [u8]>(|k| {
            let key = row_entity::<64, 76>(k);
            slots
                .entry(B256::from_slice(&key[..32]))
                .or_default()
                .insert(B256::from_slice(&key[32..]));
            Ok(())
        })?;
        let mut out = StateDump::new();
        for hashed in accounts {
            let Some(account) = self.hashed_account(&hashed)? else { continue };
            let mut storage = BTreeMap::new();
            for slot in slots.get(&hashed).into_iter().flatten() {
                let v = self.hashed_slot(&hashed, slot)?;
                if !v.is_zero() {
                    storage.insert(U256::from_be_bytes(preimage::<32>(&t.preimages, slot)?), v);
                }
            }
            out.insert(account.address, (account.account, storage));
        }
        Ok(out)
    }
}

/// The key whose keccak is `hash` ([`super::tables::PREIMAGES`]), `N` bytes long.
pub(super) fn preimage<const N: usize>(
    preimages: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    hash: &B256,
) -> StorageResult<[u8; N]> {
    let v = preimages.get(&hash.0)?.ok_or_else(|| StorageError::Corrupt {
        table: "preimages",
        detail: format!("no preimage of {hash}"),
    })?;
    <[u8; N]>::try_from(v.value()).map_err(|_| StorageError::Corrupt {
        table: "preimages",
        detail: format!("preimage of {hash} has {} bytes, not {N}", v.value().len()),
    })
}

impl DatabaseRef for StateAt {
    type Error = StorageError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        Ok(self.account(&address)?.map(|a| AccountInfo {
            balance: a.balance,
            nonce: a.nonce,
            code_hash: if a.code_hash.is_zero() { KECCAK256_EMPTY } else { a.code_hash },
            account_id: None,
            code: None,
        }))
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        self.code(&code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        self.storage_value(&address, &index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        // BLOCKHASH only reaches back 256 blocks from the executing block; revm enforces the
        // window. A block we do not have reads as zero, as in geth.
        if number > self.block {
            return Ok(B256::ZERO);
        }
        Ok(self.snap.canonical_hash(number)?.unwrap_or_default())
    }
}
