//! The provider object: identity constants, configuration, construction
//! and the shared state behind every member ([`Inner`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bollard::Docker;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::records;

use super::host_exec::{ExecPath, ExecRoute, HostExec};
use super::labels::container_name;
use super::pool::{Pool, DEFAULT_POOL_SIZE, MAX_POOL_SIZE, POOL_ENV};
use crate::daemon::{self, DaemonError};
use crate::egress::{EgressConfig, EgressSupport};
use crate::process::ProcessTable;
use crate::store::{InstanceRecord, Layout, SnapshotRecord};

/// The provider id instances echo as `provider`.
pub const PROVIDER_ID: &str = "docker";
/// The provider revision instances echo in `materialization`.
pub const PROVIDER_REVISION: &str = "docker/1";
/// The materialization revision instances echo in `materialization`.
pub const MATERIALIZATION_REVISION: &str = "fixture-busybox/1";

pub(super) use checkfu_sandbox_hostfs::records::{INSTANCE_PREFIX, SNAPSHOT_PREFIX};

/// How to construct a [`DockerProvider`].
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// Root of the provider's host directories and records, for example
    /// `/var/lib/checkfu-sandbox` (created when missing).
    pub state_dir: PathBuf,
    /// Value of `checkfu.sandbox.scope` on every object; listing and cleanup
    /// never look beyond it. 1..=64 characters of `[a-z0-9._-]`, the first a letter or a digit.
    pub scope: String,
    /// The clock behind every `created_at`, `started_at` and `finished_at`.
    pub clock: Arc<dyn Clock>,
    /// Ready containers the warm pool keeps per shape (image, limits,
    /// network mode, mount plan), at most [`MAX_POOL_SIZE`]; `0` disables
    /// the pool. [`DEFAULT_POOL_SIZE`] unless configured
    /// ([`DockerConfig::pool_size_from_env`] reads `CHECKFU_DOCKER_POOL`).
    pub pool_size: usize,
    /// The exec path of execute and openProcess; `None`: the one
    /// [`crate::EXEC_PATH_ENV`] names, else [`ExecPath::Host`] (the host path
    /// where it is available, decision 045).
    pub exec_path: Option<ExecPath>,
}

impl DockerConfig {
    /// A configuration with the default pool size.
    pub fn new(state_dir: PathBuf, scope: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        DockerConfig {
            state_dir,
            scope: scope.into(),
            clock,
            pool_size: DEFAULT_POOL_SIZE,
            exec_path: None,
        }
    }

    /// The pool size `CHECKFU_DOCKER_POOL` names, or `default` when it is
    /// unset or empty.
    ///
    /// # Errors
    ///
    /// [`DockerProviderError::PoolSize`] when the value is not a number in
    /// `0..=MAX_POOL_SIZE`.
    pub fn pool_size_from_env(default: usize) -> Result<usize, DockerProviderError> {
        match std::env::var(POOL_ENV) {
            Ok(v) if !v.trim().is_empty() => parse_pool_size(&v),
            _ => Ok(default),
        }
    }
}

/// Parses a pool size: a decimal number in `0..=MAX_POOL_SIZE`.
///
/// # Errors
///
/// [`DockerProviderError::PoolSize`] naming the value.
pub fn parse_pool_size(value: &str) -> Result<usize, DockerProviderError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n <= MAX_POOL_SIZE => Ok(n),
        _ => Err(DockerProviderError::PoolSize(value.to_owned())),
    }
}

/// Why a provider could not be constructed.
#[derive(Debug, thiserror::Error)]
pub enum DockerProviderError {
    /// The daemon did not answer.
    #[error("cannot reach the docker daemon")]
    Daemon(#[from] DaemonError),
    /// The scope is not usable as a label value and name part.
    #[error("invalid scope {0:?}: expected 1..=64 characters of [a-z0-9._-], the first a letter or a digit")]
    Scope(String),
    /// The pool size is not a number in `0..=MAX_POOL_SIZE`.
    #[error("invalid pool size {0:?}: expected a number in 0..={MAX_POOL_SIZE}")]
    PoolSize(String),
    /// The exec path (`CHECKFU_DOCKER_EXEC`) is neither `host` nor `daemon`.
    #[error("invalid CHECKFU_DOCKER_EXEC {0:?}: expected \"host\" or \"daemon\"")]
    ExecPath(String),
    /// The state directory could not be prepared.
    #[error("cannot prepare the state directory {path:?}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// The Docker sandbox provider (see the module documentation).
///
/// Cheap to clone; clones share the open-process reservations.
#[derive(Clone)]
pub struct DockerProvider {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for DockerProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerProvider")
            .field("scope", &self.inner.scope)
            .field("state_dir", &self.inner.layout.root())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) docker: Docker,
    pub(crate) layout: Layout,
    pub(crate) scope: String,
    pub(crate) clock: Arc<dyn Clock>,
    /// instance id -> reservation token of its one live process.
    pub(crate) processes: Arc<ProcessTable>,
    /// Where allowlist instances connect and how names resolve.
    pub(crate) egress: EgressConfig,
    /// Whether `allowlist` is offered (probed once at construction).
    pub(crate) egress_support: EgressSupport,
    /// The warm pool of this provider object.
    pub(crate) pool: Pool,
    /// beginActiveWrite's step hook (crash tests).
    pub(crate) active_write_hook: std::sync::OnceLock<crate::active_write::StepHook>,
    /// The host exec path's choice and each instance's route.
    pub(crate) host_exec: HostExec,
}

impl DockerProvider {
    /// Connects to the local daemon (version negotiated) and prepares the
    /// state directory.
    ///
    /// # Errors
    ///
    /// [`DockerProviderError`] when the daemon does not answer, the scope is
    /// malformed or the state directory cannot be created.
    pub async fn connect(config: DockerConfig) -> Result<Self, DockerProviderError> {
        let docker = daemon::connect().await?;
        let provider = Self::with_docker(docker, config)?;
        // beginActiveWrite recovery on the provider's start: interrupted
        // dispatches rolled back, committed ones finished, inherited pause
        // tokens released. A failure is reported and retried by the next
        // delivery of the same transaction.
        if let Err(e) = provider.recover_active_writes().await {
            tracing::warn!(error = %e, "active-write recovery incomplete");
        }
        Ok(provider)
    }

