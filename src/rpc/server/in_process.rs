//! [`InProcess`]: the whole HTTP request path of [`crate::rpc::start`] (paths, limits, envelope,
//! methods) without a socket, for fuzzing and in-process benchmarks.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::chain::ChainSpec;
use crate::rpc::server::http::App;
use crate::rpc::{RpcConfig, RpcContext};
use crate::storage::Database;

/// The server's request path as a function: request bytes in, status and body out. Must be
/// used inside a multi-thread tokio runtime (EVM methods wait on the worker pool). CORS, a
/// socket-level layer, is not applied.
#[derive(Debug)]
pub struct InProcess {
    app: App,
}

impl InProcess {
    /// The methods and limits `start` would serve, for `config` (its addresses unused).
    pub fn new(db: Arc<Database>, spec: ChainSpec, config: RpcConfig) -> std::io::Result<Self> {
        Ok(Self { app: App::new(Arc::new(RpcContext::new(db, spec, config))) })
    }

    /// Sends `body` to `path` with `method` (`"POST"`, `"GET"`…) and JSON content type;
    /// returns the HTTP status and the response body.
    pub async fn request(&self, method: &str, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)));
        let Ok(request) = request else { return (400, b"bad method or path".to_vec()) };
        let response = self.app.respond(request).await;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await;
        (status, body.map(|b| b.to_bytes().to_vec()).unwrap_or_default())
    }
}
