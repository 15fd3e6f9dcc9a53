//! JSON-RPC 2.0 over HTTP and WebSocket: server set-up, limits, and the methods loupe serves.
//!
//! `config.rs` holds the server's limits and switches ([`RpcConfig`]), `context.rs` the state
//! every handler shares ([`RpcContext`]); `server/` is the transport side (HTTP, WebSocket,
//! dispatch, limits, connections, pools, [`start`]); `request/` what every request goes through
//! (errors and their codes, parameters, JSON, caches, EVM scheduling); `eth/`, `trace/` and
//! `debug/` are the namespaces, one file per family of methods; `stored_replay.rs` replays
//! stored blocks for both tracers.
//!
//! Point reads run inline on the server's threads (a few µs of redb reads and JSON); reads of
//! whole blocks and block ranges run on one bounded pool of worker threads, EVM work
//! (`eth_call`, `trace_call`) on another (`pool::WorkerPool`), except a short `eth_call` or
//! `trace_call`, which runs on the server's thread within a budget of µs (`request/inline.rs`).

mod config;
mod context;
mod debug;
mod eth;
mod request;
mod server;
mod stored_replay;
mod trace;

pub use config::{
    BODY_GRACE, INLINE_BUDGET_US, MAX_OVERRIDE_ACCOUNTS, MAX_OVERRIDE_SLOTS, MAX_TRACE_SIZE,
    NAMESPACES, RpcConfig,
};
pub use context::RpcContext;
pub(crate) use eth::eth_call::revert_reason;
pub use eth::eth_config::eth_config_at;
pub use request::error::{RpcError, RpcResult, codes};
pub use server::http::HEALTH_GATE;
pub use server::in_process::InProcess;
pub use server::pages::{PageFuture, Pages, RpcCaller};
pub use server::start::{RpcServer, start};
