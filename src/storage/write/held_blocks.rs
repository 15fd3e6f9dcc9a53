//! [`HeldBlocks`]: the block rows a write transaction holds until it writes them, each
//! table's through one open table.

use alloy_primitives::B256;

use crate::storage::StorageResult;
use crate::storage::tables;

/// The rows of one block, encoded as its tables keep them.
#[derive(Debug)]
pub(super) struct HeldBlock {
    pub(super) number: u64,
    pub(super) hash: B256,
    pub(super) header: Vec<u8>,
    pub(super) body: Vec<u8>,
    /// `(key, sender ++ EIP-2718 bytes)` of each transaction.
    pub(super) transactions: Vec<([u8; 12], Vec<u8>)>,
    pub(super) receipts: Vec<u8>,
    pub(super) access_list: Option<Vec<u8>>,
}

impl HeldBlock {
    fn bytes(&self) -> usize {
        let txs: usize = self.transactions.iter().map(|(_, v)| 12 + v.len()).sum();
        self.header.len()
            + self.body.len()
            + txs
            + self.receipts.len()
            + self.access_list.as_ref().map_or(0, Vec::len)
            + 64
    }
}

/// Blocks [`crate::storage::Writer::insert_block`] stored and the transaction has not written yet, in
/// ascending order. Each of a block's seven tables was opened and closed for its one row,
/// which on blocks with no transactions was a fifth of the writer's time (mainnet's first
/// 16,384 blocks, docs/benchmarks/issue-62.md); held, a group's rows go in through one open
/// table each. The commit writes them, and so does everything in the transaction that reads
/// block tables other than through `Writer::canonical_hash`, `Writer::header` and
/// `Writer::ommers`: an unwind, a freeze, a header stored alone. Past [`HELD_BLOCKS_CAP`]
/// bytes they are written early, which bounds their memory.
#[derive(Debug, Default)]
pub(super) struct HeldBlocks {
    blocks: Vec<HeldBlock>,
    bytes: usize,
}

/// The bytes of block rows held before they are written early: a 512-block import group of
/// blocks of 16 KB, about 130 blocks of the 1,000-block proxy's (60 KB), 32 of 256 KB. At
/// 32 MiB the proxy's import peaked 65 MiB higher than with the rows written block by block.
const HELD_BLOCKS_CAP: usize = 8 << 20;

impl HeldBlocks {
    pub(super) fn get(&self, number: u64) -> Option<&HeldBlock> {
        let at = self.blocks.binary_search_by_key(&number, |b| b.number).ok()?;
        self.blocks.get(at)
    }

    /// Holds `block`, writing the held ones first if it does not follow them (a block stored
    /// again at a number held already, or below: its rows are then the last written), and
    /// all of them once they pass [`HELD_BLOCKS_CAP`].
    pub(super) fn push(
        &mut self,
        txn: &redb::WriteTransaction,
        block: HeldBlock,
    ) -> StorageResult<()> {
        if self.blocks.last().is_some_and(|last| last.number >= block.number) {
            self.write(txn)?;
        }
        self.bytes += block.bytes();
        self.blocks.push(block);
        if self.bytes >= HELD_BLOCKS_CAP { self.write(txn) } else { Ok(()) }
    }

    /// Writes the held rows, each table's through one open table, and forgets them.
    pub(super) fn write(&mut self, txn: &redb::WriteTransaction) -> StorageResult<()> {
        let blocks = std::mem::take(&mut self.blocks);
        self.bytes = 0;
        if blocks.is_empty() {
            return Ok(());
        }
        let mut t = txn.open_table(tables::HEADERS)?;
        for b in &blocks {
            t.insert(b.number, b.header.as_slice())?;
        }
        drop(t);
        let mut t = txn.open_table(tables::CANONICAL)?;
        for b in &blocks {
            t.insert(b.number, &b.hash.0)?;
        }
        drop(t);
        let mut t = txn.open_table(tables::HASH_TO_NUMBER)?;
        for b in &blocks {
            t.insert(&b.hash.0, b.number)?;
        }
        drop(t);
        let mut t = txn.open_table(tables::BODIES)?;
        for b in &blocks {
            t.insert(b.number, b.body.as_slice())?;
        }
        drop(t);
        let mut t = txn.open_table(tables::TRANSACTIONS)?;
        for (key, row) in blocks.iter().flat_map(|b| &b.transactions) {
            t.insert(key, row.as_slice())?;
        }
        drop(t);
        let mut t = txn.open_table(tables::RECEIPTS)?;
        for b in &blocks {
            t.insert(b.number, b.receipts.as_slice())?;
        }
        drop(t);
        if blocks.iter().any(|b| b.access_list.is_some()) {
            let mut t = txn.open_table(tables::ACCESS_LISTS)?;
            for b in &blocks {
                if let Some(list) = &b.access_list {
                    t.insert(b.number, list.as_slice())?;
                }
            }
        }
        Ok(())
    }
}
