//! The server side of JSON-RPC: HTTP and WebSocket transports, the envelope and its dispatch,
//! parameter parsing, the worker pools, the method table, result caches and the one mapping of
//! errors to JSON-RPC codes. The methods themselves live in the namespaces beside it.

pub(crate) mod bodies;
pub(crate) mod budget;
pub(crate) mod cache;
pub(crate) mod client;
pub(crate) mod conns;
pub(crate) mod dispatch;
pub(crate) mod error;
pub(crate) mod http;
pub(crate) mod in_process;
pub(crate) mod inline;
pub(crate) mod json;
pub(crate) mod methods;
pub(crate) mod pages;
pub(crate) mod params;
pub(crate) mod pool;
pub(crate) mod subscriptions;
pub(crate) mod uri_too_long;
pub(crate) mod ws;
