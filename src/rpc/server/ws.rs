//! The WebSocket server (`--ws`; RFC 6455, through tokio-tungstenite): each text message is a
//! request body answered exactly as over HTTP (`dispatch.rs`: the same methods, errors, batches
//! and limits), plus `eth_subscribe` and `eth_unsubscribe` (what a subscription sends is
//! `subscriptions.rs`).
//!
//! - A protocol error fails the connection with its close code (RFC 6455 §7.4.1), sent before
//!   the server closes: 1002 for an unmasked frame, reserved bits set, an unknown opcode, a
//!   fragmented control frame, a control frame over 125 bytes, or a continuation frame out of
//!   place; 1007 for a text message that is not UTF-8; 1009 for a frame or a message over
//!   `--rpc.max-request-size`, refused from its header before its payload is read.
//! - A binary message is answered as the same bytes in a text message would be, as geth does;
//!   answers are text messages.
//! - The requests of one connection run concurrently, each answered when it finishes (clients
//!   match answers by id). At most [`BUFFER`] are in flight or answered and not yet written, and
//!   at most [`BUFFER`] messages wait to be written: while either is full the connection's next
//!   request is not read, and a subscription whose message is not taken within
//!   `subscriptions::SEND_TIMEOUT` ends.
//! - `eth_subscribe` answers with a new id (geth's shape, `0x` and 32 hex digits); its
//!   notifications start after that answer is written. A connection holds at most
//!   `--ws.max-subscriptions` (one more: -32005). `eth_unsubscribe(id)` answers true, or false
//!   for an id the connection does not hold (as jsonrpsee did). Both are served on WebSocket
//!   only, also inside batches.
//! - The server pings every `RpcConfig::ws_ping` (10 s); a peer heard from (a pong or anything
//!   else) in none of the last three intervals is dropped, and so is one that does not take a
//!   message written to it within three intervals (at least [`MIN_WRITE_TIME`]).
//! - At most `--rpc.max-connections` connections at once, and `--rpc.max-connections-per-ip`
//!   from one address (one more is closed at once); a handshake must finish within
//!   [`HANDSHAKE_TIMEOUT`]. A connection's requests run as its client (`client::scope`), so
//!   the pools' per-client shares and the per-address filter limit count them as they count
//!   HTTP requests from the same address.
//! - Shutdown: no more requests are read, those in flight are answered (for at most
//!   [`SHUTDOWN_WAIT`]), and each connection is closed with 1001 (going away).
//!
//! After its close frame the server sends FIN and reads and drops what the peer still sends,
//! for at most [`LINGER`], so that the peer reads the close frame rather than a reset.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use jsonrpsee::types::Params;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::rpc::request::json::{self, Raw};
use crate::rpc::request::params::Args;
use crate::rpc::server::client::{self, PerClient};
use crate::rpc::server::dispatch::{self, Calls, Reply};
use crate::rpc::server::http::App;
use crate::rpc::server::methods::log_outcome;
use crate::rpc::server::subscriptions::{self, Accepted, HexIds, Out};
use crate::rpc::{RpcError, RpcResult};

/// Requests of one connection in flight or answered and not yet written, and messages waiting
/// to be written; while either is full, the connection's next request waits unread.
pub(crate) const BUFFER: usize = 256;
/// Longest a WebSocket handshake may take.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The least time a peer has to take one message written to it.
pub(crate) const MIN_WRITE_TIME: Duration = Duration::from_secs(5);
/// Longest the requests in flight are waited for at shutdown.
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(8);
/// Longest the server reads (and drops) what a peer sends after the server's close frame.
pub(crate) const LINGER: Duration = Duration::from_secs(2);
/// Most bytes read and dropped after the server's close frame.
const LINGER_MAX: usize = 16 << 20;
/// Socket read buffer of a connection (tungstenite's default is 128 KiB, a lot per idle peer).
const READ_BUFFER: usize = 16 * 1024;
/// How long an accept error (out of file descriptors) pauses the listener.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

type Ws = WebSocketStream<TcpStream>;

/// What every connection shares.
#[derive(Debug)]
struct Shared {
    app: Arc<App>,
    ids: HexIds,
    config: WebSocketConfig,
    ping: Duration,
    max_subscriptions: usize,
}

