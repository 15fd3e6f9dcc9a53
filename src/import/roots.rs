//! The roots thread of a file import: each executed block's state root computed beside the
//! writer (`trie::RootsAhead`), on the last committed snapshot plus the blocks computed since,
//! while the writer stores the blocks before it.
//!
//! It sits between the execution thread and the writer, and runs only where every block's root
//! is checked and stored (trie history kept for every block, `--state-root block`); with one
//! root per commit group the writer's single walk at the group's end costs less. The writer
//! uses a block's walks only when their root is the header's: a root commits to every leaf and
//! node the walks read, so a match means they were made on the writer's own view. Otherwise it
//! walks the block itself, as before, and tells this thread to distrust what it holds
//! ([`Computed::if_root_is`]), which then starts again from a snapshot past that block. A block
//! this thread cannot place on what it computed (not executed ahead, a gap, another chain)
//! passes with no root; it resumes once a commit brings the snapshot up to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use alloy_primitives::B256;

use super::FileItem;
use super::ahead::ExecutedItem;
use crate::storage::{Database, Reader, StorageError};
use crate::trie::{RootUpdate, RootsAhead};

/// Blocks computed here past the last commit, at most: the writer commits every
/// `--import.batch` blocks (512 by default), so this is only reached with a larger batch.
/// Memory stays bounded: later blocks pass without a root until the next commit.
const MAX_AHEAD: u64 = 1024;

/// What the writer tells the roots thread: the walks it refused.
#[derive(Debug, Default)]
pub(super) struct Refused {
    /// The highest block whose walks the writer refused since the thread last looked (0: none).
    highest: AtomicU64,
    /// How many blocks' walks the writer refused in all (a valid chain: none).
    pub(super) count: AtomicU64,
}

/// A block's state root and walks from this thread, with the way back to it.
#[derive(Debug)]
pub(super) struct Computed {
    update: RootUpdate,
    refused: Arc<Refused>,
}

impl Computed {
    /// The walks, if they were made for block `number` and their root is `root` (the
    /// header's). Otherwise the writer walks the block itself, and this thread is told to
    /// drop what it holds: it was built on a view that was not the writer's.
    pub(super) fn if_root_is(self, number: u64, root: B256) -> Option<RootUpdate> {
        if self.update.block() == number && self.update.root() == root {
            return Some(self.update);
        }
        tracing::warn!(
            target: "import",
            number,
            computed = %self.update.root(),
            header = %root,
            "the state root computed ahead differs from the header's; walking the block on the writer"
        );
        self.refused.highest.fetch_max(number, Ordering::SeqCst);
        self.refused.count.fetch_add(1, Ordering::SeqCst);
        None
    }
}

/// The roots thread's state.
struct Roots<'d> {
    db: &'d Database,
    /// The committed snapshot, its head and the head's hash.
    base: Option<(Reader, u64, B256)>,
    trie: RootsAhead,
    /// The last block computed here, above the snapshot's head.
    last: Option<(u64, B256)>,
    /// Shared with every [`Computed`] handed on.
    refused: Arc<Refused>,
    /// No block is computed here until the snapshot's head reaches this one.
    resume_after: u64,
}

impl Roots<'_> {
    /// Moves to the newest committed snapshot when the writer has committed since.
    fn refresh(&mut self) -> Result<(), StorageError> {
        let distrusted = self.refused.highest.swap(0, Ordering::SeqCst);
        if distrusted > 0 {
            self.trie.clear();
            self.last = None;
            self.resume_after = self.resume_after.max(distrusted);
        }
        let reader = self.db.begin_read()?;
        let Some(head) = reader.head()? else { return Ok(()) };
        if self.base.as_ref().is_some_and(|(_, h, _)| *h == head) {
            return Ok(());
        }
        let hash = reader.canonical_hash(head)?.unwrap_or_default();
        if self.base.as_ref().is_some_and(|(_, h, _)| *h > head) {
            // Never during an import; start over rather than trust the overlay.
            self.trie.clear();
            self.last = None;
        } else {
            self.trie.rebase(head);
        }
        if self.last.is_some_and(|(n, _)| n <= head) {
            self.last = None;
        }
        self.base = Some((reader, head, hash));
        Ok(())
    }

    /// The root of block `number` (hash `hash`, parent `parent`) after `changes`, if it is the
    /// next one on top of what this thread holds.
    fn compute(
        &mut self,
        number: u64,
        hash: B256,
        parent: B256,
        changes: &revm::database::states::StateChangeset,
    ) -> Option<Computed> {
        if let Err(error) = self.refresh() {
            // The writer reads the same tables and reports the error itself.
            tracing::debug!(target: "import", %error, "roots ahead paused");
            return None;
        }
        let (reader, head, head_hash) = self.base.as_ref()?;
        let (tip, tip_hash) = self.last.unwrap_or((*head, *head_hash));
        if *head < self.resume_after
            || number != tip + 1
            || parent != tip_hash
            || tip - head >= MAX_AHEAD
        {
            return None;
        }
        let started = std::time::Instant::now();
        match self.trie.compute(reader.trie_tables(), number, changes) {
            Ok(update) => {
                self.last = Some((number, hash));
                tracing::trace!(
                    target: "import",
                    number,
                    root_ahead_us = started.elapsed().as_micros() as u64,
                    "state root computed ahead"
                );
                Some(Computed { update, refused: Arc::clone(&self.refused) })
            }
            Err(error) => {
                // What was laid over is partial: start again from a snapshot past this block.
                tracing::debug!(target: "import", number, %error, "roots ahead paused");
                self.trie.clear();
                self.last = None;
                self.resume_after = self.resume_after.max(number);
                None
            }
        }
    }
}

/// Computes the state root of every block `rx` delivers executed, each on top of the one
/// before, and hands each to `tx` with it, until `rx` ends or the writer stops receiving. The
/// writer reports the walks it refuses through `refused`.
pub(super) fn roots_ahead(
    db: &Database,
    rx: Receiver<ExecutedItem>,
    tx: &SyncSender<ExecutedItem>,
    refused: Arc<Refused>,
) {
    let mut roots =
        Roots { db, base: None, trie: RootsAhead::default(), last: None, refused, resume_after: 0 };
    for (index, item, mut ahead, weight) in rx {
        if let (FileItem::Block(next), Some(ahead)) = (&item, ahead.as_mut())
            && let (Ok((_, block, prepared)), Ok(outcome)) = (next.as_ref(), &ahead.outcome)
        {
            let header = &block.header;
            ahead.root =
                roots.compute(header.number, prepared.hash(), header.parent_hash, &outcome.changes);
        }
        if tx.send((index, item, ahead, weight)).is_err() {
            return;
        }
    }
}
