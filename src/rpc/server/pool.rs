//! [`WorkerPool`]: a bounded pool of worker threads with a bounded queue and fast rejection.
//! The server has two: one for EVM work, one for reads of whole blocks and block ranges.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use tokio::sync::{Semaphore, oneshot};

use crate::rpc::server::budget::{Budget, CancelOnDrop};
use crate::rpc::server::client::{self, Held, PerClient};
use crate::rpc::{RpcError, RpcResult};

type Job = Box<dyn FnOnce() + Send>;

/// How long an idle worker polls for the next job before it sleeps: under load the next call
/// often arrives within this window, and a poll is cheaper than a sleep and a wake-up. Short,
/// because on a small machine the polling worker takes a core from the server's threads (50 µs
/// cost 20-30% of trace_call throughput on 2 cores against 10 µs; BENCHMARKS.md, issue 14).
const SPIN: Duration = Duration::from_micros(10);

/// What a pool runs: it names the threads, the metrics and the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PoolKind {
    /// EVM work: `eth_call`, `trace_call`, replays (`--rpc.trace-workers`).
    Evm,
    /// Reads whose cost grows with a block's size or a range's length: whole blocks, receipts,
    /// logs, fee history (`--rpc.read-workers`). They run off the server's threads, so a slow
    /// one never holds up the cheap point reads those threads answer.
    Read,
}

impl PoolKind {
    fn thread_prefix(self) -> &'static str {
        match self {
            Self::Evm => "loupe-evm",
            Self::Read => "loupe-read",
        }
    }

    /// The busy-worker gauge, the queue-depth gauge and the rejection counter.
    fn metric_names(self) -> [&'static str; 3] {
        match self {
            Self::Evm => [
                "loupe_rpc_pool_busy_workers",
                "loupe_rpc_pool_queue_depth",
                "loupe_rpc_pool_rejections_total",
            ],
            Self::Read => [
                "loupe_rpc_read_pool_busy_workers",
                "loupe_rpc_read_pool_queue_depth",
                "loupe_rpc_read_pool_rejections_total",
            ],
        }
    }

    fn busy(self) -> RpcError {
        match self {
            Self::Evm => RpcError::Busy,
            Self::Read => RpcError::ReadBusy,
        }
    }
}

/// The counter of calls stopped because their client went away: skipped in the queue, or
/// stopped while they ran ([`RpcError::Cancelled`]).
const CANCELLED: &str = "loupe_rpc_cancelled_total";

/// Admits at most `workers + queue` calls; `workers` dedicated threads run them, the rest wait
/// in the queue. A call arriving when all places are taken is refused at once with the kind's
/// busy error (-32005). A queued call whose client went away is skipped, never run; a running
/// one has a [`Budget`] (the pool's deadline, and a flag set when the future awaiting it is
/// dropped), which its scans and its EVM check.
///
/// One client (an IP address, [`client::current`]) holds at most its share of the pool
/// ([`WorkerPool::with_client_share`]): so many calls running, and so many places in all;
/// its calls past the running share wait for one of its own to end, so they never stand in
/// the queue before another client's.
#[derive(Debug)]
pub(crate) struct WorkerPool {
    kind: PoolKind,
    admission: Arc<Semaphore>,
    jobs: Sender<Job>,
    workers: usize,
    places: usize,
    /// The places each client holds; `None`: no per-client share.
    clients: Option<Arc<PerClient>>,
    /// The deadline of each job's [`Budget`], from when it starts running.
    timeout: Duration,
}

impl WorkerPool {
    /// `workers` threads and `queue` places to wait; each job's budget is `timeout`.
    pub(crate) fn new(kind: PoolKind, workers: usize, queue: usize, timeout: Duration) -> Self {
        let workers = workers.max(1);
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        for i in 0..workers {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{i}", kind.thread_prefix()))
                .spawn(move || worker(&rx));
            if let Err(e) = spawned {
                tracing::error!(target: "rpc", %e, ?kind, "cannot start a worker thread");
            }
        }
        let places = workers + queue;
        let admission = Arc::new(Semaphore::new(places));
        Self { kind, admission, jobs: tx, workers, places, clients: None, timeout }
    }

