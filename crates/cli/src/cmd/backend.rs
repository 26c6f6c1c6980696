//! The providers the CLI can talk to, built the same way for every command:
//! the embedded memory oracle, or the local Docker daemon under the CLI's
//! scope and state directory.

use std::path::PathBuf;
use std::sync::Arc;

use checkfu_sandbox_contract::{
    Architecture, Clock, Digest, FailureReason, ImageReference, Os, Platform, Requirement,
    SandboxError, SandboxProvider, SystemClock,
};
use checkfu_sandbox_docker::{fixture, DockerConfig, DockerProvider};
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::staging::sha256_digest;

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

/// The platform of this machine.
pub fn host_platform() -> Platform {
    Platform {
        os: Os::Linux,
        architecture: if std::env::consts::ARCH == "aarch64" {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        },
    }
}

/// A provider the CLI opened.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The embedded memory oracle (lives as long as this process).
    Memory(MemoryProvider),
    /// The local Docker daemon.
    Docker(DockerProvider),
}

impl Backend {
    /// Opens the provider: the memory oracle on the system clock, or the
    /// Docker daemon with the CLI's scope and state directory.
    ///
    /// # Errors
    /// A 125 failure naming `connect` when the daemon does not answer, the
    /// scope is malformed or the state directory cannot be prepared.
    pub async fn open(which: ProviderArg) -> Result<Backend, Failure> {
        match which {
            ProviderArg::Memory => Ok(Backend::Memory(MemoryProvider::with_system_clock())),
            ProviderArg::Docker => {
                let config = DockerConfig {
                    state_dir: state_dir(),
                    scope: scope(),
                    clock: Arc::new(SystemClock),
                };
                DockerProvider::connect(config)
                    .await
                    .map(Backend::Docker)
                    .map_err(|e| {
                        Failure::from(SandboxError::failed(
                            "connect",
                            FailureReason::ProviderError,
                            format!("docker: {}", chain(&e)),
                        ))
                    })
            }
        }
    }

    /// The provider, for registration with a runtime.
    pub fn provider(&self) -> Arc<dyn SandboxProvider> {
        match self {
            Backend::Memory(m) => Arc::new(m.clone()),
            Backend::Docker(d) => Arc::new(d.clone()),
        }
    }

    /// The provider id.
    pub fn id(&self) -> &'static str {
        match self {
            Backend::Memory(_) => checkfu_sandbox_memory::PROVIDER_ID,
            Backend::Docker(_) => checkfu_sandbox_docker::PROVIDER_ID,
        }
    }

    /// The clock instances are stamped with.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(SystemClock)
    }

    /// Resolves `input` to a pinned `name@sha256:...` reference.
    ///
    /// Docker: through the daemon's image store (a tag resolves to the image
    /// it designates now). Memory: the oracle has no image store; a pinned
    /// reference is taken as is and a tag is pinned to the SHA-256 of its
    /// text, so the same tag always gives the same reference.
    ///
    /// # Errors
    /// `SandboxCapabilityUnavailable{requirement: base_image}` for a
    /// malformed or unknown image.
    pub async fn resolve_image(&self, input: &str) -> Result<ImageReference, Failure> {
        let unavailable = |detail: String| {
            Failure::from(SandboxError::unavailable(Requirement::BaseImage, detail))
        };
        let pinned = match self {
            Backend::Docker(d) => match fixture::resolve_image(d.docker(), input).await {
                Ok(Some(pinned)) => pinned,
                Ok(None) => {
                    return Err(unavailable(format!(
                        "image {input:?} is not in the local image store (no registry is used; \
`checkfu sandbox fixture` builds the fixture image)"
                    )))
                }
                Err(e) => return Err(unavailable(format!("image {input:?}: {}", chain(&e)))),
            },
            Backend::Memory(_) => {
                if input.contains('@') {
                    input.to_owned()
                } else {
                    let name = input.rsplit_once(':').map_or(input, |(n, _)| n);
                    let digest: Digest = sha256_digest(input.as_bytes());
                    format!("{name}@{}", digest.as_str())
                }
            }
        };
        ImageReference::parse(&pinned).map_err(|e| unavailable(format!("image {input:?}: {e}")))
    }
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
