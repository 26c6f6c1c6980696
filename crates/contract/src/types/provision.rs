//! The provision request and the instance it returns (spec "provision",
//! "activate"; "Identity is cross-checked"): mounts, the profile and its
//! network policy, materialization.

use serde::{Deserialize, Serialize};

use crate::capabilities::{NetworkMode, PackageManager, Placement, Platform, RetentionMode, Tier};
use crate::digest::{Digest, ImageReference};
use crate::timestamp::Timestamp;

/// An instance's lifecycle state (spec "Lifecycle and states").
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum InstanceState {
    /// Allocated; mounts and the output tree accept writes.
    Provisioning,
    /// Sealed and runnable.
    Active,
}

impl InstanceState {
    /// The snake_case wire name.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

/// Access mode of a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MountAccess {
    /// Sealed read-only at activation.
    ReadOnly,
    /// Writable by the workload after activation.
    ReadWrite,
}

/// A declared mount: a directory the provider creates and the Runner stages
/// files into during provisioning.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxMount {
    /// Absolute, normalized path in the sandbox (no `..`, no empty or `.`
    /// components, no NUL, no trailing `/`), outside every reserved root.
    pub path: String,
    /// Access after activation.
    pub access: MountAccess,
}

/// A network destination for an allowlist policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NetworkDestination {
    /// Host name or IP literal.
    pub host: String,
    /// TCP port, 1..=65535.
    pub port: u16,
}

/// A profile's network policy (DESIGN D11).
///
/// Wire form: `{"mode": "none"}` or `{"mode": "allowlist", "destinations":
/// [...]}`; any other member is refused, for the unit mode too (decoded
/// through [`NetworkPolicyWire`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "mode",
    rename_all = "snake_case",
    deny_unknown_fields,
    from = "NetworkPolicyWire"
)]
pub enum NetworkPolicy {
    /// Loopback only.
    None,
    /// Only these destinations.
    Allowlist {
        /// The reachable destinations.
        destinations: Vec<NetworkDestination>,
    },
}

/// The decoding shape of [`NetworkPolicy`].
///
/// serde accepts unknown members beside the tag of an internally tagged
/// unit variant even under `deny_unknown_fields`; an empty struct variant
/// refuses them, so `{"mode": "none", "extra": 1}` is a decode error.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "NetworkPolicy"))]
pub enum NetworkPolicyWire {
    /// Loopback only.
    None {},
    /// Only these destinations.
    Allowlist {
        /// The reachable destinations.
        destinations: Vec<NetworkDestination>,
    },
}

impl From<NetworkPolicyWire> for NetworkPolicy {
    fn from(w: NetworkPolicyWire) -> Self {
        match w {
            NetworkPolicyWire::None {} => NetworkPolicy::None,
            NetworkPolicyWire::Allowlist { destinations } => {
                NetworkPolicy::Allowlist { destinations }
            }
        }
    }
}

impl NetworkPolicy {
    /// The policy's mode.
    pub fn mode(&self) -> NetworkMode {
        match self {
            NetworkPolicy::None => NetworkMode::None,
            NetworkPolicy::Allowlist { .. } => NetworkMode::Allowlist,
        }
    }
}

/// Resource limits of a profile. Absent members are unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// CPU in thousandths of a core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u32>,
    /// Memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Most processes of the workload at once (a provider's own supervising
    /// processes, which run no workload code, are not counted; decision 049).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    /// Disk in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
}

/// A package to materialize into the derived image.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PackageSpec {
    /// The package manager.
    pub manager: PackageManager,
    /// Package name.
    pub name: String,
    /// Exact version.
    pub version: String,
}

/// A sandbox profile: what a Run asks of its sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProfile {
    /// Profile id.
    pub profile_id: String,
    /// Profile version, counting from 1.
    pub profile_version: u32,
    /// Digest of the profile's derived image.
    pub profile_digest: Digest,
    /// Retention mode.
    pub retention: RetentionMode,
    /// Network policy.
    pub network_policy: NetworkPolicy,
    /// Longest command the profile admits, in seconds (>= 1).
    pub max_duration_seconds: u32,
    /// Resource limits.
    #[serde(default)]
    pub resources: Resources,
    /// Packages to materialize.
    #[serde(default)]
    pub packages: Vec<PackageSpec>,
}

/// What the Runner asks a provider to allocate (the identity every returned
/// instance must echo; spec "Identity is cross-checked").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProvisionRequest {
    /// The selected adapter's provider id.
    pub provider: String,
    /// Placement.
    pub placement: Placement,
    /// Workspace id.
    pub workspace_id: String,
    /// Session id.
    pub session_id: String,
    /// Run id.
    pub run_id: String,
    /// Attempt id.
    pub attempt_id: String,
    /// Lease id.
    pub lease_id: String,
    /// Lease epoch (fencing token).
    pub lease_epoch: u64,
    /// Isolation tier.
    pub target: Tier,
    /// The profile.
    pub profile: SandboxProfile,
    /// Platform.
    pub platform: Platform,
    /// Pinned root image.
    pub root_image: ImageReference,
    /// Declared mounts (at most 64).
    #[cfg_attr(feature = "schema", schemars(length(max = 64)))]
    pub mounts: Vec<SandboxMount>,
    /// Hard expiry of the instance.
    pub expires_at: Timestamp,
}

/// The materialization an instance reports: five of the 21 identity checks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Materialization {
    /// Must equal `profile.profile_digest`.
    pub profile_digest: Digest,
    /// Must equal `root_image`.
    pub image_reference: ImageReference,
    /// Must equal the digest suffix of `root_image` (derived, not reported by
    /// an image store).
    pub image_digest: Digest,
    /// Must equal the envelope's `provider_revision`.
    pub provider_revision: String,
    /// Must equal the envelope's `materialization_revision`.
    pub materialization_revision: String,
}

/// An instance as a provider returns it from provision, activate and resume.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxInstance {
    /// Provider-assigned id, non-empty, at most 128 bytes.
    pub instance_id: String,
    /// Echo of the request.
    pub provider: String,
    /// Echo of the request.
    pub placement: Placement,
    /// `provisioning` after provision, `active` after activate and resume.
    pub state: InstanceState,
    /// Echo of the request.
    pub workspace_id: String,
    /// Echo of the request.
    pub session_id: String,
    /// Echo of the request.
    pub run_id: String,
    /// Echo of the request.
    pub attempt_id: String,
    /// Echo of the request.
    pub lease_id: String,
    /// Echo of the request.
    pub lease_epoch: u64,
    /// Echo of the request.
    pub target: Tier,
    /// Echo of the request.
    pub profile: SandboxProfile,
    /// Echo of the request.
    pub platform: Platform,
    /// Echo of the request.
    pub root_image: ImageReference,
    /// Echo of the request.
    pub mounts: Vec<SandboxMount>,
    /// Always `/mnt/session/outputs`.
    pub output_path: String,
    /// Echo of the request, unchanged.
    pub expires_at: Timestamp,
    /// Derived from the request and the envelope.
    pub materialization: Materialization,
}

/// activate: seal staged mounts and make the instance runnable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ActivateRequest {
    /// The instance, in `provisioning`.
    pub instance_id: String,
}
