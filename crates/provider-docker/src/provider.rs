//! [`DockerProvider`]: the sandbox provider over the local Docker daemon.
//!
//! # Objects and where they live
//!
//! | object | daemon | state directory ([`crate::store`]) |
//! |---|---|---|
//! | instance in `provisioning` | nothing | `instances/<id>/instance.json`, host dirs |
//! | instance in `active` | container `checkfu-<id>` | the same |
//! | resumed instance | container, image tag `checkfu-instance:<id>` | the same |
//! | snapshot | image tag `checkfu-snapshot:<id>` (a commit) | `snapshots/<id>/` record and archives |
//!
//! Every container and image carries the labels `checkfu.sandbox.provider=docker`,
//! `checkfu.sandbox.scope=<scope>`, `checkfu.sandbox.kind=instance|snapshot`,
//! the instance or snapshot id, the Session, `created_at` and `expires_at`
//! (canonical timestamps of the injected clock). Listing and cleanup only
//! ever consider objects of this provider's scope, so parallel runs on one
//! daemon never sweep each other; a fresh provider object over the same
//! daemon, state directory and scope ([`DockerProvider::reopen`], or a new
//! [`DockerProvider::connect`]) finds everything again.
//!
//! # Decisions
//!
//! * **Derived image.** The envelope offers no package manager, so a
//!   profile's derived image is the root image itself: the container runs
//!   `sha256:<id>` of `root_image` (resolved with
//!   [`crate::fixture::resolve_image`]) and the provider never removes it.
//!   A resumed instance runs its snapshot's image through a tag of its own,
//!   so that destroying the snapshot never strands an image in use.
//! * **User.** The workload runs as the fixture's unprivileged `checkfu`
//!   user (uid/gid 1000) with every capability dropped and
//!   `no-new-privileges`. The host directories of read-write mounts and of
//!   the output tree (and every file the provider writes or extracts into
//!   them) belong to 1000:1000; read-only mounts stay root's and are bound
//!   read-only. The provider itself runs as root, so it can read and
//!   remove whatever the workload creates.
//! * **Containment.** Reads, listings and writes go through descriptors
//!   beneath the host directory of the mount or output tree
//!   ([`crate::contained`], [`crate::store::write_beneath`]): a symlink the
//!   workload plants, even one it keeps swapping, never makes the host read
//!   or write outside that directory.
//! * **Snapshots.** A snapshot is a commit of the container (taken while
//!   it is paused) plus an uncompressed tar of every mount's host directory
//!   and of the output tree, in `snapshots/<id>/`. A clone is a commit of a
//!   never-started container created from the source image (its own image
//!   and labels) plus copies of the archives. Custody is `runner`: the
//!   bytes live on this machine.
//! * **Network.** Containers run with network mode `none`; `allowlist` is
//!   not offered.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures_util::StreamExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use checkfu_sandbox_contract::bounds::{MAX_FILE_BYTES, MAX_LIST_ENTRIES, MAX_MOUNTS, OUTPUT_PATH};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::contained::{self, ContainedError, LeafKind};
use crate::daemon::{self, DaemonError};
use crate::fixture::{self, CHECKFU_UID};
use crate::store::{
    self, ArchivedMount, Home, InstanceRecord, Layout, SnapshotRecord, RECORD_REVISION,
};

/// The provider id instances echo as `provider`.
pub const PROVIDER_ID: &str = "docker";
/// The provider revision instances echo in `materialization`.
pub const PROVIDER_REVISION: &str = "docker/1";
/// The materialization revision instances echo in `materialization`.
pub const MATERIALIZATION_REVISION: &str = "fixture-busybox/1";

/// Label: which provider created the object (`docker`).
pub const LABEL_PROVIDER: &str = "checkfu.sandbox.provider";
/// Label: the provider scope.
pub const LABEL_SCOPE: &str = "checkfu.sandbox.scope";
/// Label: `instance` or `snapshot`.
pub const LABEL_KIND: &str = "checkfu.sandbox.kind";
/// Label: the instance id (instances).
pub const LABEL_INSTANCE_ID: &str = "checkfu.sandbox.instance_id";
/// Label: the snapshot id (snapshots).
pub const LABEL_SNAPSHOT_ID: &str = "checkfu.sandbox.snapshot_id";
/// Label: the instance a snapshot was captured from.
pub const LABEL_SOURCE_INSTANCE_ID: &str = "checkfu.sandbox.source_instance_id";
/// Label: the Session.
pub const LABEL_SESSION_ID: &str = "checkfu.sandbox.session_id";
/// Label: the Workspace.
pub const LABEL_WORKSPACE_ID: &str = "checkfu.sandbox.workspace_id";
/// Label: the profile id.
pub const LABEL_PROFILE_ID: &str = "checkfu.sandbox.profile_id";
/// Label: the profile version.
pub const LABEL_PROFILE_VERSION: &str = "checkfu.sandbox.profile_version";
/// Label: the profile digest.
pub const LABEL_PROFILE_DIGEST: &str = "checkfu.sandbox.profile_digest";
/// Label: when the object was created (canonical timestamp).
pub const LABEL_CREATED_AT: &str = "checkfu.sandbox.created_at";
/// Label: when the object expires (canonical timestamp).
pub const LABEL_EXPIRES_AT: &str = "checkfu.sandbox.expires_at";
/// `checkfu.sandbox.kind` of instance containers.
pub const KIND_INSTANCE: &str = "instance";
/// `checkfu.sandbox.kind` of snapshot images.
pub const KIND_SNAPSHOT: &str = "snapshot";
/// Repository of snapshot image tags (`checkfu-snapshot:<snapshot id>`).
pub const SNAPSHOT_REPOSITORY: &str = "checkfu-snapshot";
/// Repository of per-instance image tags (`checkfu-instance:<instance id>`).
pub const INSTANCE_REPOSITORY: &str = "checkfu-instance";

const INSTANCE_PREFIX: &str = "i";
const SNAPSHOT_PREFIX: &str = "s";
/// How often a listing is walked again when the tree changed under it.
const LISTING_ATTEMPTS: u32 = 3;
/// How many orphans a sweep destroys at once.
const SWEEP_CONCURRENCY: usize = 8;
/// Most entries an archive of one host directory may hold.
const ARCHIVE_MAX_ENTRIES: usize = 1_000_000;

/// How to construct a [`DockerProvider`].
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// Root of the provider's host directories and records, for example
    /// `/var/lib/checkfu-sandbox` (created when missing).
    pub state_dir: PathBuf,
    /// Value of `checkfu.sandbox.scope` on every object; listing and cleanup
    /// never look beyond it. 1..=64 characters of `[a-z0-9._-]`.
    pub scope: String,
    /// The clock behind every `created_at`, `started_at` and `finished_at`.
    pub clock: Arc<dyn Clock>,
}

/// Why a provider could not be constructed.
#[derive(Debug, thiserror::Error)]
pub enum DockerProviderError {
    /// The daemon did not answer.
    #[error("cannot reach the docker daemon")]
    Daemon(#[from] DaemonError),
    /// The scope is not usable as a label value and name part.
    #[error("invalid scope {0:?}: expected 1..=64 characters of [a-z0-9._-]")]
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

/// Creation and expiry of a live object, when known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectTimes {
    /// `created_at`, from the record or the labels.
    pub created_at: Option<Timestamp>,
    /// `expires_at`, from the record or the labels.
    pub expires_at: Option<Timestamp>,
}

impl ObjectTimes {
    /// Takes each time this one lacks from `other`.
    fn fill(&mut self, other: ObjectTimes) {
        self.created_at = self.created_at.or(other.created_at);
        self.expires_at = self.expires_at.or(other.expires_at);
    }
}

/// Everything of this provider's scope that exists now, observed from the
/// daemon's labels and the state directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Instances by id.
    pub instances: BTreeMap<String, ObjectTimes>,
    /// Instances that have a container or an image at the daemon (the rest
    /// exist only as records in the state directory).
    pub instances_on_daemon: BTreeSet<String>,
    /// Snapshots by id.
    pub snapshots: BTreeMap<String, ObjectTimes>,
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
    processes: Mutex<HashMap<String, u64>>,
    next_reservation: AtomicU64,
}

