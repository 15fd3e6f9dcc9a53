//! [`Upstream`]: the JSON-RPC client for the node loupe follows. Blocks come from
//! `debug_getRawBlock` where the upstream serves it (exact bytes, ommers included), else from
//! `eth_getBlockByNumber` with full transactions, whose header hash is checked against the
//! hash the upstream gave (alloy seals JSON headers without recomputing it).
//!
//! jsonrpsee's HTTP client is used rather than alloy's provider: it is already compiled in for
//! the server, speaks batches, and loupe needs only a handful of calls.

use std::time::Duration;

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::{B256, Bytes, U64};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::core::params::BatchRequestBuilder;
use jsonrpsee::http_client::{HttpClient, HttpClientBuilder};
use jsonrpsee::rpc_params;
use serde::Deserialize;

use super::FollowError;

/// Number, hash and parent hash of an upstream block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockLink {
    /// Block number.
    pub number: U64,
    /// Block hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
}

/// See the module docs.
#[derive(Debug)]
pub struct Upstream {
    client: HttpClient,
    url: String,
    /// Whether `debug_getRawBlock` works (probed on first use).
    raw_blocks: Option<bool>,
}

impl Upstream {
    /// A client for `url` whose requests give up after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, FollowError> {
        let client = HttpClientBuilder::default()
            .request_timeout(timeout)
            .max_response_size(512 * 1024 * 1024)
            .build(url)
            .map_err(|e| FollowError::BadUpstreamUrl {
                url: url.to_string(),
                message: e.to_string(),
            })?;
        Ok(Self { client, url: url.to_string(), raw_blocks: None })
    }

    /// Fixes how blocks are fetched (`debug_getRawBlock` or `eth_getBlockByNumber`) instead of
    /// probing the upstream on first use (tests and fuzzing).
    pub fn set_raw_blocks(&mut self, raw: bool) {
        self.raw_blocks = Some(raw);
    }

    /// The upstream's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn err(&self, method: &str, e: impl std::fmt::Display) -> FollowError {
        FollowError::Upstream { url: self.url.clone(), message: format!("{method}: {e}") }
    }

    /// `eth_chainId`.
    pub async fn chain_id(&self) -> Result<u64, FollowError> {
        let id: U64 = self
            .client
            .request("eth_chainId", rpc_params![])
            .await
            .map_err(|e| self.err("eth_chainId", e))?;
        Ok(id.to())
    }

    /// `web3_clientVersion` (e.g. `anvil/v1.7.1`), `None` if the upstream does not say.
    pub async fn client_version(&self) -> Option<String> {
        self.client.request::<String, _>("web3_clientVersion", rpc_params![]).await.ok()
    }

    /// The block a tag (`latest`, `safe`, `finalized`) or number names; `None` if the upstream
    /// has none.
    pub async fn block_ref(&self, tag: &str) -> Result<Option<BlockLink>, FollowError> {
        self.client
            .request("eth_getBlockByNumber", rpc_params![tag, false])
            .await
            .map_err(|e| self.err("eth_getBlockByNumber", e))
    }

    /// The upstream's hash of block `number`, `None` if it has no such block.
    pub async fn hash_at(&self, number: u64) -> Result<Option<B256>, FollowError> {
        Ok(self.block_ref(&format!("{number:#x}")).await?.map(|b| b.hash))
    }

    /// Blocks `from..=to`, fetched in one batch, in order; stops early where the upstream has
    /// no block (its head moved back).
    pub async fn blocks(
        &mut self,
        from: u64,
        to: u64,
        policy: crate::chain::HeaderPolicy,
    ) -> Result<Vec<Block<TxEnvelope>>, FollowError> {
        if from > to {
            return Ok(Vec::new());
        }
        if self.raw_blocks.is_none() {
            let probe: Result<Bytes, _> =
                self.client.request("debug_getRawBlock", rpc_params![format!("{from:#x}")]).await;
            let works = match probe {
                Ok(_) => true,
                // Not served (-32601) or refused: the portable path works everywhere.
                Err(jsonrpsee::core::ClientError::Call(e)) => {
                    tracing::debug!(target: "follow", code = e.code(), "debug_getRawBlock: {}", e.message());
                    false
                }
                Err(e) => return Err(self.err("debug_getRawBlock", e)),
            };
            tracing::info!(
                target: "follow",
                upstream = %self.url,
                "blocks are fetched with {}",
                if works { "debug_getRawBlock" } else { "eth_getBlockByNumber" }
            );
            self.raw_blocks = Some(works);
        }
        let blocks = if self.raw_blocks == Some(true) {
            self.raw(from, to).await
        } else {
            self.json(from, to).await
        }?;
        // anvil's blocks carry blob transactions with their blobs (the network form), raw and as
        // JSON. A block holds them without, and its transactions root is checked on that form;
        // but anvil's header commits to the form with the blobs, which only the dev header
        // policy takes (the block is then stored without them).
        Ok(blocks.into_iter().map(|block| consensus_form(block, policy)).collect())
    }

    async fn raw(&self, from: u64, to: u64) -> Result<Vec<Block<TxEnvelope>>, FollowError> {
        let mut batch = BatchRequestBuilder::new();
        for n in from..=to {
            batch
                .insert("debug_getRawBlock", rpc_params![format!("{n:#x}")])
                .map_err(|e| self.err("debug_getRawBlock", e))?;
        }
        let answers = self
            .client
            .batch_request::<Option<Bytes>>(batch)
            .await
            .map_err(|e| self.err("debug_getRawBlock", e))?;
        let mut out = Vec::new();
        for (n, answer) in (from..=to).zip(answers) {
            let bytes = match answer {
                Ok(Some(bytes)) if !bytes.is_empty() => bytes,
                // No such block (yet): the upstream's head is below `n`.
                Ok(_) => break,
                Err(e) => return Err(self.err("debug_getRawBlock", e)),
            };
            let block = <Block<TxEnvelope> as alloy_rlp::Decodable>::decode(&mut bytes.as_ref())
                .map_err(|e| {
                    self.err("debug_getRawBlock", format!("block {n} does not decode: {e}"))
                })?;

            if block.header.number != n {
                return Err(self.err(
                    "debug_getRawBlock",
                    format!("asked for block {n}, got block {}", block.header.number),
                ));
            }
            out.push(block);
        }
        Ok(out)
    }

    async fn json(&self, from: u64, to: u64) -> Result<Vec<Block<TxEnvelope>>, FollowError> {
        let mut batch = BatchRequestBuilder::new();
        for n in from..=to {
            batch
                .insert("eth_getBlockByNumber", rpc_params![format!("{n:#x}"), true])
                .map_err(|e| self.err("eth_getBlockByNumber", e))?;
        }
        let answers = self
            .client
            .batch_request::<Option<alloy_rpc_types_eth::Block>>(batch)
            .await
            .map_err(|e| self.err("eth_getBlockByNumber", e))?;
        let mut out = Vec::new();
        for (n, answer) in (from..=to).zip(answers) {
            let block = match answer {
                Ok(Some(block)) => block,
                Ok(None) => break,
                Err(e) => return Err(self.err("eth_getBlockByNumber", e)),
            };
            let given = block.header.hash;
            let has_uncles = !block.uncles.is_empty();
            let block: Block<TxEnvelope> =
                block.into_consensus().map_transactions(|tx| tx.into_inner());
            if has_uncles {
                return Err(FollowError::Unsupported(format!(
                    "block {n} has ommers, which eth_getBlockByNumber does not carry; the \
                     upstream must serve debug_getRawBlock"
                )));
            }
            let computed = block.header.hash_slow();
            if block.header.number != n || computed != given {
                return Err(self.err(
                    "eth_getBlockByNumber",
                    format!(
                        "block {n}: the header as sent hashes to {computed}, not to the hash \
                         {given} the upstream gave (a field loupe does not know?)"
                    ),
                ));
            }
            out.push(block);
        }
        Ok(out)
    }
}

/// `block` with its blob transactions in their consensus form (no sidecars), unless its header
/// commits to the form it came in (anvil's) and the header policy is `dev`: then as it came, for
/// the import to check against its header and store without the sidecars.
fn consensus_form(
    block: Block<TxEnvelope>,
    policy: crate::chain::HeaderPolicy,
) -> Block<TxEnvelope> {
    use alloy_consensus::proofs::calculate_transaction_root;
    if !block.body.transactions.iter().any(crate::import::has_sidecar) {
        return block;
    }
    let number = block.header.number;
    let header_root = block.header.transactions_root;
    let received_root = (policy == crate::chain::HeaderPolicy::Dev)
        .then(|| calculate_transaction_root(&block.body.transactions));
    let (stripped, count) = crate::import::without_sidecars(block.clone());
    if received_root == Some(header_root)
        && calculate_transaction_root(&stripped.body.transactions) != header_root
    {
        tracing::debug!(target: "follow", block = number, sidecars = count, "the header commits to the blob sidecars (anvil); checked as received, stored without them");
        return block;
    }
    tracing::debug!(target: "follow", block = number, sidecars = count, "blob sidecars left out of the block");
    stripped
}
