//! Execution ahead of the writer: a file import executes each block on its own thread, on the
//! last committed snapshot plus the changes of the blocks it executed since, while the writer
//! computes the roots of and stores the blocks before it.
//!
//! Nothing executed here is trusted more than an inline execution: the writer still checks the
//! block's gas, receipts root, bloom and state root against the header, so an overlay that read
//! a wrong value would stop the import with a named mismatch, never store a wrong state. A block
//! this thread cannot place on top of what it executed (a gap, a block that is not the next
//! one, a signature that did not recover, an overlay at its bound) goes through unexecuted and
//! the writer executes it inline, as it did before; the thread resumes once a commit brings the
//! snapshot up to it. Pre-Byzantium blocks with transactions need per-transaction roots from the
//! writer's tables: they are executed here only to carry the overlay on, and inline again by the
//! writer.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Condvar, Mutex, PoisonError};

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::{Address, B256, U256};
use revm::bytecode::Bytecode;
use revm::database::DatabaseRef;
use revm::database::states::StateChangeset;
use revm::state::AccountInfo;

use super::block::{Ahead as Outcome, Prepared};
use super::item::{FileItem, Item};
use crate::chain::ChainSpec;
use crate::evm::execute_block;
use crate::storage::{Database, StateAt, StorageError};

/// Blocks executed ahead of the last commit that the overlay may hold. The writer commits every
/// `--import.batch` blocks (512 by default), so this is only reached with a larger batch; the
/// blocks after it go through unexecuted until the next commit, so memory stays bounded.
const MAX_AHEAD: u64 = 1024;

/// What the execution thread hands the writer for each item it read: the index of the file,
/// the block as read (or the file that did not open), and the block's execution outcome when it
/// ran here (`None`: the writer executes it inline), and the bytes it took from the [`Budget`].
pub(super) type ExecutedItem = (usize, FileItem, Option<Outcome>, usize);

/// Changes of the blocks executed since the snapshot's head, newest value per key, each tagged
/// with the block that wrote it so that a newer snapshot can drop what it already holds.
#[derive(Debug, Default)]
struct Overlay {
    accounts: HashMap<Address, (u64, Option<AccountInfo>)>,
    storage: HashMap<Address, Slots>,
    contracts: HashMap<B256, (u64, Bytecode)>,
    hashes: BTreeMap<u64, B256>,
}

/// One account's storage in the overlay.
#[derive(Debug, Default)]
struct Slots {
    /// The block that last wiped the storage (self-destruct, re-creation); slots it does not
    /// list read as zero rather than from the snapshot.
    wiped_at: Option<u64>,
    slots: HashMap<U256, (u64, U256)>,
}

impl Overlay {
    /// Adds the changes of block `number` (hash `hash`), in revm's changeset semantics.
    fn apply(&mut self, number: u64, hash: B256, changes: &StateChangeset) {
        for (address, info) in &changes.accounts {
            self.accounts.insert(*address, (number, info.clone()));
            if info.is_none() {
                let s = self.storage.entry(*address).or_default();
                s.wiped_at = Some(number);
                s.slots.clear();
            }
        }
        for change in &changes.storage {
            let s = self.storage.entry(change.address).or_default();
            if change.wipe_storage {
                s.wiped_at = Some(number);
                s.slots.clear();
            }
            for (slot, value) in &change.storage {
                s.slots.insert(*slot, (number, *value));
            }
        }
        for (code_hash, code) in &changes.contracts {
            self.contracts.insert(*code_hash, (number, code.clone()));
        }
        self.hashes.insert(number, hash);
    }

    /// Forgets everything written at or before block `head`, which a snapshot at `head` holds.
    fn rebase(&mut self, head: u64) {
        self.accounts.retain(|_, (block, _)| *block > head);
        self.storage.retain(|_, s| {
            if s.wiped_at.is_some_and(|b| b <= head) {
                s.wiped_at = None;
            }
            s.slots.retain(|_, (block, _)| *block > head);
            s.wiped_at.is_some() || !s.slots.is_empty()
        });
        self.contracts.retain(|_, (block, _)| *block > head);
        self.hashes = self.hashes.split_off(&(head + 1));
    }
}

/// A committed snapshot with the overlay on top: the state after the last block executed here.
#[derive(Debug)]
struct AheadState<'a> {
    base: &'a StateAt,
    overlay: &'a Overlay,
}

