//! Docker provider for the checkfu sandbox seam.
//!
//! [`DockerProvider`] implements the contract's
//! [`SandboxProvider`](checkfu_sandbox_contract::SandboxProvider) over the
//! local Docker daemon, with the optional readFiles, listDir,
//! listProjectDir and openProcess members. Objects, labels, the workload
//! user, snapshots and containment are described on [`DockerProvider`]'s
//! module (`src/provider/mod.rs`).
//!
//! # Public API
//!
//! * the provider: [`DockerProvider`], [`DockerConfig`] (with the warm
//!   pool's size; [`PoolStatus`] its counts),
//!   [`DockerProviderError`], [`Inventory`], [`ObjectTimes`],
//!   [`host_platform`], [`envelope`] and the identity constants
//!   ([`PROVIDER_ID`], [`PROVIDER_REVISION`], [`MATERIALIZATION_REVISION`]);
//! * [`labels`]: the `checkfu.sandbox.*` label keys and values every object
//!   carries, for callers that list or sweep the daemon themselves;
//! * [`fixture`]: the offline `FROM scratch` busybox fixture image
//!   ([`fixture::ensure_fixture`], [`fixture::resolve_image`]), with
//!   [`locate_busybox`] finding a static busybox;
//! * [`daemon`]: the thin helpers over bollard the provider is built on
//!   (containers, bounded and streaming execs, process-group kill);
//! * [`archive_dir`] / [`extract_archive`]: snapshot archives of host
//!   directories;
//! * [`egress`]: allowlist enforcement (an nftables rule set loaded into
//!   an instance's network namespace from the host), its configuration
//!   and the host probe deciding whether `allowlist` is offered;
//! * [`testnet`]: listeners and a control dialer on a private network, for
//!   the egress conformance cases;
//! * [`Layout`]: where the state directory keeps records and host
//!   directories.
//!
//! Contained reads and writes on host directories come from
//! [`checkfu_sandbox_contained`].

mod active_write;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod daemon;
pub mod egress;
pub mod fixture;
mod members;
mod process;
mod provider;
mod store;
pub mod testnet;

pub use active_write::{ActiveWriteRecovery, ActiveWriteStep, StepHook};
pub use bollard;
pub use bollard::Docker;
pub use checkfu_sandbox_hostfs::archive::{
    archive_dir, extract_archive, extract_archive_keeping_links, ArchiveError, ArchiveLimits,
    ArchiveSummary, ExtractSummary,
};
pub use checkfu_sandbox_hostfs::busybox::{locate_busybox, BusyboxError, BUSYBOX_PACKAGE};
pub use provider::{
    envelope, host_platform, parse_pool_size, DockerConfig, DockerProvider, DockerProviderError,
    ExecPath, ExecRoute, Inventory, ObjectTimes, PoolShapeStatus, PoolStatus,
    COMMIT_HOLE_SLACK_BYTES, DEFAULT_POOL_SIZE, EXEC_PATH_ENV, MATERIALIZATION_REVISION,
    MAX_POOL_SIZE, POOL_ENV, PROVIDER_ID, PROVIDER_REVISION,
};
pub use store::Layout;

/// The labels every container and image of this provider carries
/// (`checkfu.sandbox.*`), and the values of [`labels::LABEL_KIND`].
pub mod labels {
    pub use crate::provider::{
        INSTANCE_REPOSITORY, KIND_INSTANCE, KIND_SNAPSHOT, LABEL_CREATED_AT, LABEL_EXPIRES_AT,
        LABEL_INSTANCE_ID, LABEL_KIND, LABEL_PROFILE_DIGEST, LABEL_PROFILE_ID,
        LABEL_PROFILE_VERSION, LABEL_PROVIDER, LABEL_SCOPE, LABEL_SESSION_ID, LABEL_SNAPSHOT_ID,
        LABEL_SOURCE_INSTANCE_ID, LABEL_WORKSPACE_ID, SNAPSHOT_REPOSITORY,
    };
    pub use crate::provider::{KIND_POOL, LABEL_POOL_OWNER, LABEL_POOL_SHAPE, LABEL_POOL_SLOT};
}
