//! The provider object: identity constants, configuration, construction,
//! the availability check and the shared state behind every member
//! ([`Inner`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::records;

use crate::cgroup::{self, CgroupVersion};
use crate::image::ImageStore;
use crate::store::{InstanceRecord, Layout, RootMode, SnapshotRecord};
use checkfu_sandbox_hostfs::process::ProcessTable;

/// The provider id instances echo as `provider`.
pub const PROVIDER_ID: &str = "linux";
/// The provider revision instances echo in `materialization`.
pub const PROVIDER_REVISION: &str = "linux/1";
/// The materialization revision instances echo in `materialization`.
pub const MATERIALIZATION_REVISION: &str = "oci-store/1";

use checkfu_sandbox_hostexec::zygote;
pub(super) use checkfu_sandbox_hostfs::records::INSTANCE_PREFIX;

/// The user workload commands run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkloadUser {
    /// The fixture's unprivileged `checkfu` user (uid/gid 1000), as the
    /// Docker provider runs it.
    #[default]
    Checkfu,
    /// uid 0 inside, with every capability dropped, `no_new_privs` and the
    /// seccomp filter (no user namespace: it is uid 0 on the host too, so
    /// only the namespaces, the empty capability sets and the filter stand
    /// between it and the host). For tests that show what a root workload
    /// cannot do.
    Root,
}

impl WorkloadUser {
    /// The uid (and gid).
    pub fn uid(self) -> u32 {
        match self {
            WorkloadUser::Checkfu => checkfu_sandbox_hostfs::rootfs::CHECKFU_UID,
            WorkloadUser::Root => 0,
        }
    }
}

/// How to construct a [`LinuxProvider`].
#[derive(Debug, Clone)]
pub struct LinuxConfig {
    /// Root of the provider's records, host directories, writable layers
    /// and image store, for example `/var/lib/checkfu/linux` (created when
    /// missing).
    pub state_dir: PathBuf,
    /// The scope every record carries; listing and cleanup never look
    /// beyond it. 1..=64 characters of `[a-z0-9._-]`, the first a letter or a digit.
    pub scope: String,
    /// The clock behind every `created_at`, `started_at` and `finished_at`.
    pub clock: Arc<dyn Clock>,
    /// Who workload commands run as.
    pub workload_user: WorkloadUser,
}

/// Why the provider is unavailable on this host: each variant is a typed
/// reason, never a partial provider.
#[derive(Debug, thiserror::Error)]
pub enum LinuxProviderError {
    /// Not running as root (namespaces, mounts and cgroups need it).
    #[error("the linux provider needs root (euid 0); this process runs as euid {euid}")]
    NotRoot {
        /// The effective uid.
        euid: u32,
    },
    /// No usable cgroup hierarchy (v1 with memory, pids and cpu, or v2).
    #[error("no usable cgroup hierarchy under /sys/fs/cgroup (v1 memory, pids and cpu, or v2)")]
    NoCgroups,
    /// The kernel refused a namespace the provider needs.
    #[error("the kernel refused a namespace: {0}")]
    Namespaces(String),
    /// The seccomp filter cannot be built here.
    #[error(transparent)]
    Seccomp(#[from] crate::seccomp::SeccompError),
    /// The scope is not usable as a directory name.
    #[error("invalid scope {0:?}: expected 1..=64 characters of [a-z0-9._-], the first a letter or a digit")]
    Scope(String),
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

/// The Linux namespaces sandbox provider (see the module documentation).
///
/// Cheap to clone; clones share the open-process reservations.
#[derive(Clone)]
pub struct LinuxProvider {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for LinuxProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinuxProvider")
            .field("scope", &self.inner.scope)
            .field("state_dir", &self.inner.layout.root())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) layout: Layout,
    pub(crate) images: ImageStore,
    pub(crate) scope: String,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) workload_user: WorkloadUser,
    pub(crate) cgroup_version: Option<CgroupVersion>,
    pub(crate) root_mode: RootMode,
    /// What the kernel accepts for overlay roots (the `volatile` option).
    pub(crate) overlay: crate::overlay::OverlaySupport,
    /// The default filters, in the order they are installed.
    pub(crate) seccomp: &'static [checkfu_sandbox_hostexec::seccomp::SeccompFilter],
    /// instance id -> reservation token of its one live process.
    pub(crate) processes: Arc<ProcessTable>,
    /// beginActiveWrite's step hook (crash tests).
    pub(crate) active_write_hook:
        std::sync::OnceLock<checkfu_sandbox_hostfs::active_write::StepHook>,
    /// Whether this provider made instance cgroups in its scope: only then
    /// does it remove the scope's empty cgroup directories when dropped (a
    /// provider built for a dry run or a listing changes nothing).
    pub(crate) made_cgroups: std::sync::atomic::AtomicBool,
    /// The request channels of the inits this provider started, by
    /// instance id, with the init they reach (decision 046). An instance
    /// whose init another provider started has none: its commands enter
    /// from the host.
    pub(crate) inits: std::sync::Mutex<
        std::collections::HashMap<String, (crate::store::InitRecord, Arc<zygote::Channel>)>,
    >,
    /// Instances whose init this provider is starting: a second start of
    /// the same instance meanwhile is refused (`ActivateInFlight`), so it
    /// can neither take the first one's layer nor remove its cgroups.
    pub(crate) starting: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Drop for Inner {
    /// The scope's cgroup directories outlive each instance (see
    /// [`crate::cgroup::remove_scope_dirs`]); they go with the provider
    /// that made instance cgroups in them, when empty.
    fn drop(&mut self) {
        if !self.made_cgroups.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Some(version) = self.cgroup_version {
            crate::cgroup::remove_scope_dirs(version, &self.scope);
        }
    }
}

/// Whether this host can run the provider: root, cgroups, namespaces and
/// the seccomp filter. `Ok` carries the cgroup version.
///
/// # Errors
///
/// The first [`LinuxProviderError`] reason that makes it unavailable.
pub fn availability() -> Result<CgroupVersion, LinuxProviderError> {
    let euid = rustix::process::geteuid().as_raw();
    if euid != 0 {
        return Err(LinuxProviderError::NotRoot { euid });
    }
    let version = cgroup::detect().ok_or(LinuxProviderError::NoCgroups)?;
    for ns in ["mnt", "pid", "net", "uts", "ipc"] {
        let path = format!("/proc/self/ns/{ns}");
        // A host file of the kernel's, not a workload tree.
        #[allow(clippy::disallowed_methods)]
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(LinuxProviderError::Namespaces(format!("{path} is missing")));
        }
    }
    crate::seccomp::shared_default_filters()?;
    Ok(version)
}