    /// The pool with one client's share capped at `percent` % (`--rpc.client-share`): at most
    /// `max(1, ⌈workers × percent / 100⌉)` of its calls run at once, and it holds at most that
    /// plus `⌈queue × percent / 100⌉` places in all. 100 or more: no per-client share.
    pub(crate) fn with_client_share(mut self, percent: u32) -> Self {
        if percent >= 100 {
            self.clients = None;
            return self;
        }
        let part = |n: usize| (n * percent as usize).div_ceil(100);
        let running = part(self.workers).max(1);
        let queue = self.places - self.workers;
        self.clients = Some(PerClient::new(running + part(queue), running));
        self
    }

    /// Sets the busy-worker and queue-depth gauges.
    fn report(&self) {
        report(self.kind, &self.admission, self.workers, self.places);
    }

    /// Workers with no call to run right now (a call may use them to split its work).
    pub(crate) fn idle_workers(&self) -> usize {
        let in_flight = self.places.saturating_sub(self.admission.available_permits());
        self.workers.saturating_sub(in_flight)
    }

    /// Runs `f` on a worker thread, or refuses when the queue is full.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let Admitted(place, share) = self.admit()?;
        let f = fair_share(share, f).await?;
        self.run_admitted(place, f).await
    }

    /// A place in the pool, or the kind's busy error when every place is taken. A call run
    /// inline on a server thread holds one while it runs ([`Admitted`]), so a full pool refuses
    /// it as it refuses any other, and the calls the pool admits bound those in flight either way.
    ///
    /// The calling client's share is checked first: over it, the refusal names the share.
    pub(crate) fn admit(&self) -> RpcResult<Admitted> {
        let share = match (&self.clients, client::current()) {
            (Some(clients), Some(ip)) => match clients.try_hold(ip) {
                Some(held) => Some(held),
                None => {
                    metrics::counter!(self.kind.metric_names()[2]).increment(1);
                    return Err(self.share_refusal(clients.limit()));
                }
            },
            _ => None,
        };
        match self.admission.clone().try_acquire_owned() {
            Ok(admitted) => Ok(Admitted(admitted, share)),
            Err(_) => {
                metrics::counter!(self.kind.metric_names()[2]).increment(1);
                Err(self.kind.busy())
            }
        }
    }

    /// The refusal of a call over its client's share of `limit` places.
    fn share_refusal(&self, limit: usize) -> RpcError {
        RpcError::Limit(format!(
            "{} from this client: it holds its share of the pool ({limit} of {} places, \
             --rpc.client-share)",
            self.kind.busy(),
            self.places
        ))
    }

    /// Runs `f` on a worker thread in the place `admitted` holds.
    pub(crate) async fn run_in<T: Send + 'static>(
        &self,
        admitted: Admitted,
        f: impl FnOnce() -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let Admitted(place, share) = admitted;
        let f = fair_share(share, f).await?;
        self.run_admitted(place, f).await
    }

    /// Runs `f` on a worker thread, waiting for a place when the queue is full: for work a
    /// client is not waiting on and that must not be dropped (subscriptions' messages).
    pub(crate) async fn run_when_admitted<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let admitted = self
            .admission
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| RpcError::Internal("workers stopped".into()))?;
        self.run_admitted(admitted, f).await
    }

    async fn run_admitted<T: Send + 'static>(
        &self,
        admitted: tokio::sync::OwnedSemaphorePermit,
        f: impl FnOnce() -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        self.report();
        let gauges = (self.kind, self.admission.clone(), self.workers, self.places);
        let (tx, rx) = oneshot::channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        let (timeout, flag) = (self.timeout, cancelled.clone());
        let job: Job = Box::new(move || {
            let admitted = Released { admitted: Some(admitted), gauges };
            if tx.is_closed() {
                metrics::counter!(CANCELLED).increment(1);
                return; // the client went away while the call was queued
            }
            // The deadline runs from here: the wait in the queue is not the call's.
            let budget = Budget::new(timeout, flag).install();
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
                    Err(RpcError::Internal(format!("panic in a worker: {}", panic_message(&p))))
                });
            drop(budget);
            if matches!(result, Err(RpcError::Cancelled)) {
                metrics::counter!(CANCELLED).increment(1);
            }
            // The place is free before the answer leaves: a client that sends its next call
            // on receiving this one's answer must find it free.
            drop(admitted);
            let _ = tx.send(result);
        });
        if self.jobs.send(job).is_err() {
            return Err(RpcError::Internal("workers stopped".into()));
        }
        // Dropped with this future before the answer came (the client went away): the job
        // stops at its next check.
        let mut cancel = CancelOnDrop(Some(cancelled));
        let answer = rx.await;
        cancel.disarm();
        answer.map_err(|_| RpcError::Internal("a worker dropped the call".into()))?
    }
}

