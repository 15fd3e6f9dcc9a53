//! `loupe follow`: blocks from an upstream node, verified by execution, through reorgs.
//!
//! One thread ([`spawn`]) polls the upstream's `latest` block and reconciles:
//! - the upstream is ahead and its next block's parent is our head: fetch a batch, import each
//!   block with the checks of `import`, one commit per block;
//! - the upstream holds a different block at a height we hold (a reorg): walk back to the
//!   common ancestor (at most `--follow.max-reorg` blocks), then unwind to it and import the
//!   new branch in **one** write transaction, so a reader sees the old chain or the new one;
//! - the upstream is behind us on the same chain (a lagging replica, a rollback with nothing
//!   mined yet): wait.
//!
//! Upstream failures are retried with backoff while serving goes on. A block that fails
//! verification, or a reorg too deep, stops following; what is stored keeps being served.
//! Progress goes to a shared [`SyncStatus`] (`eth_syncing`, `GET /health`).

mod error;
mod upstream;

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use alloy_consensus::{Block, TxEnvelope};

pub use error::FollowError;
pub use upstream::{BlockLink, Upstream};

use crate::chain::HeaderPolicy;
use crate::chain::{ChainSpec, SyncStatus};
use crate::import::{ImportError, Progress, import_block_on_writer, import_block_uncommitted};
use crate::storage::{Database, Reader, StorageError};

/// How to follow; defaults are the flags' defaults.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    /// The upstream's HTTP JSON-RPC URL.
    pub upstream: String,
    /// Pause between polls of the upstream's head when caught up.
    pub poll: Duration,
    /// Blocks fetched per batch request.
    pub batch: u64,
    /// Deepest reorg followed; deeper stops following.
    pub max_reorg: u64,
    /// Timeout of one upstream request.
    pub timeout: Duration,
    /// During catch-up, every Nth block's commit is durable (the tip's always is).
    pub sync_every: u64,
}

impl Default for FollowConfig {
    fn default() -> Self {
        Self {
            upstream: String::new(),
            poll: Duration::from_millis(500),
            batch: 32,
            max_reorg: 64,
            timeout: Duration::from_secs(10),
            sync_every: crate::import::DEFAULT_SYNC_EVERY,
        }
    }
}

/// The running follower.
#[derive(Debug)]
pub struct FollowHandle {
    stop: Sender<()>,
    thread: std::thread::JoinHandle<Result<(), FollowError>>,
}

impl FollowHandle {
    /// Asks the follower to stop and waits for it; returns why it had stopped, if it had.
    pub fn stop(self) -> Result<(), FollowError> {
        drop(self.stop);
        self.thread.join().unwrap_or_else(|_| {
            Err(FollowError::Unsupported("the follower thread panicked".into()))
        })
    }

    /// Whether the follower has stopped on its own (an error it does not retry).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// Starts following on a thread of its own (import is CPU work: never on the server's async
/// threads). An error that stops it is kept in `status` and returned by [`FollowHandle::stop`].
pub fn spawn(
    db: Arc<Database>,
    spec: ChainSpec,
    status: Arc<SyncStatus>,
    config: FollowConfig,
) -> Result<FollowHandle, FollowError> {
    let upstream = Upstream::new(&config.upstream, config.timeout)?;
    let (stop, stopped) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("follow".into())
        .spawn(move || {
            let mut f = Follower { db, spec, status, config, upstream, stopped, client: None };
            let result = f.run();
            if let Err(e) = &result {
                // The status first: once the line is logged, /health already reports it.
                f.status.update(|s| s.stopped = Some(e.to_string()));
                tracing::error!(target: "follow", "following stopped: {e}; serving what is stored");
            }
            result
        })
        .map_err(|e| FollowError::Unsupported(format!("cannot start the follower thread: {e}")))?;
    Ok(FollowHandle { stop, thread })
}

struct Follower {
    db: Arc<Database>,
    spec: ChainSpec,
    status: Arc<SyncStatus>,
    config: FollowConfig,
    upstream: Upstream,
    stopped: Receiver<()>,
    /// The upstream's `web3_clientVersion`, asked once connected.
    client: Option<String>,
}

/// What one round did.
enum Round {
    /// Blocks were imported or unwound; go again at once.
    Progress,
    /// Nothing to do until the upstream moves.
    Idle,
}

impl Follower {
    /// Sleeps `d`; `true` if asked to stop meanwhile.
    fn sleep(&self, d: Duration) -> bool {
        !matches!(self.stopped.recv_timeout(d), Err(RecvTimeoutError::Timeout))
    }

