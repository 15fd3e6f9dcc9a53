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
        crate::storage::history::changes::prune_changes(&self.txn, number)?;
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
    /// history rows held for them were written by their close, long before.
    pub(in crate::storage) fn freeze_due(&self) -> StorageResult<()> {
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
        crate::storage::history::changes::prune_changes(&self.txn, head)?;
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

    /// [`Writer::freeze_due`] after a head move or a staged range, unless the transaction
    /// leaves it to its commit ([`Writer::freeze_at_commit`]).
    pub(in crate::storage) fn freeze_due_now(&self) -> StorageResult<()> {
        match self.freeze_at_commit {
            true => Ok(()),
            false => self.freeze_due(),
        }
    }
}
