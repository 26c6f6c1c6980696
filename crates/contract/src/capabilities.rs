//! The capability envelope, `SandboxProviderCapabilities` (spec "Optional
//! capabilities: absent versus wrong", "A minimum provider"; DESIGN D13).
//!
//! Every optional field defaults to its weakest legal value. Cross-field
//! rules are checked by [`SandboxProviderCapabilities::violations`], which
//! the wire decoder and the runtime both apply.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::bounds::MAX_MOUNTS;
use crate::identity::Mismatch;

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

/// The envelope's cross-field rules, each refused at decode by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeRule {
    /// `snapshot_clone: true` with `snapshots: false`.
    SnapshotCloneRequiresSnapshots,
    /// `durable` retention with `snapshots: false`.
    DurableRequiresSnapshots,
    /// `snapshot_custody: provider` with `snapshots: false`.
    ProviderCustodyRequiresSnapshots,
    /// `allowlist` network mode with `egress_certification: unsupported`.
    AllowlistRequiresEgressCertification,
    /// `active_mount_write: true` with `max_mounts: 0`.
    ActiveMountWriteRequiresMounts,
    /// `max_mounts` over 64.
    MaxMountsBound,
    /// An empty list that must have at least one member.
    NonEmpty,
    /// A list with a repeated member.
    NoDuplicates,
    /// An empty revision string.
    RevisionNonEmpty,
}

impl EnvelopeRule {
    /// The snake_case wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            EnvelopeRule::SnapshotCloneRequiresSnapshots => "snapshot_clone_requires_snapshots",
            EnvelopeRule::DurableRequiresSnapshots => "durable_requires_snapshots",
            EnvelopeRule::ProviderCustodyRequiresSnapshots => "provider_custody_requires_snapshots",
            EnvelopeRule::AllowlistRequiresEgressCertification => {
                "allowlist_requires_egress_certification"
            }
            EnvelopeRule::ActiveMountWriteRequiresMounts => "active_mount_write_requires_mounts",
            EnvelopeRule::MaxMountsBound => "max_mounts_bound",
            EnvelopeRule::NonEmpty => "non_empty",
            EnvelopeRule::NoDuplicates => "no_duplicates",
            EnvelopeRule::RevisionNonEmpty => "revision_non_empty",
        }
    }
}

/// One envelope rule broken, with the field and both values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeViolation {
    /// The rule.
    pub rule: EnvelopeRule,
    /// The field, expected and actual values.
    pub mismatch: Mismatch,
}

fn dupes<T: Ord>(items: &[T]) -> bool {
    let set: BTreeSet<&T> = items.iter().collect();
    set.len() != items.len()
}

impl SandboxProviderCapabilities {
    /// Every cross-field rule this envelope breaks, in field order; empty
    /// when it is valid.
    pub fn violations(&self) -> Vec<EnvelopeViolation> {
        let mut out = Vec::new();
        let mut push = |rule, field: &str, expected: &str, actual: String| {
            out.push(EnvelopeViolation {
                rule,
                mismatch: Mismatch::new(field, expected, actual),
            })
        };
        let list_rules: [(&str, usize, bool); 4] = [
            ("tiers", self.tiers.len(), dupes(&self.tiers)),
            ("platforms", self.platforms.len(), dupes(&self.platforms)),
            (
                "network_modes",
                self.network_modes.len(),
                dupes(&self.network_modes),
            ),
            (
                "retention_modes",
                self.retention_modes.len(),
                dupes(&self.retention_modes),
            ),
        ];
        for (field, len, dup) in list_rules {
            if len == 0 {
                push(
                    EnvelopeRule::NonEmpty,
                    field,
                    "at least one member",
                    "[]".into(),
                );
            }
            if dup {
                push(
                    EnvelopeRule::NoDuplicates,
                    field,
                    "no repeated member",
                    format!("{len} members with a repeat"),
                );
            }
        }
        if dupes(&self.package_managers) {
            push(
                EnvelopeRule::NoDuplicates,
                "package_managers",
                "no repeated member",
                "a repeat".into(),
            );
        }
        if !self.snapshots {
            if self.snapshot_clone {
                push(
                    EnvelopeRule::SnapshotCloneRequiresSnapshots,
                    "snapshot_clone",
                    "false while snapshots is false",
                    "true".into(),
                );
            }
            if self.retention_modes.contains(&RetentionMode::Durable) {
                push(
                    EnvelopeRule::DurableRequiresSnapshots,
                    "retention_modes",
                    "no durable while snapshots is false",
                    "durable".into(),
                );
            }
            if self.snapshot_custody == SnapshotCustody::Provider {
                push(
                    EnvelopeRule::ProviderCustodyRequiresSnapshots,
                    "snapshot_custody",
                    "runner while snapshots is false",
                    "provider".into(),
                );
            }
        }
        if self.network_modes.contains(&NetworkMode::Allowlist)
            && self.egress_certification == EgressCertification::Unsupported
        {
            push(
                EnvelopeRule::AllowlistRequiresEgressCertification,
                "egress_certification",
                "advisory_filter or enforced when allowlist is offered",
                "unsupported".into(),
            );
        }
        if self.max_mounts > MAX_MOUNTS {
            push(
                EnvelopeRule::MaxMountsBound,
                "max_mounts",
                "0..=64",
                self.max_mounts.to_string(),
            );
        }
        if self.active_mount_write && self.max_mounts == 0 {
            push(
                EnvelopeRule::ActiveMountWriteRequiresMounts,
                "active_mount_write",
                "false while max_mounts is 0",
                "true".into(),
            );
        }
        if self.provider_revision.is_empty() {
            push(
                EnvelopeRule::RevisionNonEmpty,
                "provider_revision",
                "a non-empty revision",
                "\"\"".into(),
            );
        }
        if self.materialization_revision.is_empty() {
            push(
                EnvelopeRule::RevisionNonEmpty,
                "materialization_revision",
                "a non-empty revision",
                "\"\"".into(),
            );
        }
        out
    }
}
