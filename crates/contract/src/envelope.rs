//! The capability envelope's cross-field rules (spec "Optional
//! capabilities: absent versus wrong"; DESIGN D13):
//! [`SandboxProviderCapabilities::violations`] lists every rule an envelope
//! breaks, each with its field and both values. The wire decoder and the
//! runtime both apply it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::bounds::MAX_MOUNTS;
use crate::capabilities::{
    EgressCertification, NetworkMode, RetentionMode, SandboxProviderCapabilities, SnapshotCustody,
};
use crate::mismatch::Mismatch;

/// The envelope's cross-field rules, each refused at decode by name.
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
        self.into()
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
