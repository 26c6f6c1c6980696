//! Enrollment ceilings: what an enrolled provider may claim (spec "From
//! adapter to qualified provider": the declared envelope is intersected
//! with a ceiling the operator owns, including `enforcement` and
//! `egress_certification`).
//!
//! A [`Ceiling`] bounds each field it names; a field it leaves out is not
//! bounded. [`intersect`] computes declared ∩ ceiling and reports every
//! value it cut down as a [`Cut`]; a claim that cannot be cut down (the
//! intersection of a non-empty set is empty, the placement or image mode
//! differs, or the cut envelope breaks a cross-field rule) is refused.
//! [`drift`] names every field where a live envelope differs from the
//! enrolled one.

use std::collections::BTreeSet;
use std::fmt;

use checkfu_sandbox_contract::wire::check_capabilities;
use checkfu_sandbox_contract::Operation;
use checkfu_sandbox_contract::{
    EgressCertification, EnforcementLevel, ImageMode, NetworkMode, PackageManager, Placement,
    Platform, RetentionMode, SandboxError, SandboxProviderCapabilities, Tier,
};
use serde::{Deserialize, Serialize};

/// The operation name ceiling and drift refusals carry in
/// `SandboxProtocolInvalid{operation}`.
pub const CEILING_OPERATION: Operation = Operation::EnrollmentCeiling;

/// The operation name a drifted live envelope's refusal carries.
pub const DRIFT_OPERATION: Operation = Operation::EnrolledEnvelope;

/// The most an enrolled provider may claim, field by field. Every field is
/// optional; an absent field does not bound the claim.
///
/// Sets (`tiers`, `platforms`, `package_managers`, `network_modes`,
/// `retention_modes`) bound by intersection; booleans by `and`;
/// `max_mounts` by the minimum; `egress_certification` by the lower grade
/// (`unsupported < advisory_filter < enforced`); each enforcement axis by
/// its level: a claim equal to the ceiling's level stays, any other becomes
/// `not_enforced`. `placement` and `image_mode` cannot be cut down: a
/// different claim is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceiling {
    /// The only placement accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The only image mode accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_mode: Option<ImageMode>,
    /// Tiers that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Vec<Tier>>,
    /// Platforms that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platforms: Option<Vec<Platform>>,
    /// Package managers that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_managers: Option<Vec<PackageManager>>,
    /// Network modes that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_modes: Option<Vec<NetworkMode>>,
    /// Retention modes that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_modes: Option<Vec<RetentionMode>>,
    /// Whether snapshots may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<bool>,
    /// Whether snapshot_clone may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_clone: Option<bool>,
    /// Whether list_dir may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_dir: Option<bool>,
    /// Whether physically_contained_file_read may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physically_contained_file_read: Option<bool>,
    /// Whether active_mount_write may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_mount_write: Option<bool>,
    /// The highest egress grade that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_certification: Option<EgressCertification>,
    /// Per enforcement axis, the one level that may be claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<EnforcementCeiling>,
    /// The most mounts that may be claimed (0..=64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mounts: Option<u8>,
}

/// Per enforcement axis, the one level an enrolled provider may claim
/// (absent: unbounded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct EnforcementCeiling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<EnforcementLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privilege: Option<EnforcementLevel>,
}

/// What an enrolled provider was enrolled with: the envelope its signed
/// evidence carries and its ceiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrollment {
    /// The enrolled envelope; the live one must equal it.
    pub envelope: SandboxProviderCapabilities,
    /// What it may claim.
    pub ceiling: Ceiling,
}

/// One claim the ceiling cut down: the field, what was declared and what
/// the intersection keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Field path, e.g. `egress_certification` or `enforcement.network`.
    pub field: String,
    /// The declared value (JSON).
    pub declared: String,
    /// The value kept (JSON).
    pub kept: String,
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: declared {}, cut down to {} by the ceiling",
            self.field, self.declared, self.kept
        )
    }
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn refuse(field: &str, ceiling: String, declared: String) -> SandboxError {
    SandboxError::protocol(CEILING_OPERATION, field, ceiling, declared)
}

struct Cutter {
    cuts: Vec<Cut>,
}

impl Cutter {
    fn set<T: Copy + Ord + Serialize>(
        &mut self,
        field: &str,
        declared: &mut Vec<T>,
        allowed: Option<&Vec<T>>,
        may_be_empty: bool,
    ) -> Result<(), SandboxError> {
        let Some(allowed) = allowed else {
            return Ok(());
        };
        let allowed: BTreeSet<T> = allowed.iter().copied().collect();
        let kept: Vec<T> = declared
            .iter()
            .copied()
            .filter(|v| allowed.contains(v))
            .collect();
        if kept.len() == declared.len() {
            return Ok(());
        }
        if kept.is_empty() && !may_be_empty {
            return Err(refuse(
                field,
                format!("a subset of {}", json(&allowed)),
                json(declared),
            ));
        }
        self.record(field, json(declared), json(&kept));
        *declared = kept;
        Ok(())
    }

    fn flag(&mut self, field: &str, declared: &mut bool, allowed: Option<bool>) {
        if *declared && allowed == Some(false) {
            self.record(field, "true".into(), "false".into());
            *declared = false;
        }
    }

