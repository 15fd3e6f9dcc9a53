//! [`Writer`]: the single write transaction; stores blocks and state changes with history.

use alloy_consensus::{Block, BlockBody, Header, ReceiptEnvelope, TxEnvelope};
use alloy_eips::Encodable2718;
use alloy_primitives::{Address, B256, U256};
use alloy_rlp::Encodable;
use redb::{Durability, ReadableTable, WriteTransaction};
use revm::database::states::StateChangeset;

use alloy_primitives::keccak256;
use alloy_trie::EMPTY_ROOT_HASH;
use redb::Table;

use super::codec::{
    HashedAccount, SlotRow, StoredAccount, decode_slot, hashed_account_history_key,
    hashed_storage_history_key, hashed_storage_key, row_stamp, tx_key, u64_value,
};
use super::history::epochs::replaced_bit;
use super::history::held::{ClosingRows, HeldRows, write_rows};
use super::node_writes::TrieNodes;
use super::tables::{self, meta};
use super::{StateDump, StorageResult};

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
}

/// The segment store and the files a write transaction created and replaced: the created ones
/// are removed if the transaction is dropped uncommitted.
struct SegmentFiles {
    store: std::sync::Arc<super::segments::Store>,
    pending: super::segments::freeze::Pending,
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
/// group's rows wait for its commit.
#[derive(Debug, Default)]
struct Deferred {
    lookups: Vec<([u8; 32], [u8; 12])>,
    trace_addresses: Vec<[u8; 28]>,
    /// New rows of [`tables::PREIMAGES`] (a slot hash may repeat: the table had no row for it
    /// when each was found).
    preimages: Vec<PreimageRow>,
    /// Bits of the account and slot epoch indexes ([`super::history::epochs::replaced_bit`]). Read
    /// inside a write transaction only by an epoch's close and by an unwind, which write
    /// them first.
    account_bits: Vec<([u8; 36], u64)>,
    slot_bits: Vec<([u8; 68], u64)>,
    /// Rows of [`tables::HASHED_ACCOUNT_HISTORY`] and [`tables::HASHED_STORAGE_HISTORY`].
    account_history: HeldRows<44>,
    slot_history: HeldRows<76>,
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
        }
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

