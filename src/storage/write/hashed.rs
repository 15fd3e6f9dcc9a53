//! Writing the hashed state: a block's account and slot changes (or a genesis allocation)
//! applied to the current tables, each changed row's old value saved in the history tables.

use alloy_primitives::{Address, B256, U256, keccak256};
use alloy_trie::EMPTY_ROOT_HASH;
use redb::{ReadableTable, Table, WriteTransaction};
use revm::database::states::StateChangeset;

use super::{Deferred, PreimageRow, Writer};
use crate::storage::codec::account::{
    HashedAccount, SlotRow, StoredAccount, decode_slot, hashed_storage_key, row_stamp,
};
use crate::storage::history::index::replaced_bit;
use crate::storage::history::keys::{
    Epochs, hashed_account_history_key, hashed_storage_history_key,
};
use crate::storage::tables;
use crate::storage::{StateDump, StorageResult};

impl Writer {
    /// Applies revm's changeset for `block` to the current state, first recording in the
    /// history tables the value each changed account and slot had before `block`.
    ///
    /// May be called several times for one block with a growing cumulative changeset (the
    /// importer does this for pre-Byzantium intermediate roots): the history entry of the first
    /// call wins, and re-applying cumulative values is idempotent.
    pub fn apply_changeset(&self, block: u64, changes: &StateChangeset) -> StorageResult<()> {
        self.apply(block, true, changes)
    }

    /// Applies a genesis allocation (or a part of one) as block 0, without history: no block
    /// reads the state before genesis. Accounts must be new and carry no wipes.
    pub fn apply_genesis(&self, changes: &StateChangeset) -> StorageResult<()> {
        self.apply(0, false, changes)
    }

    pub(in crate::storage) fn apply(
        &self,
        block: u64,
        history: bool,
        changes: &StateChangeset,
    ) -> StorageResult<()> {
        if !changes.contracts.is_empty() {
            let mut bytecodes = self.txn.open_table(tables::BYTECODES)?;
            for (hash, code) in &changes.contracts {
                if bytecodes.get(&hash.0)?.is_none() {
                    bytecodes.insert(&hash.0, code.original_byte_slice())?;
                }
            }
        }
        let epochs = self.epochs()?;
        let mut hashed = HashedWrites::open(&self.txn, epochs, history, self.deferred());
        // Writes go in key order, each table's separately: neighbouring keys share B-tree pages,
        // so a large batch (a genesis) touches each page once instead of at random.
        let mut accounts: Vec<_> = changes
            .accounts
            .iter()
            .map(|(address, info)| {
                let acct = info.as_ref().map(|info| StoredAccount {
                    nonce: info.nonce,
                    balance: info.balance,
                    code_hash: info.code_hash,
                });
                (keccak256(address), address, acct)
            })
            .collect();
        accounts.sort_unstable_by_key(|(h, _, _)| *h);
        for (hashed_address, address, acct) in accounts {
            hashed.account(block, &hashed_address, address, acct)?;
        }
        let mut slots = Vec::new();
        for change in &changes.storage {
            let hashed_address = keccak256(change.address);
            if change.wipe_storage {
                hashed.wipe(block, &hashed_address)?;
            }
            for (slot, value) in &change.storage {
                let slot = slot.to_be_bytes::<32>();
                slots.push((hashed_address, keccak256(slot), slot, *value));
            }
        }
        // After every wipe above, so a re-created account's new slots survive its wipe.
        slots.sort_unstable_by_key(|(a, s, _, _)| (*a, *s));
        for (hashed_address, hashed_slot, slot, value) in slots {
            hashed.slot(block, &hashed_address, &hashed_slot, &slot, &value)?;
        }
        let (accounts, slots) = hashed.finish();
        use crate::storage::history::changes::ChangeKind;
        self.defer(|d| {
            d.changes.add(block, ChangeKind::HashedAccounts, &accounts);
            d.changes.add(block, ChangeKind::HashedStorage, &slots);
        })
    }

