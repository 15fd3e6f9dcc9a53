//! Serving a datadir until a signal: the RPC server, metrics, admin socket, trie-history stage.

use eyre::{Context, Result};

use super::signals::shutdown_signal;
use super::{admin, metrics};
use crate::storage::Database;

/// Runs the server until SIGINT/SIGTERM. `banner` is printed once the server listens. With a
/// follower, the process ends with an error if the upstream serves another chain; any other
/// reason the follower stops leaves the server serving what is stored.
pub fn serve(
    db: std::sync::Arc<Database>,
    spec: crate::chain::ChainSpec,
    config: crate::rpc::RpcConfig,
    banner: Option<Box<dyn FnOnce(std::net::SocketAddr) + Send>>,
    follower: Option<crate::follow::FollowHandle>,
) -> Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.io_threads {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build()?;
    let explorer = config.pages.is_some();
    runtime.block_on(async move {
        let head = db.begin_read()?.head()?.unwrap_or(0);
        if let Some(addr) = config.metrics {
            metrics::start(addr, db.clone(), config.sync.clone())?;
        }
        // Without the socket the node still serves; only `loupe db snapshot` must then wait for
        // it to stop (a datadir path too long for a Unix socket, a read-only directory).
        #[cfg(unix)]
        let _admin = admin::listen(db.clone())
            .inspect_err(|e| tracing::warn!(target: "admin", "no admin socket: {e:#}"))
            .ok();
        let stage = crate::trie::stage::spawn(db.clone())?;
        let server = crate::rpc::start(db, spec, config).await.wrap_err("cannot start the RPC server")?;
        tracing::info!(target: "rpc", url = %format!("http://{}", server.addr), head, "serving JSON-RPC");
        if explorer {
            let url = format!("http://{}{}", server.addr, crate::explorer::PREFIX);
            tracing::info!(target: "rpc", %url, "serving the explorer");
        }
        if let Some(ws) = server.ws_addr {
            tracing::info!(target: "rpc", url = %format!("ws://{ws}"), "serving JSON-RPC over WebSocket");
        }
        if let Some(banner) = banner {
            banner(server.addr);
        }
        let mut follower = follower;
        let refused = tokio::select! {
            () = shutdown_signal() => None,
            e = watch_follower(&mut follower) => Some(e),
        };
        tracing::info!(target: "rpc", "shutting down");
        // Stop accepting; requests in flight get up to SHUTDOWN_GRACE to be answered.
        if tokio::time::timeout(SHUTDOWN_GRACE, server.stop()).await.is_err() {
            tracing::warn!(target: "rpc", grace = ?SHUTDOWN_GRACE, "requests still open at shutdown were dropped");
        }
        if let Some(f) = follower {
            // Stopping joins the thread, which may be inside a block's import: off the reactor.
            tokio::task::spawn_blocking(move || f.stop()).await.ok();
        }
        if let Some(s) = stage {
            // It stops after the range it is building (a commit of its own): off the reactor.
            tokio::task::spawn_blocking(move || s.stop()).await.ok();
        }
        match refused {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    })
}

/// Sets the explorer's pages in `config` when `on` (`--http.explorer`); returns `on`.
pub(super) fn with_explorer(config: &mut crate::rpc::RpcConfig, on: bool) -> bool {
    if on {
        config.pages = Some(std::sync::Arc::new(crate::explorer::Explorer::new()));
    }
    on
}

/// How long a shutdown waits for requests in flight (the EVM deadline is 5 s by default).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Resolves with the follower's error if it stops because the upstream is not usable at all
/// (another chain, a bad URL); never resolves otherwise.
async fn watch_follower(
    follower: &mut Option<crate::follow::FollowHandle>,
) -> crate::follow::FollowError {
    loop {
        if follower.as_ref().is_some_and(|f| f.is_finished())
            && let Some(f) = follower.take()
            && let Err(
                e @ (crate::follow::FollowError::WrongChain { .. }
                | crate::follow::FollowError::BadUpstreamUrl { .. }),
            ) = f.stop()
        {
            return e;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
