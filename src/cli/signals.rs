//! SIGINT and SIGTERM: the flag an import stops on, and the future a server shuts down on.

use eyre::Result;

/// A flag set on the first SIGTERM or SIGINT (logged). The handlers are registered before this
/// returns, so a signal that arrives afterwards is never the default (fatal) one.
pub(super) fn stop_on_signal() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    #[cfg(unix)]
    let (mut term, mut int) = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    })?;
    std::thread::Builder::new().name("loupe-signals".into()).spawn(move || {
        rt.block_on(async {
            #[cfg(unix)]
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
        });
        tracing::info!(target: "import", "stopping after the block being imported");
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    })?;
    Ok(stop)
}

pub(super) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
