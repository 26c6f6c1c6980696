//! One module per `checkfu sandbox` subcommand, and what they share.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_docker::conformance::DockerTarget;

pub mod backend;
pub mod capabilities;
pub mod cleanup;
pub mod enroll;
pub mod enrolled;
pub mod fail;
pub mod faults;
pub mod fixture;
pub mod init;
pub mod keygen;
pub mod out;
pub mod run;
pub mod run_events;
pub mod run_flags;
pub mod schema;
pub mod serve;
pub mod served;
pub mod signed;
pub mod test;
pub mod verify;

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

/// The Docker conformance target: the fixture image built from `busybox`
/// (build progress on stderr), a fresh scope, state directory and network.
///
/// # Errors
/// A message when the daemon, the fixture or the network is unusable.
pub async fn docker_target(busybox: &Path) -> Result<Arc<dyn ConformanceTarget>, String> {
    let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
    let target = DockerTarget::new(busybox, &mut progress)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(target))
}

/// How long closing a conformance target may take before checkfu gives up
/// on it, in seconds.
pub const CLOSE_TIMEOUT_SECONDS: u64 = 60;

/// Exit status after SIGINT.
pub const EXIT_SIGINT: u8 = 130;
/// Exit status after SIGTERM.
pub const EXIT_SIGTERM: u8 = 143;

/// Which signal stopped checkfu.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Stop {
    /// The exit status: 130 or 143, as a shell reports a death by it.
    pub fn code(self) -> u8 {
        match self {
            Stop::Interrupt => EXIT_SIGINT,
            Stop::Terminate => EXIT_SIGTERM,
        }
    }
}

/// Resolves at the first SIGINT or SIGTERM. The handlers are installed at
/// the first poll; from then on neither signal kills checkfu.
///
/// # Errors
/// The I/O error when a handler cannot be installed.
pub async fn stop_signal() -> std::io::Result<Stop> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = int.recv() => Ok(Stop::Interrupt),
        _ = term.recv() => Ok(Stop::Terminate),
    }
}

/// Releases what a target holds (Docker: every object of its scope, its
/// network and state directory), bounded by [`CLOSE_TIMEOUT_SECONDS`]; a
/// failure or an overrun is reported on stderr.
pub async fn close_target(target: &Arc<dyn ConformanceTarget>) {
    let bound = Duration::from_secs(CLOSE_TIMEOUT_SECONDS);
    let name = target.name();
    match tokio::time::timeout(bound, target.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("checkfu: closing the {name} target: {e}"),
        Err(_) => eprintln!(
            "checkfu: closing the {name} target: did not finish within {} s; objects of its \
scope may be left",
            bound.as_secs()
        ),
    }
}
