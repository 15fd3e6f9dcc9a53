//! [`BlockBuilder`]: seals blocks of signed transactions on top of the stored head, executing
//! them on the import path so every root is computed the same way import verifies it. Before
//! the merge a block carries the difficulty the chain's rule gives (its seal is not mined:
//! loupe does not verify proof of work) and only the fields its forks have. From Amsterdam a
//! block carries its slot number and the hash of the block access list (EIP-7928) its
//! execution built.

use alloy_consensus::proofs::{calculate_transaction_root, calculate_withdrawals_root};
use alloy_consensus::{Block, BlockBody, EMPTY_OMMER_ROOT_HASH, Header, TxEnvelope};
use alloy_eips::eip1559::{BaseFeeParams, INITIAL_BASE_FEE};
use alloy_eips::eip4895::Withdrawals;
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Address, B256, U256, keccak256};

use crate::chain::{ChainSpec, DifficultyParent, difficulty};
use crate::evm::execute_block;
use crate::import::{ImportError, import_block};
use crate::storage::Database;
use crate::trie::{RootMode, update_state_root};

/// Seconds between dev blocks.
pub const BLOCK_TIME: u64 = 12;

/// Builds and stores dev blocks.
#[derive(Debug)]
pub struct BlockBuilder<'a> {
    db: &'a Database,
    spec: &'a ChainSpec,
    durable: bool,
}

impl<'a> BlockBuilder<'a> {
    /// A builder on `db` (initialised with `spec`).
    pub fn new(db: &'a Database, spec: &'a ChainSpec) -> Self {
        Self { db, spec, durable: true }
    }

    /// Commits blocks without fsync (a scratch datadir, such as the generator's): a crash may
    /// lose the latest blocks whole, never half of one.
    pub fn non_durable(mut self) -> Self {
        self.durable = false;
        self
    }

    /// Seals `txs` (signed; `senders[i]` signed `txs[i]`) into the next block and imports it.
    pub fn build(
        &self,
        txs: Vec<TxEnvelope>,
        senders: &[Address],
    ) -> Result<Block<TxEnvelope>, ImportError> {
        let reader = self.db.begin_read()?;
        let head = reader.head()?.ok_or(ImportError::NotInitialised)?;
        let parent = reader.header(head)?.ok_or(ImportError::NotInitialised)?;
        let parent_hash = reader.canonical_hash(head)?.unwrap_or_default();
        let number = head + 1;
        let timestamp = parent.timestamp + BLOCK_TIME;
        let blob_params = self.spec.blob_params_at(timestamp);
        let spec = self.spec;
        let amsterdam = spec.is_amsterdam_active_at_timestamp(timestamp);
        let withdrawals =
            spec.is_shanghai_active_at_timestamp(timestamp).then(Withdrawals::default);
        let difficulty = if spec.is_paris_active_at_block(number) {
            U256::ZERO
        } else {
            let parent = DifficultyParent {
                number: parent.number,
                timestamp: parent.timestamp,
                difficulty: parent.difficulty,
                has_ommers: parent.ommers_hash != EMPTY_OMMER_ROOT_HASH,
            };
            difficulty(spec, timestamp, &parent)
        };
        // From London on: EIP-1559 from the parent's, 1 gwei at the London block.
        let base_fee_per_gas = spec.is_london_active_at_block(number).then(|| {
            parent.next_block_base_fee(BaseFeeParams::ethereum()).unwrap_or(INITIAL_BASE_FEE)
        });
        let mut header = Header {
            parent_hash,
            ommers_hash: EMPTY_OMMER_ROOT_HASH,
            beneficiary: Address::ZERO,
            transactions_root: calculate_transaction_root(&txs),
            number,
            gas_limit: parent.gas_limit,
            timestamp,
            extra_data: parent.extra_data.clone(),
            mix_hash: keccak256(number.to_be_bytes()),
            difficulty,
            base_fee_per_gas,
            withdrawals_root: withdrawals.as_ref().map(|w| calculate_withdrawals_root(w)),
            // (0 at the Cancun block, whose parent has none.)
            excess_blob_gas: blob_params.map(|p| parent.next_block_excess_blob_gas(p).unwrap_or(0)),
            parent_beacon_block_root: spec
                .is_cancun_active_at_timestamp(timestamp)
                .then_some(B256::ZERO),
            // Amsterdam (EIP-7843's SLOTNUM reads it, so it is set before execution): derived
            // from the timestamp as the beacon chain counts slots, one every `BLOCK_TIME`
            // seconds since genesis. The dev builder misses no slot, so on a chain built by it
            // from genesis this is the block number.
            slot_number: amsterdam
                .then(|| timestamp.saturating_sub(spec.genesis_header().timestamp) / BLOCK_TIME),
            ..Default::default()
        };
        let mut block = Block {
            header: header.clone(),
            body: BlockBody { transactions: txs, ommers: Vec::new(), withdrawals },
        };
        // Execute once to learn the results, in a write transaction that is then dropped.
        let writer = self.db.begin_write()?;
        let outcome = execute_block(self.spec, reader.state_at(head)?, &block, senders, |_| {
            Err::<B256, &str>("the dev builder builds blocks from Byzantium on")
        })
        .map_err(|error| ImportError::Execution { number, hash: B256::ZERO, error })?;
        writer.apply_changeset(number, &outcome.changes)?;
        header.state_root =
            update_state_root(&writer, number, &outcome.changes, RootMode::Compute)?;
        drop(writer);
        // From Amsterdam the block's gas is the larger of its regular and its state gas
        // (EIP-7778, EIP-8037), as alloy-evm's executor sums it.
        header.gas_used = outcome.gas_used;
        header.receipts_root = outcome.receipts_root;
        header.logs_bloom = outcome.logs_bloom;
        header.blob_gas_used = blob_params.map(|_| outcome.blob_gas_used);
        header.requests_hash =
            spec.is_prague_active_at_timestamp(timestamp).then(|| outcome.requests.requests_hash());
        // (Import checks it against the list its own execution builds.)
        header.block_access_list_hash = amsterdam.then(|| {
            alloy_eip7928::compute_block_access_list_hash(
                outcome.access_list.as_deref().unwrap_or_default(),
            )
        });
        block.header = header;
        // Store through import, which re-executes and verifies every commitment.
        import_block(self.db, self.spec, &block, self.durable)?;
        Ok(block)
    }
}