    /// A provider over an already connected daemon handle.
    ///
    /// # Errors
    ///
    /// As [`DockerProvider::connect`], without the daemon call.
    pub fn with_docker(docker: Docker, config: DockerConfig) -> Result<Self, DockerProviderError> {
        Self::with_egress(
            docker,
            config,
            EgressConfig::default(),
            EgressSupport::probe_cached(),
        )
    }

    /// A provider over an already connected daemon handle whose allowlist
    /// instances join `egress.network` and resolve names through
    /// `egress.static_hosts` first; `support` is the host's ability to
    /// enforce an allowlist ([`EgressSupport::probe_cached`] unless a caller
    /// knows better), and decides whether the envelope offers `allowlist`.
    ///
    /// # Errors
    ///
    /// As [`DockerProvider::with_docker`].
    pub fn with_egress(
        docker: Docker,
        config: DockerConfig,
        egress: EgressConfig,
        support: EgressSupport,
    ) -> Result<Self, DockerProviderError> {
        if !records::scope_ok(&config.scope) {
            return Err(DockerProviderError::Scope(config.scope));
        }
        if config.pool_size > MAX_POOL_SIZE {
            return Err(DockerProviderError::PoolSize(config.pool_size.to_string()));
        }
        let exec_path = match config.exec_path {
            Some(p) => p,
            None => ExecPath::from_env()?,
        };
        let layout = Layout::new(config.state_dir);
        for dir in [layout.instances(), layout.snapshots()] {
            std::fs::create_dir_all(&dir)
                .map_err(|source| DockerProviderError::StateDir { path: dir, source })?;
        }
        Ok(DockerProvider {
            inner: Arc::new(Inner {
                docker,
                layout,
                scope: config.scope,
                clock: config.clock,
                processes: Arc::new(ProcessTable::new()),
                egress,
                egress_support: support,
                pool: Pool::new(config.pool_size),
                active_write_hook: std::sync::OnceLock::new(),
                host_exec: HostExec::new(exec_path),
            }),
        })
    }

    /// A second provider object over the same daemon, state directory,
    /// scope and clock, sharing no in-memory state with this one: what a
    /// restarted Runner constructs. It keeps no warm pool (it exists to find
    /// and sweep what the first one left).
    pub fn reopen(&self) -> DockerProvider {
        DockerProvider {
            inner: Arc::new(Inner {
                docker: self.inner.docker.clone(),
                layout: self.inner.layout.clone(),
                scope: self.inner.scope.clone(),
                clock: self.inner.clock.clone(),
                processes: Arc::new(ProcessTable::new()),
                egress: self.inner.egress.clone(),
                egress_support: self.inner.egress_support.clone(),
                pool: Pool::new(0),
                active_write_hook: std::sync::OnceLock::new(),
                host_exec: HostExec::new(self.inner.host_exec.choice()),
            }),
        }
    }

    /// The daemon handle.
    pub fn docker(&self) -> &Docker {
        &self.inner.docker
    }

    /// How the commands of `instance_id` start: [`ExecRoute::Host`] when
    /// this provider object captured its container at activation for the
    /// host path, else the daemon and why.
    pub fn exec_route(&self, instance_id: &str) -> ExecRoute {
        self.inner.exec_route(instance_id)
    }

    /// The scope label value.
    pub fn scope(&self) -> &str {
        &self.inner.scope
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        self.inner.layout.root()
    }

    /// Whether this provider enforces `allowlist`, and if not, why.
    pub fn egress_support(&self) -> &EgressSupport {
        &self.inner.egress_support
    }

    /// Where allowlist instances connect and how names resolve.
    pub fn egress_config(&self) -> &EgressConfig {
        &self.inner.egress
    }

    /// The container an instance of this scope runs in (a pooled
    /// container's id, or the name `checkfu-<id>`), or `None` when the
    /// instance is unknown.
    pub fn container_of(&self, instance_id: &str) -> Option<String> {
        self.inner
            .load_instance(Operation::Member(Member::Execute), instance_id)
            .ok()
            .map(|rec| Inner::container_of(&rec))
    }
}

impl Inner {
    pub(super) fn load_instance(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<InstanceRecord, SandboxError> {
        records::load_instance(&self.layout, &self.scope, operation, id)
    }

    pub(super) fn load_snapshot(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<SnapshotRecord, SandboxError> {
        records::load_snapshot(&self.layout, &self.scope, operation, id)
    }

    /// The container of an instance: the pooled container its record
    /// names, else `checkfu-<id>`.
    pub(super) fn container_of(rec: &InstanceRecord) -> String {
        rec.pool_container
            .clone()
            .unwrap_or_else(|| container_name(&rec.instance_id))
    }

    pub(super) fn save_instance(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        records::save_instance(&self.layout, operation, rec)
    }
}
