//! Chain definition: the fork schedule and genesis block read from a geth-style `genesis.json`.

mod error;
mod genesis;
mod spec;
mod stream;
mod sync;

pub use error::ChainError;
pub use genesis::genesis_header;
pub use spec::ChainSpec;
pub use stream::{GenesisHead, GenesisItem, item_digest, stream_genesis};
pub use sync::{SyncState, SyncStatus};