fn scope_ok(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= 64
        && scope
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

/// The platform of this host (the daemon is local).
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

/// The provider's one envelope.
pub fn envelope() -> SandboxProviderCapabilities {
    use EnforcementLevel::{NotEnforced, ProviderEnforced};
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![host_platform()],
        image_mode: ImageMode::Profile,
        package_managers: Vec::new(),
        network_modes: vec![NetworkMode::None],
        retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
        snapshots: true,
        snapshot_clone: true,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: true,
        physically_contained_file_read: true,
        active_mount_write: false,
        egress_certification: EgressCertification::Unsupported,
        enforcement: Enforcement {
            // Mount namespace, read-only binds, contained host reads.
            filesystem: ProviderEnforced,
            // PID namespace; commands end with their process group.
            process: ProviderEnforced,
            // Network mode none: loopback only.
            network: ProviderEnforced,
            // cgroup limits set on the container.
            memory: ProviderEnforced,
            cpu: ProviderEnforced,
            pids: ProviderEnforced,
            // overlay2 without project quotas: no disk limit.
            disk: NotEnforced,
            // execute's timeout kills the command's process group.
            duration: ProviderEnforced,
            // cap_drop ALL, no-new-privileges, unprivileged user.
            privilege: ProviderEnforced,
        },
        max_mounts: MAX_MOUNTS,
        provider_revision: PROVIDER_REVISION.into(),
        materialization_revision: MATERIALIZATION_REVISION.into(),
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn provider_error(operation: &str, message: impl Into<String>) -> SandboxError {
    SandboxError::failed(operation, FailureReason::ProviderError, message)
}

fn daemon_error(operation: &str, e: &DaemonError) -> SandboxError {
    provider_error(operation, chain(e))
}

fn contained_error(operation: &str, path: &str, e: ContainedError) -> SandboxError {
    let reason = match &e {
        ContainedError::OutsideRoot { .. } => FailureReason::OutsideRoot,
        ContainedError::NotFound { .. } => FailureReason::NotFound,
        ContainedError::NotRegularFile { .. } => FailureReason::NotRegularFile,
        ContainedError::InvalidPath { .. } => FailureReason::InvalidRequest,
        ContainedError::TooLarge { .. }
        | ContainedError::TooManyEntries { .. }
        | ContainedError::Io { .. } => FailureReason::ProviderError,
    };
    SandboxError::failed(operation, reason, format!("{path}: {}", chain(&e)))
}

async fn blocking<T: Send + 'static>(
    operation: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| provider_error(operation, format!("blocking task failed: {e}")))
}

fn container_name(instance_id: &str) -> String {
    format!("checkfu-{instance_id}")
}

fn snapshot_tag(snapshot_id: &str) -> String {
    format!("{SNAPSHOT_REPOSITORY}:{snapshot_id}")
}

fn instance_tag(instance_id: &str) -> String {
    format!("{INSTANCE_REPOSITORY}:{instance_id}")
}

fn instance_of(
    request: &SandboxProvisionRequest,
    id: &str,
    state: InstanceState,
) -> SandboxInstance {
    SandboxInstance {
        instance_id: id.to_owned(),
        provider: request.provider.clone(),
        placement: request.placement,
        state,
        workspace_id: request.workspace_id.clone(),
        session_id: request.session_id.clone(),
        run_id: request.run_id.clone(),
        attempt_id: request.attempt_id.clone(),
        lease_id: request.lease_id.clone(),
        lease_epoch: request.lease_epoch,
        target: request.target,
        profile: request.profile.clone(),
        platform: request.platform,
        root_image: request.root_image.clone(),
        mounts: request.mounts.clone(),
        output_path: OUTPUT_PATH.to_owned(),
        expires_at: request.expires_at,
        materialization: Materialization {
            profile_digest: request.profile.profile_digest.clone(),
            image_reference: request.root_image.clone(),
            image_digest: request.root_image.digest(),
            provider_revision: PROVIDER_REVISION.to_owned(),
            materialization_revision: MATERIALIZATION_REVISION.to_owned(),
        },
    }
}

/// Owner of files in a home's host directory: the workload user for the
/// output tree and read-write mounts, root for read-only mounts.
fn owner_of(request: &SandboxProvisionRequest, home: Home) -> Option<u32> {
    match home {
        Home::Output => Some(CHECKFU_UID),
        Home::Mount(i) => match request.mounts.get(i).map(|m| m.access) {
            Some(MountAccess::ReadWrite) => Some(CHECKFU_UID),
            _ => None,
        },
    }
}

fn parse_time(labels: &HashMap<String, String>, key: &str) -> Option<Timestamp> {
    labels.get(key).and_then(|v| Timestamp::parse(v).ok())
}

enum ReadFailure {
    Contained(ContainedError),
    TooLarge { size_bytes: u64 },
}

