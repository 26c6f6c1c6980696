//! The provider's one capability envelope and the host platform.

use checkfu_sandbox_contract::bounds::MAX_MOUNTS;
use checkfu_sandbox_contract::*;

use super::inner::{MATERIALIZATION_REVISION, PROVIDER_REVISION};
use crate::egress::EgressSupport;

/// The platform of this host (the daemon is local).
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

/// The provider's one envelope on a host with `egress` support: `allowlist`
/// graded `enforced` when [`EgressSupport::Enforced`], otherwise only `none`
/// with egress `unsupported`. Fixed for a provider object's lifetime.
pub fn envelope(egress: &EgressSupport) -> SandboxProviderCapabilities {
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
        // beginActiveWrite: a journal in the state directory (crate::active_write).
        active_mount_write: true,
        egress_certification,
        enforcement: Enforcement {
            // Mount namespace, read-only binds, contained host reads.
            filesystem: ProviderEnforced,
            // PID namespace; commands end with their process group.
            process: ProviderEnforced,
            // Network mode none: loopback only; allowlist: nftables rules in
            // the instance's namespace, out of the workload's reach.
            network: ProviderEnforced,
            // cgroup limits set on the container.
            memory: ProviderEnforced,
            cpu: ProviderEnforced,
            pids: ProviderEnforced,
            // overlay2 without project quotas: no disk limit.
            disk: NotEnforced,
            // execute's timeout kills the command's process group.
            duration: ProviderEnforced,
            // cap_drop ALL, no-new-privileges, unprivileged user.
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

    #[test]
    fn envelope_is_valid_and_stable() {
        let e = envelope(&EgressSupport::Unavailable("no nft".into()));
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        assert_eq!(e.max_mounts, 64);
        assert_eq!(e.network_modes, vec![NetworkMode::None]);
        assert_eq!(e.egress_certification, EgressCertification::Unsupported);
        assert!(e.snapshots && e.snapshot_clone && e.list_dir && e.physically_contained_file_read);
        assert!(e.active_mount_write);
    }

    #[test]
    fn allowlist_is_offered_enforced_only_with_support() {
        let e = envelope(&EgressSupport::Enforced {
            nsenter: "/usr/bin/nsenter".into(),
            nft: "/usr/sbin/nft".into(),
        });
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        assert_eq!(
            e.network_modes,
            vec![NetworkMode::None, NetworkMode::Allowlist]
        );
        assert_eq!(e.egress_certification, EgressCertification::Enforced);
    }
}
