//! `eth_getProof` (EIP-1186) at any stored block, on the worker pool.

use std::sync::Arc;

use alloy_primitives::{B256, KECCAK256_EMPTY, U256};
use alloy_rpc_types_eth::{EIP1186AccountProofResponse, EIP1186StorageProof};
use alloy_serde::storage::JsonStorageKey;
use alloy_trie::EMPTY_ROOT_HASH;
use jsonrpsee::types::Params;

use crate::rpc::request::json::{Raw, to_value};
use crate::rpc::request::params::{Args, invalid};
use crate::rpc::{RpcContext, RpcResult};
use crate::trie::prove_account;

/// Most storage keys one `eth_getProof` may ask for.
pub(crate) const MAX_PROOF_KEYS: usize = 1024;

impl RpcContext {
    /// `eth_getProof(address, storageKeys, block?)`.
    pub(crate) async fn get_proof(self: Arc<Self>, p: Params<'static>) -> RpcResult<Raw> {
        let a = Args::new(&p, 3)?;
        let address = a.address(0, "address")?;
        let keys: Vec<JsonStorageKey> = a.req(1, "storageKeys")?;
        if keys.len() > MAX_PROOF_KEYS {
            return Err(invalid(format!(
                "invalid argument 1 (storageKeys): {} keys is over the limit of {MAX_PROOF_KEYS}",
                keys.len()
            )));
        }
        let block = a.block(2, "block")?;
        let ctx = self.clone();
        self.pool
            .run(move || {
                let r = ctx.db.begin_read()?;
                let n = ctx.resolve_required(&r, block)?;
                let slots: Vec<B256> = keys.iter().map(|k| k.as_b256()).collect();
                let proof = prove_account(&r, n, address, &slots)?;
                let (balance, nonce, code_hash, storage_hash) = match proof.account {
                    Some(h) => {
                        let code = if h.account.code_hash.is_zero() {
                            KECCAK256_EMPTY
                        } else {
                            h.account.code_hash
                        };
                        (h.account.balance, h.account.nonce, code, h.storage_root)
                    }
                    // geth's answer for an account that does not exist.
                    None => (U256::ZERO, 0, B256::ZERO, EMPTY_ROOT_HASH),
                };
                let storage_proof = keys
                    .into_iter()
                    .zip(proof.storage_proofs)
                    .map(|(key, s)| EIP1186StorageProof { key, value: s.value, proof: s.proof })
                    .collect();
                to_value(EIP1186AccountProofResponse {
                    address,
                    balance,
                    code_hash,
                    nonce,
                    storage_hash,
                    account_proof: proof.account_proof,
                    storage_proof,
                })
            })
            .await
    }
}
