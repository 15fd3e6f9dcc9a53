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

/// `block number → RLP(list of receipt envelopes)`. Pre-Byzantium receipts carry the
/// intermediate state root instead of a status.
pub const RECEIPTS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("receipts");

/// `tx hash → (block number BE, index u32 BE)`: lookups by transaction hash.
pub const TX_LOOKUP: TableDefinition<'_, &[u8; 32], &[u8; 12]> = TableDefinition::new("tx_lookup");

/// `code hash → bytecode` (original bytes). Never deleted: history may still point at it.
pub const BYTECODES: TableDefinition<'_, &[u8; 32], &[u8]> = TableDefinition::new("bytecodes");

/// `address → account` (nonce u64 BE ++ balance 32 BE ++ code hash 32): state after the head.
pub const ACCOUNTS: TableDefinition<'_, &[u8; 20], &[u8; 72]> = TableDefinition::new("accounts");

/// `address ++ slot → value` (32 BE each): storage after the head. Zero values are absent.
pub const STORAGE: TableDefinition<'_, &[u8; 52], &[u8; 32]> = TableDefinition::new("storage");

/// `address ++ block BE → account before that block` (empty value: the account did not exist).
///
/// Written once per account and block in which the account changed. To read an account as it
/// was *after* block N, seek the first key `>= address ++ (N+1)` with the same address: its value
/// is the account before that later change, which is the account after N. No such key: the
/// account has not changed since N, so the current value in [`ACCOUNTS`] is the answer.
pub const ACCOUNT_HISTORY: TableDefinition<'_, &[u8; 28], &[u8]> =
    TableDefinition::new("account_history");

/// `address ++ slot ++ block BE → value before that block` (zero if unset). Same one-seek lookup
/// as [`ACCOUNT_HISTORY`], falling back to [`STORAGE`]. Wiping an account's storage
/// (self-destruct) writes an entry for every slot it held.
pub const STORAGE_HISTORY: TableDefinition<'_, &[u8; 60], &[u8; 32]> =
    TableDefinition::new("storage_history");

/// Named values: `genesis` (the genesis.json text the database was initialised with), `head`,
/// `safe`, `finalized` (block numbers, u64 BE), `schema` (format version).
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
}

/// Current storage format version, stored under [`meta::SCHEMA`].
pub const SCHEMA_VERSION: u64 = 1;
