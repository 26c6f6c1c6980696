//! One module per `checkfu sandbox` subcommand, and what they share.

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use checkfu_sandbox_conformance::targets::docker::DockerTarget;
use checkfu_sandbox_conformance::ConformanceTarget;

pub mod backend;
pub mod capabilities;
pub mod cleanup;
pub mod fail;
pub mod faults;
pub mod fixture;
pub mod outputs;
pub mod run;
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

/// Docker targets handed out by [`docker_target`] and not closed yet.
static DOCKER_TARGETS: Mutex<Vec<Arc<DockerTarget>>> = Mutex::new(Vec::new());

/// The Docker conformance target: the fixture image built from `busybox`
/// (build progress on stderr), a fresh scope, state directory and network.
///
/// # Errors
/// A message when the daemon, the fixture or the network is unusable.
pub async fn docker_target(busybox: &Path) -> Result<Arc<dyn ConformanceTarget>, String> {
    let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
    let target = Arc::new(DockerTarget::new(busybox, &mut progress).await?);
    DOCKER_TARGETS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(target.clone());
    Ok(target)
}

/// Releases what a target holds (Docker: every object of its scope, its
/// network and state directory); a failure is reported on stderr.
pub async fn close_target(target: &Arc<dyn ConformanceTarget>) {
    let wanted = Arc::as_ptr(target) as *const ();
    let docker = {
        let mut held = DOCKER_TARGETS.lock().unwrap_or_else(|e| e.into_inner());
        held.iter()
            .position(|d| Arc::as_ptr(d) as *const () == wanted)
            .map(|i| held.remove(i))
    };
    if let Some(docker) = docker {
        if let Err(message) = docker.close().await {
            eprintln!("checkfu: closing the docker target: {message}");
        }
    }
}
