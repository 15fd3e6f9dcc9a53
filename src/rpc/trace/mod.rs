//! The Parity `trace_` namespace: simulated calls (`trace_call`, `trace_callMany`,
//! `trace_rawTransaction`), stored blocks and transactions replayed, `trace_filter`, and the
//! trace results written as JSON.

pub(crate) mod block_traces;
pub(crate) mod json;
pub(crate) mod trace_call;
