//! [`Writer`]: the single write transaction: the rows it defers to its commit, metadata, and
//! the state a block's execution reads inside it. Its other concerns are submodules: block rows
//! and their reads (`blocks`, holding them: `held_blocks`), moving the head and its upkeep (`head`), hashed-state writes
//! with their history (`hashed`), the state a block executes on (`state`), unwinding the head
//! block (`unwind`).

use alloy_consensus::Header;
use alloy_primitives::{Address, B256, U256};
use redb::{Durability, ReadableTable, WriteTransaction};

use redb::Table;

use super::StorageResult;
use super::codec::u64_value;
use super::history::changes::HeldChanges;
use super::history::held::{HeldRows, write_rows};
use super::history::keys::Epochs;
use super::node_writes::TrieNodes;
use super::tables::{self, meta};

mod blocks;
mod hashed;
mod head;
mod held_blocks;
mod state;
mod unwind;

pub use state::WriterState;

/// One write transaction. Dropping it without [`Writer::commit`] discards everything it wrote,
/// which is how a block that fails verification leaves no trace.
pub struct Writer {
    pub(super) txn: WriteTransaction,
    cache: std::sync::Arc<super::cache::BlockCache>,
    /// A block was unwound: cached headers may be of the old branch.
    pub(super) unwound: bool,
    /// Rows held until the commit (see [`Deferred`]).
    deferred: std::sync::Mutex<Deferred>,
    /// Trie-node changes held until the commit ([`Writer::trie_nodes`]).
    trie_nodes: std::sync::Mutex<TrieNodes>,
    /// Segment files this transaction writes (`storage::segments`).
    segment_files: SegmentFiles,
    /// The head's moves and staged ranges leave their freezes to the commit
    /// ([`Writer::freeze_at_commit`]).
    freeze_at_commit: bool,
    /// The block [`Writer::insert_block`] wrote last (number, hash, header), which the next
    /// block reads back as its parent ([`Writer::canonical_hash`], [`Writer::header`]) without
    /// a table lookup; [`Writer::unwind_head`] and [`Writer::insert_header`] forget it.
    last_block: std::sync::Mutex<Option<(u64, B256, Header)>>,
    /// Block rows held until the commit (`blocks`).
    held_blocks: std::sync::Mutex<held_blocks::HeldBlocks>,
    /// The history epochs' length, read once ([`Writer::epochs`]).
    epochs: std::sync::Mutex<Option<Epochs>>,
    /// The head whose change-list pruning waits for the commit (`Writer::prune_changes_now`).
    prune_to: std::sync::Mutex<Option<u64>>,
}

/// The segment store and the files a write transaction created and replaced: the created ones
/// are removed if the transaction is dropped uncommitted.
struct SegmentFiles {
    store: std::sync::Arc<super::segments::Store>,
    pending: super::segments::TxnFiles,
}

impl Drop for SegmentFiles {
    fn drop(&mut self) {
        self.pending.abandon(&self.store);
    }
}

/// Rows that this transaction will write at its commit: of [`tables::TX_LOOKUP`],
/// [`tables::TRACE_ADDRESSES`], new [`tables::PREIMAGES`], and bits of the account and slot
/// epoch indexes (and the account and slot history rows, which an epoch's close takes out
/// before that: `storage::history::held`). The keys of the first four are hashes and
/// addresses, so a block's rows land on random pages of tables that grow with the chain;
/// written at once in key order, each page of a group's rows is dirtied once, instead of once
/// per block that lands on it (and again after redb's write buffer has sent it to the file).
/// Nothing reads these tables inside an import's transaction but the steps that write them
/// first, an unwind ([`Writer::unwind_head`]) and [`Writer::current_state`], and an epoch's
/// close, which only sets index bits in the first four as the held ones do, and is given the
/// history rows of its epoch (`Writer::flush_before_close`): the rest of a whole import
/// group's rows wait for its commit. The change lists of [`tables::BLOCK_CHANGES`] are held
/// here too, to open that table once a group: only an unwind and the pruning read them, and
/// both write them first.
#[derive(Debug, Default)]
struct Deferred {
    lookups: Vec<([u8; 32], [u8; 12])>,
    trace_addresses: Vec<[u8; 28]>,
    /// New rows of [`tables::PREIMAGES`] (a slot hash may repeat: the table had no row for it
    /// when each was found).
    preimages: Vec<PreimageRow>,
    /// Bits of the account and slot epoch indexes ([`super::history::index::replaced_bit`]). Read
    /// inside a write transaction only by an epoch's close and by an unwind, which write
    /// them first.
    account_bits: Vec<([u8; 36], u64)>,
    slot_bits: Vec<([u8; 68], u64)>,
    /// Rows of [`tables::HASHED_ACCOUNT_HISTORY`] and [`tables::HASHED_STORAGE_HISTORY`].
    account_history: HeldRows<44>,
    slot_history: HeldRows<76>,
    /// The change lists of the hashed state and the trace index ([`tables::BLOCK_CHANGES`]).
    changes: HeldChanges,
}

