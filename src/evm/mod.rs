//! EVM glue shared by import and RPC: block environments and block execution.
//!
//! Generic over revm's `DatabaseRef`, so it never depends on how state is stored.

mod block_replay;
mod call_env;
pub mod cancel;
mod env;
mod error;
mod execute;
mod system_gas;
mod transfers;

pub use block_replay::{ReplayBlock, ReplayError, ReplayState, Traced, replay_block};
pub use call_env::{
    CallError, CallRequest, INLINE_MEMORY, PrecompileMove, PreparedCall, WarmPrecompiles,
    execute_call, execute_call_within, move_precompiles, precompile_moves_of, prepare_call,
    prepare_call_on,
};
pub use env::block_env;
pub use error::EvmError;
pub use execute::{BlockOutcome, execute_block};
pub use transfers::SimInspector;
