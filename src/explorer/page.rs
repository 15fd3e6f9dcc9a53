//! What every page is made of: the [`Page`] a route answers, the served methods it calls and
//! reads, and the links and fields pages share.

use alloy_primitives::Address;
use http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::explorer::ExplorerError;
use crate::explorer::html::Html;
use crate::rpc::RpcCaller;

/// Inputs (JSON text from the methods) up to this size are rendered on the server's thread;
/// larger ones on the read pool (a page of a few thousand frames takes milliseconds).
const INLINE_RENDER_BYTES: usize = 64 * 1024;

/// What a route answers.
#[derive(Debug)]
pub(crate) enum Page {
    /// A page: its status, its title and what goes in its `<main>`.
    Html {
        /// The HTTP status (200, or an error a page shows beside its form).
        status: StatusCode,
        /// The `<title>`, before " · loupe".
        title: String,
        /// The content.
        body: Html,
    },
    /// A redirect (303) to a path of the explorer.
    Redirect(String),
    /// An embedded file.
    Asset {
        /// Its content.
        body: &'static str,
        /// Its media type.
        content_type: &'static str,
    },
}

impl Page {
    /// A page with status 200.
    pub(crate) fn ok(title: impl Into<String>, body: Html) -> Self {
        Self::Html { status: StatusCode::OK, title: title.into(), body }
    }
}

/// Calls a served method; its JSON result as text.
pub(crate) async fn call(
    rpc: &RpcCaller,
    method: &'static str,
    params: Value,
) -> Result<String, ExplorerError> {
    rpc.call(method, &params.to_string())
        .await
        .map_err(|source| ExplorerError::Rpc { method, source })
}

/// A method's JSON result read as `T`.
pub(crate) fn parse<T: DeserializeOwned>(
    method: &'static str,
    json: &str,
) -> Result<T, ExplorerError> {
    serde_json::from_str(json)
        .map_err(|e| ExplorerError::Unreadable { method, detail: e.to_string() })
}

/// Runs `render` on the read pool when its input (`bytes` of JSON) is large, else here.
pub(crate) async fn render<T: Send + 'static>(
    rpc: &RpcCaller,
    bytes: usize,
    render: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ExplorerError> {
    if bytes <= INLINE_RENDER_BYTES {
        return Ok(render());
    }
    rpc.run_read(render).await.map_err(|source| ExplorerError::Rpc { method: "rendering", source })
}

/// A link to an address's page, the address as its text and its title (the whole address,
/// where a narrow screen cuts the text).
pub(crate) fn address_link(h: &mut Html, address: &Address) {
    h.raw("<a class=\"addr\" href=\"/explorer/address/").show(address).raw("\" title=\"");
    h.show(address).raw("\">").show(address).raw("</a>");
}

/// A link to a block's page, `#n` as its text.
pub(crate) fn block_link(h: &mut Html, n: u64) {
    h.raw("<a href=\"/explorer/block/").num(n).raw("\">#").num(n).raw("</a>");
}

/// A link to a transaction's page, its hash as its text and its title.
pub(crate) fn tx_link(h: &mut Html, hash: &str) {
    h.raw("<a class=\"hash\" href=\"/explorer/tx/").text(hash).raw("\" title=\"").text(hash);
    h.raw("\">").text(hash).raw("</a>");
}

/// A `<dt>`/`<dd>` pair of a summary list, the value as text.
pub(crate) fn field(h: &mut Html, name: &'static str, value: &str) {
    h.raw("<dt>").raw(name).raw("</dt><dd>").text(value).raw("</dd>");
}

/// The address in a JSON field (as the methods write them), if it is one.
pub(crate) fn json_address(v: &Value, key: &str) -> Option<Address> {
    v.get(key)?.as_str()?.parse().ok()
}