/// `keccak(slot) → slot`: a row of [`tables::PREIMAGES`].
type PreimageRow = ([u8; 32], [u8; 32]);

impl Deferred {
    fn len(&self) -> usize {
        self.lookups.len()
            + self.trace_addresses.len()
            + self.preimages.len()
            + self.account_bits.len()
            + self.slot_bits.len()
            + self.account_history.len()
            + self.slot_history.len()
            + self.changes.len()
    }
}

/// Deferred rows are written early once this many are held, which bounds their memory (a
/// genesis of millions of slots, or a group of very large blocks): 32–76 bytes a row, so
/// about 50 MiB, or twice that while a vector grows. A 512-block import group of the
/// 10,000-block chain holds about 500,000.
const DEFERRED_CAP: usize = 1 << 20;

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    pub(super) fn new(
        txn: WriteTransaction,
        cache: std::sync::Arc<super::cache::BlockCache>,
        segments: std::sync::Arc<super::segments::Store>,
    ) -> Self {
        Self {
            txn,
            cache,
            unwound: false,
            deferred: Default::default(),
            trie_nodes: Default::default(),
            segment_files: SegmentFiles { store: segments, pending: Default::default() },
            freeze_at_commit: false,
            last_block: Default::default(),
            held_blocks: Default::default(),
            epochs: Default::default(),
            prune_to: Default::default(),
        }
    }

    /// The length of this database's history epochs, read from `meta` once per transaction
    /// (a block's store asks for it several times; it is set when the tables are created).
    pub(super) fn epochs(&self) -> StorageResult<Epochs> {
        let mut known = self.epochs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(epochs) = *known {
            return Ok(epochs);
        }
        let epochs = super::history::keys::history_epochs(&self.txn)?;
        *known = Some(epochs);
        Ok(epochs)
    }

    fn last_block(&self) -> std::sync::MutexGuard<'_, Option<(u64, B256, Header)>> {
        self.last_block.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the block [`Writer::insert_block`] wrote last: its rows are removed or replaced.
    pub(super) fn forget_last_block(&self) {
        *self.last_block() = None;
    }

    /// Leaves the freezing of the epochs the head's moves leave behind (`storage::segments`)
    /// to the commit, which then freezes them all at once: for a transaction that moves the
    /// head many times, a bulk import's group of blocks (or adopts several staged ranges, the
    /// trie-history stage beside an import). Its blocks' epochs then go into one
    /// segment file per kind of block data and one freeze, where each epoch took a freeze, its
    /// files and their syncs of its own (on mainnet's first 16,384 blocks, 128 freezes of 128
    /// blocks; docs/benchmarks/issue-62.md). The pruning of the change lists that leave the
    /// unwind window waits for the commit too. Nothing inside the transaction reads
    /// differently: rows not frozen yet are read from the B-tree, as the epochs of the unwind
    /// window are, and an unwind prunes first.
    pub fn freeze_at_commit(&mut self) {
        self.freeze_at_commit = true;
    }

    fn deferred(&self) -> std::sync::MutexGuard<'_, Deferred> {
        self.deferred.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds rows to the deferred ones, writing them all if there are too many.
    fn defer(&self, add: impl FnOnce(&mut Deferred)) -> StorageResult<()> {
        let mut deferred = self.deferred();
        add(&mut deferred);
        let held = deferred.len();
        drop(deferred);
        if held >= DEFERRED_CAP { self.flush_deferred() } else { Ok(()) }
    }

    /// Holds `old` as the account history row `key` (read from `table` only when the block's
    /// rows were partly written already); returns whether the row is new (the block's first
    /// change of the account). See [`HeldRows::record`].
    pub fn record_account_history(
        &self,
        table: &Table<'_, &'static [u8; 44], &'static [u8]>,
        key: &[u8; 44],
        old: &[u8],
    ) -> StorageResult<bool> {
        self.deferred().account_history.record(table, key, old)
    }

    /// The trie-node changes this transaction holds until its commit: the trie's walk reads
    /// the stored nodes through them, and its stores go into them. They are written with the
    /// deferred rows, and early past [`super::TRIE_NODES_CAP`] ([`TrieNodes::full`]).
    pub fn trie_nodes(&self) -> std::sync::MutexGuard<'_, TrieNodes> {
        self.trie_nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called after a block's trie nodes are stored: writes the held ones if there are too
    /// many ([`TrieNodes::full`]), which bounds their memory. (Inside a block only twice as
    /// many are written early, [`TrieNodes::overfull`]: a block's changes of one node mostly
    /// stay together.)
    pub fn trie_nodes_done(&self) -> StorageResult<()> {
        if self.trie_nodes().full() { self.flush_trie_nodes() } else { Ok(()) }
    }

    fn flush_trie_nodes(&self) -> StorageResult<()> {
        let held = self.trie_nodes().take();
        held.write(&self.txn)
    }

    /// Writes the deferred rows, the held block rows and the held trie nodes, each table's in
    /// key order.
    pub(super) fn flush_deferred(&self) -> StorageResult<()> {
        let started = std::time::Instant::now();
        self.write_held_blocks()?;
        self.flush_trie_nodes()?;
        let after_trie = started.elapsed();
        let mut deferred = self.deferred();
        let account_history = deferred.account_history.take_all();
        let slot_history = deferred.slot_history.take_all();
        let mut changes = std::mem::take(&mut deferred.changes);
        // Field by field: the history holders keep what they know of rows written.
        let d = &mut *deferred;
        let (lookups, trace_addresses, preimages, account_bits, slot_bits) = (
            std::mem::take(&mut d.lookups),
            std::mem::take(&mut d.trace_addresses),
            std::mem::take(&mut d.preimages),
            std::mem::take(&mut d.account_bits),
            std::mem::take(&mut d.slot_bits),
        );
        drop(deferred);
        if !account_history.is_empty() {
            let mut t = self.txn.open_table(tables::HASHED_ACCOUNT_HISTORY)?;
            write_rows(&mut t, &account_history, "hashed_account_history")?;
        }
        if !slot_history.is_empty() {
            let mut t = self.txn.open_table(tables::HASHED_STORAGE_HISTORY)?;
            write_rows(&mut t, &slot_history, "hashed_storage_history")?;
        }
        let after_history = started.elapsed();
        if !account_bits.is_empty() {
            super::history::index::set_bits(
                &mut self.txn.open_table(tables::HASHED_ACCOUNT_EPOCHS)?,
                account_bits,
            )?;
        }
        if !slot_bits.is_empty() {
            super::history::index::set_bits(
                &mut self.txn.open_table(tables::HASHED_STORAGE_EPOCHS)?,
                slot_bits,
            )?;
        }
        let after_bits = started.elapsed();
        self.write_sorted(tables::PREIMAGES, preimages, |t, (hash, slot)| {
            t.insert(hash, slot.as_slice()).map(drop)
        })?;
        let after_preimages = started.elapsed();
        self.write_sorted(tables::TX_LOOKUP, lookups, |t, (hash, key)| {
            t.insert(hash, key).map(drop)
        })?;
        let after_lookups = started.elapsed();
        changes.write(&self.txn)?;
        self.write_sorted(tables::TRACE_ADDRESSES, trace_addresses, |t, key| {
            t.insert(key, ()).map(drop)
        })?;
        let us = |d: std::time::Duration| d.as_micros() as u64;
        tracing::debug!(
            target: "import",
            trie_us = us(after_trie),
            history_us = us(after_history - after_trie),
            bits_us = us(after_bits - after_history),
            preimages_us = us(after_preimages - after_bits),
            lookups_us = us(after_lookups - after_preimages),
            trace_us = us(started.elapsed() - after_lookups),
            "deferred rows written"
        );
        Ok(())
    }

    /// Writes the held change lists ([`HeldChanges`]) alone.
    fn write_held_changes(&self) -> StorageResult<()> {
        let mut changes = std::mem::take(&mut self.deferred().changes);
        changes.write(&self.txn)
    }

    /// Puts `rows` into table `def` in order, each once, through one open table.
    fn write_sorted<K: redb::Key + 'static, V: redb::Value + 'static, R: Ord>(
        &self,
        def: redb::TableDefinition<'_, K, V>,
        mut rows: Vec<R>,
        put: impl Fn(&mut Table<'_, K, V>, &R) -> Result<(), redb::StorageError>,
    ) -> StorageResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        rows.sort_unstable();
        rows.dedup();
        let mut table = self.txn.open_table(def)?;
        for row in &rows {
            put(&mut table, row)?;
        }
        Ok(())
    }

    /// Creates every table of a new database (its history epochs `epochs`, by default those of
    /// `Epochs::for_new_datadir`), or checks the format of an existing one.
    pub(super) fn create_tables(&self, epochs: Option<Epochs>) -> StorageResult<()> {
        // The format first: an older file's tables may have other key types.
        let mut m = self.txn.open_table(tables::META)?;
        let found = m.get(meta::SCHEMA)?.map(|v| u64_value("meta", v.value())).transpose()?;
        match found {
            None => {
                m.insert(meta::SCHEMA, tables::SCHEMA_VERSION.to_be_bytes().as_slice())?;
                let epochs = match epochs {
                    Some(e) if e.len == 0 => {
                        return Err(super::StorageError::Config(
                            "a history epoch of 0 blocks".into(),
                        ));
                    }
                    Some(e) => e,
                    None => Epochs::for_new_datadir()?,
                };
                m.insert(meta::HISTORY_EPOCH, epochs.len.to_be_bytes().as_slice())?;
                *self.epochs.lock().unwrap_or_else(|e| e.into_inner()) = Some(epochs);
                if let Some(depth) = super::history::changes::unwind_depth_for_new_datadir()? {
                    m.insert(meta::UNWIND_DEPTH, depth.to_be_bytes().as_slice())?;
                }
            }
            // Format 9 differs only in receipts rows, and format 10 only in having no segments
            // (no manifest: nothing frozen), both of which this version still reads: they open
            // as the current format, so that an older binary refuses what is written from now.
            Some(9 | 10) => {
                m.insert(meta::SCHEMA, tables::SCHEMA_VERSION.to_be_bytes().as_slice())?;
                Epochs::read(&m)?;
            }
            // Formats 11 and 12 differ only in the key order of history segment files (11: trie
            // and state history, 12: state history): one that froze none opens as the current
            // format.
            Some(found @ (11 | 12))
                if !super::segments::Manifest::read(&m)?.has_reordered_files_since(found) =>
            {
                m.insert(meta::SCHEMA, tables::SCHEMA_VERSION.to_be_bytes().as_slice())?;
                Epochs::read(&m)?;
            }
            Some(found) if found != tables::SCHEMA_VERSION => {
                return Err(super::StorageError::Schema {
                    found,
                    supported: tables::SCHEMA_VERSION,
                });
            }
            Some(_) => {
                Epochs::read(&m)?;
            }
        }
        drop(m);
        // Every table of the schema (`meta` again, already open above: a no-op).
        let txn = &self.txn;
        macro_rules! create {
            ($($table:ident),* $(,)?) => {
                $(txn.open_table(tables::$table)?;)*
            };
        }
        tables::for_each_table!(create);
        Ok(())
    }

    /// The underlying redb transaction, for layers that keep tables of their own design in this
    /// database. Its trie tables lack the changes the writer holds ([`Writer::trie_nodes`])
    /// until they are written: read trie nodes through those.
    pub fn transaction(&self) -> &WriteTransaction {
        &self.txn
    }

    /// Makes the commit durable (fsync) or not. Non-durable commits are visible to readers at
    /// once and become durable with the next durable commit; a crash in between loses them whole
    /// (never half of one).
    pub fn commit(mut self, durable: bool) -> StorageResult<()> {
        self.flush_deferred()?;
        self.prune_held_changes()?;
        if self.freeze_at_commit {
            self.freeze_due()?;
        }
        self.txn.set_durability(if durable { Durability::Immediate } else { Durability::None })?;
        let started = std::time::Instant::now();
        self.txn.commit()?;
        tracing::debug!(
            target: "import",
            durable,
            redb_commit_us = started.elapsed().as_micros() as u64,
            "transaction committed"
        );
        self.segment_files.pending.committed(&self.segment_files.store, durable);
        if self.unwound {
            self.cache.clear_headers();
        }
        self.cache.bump_generation();
        Ok(())
    }

    /// Empties every state, history and trie table: what an interrupted `init` left behind is
    /// discarded before it starts again. Blocks are untouched (there are none before init).
    pub fn clear_state(&self) -> StorageResult<()> {
        macro_rules! clear {
            ($($t:ident),*) => {$(
                self.txn.delete_table(tables::$t)?;
                self.txn.open_table(tables::$t)?;
            )*};
        }
        clear!(
            PREIMAGES,
            HASHED_ACCOUNTS,
            HASHED_STORAGE,
            HASHED_ACCOUNT_HISTORY,
            HASHED_STORAGE_HISTORY,
            HASHED_ACCOUNT_EPOCHS,
            HASHED_STORAGE_EPOCHS,
            ACCOUNT_TRIE,
            STORAGE_TRIE,
            ACCOUNT_TRIE_HISTORY,
            STORAGE_TRIE_HISTORY,
            ACCOUNT_TRIE_EPOCHS,
            STORAGE_TRIE_EPOCHS,
            BLOCK_CHANGES
        );
        self.deferred.lock().unwrap_or_else(|e| e.into_inner()).preimages.clear();
        drop(self.trie_nodes().take());
        Ok(())
    }

    /// Records the genesis allocation's digest (see `chain::GenesisHead::alloc_digest`).
    pub fn set_alloc_digest(&self, digest: &U256) -> StorageResult<()> {
        let bytes = digest.to_be_bytes::<32>();
        self.txn.open_table(tables::META)?.insert(meta::ALLOC_DIGEST, bytes.as_slice())?;
        Ok(())
    }

    /// Records which trie history the datadir keeps (once, at init).
    pub fn set_proof_history(&self, choice: super::segments::ProofHistory) -> StorageResult<()> {
        self.txn.open_table(tables::META)?.insert(meta::PROOF_HISTORY, choice.name().as_bytes())?;
        Ok(())
    }

    /// Records the header policy's name (once, at init).
    pub fn set_header_policy(&self, name: &str) -> StorageResult<()> {
        self.txn.open_table(tables::META)?.insert(meta::HEADER_POLICY, name.as_bytes())?;
        Ok(())
    }

    /// Records the genesis.json text (once, at init).
    pub fn set_genesis_json(&self, json: &str) -> StorageResult<()> {
        self.txn.open_table(tables::META)?.insert(meta::GENESIS, json.as_bytes())?;
        Ok(())
    }

    /// Records that `block`'s execution touched `addresses` ([`tables::TRACE_ADDRESSES`]), in
    /// the change index too so that unwinding removes them. The first block indexed becomes
    /// [`meta::TRACE_INDEX_FROM`].
    pub fn index_trace_addresses(&self, block: u64, addresses: &[Address]) -> StorageResult<()> {
        {
            let mut m = self.txn.open_table(tables::META)?;
            if m.get(meta::TRACE_INDEX_FROM)?.is_none() {
                m.insert(meta::TRACE_INDEX_FROM, block.to_be_bytes().as_slice())?;
            }
        }
        let mut keys = Vec::with_capacity(addresses.len() * 20);
        self.defer(|d| {
            for a in addresses {
                d.trace_addresses.push(super::codec::tx::address_block_key(a, block));
                keys.extend_from_slice(a.as_slice());
            }
            d.changes.add(block, super::history::changes::ChangeKind::TraceAddresses, &keys);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Database;
    use alloy_consensus::{Block, BlockBody, Signed, TxEnvelope, TxLegacy};
    use alloy_primitives::keccak256;
    use alloy_primitives::{Signature, TxKind};
    use revm::database::states::StateChangeset;

    /// Block `number` with `count` legacy transfers (the signature makes each hash distinct; no
    /// sender is recovered from it).
    fn block(number: u64, count: u64) -> Block<TxEnvelope> {
        let transactions = (0..count)
            .map(|nonce| {
                let tx = TxLegacy {
                    nonce,
                    gas_limit: 21_000,
                    to: TxKind::Call(Address::with_last_byte(9)),
                    ..Default::default()
                };
                let sig = Signature::new(U256::from(number), U256::from(nonce + 1), false);
                TxEnvelope::Legacy(Signed::new_unhashed(tx, sig))
            })
            .collect();
        let header = Header { number, ..Default::default() };
        Block { header, body: BlockBody { transactions, ommers: vec![], withdrawals: None } }
    }

    fn store(w: &Writer, number: u64, count: u64, touched: &[Address]) -> Vec<B256> {
        let b = block(number, count);
        let senders = vec![Address::with_last_byte(1); count as usize];
        w.insert_block(&b, B256::with_last_byte(number as u8), &senders, &[], None).unwrap();
        w.index_trace_addresses(number, touched).unwrap();
        w.advance_head(number).unwrap();
        b.body.transactions.iter().map(|t| *t.tx_hash()).collect()
    }

    /// Block rows held until the commit read back inside the transaction as the tables give
    /// them after it: hash, header, ommers, `BLOCKHASH`; a block stored again at a held number
    /// replaces the held one.
    #[test]
    fn held_block_rows_read_inside_the_transaction_as_the_commit_writes_them() {
        use revm::database::DatabaseRef;
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 }).unwrap();
        let w = db.begin_write().unwrap();
        w.advance_head_with_markers(0, 0, 0).unwrap();
        let ommer = Header { number: 7, gas_limit: 99, ..Default::default() };
        for number in 1..=3u64 {
            let mut b = block(number, number);
            b.body.ommers = vec![Header { extra_data: vec![number as u8].into(), ..ommer.clone() }];
            let senders = vec![Address::with_last_byte(1); number as usize];
            w.insert_block(&b, B256::with_last_byte(number as u8), &senders, &[], None).unwrap();
            w.advance_head(number).unwrap();
        }
        // Block 3 again, with another hash: the later rows win.
        let again = block(3, 1);
        w.insert_block(&again, B256::with_last_byte(0x33), &[Address::ZERO], &[], None).unwrap();
        let inside = |w: &Writer| {
            (1..=3u64)
                .map(|n| {
                    let ommers = w.ommers(n).unwrap();
                    (w.canonical_hash(n).unwrap(), w.header(n).unwrap(), ommers)
                })
                .collect::<Vec<_>>()
        };
        let held = inside(&w);
        assert_eq!(held[0].0, Some(B256::with_last_byte(1)));
        assert_eq!(held[2].0, Some(B256::with_last_byte(0x33)));
        assert_eq!(held[1].1.as_ref().map(|h| h.number), Some(2));
        assert_eq!(held[1].2[0].extra_data.as_ref(), &[2u8]);
        assert!(held[2].2.is_empty(), "block 3's second version has no ommers");
        assert_eq!(w.state().unwrap().block_hash_ref(2).unwrap(), B256::with_last_byte(2));
        w.commit(true).unwrap();

        let w = db.begin_write().unwrap();
        assert_eq!(inside(&w), held, "the tables after the commit");
        let r = db.begin_read().unwrap();
        assert_eq!(r.canonical_hash(3).unwrap(), Some(B256::with_last_byte(0x33)));
        let stored = r.transaction_location(again.body.transactions[0].tx_hash()).unwrap();
        assert_eq!(stored, Some((3, 0)));
    }

    #[test]
    fn deferred_lookup_rows_are_written_by_the_commit_and_undone_by_an_unwind_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 }).unwrap();
        let (a, b) = (Address::with_last_byte(0xa), Address::with_last_byte(0xb));
        let w = db.begin_write().unwrap();
        w.advance_head_with_markers(0, 0, 0).unwrap();
        // More rows than the cap, so some are written before the commit.
        let first = store(&w, 1, DEFERRED_CAP as u64 + 10, &[a, b]);
        w.commit(true).unwrap();

        // Block 2 is stored and unwound in one transaction: its rows, still deferred when the
        // unwind starts, must not reach the tables at the commit.
        let mut w = db.begin_write().unwrap();
        let second = store(&w, 2, 3, &[a]);
        assert_eq!(w.unwind_head().unwrap(), 1);
        let third = store(&w, 2, 2, &[b]);
        w.commit(true).unwrap();

        let r = db.begin_read().unwrap();
        for (i, hash) in first.iter().enumerate() {
            assert_eq!(r.transaction_location(hash).unwrap(), Some((1, i as u32)), "{i}");
        }
        // `third` has the same first hashes as `second` (same number, nonces and signatures).
        assert_eq!(second[..2], third[..]);
        assert_eq!(r.transaction_location(&second[2]).unwrap(), None);
        assert_eq!(r.transaction_location(&third[1]).unwrap(), Some((2, 1)));
        assert_eq!(r.blocks_touching(&a, 0, 9).unwrap(), vec![1]);
        assert_eq!(r.blocks_touching(&b, 0, 9).unwrap(), vec![1, 2]);
    }

    /// An epoch's history rows come out the same, row for row, bit for bit in its index and
    /// packed, whether one transaction held them all (written whole at the close), each block
    /// was committed on its own, or a commit fell inside the epoch (the close inserts the rest
    /// and packs).
    #[test]
    fn an_epoch_held_whole_is_written_packed_and_equals_one_committed_block_by_block() {
        use redb::{ReadableDatabase, ReadableTableMetadata};
        use revm::database::states::PlainStorageChangeset;
        use revm::state::AccountInfo;
        let changes = |block: u64| {
            let address = |i: u64| Address::from_word(keccak256((i % 7_000).to_be_bytes()));
            let accounts = (0..2_500u64)
                .map(|i| {
                    let info =
                        AccountInfo { nonce: block, balance: U256::from(i), ..Default::default() };
                    (address(block * 2_500 + i), Some(info))
                })
                .collect();
            let storage = (0..40u64)
                .map(|i| PlainStorageChangeset {
                    address: address(i),
                    wipe_storage: false,
                    storage: (0..30u64)
                        .map(|j| (U256::from(block * 7 + j), U256::from(block + 1)))
                        .collect(),
                })
                .collect();
            StateChangeset { accounts, storage, contracts: vec![] }
        };
        // Blocks 1..=8 with epochs of 4: epoch 1 (blocks 4..=7) closes at block 8.
        let run = |commit_after: &dyn Fn(u64) -> bool| {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 }).unwrap();
            let mut w = db.begin_write().unwrap();
            w.advance_head_with_markers(0, 0, 0).unwrap();
            for block in 1..=8 {
                w.apply_changeset(block, &changes(block)).unwrap();
                w.advance_head(block).unwrap();
                if commit_after(block) {
                    w.commit(false).unwrap();
                    w = db.begin_write().unwrap();
                }
            }
            w.commit(true).unwrap();
            let r = db.db.begin_read().unwrap();
            let accounts = r.open_table(tables::HASHED_ACCOUNT_HISTORY).unwrap();
            let slots = r.open_table(tables::HASHED_STORAGE_HISTORY).unwrap();
            let index = r.open_table(tables::HASHED_ACCOUNT_EPOCHS).unwrap();
            let rows = |t: &redb::ReadOnlyTable<&'static [u8; 44], &'static [u8]>| {
                t.iter()
                    .unwrap()
                    .map(|i| i.unwrap())
                    .map(|(k, v)| (*k.value(), v.value().to_vec()))
                    .collect::<Vec<_>>()
            };
            let slot_rows: Vec<_> = slots
                .iter()
                .unwrap()
                .map(|i| i.unwrap())
                .map(|(k, v)| (*k.value(), v.value().to_vec()))
                .collect();
            let bits: Vec<_> = index
                .iter()
                .unwrap()
                .map(|i| i.unwrap())
                .map(|(k, v)| (*k.value(), v.value()))
                .collect();
            (rows(&accounts), slot_rows, bits, accounts.stats().unwrap().leaf_pages())
        };
        let held = run(&|_| false);
        assert_eq!(held.0.len(), 8 * 2_500);
        assert!(!held.2.is_empty());
        for (name, other) in [("block by block", run(&|_| true)), ("split", run(&|b| b == 5))] {
            assert!(held.0 == other.0, "account history rows differ, {name}");
            assert!(held.1 == other.1, "slot history rows differ, {name}");
            assert!(held.2 == other.2, "epoch index rows differ, {name}");
            // All packed: leaves within a few of each other (a table left as the rows came has
            // about a third more).
            let (a, b) = (held.3, other.3);
            assert!(a * 20 <= b * 21 && b * 20 <= a * 21, "{a} leaves held, {b} {name}");
        }
    }
}
