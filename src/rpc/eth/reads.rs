//! `eth_`, `net_` and `web3_` read methods, answered from the archive.

use alloy_primitives::{Address, B256, U256};
use jsonrpsee::types::Params;

use crate::rpc::eth::convert::{BlockTxs, rpc_block, rpc_receipt, rpc_receipts, rpc_transaction};
use crate::rpc::request::cache::BlockObject;
use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef, invalid};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::Reader;

fn null() -> RpcResult<Raw> {
    to_value(())
}

impl RpcContext {
    /// Resolves a block reference to a stored block number (`None`: not stored).
    pub(crate) fn resolve(&self, r: &Reader, b: BlockRef) -> RpcResult<Option<u64>> {
        let m =
            r.markers()?.ok_or_else(|| RpcError::Internal("database not initialised".into()))?;
        Ok(match b {
            BlockRef::Number(n) => (n <= m.head).then_some(n),
            BlockRef::Latest | BlockRef::Pending => Some(m.head),
            BlockRef::Earliest => Some(0),
            BlockRef::Safe => Some(m.safe),
            BlockRef::Finalized => Some(m.finalized),
            BlockRef::Hash(h) => r.block_number(&h)?,
        })
    }

    /// Like [`Self::resolve`], but a missing block is the `header not found` error.
    pub(crate) fn resolve_required(&self, r: &Reader, b: BlockRef) -> RpcResult<u64> {
        self.resolve(r, b)?.ok_or(RpcError::HeaderNotFound)
    }

    /// Transaction `index` of stored block `number` as an RPC object (from the transaction
    /// cache when it holds it), `null` when there is none.
    fn tx_at(&self, r: &Reader, number: Option<u64>, index: u64) -> RpcResult<Raw> {
        let Some(number) = number else { return null() };
        let Ok(index) = u32::try_from(index) else { return null() };
        let entry = r.header_and_hash(number)?;
        if let Some(hit) = entry.as_ref().and_then(|e| self.tx_cache.get(&(e.1, index))) {
            return Ok(Raw::from_cached(&hit));
        }
        let Some(stored) = r.transaction(number, index)? else { return null() };
        let entry = entry.ok_or_else(|| RpcError::Internal(format!("header {number} missing")))?;
        let raw = to_value(rpc_transaction(stored, &entry.0, entry.1))?;
        self.tx_cache.insert((entry.1, index), raw.as_str());
        Ok(raw)
    }

    /// `eth_getTransactionByBlockNumberAndIndex(block, index)`.
    pub(crate) fn tx_by_number_and_index(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let block = a.block_number(0, "block")?;
        let index = a.quantity(1, "index")?;
        let r = self.db.begin_read()?;
        let number = self.resolve(&r, block)?;
        self.tx_at(&r, number, index)
    }

    /// `eth_getTransactionByBlockHashAndIndex(hash, index)`.
    pub(crate) fn tx_by_hash_and_index(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash = a.hash(0, "blockHash")?;
        let index = a.quantity(1, "index")?;
        let r = self.db.begin_read()?;
        let number = r.block_number(&hash)?;
        self.tx_at(&r, number, index)
    }

    /// `eth_getTransactionByHash(hash)`.
    pub(crate) fn tx_by_hash(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash = a.hash(0, "hash")?;
        let r = self.db.begin_read()?;
        match r.transaction_location(&hash)? {
            Some((block, index)) => self.tx_at(&r, Some(block), u64::from(index)),
            None => null(),
        }
    }

    fn block_json(&self, r: &Reader, number: Option<u64>, full: bool) -> RpcResult<Raw> {
        let Some(number) = number else { return null() };
        let Some(entry) = r.header_and_hash(number)? else { return null() };
        let key = (entry.1, if full { BlockObject::Full } else { BlockObject::Hashes });
        if let Some(hit) = self.block_cache.get(&key) {
            return Ok(Raw::from_cached(&hit));
        }
        let Some((body, _)) = r.body(number)? else { return null() };
        let txs = if full {
            BlockTxs::Full(r.transactions(number)?)
        } else {
            BlockTxs::Hashes(r.transaction_hashes(number)?)
        };
        let raw = to_value(rpc_block(entry.0.clone(), entry.1, body, txs))?;
        self.block_cache.insert(key, raw.as_str());
        Ok(raw)
    }

    /// `eth_getBlockByNumber(block, full)`.
    pub(crate) fn block_by_number(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let block = a.block_number(0, "block")?;
        let full = a.boolean(1, "fullTransactions")?;
        let r = self.db.begin_read()?;
        let n = self.resolve(&r, block)?;
        self.block_json(&r, n, full)
    }

    /// `eth_getBlockByHash(hash, full)`.
    pub(crate) fn block_by_hash(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash = a.hash(0, "blockHash")?;
        let full = a.boolean(1, "fullTransactions")?;
        let r = self.db.begin_read()?;
        let n = r.block_number(&hash)?;
        self.block_json(&r, n, full)
    }