/// Reads the regular file at `rel` beneath `root`, at most `maximum_bytes`.
fn read_contained(root: &Path, rel: &Path, maximum_bytes: u64) -> Result<Vec<u8>, ReadFailure> {
    use std::io::Read;
    let root_fd = contained::open_root(root).map_err(ReadFailure::Contained)?;
    let fd = contained::open_beneath(std::os::fd::AsFd::as_fd(&root_fd), rel)
        .map_err(ReadFailure::Contained)?;
    let size = rustix::fs::fstat(&fd)
        .map(|s| s.st_size as u64)
        .unwrap_or(0);
    let mut out = Vec::new();
    std::fs::File::from(fd)
        .take(maximum_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|source| {
            ReadFailure::Contained(ContainedError::Io {
                path: rel.to_path_buf(),
                source,
            })
        })?;
    if out.len() as u64 > maximum_bytes {
        return Err(ReadFailure::TooLarge {
            size_bytes: size.max(out.len() as u64),
        });
    }
    Ok(out)
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
        Self::with_docker(docker, config)
    }

    /// A provider over an already connected daemon handle.
    ///
    /// # Errors
    ///
    /// As [`DockerProvider::connect`], without the daemon call.
    pub fn with_docker(docker: Docker, config: DockerConfig) -> Result<Self, DockerProviderError> {
        if !scope_ok(&config.scope) {
            return Err(DockerProviderError::Scope(config.scope));
        }
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
                processes: Mutex::new(HashMap::new()),
                next_reservation: AtomicU64::new(1),
            }),
        })
    }

    /// A second provider object over the same daemon, state directory,
    /// scope and clock, sharing no in-memory state with this one: what a
    /// restarted Runner constructs.
    pub fn reopen(&self) -> DockerProvider {
        DockerProvider {
            inner: Arc::new(Inner {
                docker: self.inner.docker.clone(),
                layout: self.inner.layout.clone(),
                scope: self.inner.scope.clone(),
                clock: self.inner.clock.clone(),
                processes: Mutex::new(HashMap::new()),
                next_reservation: AtomicU64::new(1),
            }),
        }
    }

    /// The daemon handle.
    pub fn docker(&self) -> &Docker {
        &self.inner.docker
    }

    /// The scope label value.
    pub fn scope(&self) -> &str {
        &self.inner.scope
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        self.inner.layout.root()
    }

    /// Everything of this scope that exists now (see [`Inventory`]).
    ///
    /// # Errors
    ///
    /// `SandboxOperationFailed{provider_error}` when the daemon or the
    /// state directory cannot be read.
    pub async fn inventory(&self) -> Result<Inventory, SandboxError> {
        self.inner.inventory().await
    }

    /// Destroys every instance (first: a container may be built from a
    /// snapshot's image) and then every snapshot of this scope, attempting
    /// each one. Returns one line per object that could not be destroyed
    /// (empty when all were); used by teardown that must leave nothing.
    pub async fn destroy_all(&self) -> Vec<String> {
        let inv = match self.inventory().await {
            Ok(inv) => inv,
            Err(e) => return vec![format!("inventory: {e}")],
        };
        let mut problems = Vec::new();
        for id in inv.instances.keys() {
            if let Err(e) = self.inner.destroy_instance(op::DESTROY, id).await {
                problems.push(format!("instance {id}: {e}"));
            }
        }
        for id in inv.snapshots.keys() {
            if let Err(e) = self
                .inner
                .destroy_snapshot_inner(op::DESTROY_SNAPSHOT, id)
                .await
            {
                problems.push(format!("snapshot {id}: {e}"));
            }
        }
        problems
    }

    /// Ids of the containers and images that still carry this scope's label
    /// (a leak check after [`DockerProvider::destroy_all`]).
    ///
    /// # Errors
    ///
    /// `SandboxOperationFailed{provider_error}` when the daemon cannot be
    /// asked.
    pub async fn scope_leftovers(&self) -> Result<(Vec<String>, Vec<String>), SandboxError> {
        const OP: &str = op::CLEANUP;
        let labels = [(LABEL_SCOPE, self.inner.scope.as_str())];
        let containers = daemon::list_containers_by_labels(&self.inner.docker, &labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        let images = daemon::list_images_by_labels(&self.inner.docker, &labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        Ok((
            containers.into_iter().filter_map(|c| c.id).collect(),
            images.into_iter().map(|i| i.id).collect(),
        ))
    }
}

impl Inner {
    fn base_labels(&self, kind: &str) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_PROVIDER.to_owned(), PROVIDER_ID.to_owned()),
            (LABEL_SCOPE.to_owned(), self.scope.clone()),
            (LABEL_KIND.to_owned(), kind.to_owned()),
        ])
    }

    /// Every label key is set, so nothing inherited from an image (a
    /// resumed snapshot's labels) survives on a container.
    fn instance_labels(&self, rec: &InstanceRecord) -> HashMap<String, String> {
        let r = &rec.request;
        let mut l = self.base_labels(KIND_INSTANCE);
        for (k, v) in [
            (LABEL_INSTANCE_ID, rec.instance_id.clone()),
            (LABEL_SNAPSHOT_ID, String::new()),
            (LABEL_SOURCE_INSTANCE_ID, String::new()),
            (LABEL_SESSION_ID, r.session_id.clone()),
            (LABEL_WORKSPACE_ID, r.workspace_id.clone()),
            (LABEL_PROFILE_ID, r.profile.profile_id.clone()),
            (LABEL_PROFILE_VERSION, r.profile.profile_version.to_string()),
            (LABEL_PROFILE_DIGEST, r.profile.profile_digest.to_string()),
            (LABEL_CREATED_AT, rec.created_at.to_string()),
            (LABEL_EXPIRES_AT, r.expires_at.to_string()),
        ] {
            l.insert(k.to_owned(), v);
        }
        l
    }

    fn snapshot_labels(&self, s: &SandboxSnapshot) -> HashMap<String, String> {
        let mut l = self.base_labels(KIND_SNAPSHOT);
        for (k, v) in [
            (LABEL_INSTANCE_ID, String::new()),
            (LABEL_SNAPSHOT_ID, s.snapshot_id.clone()),
            (LABEL_SOURCE_INSTANCE_ID, s.source_instance_id.clone()),
            (LABEL_SESSION_ID, s.session_id.clone()),
            (LABEL_WORKSPACE_ID, s.workspace_id.clone()),
            (LABEL_PROFILE_ID, s.profile_id.clone()),
            (LABEL_PROFILE_VERSION, s.profile_version.to_string()),
            (LABEL_PROFILE_DIGEST, s.profile_digest.to_string()),
            (LABEL_CREATED_AT, s.created_at.to_string()),
            (LABEL_EXPIRES_AT, s.expires_at.to_string()),
        ] {
            l.insert(k.to_owned(), v);
        }
        l
    }

    fn host_dir(&self, id: &str, home: Home) -> PathBuf {
        match home {
            Home::Output => self.layout.outputs_dir(id),
            Home::Mount(i) => self.layout.mount_dir(id, i),
        }
    }

    fn load_instance(&self, operation: &str, id: &str) -> Result<InstanceRecord, SandboxError> {
        let not_found = || SandboxError::SandboxInstanceNotFound {
            instance_id: id.to_owned(),
        };
        if !store::is_id(INSTANCE_PREFIX, id) {
            return Err(not_found());
        }
        match store::read_record::<InstanceRecord>(&self.layout.instance_record(id)) {
            Ok(Some(rec)) if rec.scope == self.scope => Ok(rec),
            Ok(_) => Err(not_found()),
            Err(m) => Err(provider_error(operation, m)),
        }
    }

    fn load_snapshot(&self, operation: &str, id: &str) -> Result<SnapshotRecord, SandboxError> {
        let not_found = || SandboxError::SandboxSnapshotNotFound {
            snapshot_id: id.to_owned(),
        };
        if !store::is_id(SNAPSHOT_PREFIX, id) {
            return Err(not_found());
        }
        match store::read_record::<SnapshotRecord>(&self.layout.snapshot_record(id)) {
            Ok(Some(rec)) if rec.scope == self.scope => Ok(rec),
            Ok(_) => Err(not_found()),
            Err(m) => Err(provider_error(operation, m)),
        }
    }

    fn save_instance(&self, operation: &str, rec: &InstanceRecord) -> Result<(), SandboxError> {
        store::write_record(&self.layout.instance_record(&rec.instance_id), rec)
            .map_err(|e| provider_error(operation, format!("writing the instance record: {e}")))
    }

    /// The provider-side admission of a request (the runtime checks first;
    /// this refuses what this provider cannot do even if called directly).
    fn admit(
        &self,
        operation: &str,
        request: &SandboxProvisionRequest,
    ) -> Result<(), SandboxError> {
        if request.provider != PROVIDER_ID {
            return Err(SandboxError::invalid_request(
                operation,
                "provider",
                PROVIDER_ID,
                &request.provider,
            ));
        }
        if request.target != Tier::Container {
            return Err(SandboxError::unavailable(
                Requirement::Tier,
                "only container",
            ));
        }
        if request.platform != host_platform() {
            return Err(SandboxError::unavailable(
                Requirement::Platform,
                format!("only {:?}", host_platform()),
            ));
        }
        if !request.profile.packages.is_empty() {
            return Err(SandboxError::unavailable(
                Requirement::Packages,
                "no package manager is offered",
            ));
        }
        if request.profile.network_policy.mode() != NetworkMode::None {
            return Err(SandboxError::unavailable(
                Requirement::NetworkPolicy,
                "only network mode none is offered",
            ));
        }
        if request.profile.resources.disk_bytes.is_some() {
            return Err(SandboxError::unavailable(
                Requirement::Resources,
                "disk limits are not enforced",
            ));
        }
        if request.mounts.len() > usize::from(MAX_MOUNTS) {
            return Err(SandboxError::unavailable(
                Requirement::Mounts,
                format!("at most {MAX_MOUNTS} mounts"),
            ));
        }
        Ok(())
    }

    async fn resolve_root(
        &self,
        request: &SandboxProvisionRequest,
    ) -> Result<String, SandboxError> {
        let reference = request.root_image.as_str();
        match fixture::resolve_image(&self.docker, reference).await {
            Ok(Some(_)) => Ok(format!("sha256:{}", request.root_image.digest().hex())),
            Ok(None) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("root image {reference} is not present at the local daemon"),
            )),
            Err(fixture::FixtureError::Docker(e)) => Err(provider_error(
                op::PROVISION,
                format!("resolving {reference}: {}", chain(&e)),
            )),
            Err(e) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("root image {reference}: {}", chain(&e)),
            )),
        }
    }

    /// Creates the host directories of a fresh instance (mounts and output
    /// tree), with owners, and the mount points of nested mounts.
    fn prepare_dirs(&self, id: &str, request: &SandboxProvisionRequest) -> Result<(), String> {
        let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
        std::fs::create_dir_all(self.layout.instance_dir(id).join("mounts"))
            .map_err(|e| io("creating mounts", e))?;
        let mut homes: Vec<Home> = (0..request.mounts.len()).map(Home::Mount).collect();
        homes.push(Home::Output);
        for home in homes {
            let dir = self.host_dir(id, home);
            if !dir.exists() {
                std::fs::create_dir(&dir).map_err(|e| io("creating a host directory", e))?;
            }
            if let Some(uid) = owner_of(request, home) {
                std::os::unix::fs::chown(&dir, Some(uid), Some(uid))
                    .map_err(|e| io("chown of a host directory", e))?;
            }
        }
        self.prepare_mount_points(id, request)
    }

    fn prepare_mount_points(
        &self,
        id: &str,
        request: &SandboxProvisionRequest,
    ) -> Result<(), String> {
        for (parent, rel) in store::nested_mount_points(request) {
            let owner = owner_of(request, Home::Mount(parent));
            store::ensure_dir_beneath(&self.layout.mount_dir(id, parent), &rel, owner)
                .map_err(|e| format!("mount point {}: {}", rel.display(), chain(&e)))?;
        }
        Ok(())
    }

    /// Creates and starts the container of an instance.
    async fn start_container(
        &self,
        operation: &str,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        let id = &rec.instance_id;
        let r = &rec.request;
        let mut binds: Vec<daemon::BindMount> = r
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| daemon::BindMount {
                host_path: self.layout.mount_dir(id, i),
                container_path: m.path.clone(),
                read_only: m.access == MountAccess::ReadOnly,
            })
            .collect();
        binds.push(daemon::BindMount {
            host_path: self.layout.outputs_dir(id),
            container_path: OUTPUT_PATH.to_owned(),
            read_only: false,
        });
        let res = &r.profile.resources;
        let spec = daemon::ContainerSpec {
            image: rec.image.clone(),
            name: Some(container_name(id)),
            labels: self.instance_labels(rec),
            binds,
            user: Some(format!("{CHECKFU_UID}:{CHECKFU_UID}")),
            working_dir: Some("/".into()),
            env: Vec::new(),
            memory_bytes: res
                .memory_bytes
                .map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
            pids_limit: res.pids.map(i64::from),
            nano_cpus: res.cpu_millis.map(|c| i64::from(c) * 1_000_000),
            command: None,
            network_mode: None,
        };
        daemon::create_and_start(&self.docker, &spec)
            .await
            .map(drop)
            .map_err(|e| daemon_error(operation, &e))
    }

    /// Removes every trace of an instance: its open process, container,
    /// owned image tag and directory. Idempotent; unknown ids succeed.
    /// Destroys an instance known (from a fresh inventory) to have no
    /// container and no image: only its state directory.
    async fn destroy_instance_record(&self, operation: &str, id: &str) -> Result<(), SandboxError> {
        if !store::is_id(INSTANCE_PREFIX, id) {
            return Ok(());
        }
        let dir = self.layout.instance_dir(id);
        blocking("destroy", move || match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        })
        .await?
        .map_err(|e| provider_error(operation, format!("removing the instance directory: {e}")))
    }

    async fn destroy_instance(&self, operation: &str, id: &str) -> Result<(), SandboxError> {
        if !store::is_id(INSTANCE_PREFIX, id) {
            return Ok(());
        }
        if let Ok(mut p) = self.processes.lock() {
            p.remove(id);
        }
        let rec = store::read_record::<InstanceRecord>(&self.layout.instance_record(id))
            .ok()
            .flatten();
        if rec.as_ref().is_some_and(|r| r.scope != self.scope) {
            // Another scope's instance under a shared state directory.
            return Ok(());
        }
        daemon::remove_container(&self.docker, &container_name(id))
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        // Containers of this scope labelled with the id under another name.
        let labels = [
            (LABEL_SCOPE, self.scope.as_str()),
            (LABEL_KIND, KIND_INSTANCE),
            (LABEL_INSTANCE_ID, id),
        ];
        for c in daemon::list_containers_by_labels(&self.docker, &labels)
            .await
            .map_err(|e| daemon_error(operation, &e))?
        {
            if let Some(cid) = c.id {
                daemon::remove_container(&self.docker, &cid)
                    .await
                    .map_err(|e| daemon_error(operation, &e))?;
            }
        }
        daemon::remove_image(&self.docker, &instance_tag(id), false)
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        let dir = self.layout.instance_dir(id);
        blocking("destroy", move || match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        })
        .await?
        .map_err(|e| provider_error(operation, format!("removing the instance directory: {e}")))
    }

    /// Removes a snapshot's image tag and directory. Idempotent.
    async fn destroy_snapshot_inner(&self, operation: &str, id: &str) -> Result<(), SandboxError> {
        if !store::is_id(SNAPSHOT_PREFIX, id) {
            return Ok(());
        }
        let rec = store::read_record::<SnapshotRecord>(&self.layout.snapshot_record(id))
            .ok()
            .flatten();
        if rec.as_ref().is_some_and(|r| r.scope != self.scope) {
            return Ok(());
        }
        daemon::remove_container(&self.docker, &format!("checkfu-clone-{id}"))
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        // Temporary clone containers built from this snapshot's image (a
        // clone abandoned mid-way) would pin the image; they are ours.
        let scope = [(LABEL_SCOPE, self.scope.as_str())];
        let tag = snapshot_tag(id);
        // An error means the tag is already gone: nothing uses it by name.
        let users = daemon::list_containers_from_image(&self.docker, &tag, &scope)
            .await
            .unwrap_or_default();
        for c in users {
            let temp = c
                .names
                .unwrap_or_default()
                .iter()
                .any(|n| n.trim_start_matches('/').starts_with("checkfu-clone-"));
            if let (true, Some(cid)) = (temp, c.id) {
                daemon::remove_container(&self.docker, &cid)
                    .await
                    .map_err(|e| daemon_error(operation, &e))?;
            }
        }
        daemon::remove_image(&self.docker, &tag, false)
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        let dir = self.layout.snapshot_dir(id);
        blocking("destroy_snapshot", move || {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
        })
        .await?
        .map_err(|e| provider_error(operation, format!("removing the snapshot directory: {e}")))
    }

    /// Captures a snapshot of an active instance: commit plus archives.
    /// On failure, whatever was allocated is removed again.
    async fn capture(
        &self,
        operation: &str,
        rec: &InstanceRecord,
        expires_at: Timestamp,
    ) -> Result<SandboxSnapshot, SandboxError> {
        let sid = store::fresh_id(SNAPSHOT_PREFIX, &self.scope);
        let res = self.capture_into(operation, rec, expires_at, &sid).await;
        if res.is_err() {
            let _ = self.destroy_snapshot_inner(operation, &sid).await;
        }
        res
    }

    async fn capture_into(
        &self,
        operation: &str,
        rec: &InstanceRecord,
        expires_at: Timestamp,
        sid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        let r = &rec.request;
        let snapshot = SandboxSnapshot {
            snapshot_id: sid.to_owned(),
            provider: r.provider.clone(),
            placement: r.placement,
            source_instance_id: rec.instance_id.clone(),
            workspace_id: r.workspace_id.clone(),
            session_id: r.session_id.clone(),
            profile_id: r.profile.profile_id.clone(),
            profile_version: r.profile.profile_version,
            profile_digest: r.profile.profile_digest.clone(),
            created_at: self.clock.now(),
            expires_at,
        };
        let dir = self.layout.snapshot_dir(sid);
        let mounts: Vec<ArchivedMount> = r
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| ArchivedMount {
                path: m.path.clone(),
                access: m.access,
                archive: format!("mounts/{i}.tar"),
            })
            .collect();
        let record = SnapshotRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            snapshot: snapshot.clone(),
            image: snapshot_tag(sid),
            mounts,
            outputs_archive: "outputs.tar".to_owned(),
        };
        // The record first, so a sweep knows the snapshot's times from now on.
        store::publish_dir(&dir, store::SNAPSHOT_RECORD, &record).map_err(|e| {
            provider_error(operation, format!("creating the snapshot directory: {e}"))
        })?;
        let name = container_name(&rec.instance_id);
        // Pause so that the commit and the archives see one instant.
        self.docker
            .pause_container(&name)
            .await
            .map_err(|e| provider_error(operation, format!("pausing {name}: {}", chain(&e))))?;
        let captured = self.commit_and_archive(operation, rec, &record, &dir).await;
        let unpaused = self.docker.unpause_container(&name).await;
        captured?;
        unpaused
            .map_err(|e| provider_error(operation, format!("unpausing {name}: {}", chain(&e))))?;
        Ok(snapshot)
    }

    async fn commit_and_archive(
        &self,
        operation: &str,
        rec: &InstanceRecord,
        record: &SnapshotRecord,
        dir: &Path,
    ) -> Result<(), SandboxError> {
        let snapshot = &record.snapshot;
        daemon::commit_container(
            &self.docker,
            &container_name(&rec.instance_id),
            Some((SNAPSHOT_REPOSITORY, &snapshot.snapshot_id)),
            &self.snapshot_labels(snapshot),
        )
        .await
        .map_err(|e| daemon_error(operation, &e))?;
        let mut jobs: Vec<(PathBuf, PathBuf)> = record
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| {
                (
                    self.layout.mount_dir(&rec.instance_id, i),
                    dir.join(&m.archive),
                )
            })
            .collect();
        jobs.push((
            self.layout.outputs_dir(&rec.instance_id),
            dir.join(&record.outputs_archive),
        ));
        blocking("snapshot", move || -> Result<(), String> {
            for (src, dst) in jobs {
                let file =
                    std::fs::File::create(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
                let (w, _summary) =
                    daemon::archive_dir(&src, ARCHIVE_MAX_ENTRIES, std::io::BufWriter::new(file))
                        .map_err(|e| format!("archiving {}: {}", src.display(), chain(&e)))?;
                let file = w
                    .into_inner()
                    .map_err(|e| format!("{}: {e}", dst.display()))?;
                file.sync_all()
                    .map_err(|e| format!("{}: {e}", dst.display()))?;
            }
            Ok(())
        })
        .await?
        .map_err(|m| provider_error(operation, m))
    }

    async fn clone_snapshot_into(
        &self,
        source: &SnapshotRecord,
        target_session_id: &str,
        cid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        const OP: &str = op::CLONE_SNAPSHOT;
        let src = &source.snapshot;
        let created_at = self.clock.now().max(src.created_at);
        if created_at >= src.expires_at {
            return Err(SandboxError::invalid_request(
                OP,
                "source.expires_at",
                format!("after now ({created_at})"),
                src.expires_at.to_string(),
            ));
        }
        let clone = SandboxSnapshot {
            snapshot_id: cid.to_owned(),
            session_id: target_session_id.to_owned(),
            created_at,
            ..src.clone()
        };
        let record = SnapshotRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            snapshot: clone.clone(),
            image: snapshot_tag(cid),
            mounts: source.mounts.clone(),
            outputs_archive: source.outputs_archive.clone(),
        };
        // The record first, so a sweep knows the clone's times from now on.
        store::publish_dir(
            &self.layout.snapshot_dir(cid),
            store::SNAPSHOT_RECORD,
            &record,
        )
        .map_err(|e| provider_error(OP, format!("creating the snapshot directory: {e}")))?;
        let labels = self.snapshot_labels(&clone);
        // A never-started container from the source image, committed with
        // the clone's labels: an image of its own.
        let temp = format!("checkfu-clone-{cid}");
        let body = bollard::models::ContainerCreateBody {
            image: Some(source.image.clone()),
            cmd: Some(daemon::INIT_COMMAND.iter().map(|s| s.to_string()).collect()),
            entrypoint: Some(Vec::new()),
            labels: Some(labels.clone()),
            network_disabled: Some(true),
            host_config: Some(bollard::models::HostConfig {
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let opts = bollard::query_parameters::CreateContainerOptionsBuilder::new()
            .name(&temp)
            .build();
        self.docker
            .create_container(Some(opts), body)
            .await
            .map_err(|e| provider_error(OP, format!("creating {temp}: {}", chain(&e))))?;
        let committed = daemon::commit_container(
            &self.docker,
            &temp,
            Some((SNAPSHOT_REPOSITORY, cid)),
            &labels,
        )
        .await;
        let removed = daemon::remove_container(&self.docker, &temp).await;
        committed.map_err(|e| daemon_error(OP, &e))?;
        removed.map_err(|e| daemon_error(OP, &e))?;
        let from = self.layout.snapshot_dir(&src.snapshot_id);
        let to = self.layout.snapshot_dir(cid);
        let mut files: Vec<String> = source.mounts.iter().map(|m| m.archive.clone()).collect();
        files.push(source.outputs_archive.clone());
        blocking(OP, move || -> Result<(), String> {
            for f in files {
                std::fs::copy(from.join(&f), to.join(&f))
                    .map_err(|e| format!("copying {f}: {e}"))?;
            }
            Ok(())
        })
        .await?
        .map_err(|m| provider_error(OP, m))?;
        Ok(clone)
    }

    async fn resume_into(
        &self,
        request: &SandboxProvisionRequest,
        source: &SnapshotRecord,
        id: &str,
    ) -> Result<InstanceRecord, SandboxError> {
        const OP: &str = op::RESUME;
        let tag = instance_tag(id);
        let mut rec = InstanceRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            instance_id: id.to_owned(),
            created_at: self.clock.now(),
            state: InstanceState::Provisioning,
            request: request.clone(),
            image: tag.clone(),
            owned_image: Some(tag.clone()),
            resumed_from: Some(source.snapshot.snapshot_id.clone()),
        };
        // The record first, so a sweep finds the instance from now on.
        store::publish_dir(&self.layout.instance_dir(id), store::INSTANCE_RECORD, &rec)
            .map_err(|e| provider_error(OP, format!("creating the instance directory: {e}")))?;
        let opts = bollard::query_parameters::TagImageOptionsBuilder::new()
            .repo(INSTANCE_REPOSITORY)
            .tag(id)
            .build();
        self.docker
            .tag_image(&source.image, Some(opts))
            .await
            .map_err(|e| provider_error(OP, format!("tagging {}: {}", source.image, chain(&e))))?;
        // Rehydrate the host directories.
        let snap_dir = self.layout.snapshot_dir(&source.snapshot.snapshot_id);
        let mut jobs: Vec<(Option<PathBuf>, PathBuf, Option<u32>)> = Vec::new();
        for (i, m) in request.mounts.iter().enumerate() {
            let archive = source
                .mounts
                .iter()
                .find(|a| a.path == m.path)
                .map(|a| snap_dir.join(&a.archive));
            jobs.push((
                archive,
                self.layout.mount_dir(id, i),
                owner_of(request, Home::Mount(i)),
            ));
        }
        jobs.push((
            Some(snap_dir.join(&source.outputs_archive)),
            self.layout.outputs_dir(id),
            Some(CHECKFU_UID),
        ));
        blocking(OP, move || -> Result<(), String> {
            for (archive, dest, owner) in jobs {
                match archive {
                    Some(a) => {
                        let file =
                            std::fs::File::open(&a).map_err(|e| format!("{}: {e}", a.display()))?;
                        daemon::extract_archive_keeping_links(std::io::BufReader::new(file), &dest)
                            .map_err(|e| format!("extracting {}: {}", a.display(), chain(&e)))?;
                    }
                    None => std::fs::create_dir(&dest)
                        .map_err(|e| format!("{}: {e}", dest.display()))?,
                }
                if let Some(uid) = owner {
                    store::chown_tree(&dest, uid)
                        .map_err(|e| format!("chown of {}: {}", dest.display(), chain(&e)))?;
                }
            }
            Ok(())
        })
        .await?
        .map_err(|m| provider_error(OP, m))?;
        self.prepare_mount_points(id, request)
            .map_err(|m| provider_error(OP, m))?;
        self.start_container(OP, &rec).await?;
        rec.state = InstanceState::Active;
        self.save_instance(OP, &rec)?;
        Ok(rec)
    }

    async fn inventory(&self) -> Result<Inventory, SandboxError> {
        const OP: &str = op::CLEANUP;
        let mut inv = Inventory::default();
        // The state directory.
        let (instances_dir, snapshots_dir) = (self.layout.instances(), self.layout.snapshots());
        let scope = self.scope.clone();
        let (recs, snaps) = blocking(OP, move || {
            let list = |dir: &Path, prefix: &str| -> Vec<String> {
                std::fs::read_dir(dir)
                    .map(|rd| {
                        rd.filter_map(Result::ok)
                            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                            .filter(|n| store::is_id(prefix, n))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut recs = Vec::new();
            for id in list(&instances_dir, INSTANCE_PREFIX) {
                let rec = store::read_record::<InstanceRecord>(
                    &instances_dir.join(&id).join(store::INSTANCE_RECORD),
                );
                match rec {
                    Ok(Some(r)) if r.scope == scope => recs.push((id, Some(r))),
                    Ok(Some(_)) => {}
                    // A directory without a readable record: a crash
                    // between mkdir and the first write.
                    _ => recs.push((id, None)),
                }
            }
            let mut snaps = Vec::new();
            for id in list(&snapshots_dir, SNAPSHOT_PREFIX) {
                let rec = store::read_record::<SnapshotRecord>(
                    &snapshots_dir.join(&id).join(store::SNAPSHOT_RECORD),
                );
                match rec {
                    Ok(Some(r)) if r.scope == scope => snaps.push((id, Some(r))),
                    Ok(Some(_)) => {}
                    _ => snaps.push((id, None)),
                }
            }
            (recs, snaps)
        })
        .await?;
        for (id, rec) in recs {
            inv.instances.insert(
                id,
                rec.map(|r| ObjectTimes {
                    created_at: Some(r.created_at),
                    expires_at: Some(r.request.expires_at),
                })
                .unwrap_or_default(),
            );
        }
        for (id, rec) in snaps {
            inv.snapshots.insert(
                id,
                rec.map(|r| ObjectTimes {
                    created_at: Some(r.snapshot.created_at),
                    expires_at: Some(r.snapshot.expires_at),
                })
                .unwrap_or_default(),
            );
        }
        // The daemon.
        let scope_labels = [
            (LABEL_PROVIDER, PROVIDER_ID),
            (LABEL_SCOPE, self.scope.as_str()),
        ];
        let containers = daemon::list_containers_by_labels(&self.docker, &scope_labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        for c in containers {
            let labels = c.labels.unwrap_or_default();
            if labels.get(LABEL_KIND).map(String::as_str) != Some(KIND_INSTANCE) {
                continue;
            }
            let Some(id) = labels
                .get(LABEL_INSTANCE_ID)
                .filter(|i| store::is_id(INSTANCE_PREFIX, i))
            else {
                continue;
            };
            inv.instances_on_daemon.insert(id.clone());
            inv.instances
                .entry(id.clone())
                .or_default()
                .fill(ObjectTimes {
                    created_at: parse_time(&labels, LABEL_CREATED_AT),
                    expires_at: parse_time(&labels, LABEL_EXPIRES_AT),
                });
        }
        let images = daemon::list_images_by_labels(&self.docker, &scope_labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        for img in images {
            for tag in &img.repo_tags {
                if let Some(sid) = tag.strip_prefix(&format!("{SNAPSHOT_REPOSITORY}:")) {
                    if store::is_id(SNAPSHOT_PREFIX, sid) {
                        let labels_match =
                            img.labels.get(LABEL_SNAPSHOT_ID).map(String::as_str) == Some(sid);
                        inv.snapshots
                            .entry(sid.to_owned())
                            .or_default()
                            .fill(if labels_match {
                                ObjectTimes {
                                    created_at: parse_time(&img.labels, LABEL_CREATED_AT),
                                    expires_at: parse_time(&img.labels, LABEL_EXPIRES_AT),
                                }
                            } else {
                                ObjectTimes::default()
                            });
                    }
                } else if let Some(iid) = tag.strip_prefix(&format!("{INSTANCE_REPOSITORY}:")) {
                    if store::is_id(INSTANCE_PREFIX, iid) {
                        // A stray per-instance tag with no record or
                        // container: an instance with unknown times.
                        inv.instances.entry(iid.to_owned()).or_default();
                        inv.instances_on_daemon.insert(iid.to_owned());
                    }
                }
            }
        }
        Ok(inv)
    }

    fn reserve_process(&self, instance_id: &str) -> Result<u64, SandboxError> {
        let mut p = self
            .processes
            .lock()
            .map_err(|_| provider_error(op::OPEN_PROCESS, "process table poisoned"))?;
        if p.contains_key(instance_id) {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "no live process",
                "process_already_open",
            ));
        }
        let token = self.next_reservation.fetch_add(1, Ordering::SeqCst);
        p.insert(instance_id.to_owned(), token);
        Ok(token)
    }

    pub(crate) fn release_process(&self, instance_id: &str, token: u64) {
        if let Ok(mut p) = self.processes.lock() {
            if p.get(instance_id) == Some(&token) {
                p.remove(instance_id);
            }
        }
    }
}

/// Rollback of an instance allocation (provision, resume): destroys the
/// instance id captured at allocation.
struct InstanceRollback {
    inner: Arc<Inner>,
    operation: &'static str,
    instance_id: String,
}

#[async_trait]
impl Rollback for InstanceRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = format!("{}_rollback", self.operation);
        self.inner.destroy_instance(&op, &self.instance_id).await
    }
}

/// Rollback of an activation: removes the container and puts the record
/// back to `provisioning` (if the instance still exists).
struct ActivateRollback {
    inner: Arc<Inner>,
    instance_id: String,
}

#[async_trait]
impl Rollback for ActivateRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        const OP: &str = "activate_rollback";
        daemon::remove_container(&self.inner.docker, &container_name(&self.instance_id))
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        match self.inner.load_instance(OP, &self.instance_id) {
            Ok(mut rec) => {
                rec.state = InstanceState::Provisioning;
                self.inner.save_instance(OP, &rec)
            }
            Err(SandboxError::SandboxInstanceNotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Rollback of a snapshot allocation (snapshot, clone, durable release).
struct SnapshotRollback {
    inner: Arc<Inner>,
    operation: &'static str,
    snapshot_id: String,
}

#[async_trait]
impl Rollback for SnapshotRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = format!("{}_rollback", self.operation);
        self.inner
            .destroy_snapshot_inner(&op, &self.snapshot_id)
            .await
    }
}

/// Rollback of an allocation that left nothing to undo (a ZDR release).
struct NothingToUndo;

#[async_trait]
impl Rollback for NothingToUndo {
    async fn rollback(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}

#[async_trait]
impl SandboxProvider for DockerProvider {
    fn provider_id(&self) -> &str {
        PROVIDER_ID
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        envelope()
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        const OP: &str = op::PROVISION;
        let inner = &self.inner;
        inner.admit(OP, &request)?;
        let image = inner.resolve_root(&request).await?;
        let id = store::fresh_id(INSTANCE_PREFIX, &inner.scope);
        let rollback = Arc::new(InstanceRollback {
            inner: inner.clone(),
            operation: OP,
            instance_id: id.clone(),
        });
        let rec = InstanceRecord {
            record_revision: RECORD_REVISION,
            scope: inner.scope.clone(),
            instance_id: id.clone(),
            created_at: inner.clock.now(),
            state: InstanceState::Provisioning,
            request: request.clone(),
            image,
            owned_image: None,
            resumed_from: None,
        };
        let prepared = store::publish_dir(
            &inner.layout.instance_dir(&id),
            store::INSTANCE_RECORD,
            &rec,
        )
        .map_err(|e| provider_error(OP, format!("creating the instance directory: {e}")))
        .and_then(|()| {
            inner
                .prepare_dirs(&id, &request)
                .map_err(|m| provider_error(OP, m))
        });
        if let Err(e) = prepared {
            let _ = rollback.rollback().await;
            return Err(e);
        }
        Ok(Handoff {
            value: instance_of(&request, &id, InstanceState::Provisioning),
            rollback,
        })
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        const OP: &str = op::WRITE_FILE;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if request.content_base64.len() as u64 > MAX_FILE_BYTES {
            return Err(SandboxError::SandboxFileTooLarge {
                path: request.path.clone(),
                limit_bytes: MAX_FILE_BYTES,
                actual_bytes: request.content_base64.len() as u64,
            });
        }
        let Some((home, root)) = store::home_of(&rec.request, &request.path) else {
            return Err(SandboxError::failed(
                OP,
                FailureReason::PathNotAdmitted,
                format!(
                    "{} is outside every mount and the output tree",
                    request.path
                ),
            ));
        };
        if rec.state == InstanceState::Active && home != Home::Output {
            return Err(SandboxError::conflict(OP, "provisioning", "active"));
        }
        let Some(rel) = store::relative_to(&request.path, root) else {
            return Err(SandboxError::invalid_request(
                OP,
                "path",
                "a normalized file path below its root",
                &request.path,
            ));
        };
        let host = inner.host_dir(&rec.instance_id, home);
        let owner = owner_of(&rec.request, home);
        let path = request.path.clone();
        let content = request.content_base64.0;
        blocking(OP, move || {
            store::write_beneath(&host, &rel, &content, owner)
        })
        .await?
        .map_err(|e| contained_error(OP, &path, e))
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        const OP: &str = op::ACTIVATE;
        let inner = &self.inner;
        let mut rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Provisioning {
            return Err(SandboxError::conflict(
                OP,
                "provisioning",
                rec.state.as_str(),
            ));
        }
        let rollback = Arc::new(ActivateRollback {
            inner: inner.clone(),
            instance_id: rec.instance_id.clone(),
        });
        inner.start_container(OP, &rec).await?;
        rec.state = InstanceState::Active;
        if let Err(e) = inner.save_instance(OP, &rec) {
            let _ = rollback.rollback().await;
            return Err(e);
        }
        Ok(Handoff {
            value: instance_of(&rec.request, &rec.instance_id, InstanceState::Active),
            rollback,
        })
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        const OP: &str = op::EXECUTE;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state.as_str()));
        }
        let c = request.command;
        let mut argv = Vec::with_capacity(c.arguments.len() + 1);
        argv.push(c.executable);
        argv.extend(c.arguments);
        let exec = daemon::ExecRequest {
            argv,
            env: c
                .environment
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            working_dir: Some(c.working_directory),
            user: None,
            stdin: c.stdin_base64.map(|b| b.0),
            output_limit_bytes: c.output_limit_bytes,
            timeout: Duration::from_secs(u64::from(c.timeout_seconds)),
            reap_group_on_exit: true,
        };
        let started_at = inner.clock.now();
        let report = daemon::exec_bounded(&inner.docker, &container_name(&rec.instance_id), &exec)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        let finished_at = inner.clock.now().max(started_at);
        let (exit, stdout, stderr) = match report.outcome {
            daemon::ExecOutcome::Exited {
                code,
                stdout,
                stderr,
            } => {
                let code = u8::try_from(code)
                    .map_err(|_| provider_error(OP, format!("exit code {code} out of range")))?;
                (ExitCause::ExitCode(code), stdout, stderr)
            }
            daemon::ExecOutcome::TimedOut { stdout, stderr } => {
                (ExitCause::TimedOut, stdout, stderr)
            }
            // Decided from daemon state (no PID ever), so the daemon's
            // message is trusted: it is not workload output, and goes to
            // stderr. A started workload's 126/127 is `Exited` above.
            daemon::ExecOutcome::StartFailed(failure) => (
                ExitCause::ExitCode(failure.code),
                Vec::new(),
                format!("{}\n", failure.message).into_bytes(),
            ),
            daemon::ExecOutcome::OutputLimit {
                stream,
                limit_bytes,
            } => {
                return Err(SandboxError::SandboxOutputLimitExceeded {
                    stream: match stream {
                        daemon::OutputStream::Stdout => OutputStream::Stdout,
                        daemon::OutputStream::Stderr => OutputStream::Stderr,
                    },
                    limit_bytes,
                })
            }
            daemon::ExecOutcome::ExitUnknown { .. } => {
                return Err(provider_error(
                    OP,
                    format!(
                        "the daemon reported no exit code for exec {}",
                        report.exec_id
                    ),
                ))
            }
        };
        Ok(SandboxCommandResult {
            exit,
            stdout_base64: Bytes(stdout),
            stderr_base64: Bytes(stderr),
            started_at,
            finished_at,
        })
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        const OP: &str = op::READ_FILE;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        let host = inner.root_dir(OP, &rec, &request.allowed_root)?;
        let Some(rel) = store::relative_to(&request.path, &request.allowed_root) else {
            return Err(if request.path == request.allowed_root {
                SandboxError::failed(
                    OP,
                    FailureReason::NotRegularFile,
                    format!("{} is the root", request.path),
                )
            } else {
                SandboxError::failed(
                    OP,
                    FailureReason::OutsideRoot,
                    format!("{} is not below {}", request.path, request.allowed_root),
                )
            });
        };
        let max = request.maximum_bytes;
        let path = request.path.clone();
        match blocking(OP, move || read_contained(&host, &rel, max)).await? {
            Ok(content) => Ok(SandboxFileContent {
                path: request.path,
                content_base64: Bytes(content),
            }),
            Err(ReadFailure::TooLarge { size_bytes }) => Err(SandboxError::SandboxFileTooLarge {
                path,
                limit_bytes: max,
                actual_bytes: size_bytes,
            }),
            Err(ReadFailure::Contained(e)) => Err(contained_error(OP, &path, e)),
        }
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        const OP: &str = op::SNAPSHOT;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.request.profile.retention != RetentionMode::Durable {
            return Err(SandboxError::SandboxSnapshotForbidden {
                instance_id: rec.instance_id,
                retention: rec.request.profile.retention,
            });
        }
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state.as_str()));
        }
        let snapshot = inner.capture(OP, &rec, request.expires_at).await?;
        Ok(Handoff {
            rollback: Arc::new(SnapshotRollback {
                inner: inner.clone(),
                operation: OP,
                snapshot_id: snapshot.snapshot_id.clone(),
            }),
            value: snapshot,
        })
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        const OP: &str = op::CLONE_SNAPSHOT;
        let inner = &self.inner;
        let source = inner.load_snapshot(OP, &request.source.snapshot_id)?;
        if source.snapshot != request.source {
            return Err(SandboxError::invalid_request(
                OP,
                "source",
                format!("{:?}", source.snapshot),
                format!("{:?}", request.source),
            ));
        }
        let cid = store::fresh_id(SNAPSHOT_PREFIX, &inner.scope);
        let rollback = Arc::new(SnapshotRollback {
            inner: inner.clone(),
            operation: OP,
            snapshot_id: cid.clone(),
        });
        match inner
            .clone_snapshot_into(&source, &request.target_session_id, &cid)
            .await
        {
            Ok(clone) => Ok(Handoff {
                value: clone,
                rollback,
            }),
            Err(e) => {
                let _ = rollback.rollback().await;
                Err(e)
            }
        }
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        const OP: &str = op::RELEASE;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state.as_str()));
        }
        match (rec.request.profile.retention, request.snapshot_expires_at) {
            (RetentionMode::Durable, Some(expires_at)) => {
                let snapshot = inner.capture(OP, &rec, expires_at).await?;
                let rollback = Arc::new(SnapshotRollback {
                    inner: inner.clone(),
                    operation: OP,
                    snapshot_id: snapshot.snapshot_id.clone(),
                });
                if let Err(e) = inner.destroy_instance(OP, &rec.instance_id).await {
                    let _ = rollback.rollback().await;
                    return Err(e);
                }
                Ok(Handoff {
                    value: ReleaseDisposition::Released { snapshot },
                    rollback,
                })
            }
            (RetentionMode::EphemeralZdr, None) => {
                inner.destroy_instance(OP, &rec.instance_id).await?;
                Ok(Handoff {
                    value: ReleaseDisposition::Destroyed,
                    rollback: Arc::new(NothingToUndo),
                })
            }
            (RetentionMode::Durable, None) => Err(SandboxError::invalid_request(
                OP,
                "snapshot_expires_at",
                "a retention deadline for a durable release",
                "absent",
            )),
            (RetentionMode::EphemeralZdr, Some(t)) => Err(SandboxError::invalid_request(
                OP,
                "snapshot_expires_at",
                "absent for an ephemeral_zdr release",
                t.to_string(),
            )),
        }
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        const OP: &str = op::RESUME;
        let inner = &self.inner;
        inner.admit(OP, &request.request)?;
        let source = inner.load_snapshot(OP, &request.snapshot.snapshot_id)?;
        if source.snapshot != request.snapshot {
            return Err(SandboxError::invalid_request(
                OP,
                "snapshot",
                format!("{:?}", source.snapshot),
                format!("{:?}", request.snapshot),
            ));
        }
        let id = store::fresh_id(INSTANCE_PREFIX, &inner.scope);
        let rollback = Arc::new(InstanceRollback {
            inner: inner.clone(),
            operation: OP,
            instance_id: id.clone(),
        });
        match inner.resume_into(&request.request, &source, &id).await {
            Ok(rec) => Ok(Handoff {
                value: instance_of(&rec.request, &id, InstanceState::Active),
                rollback,
            }),
            Err(e) => {
                let _ = rollback.rollback().await;
                Err(e)
            }
        }
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.inner
            .destroy_instance(op::DESTROY, &request.instance_id)
            .await
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.inner
            .destroy_snapshot_inner(op::DESTROY_SNAPSHOT, &request.snapshot_id)
            .await
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        const OP: &str = op::CLEANUP;
        let inner = &self.inner;
        let inv = inner.inventory().await?;
        // The contract's rule; unknown times count as orphaned and expired.
        let result = request.would_sweep(&crate::members::candidates(&inv));
        // Instances first (a container may be built from a snapshot's
        // image), then snapshots. Within a phase a few run at once; every
        // object is attempted, and the first failure is reported after.
        type Sweep<'a> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), SandboxError>> + Send + 'a>,
        >;
        let mut instance_sweeps: Vec<Sweep<'_>> = Vec::new();
        for id in &result.instances {
            if inv.instances_on_daemon.contains(id) {
                instance_sweeps.push(Box::pin(inner.destroy_instance(OP, id)));
            } else {
                instance_sweeps.push(Box::pin(inner.destroy_instance_record(OP, id)));
            }
        }
        let snapshot_sweeps: Vec<Sweep<'_>> = result
            .snapshots
            .iter()
            .map(|id| Box::pin(inner.destroy_snapshot_inner(OP, id)) as Sweep<'_>)
            .collect();
        let mut first_failure = None;
        for phase in [instance_sweeps, snapshot_sweeps] {
            let outcomes: Vec<Result<(), SandboxError>> = futures_util::stream::iter(phase)
                .buffer_unordered(SWEEP_CONCURRENCY)
                .collect()
                .await;
            for outcome in outcomes {
                if let Err(e) = outcome {
                    first_failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_failure {
            return Err(e);
        }
        Ok(result)
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        Some(self)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        Some(self)
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        Some(self)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        Some(self)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        Some(self)
    }

    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        Some(self)
    }
}

impl Inner {
    /// The host directory of the mount or output tree whose root is
    /// exactly `allowed_root`.
    fn root_dir(
        &self,
        operation: &str,
        rec: &InstanceRecord,
        allowed_root: &str,
    ) -> Result<PathBuf, SandboxError> {
        match store::home_at(&rec.request, allowed_root) {
            Some(home) => Ok(self.host_dir(&rec.instance_id, home)),
            None => Err(SandboxError::failed(
                operation,
                FailureReason::PathNotAdmitted,
                format!("{allowed_root} is neither a mount root nor the output tree"),
            )),
        }
    }

    fn listing(
        &self,
        operation: &'static str,
        rec: &InstanceRecord,
        root: &str,
        max_entries: u32,
    ) -> impl std::future::Future<Output = Result<Vec<contained::Leaf>, SandboxError>> + Send + 'static
    {
        let host = self.root_dir(operation, rec, root);
        let root = root.to_owned();
        async move {
            let host = host?;
            // The walk bound counts directories too; listings are bounded
            // again by their leaves below.
            let bound = (max_entries.min(MAX_LIST_ENTRIES) as usize)
                .saturating_mul(4)
                .max(1024);
            blocking(operation, move || {
                let fd = contained::open_root(&host)?;
                // A tree the workload changes under the walk (an entry gone
                // between listing and opening) fails the walk: try again a
                // few times, then fail closed.
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match contained::walk_leaves(std::os::fd::AsFd::as_fd(&fd), bound) {
                        Err(ContainedError::Io { .. }) if attempt < LISTING_ATTEMPTS => continue,
                        other => return other,
                    }
                }
            })
            .await?
            .map_err(|e| match e {
                ContainedError::TooManyEntries { .. } => too_many(operation, None, max_entries),
                other => contained_error(operation, &root, other),
            })
        }
    }
}

