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
//!   ([`checkfu_sandbox_contained`]): a symlink the
//!   workload plants, even one it keeps swapping, never makes the host read
//!   or write outside that directory.
//! * **Snapshots.** A snapshot is a commit of the container (taken while
//!   it is paused) plus an uncompressed tar of every mount's host directory
//!   and of the output tree, in `snapshots/<id>/`. The tars are
//!   sparse-aware; a commit writes the writable layer densely, so before
//!   it the layer's holes (apparent size over allocated bytes in the
//!   graph driver's upper directory, where this host can read it) and its
//!   apparent size (`SizeRw`, against the snapshot's host-byte bound) are
//!   checked and refused as `SandboxFileTooLarge{path: /}`
//!   ([`commit_bound`]; [`checkfu_sandbox_hostfs::archive::write_archives`]
//!   bounds the tars). A clone is a commit of a
//!   never-started container created from the source image (its own image
//!   and labels) plus copies of the archives. Custody is `runner`: the
//!   bytes live on this machine.
//! * **Network.** A `none` profile's container runs with network mode
//!   `none`. An `allowlist` profile's container joins the egress network
//!   with an nftables rule set in its namespace, loaded from the host
//!   before the instance is handed out ([`crate::egress`]); `allowlist` is
//!   offered only where the host can do that.
//! * **Warm pool.** Up to [`DockerConfig::pool_size`] containers per shape
//!   (image, limits, network mode, mount plan) are created and started
//!   ahead of time; provision claims one and activation starts nothing.
//!   A pooled container serves one instance and goes with it ([`pool`]).
//!
//! # Files
//!
//! [`inner`] holds the provider object and its shared state; [`labels`],
//! [`envelope`] and [`errors`] the vocabulary; [`instances`],
//! [`snapshots`] (with [`commit_bound`]), [`sweep`], [`execute`], [`reads`], [`open_process`]
//! and [`pool`] one concern each; [`sandbox`] wires the contract's required members to
//! them, most through hostfs's shared flows ([`lifecycle`] and [`host`]
//! are this provider as those flows see it; hostfs's rollbacks undo
//! allocations).

mod commit_bound;
mod egress;
mod envelope;
mod errors;
mod execute;
mod host;
mod host_exec;
mod inner;
mod instances;
mod labels;
mod lifecycle;
mod open_process;
mod pool;
mod reads;
mod sandbox;
mod snapshots;
mod sweep;

pub use commit_bound::COMMIT_HOLE_SLACK_BYTES;
pub use envelope::{envelope, host_platform};
pub use host_exec::{ExecPath, ExecRoute, EXEC_PATH_ENV};
pub use inner::{
    parse_pool_size, DockerConfig, DockerProvider, DockerProviderError, MATERIALIZATION_REVISION,
    PROVIDER_ID, PROVIDER_REVISION,
};
pub(crate) use labels::container_name;
pub use labels::{
    INSTANCE_REPOSITORY, KIND_INSTANCE, KIND_SNAPSHOT, LABEL_CREATED_AT, LABEL_EXPIRES_AT,
    LABEL_INSTANCE_ID, LABEL_KIND, LABEL_PROFILE_DIGEST, LABEL_PROFILE_ID, LABEL_PROFILE_VERSION,
    LABEL_PROVIDER, LABEL_SCOPE, LABEL_SESSION_ID, LABEL_SNAPSHOT_ID, LABEL_SOURCE_INSTANCE_ID,
    LABEL_WORKSPACE_ID, SNAPSHOT_REPOSITORY,
};
pub use pool::{
    PoolShapeStatus, PoolStatus, DEFAULT_POOL_SIZE, KIND_POOL, LABEL_POOL_OWNER, LABEL_POOL_SHAPE,
    LABEL_POOL_SLOT, MAX_POOL_SIZE, POOL_ENV,
};
pub use sweep::{Inventory, ObjectTimes};
