//! [`JsonRpcGuardLayer`]: the JSON-RPC 2.0 envelope rules of behaviour.md §1 that jsonrpsee's
//! defaults do not give, enforced in front of it.
//!
//! - the body limit also for bodies without `Content-Length` (413, not 500);
//! - the batch limit with a message that names it;
//! - a request that is not a valid request object gets -32600 with id null, also when it has no
//!   id (jsonrpsee answers -32700 there), and a top-level scalar gets -32600;
//! - numeric ids jsonrpsee cannot hold (negative, fractional, beyond u64) are echoed exactly;
//!   ids of other types (bool, object, array) get -32600 with id null;
//! - notifications get no response object: an empty body, not `null`.
//!
//! The common case (one valid request or a batch of them) costs one scan of the body without
//! allocation of the params, and is forwarded unchanged.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use serde_json::value::RawValue;
use tower::{Layer, Service};

use super::RpcError;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// See the module docs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JsonRpcGuardLayer {
    pub(crate) max_body: u32,
    pub(crate) max_batch: u32,
}

impl<S> Layer<S> for JsonRpcGuardLayer {
    type Service = JsonRpcGuard<S>;
    fn layer(&self, inner: S) -> Self::Service {
        JsonRpcGuard { inner, limits: *self }
    }
}

/// The service of [`JsonRpcGuardLayer`].
#[derive(Debug, Clone)]
pub(crate) struct JsonRpcGuard<S> {
    inner: S,
    limits: JsonRpcGuardLayer,
}

/// What to do with a request body.
enum Verdict {
    /// Valid as it is.
    Forward { notifications_only: bool },
    /// Answer this JSON at once.
    Respond(String),
    /// Forward this body instead; put the original ids back in the response.
    Rewrite { body: String, ids: Vec<(String, String)>, notifications_only: bool },
}

