//! Selection: exactly one adapter for a request's requirements (spec
//! "Optional capabilities", "Errors"; DESIGN D12).

use std::collections::BTreeSet;

use checkfu_sandbox_contract::bounds::MAX_MOUNTS;
use checkfu_sandbox_contract::validate;
use checkfu_sandbox_contract::{
    EgressCertification, EnforcementLevel, NetworkMode, NetworkPolicy, PackageManager, Platform,
    Requirement, Resources, RetentionMode, SandboxError, SandboxMount, SandboxProfile,
    SandboxProviderCapabilities, Tier,
};

/// What a Run needs of a provider, in the selection vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirements {
    /// Isolation tier.
    pub tier: Tier,
    /// Operating system and architecture.
    pub platform: Platform,
    /// Package managers the profile's packages need.
    pub package_managers: BTreeSet<PackageManager>,
    /// The network policy.
    pub network_policy: NetworkPolicy,
    /// Least egress grade an allowlist needs (ignored for mode `none`).
    pub minimum_egress: EgressCertification,
    /// Retention mode.
    pub retention: RetentionMode,
    /// Resource limits that must be enforced by someone.
    pub resources: Resources,
    /// The mount plan.
    pub mounts: Vec<SandboxMount>,
    /// Whether the Run needs readFile (writeback, capture, output copy).
    pub physically_contained_file_read: bool,
    /// Whether the Run needs beginActiveWrite.
    pub active_mount_write: bool,
    /// Whether the Run forks from a Checkpoint.
    pub snapshot_clone: bool,
}

impl Requirements {
    /// The requirements a profile, platform, tier and mount plan imply,
    /// with no optional capability asked for.
    pub fn for_profile(
        profile: &SandboxProfile,
        tier: Tier,
        platform: Platform,
        mounts: Vec<SandboxMount>,
    ) -> Self {
        Requirements {
            tier,
            platform,
            package_managers: profile.packages.iter().map(|p| p.manager).collect(),
            network_policy: profile.network_policy.clone(),
            minimum_egress: EgressCertification::AdvisoryFilter,
            retention: profile.retention,
            resources: profile.resources.clone(),
            mounts,
            physically_contained_file_read: false,
            active_mount_write: false,
            snapshot_clone: false,
        }
    }
}

/// Checks a mount plan on its own: normalized absolute paths, no overlap
/// with a reserved root (in either direction), no duplicate, at most 64.
///
/// # Errors
/// `SandboxCapabilityUnavailable{requirement: mounts}` with a detail naming
/// the mount (`mounts[i].path`) and the rule.
pub fn check_mount_plan(mounts: &[SandboxMount]) -> Result<(), SandboxError> {
    match validate::mounts(mounts, MAX_MOUNTS).first() {
        None => Ok(()),
        Some(m) => Err(validate::mounts_unavailable(m)),
    }
}

/// Is the network policy admissible under this envelope (the runtime
/// re-checks it on activate, execute, resume and openProcess)? The policy
/// must first have a valid shape: every allowlist destination a non-empty
/// host without whitespace or control bytes and a port other than 0.
///
/// # Errors
/// `SandboxCapabilityUnavailable{requirement: network_policy}` naming the
/// requested policy and the advertised grade.
pub fn check_network(
    envelope: &SandboxProviderCapabilities,
    policy: &NetworkPolicy,
    minimum: EgressCertification,
) -> Result<(), SandboxError> {
    if let NetworkPolicy::Allowlist { destinations } = policy {
        for (i, d) in destinations.iter().enumerate() {
            let host_ok = !d.host.is_empty()
                && d.host.len() <= 253
                && !d
                    .host
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
            if !host_ok || d.port == 0 {
                return Err(SandboxError::unavailable(
                    Requirement::NetworkPolicy,
                    format!(
                        "requested allowlist is malformed: destinations[{i}]: expected a host name or IP literal and a port 1..=65535, actual {:?}:{}",
                        d.host, d.port
                    ),
                ));
            }
        }
    }
    let mode = policy.mode();
    if !envelope.network_modes.contains(&mode) {
        return Err(SandboxError::unavailable(
            Requirement::NetworkPolicy,
            format!(
                "requested mode {mode:?}; the provider offers {:?}",
                envelope.network_modes
            ),
        ));
    }
    if mode == NetworkMode::Allowlist
        && envelope.egress_certification < minimum.max(EgressCertification::AdvisoryFilter)
    {
        return Err(SandboxError::unavailable(
            Requirement::NetworkPolicy,
            format!(
                "requested allowlist needs egress {minimum:?}; the provider's grade is {:?}",
                envelope.egress_certification
            ),
        ));
    }
    Ok(())
}

/// Every requirement `envelope` fails, in vocabulary order (empty: fits).
pub fn unmet(envelope: &SandboxProviderCapabilities, needs: &Requirements) -> Vec<Requirement> {
    let mut out = BTreeSet::new();
    if !envelope.tiers.contains(&needs.tier) {
        out.insert(Requirement::Tier);
    }
    if !envelope.platforms.contains(&needs.platform) {
        out.insert(Requirement::Platform);
    }
    if !needs
        .package_managers
        .iter()
        .all(|m| envelope.package_managers.contains(m))
    {
        out.insert(Requirement::Packages);
    }
    if check_network(envelope, &needs.network_policy, needs.minimum_egress).is_err() {
        out.insert(Requirement::NetworkPolicy);
    }
    if !envelope.retention_modes.contains(&needs.retention) {
        out.insert(Requirement::Retention);
    }
    if needs.retention == RetentionMode::Durable && !envelope.snapshots {
        out.insert(Requirement::Snapshots);
    }
    let e = &envelope.enforcement;
    let unenforced =
        |asked: bool, level: EnforcementLevel| asked && level == EnforcementLevel::NotEnforced;
    let r = &needs.resources;
    if unenforced(r.cpu_millis.is_some(), e.cpu)
        || unenforced(r.memory_bytes.is_some(), e.memory)
        || unenforced(r.pids.is_some(), e.pids)
        || unenforced(r.disk_bytes.is_some(), e.disk)
    {
        out.insert(Requirement::Resources);
    }
    if needs.mounts.len() > usize::from(envelope.max_mounts) {
        out.insert(Requirement::Mounts);
    }
    if needs.physically_contained_file_read && !envelope.physically_contained_file_read {
        out.insert(Requirement::PhysicallyContainedFileRead);
    }
    if needs.active_mount_write && !envelope.active_mount_write {
        out.insert(Requirement::ActiveMountWrite);
    }
    if needs.snapshot_clone && !(envelope.snapshots && envelope.snapshot_clone) {
        out.insert(Requirement::SnapshotClone);
    }
    out.into_iter().collect()
}
