//! The hook for pages served on GET (and forms sent by POST) beside JSON-RPC ([`Pages`]; the
//! explorer, which lives above `rpc`, plugs in here), and [`RpcCaller`], their one way to the
//! data: the served methods, called by name through the method table ([`CallByName`], which
//! `methods.rs` implements).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::rpc::request::json::Raw;
use crate::rpc::server::pool::WorkerPool;
use crate::rpc::{RpcError, RpcResult};

/// The answer of a page handler: a whole HTTP response.
pub type PageFuture<'a> = Pin<Box<dyn Future<Output = http::Response<Bytes>> + Send + 'a>>;

/// Pages the HTTP server serves beside JSON-RPC (`RpcConfig::pages`). The server hands every
/// request whose path the handler claims to it, whatever its method, before its own routing;
/// every other path is served as if there were no handler.
pub trait Pages: Send + Sync + std::fmt::Debug {
    /// Whether `path` (the request's path, without its query) is one of the handler's.
    fn claims(&self, path: &str) -> bool;

    /// The response to a request for one of its paths; `rpc` calls the served methods. `body`
    /// is a POST's body (a form), read under the server's body limits; empty for any other
    /// method.
    fn respond<'a>(
        &'a self,
        rpc: RpcCaller,
        method: &'a http::Method,
        uri: &'a http::Uri,
        body: Bytes,
    ) -> PageFuture<'a>;
}

/// The served JSON-RPC methods, called in-process by name: the same method table (after
/// `--http.api`), handlers, worker pools, queue limits, deadlines, response limit, logs and
/// metrics as a call on `POST /`, without the JSON-RPC envelope.
#[derive(Clone)]
pub struct RpcCaller {
    served: Arc<dyn CallByName>,
    max_response: u32,
}

/// The served methods by name and the read pool: what an [`RpcCaller`] calls through (the
/// method table with its context, `methods::Served`).
pub(crate) trait CallByName: Send + Sync + std::fmt::Debug {
    /// Runs the method called `method` with `params` (the JSON text of its parameters) as a
    /// request runs it (`Methods::call`).
    fn call<'a>(
        &'a self,
        method: &'a str,
        params: &'a str,
    ) -> Pin<Box<dyn Future<Output = RpcResult<Raw>> + Send + 'a>>;

    /// The read pool (`--rpc.read-workers`).
    fn reads(&self) -> &WorkerPool;
}

impl std::fmt::Debug for RpcCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcCaller").field("methods", &self.served).finish_non_exhaustive()
    }
}

impl RpcCaller {
    pub(crate) fn new(served: Arc<dyn CallByName>, max_response: u32) -> Self {
        Self { served, max_response }
    }

    /// Calls `method` with `params`, the JSON text of its parameter array; returns the JSON
    /// text of its result, or the error a request would have been answered with.
    pub async fn call(&self, method: &str, params: &str) -> RpcResult<String> {
        let raw = self.served.call(method, params).await?;
        if raw.as_str().len() > self.max_response as usize {
            return Err(RpcError::ResponseTooLarge(self.max_response));
        }
        Ok(raw.into_string())
    }

    /// Runs `f` on the read pool (`--rpc.read-workers`), for work that would hold a server
    /// thread for long (rendering a large page); refused with the pool's -32005 when its queue
    /// is full.
    pub async fn run_read<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> RpcResult<T> {
        self.served.reads().run(move || Ok(f())).await
    }
}
