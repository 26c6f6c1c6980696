//! snapshot, cloneSnapshot, release, resume, destroy, destroySnapshot and
//! cleanup (spec "Lifecycle and states", "Cleanup and pinning").

use serde::{Deserialize, Serialize};

use crate::capabilities::Placement;
use crate::digest::Digest;
use crate::timestamp::Timestamp;

use super::provision::SandboxProvisionRequest;
// For a doc link only.
#[cfg(doc)]
use super::provision::NetworkPolicyWire;

/// snapshot: capture a durable instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// The instance, in `active`, durable.
    pub instance_id: String,
    /// Retention deadline the snapshot must carry exactly.
    pub expires_at: Timestamp,
}

/// A snapshot reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxSnapshot {
    /// Provider-assigned id, non-empty, at most 128 bytes.
    pub snapshot_id: String,
    /// The provider id.
    pub provider: String,
    /// Placement.
    pub placement: Placement,
    /// The instance it was captured from.
    pub source_instance_id: String,
    /// Workspace id.
    pub workspace_id: String,
    /// Session id (the target Session for a clone).
    pub session_id: String,
    /// Profile id.
    pub profile_id: String,
    /// Profile version.
    pub profile_version: u32,
    /// Profile digest.
    pub profile_digest: Digest,
    /// When it was captured.
    pub created_at: Timestamp,
    /// Retention deadline, exactly as requested.
    pub expires_at: Timestamp,
}

/// cloneSnapshot: a physical clone into another Session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CloneSnapshotRequest {
    /// The source snapshot.
    pub source: SandboxSnapshot,
    /// The target Session.
    pub target_session_id: String,
}

/// release: end an active instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// For durable profiles: the retention deadline of the settled snapshot.
    /// Absent for ZDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_expires_at: Option<Timestamp>,
}

/// How release settled.
///
/// Wire form: `{"disposition": "released", "snapshot": {...}}` or
/// `{"disposition": "destroyed"}`; any other member is refused (decoded
/// through [`ReleaseDispositionWire`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "disposition",
    rename_all = "snake_case",
    deny_unknown_fields,
    from = "ReleaseDispositionWire"
)]
#[allow(clippy::large_enum_variant)] // a wire value settled once per release; boxing would change its public shape
pub enum ReleaseDisposition {
    /// Durable: a settled snapshot.
    Released {
        /// The snapshot.
        snapshot: SandboxSnapshot,
    },
    /// ZDR: every trace destroyed.
    Destroyed,
}

/// The decoding shape of [`ReleaseDisposition`]: the unit variant as an
/// empty struct variant so that unknown members beside the tag are refused
/// (see [`NetworkPolicyWire`]).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "disposition", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ReleaseDisposition"))]
#[allow(clippy::large_enum_variant)] // a wire value settled once per release; boxing would change its public shape
pub enum ReleaseDispositionWire {
    /// Durable: a settled snapshot.
    Released {
        /// The snapshot.
        snapshot: SandboxSnapshot,
    },
    /// ZDR: every trace destroyed.
    Destroyed {},
}

impl From<ReleaseDispositionWire> for ReleaseDisposition {
    fn from(w: ReleaseDispositionWire) -> Self {
        match w {
            ReleaseDispositionWire::Released { snapshot } => {
                ReleaseDisposition::Released { snapshot }
            }
            ReleaseDispositionWire::Destroyed {} => ReleaseDisposition::Destroyed,
        }
    }
}

/// resume: rehydrate a snapshot into a fresh active instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The identity the new instance must echo.
    pub request: SandboxProvisionRequest,
    /// The snapshot to rehydrate.
    pub snapshot: SandboxSnapshot,
}

/// destroy: idempotent teardown of one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DestroyRequest {
    /// The instance (any state; unknown ids settle as success).
    pub instance_id: String,
}

/// destroySnapshot: idempotent teardown of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DestroySnapshotRequest {
    /// The snapshot (unknown ids settle as success).
    pub snapshot_id: String,
}

/// cleanup: sweep orphans (spec "Cleanup and pinning").
///
/// An instance is swept when it was created before `orphaned_before` or its
/// `expires_at` is at or before `now`. A snapshot is swept when its
/// `expires_at` is at or before `now`, or when it is not pinned and was
/// created before `orphaned_before`: retention expiry always wins over a pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CleanupRequest {
    /// The sweep's clock.
    pub now: Timestamp,
    /// The orphan cutoff, not after `now`.
    pub orphaned_before: Timestamp,
    /// Snapshot ids exempt from the cutoff (not from their expiry), at most 1,024.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub pinned_snapshots: Vec<String>,
}

/// cleanup's result: the ids destroyed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CleanupResult {
    /// Instance ids destroyed.
    pub instances: Vec<String>,
    /// Snapshot ids destroyed.
    pub snapshots: Vec<String>,
}
