//! `debug_executionWitness` and `debug_executionWitnessByBlockHash`: a stored block's execution
//! witness built from the archive ([`crate::witness::build_witness`]), on the EVM pool.

use std::sync::Arc;

use alloy_primitives::B256;
use jsonrpsee::types::Params;

use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
use crate::rpc::{RpcContext, RpcResult};
use crate::witness::build_witness;

impl RpcContext {
    /// `debug_executionWitness(block)`: the witness of a stored block (not the genesis, not
    /// `pending`), in reth's shape (`state`, `codes`, `keys`, `headers` as RLP).
    pub(crate) async fn debug_execution_witness(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let block = a.block_number(0, "block")?;
        if block == BlockRef::Pending {
            return Err(invalid("invalid argument 0 (block): pending has no execution witness"));
        }
        self.execution_witness(block).await
    }

    /// `debug_executionWitnessByBlockHash(blockHash)`.
    pub(crate) async fn debug_execution_witness_by_block_hash(
        self: Arc<Self>,
        p: Params<'static>,
    ) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash: B256 = a.req(0, "blockHash")?;
        self.execution_witness(BlockRef::Hash(hash)).await
    }

    async fn execution_witness(self: Arc<Self>, block: BlockRef) -> RpcResult<Raw> {
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let n = ctx.resolve_required(&r, block)?;
                let built = build_witness(&r, &ctx.spec, n, Some(ctx.config.call_timeout))?;
                to_value(built.witness)
            })
            .await
    }
}
