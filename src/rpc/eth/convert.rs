//! Stored blocks, transactions and receipts → the RPC objects of execution-apis.

use alloy_consensus::transaction::{Recovered, TransactionInfo};
use alloy_consensus::{BlockBody, Header, ReceiptEnvelope, Transaction as _, TxEnvelope};
use alloy_eips::Typed2718;
use alloy_primitives::{B256, U256};
use alloy_rlp::Encodable;
use alloy_rpc_types_eth::{Block, BlockTransactions, Log, Transaction, TransactionReceipt};

use crate::chain::ChainSpec;
use crate::storage::StoredTransaction;
use crate::storage::codec::receipts::{LogInBlock, ReceiptInBlock};

/// The RPC transaction object for a stored transaction in block `header` (hash `block_hash`).
pub(crate) fn rpc_transaction(
    stored: StoredTransaction,
    header: &Header,
    block_hash: B256,
) -> Transaction<TxEnvelope> {
    let info = TransactionInfo {
        hash: Some(*stored.tx.tx_hash()),
        index: Some(u64::from(stored.index)),
        block_hash: Some(block_hash),
        block_number: Some(header.number),
        base_fee: header.base_fee_per_gas,
        block_timestamp: Some(header.timestamp),
    };
    Transaction::from_transaction(Recovered::new_unchecked(stored.tx, stored.sender), info)
}

/// A block's transactions as [`rpc_block`] takes them.
pub(crate) enum BlockTxs {
    /// Whole, for transaction objects.
    Full(Vec<StoredTransaction>),
    /// Each transaction's hash and its length as an item of the body's list
    /// (`Reader::transaction_hashes`), for a block that lists hashes only.
    Hashes(Vec<(B256, usize)>),
}

impl BlockTxs {
    /// `txs` whole when `full`, else their hashes and lengths.
    pub(crate) fn of(txs: Vec<StoredTransaction>, full: bool) -> Self {
        if full {
            Self::Full(txs)
        } else {
            Self::Hashes(txs.iter().map(|t| (*t.tx.tx_hash(), t.tx.length())).collect())
        }
    }
}

/// The RPC block object, with transaction objects or hashes as `txs` holds them.
pub(crate) fn rpc_block(
    header: Header,
    hash: B256,
    body: BlockBody<TxEnvelope>,
    txs: BlockTxs,
) -> Block<Transaction<TxEnvelope>> {
    let size = match &txs {
        BlockTxs::Full(txs) => block_size(&header, txs.iter().map(|t| t.tx.length()), &body),
        BlockTxs::Hashes(hashes) => block_size(&header, hashes.iter().map(|h| h.1), &body),
    };
    #[cfg(debug_assertions)]
    if let BlockTxs::Full(txs) = &txs {
        let whole = BlockBody {
            transactions: txs.iter().map(|t| t.tx.clone()).collect::<Vec<_>>(),
            ommers: body.ommers.clone(),
            withdrawals: body.withdrawals.clone(),
        };
        debug_assert_eq!(size, alloy_consensus::Block::rlp_length_for(&header, &whole));
    }
    let uncles = body.ommers.iter().map(|o| o.hash_slow()).collect();
    let transactions = match txs {
        BlockTxs::Full(txs) => BlockTransactions::Full(
            txs.into_iter().map(|t| rpc_transaction(t, &header, hash)).collect(),
        ),
        BlockTxs::Hashes(hashes) => {
            BlockTransactions::Hashes(hashes.into_iter().map(|h| h.0).collect())
        }
    };
    Block {
        header: alloy_rpc_types_eth::Header {
            hash,
            inner: header,
            total_difficulty: None,
            size: Some(U256::from(size)),
        },
        uncles,
        transactions,
        withdrawals: body.withdrawals,
    }
}

/// The RLP length of the block `[header, transactions, ommers, withdrawals?]`, from the
/// lengths of its transactions as items of the body's list: no transaction is encoded again.
fn block_size(
    header: &Header,
    tx_lengths: impl Iterator<Item = usize>,
    body: &BlockBody<TxEnvelope>,
) -> usize {
    let list = |payload: usize| payload + alloy_rlp::length_of_length(payload);
    let payload = header.length()
        + list(tx_lengths.sum())
        + body.ommers.length()
        + body.withdrawals.as_ref().map_or(0, |w| w.length());
    list(payload)
}