impl DatabaseRef for AheadState<'_> {
    type Error = StorageError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        match self.overlay.accounts.get(&address) {
            Some((_, info)) => Ok(info.clone()),
            None => self.base.basic_ref(address),
        }
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        match self.overlay.contracts.get(&code_hash) {
            Some((_, code)) => Ok(code.clone()),
            None => self.base.code_by_hash_ref(code_hash),
        }
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        if let Some(s) = self.overlay.storage.get(&address) {
            if let Some((_, value)) = s.slots.get(&index) {
                return Ok(*value);
            }
            if s.wiped_at.is_some() {
                return Ok(U256::ZERO);
            }
        }
        self.base.storage_ref(address, index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        match self.overlay.hashes.get(&number) {
            Some(hash) => Ok(*hash),
            None => self.base.block_hash_ref(number),
        }
    }
}

/// The execution thread's state: the snapshot it reads, and what it executed on top.
struct Ahead<'d> {
    db: &'d Database,
    spec: &'d ChainSpec,
    /// The committed snapshot, its head and the head's hash.
    base: Option<(StateAt, u64, B256)>,
    overlay: Overlay,
    /// The last block executed here, above the snapshot's head.
    last: Option<(u64, B256)>,
}

impl Ahead<'_> {
    /// Moves to the newest committed snapshot when the writer has committed since.
    fn refresh(&mut self) -> Result<(), StorageError> {
        let reader = self.db.begin_read()?;
        let Some(head) = reader.head()? else { return Ok(()) };
        if self.base.as_ref().is_some_and(|(_, h, _)| *h == head) {
            return Ok(());
        }
        let hash = reader.canonical_hash(head)?.unwrap_or_default();
        let older = self.base.as_ref().is_some_and(|(_, h, _)| *h > head);
        if older {
            // Never during an import; start over rather than trust the overlay.
            self.overlay = Overlay::default();
        } else {
            self.overlay.rebase(head);
        }
        if older || self.last.is_some_and(|(n, _)| n <= head) {
            self.last = None;
        }
        self.base = Some((reader.state_at(head)?, head, hash));
        Ok(())
    }

    /// Executes `block` if it is the next one on top of what this thread holds.
    fn execute(&mut self, block: &Block<TxEnvelope>, prepared: &Prepared) -> Option<Outcome> {
        if let Err(error) = self.refresh() {
            // The writer reads the same tables and reports the error itself.
            tracing::debug!(target: "import", %error, "execution ahead paused");
            return None;
        }
        let (base, head, head_hash) = self.base.as_ref()?;
        let (tip, tip_hash) = self.last.unwrap_or((*head, *head_hash));
        let number = block.header.number;
        if number != tip + 1 || block.header.parent_hash != tip_hash || tip - head >= MAX_AHEAD {
            return None;
        }
        let senders = prepared.senders()?;
        let started = std::time::Instant::now();
        let state = AheadState { base, overlay: &self.overlay };
        // Intermediate roots are the writer's (it executes those blocks again); here they are
        // not needed to carry the overlay on.
        let outcome = execute_block(self.spec, state, block, senders, |_| {
            Ok::<B256, std::convert::Infallible>(B256::ZERO)
        });
        let outcome = match outcome {
            Ok(outcome) => outcome,
            // Nothing after a failed block can be executed here; the writer reports it.
            Err(error) => return Some(Err(error)),
        };
        self.overlay.apply(number, prepared.hash(), &outcome.changes);
        self.last = Some((number, prepared.hash()));
        tracing::trace!(
            target: "import",
            number,
            ahead_us = started.elapsed().as_micros() as u64,
            "executed ahead"
        );
        if super::block::needs_intermediate_roots(self.spec, block) {
            None
        } else {
            Some(Ok(outcome))
        }
    }
}

/// Bytes of executed blocks that may wait for the writer (see [`Budget`]).
pub(super) const EXECUTE_AHEAD_BYTES: usize = 256 << 20;

/// A bound in bytes on the executed blocks waiting for the writer, beside the channel's bound in
/// blocks: 128 blocks of 30M gas full of large logs would otherwise hold about half a GiB of
/// receipts. The execution thread takes an item's [`weight`] before it sends the item and waits
/// while the budget is spent (one item always passes, however large); the writer gives it back
/// once the item is stored. When the writer ends, [`Budget::close`] wakes the execution thread,
/// which then stops.
#[derive(Debug)]
pub(super) struct Budget {
    limit: usize,
    /// Bytes taken and not yet given back, and whether the writer has ended.
    state: Mutex<(usize, bool)>,
    given: Condvar,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        Self { limit, state: Mutex::new((0, false)), given: Condvar::new() }
    }

    /// Waits until `bytes` fit (or nothing is taken), then takes them. False once the writer
    /// has ended.
    fn take(&self, bytes: usize) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !state.1 && state.0 > 0 && state.0 + bytes > self.limit {
            state = self.given.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.0 += bytes;
        !state.1
    }

    /// Gives back what [`Budget::take`] took for one item.
    pub(super) fn give(&self, bytes: usize) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.saturating_sub(bytes);
        self.given.notify_all();
    }

    /// The writer has ended: no item will be given back.
    pub(super) fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.given.notify_all();
    }
}

