//! The block access lists (EIP-7928) of stored Amsterdam blocks: `eth_getBlockAccessList`, in
//! execution-apis' JSON (`BlockAccessList` schema), and `debug_getRawBlockAccessList`, its RLP,
//! with the getter semantics of execution-apis #851: an unknown block (or `pending`) is `null`
//! (the raw getter: -32001), a block before Amsterdam -32001 `Resource not found`.

use alloy_eip7928::{AccountChanges, BlockAccessList};
use alloy_primitives::{B256, Bytes};
use jsonrpsee::types::Params;
use serde_json::{Value, json};

use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, BlockRef};
use crate::rpc::{RpcContext, RpcError, RpcResult};

impl RpcContext {
    /// `eth_getBlockAccessList(block)`: the list as execution-apis' JSON, `null` for a block
    /// not stored or `pending`.
    pub(crate) fn block_access_list(&self, p: Params<'_>) -> RpcResult<Raw> {
        match self.stored_access_list(&p)? {
            Some(list) => to_value(access_list_json(&list)),
            None => to_value(()),
        }
    }

    /// `debug_getRawBlockAccessList(block)`: the RLP list the header's `blockAccessListHash`
    /// is the keccak of.
    pub(crate) fn raw_block_access_list(&self, p: Params<'_>) -> RpcResult<Raw> {
        let list = self.stored_access_list(&p)?.ok_or_else(|| {
            RpcError::ResourceNotFound("block not found (or pending)".to_string())
        })?;
        let mut out = Vec::new();
        alloy_rlp::encode_list(&list, &mut out);
        to_value(Bytes::from(out))
    }

    /// The stored list of the block `p` names (a number, tag or hash): `None` for a block not
    /// stored or `pending`, an error for a block before Amsterdam (its header has no
    /// `blockAccessListHash`).
    fn stored_access_list(&self, p: &Params<'_>) -> RpcResult<Option<BlockAccessList>> {
        let a = Args::new(p, 1)?;
        let block = a.block_req(0, "block")?;
        if block == BlockRef::Pending {
            return Ok(None);
        }
        let r = self.db.begin_read()?;
        let Some(n) = self.resolve(&r, block)? else { return Ok(None) };
        let Some(header) = r.header(n)? else { return Ok(None) };
        if header.block_access_list_hash.is_none() {
            return Err(RpcError::ResourceNotFound(format!(
                "block {n} is before Amsterdam: it has no block access list"
            )));
        }
        let list = r
            .access_list(n)?
            .ok_or_else(|| RpcError::Internal(format!("block {n}'s access list is not stored")))?;
        Ok(Some(list))
    }
}

/// One account's entry in execution-apis' `AccountAccess` shape: every list present (empty as
/// `[]`), storage keys, values and reads as 32-byte words, the rest as quantities.
fn account_json(a: &AccountChanges) -> Value {
    let word = |v: &alloy_primitives::U256| B256::from(v.to_be_bytes::<32>());
    json!({
        "address": a.address,
        "storageChanges": a.storage_changes.iter().map(|s| json!({
            "key": word(&s.slot),
            "changes": s.changes.iter().map(|c| json!({
                "index": format!("{:#x}", c.block_access_index.get()),
                "value": word(&c.new_value),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "storageReads": a.storage_reads.iter().map(word).collect::<Vec<_>>(),
        "balanceChanges": a.balance_changes.iter().map(|c| json!({
            "index": format!("{:#x}", c.block_access_index.get()),
            "value": c.post_balance,
        })).collect::<Vec<_>>(),
        "nonceChanges": a.nonce_changes.iter().map(|c| json!({
            "index": format!("{:#x}", c.block_access_index.get()),
            "value": format!("{:#x}", c.new_nonce),
        })).collect::<Vec<_>>(),
        "codeChanges": a.code_changes.iter().map(|c| json!({
            "index": format!("{:#x}", c.block_access_index.get()),
            "code": c.new_code,
        })).collect::<Vec<_>>(),
    })
}

/// The list in execution-apis' `BlockAccessList` JSON.
pub(crate) fn access_list_json(list: &[AccountChanges]) -> Value {
    Value::Array(list.iter().map(account_json).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_eip7928::{
        BalanceChange, BlockAccessIndex, CodeChange, NonceChange, SlotChanges, StorageChange,
    };
    use alloy_primitives::{Address, U256};

    /// The JSON has every field of execution-apis' `AccountAccess` (empty lists as `[]`), keys
    /// and storage values as 32-byte words, and reads back, through alloy-eip7928's own
    /// deserialiser, as the list it came from.
    #[test]
    fn json_is_the_schemas_and_reads_back() {
        let i = BlockAccessIndex::new;
        let mut a = AccountChanges::new(Address::with_last_byte(7));
        a.storage_changes.push(SlotChanges::new(
            U256::from(1),
            vec![StorageChange::new(i(1), U256::from(0x3e8))],
        ));
        a.storage_reads.push(U256::from(2));
        a.balance_changes.push(BalanceChange::new(i(2), U256::from(5)));
        a.nonce_changes.push(NonceChange::new(i(1), 3));
        a.code_changes.push(CodeChange::new(i(1), Bytes::from(vec![0x60, 0x00])));
        let empty = AccountChanges::new(Address::with_last_byte(9));
        let list = vec![a, empty];
        let json = access_list_json(&list);
        let first = &json[0];
        assert_eq!(
            first["storageChanges"][0]["key"],
            json!("0x0000000000000000000000000000000000000000000000000000000000000001")
        );
        assert_eq!(
            first["storageChanges"][0]["changes"][0],
            json!({"index": "0x1", "value": "0x00000000000000000000000000000000000000000000000000000000000003e8"})
        );
        assert_eq!(first["balanceChanges"][0], json!({"index": "0x2", "value": "0x5"}));
        assert_eq!(first["nonceChanges"][0], json!({"index": "0x1", "value": "0x3"}));
        assert_eq!(first["codeChanges"][0], json!({"index": "0x1", "code": "0x6000"}));
        for field in
            ["storageChanges", "storageReads", "balanceChanges", "nonceChanges", "codeChanges"]
        {
            assert_eq!(json[1][field], json!([]), "{field}");
        }
        let back: BlockAccessList = serde_json::from_value(json).unwrap();
        assert_eq!(back, list);
    }
}