/// A running WebSocket server: [`WsHandle::stop`] ends it.
#[derive(Debug)]
pub(crate) struct WsHandle {
    stop: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

impl WsHandle {
    /// Stops accepting, answers the requests in flight, closes every connection with 1001 and
    /// waits for them.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.done.await;
    }
}

/// Serves WebSocket on `listener` with `app`'s methods and limits.
pub(crate) fn serve(listener: TcpListener, app: Arc<App>) -> WsHandle {
    let rpc = &app.ctx.config;
    let max_message = rpc.max_request_body as usize;
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
        .accept_unmasked_frames(false);
    let slots = Arc::new(Semaphore::new(rpc.max_connections as usize));
    // The same per-address cap as the HTTP listener's, counted apart from it.
    let clients = PerClient::new(rpc.max_connections_per_ip as usize, 0);
    let shared = Arc::new(Shared {
        ids: HexIds::new(),
        config,
        ping: rpc.ws_ping.max(Duration::from_millis(1)),
        max_subscriptions: rpc.ws_max_subscriptions as usize,
        app: app.clone(),
    });
    let (stop, mut stopping) = watch::channel(false);
    let done = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                _ = stopping.changed() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(target: "rpc", "ws accept: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            let ip = client::identity(peer.ip());
            let Some(held) = clients.try_hold(ip) else {
                tracing::debug!(target: "rpc", %peer, "ws connection refused: at the limit of its address");
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::debug!(target: "rpc", %peer, "ws connection refused: at the limit");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (shared, stopping) = (shared.clone(), stopping.clone());
            connections.spawn(async move {
                connection(shared, stream, peer, stopping).await;
                drop((slot, held));
            });
        }
        drop(listener);
        while connections.join_next().await.is_some() {}
    });
    WsHandle { stop, done }
}

/// The subscriptions of one connection by id: `None` while accepted and not yet started.
type Subs = Arc<Mutex<HashMap<String, Option<AbortHandle>>>>;

/// One connection's state that its requests use.
#[derive(Debug)]
struct Conn {
    shared: Arc<Shared>,
    out: mpsc::Sender<Out>,
    subs: Subs,
    /// The client, as the pools and the filter table count it (`client::identity`).
    ip: IpAddr,
}

/// The calls of one request body on a connection: the method table, and the connection's
/// subscriptions.
struct Session<'a> {
    conn: &'a Conn,
    /// Subscriptions this body accepted, started once its answer is written.
    start: Mutex<Vec<Accepted>>,
}

impl Calls for Session<'_> {
    async fn call(&self, method: &str, params: Option<&str>) -> RpcResult<Raw> {
        let app = &self.conn.shared.app;
        match method {
            "eth_subscribe" => {
                let started = std::time::Instant::now();
                let result = self.subscribe(params);
                log_outcome("eth_subscribe", started, &result);
                result
            }
            "eth_unsubscribe" => {
                let started = std::time::Instant::now();
                let result = self.unsubscribe(params);
                log_outcome("eth_unsubscribe", started, &result);
                result
            }
            _ => app.methods.call(&app.ctx, method, params).await,
        }
    }
}

impl Session<'_> {
    fn subscribe(&self, params: Option<&str>) -> RpcResult<Raw> {
        let shared = &self.conn.shared;
        let id = shared.ids.next_id();
        let accepted = subscriptions::accept(&shared.app.ctx, params, id.clone())?;
        {
            let mut subs = self.conn.subs.lock().unwrap_or_else(PoisonError::into_inner);
            if subs.len() >= shared.max_subscriptions {
                return Err(RpcError::Limit(format!(
                    "too many subscriptions on this connection: at most {} (--ws.max-subscriptions)",
                    shared.max_subscriptions
                )));
            }
            subs.insert(id.clone(), None);
        }
        self.start.lock().unwrap_or_else(PoisonError::into_inner).push(accepted);
        json::to_value(&id)
    }

    fn unsubscribe(&self, params: Option<&str>) -> RpcResult<Raw> {
        let a = Args::new(&Params::new(params), 1)?;
        let id: String = a.req(0, "subscription id")?;
        let removed = self.conn.subs.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        if let Some(Some(feed)) = &removed {
            feed.abort();
        }
        json::to_value(removed.is_some())
    }
}

