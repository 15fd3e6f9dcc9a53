//! The explorer (issue 43): pages served by the node under `/explorer/` on its HTTP listener,
//! beside JSON-RPC, that show a transaction (its call tree and state diff), a block, an
//! address with its traces, and a simulated call, for a person with a browser.
//!
//! - **Data**: every page gets its data by calling the served JSON-RPC methods by name
//!   ([`RpcCaller`]: the method table, its pools, limits and deadlines), never by reading
//!   storage or tracing on its own. A page whose inputs are large is rendered on the read pool,
//!   not on the server's threads.
//! - **Escaping**: pages are written with [`html::Html`], where markup is `&'static str` and
//!   every other string goes through one escaping function.
//! - **Headers**: every response carries [`CSP`] (no outside origin, no inline script or
//!   style), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`. The one
//!   stylesheet and the one script are embedded and served with their content's hash in their
//!   names, cached for a year.
//! - **Errors**: a malformed hash, address or number is a 400 page, something not in the chain
//!   a 404 page, a method's refusal (-32005, a deadline) a 503 page, each saying what is wrong;
//!   a method other than GET (or HEAD, answered as GET without its body) gets 405, but for
//!   the call form, which is sent by POST (`call_form.rs`).

mod address;
mod block;
mod call_form;
mod error;
mod format;
mod home;
mod html;
mod input;
mod page;
mod trace;
mod tx;

pub use error::ExplorerError;

use std::sync::LazyLock;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, Uri, header};
use serde_json::Value;

use crate::rpc::{PageFuture, Pages, RpcCaller};
use html::Html;
use input::{Query, percent_decode, quote};
use page::{Page, block_link, call};

/// Where the pages are served.
pub const PREFIX: &str = "/explorer/";

/// The Content-Security-Policy of every explorer response: nothing from another origin, no
/// inline script or style, forms only to the node itself, no framing.
pub const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
                       img-src 'self' data:; form-action 'self'; base-uri 'none'; \
                       frame-ancestors 'none'";

const CSS: &str = include_str!("static/explorer.css");
const JS: &str = include_str!("static/explorer.js");

/// FNV-1a of `bytes`: the version in the names of the embedded files.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

static CSS_PATH: LazyLock<String> =
    LazyLock::new(|| format!("/explorer/static/explorer.{:016x}.css", fnv1a(CSS.as_bytes())));
static JS_PATH: LazyLock<String> =
    LazyLock::new(|| format!("/explorer/static/explorer.{:016x}.js", fnv1a(JS.as_bytes())));

/// The explorer's pages, for `RpcConfig::pages`.
#[derive(Debug, Default)]
pub struct Explorer {
    _private: (),
}

impl Explorer {
    /// The explorer, served under [`PREFIX`].
    pub fn new() -> Self {
        Self::default()
    }
}

impl Pages for Explorer {
    fn claims(&self, path: &str) -> bool {
        path == "/explorer" || path.starts_with(PREFIX)
    }

    fn respond<'a>(
        &'a self,
        rpc: RpcCaller,
        method: &'a Method,
        uri: &'a Uri,
        body: Bytes,
    ) -> PageFuture<'a> {
        Box::pin(serve(rpc, method, uri, body))
    }
}

/// The call form's path, the one page that also takes POST.
const CALL_PATH: &str = "/explorer/call";

