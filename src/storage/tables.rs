//! Every redb table of the archive, with its key, value and the lookup it serves.
//!
//! Integers in keys are big-endian so that byte order is numeric order; composite keys are
//! fixed-width byte arrays so that a range scan over a prefix visits one entity in block order.

use redb::TableDefinition;

/// `block number → RLP(header)`. Canonical headers only (loupe follows one chain).
pub const HEADERS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("headers");

/// `block number → block hash` of the canonical chain; answers `BLOCKHASH` and tag lookups.
pub const CANONICAL: TableDefinition<'_, u64, &[u8; 32]> = TableDefinition::new("canonical");

/// `block hash → block number`, for lookups by hash.
pub const HASH_TO_NUMBER: TableDefinition<'_, &[u8; 32], u64> =
    TableDefinition::new("hash_to_number");

/// `block number → tx count (u32 BE) ++ RLP(BlockBody with no transactions)`: the ommers and
/// withdrawals of a block. Transactions live in [`TRANSACTIONS`].
pub const BODIES: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("bodies");

/// `(block number BE, index u32 BE) → sender (20 bytes) ++ EIP-2718 encoding`. One point read
/// serves `eth_getTransactionByBlockNumberAndIndex`; a prefix scan yields a block's transactions
/// with their recovered senders.
pub const TRANSACTIONS: TableDefinition<'_, &[u8; 12], &[u8]> =
    TableDefinition::new("transactions");

/// `block number → 0x01 ++ length u32 BE ++ zstd(RLP(list of [type, status, cumulative gas,
/// logs]))`, or `0x00 ++ RLP(…)` for a short list: the block's receipts without their blooms,
/// which are recomputed from the logs when read (`codec::receipts::decode_receipts`; rows written before
/// start with the RLP list of whole envelopes and still read, as do plain rows of long lists).
/// Pre-Byzantium receipts carry the intermediate state root instead of a status.
pub const RECEIPTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("receipts");

/// `block number → 0x00 ++ RLP(block access list)`, or `0x01 ++ length u32 BE ++ zstd(RLP)` for
/// a long one (`storage::access_list`): the EIP-7928 list an Amsterdam block's execution built,
/// which its header's `blockAccessListHash` commits to (`eth_getBlockAccessList`). No row for a
/// block before Amsterdam. Frozen with the block's other data.
pub const ACCESS_LISTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("access_lists");

/// `tx hash → (block number BE, index u32 BE)`: lookups by transaction hash.
pub const TX_LOOKUP: TableDefinition<'_, &[u8; 32], &[u8; 12]> = TableDefinition::new("tx_lookup");

/// `code hash → bytecode` (original bytes). Never deleted: history may still point at it.
pub const BYTECODES: TableDefinition<'_, &[u8; 32], &[u8]> = TableDefinition::new("bytecodes");

/// `keccak(slot) → slot` (32 bytes): the preimage of every hashed storage slot the state has
/// held, so that the hashed tables, the only copy of the state, can be listed by slot
/// ([`crate::storage::StateAt::dump`]; account rows carry their address). Written when a slot
/// first appears; never deleted (history may still name it). A slot's preimage is shared by
/// every account that uses the slot.
pub const PREIMAGES: TableDefinition<'_, &[u8; 32], &[u8]> = TableDefinition::new("preimages");

/// `keccak(address) → account` (`HashedAccount::encode`: the stamp, flags, address, nonce and
/// balance, the numbers without leading zeros, then the code hash and the storage root only
/// where they are not empty; about 35 bytes for a plain account; the stamp is the block that
/// wrote the row, `codec::account::row_stamp`): the state after the head, keyed as the state
/// trie keys it, with each account's storage root cached, so that an account leaf is one read. The only copy of the
/// current accounts: the EVM reads it by `keccak(address)` too. Kept by
/// [`crate::storage::Writer`]; the storage root is filled in by the trie.
pub const HASHED_ACCOUNTS: TableDefinition<'_, &[u8; 32], &[u8]> =
    TableDefinition::new("hashed_accounts");

/// `keccak(address) ++ keccak(slot) → stamp ++ value` (`codec::account::SlotRow`: the block that wrote
/// the row, then the value big-endian without leading zeros): storage after the head, keyed as
/// the storage tries key it. Zero values are absent.
pub const HASHED_STORAGE: TableDefinition<'_, &[u8; 64], &[u8]> =
    TableDefinition::new("hashed_storage");

