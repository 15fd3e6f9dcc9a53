//! Chain definition: the fork schedule and genesis block read from a geth-style `genesis.json`.

mod error;
mod genesis;
mod spec;

pub use error::ChainError;
pub use genesis::genesis_header;
pub use spec::ChainSpec;