fn too_many(operation: &str, found: Option<usize>, max: u32) -> SandboxError {
    SandboxError::invalid_request(
        operation,
        "max_entries",
        match found {
            Some(n) => format!("at least {n} (the listing's size)"),
            None => "more than the listing's size".to_owned(),
        },
        max.to_string(),
    )
}

fn join(root: &str, rel: &Path) -> String {
    format!("{root}/{}", rel.to_string_lossy())
}

#[async_trait]
impl ReadFilesMember for DockerProvider {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        const OP: &str = op::READ_FILES;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        let host = inner.root_dir(OP, &rec, &request.allowed_root)?;
        let root = request.allowed_root.clone();
        let files = request.files;
        blocking(OP, move || -> Result<ReadFilesResult, SandboxError> {
            let mut out = Vec::with_capacity(files.len());
            for f in files {
                let path = f.path;
                let Some(rel) = store::relative_to(&path, &root) else {
                    out.push(if path == root {
                        ReadFileOutcome::NotRegularFile { path }
                    } else {
                        ReadFileOutcome::OutsideRoot { path }
                    });
                    continue;
                };
                out.push(match read_contained(&host, &rel, f.maximum_bytes) {
                    Ok(content) => ReadFileOutcome::Read {
                        path,
                        content_base64: Bytes(content),
                    },
                    Err(ReadFailure::TooLarge { size_bytes }) => {
                        ReadFileOutcome::TooLarge { path, size_bytes }
                    }
                    Err(ReadFailure::Contained(e)) => match e {
                        ContainedError::OutsideRoot { .. } | ContainedError::InvalidPath { .. } => {
                            ReadFileOutcome::OutsideRoot { path }
                        }
                        ContainedError::NotFound { .. } => ReadFileOutcome::NotFound { path },
                        ContainedError::NotRegularFile { .. } => {
                            ReadFileOutcome::NotRegularFile { path }
                        }
                        other => return Err(contained_error(OP, &path, other)),
                    },
                });
            }
            Ok(ReadFilesResult { files: out })
        })
        .await?
    }
}

