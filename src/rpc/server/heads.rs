//! [`Heads`]: the stored head, watched for WebSocket subscriptions (`subscriptions.rs`).

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::B256;
use tokio::sync::watch;

use crate::storage::Database;

/// How often the stored head is checked.
pub(crate) const POLL: Duration = Duration::from_millis(100);

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