    /// Writes the deferred rows and the held trie nodes, each table's in key order.
    pub(super) fn flush_deferred(&self) -> StorageResult<()> {
        let started = std::time::Instant::now();
        self.flush_trie_nodes()?;
        let after_trie = started.elapsed();
        let mut deferred = self.deferred();
        let account_history = deferred.account_history.take_all();
        let slot_history = deferred.slot_history.take_all();
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
            super::history::epochs::set_bits(
                &mut self.txn.open_table(tables::HASHED_ACCOUNT_EPOCHS)?,
                account_bits,
            )?;
        }
        if !slot_bits.is_empty() {
            super::history::epochs::set_bits(
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
    pub(super) fn create_tables(&self, epochs: Option<super::Epochs>) -> StorageResult<()> {
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
                    None => super::history::epochs::Epochs::for_new_datadir()?,
                };
                m.insert(meta::HISTORY_EPOCH, epochs.len.to_be_bytes().as_slice())?;
                if let Some(depth) = super::history::changes::unwind_depth_for_new_datadir()? {
                    m.insert(meta::UNWIND_DEPTH, depth.to_be_bytes().as_slice())?;
                }
            }
            // Format 9 differs only in receipts rows, and format 10 only in having no segments
            // (no manifest: nothing frozen), both of which this version still reads: they open
            // as the current format, so that an older binary refuses what is written from now.
            Some(9 | 10) => {
                m.insert(meta::SCHEMA, tables::SCHEMA_VERSION.to_be_bytes().as_slice())?;
                super::history::epochs::Epochs::read(&m)?;
            }
            // Formats 11 and 12 differ only in the key order of history segment files (11: trie
            // and state history, 12: state history): one that froze none opens as the current
            // format.
            Some(found @ (11 | 12))
                if !super::segments::Manifest::read(&m)?.has_reordered_files_since(found) =>
            {
                m.insert(meta::SCHEMA, tables::SCHEMA_VERSION.to_be_bytes().as_slice())?;
                super::history::epochs::Epochs::read(&m)?;
            }
            Some(found) if found != tables::SCHEMA_VERSION => {
                return Err(super::StorageError::Schema {
                    found,
                    supported: tables::SCHEMA_VERSION,
                });
            }
            Some(_) => {
                super::history::epochs::Epochs::read(&m)?;
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
    pub fn set_proof_history(&self, choice: super::ProofHistory) -> StorageResult<()> {
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

    /// The state at this transaction's head, its uncommitted changes included.
    pub fn pending_state(&self) -> StorageResult<super::PendingState<'_>> {
        Ok(super::PendingState::new(&self.txn, self.head()?.unwrap_or(0), self.frozen_blocks()?))
    }

    /// The segments this transaction sees and the first epoch of block data not frozen, if
    /// any block data is frozen.
    pub(super) fn frozen_blocks(
        &self,
    ) -> StorageResult<Option<(super::segments::Segments, super::Epochs)>> {
        let m = self.txn.open_table(tables::META)?;
        let manifest = super::segments::Manifest::read(&m)?;
        if manifest.blocks_frozen_to == 0 {
            return Ok(None);
        }
        let epochs = super::Epochs::read(&m)?;
        Ok(Some((self.segment_files.store.view(&manifest)?, epochs)))
    }

    /// The frozen row of `kind` at `key` of block `number`: `None` if the block's data is not
    /// frozen, `Some(None)` if it is and the row is absent.
    fn frozen_block_row(
        &self,
        kind: super::segments::Kind,
        number: u64,
        key: &[u8],
    ) -> StorageResult<Option<Option<Vec<u8>>>> {
        let Some((segments, epochs)) = self.frozen_blocks()? else { return Ok(None) };
        let epoch = epochs.of(number);
        if !segments.holds_blocks(epoch) {
            return Ok(None);
        }
        Ok(Some(segments.first(kind, epoch, key, key)?.map(|(_, v)| v)))
    }

    /// Canonical hash of block `number` as seen inside this transaction.
    pub fn canonical_hash(&self, number: u64) -> StorageResult<Option<B256>> {
        use super::segments::Kind;
        if let Some(row) = self.frozen_block_row(Kind::Canonical, number, &number.to_be_bytes())? {
            return Ok(row.and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok()).map(B256::from));
        }
        let t = self.txn.open_table(tables::CANONICAL)?;
        Ok(t.get(number)?.map(|v| B256::from(*v.value())))
    }

    /// Header of block `number` as seen inside this transaction.
    pub fn header(&self, number: u64) -> StorageResult<Option<Header>> {
        use super::segments::Kind;
        let decode = |mut bytes: &[u8]| {
            <Header as alloy_rlp::Decodable>::decode(&mut bytes).map_err(|e| {
                super::StorageError::Corrupt { table: "headers", detail: e.to_string() }
            })
        };
        if let Some(row) = self.frozen_block_row(Kind::Headers, number, &number.to_be_bytes())? {
            return row.map(|v| decode(&v)).transpose();
        }
        let t = self.txn.open_table(tables::HEADERS)?;
        let Some(v) = t.get(number)? else { return Ok(None) };
        Ok(Some(decode(v.value())?))
    }

    /// The ommers of block `number` as seen inside this transaction (none if not stored).
    pub fn ommers(&self, number: u64) -> StorageResult<Vec<Header>> {
        let frozen =
            self.frozen_block_row(super::segments::Kind::Bodies, number, &number.to_be_bytes())?;
        let t = self.txn.open_table(tables::BODIES)?;
        let row = t.get(number)?;
        let bytes = match (&frozen, &row) {
            (Some(Some(v)), _) => v.as_slice(),
            (Some(None), _) | (None, None) => return Ok(Vec::new()),
            (None, Some(v)) => v.value(),
        };
        let corrupt = |detail: String| super::StorageError::Corrupt { table: "bodies", detail };
        let rest = bytes.get(4..).ok_or_else(|| corrupt("short value".into()))?;
        let body = <alloy_consensus::BlockBody<alloy_consensus::TxEnvelope> as alloy_rlp::Decodable>::decode(&mut &rest[..])
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(body.ommers)
    }

    /// Head block number as seen inside this transaction.
    pub fn head(&self) -> StorageResult<Option<u64>> {
        let t = self.txn.open_table(tables::META)?;
        t.get(meta::HEAD)?.map(|v| u64_value("meta", v.value())).transpose()
    }

    /// The head, which must not be above `to`: only [`Writer::unwind_head`] moves it back (it
    /// removes the blocks' rows, which the epoch index must follow).
    fn head_not_above(&self, to: u64) -> StorageResult<Option<u64>> {
        match self.head()? {
            Some(head) if head > to => Err(super::StorageError::HeadBack { head, to }),
            old => Ok(old),
        }
    }

    /// Moves the head marker to `number`; safe and finalized stay, lowered to `number` if above.
    /// Epochs the head leaves behind are indexed (`storage::history::epochs`).
    pub fn set_head(&self, number: u64) -> StorageResult<()> {
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
        super::history::changes::prune_changes(&self.txn, number)?;
        let closing = self.flush_before_close(old, number)?;
        super::history::epochs::follow_head(&self.txn, old, number, &closing)?;
        self.freeze_due()
    }

    /// Adopts the segment merges that finished off the writer's thread, waits for the running
    /// ones and runs every merge due (`storage::segments::freeze::settle`), so that this
    /// transaction leaves the segments merged.
    pub fn settle_segments(&self) -> StorageResult<()> {
        super::segments::freeze::settle(
            &self.txn,
            &self.segment_files.store,
            &self.segment_files.pending,
        )
    }

    /// Freezes the closed epochs that left the unwind window (`storage::segments`). The
    /// history rows held for them were written by their close, long before.
    pub(super) fn freeze_due(&self) -> StorageResult<()> {
        super::segments::freeze::freeze_due(
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
    /// epoch indexes, whose bits it only sets, as the held bits do ([`super::history::epochs::set_bits`]
    /// ORs them in). Before a move that reopens an epoch (an unwind, which clears bits)
    /// everything held is written.
    fn flush_before_close(&self, old: Option<u64>, new: u64) -> StorageResult<ClosingRows> {
        let epochs = super::history::epochs::history_epochs(&self.txn)?;
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

    /// Sets the head, safe and finalized markers (see [`Writer::set_head`] for the epochs).
    pub fn set_markers(&self, head: u64, safe: u64, finalized: u64) -> StorageResult<()> {
        let old = self.head_not_above(head)?;
        {
            let mut t = self.txn.open_table(tables::META)?;
            t.insert(meta::HEAD, head.to_be_bytes().as_slice())?;
            t.insert(meta::SAFE, safe.to_be_bytes().as_slice())?;
            t.insert(meta::FINALIZED, finalized.to_be_bytes().as_slice())?;
        }
        super::history::changes::prune_changes(&self.txn, head)?;
        let closing = self.flush_before_close(old, head)?;
        super::history::epochs::follow_head(&self.txn, old, head, &closing)?;
        self.freeze_due()
    }

    /// Stores a block: header, canonical index, body, transactions with senders, tx lookups and
    /// receipts. `senders[i]` is the sender of `block.body.transactions[i]`.
    pub fn insert_block(
        &self,
        block: &Block<TxEnvelope>,
        hash: B256,
        senders: &[Address],
        receipts: &[ReceiptEnvelope],
        access_list: Option<&alloy_eip7928::BlockAccessList>,
    ) -> StorageResult<()> {
        let number = block.header.number;
        let mut buf = Vec::with_capacity(512);
        block.header.encode(&mut buf);
        self.txn.open_table(tables::HEADERS)?.insert(number, buf.as_slice())?;
        self.txn.open_table(tables::CANONICAL)?.insert(number, &hash.0)?;
        self.txn.open_table(tables::HASH_TO_NUMBER)?.insert(&hash.0, number)?;

        let txs = &block.body.transactions;
        let count = u32::try_from(txs.len()).unwrap_or(u32::MAX);
        buf.clear();
        buf.extend_from_slice(&count.to_be_bytes());
        let rest: BlockBody<TxEnvelope, Header> = BlockBody {
            transactions: Vec::new(),
            ommers: block.body.ommers.clone(),
            withdrawals: block.body.withdrawals.clone(),
        };
        rest.encode(&mut buf);
        self.txn.open_table(tables::BODIES)?.insert(number, buf.as_slice())?;

        let mut tx_table = self.txn.open_table(tables::TRANSACTIONS)?;
        let mut lookups = Vec::with_capacity(txs.len());
        for (i, (tx, sender)) in txs.iter().zip(senders).enumerate() {
            let key = tx_key(number, i as u32);
            buf.clear();
            buf.extend_from_slice(sender.as_slice());
            tx.encode_2718(&mut buf);
            tx_table.insert(&key, buf.as_slice())?;
            lookups.push((tx.tx_hash().0, key));
        }
        self.defer(|d| d.lookups.extend(lookups))?;
        buf.clear();
        super::codec::encode_receipts(receipts, &mut buf);
        self.txn.open_table(tables::RECEIPTS)?.insert(number, buf.as_slice())?;
        if let Some(list) = access_list {
            buf.clear();
            super::access_list::encode_access_list(list, &mut buf);
            self.txn.open_table(tables::ACCESS_LISTS)?.insert(number, buf.as_slice())?;
        }
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
                d.trace_addresses.push(super::codec::address_block_key(a, block));
                keys.extend_from_slice(a.as_slice());
            }
        })?;
        super::record_changes(&self.txn, block, super::ChangeKind::TraceAddresses, &keys)
    }

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

    pub(super) fn apply(
        &self,
        block: u64,
        history: bool,
        changes: &StateChangeset,
    ) -> StorageResult<()> {
        let mut bytecodes = self.txn.open_table(tables::BYTECODES)?;
        let mut hashed = HashedWrites::open(&self.txn, history, self.deferred())?;

        for (hash, code) in &changes.contracts {
            if bytecodes.get(&hash.0)?.is_none() {
                bytecodes.insert(&hash.0, code.original_byte_slice())?;
            }
        }
        drop(bytecodes);
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
        let changed = hashed.finish();
        self.defer(|_| ())?;
        if history {
            use super::history::changes::{ChangeKind, record_changes};
            record_changes(&self.txn, block, ChangeKind::HashedAccounts, &changed.0)?;
            record_changes(&self.txn, block, ChangeKind::HashedStorage, &changed.1)?;
        }
        Ok(())
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
            let slot = super::state::preimage::<32>(&preimages, &B256::from_slice(&k[32..]))?;
            if let Some(entry) = out.get_mut(address) {
                let (_, value) = decode_slot(v.value(), "hashed_storage")?;
                entry.1.insert(U256::from_be_bytes(slot), value);
            }
        }
        Ok(out)
    }
}