#[async_trait]
impl ListDirMember for DockerProvider {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        const OP: &str = op::LIST_DIR;
        let rec = self.inner.load_instance(OP, &request.instance_id)?;
        let leaves = self
            .inner
            .listing(OP, &rec, &request.root, request.max_entries)
            .await?;
        let entries: Vec<DirEntry> = leaves
            .into_iter()
            .filter_map(|l| match l.kind {
                LeafKind::RegularFile {
                    size_bytes, sha256, ..
                } => Some(DirEntry {
                    path: join(&request.root, &l.path),
                    size_bytes,
                    sha256: Digest::from_sha256_bytes(sha256),
                }),
                _ => None,
            })
            .collect();
        if entries.len() > request.max_entries as usize {
            return Err(too_many(OP, Some(entries.len()), request.max_entries));
        }
        Ok(ListDirResult { entries })
    }
}

#[async_trait]
impl ListProjectDirMember for DockerProvider {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        const OP: &str = op::LIST_PROJECT_DIR;
        let rec = self.inner.load_instance(OP, &request.instance_id)?;
        let leaves = self
            .inner
            .listing(OP, &rec, &request.root, request.max_entries)
            .await?;
        let entries: Vec<ProjectEntry> = leaves
            .into_iter()
            .filter_map(|l| {
                let kind = match l.kind {
                    LeafKind::RegularFile {
                        size_bytes, sha256, ..
                    } => ProjectEntryKind::Regular {
                        size_bytes,
                        sha256: Digest::from_sha256_bytes(sha256),
                    },
                    LeafKind::Symlink { target } => ProjectEntryKind::Symlink {
                        target: target.to_string_lossy().into_owned(),
                    },
                    // An empty directory holds no file: not a leaf here.
                    LeafKind::EmptyDirectory => return None,
                    LeafKind::CharDevice | LeafKind::BlockDevice => ProjectEntryKind::Device,
                    LeafKind::Socket => ProjectEntryKind::Socket,
                    LeafKind::Fifo => ProjectEntryKind::Fifo,
                    LeafKind::Other => ProjectEntryKind::Other,
                };
                Some(ProjectEntry {
                    path: join(&request.root, &l.path),
                    kind,
                })
            })
            .collect();
        if entries.len() > request.max_entries as usize {
            return Err(too_many(OP, Some(entries.len()), request.max_entries));
        }
        Ok(ListProjectDirResult {
            entries,
            complete: true,
        })
    }
}

