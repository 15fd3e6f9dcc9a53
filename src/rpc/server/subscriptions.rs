//! What a WebSocket subscription sends: `eth_subscribe("newHeads")` and
//! `eth_subscribe("logs", filter)`, fed by the stored head (the connection side, ids and
//! `eth_unsubscribe`, is `ws.rs`).
//!
//! The stored head is watched ([`Heads`], `heads.rs`, polled every
//! [`POLL`](crate::rpc::server::heads::POLL)): whatever stores blocks
//! (`follow`, an import, the dev builder) feeds every subscription, and a subscription sends
//! every block from the one after the head it started at, in order, with no gaps; after a
//! reorg it continues from the new branch's first block. A subscriber whose connection does not
//! take a message within [`SEND_TIMEOUT`] (its buffer full) loses its subscription.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::B256;
use jsonrpsee::types::Params;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::rpc::eth::filters::LogFilter;
use crate::rpc::request::json::Raw;
use crate::rpc::request::params::{Args, invalid};
use crate::rpc::server::heads::Heads;
use crate::rpc::{RpcContext, RpcError, RpcResult};
use crate::storage::Reader;

/// How long a subscriber may take to accept one message before its subscription ends.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Most blocks one wake-up sends (a subscriber further behind skips to the newest ones).
const MAX_CATCH_UP: u64 = 1024;
/// Deepest reorg a subscription follows back to its fork point.
const MAX_REORG: u64 = 128;

/// Subscription ids as geth makes them: `0x` and 32 hex digits (clients such as viem expect
/// a string). Unique per process: a counter mixed with the start time through keccak, so ids
/// are not guessable from one another.
#[derive(Debug)]
pub(crate) struct HexIds {
    seed: [u8; 16],
    next: std::sync::atomic::AtomicU64,
}

impl HexIds {
    /// Ids seeded with the current time.
    pub(crate) fn new() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self { seed: now.to_be_bytes(), next: std::sync::atomic::AtomicU64::new(0) }
    }

    /// The next id.
    pub(crate) fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut input = self.seed.to_vec();
        input.extend_from_slice(&n.to_be_bytes());
        let hash = alloy_primitives::keccak256(&input);
        format!("0x{}", alloy_primitives::hex::encode(&hash[..16]))
    }
}

/// What a subscription sends.
#[derive(Debug)]
enum Kind {
    NewHeads,
    Logs(LogFilter),
}

/// A message to write on a WebSocket connection (`ws.rs` writes them): an answer, or a
/// subscription's notification sent into the connection's buffer.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) text: String,
    /// The place of the request this answers, released once it is written.
    pub(crate) place: Option<OwnedSemaphorePermit>,
    /// Subscriptions to start once it is written (it holds their ids).
    pub(crate) start: Vec<Accepted>,
}

impl Out {
    /// A subscription's notification.
    pub(crate) fn notification(text: String) -> Self {
        Self { text, place: None, start: Vec::new() }
    }
}

/// A subscription accepted but not started: it starts once the answer that names its id has
/// been written, so that no notification comes before that answer.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// Its id.
    pub(crate) id: String,
    kind: Kind,
    heads: Heads,
    /// The head when it was accepted: it sends the blocks after it.
    sent: Sent,
}

/// Parses `eth_subscribe`'s parameters into a subscription with id `id`, starting after the
/// current stored head.
pub(crate) fn accept(ctx: &RpcContext, params: Option<&str>, id: String) -> RpcResult<Accepted> {
    let kind = parse(&Params::new(params), ctx.filter_limits())?;
    let Some(mut heads) = ctx.heads.clone() else {
        return Err(RpcError::NotEnabled("subscriptions need --ws"));
    };
    let sent = Sent::from([*heads.borrow_and_update()]);
    Ok(Accepted { id, kind, heads, sent })
}

fn parse(params: &Params<'_>, limits: crate::rpc::eth::filters::FilterLimits) -> RpcResult<Kind> {
    let a = Args::new(params, 2)?;
    let kind: String = a.req(0, "subscription")?;
    match kind.as_str() {
        "newHeads" => {
            if a.get(1).is_some_and(|v| !v.is_null()) {
                return Err(invalid("invalid argument 1: newHeads takes no options"));
            }
            Ok(Kind::NewHeads)
        }
        "logs" => Ok(Kind::Logs(crate::rpc::eth::filters::subscription_filter(&a, 1, limits)?)),
        other => Err(invalid(format!(
            "invalid argument 0 (subscription): unsupported subscription {other:?} (newHeads, logs)"
        ))),
    }
}

/// Sends `sub`'s notifications into `out` (the connection's buffer) until the stored head
/// stops being watched, a read fails, or the buffer does not take a message within
/// [`SEND_TIMEOUT`]. The connection aborts it on `eth_unsubscribe` and when it closes.
pub(crate) async fn run(ctx: Arc<RpcContext>, sub: Accepted, out: mpsc::Sender<Out>) {
    let Accepted { id, kind, mut heads, mut sent } = sub;
    let kind = Arc::new(kind);
    loop {
        tokio::select! {
            () = out.closed() => return,
            changed = heads.changed() => if changed.is_err() { return },
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
                return;
            }
        };
        for m in messages {
            if out
                .send_timeout(Out::notification(notification(&id, &m)), SEND_TIMEOUT)
                .await
                .is_err()
            {
                tracing::debug!(target: "rpc", "subscriber too slow or gone: subscription ended");
                return;
            }
        }
    }
}

/// An `eth_subscription` notification, as geth writes it.
fn notification(id: &str, result: &Raw) -> String {
    let mut s = String::with_capacity(96 + id.len() + result.as_str().len());
    s.push_str(r#"{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":""#);
    s.push_str(id);
    s.push_str(r#"","result":"#);
    s.push_str(result.as_str());
    s.push_str("}}");
    s
}

/// The blocks a subscription sent last, newest at the back: after a reorg it restarts after
/// the newest of them still canonical (the oldest of them if none is).
type Sent = std::collections::VecDeque<(u64, B256)>;

/// The messages for the blocks stored since the last one sent, which `sent` records. After a
/// reorg the blocks from the fork point on are sent (those of the new branch).
fn next_messages(ctx: &RpcContext, kind: &Kind, sent: &mut Sent) -> RpcResult<Vec<Raw>> {
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
                out.push(crate::rpc::request::json::to_value(h)?);
            }
            Kind::Logs(filter) => {
                let mut logs = Vec::new();
                ctx.block_matches(&r, filter, header, hash, &mut logs)?;
                for l in logs {
                    out.push(crate::rpc::request::json::to_value(l)?);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_is_json_in_geth_s_shape() {
        let raw = crate::rpc::request::json::to_value(serde_json::json!({"number": "0x1"}))
            .unwrap_or_else(|e| panic!("{e}"));
        let text = notification("0xab", &raw);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            v,
            serde_json::json!({"jsonrpc": "2.0", "method": "eth_subscription",
                "params": {"subscription": "0xab", "result": {"number": "0x1"}}})
        );
    }
}
