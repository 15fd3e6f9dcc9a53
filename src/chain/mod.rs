//! Chain definition: the fork schedule and genesis block read from a geth-style `genesis.json`,
//! or built in for the named public networks, and the header rules' difficulty formula.

mod difficulty;
mod error;
mod genesis;
mod networks;
mod spec;
mod stream;
mod sync;

pub use difficulty::{DifficultyParent, MINIMUM_DIFFICULTY, difficulty};
pub use error::ChainError;
pub use genesis::genesis_header;
pub use networks::{ANVIL_CHAIN_ID, HeaderPolicy, Network};
pub use spec::ChainSpec;
pub use stream::{GenesisHead, GenesisItem, item_digest, stream_genesis};
pub use sync::{SyncState, SyncStatus};
