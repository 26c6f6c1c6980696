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
pub mod fail;
pub mod faults;
pub mod fixture;
pub mod out;
pub mod run;
pub mod run_events;
pub mod run_flags;
pub mod schema;
pub mod serve;
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

/// Exit status after SIGHUP.
pub const EXIT_SIGHUP: u8 = 129;
/// Exit status after SIGINT.
pub const EXIT_SIGINT: u8 = 130;
/// Exit status after SIGQUIT.
pub const EXIT_SIGQUIT: u8 = 131;
/// Exit status after SIGTERM.
pub const EXIT_SIGTERM: u8 = 143;

/// Which signal stopped checkfu: every signal that ends a terminal
/// session or a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGHUP (the terminal went away).
    Hangup,
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGQUIT (Ctrl-\\).
    Quit,
    /// SIGTERM.
    Terminate,
}

impl Stop {
    /// The exit status, 128 + the signal's number, as a shell reports a
    /// death by it: 129, 130, 131 or 143.
    pub fn code(self) -> u8 {
        match self {
            Stop::Hangup => EXIT_SIGHUP,
            Stop::Interrupt => EXIT_SIGINT,
            Stop::Quit => EXIT_SIGQUIT,
            Stop::Terminate => EXIT_SIGTERM,
        }
    }
}

/// The handlers of every [`Stop`] signal, installed at creation; from then
/// on none of these signals kills checkfu.
pub struct StopSignals {
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers.
    ///
    /// # Errors
    /// The I/O error when a handler cannot be installed.
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            hup: signal(SignalKind::hangup())?,
            int: signal(SignalKind::interrupt())?,
            quit: signal(SignalKind::quit())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the first of these signals.
    pub async fn recv(&mut self) -> Stop {
        tokio::select! {
            _ = self.hup.recv() => Stop::Hangup,
            _ = self.int.recv() => Stop::Interrupt,
            _ = self.quit.recv() => Stop::Quit,
            _ = self.term.recv() => Stop::Terminate,
        }
    }
}

/// Resolves at the first SIGHUP, SIGINT, SIGQUIT or SIGTERM. The handlers
/// are installed at the first poll; from then on none of them kills
/// checkfu.
///
/// # Errors
/// The I/O error when a handler cannot be installed.
pub async fn stop_signal() -> std::io::Result<Stop> {
    Ok(StopSignals::install()?.recv().await)
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
