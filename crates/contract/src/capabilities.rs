//! The capability envelope, `SandboxProviderCapabilities` (spec "Optional
//! capabilities: absent versus wrong", "A minimum provider"; DESIGN D13).
//!
//! Every optional field defaults to its weakest legal value. Cross-field
//! rules are in [`crate::envelope`]: [`SandboxProviderCapabilities::violations`],
//! which the wire decoder and the runtime both apply.

use serde::{Deserialize, Serialize};

// For doc links only: the rules depend on this module, not the reverse.
#[cfg(doc)]
use crate::envelope::EnvelopeRule;

/// Where the sandbox runs relative to the Runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// On a platform the provider hosts.
    Hosted,
    /// On the Runner's own machine.
    Runner,
}

/// Isolation tier of an instance (the instance's `target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// An OCI container.
    Container,
    /// A micro virtual machine.
    Microvm,
}

/// Operating system of a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Os {
    /// Linux.
    Linux,
}

/// CPU architecture of a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    /// x86-64.
    Amd64,
    /// AArch64.
    Arm64,
}

/// An operating system and architecture pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Operating system.
    pub os: Os,
    /// CPU architecture.
    pub architecture: Architecture,
}

/// How the instance's image is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ImageMode {
    /// The profile's derived image over `root_image`.
    Profile,
}

/// A package manager the provider can materialize packages with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PackageManager {
    /// Debian's apt.
    Apt,
    /// Alpine's apk.
    Apk,
    /// Python's pip.
    Pip,
    /// Node's npm.
    Npm,
}

/// A network mode (DESIGN D11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Loopback only; no workload destination.
    None,
    /// Only the declared destinations.
    Allowlist,
}

/// A retention mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RetentionMode {
    /// Zero data retention: release destroys every trace; no snapshots.
    EphemeralZdr,
    /// Release settles a snapshot that resume can rehydrate.
    Durable,
}

/// Who holds snapshot bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SnapshotCustody {
    /// The Runner that took it: a clone needs that Runner alive.
    #[default]
    Runner,
    /// The provider's platform retains it independently of any Runner.
    Provider,
}

/// The provider's honest grade for enforcing an allowlist.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EgressCertification {
    /// No allowlist support.
    #[default]
    Unsupported,
    /// A filter that restricts destinations but is not a hard boundary.
    AdvisoryFilter,
    /// Destinations are enforced by the isolation boundary.
    Enforced,
}

/// Who enforces one isolation axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EnforcementLevel {
    /// The Runner enforces it.
    RunnerEnforced,
    /// The provider's platform enforces it.
    ProviderEnforced,
    /// Nobody enforces it.
    #[default]
    NotEnforced,
}

/// The nine enforcement axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Enforcement {
    /// Filesystem isolation.
    pub filesystem: EnforcementLevel,
    /// Process isolation.
    pub process: EnforcementLevel,
    /// Network isolation.
    pub network: EnforcementLevel,
    /// Memory limit.
    pub memory: EnforcementLevel,
    /// CPU limit.
    pub cpu: EnforcementLevel,
    /// Process-count limit.
    pub pids: EnforcementLevel,
    /// Disk limit.
    pub disk: EnforcementLevel,
    /// Wall-clock duration limit.
    pub duration: EnforcementLevel,
    /// Privilege restriction (no new privileges, dropped capabilities).
    pub privilege: EnforcementLevel,
}

/// One honest envelope, unchanging for a provider revision.
///
/// Wire form: a JSON object with these snake_case fields; optional fields
/// may be absent and then take the default named on each. Unknown fields
/// are refused. Cross-field rules (see [`EnvelopeRule`]) are refused at decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProviderCapabilities {
    /// Where instances run.
    pub placement: Placement,
    /// Supported tiers; non-empty, no duplicates.
    #[cfg_attr(feature = "schema", schemars(length(min = 1), extend("uniqueItems" = true)))]
    pub tiers: Vec<Tier>,
    /// Supported platforms; non-empty, no duplicates.
    #[cfg_attr(feature = "schema", schemars(length(min = 1), extend("uniqueItems" = true)))]
    pub platforms: Vec<Platform>,
    /// How images are chosen.
    pub image_mode: ImageMode,
    /// Package managers for materialization; may be empty.
    #[cfg_attr(feature = "schema", schemars(extend("uniqueItems" = true)))]
    pub package_managers: Vec<PackageManager>,
    /// Supported network modes; non-empty, no duplicates.
    #[cfg_attr(feature = "schema", schemars(length(min = 1), extend("uniqueItems" = true)))]
    pub network_modes: Vec<NetworkMode>,
    /// Supported retention modes; non-empty, no duplicates.
    #[cfg_attr(feature = "schema", schemars(length(min = 1), extend("uniqueItems" = true)))]
    pub retention_modes: Vec<RetentionMode>,
    /// Whether snapshot capture works.
    pub snapshots: bool,
    /// Whether cloneSnapshot works. Default `false`; requires `snapshots`.
    #[serde(default)]
    pub snapshot_clone: bool,
    /// Who holds snapshot bytes. Default `runner`.
    #[serde(default)]
    pub snapshot_custody: SnapshotCustody,
    /// Whether listDir is offered. Default `false`.
    #[serde(default)]
    pub list_dir: bool,
    /// Whether readFile binds resolution and consumption to the physical
    /// root. Default `false`: readFile fails closed.
    #[serde(default)]
    pub physically_contained_file_read: bool,
    /// Whether beginActiveWrite is offered. Default `false`; needs mounts.
    #[serde(default)]
    pub active_mount_write: bool,
    /// Allowlist enforcement grade. Default `unsupported`.
    #[serde(default)]
    pub egress_certification: EgressCertification,
    /// Who enforces each of the nine axes.
    pub enforcement: Enforcement,
    /// Most mounts per instance, 0..=64.
    #[cfg_attr(feature = "schema", schemars(range(max = 64)))]
    pub max_mounts: u8,
    /// The provider's revision; instances echo it in `materialization`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub provider_revision: String,
    /// The materialization revision; instances echo it in `materialization`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub materialization_revision: String,
}