fn json_response(status: http::StatusCode, body: String) -> HttpResponse {
    let mut resp = HttpResponse::new(HttpBody::from(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp
}

/// An item that jsonrpsee answers with -32600 and id null.
const INVALID_ITEM: &str = r#"{"id":null}"#;

enum Item {
    Valid,
    Notification,
    /// Replace the item with this text.
    Replace(String),
}

fn probe(item: &RawValue, ids: &mut Vec<(String, String)>) -> Item {
    let Ok(map) = serde_json::from_str::<BTreeMap<Cow<'_, str>, &RawValue>>(item.get()) else {
        return Item::Valid; // not an object: jsonrpsee answers -32600 itself
    };
    let is_str = |k: &str| map.get(k).is_some_and(|v| v.get().starts_with('"'));
    let well_formed = map.get("jsonrpc").is_some_and(|v| v.get() == r#""2.0""#) && is_str("method");
    let Some(id) = map.get("id") else {
        return if well_formed { Item::Notification } else { Item::Replace(INVALID_ITEM.into()) };
    };
    let id = id.get();
    match id.as_bytes().first() {
        Some(b'"') | Some(b'n') => Item::Valid,
        Some(b'0'..=b'9')
            if id.bytes().all(|b| b.is_ascii_digit()) && id.parse::<u64>().is_ok() =>
        {
            Item::Valid
        }
        Some(b'-' | b'0'..=b'9') => {
            // A number jsonrpsee's `Id` cannot hold: send a token string, echo the original.
            let Ok(mut value) = serde_json::from_str::<serde_json::Value>(item.get()) else {
                return Item::Replace(INVALID_ITEM.into());
            };
            let token = format!("__loupe_id_{}_{}__", std::process::id(), ids.len());
            value["id"] = serde_json::Value::String(token.clone());
            ids.push((format!("\"{token}\""), id.to_string()));
            Item::Replace(value.to_string())
        }
        _ => Item::Replace(INVALID_ITEM.into()),
    }
}

fn inspect(body: &[u8], max_batch: u32) -> Verdict {
    let text = match std::str::from_utf8(body) {
        Ok(t) => t.trim_start(),
        Err(_) => return Verdict::Forward { notifications_only: false },
    };
    let mut ids = Vec::new();
    match text.as_bytes().first() {
        Some(b'{') => {
            let Ok(item) = serde_json::from_str::<&RawValue>(text) else {
                return Verdict::Forward { notifications_only: false }; // parse error: jsonrpsee
            };
            match probe(item, &mut ids) {
                Item::Valid => Verdict::Forward { notifications_only: false },
                Item::Notification => Verdict::Forward { notifications_only: true },
                Item::Replace(body) => Verdict::Rewrite { body, ids, notifications_only: false },
            }
        }
        Some(b'[') => {
            let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(text) else {
                return Verdict::Forward { notifications_only: false };
            };
            if items.len() > max_batch as usize {
                return Verdict::Respond(
                    RpcError::BatchTooLarge { len: items.len(), max: max_batch }
                        .response_with_null_id(),
                );
            }
            if items.is_empty() {
                return Verdict::Forward { notifications_only: false };
            }
            let mut replaced = false;
            let mut notifications = 0;
            let parts: Vec<Cow<'_, str>> = items
                .iter()
                .map(|item| match probe(item, &mut ids) {
                    Item::Valid => Cow::Borrowed(item.get()),
                    Item::Notification => {
                        notifications += 1;
                        Cow::Borrowed(item.get())
                    }
                    Item::Replace(s) => {
                        replaced = true;
                        Cow::Owned(s)
                    }
                })
                .collect();
            let notifications_only = notifications == items.len();
            if replaced {
                Verdict::Rewrite { body: format!("[{}]", parts.join(",")), ids, notifications_only }
            } else {
                Verdict::Forward { notifications_only }
            }
        }
        _ => match serde_json::from_str::<&RawValue>(text) {
            // Valid JSON, but neither an object nor an array.
            Ok(_) => Verdict::Respond(RpcError::InvalidRequest.response_with_null_id()),
            Err(_) => Verdict::Forward { notifications_only: false },
        },
    }
}

impl<S, B> Service<HttpRequest<B>> for JsonRpcGuard<S>
where
    S: Service<HttpRequest<HttpBody>, Response = HttpResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: HttpRequest<B>) -> Self::Future {
        // The clone is ready only after poll_ready; use the ready one, keep the clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits;
        Box::pin(async move {
            if req.method() != http::Method::POST
                || !jsonrpsee::server::http::content_type_is_json(&req)
            {
                return inner.call(req.map(HttpBody::new)).await;
            }
            let (parts, body) = req.into_parts();
            let bytes = match Limited::new(body, limits.max_body as usize).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                    let body = RpcError::BodyTooLarge(limits.max_body).response_with_null_id();
                    return Ok(json_response(http::StatusCode::PAYLOAD_TOO_LARGE, body));
                }
                Err(e) => {
                    let body = RpcError::Parse(format!("could not read the request body: {e}"))
                        .response_with_null_id();
                    return Ok(json_response(http::StatusCode::BAD_REQUEST, body));
                }
            };
            let (body, ids, notifications_only) = match inspect(&bytes, limits.max_batch) {
                Verdict::Respond(json) => return Ok(json_response(http::StatusCode::OK, json)),
                Verdict::Forward { notifications_only } => {
                    (HttpBody::from(bytes.to_vec()), Vec::new(), notifications_only)
                }
                Verdict::Rewrite { body, ids, notifications_only } => {
                    (HttpBody::from(body), ids, notifications_only)
                }
            };
            let resp = inner.call(HttpRequest::from_parts(parts, body)).await?;
            if ids.is_empty() && !notifications_only {
                return Ok(resp);
            }
            let (mut parts, body) = resp.into_parts();
            let Ok(collected) = body.collect().await else {
                let body = RpcError::Internal("response body".into()).response_with_null_id();
                return Ok(json_response(http::StatusCode::INTERNAL_SERVER_ERROR, body));
            };
            let mut text = String::from_utf8_lossy(&collected.to_bytes()).into_owned();
            if notifications_only && text.trim() == "null" {
                text.clear();
            }
            for (token, original) in &ids {
                text = text.replace(token.as_str(), original);
            }
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Ok(HttpResponse::from_parts(parts, HttpBody::from(text)))
        })
    }
}