    /// The whole current state (including this transaction's uncommitted changes), keyed by
    /// address (from each account row) and slot (through [`tables::PREIMAGES`]).
    pub fn current_state(&self) -> StorageResult<StateDump> {
        self.flush_deferred()?;
        let accounts = self.txn.open_table(tables::HASHED_ACCOUNTS)?;
        let storage = self.txn.open_table(tables::HASHED_STORAGE)?;
        let preimages = self.txn.open_table(tables::PREIMAGES)?;
        let mut by_hash = std::collections::BTreeMap::new();
        let mut out = StateDump::new();
        for item in accounts.iter()? {
            let (k, v) = item?;
            let row = HashedAccount::decode(v.value(), "hashed_accounts")?;
            by_hash.insert(B256::from(*k.value()), row.address);
            out.insert(row.address, (row.account, Default::default()));
        }
        for item in storage.iter()? {
            let (k, v) = item?;
            let k = *k.value();
            let Some(address) = by_hash.get(&B256::from_slice(&k[..32])) else { continue };
            let slot =
                crate::storage::state::preimage::<32>(&preimages, &B256::from_slice(&k[32..]))?;
            if let Some(entry) = out.get_mut(address) {
                let (_, value) = decode_slot(v.value(), "hashed_storage")?;
                entry.1.insert(U256::from_be_bytes(slot), value);
            }
        }
        Ok(out)
    }
}

/// The hashed-state tables of one [`Writer::apply_changeset`] call, with their history (read
/// only where a block's rows were partly written already: [`crate::storage::history::held::HeldRows::record`]).
/// Each is opened at its first use ([`opened`]): a block that changes only accounts (most
/// blocks before contracts, each paying its miner) opens one table, where opening and closing
/// all five took 5 % of the writer's time on mainnet's first 16,384 blocks.
struct HashedWrites<'t> {
    txn: &'t WriteTransaction,
    preimages: Option<Table<'t, &'static [u8; 32], &'static [u8]>>,
    accounts: Option<Table<'t, &'static [u8; 32], &'static [u8]>>,
    account_history: Option<Table<'t, &'static [u8; 44], &'static [u8]>>,
    storage: Option<Table<'t, &'static [u8; 64], &'static [u8]>>,
    storage_history: Option<Table<'t, &'static [u8; 76], &'static [u8]>>,
    history: bool,
    /// The writer's deferred rows, which hold the history rows (`storage::history::held`).
    deferred: std::sync::MutexGuard<'t, Deferred>,
    epochs: crate::storage::history::keys::Epochs,
    /// Keys of the history rows added (for the change index).
    changed_accounts: Vec<u8>,
    changed_slots: Vec<u8>,
    /// Preimage rows and index bits to add (see [`Deferred`]).
    new_preimages: Vec<PreimageRow>,
    account_bits: Vec<([u8; 36], u64)>,
    slot_bits: Vec<([u8; 68], u64)>,
}

impl<'t> HashedWrites<'t> {
    fn open(
        txn: &'t WriteTransaction,
        epochs: Epochs,
        history: bool,
        deferred: std::sync::MutexGuard<'t, Deferred>,
    ) -> Self {
        Self {
            txn,
            preimages: None,
            accounts: None,
            account_history: None,
            storage: None,
            storage_history: None,
            history,
            deferred,
            epochs,
            changed_accounts: Vec::new(),
            changed_slots: Vec::new(),
            new_preimages: Vec::new(),
            account_bits: Vec::new(),
            slot_bits: Vec::new(),
        }
    }

    /// Closes the tables; returns the keys of the history rows added, and moves the rows to
    /// write at the commit into the writer's deferred ones.
    fn finish(mut self) -> (Vec<u8>, Vec<u8>) {
        let deferred = &mut *self.deferred;
        deferred.preimages.extend(self.new_preimages);
        deferred.account_bits.extend(self.account_bits);
        deferred.slot_bits.extend(self.slot_bits);
        (self.changed_accounts, self.changed_slots)
    }

    /// Sets (or deletes) an account, keeping its cached storage root; a new account starts
    /// with the empty root (the trie fills in the real one when its storage changes). The row
    /// carries the address, so accounts need no preimage rows, and its stamp, `block` (0 for
    /// the genesis allocation).
    fn account(
        &mut self,
        block: u64,
        hashed_address: &B256,
        address: &Address,
        account: Option<StoredAccount>,
    ) -> StorageResult<()> {
        // The row keeps its cached storage root, so the old row is read first; the write of an
        // account that stays is then an in-place update of a page the read just loaded.
        let old = match account {
            Some(account) => {
                let accounts = opened(self.txn, &mut self.accounts, tables::HASHED_ACCOUNTS)?;
                let old = accounts.get(&hashed_address.0)?.map(|v| v.value().to_vec());
                let storage_root = match &old {
                    Some(o) => HashedAccount::decode(o, "hashed_accounts")?.storage_root,
                    None => EMPTY_ROOT_HASH,
                };
                let stamp = block;
                let row = HashedAccount { address: *address, account, storage_root }.encode(stamp);
                accounts.insert(&hashed_address.0, row.as_slice())?;
                old
            }
            None => opened(self.txn, &mut self.accounts, tables::HASHED_ACCOUNTS)?
                .remove(&hashed_address.0)?
                .map(|v| v.value().to_vec()),
        };
        if !self.history {
            return Ok(());
        }
        if let Some(old) = &old {
            let stamp = row_stamp(old, "hashed_accounts")?;
            self.account_bits.extend(replaced_bit(self.epochs, &hashed_address.0, stamp, block));
        }
        let hkey = hashed_account_history_key(self.epochs, hashed_address, block);
        let old_bytes: &[u8] = old.as_deref().unwrap_or(&[]);
        let (txn, table) = (self.txn, &mut self.account_history);
        let written = |key: &[u8; 44]| {
            Ok(opened(txn, table, tables::HASHED_ACCOUNT_HISTORY)?.get(key)?.is_some())
        };
        if self.deferred.account_history.record_with(&hkey, old_bytes, written)? {
            self.changed_accounts.extend_from_slice(hashed_address.as_slice());
        }
        Ok(())
    }

