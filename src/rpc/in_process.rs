//! [`InProcess`]: the whole HTTP request path of [`super::start`] (middleware, limits, methods)
//! without a socket, for fuzzing and in-process benchmarks.

use std::sync::Arc;

use jsonrpsee::server::{HttpBody, HttpRequest, ServerHandle, TowerService};
use tower::Service;
use tower::layer::util::Identity;

use super::{HttpLayers, RpcConfig, RpcContext, http_middleware, http_server_config, module};
use crate::chain::ChainSpec;
use crate::storage::Database;

/// The server's request path as a function: request bytes in, status and body out. Must be
/// used inside a multi-thread tokio runtime (EVM methods wait on the worker pool).
pub struct InProcess {
    service: TowerService<Identity, HttpLayers>,
    /// Keeps the service's stop handle alive.
    _handle: ServerHandle,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess").finish_non_exhaustive()
    }
}

impl InProcess {
    /// The methods and middleware `start` would serve, for `config` (its addresses unused).
    pub fn new(db: Arc<Database>, spec: ChainSpec, config: RpcConfig) -> std::io::Result<Self> {
        let server_config = http_server_config(&config);
        let middleware = http_middleware(&db, &config)?;
        let methods = module(RpcContext::new(db, spec, config)).map_err(std::io::Error::other)?;
        let (stop, handle) = jsonrpsee::server::stop_channel();
        let service = jsonrpsee::server::Server::builder()
            .set_config(server_config)
            .set_http_middleware(middleware)
            .to_service_builder()
            .build(methods, stop);
        Ok(Self { service, _handle: handle })
    }

    /// Sends `body` to `path` with `method` (`"POST"`, `"GET"`…) and JSON content type;
    /// returns the HTTP status and the response body.
    pub async fn request(&self, method: &str, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
        use http_body_util::BodyExt;
        let request = HttpRequest::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(HttpBody::from(body));
        let Ok(request) = request else { return (400, b"bad method or path".to_vec()) };
        match self.service.clone().call(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.into_body().collect().await;
                (status, body.map(|b| b.to_bytes().to_vec()).unwrap_or_default())
            }
            Err(e) => (500, e.to_string().into_bytes()),
        }
    }
}
