//! The HTTP server: JSON-RPC at `POST /`, `GET /health` for load balancers (and the same check
//! on requests a load balancer marks with [`HEALTH_GATE`]), the paths of the page handler when
//! one is configured (`RpcConfig::pages`: the explorer), 404 elsewhere, optional CORS, the
//! connection limits (in all and per IP address), the pace of request bodies and graceful
//! shutdown.
//!
//! No single client can take the server down by holding connections: one IP address holds at
//! most `--rpc.max-connections-per-ip` of them (more are closed at accept, before any byte is
//! read); when every one of the `--rpc.max-connections` slots is taken, a new connection has
//! an idle one of the address holding the most closed for it (`server/conns.rs`), and is
//! closed at once only when every connection is in a request; a request's head, or the next
//! one on an idle keep-alive connection, must arrive within `--rpc.idle-timeout` (hyper's
//! header read timeout, which runs from the end of the previous response); and its body within
//! `--rpc.body-timeout`, at `--rpc.min-body-rate` on average once [`BODY_GRACE`] has passed,
//! else HTTP 408 and the connection is closed. Each request runs in its client's
//! [`client::scope`], so that the pools and the filter table can count what each client holds.
//!
//! Written on hyper directly rather than on jsonrpsee's HTTP server: a cheap request then costs
//! one parse of its envelope and one response buffer (`dispatch.rs`), where jsonrpsee's layers
//! parsed it twice and built the answer through several boxed futures (issue 14's profile).
//! The transport rules are those of behaviour.md §1. A URI over hyper's limit gets a 414 that
//! says why (`server/uri_too_long.rs`).

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

use crate::chain::SyncStatus;
use crate::rpc::server::bodies::{BodyMemory, Claim, Over};
use crate::rpc::server::client::{self, PerClient};
use crate::rpc::server::conns::{Conn, Conns};
use crate::rpc::server::dispatch::{self, Limits, Reply};
use crate::rpc::server::methods::{Methods, Served};
use crate::rpc::server::pages::{Pages, RpcCaller};
use crate::rpc::server::uri_too_long::Explain414;
use crate::rpc::{BODY_GRACE, RpcContext, RpcError};
use crate::storage::Database;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response.
pub(crate) type Body = Full<Bytes>;

/// A request header (any value) asking for an answer only from a healthy node: when `/health`
/// would answer 503, so does the request, with the same reason, before any JSON-RPC work.
///
/// open-source nginx cannot poll `/health` (active checks are NGINX Plus), so the shipped
/// configuration (`deploy/nginx/loupe.conf`) sets this header on every proxied request and
/// retries a 503 on the next replica: each request is a health check.
pub const HEALTH_GATE: &str = "x-loupe-healthy-only";

/// Everything a request needs: the methods, their context, the limits.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) ctx: Arc<RpcContext>,
    pub(crate) methods: Arc<Methods>,
    /// Pages served beside JSON-RPC (the explorer), if any.
    pub(crate) pages: Option<Arc<dyn Pages>>,
    pub(crate) limits: Limits,
    pub(crate) max_body: u32,
    /// The bytes of request bodies held at once.
    pub(crate) bodies: Arc<BodyMemory>,
    /// How fast a request body must arrive.
    pub(crate) pace: Pace,
    /// The sync status `/health` reads (the database is the context's).
    pub(crate) sync: Arc<SyncStatus>,
}

impl App {
    /// The methods, limits and health source `ctx.config` asks for.
    pub(crate) fn new(ctx: Arc<RpcContext>) -> Self {
        let config = &ctx.config;
        Self {
            methods: Arc::new(Methods::new(config)),
            pages: config.pages.clone(),
            limits: Limits { max_batch: config.max_batch, max_response: config.max_response_body },
            max_body: config.max_request_body,
            bodies: BodyMemory::new(
                config.max_body_memory,
                config.client_share,
                config.max_request_body as usize,
            ),
            pace: Pace { timeout: config.body_timeout, min_rate: config.min_body_rate },
            sync: config.sync.clone(),
            ctx: ctx.clone(),
        }
    }

