//! Import errors. Each names the block (number and hash where known) and what mismatched.

use alloy_primitives::B256;

use super::SourceError;
use crate::chain::ChainError;
use crate::evm::EvmError;
use crate::storage::StorageError;

/// Why an import or init stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A thread that reads or executes the chain files ahead could not be started.
    #[error("cannot start an import thread: {error}")]
    Thread {
        /// Why the system refused.
        error: std::io::Error,
    },
    /// A chain file could not be opened.
    #[error("cannot open chain file {path}: {error}")]
    Open {
        /// Path given.
        path: String,
        /// I/O error.
        error: std::io::Error,
    },
    /// A chain file could not be decoded.
    #[error("{path}: {error} (expected block #{expected_block} next)")]
    Source {
        /// Path of the file.
        path: String,
        /// Number of the block the importer was waiting for.
        expected_block: u64,
        /// What was wrong with the bytes.
        error: SourceError,
    },
    /// An era1 file failed a check made before any of its blocks runs.
    #[error("{path}: refused before any of its blocks ran: {error}")]
    Era1 {
        /// Path of the file.
        path: String,
        /// What was wrong with it.
        error: SourceError,
    },
    /// A file of an export could not be written.
    #[error("cannot write {path}: {error}")]
    Write {
        /// Path of the file.
        path: String,
        /// I/O error.
        error: std::io::Error,
    },
    /// A block below the head lacks a part an export needs.
    #[error("block #{number}: its {what} are not stored")]
    NotStored {
        /// Block number.
        number: u64,
        /// Which part.
        what: &'static str,
    },
    /// A block failed a check.
    #[error("block #{number} ({hash}): {what} mismatch: expected {expected}, got {got}")]
    Mismatch {
        /// Block number.
        number: u64,
        /// Block hash.
        hash: B256,
        /// Which commitment.
        what: &'static str,
        /// Value in the block header (or required value).
        expected: String,
        /// Value loupe computed.
        got: String,
    },
    /// A block breaks a consensus rule checked before it runs (`import::header`): its header
    /// against its parent, or its body's shape.
    #[error("block #{number} ({hash}): invalid header: {rule} rule: {detail}")]
    InvalidHeader {
        /// Block number.
        number: u64,
        /// Block hash.
        hash: B256,
        /// The rule broken.
        rule: Rule,
        /// The values that break it.
        detail: String,
    },
    /// The block access list the block's execution built is larger than its gas limit pays for
    /// (EIP-7928: each account and each slot costs 2,000 gas).
    #[error(
        "block #{number} ({hash}): block access list rule (EIP-7928): {items} accounts and \
         slots cost {cost} gas, more than the gas limit {gas_limit}"
    )]
    AccessListTooLarge {
        /// Block number.
        number: u64,
        /// Block hash.
        hash: B256,
        /// Accounts and slots in the list.
        items: u64,
        /// What they cost.
        cost: u64,
        /// The block's gas limit.
        gas_limit: u64,
    },
    /// A system contract the block's fork calls after its transactions has no code in the
    /// parent's state: the block is invalid (EIP-7002, EIP-7251, EIP-8282).
    #[error(
        "block #{number} ({hash}): system contract rule ({eip}): the {name} at {address} has no \
         code, so no block of this fork is valid before it is deployed"
    )]
    MissingSystemContract {
        /// Block number.
        number: u64,
        /// Block hash.
        hash: B256,
        /// The EIP that calls it.
        eip: &'static str,
        /// What it is.
        name: &'static str,
        /// Where it should be.
        address: alloy_primitives::Address,
    },
    /// A block arrived out of order.
    #[error("block #{number} ({hash}) is out of order: expected block #{expected} next")]
    OutOfOrder {
        /// Block number found.
        number: u64,
        /// Its hash.
        hash: B256,
        /// The block number wanted.
        expected: u64,
    },
    /// A block conflicts with a stored block of the same number.
    #[error("block #{number} ({hash}) conflicts with the stored block {stored} at that height")]
    Conflict {
        /// Block number.
        number: u64,
        /// Hash of the new block.
        hash: B256,
        /// Hash stored.
        stored: B256,
    },
    /// A signature did not recover.
    #[error("block #{number} ({hash}): transaction {index} has an invalid signature: {message}")]
    Signature {
        /// Block number.
        number: u64,
        /// Block hash.
        hash: B256,
        /// Transaction index.
        index: usize,
        /// Details.
        message: String,
    },
    /// Execution failed.
    #[error("block #{number} ({hash}): execution failed: {error}")]
    Execution {
        /// Block number.
        number: u64,
        /// Block hash.
        hash: B256,
        /// The EVM error.
        error: EvmError,
    },
    /// The datadir holds a different chain.
    #[error(
        "datadir was initialised with another genesis: stored genesis hash {stored}, \
         given genesis hash {given}"
    )]
    GenesisMismatch {
        /// Hash of the stored genesis.
        stored: B256,
        /// Hash of the given genesis.
        given: B256,
    },
    /// A genesis with a named network's chain id that is not that network's genesis.
    #[error(
        "chain id {chain_id} is {network}'s, whose genesis hash is {known}, but this genesis \
         gives {given}: use `--chain {network}` for {network}; for a private chain, another \
         chain id, or `--allow-foreign-genesis` to keep this one"
    )]
    NotTheNetwork {
        /// The network.
        network: &'static str,
        /// Its chain id.
        chain_id: u64,
        /// Its genesis hash.
        known: B256,
        /// The given genesis's hash.
        given: B256,
    },
    /// The lenient header policy asked for a named network.
    #[error(
        "--header-policy dev is refused for {network}: a public network's blocks follow every \
         rule (dev exists for anvil and hardhat chains)"
    )]
    DevPolicyRefused {
        /// The network.
        network: &'static str,
    },
    /// `init` asked for another header policy than the datadir recorded.
    #[error(
        "the datadir was initialised with --header-policy {stored}; it cannot change to \
         {asked} (initialise a new datadir)"
    )]
    PolicyMismatch {
        /// The recorded policy.
        stored: crate::chain::HeaderPolicy,
        /// The policy asked for.
        asked: crate::chain::HeaderPolicy,
    },
    /// `init` asked for another trie history than the datadir keeps.
    #[error(
        "the datadir was initialised with --proof-history {stored}; it cannot change to \
         {asked} (initialise a new datadir)"
    )]
    ProofHistoryMismatch {
        /// The recorded choice.
        stored: crate::storage::segments::ProofHistory,
        /// The choice asked for.
        asked: crate::storage::segments::ProofHistory,
    },
    /// The headers or accounts given to [`super::init_anchored`] do not make an anchored
    /// datadir (why is in the text).
    #[error("anchored datadir: {0}")]
    AnchorInput(String),
    /// An anchored datadir ([`super::init_anchored`]) was asked for what needs the full state
    /// trie or the chain from genesis.
    #[error(
        "this datadir holds only the state of a witness (it starts at anchor block {anchor}, without the full state trie): {what}"
    )]
    Anchored {
        /// The anchor block.
        anchor: u64,
        /// What was refused.
        what: &'static str,
    },
    /// [`super::import_block_trusted_root`] on a datadir that is not anchored, whose trie the
    /// block must update.
    #[error(
        "this datadir starts at genesis and keeps the full state trie: import the block with import_block, which computes its state root"
    )]
    NotAnchored,
    /// Import into a datadir that has no genesis yet.
    #[error("datadir is not initialised: run `loupe init --chain NAME|FILE` or pass --chain")]
    NotInitialised,
    /// The stored genesis text is not valid.
    #[error("chain definition: {0}")]
    Chain(#[from] ChainError),
    /// [`super::import_block_uncommitted`] got a writer that has already written.
    #[error("the write transaction has uncommitted changes; use import_block_on_writer")]
    WriterNotFresh,
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The state trie failed (a storage error, or a corrupt trie row).
    #[error("state trie: {0}")]
    Trie(#[from] crate::trie::TrieError),
    /// Adds the byte offset of the block in its file.
    #[error("{error} [at byte offset {offset}]")]
    AtOffset {
        /// Offset of the block's first byte.
        offset: u64,
        /// The error.
        error: Box<Self>,
    },
}

impl ImportError {
    pub(super) fn at_offset(self, offset: u64) -> Self {
        match self {
            Self::Storage(_) | Self::Trie(_) => self,
            other => Self::AtOffset { offset, error: Box::new(other) },
        }
    }

    /// The error without the byte-offset wrapper.
    pub fn root(&self) -> &Self {
        match self {
            Self::AtOffset { error, .. } => error.root(),
            other => other,
        }
    }
}

/// The rule a refused block broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A block number one above its parent's.
    Number,
    /// Extra data at most 32 bytes.
    ExtraData,
    /// Mainnet blocks 1,920,000–1,920,009 carry `dao-hard-fork` (EIP-779).
    DaoExtraData,
    /// A timestamp strictly later than the parent's.
    Timestamp,
    /// A proof-of-work block at most 15 s ahead of the clock.
    FutureTimestamp,
    /// The gas limit within parent/1024 of the parent's, at least 5,000, at most 2^63 - 1.
    GasLimit,
    /// Gas used at most the gas limit.
    GasUsed,
    /// The base fee: absent before London, 1 gwei at the London block, then EIP-1559.
    BaseFee,
    /// Difficulty by the formula of the fork; zero with a zero nonce after the merge.
    Difficulty,
    /// After the merge (EIP-3675): zero nonce, no ommers.
    ProofOfStake,
    /// Withdrawals (EIP-4895) exactly from Shanghai on.
    Withdrawals,
    /// Blob gas fields and the beacon root (EIP-4844, EIP-4788) exactly from Cancun on, within
    /// their bounds.
    BlobGas,
    /// The requests hash (EIP-7685) exactly from Prague on.
    Requests,
    /// At most 2 ommers, each a valid header of a recent side block, never an ancestor, never
    /// included twice.
    Ommers,
    /// EIP-7934: the RLP block at most 8,388,608 bytes from Osaka on.
    BlockSize,
    /// A block body holds transactions in their consensus form: no blob sidecars.
    BlobSidecar,
    /// The block access list hash (EIP-7928) exactly from Amsterdam on.
    BlockAccessList,
    /// The slot number (EIP-7843) exactly from Amsterdam on.
    SlotNumber,
}

impl Rule {
    /// The rule's name, as errors print it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Number => "number",
            Self::ExtraData => "extra data",
            Self::DaoExtraData => "DAO fork extra data",
            Self::Timestamp => "timestamp",
            Self::FutureTimestamp => "future timestamp",
            Self::GasLimit => "gas limit",
            Self::GasUsed => "gas used",
            Self::BaseFee => "base fee",
            Self::Difficulty => "difficulty",
            Self::ProofOfStake => "proof of stake",
            Self::Withdrawals => "withdrawals",
            Self::BlobGas => "blob gas",
            Self::Requests => "requests hash",
            Self::Ommers => "ommers",
            Self::BlockSize => "block size",
            Self::BlobSidecar => "blob sidecar",
            Self::BlockAccessList => "block access list",
            Self::SlotNumber => "slot number",
        }
    }

    /// Whether [`HeaderPolicy::Dev`](crate::chain::HeaderPolicy::Dev) relaxes this rule, in
    /// part: an equal timestamp, the base fee's value, and blob sidecars in a body whose header
    /// commits to them (anvil's; the block is stored without them).
    pub const fn dev_relaxes(self) -> bool {
        matches!(self, Self::Timestamp | Self::BaseFee | Self::BlobSidecar)
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