/// Why a connection's loop ended.
enum End {
    /// The peer closed (its close frame answered) or the socket is gone.
    Closed,
    /// A write failed or was not taken in time, or the peer went silent: dropped.
    Dead,
    /// The server is shutting down.
    Shutdown,
    /// The peer broke the protocol: the connection fails with a close code.
    Failed(WsError),
}

async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    mut stopping: watch::Receiver<bool>,
) {
    let handshake = tokio_tungstenite::accept_async_with_config(stream, Some(shared.config));
    let ws = tokio::select! {
        _ = stopping.changed() => return,
        done = timeout(HANDSHAKE_TIMEOUT, handshake) => match done {
            Ok(Ok(ws)) => ws,
            Ok(Err(e)) => {
                tracing::debug!(target: "rpc", %peer, "ws handshake: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!(target: "rpc", %peer, "ws handshake timed out");
                return;
            }
        },
    };
    run(shared, ws, peer, stopping).await;
}

/// Serves one connection until it ends, then closes it as [`End`] says.
async fn run(
    shared: Arc<Shared>,
    mut ws: Ws,
    peer: SocketAddr,
    mut stopping: watch::Receiver<bool>,
) {
    let (out, mut outgoing) = mpsc::channel::<Out>(BUFFER);
    let places = Arc::new(Semaphore::new(BUFFER));
    let ip = client::identity(peer.ip());
    let conn = Arc::new(Conn { shared: shared.clone(), out, subs: Subs::default(), ip });
    let mut requests = JoinSet::new();
    let mut feeds = JoinSet::new();
    let ping = shared.ping;
    let write_time = (ping * 3).max(MIN_WRITE_TIME);
    let mut pings = tokio::time::interval_at(Instant::now() + ping, ping);
    pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    // The place of the next request read: the connection reads only while it holds one.
    let mut place: Option<OwnedSemaphorePermit> = None;
    let end = loop {
        tokio::select! {
            _ = stopping.changed() => break End::Shutdown,
            Some(next) = outgoing.recv() => {
                if !write(&mut ws, Message::text(next.text), write_time).await {
                    break End::Dead;
                }
                start(&conn, &mut feeds, next.start);
            }
            _ = pings.tick() => {
                // While the connection is not read (its buffer full), the peer's pongs wait
                // unread: that silence is not the peer's.
                if place.is_none() {
                    heard = Instant::now();
                }
                if heard.elapsed() >= ping * 3 {
                    tracing::debug!(target: "rpc", %peer, "ws peer silent for three pings: dropped");
                    break End::Dead;
                }
                if !write(&mut ws, Message::Ping(Bytes::new()), write_time).await {
                    break End::Dead;
                }
            }
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            Some(_) = feeds.join_next(), if !feeds.is_empty() => {}
            got = places.clone().acquire_owned(), if place.is_none() => place = got.ok(),
            msg = ws.next(), if place.is_some() => {
                heard = Instant::now();
                let body = match msg {
                    None => break End::Closed,
                    Some(Err(e)) => break End::Failed(e),
                    Some(Ok(Message::Text(text))) => Bytes::from(text),
                    Some(Ok(Message::Binary(bytes))) => bytes,
                    // Pongs to pings are tungstenite's; after a close frame, the next read
                    // writes the answer to it and ends.
                    Some(Ok(_)) => continue,
                };
                let Some(place) = place.take() else { continue };
                let conn = conn.clone();
                requests.spawn(async move { answer(&conn, &body, place).await });
            }
        }
    };
    feeds.abort_all();
    match end {
        End::Closed | End::Dead => {}
        End::Failed(e) => {
            tracing::debug!(target: "rpc", %peer, "ws connection failed: {e}");
            if let Some(code) = close_code(&e) {
                close(ws, code, &e.to_string()).await;
            }
        }
        End::Shutdown => {
            drop(place);
            finish(&mut ws, &mut outgoing, &places, write_time).await;
            close(ws, CloseCode::Away, "server shutting down").await;
        }
    }
}

/// Answers one request body on `conn`; the answer, with `place`, goes to the connection's
/// writer.
async fn answer(conn: &Conn, body: &[u8], place: OwnedSemaphorePermit) {
    // Held while the message is answered, as an HTTP body is (`bodies.rs`).
    let mut claim = conn.shared.app.bodies.claim(Some(conn.ip));
    if let Err(over) = claim.grow(body.len()) {
        let text = over.error().response_with_null_id();
        let _ = conn.out.send(Out { text, place: Some(place), start: Vec::new() }).await;
        return;
    }
    let session = Session { conn, start: Mutex::new(Vec::new()) };
    let reply =
        client::scope(conn.ip, dispatch::handle_with(&session, body, conn.shared.app.limits)).await;
    drop(claim);
    let start = session.start.into_inner().unwrap_or_else(PoisonError::into_inner);
    let Reply::Json(bytes) = reply else { return };
    // Answers are written from JSON text the server made (ids are copied from a body that
    // was read as UTF-8, or given -32600 when it was not).
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            tracing::error!(target: "rpc", "ws answer not UTF-8: {e}");
            return;
        }
    };
    let _ = conn.out.send(Out { text, place: Some(place), start }).await;
}