/// `epoch u32 BE ++ keccak(address) ++ block BE → hashed account before that block` (empty: did
/// not exist). History tables are partitioned by epoch (`storage::history::keys`): a block's rows land
/// in its own epoch's range, whose size does not grow with the chain.
///
/// Written once per account and block in which the account (or its storage root) changed. To
/// read an account as it was *after* block N, find the first row of the account after N: in
/// the epoch of N+1, else in the first later epoch that holds one ([`HASHED_ACCOUNT_EPOCHS`],
/// or the open epoch, which is not indexed yet). Its value is the account before that later
/// change, which is the account after N. No such row: the account has not changed since N, so
/// the current value in [`HASHED_ACCOUNTS`] is the answer. The current row's stamp (the block
/// that wrote it) often settles it first: written at or before N, it is the answer.
pub const HASHED_ACCOUNT_HISTORY: TableDefinition<'_, &[u8; 44], &[u8]> =
    TableDefinition::new("hashed_account_history_e");

/// `epoch ++ keccak(address) ++ keccak(slot) ++ block BE → row before that block` (a
/// [`HASHED_STORAGE`] row with its stamp; empty: unset). The same lookup as [`HASHED_ACCOUNT_HISTORY`], falling back to [`HASHED_STORAGE`].
/// Wiping an account's storage (self-destruct) writes an entry for every slot it held.
pub const HASHED_STORAGE_HISTORY: TableDefinition<'_, &[u8; 76], &[u8]> =
    TableDefinition::new("hashed_storage_history_e");

/// `keccak(address) ++ run u32 BE → bitmap u64`: the closed epochs holding rows of an account in
/// [`HASHED_ACCOUNT_HISTORY`] (the epoch index; `storage::history::index`), one row per run of
/// [`crate::storage::history::keys::EPOCHS_PER_RUN`] epochs with a bit for each; all but the epoch of the
/// current row's stamp, which that row names.
pub const HASHED_ACCOUNT_EPOCHS: TableDefinition<'_, &[u8; 36], u64> =
    TableDefinition::new("hashed_account_epochs");

/// `keccak(address) ++ keccak(slot) ++ run → bitmap`: the epoch index of
/// [`HASHED_STORAGE_HISTORY`].
pub const HASHED_STORAGE_EPOCHS: TableDefinition<'_, &[u8; 68], u64> =
    TableDefinition::new("hashed_storage_epochs");

/// `nibble path (packed, 32 bytes) ++ length → branch node` of the account trie. Only branch
/// nodes the trie needs to skip work are stored (see `src/trie`); leaves and extensions are
/// rebuilt from [`HASHED_ACCOUNTS`]. The packed key sorts in nibble order.
pub const ACCOUNT_TRIE: TableDefinition<'_, &[u8; 33], &[u8]> =
    TableDefinition::new("account_trie");

/// `keccak(address) ++ packed path ++ length → branch node` of each account's storage trie.
pub const STORAGE_TRIE: TableDefinition<'_, &[u8; 65], &[u8]> =
    TableDefinition::new("storage_trie");

/// `epoch ++ packed path ++ length ++ block BE → account-trie node before that block` (empty:
/// absent), whole or as a delta against the node's next version (`storage::history::nodes`). A
/// node's first row in each epoch is whole. The node at a path after block N: the first row
/// after N (found as for [`HASHED_ACCOUNT_HISTORY`]), resolved forward within its epoch to a
/// whole row, or with one hop to the node's next version (a whole row in a later epoch, or
/// [`ACCOUNT_TRIE`]): at most [`crate::storage::history::nodes::FULL_ROW_EVERY`] rows of one range scan.
pub const ACCOUNT_TRIE_HISTORY: TableDefinition<'_, &[u8; 45], &[u8]> =
    TableDefinition::new("account_trie_history_e");

/// `epoch ++ keccak(address) ++ packed path ++ length ++ block BE → storage-trie node before
/// that block` (empty: absent), whole or a delta, read as [`ACCOUNT_TRIE_HISTORY`] is.
pub const STORAGE_TRIE_HISTORY: TableDefinition<'_, &[u8; 77], &[u8]> =
    TableDefinition::new("storage_trie_history_e");

/// `packed path ++ length ++ run → bitmap`: the epoch index of [`ACCOUNT_TRIE_HISTORY`].
pub const ACCOUNT_TRIE_EPOCHS: TableDefinition<'_, &[u8; 37], u64> =
    TableDefinition::new("account_trie_epochs");