    /// The whole answer to one HTTP request.
    pub(crate) async fn respond<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let path = req.uri().path();
        // HEAD wherever GET is served (a load balancer may check with it): answered as GET,
        // and hyper sends the headers alone.
        let get = req.method() == Method::GET || req.method() == Method::HEAD;
        if path == "/health" && get {
            return health(&self.ctx.db, &self.sync);
        }
        if req.headers().contains_key(HEALTH_GATE) {
            let resp = health(&self.ctx.db, &self.sync);
            if resp.status() != StatusCode::OK {
                return resp;
            }
        }
        if let Some(pages) = self.pages.as_ref().filter(|p| p.claims(path)) {
            let method = if get { Method::GET } else { req.method().clone() };
            let uri = req.uri().clone();
            // A form sent by POST: its body, under the limits of a JSON-RPC request's.
            let mut claim = self.bodies.claim(client::current());
            let body = if method == Method::POST {
                let read =
                    read_body(req.into_body(), self.max_body as usize, self.pace, &mut claim);
                match read.await {
                    Ok(body) => body,
                    Err(e) => return self.refused_form(e),
                }
            } else {
                drop(req);
                Bytes::new()
            };
            let served = Served { ctx: self.ctx.clone(), methods: self.methods.clone() };
            let rpc = RpcCaller::new(Arc::new(served), self.limits.max_response);
            return pages.respond(rpc, &method, &uri, body).await.map(Full::new);
        }
        if path != "/" {
            return text(StatusCode::NOT_FOUND, "Not Found: JSON-RPC is served at /\n");
        }
        if req.method() != Method::POST {
            return text(
                StatusCode::METHOD_NOT_ALLOWED,
                "Method Not Allowed: JSON-RPC takes POST\n",
            );
        }
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: send Content-Type: application/json\n",
            );
        }
        // Held until the answer is built: the body and what is parsed from it.
        let mut claim = self.bodies.claim(client::current());
        let read = read_body(req.into_body(), self.max_body as usize, self.pace, &mut claim);
        let body = match read.await {
            Ok(body) => body,
            Err(BodyError::NoRoom(over, rest)) => {
                tokio::spawn(drain(rest));
                metrics::counter!("loupe_rpc_bodies_refused_total").increment(1);
                let body = over.error().response_with_null_id();
                return json(StatusCode::SERVICE_UNAVAILABLE, body.into());
            }
            Err(BodyError::Slow(why)) => {
                metrics::counter!("loupe_rpc_slow_bodies_total").increment(1);
                let mut resp =
                    text(StatusCode::REQUEST_TIMEOUT, format!("Request Timeout: {why}\n"));
                resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                return resp;
            }
            Err(BodyError::TooLarge(rest)) => {
                tokio::spawn(drain(rest));
                let body = RpcError::BodyTooLarge(self.max_body).response_with_null_id();
                return json(StatusCode::PAYLOAD_TOO_LARGE, body.into());
            }
            Err(BodyError::Read(e)) => {
                let body = RpcError::Parse(format!("could not read the request body: {e}"))
                    .response_with_null_id();
                return json(StatusCode::BAD_REQUEST, body.into());
            }
        };
        match dispatch::handle(&self.ctx, &self.methods, &body, self.limits).await {
            Reply::Json(out) => json(StatusCode::OK, out),
            Reply::Empty => json(StatusCode::OK, Vec::new()),
        }
    }
}

