//! [`RpcError`] and the one place where errors become JSON-RPC error codes.
//!
//! Codes follow `../shared/spec/behaviour.md` and the execution-apis fixtures (geth wording),
//! not reth where they differ: an unknown block for a state read is -32000 `header not found`.

use alloy_primitives::Bytes;
use jsonrpsee::types::ErrorObjectOwned;

use crate::storage::StorageError;

/// Result alias for RPC handlers.
pub type RpcResult<T> = Result<T, RpcError>;

/// Everything a method can answer with instead of a result.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The body is not JSON (-32700).
    #[error("{0}")]
    Parse(String),
    /// The body is JSON but not a valid request (-32600).
    #[error("Invalid request")]
    InvalidRequest,
    /// A batch longer than the limit (-32010, as jsonrpsee and reth answer).
    #[error("batch of {len} requests is over the limit of {max}")]
    BatchTooLarge {
        /// Requests in the batch.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// A request body over the limit (-32007, with HTTP 413).
    #[error("request body is over the limit of {0} bytes")]
    BodyTooLarge(u32),
    /// No method of this name is served (-32601; geth's wording).
    #[error("the method {0} does not exist/is not available")]
    MethodNotFound(String),
    /// One response over the limit (-32008, jsonrpsee's code).
    #[error("response is over the limit of {0} bytes")]
    ResponseTooLarge(u32),
    /// A batch's responses together over the limit (-32011, jsonrpsee's code).
    #[error("batch response is over the limit of {0} bytes")]
    BatchResponseTooLarge(u32),
    /// A parameter is missing, extra, or malformed (-32602). The message names it.
    #[error("{0}")]
    InvalidParams(String),
    /// The block asked for is not stored (-32000 `header not found`).
    #[error("header not found")]
    HeaderNotFound,
    /// What a `debug_trace*` method was asked to trace is not stored or has nothing to replay
    /// on (-32000, geth's wording: `transaction not found`, `block #5 not found`,
    /// `genesis is not traceable`).
    #[error("{0}")]
    NotTraceable(String),
    /// The call could not start: intrinsic gas, fee checks and the like (-32000).
    #[error("{0}")]
    Execution(String),
    /// The sender cannot pay for gas and value (-32003).
    #[error("insufficient funds for gas * price + value: have {have}, want {want}")]
    InsufficientFunds {
        /// Sender balance.
        have: alloy_primitives::U256,
        /// Required amount.
        want: alloy_primitives::U256,
    },
    /// `eth_call` reverted (code 3 with the revert data).
    #[error("execution reverted{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    Reverted {
        /// Decoded `Error(string)` / `Panic(uint256)` reason, if any.
        reason: Option<String>,
        /// Raw revert data.
        data: Bytes,
    },
    /// The execution deadline passed (-32000).
    #[error("execution timeout after {0:?}")]
    Timeout(std::time::Duration),
    /// A scan (logs, traces of a range, fee history) ran past its deadline, `--rpc.evm-timeout`
    /// (-32000).
    #[error("query timeout after {0:?} (--rpc.evm-timeout)")]
    QueryTimeout(std::time::Duration),
    /// The client went away while its call ran (-32000; nobody reads it, it stops the work).
    #[error("request cancelled: the client went away")]
    Cancelled,
    /// The struct logger's output would pass its limit (-32008, as a response over the limit).
    #[error(
        "struct logs are over the limit of {0} bytes (--rpc.max-trace-size); trace a smaller \
         call, or disable the stack, memory or return data"
    )]
    TraceTooLarge(u64),
    /// `eth_simulateV1` refused the request with one of its own codes (-380xx, geth's).
    #[error("{message}")]
    Simulate {
        /// The code.
        code: i32,
        /// What was wrong.
        message: String,
    },
    /// A query over one of the operator's limits (-32005); the message names the limit.
    #[error("{0}")]
    Limit(String),
    /// The tracing queue is full (-32005).
    #[error("too many tracing requests")]
    Busy,
    /// The queue of whole-block and range reads is full (-32005).
    #[error("too many block, receipt and log requests")]
    ReadBusy,
    /// A feature the operator did not enable (-32602).
    #[error("{0}")]
    NotEnabled(&'static str),
    /// No upstream to forward a transaction to (-32601: loupe itself broadcasts nothing).
    #[error("{0}")]
    NoUpstream(&'static str),
    /// The upstream answered a forwarded request with an error: its code, message and data,
    /// passed through.
    #[error("{message}")]
    Upstream {
        /// The upstream's code.
        code: i32,
        /// The upstream's message.
        message: String,
        /// The upstream's data (JSON text).
        data: Option<String>,
    },
    /// The upstream could not be reached for a forwarded request (-32000).
    #[error("upstream unavailable: {0}")]
    UpstreamUnavailable(String),
    /// A proof below the window of a datadir that keeps trie history for it only (-32000).
    #[error("{0}")]
    ProofsNotKept(String),
    /// What a getter names does not exist at the block it names (-32001, execution-apis #851:
    /// a block access list before Amsterdam).
    #[error("resource not found: {0}")]
    ResourceNotFound(String),
    /// Storage failed (-32603; details are logged, not sent).
    #[error("internal error")]
    Storage(#[from] StorageError),
    /// A bug: panic or unexpected state (-32603; details are logged, not sent).
    #[error("internal error")]
    Internal(String),
}

/// JSON-RPC codes used by loupe.
pub mod codes {
    /// Parse error.
    pub const PARSE: i32 = -32700;
    /// Invalid request.
    pub const INVALID_REQUEST: i32 = -32600;
    /// Request body too large (jsonrpsee's code).
    pub const BODY_TOO_LARGE: i32 = -32007;
    /// Batch too large (jsonrpsee's and reth's code).
    pub const BATCH_TOO_LARGE: i32 = -32010;
    /// One response too large (jsonrpsee's code).
    pub const RESPONSE_TOO_LARGE: i32 = -32008;
    /// A batch's responses too large together (jsonrpsee's code).
    pub const BATCH_RESPONSE_TOO_LARGE: i32 = -32011;
    /// Invalid params.
    pub const INVALID_PARAMS: i32 = -32602;
    /// Internal error.
    pub const INTERNAL: i32 = -32603;
    /// Server / execution error.
    pub const SERVER: i32 = -32000;
    /// Transaction rejected.
    pub const TX_REJECTED: i32 = -32003;
    /// Limit exceeded.
    pub const LIMIT: i32 = -32005;
    /// Resource not found (EIP-1474; execution-apis #851's block access list getters).
    pub const RESOURCE_NOT_FOUND: i32 = -32001;
    /// Method not found (or not available on this node).
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// Execution reverted (EIP-1474 / geth).
    pub const REVERTED: i32 = 3;
}

impl RpcError {
    /// A complete response object with id null, for errors raised before a request's id is
    /// known (the body limit in `http.rs`).
    pub(crate) fn response_with_null_id(self) -> String {
        let obj = ErrorObjectOwned::from(self);
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": obj}).to_string()
    }
}

impl From<crate::trie::TrieError> for RpcError {
    fn from(e: crate::trie::TrieError) -> Self {
        match e {
            crate::trie::TrieError::Storage(inner) => Self::Storage(inner),
            crate::trie::TrieError::UnknownBlock(_) => Self::HeaderNotFound,
            e @ (crate::trie::TrieError::ProofsNotKept { .. }
            | crate::trie::TrieError::ProofsGrouped { .. }
            | crate::trie::TrieError::ProofsStaging { .. }
            | crate::trie::TrieError::Anchored { .. }) => Self::ProofsNotKept(e.to_string()),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<crate::witness::WitnessError> for RpcError {
    fn from(e: crate::witness::WitnessError) -> Self {
        use crate::witness::WitnessError as W;
        match e {
            W::Storage(inner) => Self::Storage(inner),
            W::Proof(inner) => Self::from(inner),
            W::UnknownBlock(_) => Self::HeaderNotFound,
            W::Timeout(after) => Self::QueryTimeout(after),
            W::Cancelled => Self::Cancelled,
            e @ W::Genesis => Self::NotTraceable(e.to_string()),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<RpcError> for ErrorObjectOwned {
    fn from(e: RpcError) -> Self {
        let code = match &e {
            RpcError::Parse(_) => codes::PARSE,
            RpcError::InvalidRequest => codes::INVALID_REQUEST,
            RpcError::BatchTooLarge { .. } => codes::BATCH_TOO_LARGE,
            RpcError::BodyTooLarge(_) => codes::BODY_TOO_LARGE,
            RpcError::MethodNotFound(_) => codes::METHOD_NOT_FOUND,
            RpcError::ResponseTooLarge(_) | RpcError::TraceTooLarge(_) => codes::RESPONSE_TOO_LARGE,
            RpcError::BatchResponseTooLarge(_) => codes::BATCH_RESPONSE_TOO_LARGE,
            RpcError::InvalidParams(_) | RpcError::NotEnabled(_) => codes::INVALID_PARAMS,
            RpcError::HeaderNotFound
            | RpcError::NotTraceable(_)
            | RpcError::Execution(_)
            | RpcError::Timeout(_)
            | RpcError::QueryTimeout(_)
            | RpcError::Cancelled
            | RpcError::UpstreamUnavailable(_)
            | RpcError::ProofsNotKept(_) => codes::SERVER,
            RpcError::NoUpstream(_) => codes::METHOD_NOT_FOUND,
            RpcError::ResourceNotFound(_) => codes::RESOURCE_NOT_FOUND,
            RpcError::Upstream { code, .. } | RpcError::Simulate { code, .. } => *code,
            RpcError::InsufficientFunds { .. } => codes::TX_REJECTED,
            RpcError::Reverted { .. } => codes::REVERTED,
            RpcError::Busy | RpcError::ReadBusy | RpcError::Limit(_) => codes::LIMIT,
            // Below an anchored datadir's anchor: the request's fault, not the node's.
            RpcError::Storage(crate::storage::StorageError::BelowAnchor { .. }) => codes::SERVER,
            RpcError::Storage(inner) => {
                tracing::error!(target: "rpc", %inner, "storage error while serving a request");
                codes::INTERNAL
            }
            RpcError::Internal(detail) => {
                tracing::error!(target: "rpc", %detail, "internal error while serving a request");
                codes::INTERNAL
            }
        };
        let message = match &e {
            RpcError::Storage(inner @ crate::storage::StorageError::BelowAnchor { .. }) => {
                inner.to_string()
            }
            _ => e.to_string(),
        };
        match e {
            RpcError::Reverted { data, .. } => Self::owned(code, message, Some(data.to_string())),
            RpcError::Upstream { data, .. } => {
                let data = data.and_then(|d| serde_json::value::RawValue::from_string(d).ok());
                Self::owned(code, message, data)
            }
            _ => Self::owned(code, message, None::<()>),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(e: RpcError) -> (i32, String, Option<String>) {
        let o = ErrorObjectOwned::from(e);
        (o.code(), o.message().to_string(), o.data().map(|d| d.get().to_string()))
    }

    #[test]
    fn each_variant_has_its_code_and_message() {
        assert_eq!(obj(RpcError::HeaderNotFound), (-32000, "header not found".into(), None));
        assert_eq!(obj(RpcError::Busy), (-32005, "too many tracing requests".into(), None));
        assert_eq!(
            obj(RpcError::ReadBusy),
            (-32005, "too many block, receipt and log requests".into(), None)
        );
        assert_eq!(
            obj(RpcError::NotTraceable("genesis is not traceable".into())),
            (-32000, "genesis is not traceable".into(), None)
        );
        assert_eq!(
            obj(RpcError::Timeout(std::time::Duration::from_secs(5))),
            (-32000, "execution timeout after 5s".into(), None)
        );
        assert_eq!(
            obj(RpcError::Reverted {
                reason: Some("user error".into()),
                data: Bytes::from(vec![1u8])
            }),
            (3, "execution reverted: user error".into(), Some("\"0x01\"".into()))
        );
        assert_eq!(
            obj(RpcError::InsufficientFunds {
                have: alloy_primitives::U256::from(1),
                want: alloy_primitives::U256::from(2)
            }),
            (-32003, "insufficient funds for gas * price + value: have 1, want 2".into(), None)
        );
        assert_eq!(obj(RpcError::Internal("boom".into())), (-32603, "internal error".into(), None));
        assert_eq!(obj(RpcError::NotEnabled("vmTrace is not supported")).0, -32602);
    }
}