/// An estimate of the memory an executed item holds until the writer stores it: its
/// transactions as encoded, and its outcome's receipts (logs, topics and bloom) and state
/// changes. It travels with the item, so the writer gives back exactly what was taken.
fn weight(item: &FileItem, outcome: Option<&Outcome>) -> usize {
    use alloy_eips::eip2718::Encodable2718;
    let block = match item {
        FileItem::Block(next) => match next.as_ref() {
            Ok((_, block, _)) => {
                block.body.transactions.iter().map(|tx| tx.encode_2718_len() + 64).sum::<usize>()
            }
            Err(_) => 0,
        },
        _ => 0,
    };
    let outcome = match outcome {
        Some(Ok(o)) => {
            let receipts: usize = o
                .receipts
                .iter()
                .map(|r| {
                    let logs: usize = r
                        .logs()
                        .iter()
                        .map(|l| l.data.data.len() + 32 * l.topics().len() + 64)
                        .sum();
                    logs + 320
                })
                .sum();
            let storage: usize = o.changes.storage.iter().map(|s| 64 + 64 * s.storage.len()).sum();
            let code: usize = o.changes.contracts.iter().map(|(_, c)| 64 + c.len()).sum();
            receipts + 96 * o.changes.accounts.len() + storage + code
        }
        _ => 0,
    };
    256 + block + outcome
}