/// `keccak(address) ++ packed path ++ length ++ run → bitmap`: the epoch index of
/// [`STORAGE_TRIE_HISTORY`].
pub const STORAGE_TRIE_EPOCHS: TableDefinition<'_, &[u8; 69], u64> =
    TableDefinition::new("storage_trie_epochs");

/// `block BE ++ kind (u8) → keys`: the change index. For each history table (the kind, see
/// [`crate::storage::history::changes::ChangeKind`]) the sorted keys of the rows `block` wrote there, so that a
/// block can be unwound without scanning history ([`crate::storage::Writer::unwind_head`]).
/// Under `kind + 0x10` the keys are front-coded (trie paths trimmed to the nibbles they use);
/// under `kind` alone (format 4) they are concatenated. Both are read. Only the newest
/// blocks keep their lists ([`meta::UNWIND_DEPTH`]): unwinding serves reorgs, not the archive.
pub const BLOCK_CHANGES: TableDefinition<'_, &[u8; 9], &[u8]> =
    TableDefinition::new("block_changes");

/// `address ++ block BE → ()`: the blocks whose execution touched an address (every account
/// the EVM loaded, the author, ommer authors and withdrawal recipients: a superset of the
/// `from`/`to` of the block's Parity traces). `trace_filter` replays only those blocks. Blocks
/// before [`meta::TRACE_INDEX_FROM`] (imported by an older version) are not indexed.
pub const TRACE_ADDRESSES: TableDefinition<'_, &[u8; 28], ()> =
    TableDefinition::new("trace_addresses");

/// Calls the macro `$m` with every table of the schema, in the order of this file, so that
/// whatever must visit each table (creating them, a copy, the statistics) cannot miss one added
/// later.
macro_rules! for_each_table {
    ($m:ident) => {
        $m!(
            HEADERS,
            CANONICAL,
            HASH_TO_NUMBER,
            BODIES,
            TRANSACTIONS,
            RECEIPTS,
            ACCESS_LISTS,
            TX_LOOKUP,
            BYTECODES,
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
            BLOCK_CHANGES,
            TRACE_ADDRESSES,
            META
        )
    };
}
pub(crate) use for_each_table;

/// Named values: `genesis` (the genesis.json the database was initialised with, its `alloc`
/// left out: the allocation is in the state tables), `alloc_digest`, `head`, `safe`,
/// `finalized` (block numbers, u64 BE), `schema` (format version).
pub const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");

/// Keys of [`META`].
pub mod meta {
    /// The genesis.json text.
    pub const GENESIS: &str = "genesis";
    /// Number of the last fully stored block.
    pub const HEAD: &str = "head";
    /// The `safe` block number.
    pub const SAFE: &str = "safe";
    /// The `finalized` block number.
    pub const FINALIZED: &str = "finalized";
    /// Storage format version.
    pub const SCHEMA: &str = "schema";
    /// Order-independent digest of the genesis allocation (32 bytes), to recognise the same
    /// genesis again without rebuilding its state.
    pub const ALLOC_DIGEST: &str = "alloc_digest";
    /// First block indexed in [`super::TRACE_ADDRESSES`] (u64 BE); absent: none yet.
    pub const TRACE_INDEX_FROM: &str = "trace_index_from";
    /// Blocks per history epoch (u64 BE), fixed when the tables are created.
    pub const HISTORY_EPOCH: &str = "history_epoch";
    /// How many of the newest blocks keep their change lists in [`super::BLOCK_CHANGES`] (u64
    /// BE), so that they can be unwound; absent: `storage::history::changes::DEFAULT_UNWIND_DEPTH`.
    pub const UNWIND_DEPTH: &str = "unwind_depth";
    /// How strictly headers are checked (`strict` or `dev`, `chain::HeaderPolicy`), chosen at
    /// init. Absent (a datadir made before it was recorded): `dev` for chain id 31337, else
    /// `strict`.
    pub const HEADER_POLICY: &str = "header_policy";
    /// The oldest block whose change lists are kept (u64 BE): every older one's were pruned.
    /// Absent: none were.
    pub const CHANGES_FROM: &str = "changes_from";
    /// Which trie history the datadir keeps (`all` or `window`, `storage::segments::ProofHistory`),
    /// chosen at init. Absent: `all`.
    pub const PROOF_HISTORY: &str = "proof_history";
    /// The last block whose state root a bulk import checked once for its whole commit group
    /// (u64 BE; `loupe import --state-root group`): the trie history is exact at it and at
    /// every later block, not at the blocks before it in its group, so proofs and unwinding
    /// stop there. Absent: every block's root was checked and stored.
    pub const GROUP_ROOT_AT: &str = "group_root_at";
    /// In a datadir that keeps trie history at every block (`--proof-history all`): the last
    /// block up to which every block's trie history is per block (u64 BE). The blocks after it
    /// up to [`GROUP_ROOT_AT`] were imported with one state root per epoch and wait for the
    /// trie-history stage (`trie::stage`), which builds their per-block history and moves
    /// this marker. Absent: [`GROUP_ROOT_AT`] (nothing waits).
    pub const TRIE_HISTORY_TO: &str = "trie_history_to";
    /// The block whose header state root the trie-history stage found to differ from the
    /// root of its state (u64 BE ++ the header's root ++ the computed one): the stage stopped
    /// there. Absent: no such block.
    pub const TRIE_STAGE_FAILED: &str = "trie_stage_failed";
    /// The segment manifest (JSON, `storage::segments::Manifest`): the live segment files and
    /// the first epoch whose history rows are still in the B-tree. Absent: nothing frozen.
    pub const SEGMENTS: &str = "segments";
    /// The anchor block (u64 BE) of a datadir that starts there instead of at genesis
    /// (`import::anchor`): it holds the headers up to the anchor and only a partial state at it
    /// (the part a witness gives), no state or bodies below it and no trie. Absent: the chain
    /// starts at genesis.
    pub const ANCHOR: &str = "anchor";
    /// The genesis state root (32 bytes) of an anchored datadir, which holds no genesis
    /// header to read it from.
    pub const ANCHOR_GENESIS_ROOT: &str = "anchor_genesis_root";
}

