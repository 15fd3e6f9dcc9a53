//! The `eth_`, `net_` and `web3_` namespaces: reads of blocks, transactions, receipts, state
//! and logs, fees, simulated calls (`eth_call`, `eth_estimateGas`, `eth_simulateV1`), proofs,
//! `eth_config`, block access lists, and the forwarding of raw transactions.

pub(crate) mod access_list;
pub(crate) mod block_overrides;
pub(crate) mod convert;
pub(crate) mod estimate;
pub(crate) mod eth_call;
pub(crate) mod eth_config;
pub(crate) mod fees;
pub(crate) mod filters;
pub(crate) mod forward;
pub(crate) mod logs;
pub(crate) mod override_limits;
pub(crate) mod proof;
pub(crate) mod reads;
pub(crate) mod simulate;
pub(crate) mod tips;
