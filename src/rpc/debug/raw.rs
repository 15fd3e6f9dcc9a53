//! The raw consensus encodings of stored data, as geth, reth and Erigon serve them:
//! `debug_getRawHeader`, `debug_getRawBlock` (a follower rebuilds blocks from these bytes, ommers
//! included, which `eth_getBlockByNumber` leaves out), `debug_getRawReceipts`,
//! `debug_getRawTransaction` and `eth_getRawTransactionByHash` (EIP-2718 encodings).

use alloy_consensus::{Block, BlockBody, TxEnvelope};
use alloy_eips::Encodable2718;
use alloy_primitives::Bytes;
use alloy_rlp::Encodable;
use jsonrpsee::types::Params;

use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::Args;
use crate::rpc::{RpcContext, RpcResult};

impl RpcContext {
    /// `debug_getRawHeader(block)`: RLP of the header; `header not found` if not stored.
    pub(crate) fn raw_header(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, a.block_req(0, "block")?)?;
        let header = r.header(n)?.ok_or(crate::rpc::RpcError::HeaderNotFound)?;
        let mut out = Vec::new();
        header.encode(&mut out);
        to_value(Bytes::from(out))
    }

    /// `debug_getRawBlock(block)`: RLP of the whole block (header, transactions, ommers,
    /// withdrawals); `header not found` if not stored.
    pub(crate) fn raw_block(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, a.block_req(0, "block")?)?;
        let header = r.header(n)?.ok_or(crate::rpc::RpcError::HeaderNotFound)?;
        let (rest, _) = r.body(n)?.ok_or(crate::rpc::RpcError::HeaderNotFound)?;
        let transactions: Vec<TxEnvelope> = r.transactions(n)?.into_iter().map(|t| t.tx).collect();
        let block = Block {
            header,
            body: BlockBody { transactions, ommers: rest.ommers, withdrawals: rest.withdrawals },
        };
        let mut out = Vec::new();
        block.encode(&mut out);
        to_value(Bytes::from(out))
    }

    /// `debug_getRawReceipts(block)`: the EIP-2718 encoding of each receipt; `header not found`
    /// if not stored.
    pub(crate) fn raw_receipts(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, a.block_req(0, "block")?)?;
        let receipts = r.receipts(n)?.ok_or(crate::rpc::RpcError::HeaderNotFound)?;
        let encoded: Vec<Bytes> =
            receipts.iter().map(|rc| Bytes::from(rc.encoded_2718())).collect();
        to_value(encoded)
    }

    /// `debug_getRawTransaction(hash)` and `eth_getRawTransactionByHash(hash)`: the signed
    /// transaction's EIP-2718 encoding; `null` if unknown.
    pub(crate) fn raw_transaction(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash = a.hash(0, "hash")?;
        let r = self.db.begin_read()?;
        let Some((block, index)) = r.transaction_location(&hash)? else { return to_value(()) };
        let tx = r.transaction(block, index)?;
        to_value(tx.map(|t| Bytes::from(t.tx.encoded_2718())))
    }
}
