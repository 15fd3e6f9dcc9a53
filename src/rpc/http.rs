//! HTTP-level middleware: JSON-RPC at `/`, `GET /health` for load balancers (and the same
//! check on requests a load balancer marks with [`HEALTH_GATE`]), 404 elsewhere; optional CORS.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use tower::{Layer, Service};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

use crate::chain::SyncStatus;
use crate::storage::Database;

/// What [`PathsLayer`] needs to answer `/health`: the database (local head) and the sync
/// status.
pub(crate) type HealthSource = (Arc<Database>, Arc<SyncStatus>);

/// A request header (any value) asking for an answer only from a healthy node: when `/health`
/// would answer 503, so does the request, with the same reason, before any JSON-RPC work.
///
/// open-source nginx cannot poll `/health` (active checks are NGINX Plus), so the shipped
/// configuration (`deploy/nginx/loupe.conf`) sets this header on every proxied request and
/// retries a 503 on the next replica: each request is a health check.
pub const HEALTH_GATE: &str = "x-loupe-healthy-only";

/// Passes `/` on to JSON-RPC, answers `GET /health` (200 `OK`, or 503 with the reason: see
/// [`SyncStatus::health`]), and 404 for any other path.
#[derive(Debug, Clone)]
pub(crate) struct PathsLayer {
    pub(crate) health: Option<HealthSource>,
}

impl<S> Layer<S> for PathsLayer {
    type Service = Paths<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Paths { inner, health: self.health.clone() }
    }
}

/// The service of [`PathsLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Paths<S> {
    inner: S,
    health: Option<HealthSource>,
}

fn health(source: &Option<HealthSource>) -> HttpResponse {
    let verdict = match source {
        None => Ok(()),
        Some((db, sync)) => match db.begin_read().and_then(|r| r.head()) {
            Ok(head) => sync.health(head.unwrap_or(0)),
            Err(e) => Err(format!("database: {e}")),
        },
    };
    let (status, body) = match verdict {
        Ok(()) => (http::StatusCode::OK, "OK\n".to_string()),
        Err(why) => (http::StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    };
    let mut resp = HttpResponse::new(HttpBody::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

impl<S, B> Service<HttpRequest<B>> for Paths<S>
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
        if req.uri().path() == "/health" && req.method() == http::Method::GET {
            let resp = health(&self.health);
            return Box::pin(async move { Ok(resp) });
        }
        if req.headers().contains_key(HEALTH_GATE) {
            let resp = health(&self.health);
            if resp.status() != http::StatusCode::OK {
                return Box::pin(async move { Ok(resp) });
            }
        }
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