/// The hashed-state tables of one [`Writer::apply_changeset`] call, with their history (read
/// only where a block's rows were partly written already: [`HeldRows::record`]).
struct HashedWrites<'t> {
    preimages: Table<'t, &'static [u8; 32], &'static [u8]>,
    accounts: Table<'t, &'static [u8; 32], &'static [u8]>,
    account_history: Table<'t, &'static [u8; 44], &'static [u8]>,
    storage: Table<'t, &'static [u8; 64], &'static [u8]>,
    storage_history: Table<'t, &'static [u8; 76], &'static [u8]>,
    history: bool,
    /// The writer's deferred rows, which hold the history rows (`storage::history::held`).
    deferred: std::sync::MutexGuard<'t, Deferred>,
    epochs: super::history::epochs::Epochs,
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
        history: bool,
        deferred: std::sync::MutexGuard<'t, Deferred>,
    ) -> StorageResult<Self> {
        Ok(Self {
            preimages: txn.open_table(tables::PREIMAGES)?,
            accounts: txn.open_table(tables::HASHED_ACCOUNTS)?,
            account_history: txn.open_table(tables::HASHED_ACCOUNT_HISTORY)?,
            storage: txn.open_table(tables::HASHED_STORAGE)?,
            storage_history: txn.open_table(tables::HASHED_STORAGE_HISTORY)?,
            history,
            deferred,
            epochs: super::history::epochs::history_epochs(txn)?,
            changed_accounts: Vec::new(),
            changed_slots: Vec::new(),
            new_preimages: Vec::new(),
            account_bits: Vec::new(),
            slot_bits: Vec::new(),
        })
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
                let old = self.accounts.get(&hashed_address.0)?.map(|v| v.value().to_vec());
                let storage_root = match &old {
                    Some(o) => HashedAccount::decode(o, "hashed_accounts")?.storage_root,
                    None => EMPTY_ROOT_HASH,
                };
                let stamp = block;
                let row = HashedAccount { address: *address, account, storage_root }.encode(stamp);
                self.accounts.insert(&hashed_address.0, row.as_slice())?;
                old
            }
            None => self.accounts.remove(&hashed_address.0)?.map(|v| v.value().to_vec()),
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
        if self.deferred.account_history.record(&self.account_history, &hkey, old_bytes)? {
            self.changed_accounts.extend_from_slice(hashed_address.as_slice());
        }
        Ok(())
    }

    /// Deletes every slot of an account, recording each in history.
    fn wipe(&mut self, block: u64, hashed_address: &B256) -> StorageResult<()> {
        let from = hashed_storage_key(hashed_address, &B256::ZERO);
        let to = hashed_storage_key(hashed_address, &B256::repeat_byte(0xff));
        let mut existing = Vec::new();
        for item in self.storage.range::<&[u8; 64]>(&from..=&to)? {
            let (k, v) = item?;
            existing.push((*k.value(), v.value().to_vec()));
        }
        for (k, v) in existing {
            self.storage.remove(&k)?;
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
        let old = if value.is_zero() {
            self.storage.remove(&key)?
        } else {
            let stamp = block;
            self.storage.insert(&key, SlotRow::new(stamp, value).as_slice())?
        }
        .map(|v| v.value().to_vec());
        // Slot preimages are shared by every account, so most already exist: a read first
        // keeps their pages clean.
        if old.is_none() && !value.is_zero() && self.preimages.get(&hashed_slot.0)?.is_none() {
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
        if self.deferred.slot_history.record(&self.storage_history, &hkey, old.unwrap_or(&[]))? {
            self.changed_slots.extend_from_slice(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Database, Epochs};
    use alloy_consensus::{Signed, TxLegacy};
    use alloy_primitives::{Signature, TxKind};

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
        w.set_head(number).unwrap();
        b.body.transactions.iter().map(|t| *t.tx_hash()).collect()
    }

    #[test]
    fn deferred_lookup_rows_are_written_by_the_commit_and_undone_by_an_unwind_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 }).unwrap();
        let (a, b) = (Address::with_last_byte(0xa), Address::with_last_byte(0xb));
        let w = db.begin_write().unwrap();
        w.set_markers(0, 0, 0).unwrap();
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
            w.set_markers(0, 0, 0).unwrap();
            for block in 1..=8 {
                w.apply_changeset(block, &changes(block)).unwrap();
                w.set_head(block).unwrap();
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
