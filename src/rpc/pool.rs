//! [`TracePool`]: a bounded pool for EVM work with a bounded queue and fast rejection.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{RpcError, RpcResult, panic_message};

/// Admits at most `workers + queue` calls; `workers` of them run at once on blocking threads,
/// the rest wait. A call arriving when all places are taken is refused at once with
/// [`RpcError::Busy`]. A waiting call whose client went away is dropped with its future and
/// never runs.
#[derive(Debug)]
pub(crate) struct TracePool {
    admission: Arc<Semaphore>,
    running: Arc<Semaphore>,
}

impl TracePool {
    pub(crate) fn new(workers: usize, queue: usize) -> Self {
        let workers = workers.max(1);
        Self {
            admission: Arc::new(Semaphore::new(workers + queue)),
            running: Arc::new(Semaphore::new(workers)),
        }
    }

    /// Runs `f` on a worker thread, or refuses when the queue is full.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let Ok(_admitted) = self.admission.clone().try_acquire_owned() else {
            return Err(RpcError::Busy);
        };
        let _running = self
            .running
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| RpcError::Internal("worker pool closed".into()))?;
        let joined = tokio::task::spawn_blocking(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        })
        .await;
        match joined {
            Ok(Ok(result)) => result,
            Ok(Err(panic)) => {
                Err(RpcError::Internal(format!("panic in EVM worker: {}", panic_message(&panic))))
            }
            Err(e) => Err(RpcError::Internal(format!("EVM worker failed: {e}"))),
        }
    }
}
