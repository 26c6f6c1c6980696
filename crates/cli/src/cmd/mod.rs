//! One module per `checkfu sandbox` subcommand, and what they share.

use std::process::ExitCode;
use std::sync::Arc;

use checkfu_sandbox_conformance::ConformanceTarget;

pub mod faults;
pub mod schema;
pub mod test;

/// Which provider a command talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderArg {
    /// The embedded deterministic memory oracle.
    Memory,
    /// The local Docker daemon.
    Docker,
}

/// A multi-threaded tokio runtime, or exit 125 with the reason.
pub fn tokio_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("checkfu: could not start the async runtime: {e}");
            ExitCode::from(125)
        })
}

/// The Docker conformance target.
pub async fn docker_target() -> Result<Arc<dyn ConformanceTarget>, String> {
    Err("the Docker provider is not wired into the CLI yet".into())
}

/// Releases what a target holds (Docker: its network and state directory).
pub async fn close_target(_target: &Arc<dyn ConformanceTarget>) {}
