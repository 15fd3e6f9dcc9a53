//! The `debug_` namespace: raw consensus encodings of stored data, geth-style tracing and
//! execution witnesses.

pub(crate) mod flat_call;
pub(crate) mod frontier_create;
pub(crate) mod geth;
pub(crate) mod prestate;
pub(crate) mod raw;
pub(crate) mod struct_logs;
pub(crate) mod witness;