/// Current storage format version, stored under [`meta::SCHEMA`].
///
/// 2: hashed state, stored trie nodes and their history (incremental state root, proofs).
/// 3: the per-block change index [`BLOCK_CHANGES`] (unwinding).
/// 4: one copy of the state: the plain tables keyed by address (`accounts`, `storage` and
///    their history) are gone; the EVM reads the hashed tables, and [`PREIMAGES`] maps
///    hashes back to addresses and slots.
/// 5: trie-node history rows may be deltas (the child hashes that differ from the next
///    version, `storage::history::nodes`), and change lists are front-coded.
/// 6: history tables partitioned by epoch, with an index of the epochs that hold each key
///    (`storage::history::index`); a node's first trie-history row in each epoch is whole. Older
///    formats are refused: their chain must be imported again.
/// 7: account rows (current and history) in a compact layout: plain accounts leave out the
///    code hash and the storage root, and nonce and balance their leading zeros
///    (`HashedAccount::encode`). Format 6 is refused like the older ones.
/// 8: an epoch index row covers a run of [`crate::storage::history::keys::EPOCHS_PER_RUN`] epochs, a bit for
///    each (it was one row per key and epoch). Format 7 is refused like the older ones.
/// 9: account and slot rows carry a stamp, the block that wrote them, and the epoch indexes of
///    the hashed state leave out the epoch each current row's stamp names (slot values lose
///    their leading zeros). Format 8 is refused like the older ones.
/// 10: a block's receipts row is compressed with zstd (`0x01`, see [`RECEIPTS`]). A format 9
///    datadir opens as format 10 with nothing rewritten: its plain receipts rows still read.
/// 11: closed epochs behind the unwind window frozen into segment files named by
///    [`meta::SEGMENTS`] (`storage::segments`). Formats 9 and 10 open as format 11 with nothing
///    rewritten (a datadir without a manifest has frozen nothing).
/// 12: trie-history segment files keep a node's rows together (`node ++ epoch ++ block`), and
///    a merge chains them into one run of deltas across its parts
///    (`storage::segments::Kind::is_node_first`). A format 11 datadir without trie-history
///    segment files opens as format 12; one with them is refused.
/// 13: state-history segment files (accounts, slots) keep an entity's rows together too
///    (`entity ++ epoch ++ block`, `storage::segments::Kind::is_entity_first`). A format 12
///    datadir without state-history segment files, or a format 11 one without trie- or
///    state-history files, opens as format 13; one with them is refused.
pub const SCHEMA_VERSION: u64 = 13;
