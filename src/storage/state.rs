//! [`StateAt`]: the state as of the end of one stored block, as a revm `DatabaseRef`.

use std::collections::BTreeMap;

use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256};
use std::sync::Arc;

use redb::ReadableTable;
use revm::bytecode::Bytecode;
use revm::database::DatabaseRef;
use revm::state::AccountInfo;

use super::codec::{StoredAccount, account_history_key, storage_history_key, storage_key};
use super::snapshot::Snapshot;
use super::{StorageError, StorageResult};

/// Reads accounts, storage, code and block hashes as they were right after block `block`.
///
/// At the head this reads the current tables directly; at an older block every account or slot
/// costs one ordered seek in the history tables (see [`super::tables::ACCOUNT_HISTORY`]). It borrows
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
        if !self.at_head {
            let from = account_history_key(address, self.block + 1);
            let to = account_history_key(address, u64::MAX);
            if let Some(item) = self.snap.account_history.range::<&[u8; 28]>(&from..=&to)?.next() {
                let (_, v) = item?;
                return StoredAccount::decode_history(v.value());
            }
        }
        Ok(self.snap.accounts.get(&address.0.0)?.map(|v| StoredAccount::decode(v.value())))
    }

    /// The value of storage `slot` of `address` (zero if unset).
    pub fn storage_value(&self, address: &Address, slot: &U256) -> StorageResult<U256> {
        if !self.at_head {
            let from = storage_history_key(address, slot, self.block + 1);
            let to = storage_history_key(address, slot, u64::MAX);
            if let Some(item) = self.snap.storage_history.range::<&[u8; 60]>(&from..=&to)?.next() {
                let (_, v) = item?;
                return Ok(U256::from_be_bytes(*v.value()));
            }
        }
        Ok(self
            .snap
            .storage
            .get(&storage_key(address, slot))?
            .map(|v| U256::from_be_bytes(*v.value()))
            .unwrap_or_default())
    }

    /// Code with hash `hash` (empty for the empty-code hash).
    pub fn code(&self, hash: &B256) -> StorageResult<Bytecode> {
        if *hash == KECCAK256_EMPTY || hash.is_zero() {
            return Ok(Bytecode::default());
        }
        let v = self.snap.bytecodes.get(&hash.0)?.ok_or(StorageError::MissingCode(*hash))?;
        Ok(Bytecode::new_raw(v.value().to_vec().into()))
    }

    /// Every account that exists at this block with its non-zero storage, each read through
    /// the same lookup as [`Self::account`] and [`Self::storage_value`]. Candidates are all
    /// addresses and slots that exist now or appear in history. Cost is O(state + history):
    /// for checks and tools, not for requests.
    pub fn dump(&self) -> StorageResult<StateDump> {
        let mut addresses = std::collections::BTreeSet::new();
        for item in self.snap.accounts.iter()? {
            addresses.insert(Address::from(*item?.0.value()));
        }
        for item in self.snap.account_history.iter()? {
            addresses.insert(Address::from_slice(&item?.0.value()[..20]));
        }
        let mut slots: BTreeMap<Address, std::collections::BTreeSet<U256>> = BTreeMap::new();
        for item in self.snap.storage.iter()? {
            let k = *item?.0.value();
            slots
                .entry(Address::from_slice(&k[..20]))
                .or_default()
                .insert(U256::from_be_slice(&k[20..]));
        }
        for item in self.snap.storage_history.iter()? {
            let k = *item?.0.value();
            slots
                .entry(Address::from_slice(&k[..20]))
                .or_default()
                .insert(U256::from_be_slice(&k[20..52]));
        }
        let mut out = StateDump::new();
        for address in addresses {
            let Some(account) = self.account(&address)? else { continue };
            let mut storage = BTreeMap::new();
            for slot in slots.get(&address).into_iter().flatten() {
                let v = self.storage_value(&address, slot)?;
                if !v.is_zero() {
                    storage.insert(*slot, v);
                }
            }
            out.insert(address, (account, storage));
        }
        Ok(out)
    }
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
        Ok(self.snap.canonical.get(number)?.map(|v| B256::from(*v.value())).unwrap_or_default())
    }
}

/// The state at the head of an open write transaction, uncommitted changes included, as a revm
/// `DatabaseRef`: what a block executes on when it follows blocks unwound or imported in the
/// same transaction (a reorg). Tables are opened per read, so it never holds one open while the
/// writer writes.
pub struct PendingState<'a> {
    txn: &'a redb::WriteTransaction,
    head: u64,
}

impl std::fmt::Debug for PendingState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingState").field("head", &self.head).finish_non_exhaustive()
    }
}

impl<'a> PendingState<'a> {
    pub(super) fn new(txn: &'a redb::WriteTransaction, head: u64) -> Self {
        Self { txn, head }
    }
}

impl DatabaseRef for PendingState<'_> {
    type Error = StorageError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        let t = self.txn.open_table(super::tables::ACCOUNTS)?;
        Ok(t.get(&address.0.0)?.map(|v| StoredAccount::decode(v.value())).map(|a| AccountInfo {
            balance: a.balance,
            nonce: a.nonce,
            code_hash: if a.code_hash.is_zero() { KECCAK256_EMPTY } else { a.code_hash },
            account_id: None,
            code: None,
        }))
    }

    fn code_by_hash_ref(&self, hash: B256) -> Result<Bytecode, Self::Error> {
        if hash == KECCAK256_EMPTY || hash.is_zero() {
            return Ok(Bytecode::default());
        }
        let t = self.txn.open_table(super::tables::BYTECODES)?;
        let v = t.get(&hash.0)?.ok_or(StorageError::MissingCode(hash))?;
        Ok(Bytecode::new_raw(v.value().to_vec().into()))
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        let t = self.txn.open_table(super::tables::STORAGE)?;
        Ok(t.get(&storage_key(&address, &index))?
            .map(|v| U256::from_be_bytes(*v.value()))
            .unwrap_or_default())
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        if number > self.head {
            return Ok(B256::ZERO);
        }
        let t = self.txn.open_table(super::tables::CANONICAL)?;
        Ok(t.get(number)?.map(|v| B256::from(*v.value())).unwrap_or_default())
    }
}
