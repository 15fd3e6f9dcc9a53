//! Chain definition: the fork schedule and genesis block read from a `genesis.json` (geth's or
//! Besu's dialect), or built in for the named public networks, and the header rules'
//! difficulty formula.

mod dialect;
mod difficulty;
mod error;
mod genesis;
mod milestones;
mod networks;
mod spec;
mod stream;
mod sync;

pub use dialect::{Dialect, GenesisReading};
pub use difficulty::{DifficultyParent, DifficultyRules, MINIMUM_DIFFICULTY, difficulty};
pub use error::ChainError;
pub use genesis::genesis_header;
pub use networks::{ANVIL_CHAIN_ID, HeaderPolicy, Network};
pub use spec::{ChainSpec, read_genesis_json};
pub use stream::{GenesisHead, GenesisItem, item_digest, stream_genesis};
pub use sync::{SyncState, SyncStatus};
