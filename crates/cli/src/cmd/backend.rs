//! The providers the CLI can talk to, built the same way for every command:
//! the embedded memory oracle, or the local Docker daemon under the CLI's
//! scope and state directory.

use checkfu_sandbox_contract::Operation;
use std::path::PathBuf;
use std::sync::Arc;

use checkfu_sandbox_contract::{Clock, FailureReason, SandboxError, SandboxProvider, SystemClock};
use checkfu_sandbox_docker::{DockerConfig, DockerProvider};
use checkfu_sandbox_memory::MemoryProvider;

use super::fail::Failure;
use super::ProviderArg;

/// The scope the CLI's Docker objects carry unless `CHECKFU_SCOPE` names
/// another (`checkfu.sandbox.scope=cli`).
pub const DEFAULT_SCOPE: &str = "cli";

/// Environment variable that overrides the Docker scope.
pub const SCOPE_ENV: &str = "CHECKFU_SCOPE";

/// Environment variable that overrides the Docker state directory.
pub const STATE_DIR_ENV: &str = "CHECKFU_STATE_DIR";

/// The Docker scope: `$CHECKFU_SCOPE`, else `cli`.
pub fn scope() -> String {
    match std::env::var(SCOPE_ENV) {
        Ok(s) if !s.is_empty() => s,
        _ => DEFAULT_SCOPE.to_owned(),
    }
}

/// The Docker state directory: `$CHECKFU_STATE_DIR`; else
/// `/var/lib/checkfu/sandbox` for root; else
/// `$XDG_STATE_HOME/checkfu/sandbox`, or `~/.local/state/checkfu/sandbox`.
pub fn state_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(STATE_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/lib/checkfu/sandbox");
    }
    if let Some(xdg) = var("XDG_STATE_HOME") {
        return PathBuf::from(xdg).join("checkfu/sandbox");
    }
    let home = var("HOME").map(PathBuf::from).unwrap_or_else(|| ".".into());
    home.join(".local/state/checkfu/sandbox")
}

/// Opens the provider `which` names: the memory oracle on the system
/// clock, or the Docker daemon with the CLI's scope and state directory.
/// The one place a provider is built; a new provider is one arm here.
///
/// # Errors
/// A 125 failure naming `connect` when the daemon does not answer, the
/// scope is malformed or the state directory cannot be prepared.
pub async fn open(which: ProviderArg) -> Result<Arc<dyn SandboxProvider>, Failure> {
    Ok(match which {
        ProviderArg::Memory => Arc::new(MemoryProvider::with_system_clock()),
        ProviderArg::Docker => Arc::new(
            DockerProvider::connect(DockerConfig {
                state_dir: state_dir(),
                scope: scope(),
                clock: clock(),
            })
            .await
            .map_err(|e| connect_failure(&e))?,
        ),
    })
}

/// The clock instances are stamped with.
pub fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// `SandboxOperationFailed{operation: connect, reason: provider_error}`
/// for a Docker daemon that cannot be reached.
pub(super) fn connect_failure(e: &dyn std::error::Error) -> Failure {
    Failure::from(SandboxError::failed(
        Operation::Connect,
        FailureReason::ProviderError,
        format!("docker: {}", chain(e)),
    ))
}

/// An error and its sources, joined by `: `.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
