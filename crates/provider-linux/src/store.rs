//! The provider's state directory: one record file per instance and per
//! snapshot, the host directories bind-mounted into instances, each
//! instance's writable root layer, the snapshot archives and the image
//! store.
//!
//! # Layout
//!
//! ```text
//! <state_dir>/instances/<instance_id>/instance.json    InstanceRecord
//! <state_dir>/instances/<instance_id>/mounts/<index>/  host dir of request.mounts[index]
//!                                                      (no mounts/ without mounts)
//! <state_dir>/instances/<instance_id>/outputs/         host dir of /mnt/session/outputs
//! <state_dir>/instances/<instance_id>/upper/           writable root layer (overlay upper)
//! <state_dir>/instances/<instance_id>/work/            overlay work directory
//! <state_dir>/instances/<instance_id>/root/            where overlay is refused: a private
//!                                                      copy of the image, its own mount point
//! <state_dir>/overlay-root/                            the mount point of every overlay root
//! <state_dir>/snapshots/<snapshot_id>/snapshot.json    SnapshotRecord
//! <state_dir>/snapshots/<snapshot_id>/mounts/<index>.tar
//! <state_dir>/snapshots/<snapshot_id>/outputs.tar
//! <state_dir>/snapshots/<snapshot_id>/rootfs.tar       the writable root layer
//! <state_dir>/images/                                  the OCI image store (crate::image)
//! ```
//!
//! Only `mounts/<index>`, `outputs` and the root are ever mounted into an
//! instance (and only inside its own mount namespace: every overlay root
//! is mounted on the same empty `overlay-root/`, each in its instance's
//! namespace after the init made its mount tree private, so the host's
//! stays empty and an instance needs no mount point of its own); the record
//! files sit beside them, out of the workload's reach, so they are read and
//! written with ordinary path-based calls. Everything *inside* a bound
//! directory is workload-controlled and is only touched through descriptor
//! based, contained operations ([`checkfu_sandbox_contained`]).
//!
//! The records are the provider's on-disk format (revision
//! [`RECORD_REVISION`]), not a wire type: they let a freshly constructed
//! provider (a restarted Runner) find every instance, including ones still
//! in `provisioning` that have no init yet, with no side database.

use checkfu_sandbox_contract::{
    InstanceState, SandboxProvisionRequest, SandboxSnapshot, Timestamp,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use checkfu_sandbox_hostfs::store::*;

/// The host process that is pid 1 of an active instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitRecord {
    /// Host pid.
    pub pid: i32,
    /// Its start time (field 22 of `/proc/<pid>/stat`, clock ticks since
    /// boot), so that a reused pid is never taken for the init.
    pub start_ticks: u64,
}

/// How an instance's root file system is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootMode {
    /// Overlay of the shared unpacked image and `upper/`.
    Overlay,
    /// A private copy of the image in `root/`.
    Copy,
}

/// What the provider keeps about one instance, written at provision (the
/// init only exists from activation on).
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
    /// `provisioning` until the init started.
    pub state: InstanceState,
    /// The provision (or resume) request, echoed by every returned instance.
    pub request: SandboxProvisionRequest,
    /// The manifest digest (hex) of the root image in the image store.
    pub image: String,
    /// The image configuration's environment (`KEY=value`).
    pub image_env: Vec<String>,
    /// How the root is made.
    pub root_mode: RootMode,
    /// The init, once activated.
    #[serde(default)]
    pub init: Option<InitRecord>,
    /// When resumed: the snapshot it was rehydrated from.
    #[serde(default)]
    pub resumed_from: Option<String>,
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
    /// The manifest digest (hex) of the source's root image.
    pub image: String,
    /// The source's image environment.
    pub image_env: Vec<String>,
    /// Archive of the writable root layer, relative to the snapshot
    /// directory.
    pub rootfs_archive: String,
    /// The archived mounts.
    pub mounts: Vec<ArchivedMount>,
    /// Archive of the output tree, relative to the snapshot directory.
    pub outputs_archive: String,
}

/// The Linux provider's own entries of the state directory, beside the
/// shared ones of [`Layout`].
pub trait RootLayout {
    /// The writable root layer (overlay upper directory).
    fn upper_dir(&self, id: &str) -> PathBuf;
    /// The overlay work directory.
    fn work_dir(&self, id: &str) -> PathBuf;
    /// A private copy of the image, also its mount point (copy mode).
    fn root_dir(&self, id: &str) -> PathBuf;
    /// The mount point of every overlay root, each mounted in its own
    /// instance's mount namespace (overlay mode).
    fn overlay_root(&self) -> PathBuf;
    /// The image store.
    fn images(&self) -> PathBuf;
}

impl RootLayout for Layout {
    fn upper_dir(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("upper")
    }

    fn work_dir(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("work")
    }

    fn root_dir(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("root")
    }

    fn overlay_root(&self) -> PathBuf {
        self.root().join("overlay-root")
    }

    fn images(&self) -> PathBuf {
        self.root().join("images")
    }
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
