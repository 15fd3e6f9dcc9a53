//! JSON-RPC 2.0 over one request body (behaviour.md §1; an HTTP body or a WebSocket message):
//! the envelope parsed once, each call dispatched on [`Methods`] (on WebSocket, through
//! [`Calls`], also on the connection's subscriptions), the response written into one buffer.
//!
//! - a body that is not JSON: -32700, id null;
//! - a top-level scalar, an empty batch, an item that is not a request object: -32600, id null;
//! - a wrong `jsonrpc` or a missing or non-string `method`: -32600 with the request's id;
//! - an id is echoed byte for byte when it is a string, a number or null; an id of another
//!   type (bool, object, array), or a number out of a double's range, gets -32600 with id null;
//! - a notification (no `id`) is not run and gets no response object, as in jsonrpsee and
//!   reth; a body of notifications only gets an empty body, not `[]` or `null`;
//! - a batch over the limit: one -32010 error naming the limit; the items of a batch run in
//!   order, one after the other;
//! - a response over the limit: -32008 for that call, -32011 for a whole batch.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::rpc::request::json::Raw;
use crate::rpc::server::methods::Methods;
use crate::rpc::{RpcContext, RpcError, RpcResult};

/// Where the calls of a body go: the method table ([`Table`]), or on WebSocket the table and
/// the connection's subscriptions (`ws.rs`).
pub(crate) trait Calls: Sync {
    /// Runs `method` with `params` (the JSON text of its parameters; `None` for none).
    fn call(
        &self,
        method: &str,
        params: Option<&str>,
    ) -> impl std::future::Future<Output = RpcResult<Raw>> + Send;
}

/// The method table over its context: the calls of an HTTP body.
#[derive(Debug)]
pub(crate) struct Table<'a> {
    pub(crate) ctx: &'a Arc<RpcContext>,
    pub(crate) methods: &'a Methods,
}

impl Calls for Table<'_> {
    fn call(
        &self,
        method: &str,
        params: Option<&str>,
    ) -> impl std::future::Future<Output = RpcResult<Raw>> + Send {
        self.methods.call(self.ctx, method, params)
    }
}

/// The limits of one body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most requests in one batch.
    pub(crate) max_batch: u32,
    /// Largest response in bytes.
    pub(crate) max_response: u32,
}

/// What a body is answered with.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A response object or a batch of them.
    Json(Vec<u8>),
    /// Nothing: the body held notifications only.
    Empty,
}

/// One request object, borrowed from the body. A member that is present is `Some`, also when
/// it is `null` (serde's `Option` would read `null` as absent, losing `"id":null`).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// What an item of the body asks for.
enum Item<'a> {
    /// A call to answer.
    Call { id: &'a str, method: Cow<'a, str>, params: Option<&'a RawValue> },
    /// A notification: no answer.
    Notification,
    /// Not a valid request: -32600 with this id (`null` when it has none or cannot be echoed).
    Invalid { id: &'a str },
}

const NULL: &str = "null";

/// A batch item that took this long on the server's thread (an EVM call run inline) is followed
/// by a yield to the runtime before the next item.
const BATCH_YIELD_AFTER: Duration = Duration::from_micros(20);

fn classify(env: Envelope<'_>) -> Item<'_> {
    let id = match env.id {
        None => None,
        Some(raw) => match raw.get().as_bytes().first() {
            Some(b'"' | b'n') => Some(raw.get()),
            Some(b'-' | b'0'..=b'9') if number_clients_read(raw.get()) => Some(raw.get()),
            _ => return Item::Invalid { id: NULL },
        },
    };
    let version_ok = env.jsonrpc.is_some_and(|v| v.get() == r#""2.0""#);
    let method = env
        .method
        .filter(|m| m.get().starts_with('"'))
        .and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok());
    match (id, method) {
        (Some(id), Some(method)) if version_ok => Item::Call { id, method, params: env.params },
        (None, Some(_)) if version_ok => Item::Notification,
        (id, _) => Item::Invalid { id: id.unwrap_or(NULL) },
    }
}

/// Whether a numeric id can be echoed: JSON's grammar allows numbers that common parsers
/// refuse (`1e999` is out of range for serde_json and JavaScript gives `Infinity`); such an id
/// gets -32600 with id null rather than a response its sender cannot read.
fn number_clients_read(text: &str) -> bool {
    let plain = text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit());
    plain
        || serde_json::from_str::<serde_json::Number>(text)
            .is_ok_and(|n| n.as_f64().is_some_and(f64::is_finite))
}

/// An item of a batch, already parsed as JSON.
fn classify_raw(raw: &RawValue) -> Item<'_> {
    match serde_json::from_str::<Envelope<'_>>(raw.get()) {
        Ok(env) => classify(env),
        Err(_) => Item::Invalid { id: NULL },
    }
}

