//! [`ExplorerError`]: why a page could not be shown, and the HTTP status that says so.

use http::StatusCode;

use crate::rpc::RpcError;

/// Why a page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ExplorerError {
    /// The request names something malformed: a hash, an address, a number (400).
    #[error("{0}")]
    BadRequest(String),
    /// What the request names is not in this node's chain, or the path is no page (404).
    #[error("{0}")]
    NotFound(String),
    /// A method other than GET, or than GET and POST for the call form (405).
    #[error("the explorer's pages take GET (and the call form POST)")]
    MethodNotAllowed,
    /// The JSON-RPC method the page calls refused or failed: the method's name and its error.
    #[error("{method}: {source}")]
    Rpc {
        /// The method called.
        method: &'static str,
        /// Its error, as a request would have got it.
        source: RpcError,
    },
    /// A method answered with JSON the page could not read (a bug; 500).
    #[error("{method} answered with JSON the explorer cannot read: {detail}")]
    Unreadable {
        /// The method called.
        method: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl ExplorerError {
    /// The HTTP status of the error page.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Unreadable { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Rpc { source, .. } => match source {
                // What the request asked for is wrong (a simulated call's fields, its block).
                RpcError::InvalidParams(_)
                | RpcError::Execution(_)
                | RpcError::InsufficientFunds { .. }
                | RpcError::NotEnabled(_) => StatusCode::BAD_REQUEST,
                RpcError::HeaderNotFound | RpcError::NotTraceable(_) => StatusCode::NOT_FOUND,
                RpcError::Storage(_) | RpcError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
                // The node's limits and deadlines (-32005, timeouts), a namespace not served:
                // the page may work later or on another node.
                _ => StatusCode::SERVICE_UNAVAILABLE,
            },
        }
    }

    /// The heading of the error page.
    pub(crate) fn title(&self) -> &'static str {
        match self.status() {
            StatusCode::BAD_REQUEST => "Bad request",
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::METHOD_NOT_ALLOWED => "Method not allowed",
            StatusCode::SERVICE_UNAVAILABLE => "Unavailable",
            _ => "Internal error",
        }
    }
}
