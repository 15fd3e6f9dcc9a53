//! [`SyncStatus`]: the node's progress against an upstream, shared by the follower (which
//! writes it) and the RPC server (`eth_syncing`, `GET /health`, transaction forwarding).

use std::sync::RwLock;

/// A snapshot of [`SyncStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncState {
    /// The node follows an upstream (`loupe follow`).
    pub following: bool,
    /// Local head when following started (`eth_syncing`'s `startingBlock`).
    pub starting_block: u64,
    /// The upstream's head, as last seen.
    pub upstream_head: Option<u64>,
    /// The last request to the upstream succeeded.
    pub upstream_ok: bool,
    /// Following stopped for good (a block failed verification, a reorg too deep): why.
    pub stopped: Option<String>,
    /// Where `eth_sendRawTransaction` is forwarded (`None`: not forwarded).
    pub forward_to: Option<String>,
    /// Most blocks the local head may trail the upstream's and still count as healthy.
    pub max_lag: u64,
}

/// See the module docs. Cheap to read; written a few times per block.
#[derive(Debug, Default)]
pub struct SyncStatus {
    state: RwLock<SyncState>,
}

impl SyncStatus {
    /// A status for a node that follows nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current state.
    pub fn get(&self) -> SyncState {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Changes the state.
    pub fn update(&self, f: impl FnOnce(&mut SyncState)) {
        f(&mut self.state.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// Whether a node whose local head is `local_head` is fit to serve as a replica: not
    /// following at all, or following with a reachable upstream, not stopped, and no more than
    /// `max_lag` blocks behind. `Err` says why not.
    pub fn health(&self, local_head: u64) -> Result<(), String> {
        let s = self.get();
        if !s.following {
            return Ok(());
        }
        if let Some(why) = &s.stopped {
            return Err(format!("following stopped: {why}"));
        }
        if !s.upstream_ok {
            return Err("upstream unreachable".into());
        }
        let Some(upstream) = s.upstream_head else {
            return Err("upstream head not known yet".into());
        };
        let lag = upstream.saturating_sub(local_head);
        if lag > s.max_lag {
            return Err(format!(
                "local head {local_head} is {lag} blocks behind the upstream's {upstream} (more than {})",
                s.max_lag
            ));
        }
        Ok(())
    }
}
