//! Block rows in the write transaction: [`Writer::insert_block`] holds a block's rows
//! ([`HeldBlocks`]) until the transaction writes them all at once, and the reads of a block
//! inside the transaction (its canonical hash, header, ommers) see the held rows first.

use alloy_consensus::{Block, BlockBody, Header, ReceiptEnvelope, TxEnvelope};
use alloy_eips::Encodable2718;
use alloy_primitives::{Address, B256};
use alloy_rlp::Encodable;
use redb::ReadableTable;

use super::Writer;
use super::held_blocks::{HeldBlock, HeldBlocks};
use crate::storage::codec::tx::tx_key;
use crate::storage::history::keys::Epochs;
use crate::storage::segments::{Kind, Segments};
use crate::storage::tables;
use crate::storage::{StorageError, StorageResult};

impl Writer {
    fn held_blocks(&self) -> std::sync::MutexGuard<'_, HeldBlocks> {
        self.held_blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the block rows [`Writer::insert_block`] holds.
    pub(in crate::storage) fn write_held_blocks(&self) -> StorageResult<()> {
        self.held_blocks().write(&self.txn)
    }

    /// Stores a block: header, canonical index, body, transactions with senders, tx lookups and
    /// receipts. `senders[i]` is the sender of `block.body.transactions[i]`. The rows are held
    /// ([`HeldBlocks`]) and written with the transaction's other held rows.
    pub fn insert_block(
        &self,
        block: &Block<TxEnvelope>,
        hash: B256,
        senders: &[Address],
        receipts: &[ReceiptEnvelope],
        access_list: Option<&alloy_eip7928::BlockAccessList>,
    ) -> StorageResult<()> {
        let number = block.header.number;
        let mut header = Vec::with_capacity(512);
        block.header.encode(&mut header);

        let txs = &block.body.transactions;
        let count = u32::try_from(txs.len()).unwrap_or(u32::MAX);
        let mut body = Vec::with_capacity(64);
        body.extend_from_slice(&count.to_be_bytes());
        let rest: BlockBody<TxEnvelope, Header> = BlockBody {
            transactions: Vec::new(),
            ommers: block.body.ommers.clone(),
            withdrawals: block.body.withdrawals.clone(),
        };
        rest.encode(&mut body);

        let mut transactions = Vec::with_capacity(txs.len());
        let mut lookups = Vec::with_capacity(txs.len());
        for (i, (tx, sender)) in txs.iter().zip(senders).enumerate() {
            let key = tx_key(number, i as u32);
            let mut row = Vec::with_capacity(20 + tx.encode_2718_len());
            row.extend_from_slice(sender.as_slice());
            tx.encode_2718(&mut row);
            transactions.push((key, row));
            lookups.push((tx.tx_hash().0, key));
        }
        self.defer(|d| d.lookups.extend(lookups))?;
        let mut receipt_rows = Vec::new();
        crate::storage::codec::receipts::encode_receipts(receipts, &mut receipt_rows);
        let access_list = access_list.map(|list| {
            let mut row = Vec::new();
            crate::storage::access_list::encode_access_list(list, &mut row);
            row
        });
        let held = HeldBlock {
            number,
            hash,
            header,
            body,
            transactions,
            receipts: receipt_rows,
            access_list,
        };
        self.held_blocks().push(&self.txn, held)?;
        *self.last_block() = Some((number, hash, block.header.clone()));
        Ok(())
    }

    /// The segments this transaction sees and the first epoch of block data not frozen, if
    /// any block data is frozen.
    pub(in crate::storage) fn frozen_blocks(&self) -> StorageResult<Option<(Segments, Epochs)>> {
        let m = self.txn.open_table(tables::META)?;
        let segments = self
            .segment_files
            .store
            .view_stored(&m, crate::storage::segments::ProofHistory::All)?;
        if segments.blocks_frozen_to == 0 {
            return Ok(None);
        }
        Ok(Some((segments, self.epochs()?)))
    }

    /// The frozen row of `kind` at `key` of block `number`: `None` if the block's data is not
    /// frozen, `Some(None)` if it is and the row is absent.
    fn frozen_block_row(
        &self,
        kind: Kind,
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
        if let Some((_, hash, _)) = self.last_block().as_ref().filter(|(n, ..)| *n == number) {
            return Ok(Some(*hash));
        }
        if let Some(held) = self.held_blocks().get(number) {
            return Ok(Some(held.hash));
        }
        if let Some(row) = self.frozen_block_row(Kind::Canonical, number, &number.to_be_bytes())? {
            return Ok(row.and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok()).map(B256::from));
        }
        let t = self.txn.open_table(tables::CANONICAL)?;
        Ok(t.get(number)?.map(|v| B256::from(*v.value())))
    }

    /// Header of block `number` as seen inside this transaction.
    pub fn header(&self, number: u64) -> StorageResult<Option<Header>> {
        if let Some((.., header)) = self.last_block().as_ref().filter(|(n, ..)| *n == number) {
            return Ok(Some(header.clone()));
        }
        let decode = |mut bytes: &[u8]| {
            <Header as alloy_rlp::Decodable>::decode(&mut bytes)
                .map_err(|e| StorageError::Corrupt { table: "headers", detail: e.to_string() })
        };
        if let Some(held) = self.held_blocks().get(number) {
            return decode(&held.header).map(Some);
        }
        if let Some(row) = self.frozen_block_row(Kind::Headers, number, &number.to_be_bytes())? {
            return row.map(|v| decode(&v)).transpose();
        }
        let t = self.txn.open_table(tables::HEADERS)?;
        let Some(v) = t.get(number)? else { return Ok(None) };
        Ok(Some(decode(v.value())?))
    }

    /// The ommers of block `number` as seen inside this transaction (none if not stored).
    pub fn ommers(&self, number: u64) -> StorageResult<Vec<Header>> {
        let held = self.held_blocks().get(number).map(|b| b.body.clone());
        let row = match held {
            Some(body) => Some(body),
            None => match self.frozen_block_row(Kind::Bodies, number, &number.to_be_bytes())? {
                Some(frozen) => frozen,
                None => {
                    let t = self.txn.open_table(tables::BODIES)?;
                    t.get(number)?.map(|v| v.value().to_vec())
                }
            },
        };
        let Some(bytes) = row else { return Ok(Vec::new()) };
        let corrupt = |detail: String| StorageError::Corrupt { table: "bodies", detail };
        let rest = bytes.get(4..).ok_or_else(|| corrupt("short value".into()))?;
        let body = <BlockBody<TxEnvelope> as alloy_rlp::Decodable>::decode(&mut &rest[..])
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(body.ommers)
    }
}
