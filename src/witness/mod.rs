//! Execution witnesses: built from the archive for any stored block.

mod archive;
mod error;
mod record;

pub use archive::{Built, build_witness};
pub use error::WitnessError;
pub use record::{Reads, Recorder};
