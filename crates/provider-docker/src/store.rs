//! The provider's state directory: one record file per instance and per
//! snapshot, the host directories bind-mounted into containers, and the
//! snapshot archives.
//!
//! # Layout
//!
//! ```text
//! <state_dir>/instances/<instance_id>/instance.json    InstanceRecord
//! <state_dir>/instances/<instance_id>/mounts/<index>/  host dir of request.mounts[index]
//! <state_dir>/instances/<instance_id>/outputs/         host dir of /mnt/session/outputs
//! <state_dir>/snapshots/<snapshot_id>/snapshot.json    SnapshotRecord
//! <state_dir>/snapshots/<snapshot_id>/mounts/<index>.tar
//! <state_dir>/snapshots/<snapshot_id>/outputs.tar
//! ```
//!
//! Only `mounts/<index>` and `outputs` are ever bind-mounted; the record
//! files sit beside them, out of the workload's reach, so they are read and
//! written with ordinary path-based calls. Everything *inside* a bound
//! directory is workload-controlled and is only touched through descriptor
//! based, contained operations ([`checkfu_sandbox_contained`]).
//!
//! The records are the provider's on-disk format (revision
//! [`RECORD_REVISION`]), not a wire type: they let a freshly constructed
//! provider (a restarted Runner) find every instance, including ones still
//! in `provisioning` that have no container yet, with no side database.

use checkfu_sandbox_contract::{
    InstanceState, SandboxProvisionRequest, SandboxSnapshot, Timestamp,
};
use serde::{Deserialize, Serialize};

pub use checkfu_sandbox_hostfs::store::*;

/// What the provider keeps about one instance, written at provision (the
/// container only exists from activation on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceRecord {
    /// [`RECORD_REVISION`].
    pub record_revision: u32,
    /// The provider scope that owns the instance.
    pub scope: String,
    /// The instance id.
    pub instance_id: String,
    /// When the provider allocated it (the provider's clock).
    pub created_at: Timestamp,
    /// `provisioning` until the container started.
    pub state: InstanceState,
    /// The provision (or resume) request, echoed by every returned instance.
    pub request: SandboxProvisionRequest,
    /// The image the container runs (`sha256:<id>` or a tag).
    pub image: String,
    /// An image reference this instance owns and removes when destroyed
    /// (the per-instance tag of a resumed snapshot image).
    #[serde(default)]
    pub owned_image: Option<String>,
    /// When resumed: the snapshot it was rehydrated from.
    #[serde(default)]
    pub resumed_from: Option<String>,
    /// The id of the warm-pool container this instance claimed at
    /// provision (started already; activation starts nothing). `None`: the
    /// container `checkfu-<instance id>` is created at activation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_container: Option<String>,
}

/// What the provider keeps about one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRecord {
    /// [`RECORD_REVISION`].
    pub record_revision: u32,
    /// The provider scope that owns the snapshot.
    pub scope: String,
    /// The snapshot reference as returned.
    pub snapshot: SandboxSnapshot,
    /// The image tag holding the committed container file system.
    pub image: String,
    /// The archived mounts.
    pub mounts: Vec<ArchivedMount>,
    /// Archive of the output tree, relative to the snapshot directory.
    pub outputs_archive: String,
}

impl checkfu_sandbox_hostfs::records::StoredInstance for InstanceRecord {
    fn scope(&self) -> &str {
        &self.scope
    }

    fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn created_at(&self) -> Timestamp {
        self.created_at
    }

    fn set_state(&mut self, state: InstanceState) {
        self.state = state;
    }
}

impl checkfu_sandbox_hostfs::records::StoredSnapshot for SnapshotRecord {
    fn scope(&self) -> &str {
        &self.scope
    }

    fn snapshot(&self) -> &SandboxSnapshot {
        &self.snapshot
    }
}
