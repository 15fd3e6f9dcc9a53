//! Chain definition: the fork schedule and genesis block read from a geth-style `genesis.json`.

mod error;
mod genesis;
mod spec;
mod stream;

pub use error::ChainError;
pub use genesis::genesis_header;
pub use spec::ChainSpec;
pub use stream::{GenesisHead, GenesisItem, item_digest, stream_genesis};