    fn run(&mut self) -> Result<(), FollowError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FollowError::Unsupported(format!("follower runtime: {e}")))?;
        let start = self.db.begin_read()?.head()?.unwrap_or(0);
        {
            // A reorg of up to --follow.max-reorg blocks must find their change lists.
            let w = self.db.begin_write()?;
            if w.unwind_depth()? < self.config.max_reorg {
                w.set_unwind_depth(self.config.max_reorg)?;
                w.commit(true)?;
                tracing::info!(target: "follow", depth = self.config.max_reorg, "change lists now kept for --follow.max-reorg blocks");
            }
        }
        self.status.update(|s| {
            s.following = true;
            s.starting_block = start;
        });
        let mut backoff = Duration::ZERO;
        let mut connected = false;
        let mut progress = Progress::new("following");
        loop {
            let round = if connected {
                rt.block_on(self.round(&mut progress))
            } else {
                rt.block_on(self.check_chain()).map(|()| {
                    connected = true;
                    Round::Progress
                })
            };
            let pause = match round {
                Ok(Round::Progress) => {
                    backoff = Duration::ZERO;
                    Duration::ZERO
                }
                Ok(Round::Idle) => {
                    backoff = Duration::ZERO;
                    self.config.poll
                }
                Err(e) if e.is_transient() => {
                    backoff =
                        (backoff * 2).clamp(Duration::from_millis(250), Duration::from_secs(30));
                    self.status.update(|s| s.upstream_ok = false);
                    tracing::warn!(target: "follow", "{e}; retrying in {backoff:?}");
                    backoff
                }
                Err(e) => return Err(e),
            };
            if self.sleep(pause) {
                return Ok(());
            }
        }
    }

    /// A block the import refused. Under the strict header policy, a refusal for one of the
    /// rules anvil and hardhat break on purpose (an equal timestamp, a base fee set by hand, a
    /// transactions root over blob sidecars) names the policy that follows them.
    fn refused(&self, error: ImportError) -> FollowError {
        let dev_upstream = self.client.as_deref().is_some_and(|c| {
            let c = c.to_ascii_lowercase();
            c.starts_with("anvil") || c.starts_with("hardhat")
        });
        // anvil's header commits to blob sidecars: the consensus form's root differs.
        let relaxed = match error.root() {
            ImportError::InvalidHeader { rule, .. } => rule.dev_relaxes(),
            ImportError::Mismatch { what, .. } => *what == "transactions root",
            _ => false,
        };
        if dev_upstream && relaxed && self.spec.header_policy() == HeaderPolicy::Strict {
            return FollowError::StrictPolicy {
                error,
                client: self.client.clone().unwrap_or_default(),
            };
        }
        FollowError::Import(error)
    }

    /// Chain id and genesis hash must be the upstream's.
    async fn check_chain(&mut self) -> Result<(), FollowError> {
        let id = self.upstream.chain_id().await?;
        if id != self.spec.chain_id() {
            return Err(FollowError::WrongChain {
                what: "chain id",
                upstream: id.to_string(),
                ours: self.spec.chain_id().to_string(),
            });
        }
        let genesis = self.upstream.hash_at(0).await?;
        if genesis != Some(self.spec.genesis_hash()) {
            return Err(FollowError::WrongChain {
                what: "genesis hash",
                upstream: genesis.map_or_else(|| "missing".into(), |h| h.to_string()),
                ours: self.spec.genesis_hash().to_string(),
            });
        }
        self.client = self.upstream.client_version().await;
        tracing::info!(
            target: "follow",
            upstream = %self.upstream.url(),
            client = self.client.as_deref().unwrap_or("unknown"),
            chain_id = id,
            policy = %self.spec.header_policy(),
            "following"
        );
        Ok(())
    }

    async fn round(&mut self, progress: &mut Progress) -> Result<Round, FollowError> {
        let latest =
            self.upstream.block_ref("latest").await?.ok_or_else(|| FollowError::Upstream {
                url: self.upstream.url().into(),
                message: "eth_getBlockByNumber(latest) returned null".into(),
            })?;
        let tip = latest.number.to::<u64>();
        self.status.update(|s| {
            s.upstream_ok = true;
            s.upstream_head = Some(tip);
        });
        let reader = self.db.begin_read()?;
        let head = reader.head()?.unwrap_or(0);
        if tip <= head {
            if reader.canonical_hash(tip)? == Some(latest.hash) {
                // Same chain; the upstream may be behind us. Keep the markers current.
                self.refresh_markers(&reader, head).await?;
                return Ok(Round::Idle);
            }
            return self.reorg(&reader, head, tip, tip).await;
        }
        let to = tip.min(head + self.config.batch);
        let fetch = std::time::Instant::now();
        let blocks = self.upstream.blocks(head + 1, to, self.spec.header_policy()).await?;
        tracing::debug!(
            target: "follow",
            from = head + 1,
            to,
            fetch_ms = fetch.elapsed().as_millis() as u64,
            "fetched"
        );
        let Some(first) = blocks.first() else { return Ok(Round::Idle) };
        if Some(first.header.parent_hash) != reader.canonical_hash(head)? {
            return self.reorg(&reader, head, head, tip).await;
        }
        chained(&blocks, self.upstream.url())?;
        let tags = self.tags().await;
        let (mut safe, mut finalized) = reader.markers()?.map_or((0, 0), |m| (m.safe, m.finalized));
        drop(reader);
        for block in &blocks {
            let number = block.header.number;
            let started = std::time::Instant::now();
            let writer = self.db.begin_write()?;
            import_block_uncommitted(&self.db, &writer, &self.spec, block)
                .map_err(|e| self.refused(e))?;
            (safe, finalized) =
                markers(|n| writer.canonical_hash(n), number, &tags, (safe, finalized))?;
            writer.advance_head_with_markers(number, safe, finalized)?;
            let durable = number.is_multiple_of(self.config.sync_every.max(1)) || number >= tip;
            let imported = started.elapsed();
            writer.commit(durable)?;
            tracing::debug!(
                target: "follow",
                number,
                durable,
                import_ms = imported.as_millis() as u64,
                commit_ms = (started.elapsed() - imported).as_millis() as u64,
                "stored"
            );
            progress.block(number, block.body.transactions.len() as u64, block.header.gas_used);
        }
        Ok(Round::Progress)
    }

    /// Safe and finalized per the upstream (`None` where it has no such tag).
    async fn tags(&self) -> [Option<BlockLink>; 2] {
        let safe = self.upstream.block_ref("safe").await.ok().flatten();
        let finalized = self.upstream.block_ref("finalized").await.ok().flatten();
        [safe, finalized]
    }

    async fn refresh_markers(&self, reader: &Reader, head: u64) -> Result<(), FollowError> {
        let tags = self.tags().await;
        let old = reader.markers()?.map_or((0, 0), |m| (m.safe, m.finalized));
        let new = markers(|n| reader.canonical_hash(n), head, &tags, old)?;
        if new != old {
            let writer = self.db.begin_write()?;
            writer.advance_head_with_markers(head, new.0, new.1)?;
            writer.commit(true)?;
        }
        Ok(())
    }

    /// The upstream holds another block at `mismatch` (≤ our head): find the common ancestor
    /// within `--follow.max-reorg`, then unwind and import the new branch in one commit.
    async fn reorg(
        &mut self,
        reader: &Reader,
        head: u64,
        mismatch: u64,
        tip: u64,
    ) -> Result<Round, FollowError> {
        let mut n = mismatch;
        let ancestor = loop {
            let ours = reader.canonical_hash(n)?.unwrap_or_default();
            let theirs = self.upstream.hash_at(n).await?;
            if theirs == Some(ours) {
                break n;
            }
            if head - n + 1 > self.config.max_reorg || n == 0 {
                return Err(FollowError::ReorgTooDeep {
                    max: self.config.max_reorg,
                    head,
                    number: n,
                    theirs: theirs.unwrap_or_default(),
                    ours,
                });
            }
            n -= 1;
        };
        let depth = head - ancestor;
        let to = tip.min(ancestor + depth.max(1) + self.config.batch);
        let blocks = self.upstream.blocks(ancestor + 1, to, self.spec.header_policy()).await?;
        if blocks.first().map(|b| b.header.parent_hash) != reader.canonical_hash(ancestor)? {
            return Err(FollowError::Upstream {
                url: self.upstream.url().into(),
                message: format!("its chain changed while loupe reorganised to block {ancestor}"),
            });
        }
        chained(&blocks, self.upstream.url())?;
        let tags = self.tags().await;
        let old = reader.markers()?.map_or((0, 0), |m| (m.safe, m.finalized));
        let mut writer = self.db.begin_write()?;
        for _ in 0..depth {
            writer.unwind_head()?;
        }
        let mut new_head = ancestor;
        for block in &blocks {
            import_block_on_writer(&writer, &self.spec, block).map_err(|e| self.refused(e))?;
            new_head = block.header.number;
        }
        let (safe, finalized) = markers(
            |n| writer.canonical_hash(n),
            new_head,
            &tags,
            (old.0.min(ancestor), old.1.min(ancestor)),
        )?;
        writer.advance_head_with_markers(new_head, safe, finalized)?;
        writer.commit(true)?;
        metrics::counter!("loupe_follow_reorgs_total").increment(1);
        metrics::counter!("loupe_follow_reorged_blocks_total").increment(depth);
        tracing::warn!(
            target: "follow",
            depth,
            ancestor,
            old_head = head,
            new_head,
            "reorg: unwound {depth} blocks to #{ancestor} and imported {} of the new branch",
            blocks.len()
        );
        Ok(Round::Progress)
    }
}