impl LinuxProvider {
    /// Checks [`availability`], prepares the state directory, decides
    /// how roots are made (overlay when the state directory's file system
    /// accepts an overlay mount, a copy otherwise) and recovers
    /// beginActiveWrite transactions a previous provider process left
    /// ([`LinuxProvider::recover_active_writes`]: interrupted dispatches
    /// rolled back, committed ones finished, inherited pause tokens
    /// released; a failure is logged and retried by the next delivery).
    ///
    /// # Errors
    ///
    /// [`LinuxProviderError`] when the host cannot run the provider, the
    /// scope is malformed or the state directory cannot be created.
    pub fn new(config: LinuxConfig) -> Result<Self, LinuxProviderError> {
        let version = availability()?;
        if !records::scope_ok(&config.scope) {
            return Err(LinuxProviderError::Scope(config.scope));
        }
        let layout = Layout::new(config.state_dir);
        for dir in [
            layout.instances(),
            layout.snapshots(),
            layout.images(),
            layout.overlay_root(),
        ] {
            std::fs::create_dir_all(&dir)
                .map_err(|source| LinuxProviderError::StateDir { path: dir, source })?;
        }
        let overlay = crate::overlay::OverlaySupport::probe(layout.root());
        let root_mode = match overlay {
            crate::overlay::OverlaySupport::None => RootMode::Copy,
            _ => RootMode::Overlay,
        };
        // Asked here, once per process, rather than on an activation.
        crate::procfs::present();
        let provider = LinuxProvider {
            inner: Arc::new(Inner {
                images: ImageStore::new(layout.images()),
                layout,
                scope: config.scope,
                clock: config.clock,
                workload_user: config.workload_user,
                cgroup_version: Some(version),
                root_mode,
                overlay,
                seccomp: crate::seccomp::shared_default_filters()?,
                processes: Arc::new(ProcessTable::new()),
                active_write_hook: std::sync::OnceLock::new(),
                made_cgroups: std::sync::atomic::AtomicBool::new(false),
                inits: std::sync::Mutex::new(std::collections::HashMap::new()),
                starting: std::sync::Mutex::default(),
            }),
        };
        provider.recover_active_writes_blocking();
        Ok(provider)
    }

    /// A second provider object over the same state directory, scope and
    /// clock, sharing no in-memory state with this one: what a restarted
    /// Runner constructs.
    pub fn reopen(&self) -> LinuxProvider {
        let i = &self.inner;
        LinuxProvider {
            inner: Arc::new(Inner {
                layout: i.layout.clone(),
                images: i.images.clone(),
                scope: i.scope.clone(),
                clock: i.clock.clone(),
                workload_user: i.workload_user,
                cgroup_version: i.cgroup_version,
                root_mode: i.root_mode,
                overlay: i.overlay,
                seccomp: i.seccomp,
                processes: Arc::new(ProcessTable::new()),
                active_write_hook: std::sync::OnceLock::new(),
                made_cgroups: std::sync::atomic::AtomicBool::new(false),
                inits: std::sync::Mutex::new(std::collections::HashMap::new()),
                starting: std::sync::Mutex::default(),
            }),
        }
    }

    /// The scope.
    pub fn scope(&self) -> &str {
        &self.inner.scope
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        self.inner.layout.root()
    }

    /// The image store.
    pub fn images(&self) -> &ImageStore {
        &self.inner.images
    }

    /// Whether roots are overlays (else private copies).
    pub fn uses_overlay(&self) -> bool {
        self.inner.root_mode == RootMode::Overlay
    }

    /// What the kernel accepted for overlay roots when the provider was
    /// made: with `volatile`, without it, or no overlay (decision 050).
    pub fn overlay_support(&self) -> crate::OverlaySupport {
        self.inner.overlay
    }

    /// The host pid of an active instance's init (pid 1 inside), for
    /// tests and diagnostics.
    pub fn init_pid(&self, instance_id: &str) -> Option<i32> {
        self.inner
            .load_instance(op::EXECUTE, instance_id)
            .ok()
            .and_then(|r| r.init)
            .map(|i| i.pid)
    }
}

use crate::store::RootLayout as _;
use checkfu_sandbox_contract::provider::op;

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

    pub(super) fn save_instance(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        records::save_instance(&self.layout, operation, rec)
    }
}
