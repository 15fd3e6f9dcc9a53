//! [`Raw`]: a method's result as JSON text, written once and copied verbatim into the response.

use crate::rpc::{RpcError, RpcResult};

/// A serialized result: JSON text, written once and copied verbatim into the response.
#[derive(Debug, Clone)]
pub(crate) struct Raw(String);

impl Raw {
    /// The JSON text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// A copy of JSON text this process wrote before (`request/cache.rs`).
    pub(crate) fn from_cached(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The JSON text, owned.
    pub(crate) fn into_string(self) -> String {
        self.0
    }

    /// JSON text from a writer that writes only JSON (`trace/json.rs`).
    pub(crate) fn from_ascii(bytes: Vec<u8>) -> RpcResult<Self> {
        String::from_utf8(bytes)
            .map(Self)
            .map_err(|e| RpcError::Internal(format!("serialize: not UTF-8: {e}")))
    }
}

/// Serializes a result.
pub(crate) fn to_value<T: serde::Serialize>(v: T) -> RpcResult<Raw> {
    serde_json::to_string(&v).map(Raw).map_err(|e| RpcError::Internal(format!("serialize: {e}")))
}