/// A place in a [`WorkerPool`] ([`WorkerPool::admit`]), and the client's part of its share,
/// given back when dropped.
#[derive(Debug)]
pub(crate) struct Admitted(tokio::sync::OwnedSemaphorePermit, Option<Held>);

/// `f`, once its client runs fewer calls than its share allows (at once without a share): the
/// client's permit and its place in the share travel with the job and are given back when the
/// job ends or is dropped unrun.
async fn fair_share<T>(
    share: Option<Held>,
    f: impl FnOnce() -> RpcResult<T> + Send + 'static,
) -> RpcResult<impl FnOnce() -> RpcResult<T> + Send + 'static> {
    let running = match &share {
        Some(held) => Some(
            held.running()
                .acquire_owned()
                .await
                .map_err(|_| RpcError::Internal("workers stopped".into()))?,
        ),
        None => None,
    };
    Ok(move || {
        // Dropped in this order after the call: the running permit, then the place.
        let _share = (running, share);
        f()
    })
}

/// The busy-worker and queue-depth gauges of `kind` from the admitted calls.
fn report(kind: PoolKind, admission: &Semaphore, workers: usize, places: usize) {
    let in_flight = places.saturating_sub(admission.available_permits());
    let busy = in_flight.min(workers);
    let [busy_gauge, queue_gauge, _] = kind.metric_names();
    metrics::gauge!(busy_gauge).set(busy as f64);
    metrics::gauge!(queue_gauge).set((in_flight - busy) as f64);
}

/// A call's admission, released (and the gauges updated) when its job ends.
struct Released {
    admitted: Option<tokio::sync::OwnedSemaphorePermit>,
    gauges: (PoolKind, Arc<Semaphore>, usize, usize),
}

impl Drop for Released {
    fn drop(&mut self) {
        drop(self.admitted.take());
        let (kind, admission, workers, places) = &self.gauges;
        report(*kind, admission, *workers, *places);
    }
}

/// Every worker receives from the one queue and parks on its own when it is empty, so a job
/// wakes at most one sleeping worker, and a worker taking a job wakes nobody.
///
/// A worker polls for [`SPIN`] before it parks only while jobs arrive that close together: when
/// the last one came later than that, polling would only have burnt the core (with one client,
/// the next call comes a round trip later, and the poll cost about 7 % of a trace_call's CPU;
/// BENCHMARKS.md, issue 42). The first job that comes within [`SPIN`] of the worker turning
/// idle switches polling back on.
fn worker(rx: &Receiver<Job>) {
    let mut spin = SPIN;
    loop {
        let idle_since = Instant::now();
        let job = loop {
            match rx.try_recv() {
                Ok(job) => break Some(job),
                Err(TryRecvError::Disconnected) => break None,
                Err(TryRecvError::Empty) if idle_since.elapsed() < spin => std::hint::spin_loop(),
                Err(TryRecvError::Empty) => break rx.recv().ok(),
            }
        };
        spin = if idle_since.elapsed() <= SPIN { SPIN } else { Duration::ZERO };
        match job {
            Some(job) => job(),
            None => return,
        }
    }
}

/// The message of a caught panic (its `&str` or `String` payload).
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}