impl App {
    /// The answer to a page's form whose body could not be taken: as a JSON-RPC request's
    /// would be refused, in text.
    fn refused_form<B>(&self, e: BodyError<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
    {
        match e {
            BodyError::NoRoom(over, rest) => {
                tokio::spawn(drain(rest));
                metrics::counter!("loupe_rpc_bodies_refused_total").increment(1);
                let why = over.error().to_string();
                text(StatusCode::SERVICE_UNAVAILABLE, format!("Service Unavailable: {why}\n"))
            }
            BodyError::Slow(why) => {
                metrics::counter!("loupe_rpc_slow_bodies_total").increment(1);
                let mut resp =
                    text(StatusCode::REQUEST_TIMEOUT, format!("Request Timeout: {why}\n"));
                resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                resp
            }
            BodyError::TooLarge(rest) => {
                tokio::spawn(drain(rest));
                let why = RpcError::BodyTooLarge(self.max_body).to_string();
                text(StatusCode::PAYLOAD_TOO_LARGE, format!("Payload Too Large: {why}\n"))
            }
            BodyError::Read(e) => text(
                StatusCode::BAD_REQUEST,
                format!("Bad Request: could not read the body: {e}\n"),
            ),
        }
    }
}

/// `application/json` or `application/json-rpc`, with or without parameters (`charset`).
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else { return false };
    let media = value.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
        || media.eq_ignore_ascii_case("application/json-rpc")
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

/// `GET /health`: 200 `OK`, or 503 with the reason (see [`SyncStatus::health`]).
fn health(db: &Database, sync: &SyncStatus) -> Response<Body> {
    let read = db.begin_read().and_then(|r| Ok((r.head()?, r.trie_stage()?)));
    let (verdict, stage) = match read {
        Ok((head, stage)) => (sync.health(head.unwrap_or(0)), stage),
        Err(e) => (Err(format!("database: {e}")), None),
    };
    // The trie-history stage: a block it found bad makes the node unhealthy; its progress
    // otherwise is a second line.
    let (verdict, note) = match stage {
        Some(s) if s.failed.is_some() => {
            let (block, header, computed) = s.failed.unwrap_or_default();
            let why = format!(
                "trie-history stage stopped: block {block}'s header state root {header} is not the root of its state {computed}"
            );
            (verdict.and(Err(why)), String::new())
        }
        Some(s) if s.pending() => (
            verdict,
            format!(
                "trie history: per block up to #{}, blocks to #{} wait for the trie-history stage\n",
                s.staged_to, s.grouped_to
            ),
        ),
        _ => (verdict, String::new()),
    };
    match verdict {
        Ok(()) => text(StatusCode::OK, format!("OK\n{note}")),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n{note}")),
    }
}

/// CORS for `--http.corsdomain`: `*` for any origin, else a comma-separated list.
pub(crate) fn cors_layer(domains: &str) -> std::io::Result<CorsLayer> {
    let layer =
        CorsLayer::new().allow_methods([Method::POST]).allow_headers([header::CONTENT_TYPE]);
    if domains.trim() == "*" {
        return Ok(layer.allow_origin(Any));
    }
    let origins = domains
        .split(',')
        .map(|d| d.trim().parse::<HeaderValue>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--http.corsdomain: {e}"))
        })?;
    Ok(layer.allow_origin(AllowOrigin::list(origins)))
}

/// A running HTTP server: [`HttpHandle::stop`] ends it.
#[derive(Debug)]
pub(crate) struct HttpHandle {
    stop: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

impl HttpHandle {
    /// Stops accepting, lets every connection finish the request it is in, and waits for them.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.done.await;
    }

    /// Waits until the server stops.
    pub(crate) async fn stopped(self) {
        let _ = self.done.await;
    }
}

/// The longest any timeout of a connection is taken to be, so that a huge configured one
/// cannot overflow a clock.
const LONGEST_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// Connections closed at accept, by `reason`: `limit` (`--rpc.max-connections`), `per_ip`
/// (`--rpc.max-connections-per-ip`).
const REFUSED: &str = "loupe_rpc_connections_refused_total";