/// Answers one request body.
pub(crate) async fn handle(
    ctx: &Arc<RpcContext>,
    methods: &Methods,
    body: &[u8],
    limits: Limits,
) -> Reply {
    handle_with(&Table { ctx, methods }, body, limits).await
}

/// Answers one request body, its calls going to `calls`.
pub(crate) async fn handle_with(calls: &impl Calls, body: &[u8], limits: Limits) -> Reply {
    let Ok(text) = std::str::from_utf8(body) else {
        return error_reply(NULL, RpcError::Parse("Parse error: the body is not UTF-8".into()));
    };
    let text = text.trim_start();
    if text.starts_with('[') {
        return handle_batch(calls, text, limits).await;
    }
    let item = match serde_json::from_str::<Envelope<'_>>(text) {
        Ok(env) => classify(env),
        // Not a request object: not JSON at all, or JSON of another shape.
        Err(e) => match serde_json::from_str::<&RawValue>(text) {
            Ok(_) => Item::Invalid { id: NULL },
            Err(_) => return error_reply(NULL, RpcError::Parse(format!("Parse error: {e}"))),
        },
    };
    let mut out = Vec::with_capacity(256);
    if answer(calls, item, limits, &mut out).await { Reply::Json(out) } else { Reply::Empty }
}

async fn handle_batch(calls: &impl Calls, text: &str, limits: Limits) -> Reply {
    let items = match serde_json::from_str::<Vec<&RawValue>>(text) {
        Ok(items) => items,
        Err(e) => return error_reply(NULL, RpcError::Parse(format!("Parse error: {e}"))),
    };
    if items.is_empty() {
        return error_reply(NULL, RpcError::InvalidRequest);
    }
    if items.len() > limits.max_batch as usize {
        return error_reply(
            NULL,
            RpcError::BatchTooLarge { len: items.len(), max: limits.max_batch },
        );
    }
    let mut out = Vec::with_capacity(64 * items.len());
    out.push(b'[');
    let mut answered = false;
    for raw in items {
        let mark = out.len();
        if answered {
            out.push(b',');
        }
        let started = Instant::now();
        if answer(calls, classify_raw(raw), limits, &mut out).await {
            answered = true;
        } else {
            out.truncate(mark);
        }
        // A short EVM call runs inline within its budget (`request/inline.rs`); a batch of them
        // gives the thread back between calls, so other connections' requests are not held up
        // behind the whole batch.
        if started.elapsed() >= BATCH_YIELD_AFTER {
            tokio::task::yield_now().await;
        }
        if out.len() > limits.max_response as usize {
            return error_reply(NULL, RpcError::BatchResponseTooLarge(limits.max_response));
        }
    }
    if !answered {
        return Reply::Empty;
    }
    out.push(b']');
    Reply::Json(out)
}

/// Appends the response object of `item` to `out`; false for a notification (nothing
/// appended).
async fn answer(calls: &impl Calls, item: Item<'_>, limits: Limits, out: &mut Vec<u8>) -> bool {
    let (id, method, params) = match item {
        Item::Notification => return false,
        Item::Invalid { id } => {
            write_error(out, id, RpcError::InvalidRequest);
            return true;
        }
        Item::Call { id, method, params } => (id, method, params),
    };
    let result = calls.call(&method, params.map(RawValue::get)).await;
    let start = out.len();
    match result {
        Ok(value) => {
            out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(br#","result":"#);
            out.extend_from_slice(value.as_str().as_bytes());
            out.push(b'}');
            if out.len() - start > limits.max_response as usize {
                out.truncate(start);
                write_error(out, id, RpcError::ResponseTooLarge(limits.max_response));
            }
        }
        Err(e) => write_error(out, id, e),
    }
    true
}

fn write_error(out: &mut Vec<u8>, id: &str, e: RpcError) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","error":"#);
    match serde_json::to_vec(&ErrorObjectOwned::from(e)) {
        Ok(obj) => out.extend_from_slice(&obj),
        // An error object is plain data; serializing it does not fail.
        Err(_) => out.extend_from_slice(br#"{"code":-32603,"message":"internal error"}"#),
    }
    out.push(b'}');
}

fn error_reply(id: &str, e: RpcError) -> Reply {
    let mut out = Vec::with_capacity(128);
    write_error(&mut out, id, e);
    Reply::Json(out)
}

#[cfg(test)]
mod tests {
    use super::number_clients_read;

    #[test]
    fn numeric_ids_are_echoed_only_when_a_parser_can_read_them() {
        for ok in ["0", "1", "-1", "1.5", "1e3", "18446744073709551616", "12345678901234567890123"]
        {
            assert!(number_clients_read(ok), "{ok}");
            assert!(serde_json::from_str::<serde_json::Value>(ok).is_ok(), "{ok}");
        }
        for refused in ["1e999", "-823e979805", "1E400"] {
            assert!(!number_clients_read(refused), "{refused}");
        }
    }
}