/// Executes the blocks `rx` delivers, each on top of the one before, and hands each to `tx`
/// with its outcome, until `rx` ends or the writer stops receiving. Each item takes its
/// [`weight`] from `budget` before it is sent.
pub(super) fn execute_ahead(
    db: &Database,
    spec: &ChainSpec,
    rx: Receiver<Item>,
    tx: &SyncSender<ExecutedItem>,
    budget: &Budget,
) {
    let mut ahead = Ahead { db, spec, base: None, overlay: Overlay::default(), last: None };
    for (index, item) in rx {
        let outcome = match &item {
            FileItem::Block(next) => match next.as_ref() {
                Ok((_, block, prepared)) => ahead.execute(block, prepared),
                Err(_) => None,
            },
            _ => None,
        };
        let weight = weight(&item, outcome.as_ref());
        if !budget.take(weight) || tx.send((index, item, outcome, weight)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use revm::database::states::PlainStorageChangeset;

    /// A genesis whose one contract has code and slot 1 = 5.
    const GENESIS: &str = r#"{"config":{"chainId":7,"homesteadBlock":0,"eip150Block":0,
        "eip155Block":0,"eip158Block":0,"byzantiumBlock":0,"constantinopleBlock":0,
        "petersburgBlock":0,"istanbulBlock":0,"berlinBlock":0,"londonBlock":0,
        "terminalTotalDifficulty":0,"mergeNetsplitBlock":0,"shanghaiTime":0},
        "difficulty":"0x0","gasLimit":"0x1c9c380","baseFeePerGas":"0x7","alloc":{
        "0x0101010101010101010101010101010101010101":{"balance":"0x9","code":"0x6001",
        "storage":{"0x01":"0x05"}}}}"#;

    #[test]
    fn the_budget_holds_the_sender_until_the_writer_gives_back_or_ends() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Duration;
        let budget = Budget::new(100);
        let sent = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // One item always passes, however large; the next waits for it to be given back.
                for bytes in [150, 60, 60, 30] {
                    if !budget.take(bytes) {
                        return;
                    }
                    sent.fetch_add(1, Ordering::SeqCst);
                }
            });
            let settled = |n: usize| {
                for _ in 0..200 {
                    if sent.load(Ordering::SeqCst) >= n {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(50));
                sent.load(Ordering::SeqCst)
            };
            assert_eq!(settled(1), 1, "150 bytes pass alone, 60 more would exceed 100");
            budget.give(150);
            assert_eq!(settled(2), 2, "60 pass; 60 more would make 120");
            budget.give(60);
            assert_eq!(settled(4), 4, "60 and then 30 fit in 100");
        });
        // A writer that ended wakes a waiting sender, which then stops.
        let budget = Budget::new(10);
        assert!(budget.take(10));
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| budget.take(5));
            std::thread::sleep(Duration::from_millis(50));
            budget.close();
            assert!(!waiting.join().unwrap());
        });
    }

    #[test]
    fn the_overlay_shadows_the_snapshot_for_every_kind_of_read() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        crate::import::init_genesis(&db, GENESIS).unwrap();
        let base = db.begin_read().unwrap().state_at(0).unwrap();
        let a = Address::repeat_byte(1);
        let genesis_hash = base.block_hash_ref(0).unwrap();
        let mut o = Overlay::default();
        let read = |o: &Overlay| {
            let s = AheadState { base: &base, overlay: o };
            let slot = |i: u64| s.storage_ref(a, U256::from(i)).unwrap();
            (
                s.basic_ref(a).unwrap().map(|i| i.nonce),
                slot(1),
                slot(2),
                s.block_hash_ref(1).unwrap(),
            )
        };
        assert_eq!(read(&o), (Some(0), U256::from(5), U256::ZERO, B256::ZERO));
        assert!(!genesis_hash.is_zero());
        // Block 1 clears slot 1 (a zero must shadow the snapshot's 5) and sets slot 2.
        o.apply(1, B256::repeat_byte(0xb1), &change(a, Some(1), false, &[(1, 0), (2, 7)]));
        assert_eq!(read(&o), (Some(1), U256::ZERO, U256::from(7), B256::repeat_byte(0xb1)));
        // Block 2 destroys it: no account, and every slot reads zero.
        o.apply(2, B256::repeat_byte(0xb2), &change(a, None, true, &[]));
        assert_eq!(read(&o), (None, U256::ZERO, U256::ZERO, B256::repeat_byte(0xb1)));
        // New code is served from the overlay; the genesis code from the snapshot.
        let code = Bytecode::new_raw(vec![0x60, 0x02].into());
        o.apply(
            3,
            B256::repeat_byte(0xb3),
            &StateChangeset {
                accounts: vec![],
                storage: vec![],
                contracts: vec![(code.hash_slow(), code.clone())],
            },
        );
        let s = AheadState { base: &base, overlay: &o };
        assert_eq!(s.code_by_hash_ref(code.hash_slow()).unwrap(), code);
        let genesis_code = base.basic_ref(a).unwrap().unwrap().code_hash;
        assert_eq!(
            s.code_by_hash_ref(genesis_code).unwrap().original_bytes().as_ref(),
            &[0x60, 0x01]
        );
        assert_eq!(s.block_hash_ref(0).unwrap(), genesis_hash);
    }

    /// One block's changes to one account: its nonce (`None`: destroyed), whether its
    /// storage was wiped, and the slots written.
    fn change(a: Address, nonce: Option<u64>, wipe: bool, slots: &[(u64, u64)]) -> StateChangeset {
        StateChangeset {
            accounts: vec![(a, nonce.map(|nonce| AccountInfo { nonce, ..Default::default() }))],
            storage: vec![PlainStorageChangeset {
                address: a,
                wipe_storage: wipe,
                storage: slots.iter().map(|(k, v)| (U256::from(*k), U256::from(*v))).collect(),
            }],
            contracts: vec![],
        }
    }

    fn slot(o: &Overlay, a: Address, s: u64) -> Option<U256> {
        let st = o.storage.get(&a)?;
        st.slots.get(&U256::from(s)).map(|v| v.1).or_else(|| st.wiped_at.map(|_| U256::ZERO))
    }

    #[test]
    fn a_rebase_keeps_only_what_the_snapshot_lacks() {
        let a = Address::repeat_byte(1);
        let mut o = Overlay::default();
        // Block 2 destroys `a`, block 3 re-creates it with one slot, block 4 sets another.
        o.apply(2, B256::repeat_byte(2), &change(a, None, true, &[]));
        assert_eq!(slot(&o, a, 9), Some(U256::ZERO), "a wiped account reads zero");
        o.apply(3, B256::repeat_byte(3), &change(a, Some(1), true, &[(1, 10)]));
        o.apply(4, B256::repeat_byte(4), &change(a, Some(2), false, &[(2, 20)]));
        assert_eq!(slot(&o, a, 1), Some(U256::from(10)));
        assert_eq!(slot(&o, a, 9), Some(U256::ZERO), "still wiped since block 3");
        // A snapshot at block 3 holds the re-creation: only block 4's writes stay, and a slot
        // block 4 did not write falls through to the snapshot.
        o.rebase(3);
        assert_eq!(
            o.accounts.get(&a).map(|(b, i)| (*b, i.as_ref().map(|i| i.nonce))),
            Some((4, Some(2)))
        );
        assert_eq!(slot(&o, a, 2), Some(U256::from(20)));
        assert_eq!(slot(&o, a, 1), None);
        assert_eq!(o.hashes.keys().copied().collect::<Vec<_>>(), vec![4]);
        o.rebase(4);
        assert!(o.accounts.is_empty() && o.storage.is_empty() && o.hashes.is_empty());
    }
}