/// How long an accept error (out of file descriptors) pauses the listener.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` on `listener`: HTTP/1.1 with keep-alive, at most `max_connections` at once and
/// `app`'s `max_connections_per_ip` from one address (one more from that address is closed at
/// once), CORS when `cors` is set. When every slot is taken, a new connection asks one between
/// requests to close ([`Conns::evict`]) and waits up to [`EVICT_WAIT`] for its slot; when none
/// is between requests it is closed at once.
pub(crate) fn serve(
    listener: TcpListener,
    app: Arc<App>,
    cors: Option<CorsLayer>,
    max_connections: u32,
) -> HttpHandle {
    let (stop, mut stopping) = watch::channel(false);
    let idle_timeout = app.ctx.config.idle_timeout.min(LONGEST_WAIT);
    let per_ip = app.ctx.config.max_connections_per_ip;
    // The service of one connection: its requests run as its client's, marked in the table.
    let service = move |ip: IpAddr, conn: Arc<Conn>| {
        let app = app.clone();
        tower::ServiceBuilder::new().option_layer(cors.clone()).service_fn(move |req| {
            let (app, in_request) = (app.clone(), conn.request());
            let answer = async move { app.respond::<hyper::body::Incoming>(req).await };
            async move {
                let resp = client::scope(ip, answer).await;
                drop(in_request);
                Ok::<_, Infallible>(resp)
            }
        })
    };
    let slots = Arc::new(Semaphore::new(max_connections as usize));
    let clients = PerClient::new(per_ip as usize, 0);
    let conns = Arc::new(Conns::default());
    let done = tokio::spawn(async move {
        // Every connection's task holds a sender; all are gone when the last task ends.
        let (open_tx, mut open_rx) = tokio::sync::mpsc::channel::<()>(1);
        loop {
            let (stream, peer) = tokio::select! {
                _ = stopping.changed() => break,
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(target: "rpc", "accept: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            let ip = client::identity(peer.ip());
            let Some(held) = clients.try_hold(ip) else {
                metrics::counter!(REFUSED, "reason" => "per_ip").increment(1);
                tracing::debug!(target: "rpc", %peer, per_ip, "connection refused: at the limit of its address");
                continue;
            };
            let slot = match slots.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) if conns.evict() => None,
                Err(_) => {
                    metrics::counter!(REFUSED, "reason" => "limit").increment(1);
                    tracing::debug!(target: "rpc", %peer, max_connections, "connection refused: at the limit");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (slots, mut stopping, open) = (slots.clone(), stopping.clone(), open_tx.clone());
            let (conns, service) = (conns.clone(), service.clone());
            tokio::spawn(async move {
                let _open = open;
                let slot = match slot {
                    Some(slot) => slot,
                    None => match tokio::time::timeout(EVICT_WAIT, slots.acquire_owned()).await {
                        Ok(Ok(slot)) => slot,
                        _ => {
                            metrics::counter!(REFUSED, "reason" => "limit").increment(1);
                            return;
                        }
                    },
                };
                // In the table once it has its slot: one waiting for it is never evicted.
                let entry = conns.open(ip);
                let service = service(ip, entry.conn());
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(idle_timeout)
                    .serve_connection(
                        TokioIo::new(Explain414::new(stream)),
                        hyper_util::service::TowerToHyperService::new(service),
                    );
                let mut conn = std::pin::pin!(conn);
                // Stopping or evicted: the request in progress, if any, is finished first.
                let mut closing = *stopping.borrow();
                if closing {
                    conn.as_mut().graceful_shutdown();
                }
                let result = loop {
                    tokio::select! {
                        result = conn.as_mut() => break result,
                        _ = stopping.changed(), if !closing => closing = true,
                        () = entry.evicted(), if !closing => closing = true,
                    }
                    conn.as_mut().graceful_shutdown();
                };
                if let Err(e) = result {
                    tracing::debug!(target: "rpc", %peer, "connection: {e}");
                }
                drop((slot, held, entry));
            });
        }
        drop(listener);
        drop(open_tx);
        let _ = open_rx.recv().await;
    });
    HttpHandle { stop, done }
}

/// How long a new connection that asked an idle one to close waits for its slot.
const EVICT_WAIT: Duration = Duration::from_secs(2);

/// Most bytes of a refused request body read and dropped after the 413 ([`drain`]).
const DRAIN_MAX: usize = 64 * 1024 * 1024;
/// Longest a refused request body is read after the 413 ([`drain`]).
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a request body was not read whole.
enum BodyError<B> {
    /// Over the limit: the rest of the body, unread.
    TooLarge(std::pin::Pin<Box<B>>),
    /// Over the memory of bodies held at once ([`BodyMemory`]): the limit, and the rest of the
    /// body, unread.
    NoRoom(Over, std::pin::Pin<Box<B>>),
    /// The body could not be read.
    Read(BoxError),
    /// The body came too slowly ([`Pace`]): why.
    Slow(String),
}

/// How fast a request body must arrive: whole within `timeout` of its head, and, once
/// [`BODY_GRACE`] has passed, at `min_rate` bytes per second on average since the head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pace {
    pub(crate) timeout: Duration,
    /// Bytes per second; 0: no minimum.
    pub(crate) min_rate: u32,
}

impl Pace {
    /// How long after the head more of a body of which `received` bytes came may arrive: the
    /// time at which `received` falls below the minimum rate (not before the grace), at most the
    /// timeout. `true` when the rate, not the timeout, sets it.
    fn allowance(self, received: usize) -> (Duration, bool) {
        let timeout = self.timeout.min(LONGEST_WAIT);
        if self.min_rate == 0 {
            return (timeout, false);
        }
        let by_rate =
            BODY_GRACE.max(Duration::from_secs_f64(received as f64 / f64::from(self.min_rate)));
        if by_rate < timeout { (by_rate, true) } else { (timeout, false) }
    }
}

/// The request body, if it is at most `max` bytes (announced or sent), arrives at `pace` and
/// fits in `claim` (grown by what it announces, then by what comes beyond that).
async fn read_body<B>(
    body: B,
    max: usize,
    pace: Pace,
    claim: &mut Claim,
) -> Result<Bytes, BodyError<B>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = Box::pin(body);
    let announced = http_body::Body::size_hint(&body).lower();
    if announced > max as u64 {
        return Err(BodyError::TooLarge(body));
    }
    // At most `max`, checked above.
    let announced = announced as usize;
    if let Err(over) = claim.grow(announced) {
        return Err(BodyError::NoRoom(over, body));
    }
    let started = tokio::time::Instant::now();
    let mut out = Vec::with_capacity(announced);
    loop {
        let (allowed, by_rate) = pace.allowance(out.len());
        let frame = match tokio::time::timeout_at(started + allowed, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) if by_rate => {
                return Err(BodyError::Slow(format!(
                    "the request body came slower than {} bytes/s (--rpc.min-body-rate)",
                    pace.min_rate
                )));
            }
            Err(_) => {
                return Err(BodyError::Slow(format!(
                    "the request body did not arrive within {:?} (--rpc.body-timeout)",
                    pace.timeout
                )));
            }
        };
        let frame = frame.map_err(|e| BodyError::Read(e.into()))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max {
                return Err(BodyError::TooLarge(body));
            }
            let beyond = (out.len() + data.len()).saturating_sub(announced.max(out.len()));
            if let Err(over) = claim.grow(beyond) {
                return Err(BodyError::NoRoom(over, body));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.into())
}

/// Reads and drops what is left of a refused body, at most [`DRAIN_MAX`] bytes within
/// [`DRAIN_TIME`]. A connection closed with request bytes still unread is reset by the kernel,
/// and the client may lose the 413 that was already sent (nginx's "lingering close" for the
/// same reason).
async fn drain<B>(mut body: std::pin::Pin<Box<B>>)
where
    B: http_body::Body<Data = Bytes>,
{
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        let mut read = 0;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |d| d.len());
            if read > DRAIN_MAX {
                return;
            }
        }
    })
    .await;
}
