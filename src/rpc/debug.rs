//! `debug_getRawHeader` and `debug_getRawBlock`: a stored block's exact consensus encoding, as
//! geth, reth and Erigon serve it. A follower rebuilds blocks from these bytes (ommers
//! included, which `eth_getBlockByNumber` leaves out).

use alloy_consensus::{Block, BlockBody, TxEnvelope};
use alloy_primitives::Bytes;
use alloy_rlp::Encodable;
use jsonrpsee::types::Params;

use super::eth::{Raw, to_value};
use super::params::Args;
use super::{RpcContext, RpcResult};

impl RpcContext {
    /// `debug_getRawHeader(block)`: RLP of the header; `header not found` if not stored.
    pub(crate) fn raw_header(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, a.block_req(0, "block")?)?;
        let header = r.header(n)?.ok_or(super::RpcError::HeaderNotFound)?;
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
        let header = r.header(n)?.ok_or(super::RpcError::HeaderNotFound)?;
        let (rest, _) = r.body(n)?.ok_or(super::RpcError::HeaderNotFound)?;
        let transactions: Vec<TxEnvelope> = r.transactions(n)?.into_iter().map(|t| t.tx).collect();
        let block = Block {
            header,
            body: BlockBody { transactions, ommers: rest.ommers, withdrawals: rest.withdrawals },
        };
        let mut out = Vec::new();
        block.encode(&mut out);
        to_value(Bytes::from(out))
    }
}
