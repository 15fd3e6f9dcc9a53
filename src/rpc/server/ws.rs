//! WebSocket subscriptions: `eth_subscribe("newHeads")`, `eth_subscribe("logs", filter)` and
//! `eth_unsubscribe`, served on the `--ws` listener.
//!
//! The stored head is watched ([`Heads`], polled every [`POLL`]): whatever stores blocks
//! (`follow`, an import, the dev builder) feeds every subscription, and a subscription sends
//! every block from the one after the head it started at, in order, with no gaps; after a
//! reorg it continues from the new branch's first block. A subscriber that does not take a
//! message within [`SEND_TIMEOUT`] loses its subscription, and one that stops reading is
//! disconnected by the server's WebSocket pings; jsonrpsee bounds the messages buffered per
//! connection, so memory stays bounded either way.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::B256;
use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{PendingSubscriptionSink, RpcModule, SubscriptionMessage, SubscriptionSink};
use tokio::sync::watch;

use crate::rpc::eth::logs::LogFilter;
use crate::rpc::server::params::{Args, invalid};
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::{Database, Reader};

/// How often the stored head is checked.
pub(crate) const POLL: Duration = Duration::from_millis(100);
/// How long a subscriber may take to accept one message before its subscription ends.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Most blocks one wake-up sends (a subscriber further behind skips to the newest ones).
const MAX_CATCH_UP: u64 = 1024;
/// Deepest reorg a subscription follows back to its fork point.
const MAX_REORG: u64 = 128;

/// The stored head, as last seen: `(number, hash)`.
pub(crate) type Heads = watch::Receiver<(u64, B256)>;

/// Starts watching `db`'s head on the current runtime.
pub(crate) fn watch_heads(db: Arc<Database>) -> Heads {
    let head = |db: &Database| -> Option<(u64, B256)> {
        let r = db.begin_read().ok()?;
        let n = r.head().ok()??;
        Some((n, r.canonical_hash(n).ok()??))
    };
    let (tx, rx) = watch::channel(head(&db).unwrap_or_default());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if tx.is_closed() {
                return;
            }
            if let Some(now) = head(&db) {
                tx.send_if_modified(|h| std::mem::replace(h, now) != now);
            }
        }
    });
    rx
}

/// Subscription ids as geth makes them: `0x` and 32 hex digits (clients such as viem expect
/// a string; jsonrpsee's default is a number). Unique per process: a counter mixed with the
/// start time through keccak, so ids are not guessable from one another.
#[derive(Debug)]
pub(crate) struct HexIds {
    seed: [u8; 16],
    next: std::sync::atomic::AtomicU64,
}

impl HexIds {
    pub(crate) fn new() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self { seed: now.to_be_bytes(), next: std::sync::atomic::AtomicU64::new(0) }
    }
}

impl jsonrpsee::core::traits::IdProvider for HexIds {
    fn next_id(&self) -> jsonrpsee::types::SubscriptionId<'static> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut input = self.seed.to_vec();
        input.extend_from_slice(&n.to_be_bytes());
        let hash = alloy_primitives::keccak256(&input);
        jsonrpsee::types::SubscriptionId::Str(
            format!("0x{}", alloy_primitives::hex::encode(&hash[..16])).into(),
        )
    }
}

/// What a subscription sends.
enum Kind {
    NewHeads,
    Logs(LogFilter),
}

/// Registers `eth_subscribe` / `eth_unsubscribe`.
pub(crate) fn register(
    m: &mut RpcModule<RpcContext>,
) -> Result<(), jsonrpsee::server::RegisterMethodError> {
    m.register_subscription(
        "eth_subscribe",
        "eth_subscription",
        "eth_unsubscribe",
        |params, pending, ctx, _| async move { subscribe(params, pending, ctx).await },
    )?;
    Ok(())
}

fn parse(params: &Params<'_>, limits: crate::rpc::eth::logs::FilterLimits) -> RpcResult<Kind> {
    let a = Args::new(params, 2)?;
    let kind: String = a.req(0, "subscription")?;
    match kind.as_str() {
        "newHeads" => {
            if a.get(1).is_some_and(|v| !v.is_null()) {
                return Err(invalid("invalid argument 1: newHeads takes no options"));
            }
            Ok(Kind::NewHeads)
        }
        "logs" => Ok(Kind::Logs(crate::rpc::eth::logs::subscription_filter(&a, 1, limits)?)),
        other => Err(invalid(format!(
            "invalid argument 0 (subscription): unsupported subscription {other:?} (newHeads, logs)"
        ))),
    }
}