/// Receipts of a block as RPC objects (gas used per tx, log indexes, fees, blob gas).
pub(crate) fn rpc_receipts(
    spec: &ChainSpec,
    header: &Header,
    block_hash: B256,
    txs: &[StoredTransaction],
    receipts: Vec<ReceiptEnvelope>,
) -> Vec<TransactionReceipt> {
    let mut gas_before = 0u64;
    let mut logs_before = 0u64;
    let mut out = Vec::with_capacity(receipts.len());
    for (stored, receipt) in txs.iter().zip(receipts) {
        let (gas, logs) = (receipt.cumulative_gas_used(), receipt.logs().len() as u64);
        let at = ReceiptInBlock { receipt, gas_before, logs_before };
        out.push(rpc_receipt(spec, header, block_hash, stored, at));
        gas_before = gas;
        logs_before += logs;
    }
    out
}

/// One receipt as its RPC object: `at` carries what it needs of the receipts before it (gas
/// used is the difference of cumulative gas; log indexes are block-wide).
pub(crate) fn rpc_receipt(
    spec: &ChainSpec,
    header: &Header,
    block_hash: B256,
    stored: &StoredTransaction,
    at: ReceiptInBlock,
) -> TransactionReceipt {
    let tx = &stored.tx;
    let tx_hash = *tx.tx_hash();
    let gas_used = at.receipt.cumulative_gas_used().saturating_sub(at.gas_before);
    let mut log_index = at.logs_before;
    let inner = at.receipt.map_logs(|l| {
        let log = Log {
            inner: l,
            block_hash: Some(block_hash),
            block_number: Some(header.number),
            block_timestamp: Some(header.timestamp),
            transaction_hash: Some(tx_hash),
            transaction_index: Some(u64::from(stored.index)),
            log_index: Some(log_index),
            removed: false,
        };
        log_index += 1;
        log
    });
    let blob_gas_price = || {
        spec.blob_params_at(header.timestamp)
            .zip(header.excess_blob_gas)
            .map(|(p, excess)| p.calc_blob_fee(excess))
    };
    TransactionReceipt {
        inner,
        transaction_hash: tx_hash,
        transaction_index: Some(u64::from(stored.index)),
        block_hash: Some(block_hash),
        block_number: Some(header.number),
        gas_used,
        effective_gas_price: tx.effective_gas_price(header.base_fee_per_gas),
        blob_gas_used: tx.blob_gas_used(),
        blob_gas_price: if tx.is_type(3) { blob_gas_price() } else { None },
        from: stored.sender,
        to: tx.to(),
        contract_address: tx.kind().is_create().then(|| stored.sender.create(tx.nonce())),
    }
}

/// A block's kept logs (`Reader::logs_matching`) as RPC objects. `tx_hash(i)` names
/// transaction `i`; it is asked once per transaction with a kept log, so a block's other
/// transactions are never read.
pub(crate) fn block_logs<E>(
    header: &Header,
    block_hash: B256,
    found: Vec<LogInBlock>,
    mut tx_hash: impl FnMut(u32) -> Result<B256, E>,
) -> Result<Vec<Log>, E> {
    let mut out = Vec::with_capacity(found.len());
    let mut last: Option<(u32, B256)> = None;
    for f in found {
        let hash = match last {
            Some((i, h)) if i == f.tx_index => h,
            _ => {
                let h = tx_hash(f.tx_index)?;
                last = Some((f.tx_index, h));
                h
            }
        };
        out.push(Log {
            inner: f.log,
            block_hash: Some(block_hash),
            block_number: Some(header.number),
            block_timestamp: Some(header.timestamp),
            transaction_hash: Some(hash),
            transaction_index: Some(u64::from(f.tx_index)),
            log_index: Some(f.log_index),
            removed: false,
        });
    }
    Ok(out)
}
