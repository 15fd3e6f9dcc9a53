//! The server side of JSON-RPC: HTTP and WebSocket transports, the envelope and its dispatch,
//! limits, connections, the worker pools and the method table. What every request goes through
//! (errors, parameters, JSON, caches, EVM scheduling) is in `request/`; the methods themselves
//! live in the namespaces beside it.

pub(crate) mod bodies;
pub(crate) mod budget;
pub(crate) mod client;
pub(crate) mod conns;
pub(crate) mod dispatch;
pub(crate) mod heads;
pub(crate) mod http;
pub(crate) mod in_process;
pub(crate) mod methods;
pub(crate) mod pages;
pub(crate) mod pool;
pub(crate) mod start;
pub(crate) mod subscriptions;
pub(crate) mod test_holds;
pub(crate) mod uri_too_long;
pub(crate) mod ws;