    fn tx_count_json(&self, r: &Reader, number: Option<u64>) -> RpcResult<Raw> {
        match number {
            Some(n) => to_value(r.transaction_count(n)?.map(|c| format!("{c:#x}"))),
            None => null(),
        }
    }

    /// `eth_getBlockTransactionCountByNumber(block)`.
    pub(crate) fn tx_count_by_number(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let block = a.block_number(0, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve(&r, block)?;
        self.tx_count_json(&r, n)
    }

    /// `eth_getBlockTransactionCountByHash(hash)`.
    pub(crate) fn tx_count_by_hash(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash = a.hash(0, "blockHash")?;
        let r = self.db.begin_read()?;
        let n = r.block_number(&hash)?;
        self.tx_count_json(&r, n)
    }

    /// The JSON of block `number`'s receipts (`null` when it is not stored).
    fn receipts_json(&self, r: &Reader, number: u64) -> RpcResult<Raw> {
        let Some(entry) = r.header_and_hash(number)? else { return null() };
        let key = (entry.1, BlockObject::Receipts);
        if let Some(hit) = self.block_cache.get(&key) {
            return Ok(Raw::from_cached(&hit));
        }
        let Some(receipts) = r.receipts(number)? else { return null() };
        let txs = r.transactions(number)?;
        let raw = to_value(rpc_receipts(&self.spec, &entry.0, entry.1, &txs, receipts))?;
        self.block_cache.insert(key, raw.as_str());
        Ok(raw)
    }

    /// `eth_getTransactionReceipt(hash)`.
    pub(crate) fn receipt(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash = a.hash(0, "hash")?;
        let r = self.db.begin_read()?;
        let Some((block, index)) = r.transaction_location(&hash)? else { return null() };
        // Only this receipt and its transaction are decoded, not the whole block's.
        let (Some(header), Some(at), Some(tx)) =
            (r.header(block)?, r.receipt(block, index)?, r.transaction(block, index)?)
        else {
            return null();
        };
        let block_hash = r.canonical_hash(block)?.unwrap_or_default();
        to_value(rpc_receipt(&self.spec, &header, block_hash, &tx, at))
    }

    /// `eth_getBlockReceipts(block)`.
    pub(crate) fn block_receipts(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let block = a.block_req(0, "block")?;
        let r = self.db.begin_read()?;
        match self.resolve(&r, block)? {
            Some(n) => self.receipts_json(&r, n),
            None => null(),
        }
    }

    /// `eth_getBalance(address, block?)`.
    pub(crate) fn balance(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let address = a.address(0, "address")?;
        let block = a.block(1, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let acct = r.state_at(n)?.account(&address)?;
        to_value(acct.map_or(U256::ZERO, |a| a.balance))
    }

    /// `eth_getTransactionCount(address, block?)`.
    pub(crate) fn nonce(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let address = a.address(0, "address")?;
        let block = a.block(1, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let acct = r.state_at(n)?.account(&address)?;
        to_value(format!("{:#x}", acct.map_or(0, |a| a.nonce)))
    }

    /// `eth_getCode(address, block?)`.
    pub(crate) fn code(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let address = a.address(0, "address")?;
        let block = a.block(1, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let state = r.state_at(n)?;
        let code = match state.account(&address)? {
            Some(acct) if acct.has_code() => state.code(&acct.code_hash)?.original_bytes(),
            _ => Default::default(),
        };
        to_value(code)
    }

    /// `eth_getStorageAt(address, slot, block?)`.
    pub(crate) fn storage_at(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 3)?;
        let address = a.address(0, "address")?;
        let slot = a.storage_key(1, "slot")?;
        let block = a.block(2, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let v = r.state_at(n)?.storage_value(&address, &slot)?;
        to_value(alloy_primitives::B256::from(v))
    }

    /// `eth_blockNumber()`.
    pub(crate) fn block_number(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let head = self.db.begin_read()?.head()?.unwrap_or(0);
        to_value(format!("{head:#x}"))
    }

    /// `eth_chainId()`.
    pub(crate) fn chain_id(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        to_value(format!("{:#x}", self.spec.chain_id()))
    }

    /// `net_version()`: the chain id in decimal, as geth answers.
    pub(crate) fn net_version(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        to_value(self.spec.chain_id().to_string())
    }

    /// `eth_syncing()`: an archive that serves what it imported is never syncing.
    ///
    /// `false` unless the node follows an upstream whose head is ahead of ours; then the
    /// progress: where following started, our head, and the upstream's head.
    pub(crate) fn syncing(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let s = self.config.sync.get();
        let head = self.db.begin_read()?.head()?.unwrap_or(0);
        match s.upstream_head {
            Some(upstream) if s.following && upstream > head => to_value(serde_json::json!({
                "startingBlock": format!("{:#x}", s.starting_block.min(head)),
                "currentBlock": format!("{head:#x}"),
                "highestBlock": format!("{upstream:#x}"),
            })),
            _ => to_value(false),
        }
    }

    /// `eth_getStorageValues({address: [slot, ...]}, block?)`: many slots in one read
    /// snapshot. At most [`MAX_STORAGE_VALUES`] slots per call.
    pub(crate) fn storage_values(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let request: std::collections::BTreeMap<Address, Vec<String>> = a.req(0, "requests")?;
        if request.is_empty() {
            return Err(invalid("empty request"));
        }
        let slots: usize = request.values().map(Vec::len).sum();
        if slots > MAX_STORAGE_VALUES {
            return Err(invalid(format!(
                "{slots} storage slots requested, over the limit of {MAX_STORAGE_VALUES}"
            )));
        }
        let block = a.block(1, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve_required(&r, block)?;
        let state = r.state_at(n)?;
        let mut out = serde_json::Map::new();
        for (address, keys) in request {
            let mut values = Vec::with_capacity(keys.len());
            for k in keys {
                let v = state
                    .storage_value(&address, &crate::rpc::request::params::storage_key(&k)?)?;
                values.push(serde_json::to_value(B256::from(v)).unwrap_or_default());
            }
            out.insert(format!("{address:#x}"), serde_json::Value::Array(values));
        }
        to_value(out)
    }

    /// `eth_accounts()`: loupe holds no keys.
    pub(crate) fn accounts(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        to_value(Vec::<Address>::new())
    }

    /// `net_listening()`: loupe takes no peer connections, so `false`.
    pub(crate) fn net_listening(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        to_value(false)
    }

    /// `net_peerCount()`: `0x1` while following a reachable upstream, else `0x0`.
    pub(crate) fn net_peer_count(&self, p: Params<'_>) -> RpcResult<Raw> {
        Args::new(&p, 0)?;
        let s = self.config.sync.get();
        to_value(if s.following && s.upstream_ok { "0x1" } else { "0x0" })
    }

    /// `web3_sha3(data)`: Keccak-256 of the bytes.
    pub(crate) fn web3_sha3(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let data: alloy_primitives::Bytes = a.req(0, "data")?;
        to_value(alloy_primitives::keccak256(&data))
    }

    fn uncle_json(&self, r: &Reader, number: Option<u64>, index: u64) -> RpcResult<Raw> {
        let Some(n) = number else { return null() };
        let Some((body, _)) = r.body(n)? else { return null() };
        let Some(uncle) = usize::try_from(index).ok().and_then(|i| body.ommers.get(i)) else {
            return null();
        };
        let hash = uncle.hash_slow();
        let empty = alloy_consensus::BlockBody {
            transactions: Vec::new(),
            ommers: Vec::new(),
            withdrawals: None,
        };
        to_value(rpc_block(uncle.clone(), hash, empty, BlockTxs::Hashes(Vec::new())))
    }

    fn uncle_count_json(&self, r: &Reader, number: Option<u64>) -> RpcResult<Raw> {
        let Some(n) = number else { return null() };
        match r.body(n)? {
            Some((body, _)) => to_value(format!("{:#x}", body.ommers.len())),
            None => null(),
        }
    }

    /// `eth_getUncleByBlockNumberAndIndex(block, index)`: the ommer's header as a block object.
    pub(crate) fn uncle_by_number_and_index(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let block = a.block_number(0, "block")?;
        let index = a.quantity(1, "index")?;
        let r = self.db.begin_read()?;
        let n = self.resolve(&r, block)?;
        self.uncle_json(&r, n, index)
    }

    /// `eth_getUncleByBlockHashAndIndex(hash, index)`.
    pub(crate) fn uncle_by_hash_and_index(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 2)?;
        let hash = a.hash(0, "blockHash")?;
        let index = a.quantity(1, "index")?;
        let r = self.db.begin_read()?;
        let n = r.block_number(&hash)?;
        self.uncle_json(&r, n, index)
    }

    /// `eth_getUncleCountByBlockNumber(block)`.
    pub(crate) fn uncle_count_by_number(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let block = a.block_number(0, "block")?;
        let r = self.db.begin_read()?;
        let n = self.resolve(&r, block)?;
        self.uncle_count_json(&r, n)
    }

    /// `eth_getUncleCountByBlockHash(hash)`.
    pub(crate) fn uncle_count_by_hash(&self, p: Params<'_>) -> RpcResult<Raw> {
        let a = Args::new(&p, 1)?;
        let hash = a.hash(0, "blockHash")?;
        let r = self.db.begin_read()?;
        let n = r.block_number(&hash)?;
        self.uncle_count_json(&r, n)
    }
}

/// Most slots one `eth_getStorageValues` call reads.
pub(crate) const MAX_STORAGE_VALUES: usize = 1024;
