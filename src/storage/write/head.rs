//! The head and its upkeep: moving the head forward prunes the change lists that leave the
//! unwind window, closes the epochs it leaves behind (indexing and packing them) and freezes the
//! epochs that can no longer be unwound into segment files.

use redb::ReadableTable;

use super::Writer;
use crate::storage::StorageResult;
use crate::storage::codec::u64_value;
use crate::storage::history::held::ClosingRows;
use crate::storage::tables::{self, meta};

impl Writer {
    /// Head block number as seen inside this transaction.
    pub fn head(&self) -> StorageResult<Option<u64>> {
        let t = self.txn.open_table(tables::META)?;
        t.get(meta::HEAD)?.map(|v| u64_value("meta", v.value())).transpose()
    }

    /// The head, which must not be above `to`: only [`Writer::unwind_head`] moves it back (it
    /// removes the blocks' rows, which the epoch index must follow).
    fn head_not_above(&self, to: u64) -> StorageResult<Option<u64>> {
        match self.head()? {
            Some(head) if head > to => Err(crate::storage::StorageError::HeadBack { head, to }),
            old => Ok(old),
        }
    }

    /// Moves the head forward to `number` (refused below the current head: only
    /// [`Writer::unwind_head`] moves it back); safe and finalized stay, lowered to `number` if
    /// above. Then the upkeep a head move brings: the change lists that leave the unwind window
    /// are pruned, the epochs the head leaves behind are closed (indexed and packed,
    /// `storage::history::index`) and those that can no longer be unwound are frozen into
    /// segment files.
    pub fn advance_head(&self, number: u64) -> StorageResult<()> {
        let old = self.head_not_above(number)?;
        {
            let mut t = self.txn.open_table(tables::META)?;
            let get = |key: &str| -> StorageResult<u64> {
                Ok(t.get(key)?.map(|v| u64_value("meta", v.value())).transpose()?.unwrap_or(0))
            };
            let (safe, finalized) =
                (get(meta::SAFE)?.min(number), get(meta::FINALIZED)?.min(number));
            t.insert(meta::HEAD, number.to_be_bytes().as_slice())?;
            t.insert(meta::SAFE, safe.to_be_bytes().as_slice())?;
            t.insert(meta::FINALIZED, finalized.to_be_bytes().as_slice())?;
        }
        self.prune_changes_now(number)?;
        let closing = self.flush_before_close(old, number)?;
        crate::storage::history::index::follow_head(
            &self.txn,
            self.epochs()?,
            old,
            number,
            &closing,
        )?;
        self.freeze_due_now()
    }

    /// Adopts the segment merges that finished off the writer's thread, waits for the running
    /// ones and runs every merge due (`storage::segments::merge::settle`), so that this
    /// transaction leaves the segments merged.
    pub fn settle_segments(&self) -> StorageResult<()> {
        crate::storage::segments::merge::settle(
            &self.txn,
            &self.segment_files.store,
            &self.segment_files.pending,
        )
    }

    /// Freezes the closed epochs that left the unwind window (`storage::segments`). The
    /// history rows held for them were written by their close, long before; the held block
    /// rows are written first (a freeze reads the blocks' tables).
    pub(in crate::storage) fn freeze_due(&self) -> StorageResult<()> {
        self.write_held_blocks()?;
        crate::storage::segments::freeze::freeze_due(
            &self.txn,
            &self.segment_files.store,
            &self.segment_files.pending,
        )
    }

    /// Before the head's move from `old` to `new` closes an epoch: writes the current rows of
    /// the held trie nodes, and takes out the held history rows of the epochs below the new
    /// head's (trie nodes, accounts, slots) for the close to write, each closing epoch's at
    /// once (`storage::history::held`); the rows of the new head's epoch stay held. The other
    /// deferred rows can wait for the commit: the close reads none of their tables but the
    /// epoch indexes, whose bits it only sets, as the held bits do ([`crate::storage::history::index::set_bits`]
    /// ORs them in). Before a move that reopens an epoch (an unwind, which clears bits)
    /// everything held is written.
    fn flush_before_close(&self, old: Option<u64>, new: u64) -> StorageResult<ClosingRows> {
        let epochs = self.epochs()?;
        let (from, to) = (old.map_or(0, |o| epochs.of(o)), epochs.of(new));
        match to.cmp(&from) {
            std::cmp::Ordering::Greater => {
                let (account_nodes, storage_nodes) =
                    self.trie_nodes().take_closing(&self.txn, to)?;
                let mut deferred = self.deferred();
                Ok(ClosingRows {
                    accounts: deferred.account_history.take_below(to),
                    slots: deferred.slot_history.take_below(to),
                    account_nodes,
                    storage_nodes,
                })
            }
            std::cmp::Ordering::Less => self.flush_deferred().map(|()| ClosingRows::default()),
            std::cmp::Ordering::Equal => Ok(ClosingRows::default()),
        }
    }

    /// [`Writer::advance_head`] to `head` with the safe and finalized markers set to `safe` and
    /// `finalized`, with the same upkeep.
    pub fn advance_head_with_markers(
        &self,
        head: u64,
        safe: u64,
        finalized: u64,
    ) -> StorageResult<()> {
        let old = self.head_not_above(head)?;
        {
            let mut t = self.txn.open_table(tables::META)?;
            t.insert(meta::HEAD, head.to_be_bytes().as_slice())?;
            t.insert(meta::SAFE, safe.to_be_bytes().as_slice())?;
            t.insert(meta::FINALIZED, finalized.to_be_bytes().as_slice())?;
        }
        self.prune_changes_now(head)?;
        let closing = self.flush_before_close(old, head)?;
        crate::storage::history::index::follow_head(
            &self.txn,
            self.epochs()?,
            old,
            head,
            &closing,
        )?;
        self.freeze_due_now()
    }

    /// Prunes the change lists that left the unwind window below head `head`, unless the
    /// transaction leaves its freezes to its commit ([`Writer::freeze_at_commit`]): then the
    /// pruning waits for the commit too (or an unwind), which prunes a whole group's blocks in
    /// one pass over the table's start where each block took one (on mainnet's first 16,384
    /// blocks 5.7 % of the writer's time, with the table opens). Until then only the freeze and
    /// an unwind read the window's floor, and both prune first.
    fn prune_changes_now(&self, head: u64) -> StorageResult<()> {
        match self.freeze_at_commit {
            true => {
                *self.prune_to.lock().unwrap_or_else(|e| e.into_inner()) = Some(head);
                Ok(())
            }
            false => {
                // The held lists first, so that none of a pruned block is written after.
                self.write_held_changes()?;
                crate::storage::history::changes::prune_changes(&self.txn, head)
            }
        }
    }

    /// The pruning [`Writer::prune_changes_now`] left to the commit, done now.
    pub(in crate::storage) fn prune_held_changes(&self) -> StorageResult<()> {
        let held = self.prune_to.lock().unwrap_or_else(|e| e.into_inner()).take();
        match held {
            Some(head) => crate::storage::history::changes::prune_changes(&self.txn, head),
            None => Ok(()),
        }
    }

    /// [`Writer::freeze_due`] after a head move or a staged range, unless the transaction
    /// leaves it to its commit ([`Writer::freeze_at_commit`]).
    pub(in crate::storage) fn freeze_due_now(&self) -> StorageResult<()> {
        match self.freeze_at_commit {
            true => Ok(()),
            false => self.freeze_due(),
        }
    }
}