/// One request: route it, write the response, log its status and time. `body` is a POST's.
async fn serve(rpc: RpcCaller, method: &Method, uri: &Uri, body: Bytes) -> Response<Bytes> {
    let started = Instant::now();
    let path = uri.path();
    let page = if method == Method::GET {
        route(&rpc, path, uri.query()).await
    } else if method == Method::POST && path == CALL_PATH {
        call_form::post(&rpc, &body).await
    } else {
        Err(ExplorerError::MethodNotAllowed)
    };
    let response = match page {
        Ok(Page::Html { status, title, body }) => {
            html_response(status, layout(&rpc, &title, body).await)
        }
        Ok(Page::Redirect(to)) => redirect(&to),
        Ok(Page::Asset { body, content_type }) => asset(body, content_type),
        Err(e) => {
            let status = e.status();
            if status == StatusCode::INTERNAL_SERVER_ERROR {
                tracing::error!(target: "explorer", path, error = ?e, "page failed");
            }
            let mut body = Html::with_capacity(512);
            body.raw("<h1>").raw(e.title()).raw("</h1><p class=\"problem\">");
            body.text(&e.to_string()).raw("</p><p><a href=\"/explorer/\">Start page</a></p>");
            let mut response = html_response(status, layout(&rpc, e.title(), body).await);
            if status == StatusCode::METHOD_NOT_ALLOWED {
                let allow = if path == CALL_PATH { "GET, HEAD, POST" } else { "GET, HEAD" };
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            response
        }
    };
    let micros = started.elapsed().as_micros() as u64;
    tracing::debug!(target: "explorer", path, status = response.status().as_u16(), micros, "page");
    response
}

/// The page (or file, or redirect) at `path`.
async fn route(rpc: &RpcCaller, path: &str, query: Option<&str>) -> Result<Page, ExplorerError> {
    if path == "/explorer" {
        return Ok(Page::Redirect(PREFIX.into()));
    }
    if path == CSS_PATH.as_str() {
        return Ok(Page::Asset { body: CSS, content_type: "text/css; charset=utf-8" });
    }
    if path == JS_PATH.as_str() {
        return Ok(Page::Asset { body: JS, content_type: "text/javascript; charset=utf-8" });
    }
    let not_found = || ExplorerError::NotFound(format!("there is no page at {}", quote(path)));
    let Some(rest) = path.strip_prefix(PREFIX) else { return Err(not_found()) };
    let query = Query::parse(query)?;
    let arg = |prefix: &str| rest.strip_prefix(prefix).map(|a| percent_decode(a, false));
    match rest {
        "" => home::page(rpc).await,
        "search" => home::search(rpc, &query).await,
        "call" => call_form::page(rpc, &query).await,
        _ => {
            if let Some(hash) = arg("tx/") {
                tx::page(rpc, &hash?).await
            } else if let Some(block) = arg("block/") {
                block::page(rpc, &block?).await
            } else if let Some(address) = arg("address/") {
                address::page(rpc, &address?, &query).await
            } else {
                Err(not_found())
            }
        }
    }
}

/// The whole document around a page's content: head, search box, navigation, footer (the
/// chain id and the head, when the node answers them).
async fn layout(rpc: &RpcCaller, title: &str, body: Html) -> Bytes {
    let chain = call(rpc, "eth_chainId", Value::Array(Vec::new())).await.ok();
    let head = call(rpc, "eth_blockNumber", Value::Array(Vec::new())).await.ok();
    let number = |json: Option<String>| {
        json.and_then(|j| serde_json::from_str::<String>(&j).ok()).and_then(|s| input::number(&s))
    };
    let (chain, head) = (number(chain), number(head));
    let mut h = Html::with_capacity(body.len() + 2048);
    h.raw("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    h.raw("<meta name=\"referrer\" content=\"no-referrer\"><link rel=\"icon\" href=\"data:,\">");
    h.raw("<link rel=\"stylesheet\" href=\"").raw(CSS_PATH.as_str()).raw("\">");
    h.raw("<script src=\"").raw(JS_PATH.as_str()).raw("\" defer></script>");
    h.raw("<title>").text(title).raw(" · loupe</title></head><body>");
    h.raw("<header class=\"top\"><a class=\"brand\" href=\"/explorer/\">loupe</a>");
    h.raw("<form class=\"search\" action=\"/explorer/search\" method=\"get\" role=\"search\">");
    h.raw(
        "<input type=\"search\" name=\"q\" placeholder=\"Transaction or block hash, block \
           number, address\" aria-label=\"Search\" autocomplete=\"off\" spellcheck=\"false\">",
    );
    h.raw("<button type=\"submit\">Search</button></form>");
    h.raw("<nav><a href=\"/explorer/call\">Simulate a call</a></nav></header><main>");
    h.append(body);
    h.raw("</main><footer>");
    if let Some(id) = chain {
        h.raw("chain id ").num(id).raw(" · ");
    }
    if let Some(n) = head {
        h.raw("head ");
        block_link(&mut h, n);
        h.raw(" · ");
    }
    h.raw("served by this loupe node from its JSON-RPC methods</footer></body></html>");
    Bytes::from(h.into_string())
}

/// Headers every explorer response carries.
fn secure(response: &mut Response<Bytes>, content_type: &'static str, cache: &'static str) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
}

fn html_response(status: StatusCode, body: Bytes) -> Response<Bytes> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    // Chain data changes at the head: pages are revalidated.
    secure(&mut response, "text/html; charset=utf-8", "no-cache");
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    // The name holds the content's hash: a new build serves new names.
    secure(&mut response, content_type, "public, max-age=31536000, immutable");
    response
}

fn redirect(to: &str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::SEE_OTHER;
    secure(&mut response, "text/plain; charset=utf-8", "no-cache");
    // Paths the explorer wrote from checked hashes, numbers and addresses.
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}
