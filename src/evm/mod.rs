//! EVM glue shared by import and RPC: block environments and block execution.
//!
//! Generic over revm's `DatabaseRef`, so it never depends on how state is stored.

mod env;
mod error;
mod execute;

pub use env::block_env;
pub use error::EvmError;
pub use execute::{BlockOutcome, execute_block};