/// Starts the subscriptions whose ids were just written, unless unsubscribed meanwhile.
fn start(conn: &Arc<Conn>, feeds: &mut JoinSet<()>, accepted: Vec<Accepted>) {
    for sub in accepted {
        let mut subs = conn.subs.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = subs.get_mut(&sub.id) else { continue };
        let (ctx, out, all) = (conn.shared.app.ctx.clone(), conn.out.clone(), conn.subs.clone());
        let id = sub.id.clone();
        *slot = Some(feeds.spawn(async move {
            subscriptions::run(ctx, sub, out).await;
            all.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        }));
    }
}

/// Writes `msg` (and flushes it); false when the peer did not take it within `limit` or the
/// connection is gone.
async fn write(ws: &mut Ws, msg: Message, limit: Duration) -> bool {
    matches!(timeout(limit, ws.send(msg)).await, Ok(Ok(())))
}

/// At shutdown: writes the answers of the requests in flight as they come, until none is left
/// or [`SHUTDOWN_WAIT`] has passed.
async fn finish(
    ws: &mut Ws,
    outgoing: &mut mpsc::Receiver<Out>,
    places: &Arc<Semaphore>,
    write_time: Duration,
) {
    let all = places.acquire_many(BUFFER as u32);
    tokio::pin!(all);
    let deadline = tokio::time::sleep(SHUTDOWN_WAIT);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            biased;
            Some(next) = outgoing.recv() => {
                if next.place.is_some() && !write(ws, Message::text(next.text), write_time).await {
                    return;
                }
            }
            _ = &mut all => return,
            () = &mut deadline => return,
        }
    }
}

/// The close code a read error fails the connection with; `None` when there is no connection
/// left to send it on.
fn close_code(e: &WsError) -> Option<CloseCode> {
    match e {
        WsError::Utf8(_) => Some(CloseCode::Invalid),
        WsError::Capacity(_) => Some(CloseCode::Size),
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
        WsError::Protocol(_) => Some(CloseCode::Protocol),
        WsError::AttackAttempt => Some(CloseCode::Policy),
        _ => None,
    }
}

/// Sends a close frame with `code` and `reason` (cut to what a close frame holds), then
/// lingers: FIN, and what the peer still sends read and dropped for at most [`LINGER`].
async fn close(mut ws: Ws, code: CloseCode, reason: &str) {
    // A close frame's payload is at most 125 bytes, two of them the code.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame { code, reason: Utf8Bytes::from(&reason[..end]) };
    if !write(&mut ws, Message::Close(Some(frame)), LINGER).await {
        return;
    }
    let tcp = ws.get_mut();
    let _ = tcp.shutdown().await;
    let _ = timeout(LINGER, async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut read = 0;
        while let Ok(n @ 1..) = tcp.read(&mut buf).await {
            read += n;
            if read > LINGER_MAX {
                return;
            }
        }
    })
    .await;
}