    /// Deletes every slot of an account, recording each in history.
    fn wipe(&mut self, block: u64, hashed_address: &B256) -> StorageResult<()> {
        let from = hashed_storage_key(hashed_address, &B256::ZERO);
        let to = hashed_storage_key(hashed_address, &B256::repeat_byte(0xff));
        let storage = opened(self.txn, &mut self.storage, tables::HASHED_STORAGE)?;
        let mut existing = Vec::new();
        for item in storage.range::<&[u8; 64]>(&from..=&to)? {
            let (k, v) = item?;
            existing.push((*k.value(), v.value().to_vec()));
        }
        for (k, _) in &existing {
            storage.remove(k)?;
        }
        for (k, v) in existing {
            if self.history {
                let slot = B256::from_slice(&k[32..]);
                self.slot_history(block, &k, &slot, hashed_address, Some(&v))?;
            }
        }
        Ok(())
    }

    /// Sets (or clears) a slot; a slot that becomes set gets its preimage unless it has one.
    fn slot(
        &mut self,
        block: u64,
        hashed_address: &B256,
        hashed_slot: &B256,
        slot: &[u8; 32],
        value: &U256,
    ) -> StorageResult<()> {
        let key = hashed_storage_key(hashed_address, hashed_slot);
        let storage = opened(self.txn, &mut self.storage, tables::HASHED_STORAGE)?;
        let old = if value.is_zero() {
            storage.remove(&key)?
        } else {
            let stamp = block;
            storage.insert(&key, SlotRow::new(stamp, value).as_slice())?
        }
        .map(|v| v.value().to_vec());
        // Slot preimages are shared by every account, so most already exist: a read first
        // keeps their pages clean.
        if old.is_none()
            && !value.is_zero()
            && opened(self.txn, &mut self.preimages, tables::PREIMAGES)?
                .get(&hashed_slot.0)?
                .is_none()
        {
            self.new_preimages.push((hashed_slot.0, *slot));
        }
        if self.history {
            self.slot_history(block, &key, hashed_slot, hashed_address, old.as_deref())?;
        }
        Ok(())
    }

    /// Records the row a slot had before `block` (`None`: unset) unless the block already did,
    /// and indexes the epoch of the replaced row's stamp.
    fn slot_history(
        &mut self,
        block: u64,
        key: &[u8; 64],
        hashed_slot: &B256,
        hashed_address: &B256,
        old: Option<&[u8]>,
    ) -> StorageResult<()> {
        if let Some(old) = old {
            let stamp = row_stamp(old, "hashed_storage")?;
            self.slot_bits.extend(replaced_bit(self.epochs, key, stamp, block));
        }
        let hkey = hashed_storage_history_key(self.epochs, hashed_address, hashed_slot, block);
        let (txn, table) = (self.txn, &mut self.storage_history);
        let written = |key: &[u8; 76]| {
            Ok(opened(txn, table, tables::HASHED_STORAGE_HISTORY)?.get(key)?.is_some())
        };
        if self.deferred.slot_history.record_with(&hkey, old.unwrap_or(&[]), written)? {
            self.changed_slots.extend_from_slice(key);
        }
        Ok(())
    }
}

/// The table `def` held in `slot`, opened into it at its first use.
fn opened<'a, 't, K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &'t WriteTransaction,
    slot: &'a mut Option<Table<'t, K, V>>,
    def: redb::TableDefinition<'static, K, V>,
) -> StorageResult<&'a mut Table<'t, K, V>> {
    let table = match slot.take() {
        Some(table) => table,
        None => txn.open_table(def)?,
    };
    Ok(slot.insert(table))
}
