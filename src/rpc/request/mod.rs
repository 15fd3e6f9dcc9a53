//! What every request goes through whatever its transport and namespace: the one mapping of
//! errors to JSON-RPC codes (`error.rs`), positional parameters (`params.rs`), results as JSON
//! text (`json.rs`), objects already serialized (`cache.rs`), and the scheduling of EVM calls on
//! the server's thread or the pool (`inline.rs`, [`inline::Traced`]).

pub(crate) mod cache;
pub(crate) mod error;
pub(crate) mod inline;
pub(crate) mod inline_gate;
pub(crate) mod json;
pub(crate) mod params;