/// Each block's parent is the block before it; otherwise the upstream changed mid-batch.
fn chained(blocks: &[Block<TxEnvelope>], url: &str) -> Result<(), FollowError> {
    for pair in blocks.windows(2) {
        if pair[1].header.parent_hash != pair[0].header.hash_slow() {
            return Err(FollowError::Upstream {
                url: url.into(),
                message: format!(
                    "block {} does not follow block {} of the same batch (its chain changed)",
                    pair[1].header.number, pair[0].header.number
                ),
            });
        }
    }
    Ok(())
}

/// Safe and finalized at head `head`: the upstream's tags where the block they name is ours
/// (by `canonical`, the hash we hold at a height), else the previous values, never above the
/// head.
fn markers(
    canonical: impl Fn(u64) -> Result<Option<alloy_primitives::B256>, StorageError>,
    head: u64,
    tags: &[Option<BlockLink>; 2],
    previous: (u64, u64),
) -> Result<(u64, u64), FollowError> {
    let pick = |tag: &Option<BlockLink>, old: u64| -> Result<u64, FollowError> {
        if let Some(tag) = tag {
            let n = tag.number.to::<u64>();
            if n <= head && canonical(n)? == Some(tag.hash) {
                return Ok(n);
            }
        }
        Ok(old.min(head))
    };
    Ok((pick(&tags[0], previous.0)?, pick(&tags[1], previous.1)?))
}