async fn subscribe(
    params: Params<'static>,
    pending: PendingSubscriptionSink,
    ctx: Arc<RpcContext>,
) -> SubscriptionResult {
    let kind = match parse(&params, ctx.filter_limits()) {
        Ok(k) => Arc::new(k),
        Err(e) => {
            pending.reject(ErrorObjectOwned::from(e)).await;
            return Ok(());
        }
    };
    let Some(mut heads) = ctx.heads.clone() else {
        pending
            .reject(ErrorObjectOwned::from(RpcError::NotEnabled("subscriptions need --ws")))
            .await;
        return Ok(());
    };
    let sink = pending.accept().await?;
    let mut sent = Sent::from([*heads.borrow_and_update()]);
    loop {
        tokio::select! {
            () = sink.closed() => return Ok(()),
            changed = heads.changed() => if changed.is_err() { return Ok(()) },
        }
        let messages = match &*kind {
            Kind::NewHeads => next_messages(&ctx, &kind, &mut sent),
            // A block's logs cost its receipts: read on the read pool, never on the server's
            // threads; a subscription waits for a place there rather than lose its messages.
            Kind::Logs(_) => {
                let (worker_ctx, worker_kind) = (ctx.clone(), kind.clone());
                let mut worker_sent = std::mem::take(&mut sent);
                let read = ctx.reads.run_when_admitted(move || {
                    let messages = next_messages(&worker_ctx, &worker_kind, &mut worker_sent);
                    Ok((messages, worker_sent))
                });
                match read.await {
                    Ok((messages, now_sent)) => {
                        sent = now_sent;
                        messages
                    }
                    Err(e) => Err(e),
                }
            }
        };
        let messages = match messages {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(target: "rpc", error = %e, "subscription ended");
                return Ok(());
            }
        };
        for m in messages {
            if send(&sink, m).await.is_err() {
                tracing::debug!(target: "rpc", "subscriber too slow or gone: subscription ended");
                return Ok(());
            }
        }
    }
}

async fn send(sink: &SubscriptionSink, msg: crate::rpc::server::json::Raw) -> Result<(), ()> {
    let msg = msg.into_raw_value().map_err(|_| ())?;
    sink.send_timeout(SubscriptionMessage::from(msg), SEND_TIMEOUT).await.map_err(|_| ())
}

/// The blocks a subscription sent last, newest at the back: after a reorg it restarts after
/// the newest of them still canonical (the oldest of them if none is).
type Sent = std::collections::VecDeque<(u64, B256)>;

/// The messages for the blocks stored since the last one sent, which `sent` records. After a
/// reorg the blocks from the fork point on are sent (those of the new branch).
fn next_messages(
    ctx: &RpcContext,
    kind: &Kind,
    sent: &mut Sent,
) -> RpcResult<Vec<crate::rpc::server::json::Raw>> {
    let r = ctx.db.begin_read()?;
    let Some(head) = r.head()? else { return Ok(Vec::new()) };
    let mut from = fork_point(&r, sent)? + 1;
    if head >= from + MAX_CATCH_UP {
        from = head + 1 - MAX_CATCH_UP;
    }
    let mut out = Vec::new();
    for n in from..=head {
        let entry = r.header_and_hash(n)?.ok_or(RpcError::HeaderNotFound)?;
        let (header, hash) = (&entry.0, entry.1);
        match kind {
            Kind::NewHeads => {
                let h = alloy_rpc_types_eth::Header {
                    hash,
                    inner: header.clone(),
                    total_difficulty: None,
                    size: None,
                };
                out.push(crate::rpc::server::json::to_value(h)?);
            }
            Kind::Logs(filter) => {
                let mut logs = Vec::new();
                ctx.block_matches(&r, filter, header, hash, &mut logs)?;
                for l in logs {
                    out.push(crate::rpc::server::json::to_value(l)?);
                }
            }
        }
        while sent.back().is_some_and(|(k, _)| *k >= n) {
            sent.pop_back();
        }
        sent.push_back((n, hash));
        if sent.len() > MAX_REORG as usize {
            sent.pop_front();
        }
    }
    Ok(out)
}

/// The block after which to continue: the newest block sent that is still canonical, or, when
/// none is (a reorg deeper than what is remembered), the one before the oldest remembered.
fn fork_point(r: &Reader, sent: &Sent) -> RpcResult<u64> {
    for (n, hash) in sent.iter().rev() {
        if r.canonical_hash(*n)? == Some(*hash) {
            return Ok(*n);
        }
    }
    Ok(sent.front().map_or(0, |(n, _)| n.saturating_sub(1)))
}