#[async_trait]
impl OpenProcessMember for DockerProvider {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        const OP: &str = op::OPEN_PROCESS;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state.as_str()));
        }
        let token = inner.reserve_process(&rec.instance_id)?;
        let mut argv = Vec::with_capacity(request.arguments.len() + 1);
        argv.push(request.executable.clone());
        argv.extend(request.arguments.iter().cloned());
        let env: Vec<String> = request
            .environment
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let started_at = inner.clock.now();
        let exec = daemon::exec_streaming(
            &inner.docker,
            &container_name(&rec.instance_id),
            &argv,
            &env,
            Some(&request.working_directory),
            None,
        )
        .await;
        let exec = match exec {
            Ok(e) => e,
            Err(e) => {
                inner.release_process(&rec.instance_id, token);
                return Err(daemon_error(OP, &e));
            }
        };
        let evidence = SandboxProcessEvidence {
            provider: PROVIDER_ID.to_owned(),
            instance_id: rec.instance_id.clone(),
            session_id: rec.request.session_id.clone(),
            placement: rec.request.placement,
            tier: rec.request.target,
            network_mode: rec.request.profile.network_policy.mode(),
            executable: request.executable,
            started_at,
        };
        Ok(crate::process::wrap(
            inner.clone(),
            rec.instance_id,
            token,
            exec,
            evidence,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_valid_and_stable() {
        let e = envelope();
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        assert_eq!(e.max_mounts, 64);
        assert_eq!(e.network_modes, vec![NetworkMode::None]);
        assert!(e.snapshots && e.snapshot_clone && e.list_dir && e.physically_contained_file_read);
        assert!(!e.active_mount_write);
    }

    #[test]
    fn scopes() {
        assert!(scope_ok("conf-123-4"));
        for bad in ["", "A", "a b", "a/b", &"x".repeat(65)] {
            assert!(!scope_ok(bad), "{bad}");
        }
    }
}
