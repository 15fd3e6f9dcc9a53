//! [`Raw`]: a method's result as JSON text, written once and copied verbatim into the response.

use serde_json::value::RawValue;

use crate::rpc::{RpcError, RpcResult};

/// A serialized result: JSON text, written once and copied verbatim into the response.
#[derive(Debug, Clone)]
pub(crate) struct Raw(String);

impl Raw {
    /// The JSON text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// A copy of JSON text this process wrote before (`server/cache.rs`).
    pub(crate) fn from_cached(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The JSON text, owned.
    pub(crate) fn into_string(self) -> String {
        self.0
    }

    /// As serde_json's raw value (for jsonrpsee's subscription messages).
    pub(crate) fn into_raw_value(self) -> RpcResult<Box<RawValue>> {
        RawValue::from_string(self.0).map_err(|e| RpcError::Internal(format!("serialize: {e}")))
    }

    /// JSON text from a writer that writes only JSON (`trace/json.rs`).
    pub(crate) fn from_ascii(bytes: Vec<u8>) -> RpcResult<Self> {
        String::from_utf8(bytes)
            .map(Self)
            .map_err(|e| RpcError::Internal(format!("serialize: not UTF-8: {e}")))
    }
}

/// For the WebSocket server (jsonrpsee), which serializes results itself.
impl serde::Serialize for Raw {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

/// Serializes a result.
pub(crate) fn to_value<T: serde::Serialize>(v: T) -> RpcResult<Raw> {
    serde_json::to_string(&v).map(Raw).map_err(|e| RpcError::Internal(format!("serialize: {e}")))
}
