//! Reusable clap argument groups.

use std::path::PathBuf;

/// Where the database lives.
#[derive(Debug, Clone, clap::Args)]
pub struct DatadirArgs {
    /// Data directory holding the archive database.
    #[arg(long, value_name = "DIR")]
    pub datadir: PathBuf,
}

/// Logging.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Log filter (tracing `EnvFilter` syntax); `RUST_LOG` overrides it.
    #[arg(long = "log.filter", default_value = "info", global = true)]
    pub filter: String,
}
