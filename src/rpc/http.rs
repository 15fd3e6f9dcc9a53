//! HTTP-level middleware: only `/` is served (404 elsewhere), optional CORS.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use tower::{Layer, Service};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

/// Answers 404 for any path other than `/`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RootPathLayer;

impl<S> Layer<S> for RootPathLayer {
    type Service = RootPath<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RootPath { inner }
    }
}

/// The service of [`RootPathLayer`].
#[derive(Debug, Clone)]
pub(crate) struct RootPath<S> {
    inner: S,
}

impl<S, B> Service<HttpRequest<B>> for RootPath<S>
where
    S: Service<HttpRequest<B>, Response = HttpResponse>,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: HttpRequest<B>) -> Self::Future {
        if req.uri().path() != "/" {
            let mut resp =
                HttpResponse::new(HttpBody::from("Not Found: JSON-RPC is served at /\n"));
            *resp.status_mut() = http::StatusCode::NOT_FOUND;
            return Box::pin(async move { Ok(resp) });
        }
        Box::pin(self.inner.call(req))
    }
}

/// CORS for `--http.corsdomain`: `*` for any origin, else a comma-separated list.
pub(crate) fn cors_layer(domains: &str) -> std::io::Result<CorsLayer> {
    let layer = CorsLayer::new()
        .allow_methods([http::Method::POST])
        .allow_headers([http::header::CONTENT_TYPE]);
    if domains.trim() == "*" {
        return Ok(layer.allow_origin(Any));
    }
    let origins = domains
        .split(',')
        .map(|d| d.trim().parse::<http::HeaderValue>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--http.corsdomain: {e}"))
        })?;
    Ok(layer.allow_origin(AllowOrigin::list(origins)))
}