    fn record(&mut self, field: &str, declared: String, kept: String) {
        self.cuts.push(Cut {
            field: field.to_owned(),
            declared,
            kept,
        });
    }
}

/// Declared ∩ ceiling, and every claim cut down on the way (in field
/// order). Cutting `snapshots` also cuts `snapshot_clone`; cutting
/// `max_mounts` to 0 also cuts `active_mount_write`.
///
/// # Errors
/// `SandboxProtocolInvalid{operation: enrollment_ceiling, field, expected:
/// what the ceiling allows, actual: the declared value}` when a claim
/// cannot be cut down: a different `placement` or `image_mode`, or a
/// required non-empty set (`tiers`, `platforms`, `network_modes`,
/// `retention_modes`) with nothing left; or the cut envelope's first broken
/// cross-field rule.
pub fn intersect(
    declared: &SandboxProviderCapabilities,
    ceiling: &Ceiling,
) -> Result<(SandboxProviderCapabilities, Vec<Cut>), SandboxError> {
    let mut e = declared.clone();
    let mut c = Cutter { cuts: Vec::new() };
    if let Some(p) = ceiling.placement {
        if p != e.placement {
            return Err(refuse("placement", json(&p), json(&e.placement)));
        }
    }
    if let Some(m) = ceiling.image_mode {
        if m != e.image_mode {
            return Err(refuse("image_mode", json(&m), json(&e.image_mode)));
        }
    }
    c.set("tiers", &mut e.tiers, ceiling.tiers.as_ref(), false)?;
    c.set(
        "platforms",
        &mut e.platforms,
        ceiling.platforms.as_ref(),
        false,
    )?;
    c.set(
        "package_managers",
        &mut e.package_managers,
        ceiling.package_managers.as_ref(),
        true,
    )?;
    c.set(
        "network_modes",
        &mut e.network_modes,
        ceiling.network_modes.as_ref(),
        false,
    )?;
    c.set(
        "retention_modes",
        &mut e.retention_modes,
        ceiling.retention_modes.as_ref(),
        false,
    )?;
    c.flag("snapshots", &mut e.snapshots, ceiling.snapshots);
    let clone_allowed = ceiling
        .snapshot_clone
        .map(|v| v && e.snapshots)
        .or((!e.snapshots).then_some(false));
    c.flag("snapshot_clone", &mut e.snapshot_clone, clone_allowed);
    c.flag("list_dir", &mut e.list_dir, ceiling.list_dir);
    c.flag(
        "physically_contained_file_read",
        &mut e.physically_contained_file_read,
        ceiling.physically_contained_file_read,
    );
    if let Some(max) = ceiling.max_mounts {
        if e.max_mounts > max {
            c.record("max_mounts", json(&e.max_mounts), json(&max));
            e.max_mounts = max;
        }
    }
    let write_allowed = ceiling
        .active_mount_write
        .map(|v| v && e.max_mounts > 0)
        .or((e.max_mounts == 0).then_some(false));
    c.flag(
        "active_mount_write",
        &mut e.active_mount_write,
        write_allowed,
    );
    if let Some(grade) = ceiling.egress_certification {
        if e.egress_certification > grade {
            c.record(
                "egress_certification",
                json(&e.egress_certification),
                json(&grade),
            );
            e.egress_certification = grade;
        }
    }
    if let Some(axes) = &ceiling.enforcement {
        let en = &mut e.enforcement;
        let pairs: [(&str, &mut EnforcementLevel, Option<EnforcementLevel>); 9] = [
            (
                "enforcement.filesystem",
                &mut en.filesystem,
                axes.filesystem,
            ),
            ("enforcement.process", &mut en.process, axes.process),
            ("enforcement.network", &mut en.network, axes.network),
            ("enforcement.memory", &mut en.memory, axes.memory),
            ("enforcement.cpu", &mut en.cpu, axes.cpu),
            ("enforcement.pids", &mut en.pids, axes.pids),
            ("enforcement.disk", &mut en.disk, axes.disk),
            ("enforcement.duration", &mut en.duration, axes.duration),
            ("enforcement.privilege", &mut en.privilege, axes.privilege),
        ];
        for (field, level, allowed) in pairs {
            if let Some(allowed) = allowed {
                if *level != allowed && *level != EnforcementLevel::NotEnforced {
                    c.record(field, json(level), json(&EnforcementLevel::NotEnforced));
                    *level = EnforcementLevel::NotEnforced;
                }
            }
        }
    }
    check_capabilities(&e)?;
    Ok((e, c.cuts))
}

/// Every field where `live` differs from `enrolled`, as (field path,
/// enrolled JSON, live JSON), ordered by path. Nested objects are compared
/// member by member (`enforcement.network`).
pub fn drift(
    enrolled: &SandboxProviderCapabilities,
    live: &SandboxProviderCapabilities,
) -> Vec<(String, String, String)> {
    let a = serde_json::to_value(enrolled).unwrap_or_default();
    let b = serde_json::to_value(live).unwrap_or_default();
    let mut out = Vec::new();
    diff("", &a, &b, &mut out);
    out
}

fn diff(
    prefix: &str,
    a: &serde_json::Value,
    b: &serde_json::Value,
    out: &mut Vec<(String, String, String)>,
) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                diff(
                    &path,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        _ if a != b => out.push((prefix.to_owned(), a.to_string(), b.to_string())),
        _ => {}
    }
}
