//! The provider's one capability envelope and the host platform.

use checkfu_sandbox_contract::bounds::MAX_MOUNTS;
use checkfu_sandbox_contract::*;

use super::inner::{MATERIALIZATION_REVISION, PROVIDER_REVISION};
use crate::cgroup::FreezerSupport;
use crate::network::EgressSupport;

/// The platform of this host.
pub fn host_platform() -> Platform {
    Platform {
        os: Os::Linux,
        architecture: if std::env::consts::ARCH == "aarch64" {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        },
    }
}

/// The provider's envelope on this host: [`envelope_for`] the cached
/// egress and freezer probes ([`EgressSupport::probe_cached`],
/// [`FreezerSupport::probe_cached`]).
pub fn envelope() -> SandboxProviderCapabilities {
    envelope_for(
        &EgressSupport::probe_cached(),
        &FreezerSupport::probe_cached(),
    )
}

/// The provider's envelope given the host's egress and freezer support:
/// network modes `none` and `allowlist` with egress certification
/// `enforced` when `egress` is [`EgressSupport::Enforced`], else `none`
/// only and `unsupported`; `active_mount_write` when `freezer` is
/// [`FreezerSupport::Available`] (beginActiveWrite pauses the workload
/// with it), else not offered.
pub fn envelope_for(
    egress: &EgressSupport,
    freezer: &FreezerSupport,
) -> SandboxProviderCapabilities {
    use EnforcementLevel::{NotEnforced, ProviderEnforced};
    let (network_modes, egress_certification) = if egress.is_enforced() {
        (
            vec![NetworkMode::None, NetworkMode::Allowlist],
            EgressCertification::Enforced,
        )
    } else {
        (vec![NetworkMode::None], EgressCertification::Unsupported)
    };
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![host_platform()],
        image_mode: ImageMode::Profile,
        package_managers: Vec::new(),
        network_modes,
        retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
        snapshots: true,
        snapshot_clone: true,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: true,
        physically_contained_file_read: true,
        // beginActiveWrite: the shared journal, the cgroup freezer as pause.
        active_mount_write: freezer.is_available(),
        egress_certification,
        enforcement: Enforcement {
            // Mount namespace, pivot_root, read-only binds, contained host reads.
            filesystem: ProviderEnforced,
            // PID namespace per instance and per command.
            process: ProviderEnforced,
            // Network mode none: an empty network namespace (loopback only);
            // allowlist: nft rules in that namespace, loaded from the host.
            network: ProviderEnforced,
            // cgroup limits (v1 or v2).
            memory: ProviderEnforced,
            cpu: ProviderEnforced,
            pids: ProviderEnforced,
            // No quota on the writable layer or the host directories.
            disk: NotEnforced,
            // execute's timeout kills the command's PID namespace.
            duration: ProviderEnforced,
            // Empty capability sets, no_new_privs, seccomp deny list.
            privilege: ProviderEnforced,
        },
        max_mounts: MAX_MOUNTS,
        provider_revision: PROVIDER_REVISION.into(),
        materialization_revision: MATERIALIZATION_REVISION.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::CgroupVersion;

    fn no_freezer() -> FreezerSupport {
        FreezerSupport::Unavailable("no freezer".into())
    }

    #[test]
    fn envelope_is_valid_and_stable() {
        let e = envelope_for(&EgressSupport::Unavailable("no nft".into()), &no_freezer());
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        assert_eq!(e.max_mounts, 64);
        assert_eq!(e.network_modes, vec![NetworkMode::None]);
        assert_eq!(e.egress_certification, EgressCertification::Unsupported);
        assert!(e.snapshots && e.snapshot_clone && e.list_dir && e.physically_contained_file_read);
        assert!(!e.active_mount_write);
    }

    #[test]
    fn active_mount_write_is_offered_only_with_a_freezer() {
        for version in [CgroupVersion::V1, CgroupVersion::V2] {
            let e = envelope_for(
                &EgressSupport::Unavailable("no nft".into()),
                &FreezerSupport::Available(version),
            );
            assert!(e.violations().is_empty(), "{:?}", e.violations());
            assert!(e.active_mount_write, "{version:?}");
        }
        assert!(
            !envelope_for(&EgressSupport::Unavailable("no nft".into()), &no_freezer())
                .active_mount_write
        );
    }

    #[test]
    fn allowlist_is_offered_only_with_enforced_support() {
        let e = envelope_for(
            &EgressSupport::Enforced {
                ip: "/usr/sbin/ip".into(),
                nsenter: "/usr/bin/nsenter".into(),
                nft: "/usr/sbin/nft".into(),
            },
            &no_freezer(),
        );
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        assert_eq!(
            e.network_modes,
            vec![NetworkMode::None, NetworkMode::Allowlist]
        );
        assert_eq!(e.egress_certification, EgressCertification::Enforced);
        assert_eq!(e.enforcement.network, EnforcementLevel::ProviderEnforced);
    }
}
