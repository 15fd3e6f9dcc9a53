//! [`start`]: the HTTP server (and the WebSocket server, with `--ws`) on their listeners, and
//! the [`RpcServer`] handle that stops them.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::chain::ChainSpec;
use crate::rpc::server::{heads, http, ws};
use crate::rpc::{RpcConfig, RpcContext};
use crate::storage::Database;

/// A running server.
#[derive(Debug)]
pub struct RpcServer {
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    /// The WebSocket server's bound address, with `--ws`.
    pub ws_addr: Option<SocketAddr>,
    handle: http::HttpHandle,
    ws_handle: Option<ws::WsHandle>,
}

impl RpcServer {
    /// Stops accepting requests and waits for the servers to finish.
    pub async fn stop(self) {
        match self.ws_handle {
            Some(ws) => {
                tokio::join!(self.handle.stop(), ws.stop());
            }
            None => self.handle.stop().await,
        }
    }

    /// Waits until the server stops.
    pub async fn stopped(self) {
        self.handle.stopped().await;
    }
}

/// Starts the HTTP JSON-RPC server on `config.addr` (and the WebSocket server on `config.ws`).
pub async fn start(
    db: Arc<Database>,
    spec: ChainSpec,
    config: RpcConfig,
) -> std::io::Result<RpcServer> {
    let listener = tokio::net::TcpListener::bind(config.addr).await?;
    let addr = listener.local_addr()?;
    let cors = config.cors.as_deref().map(http::cors_layer).transpose()?;
    let max_connections = config.max_connections;
    let ws_addr = config.ws;
    let mut ctx = RpcContext::new(db.clone(), spec, config);
    if ws_addr.is_some() {
        ctx.heads = Some(heads::watch_heads(db));
    }
    let app = Arc::new(http::App::new(Arc::new(ctx)));
    let ws = match ws_addr {
        Some(at) => {
            let ws_listener = tokio::net::TcpListener::bind(at).await?;
            let bound = ws_listener.local_addr()?;
            Some((bound, ws::serve(ws_listener, app.clone())))
        }
        None => None,
    };
    let handle = http::serve(listener, app, cors, max_connections);
    Ok(RpcServer {
        addr,
        ws_addr: ws.as_ref().map(|(a, _)| *a),
        handle,
        ws_handle: ws.map(|(_, h)| h),
    })
}
