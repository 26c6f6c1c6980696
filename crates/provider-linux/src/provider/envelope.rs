//! The provider's one capability envelope and the host platform.

use checkfu_sandbox_contract::bounds::MAX_MOUNTS;
use checkfu_sandbox_contract::*;

use super::inner::{MATERIALIZATION_REVISION, PROVIDER_REVISION};

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

/// The provider's one envelope.
pub fn envelope() -> SandboxProviderCapabilities {
    use EnforcementLevel::{NotEnforced, ProviderEnforced};
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![host_platform()],
        image_mode: ImageMode::Profile,
        package_managers: Vec::new(),
        network_modes: vec![NetworkMode::None],
        retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
        snapshots: true,
        snapshot_clone: true,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: true,
        physically_contained_file_read: true,
        active_mount_write: false,
        egress_certification: EgressCertification::Unsupported,
        enforcement: Enforcement {
            // Mount namespace, pivot_root, read-only binds, contained host reads.
            filesystem: ProviderEnforced,
            // PID namespace per instance and per command.
            process: ProviderEnforced,
            // Network mode none: an empty network namespace (loopback only).
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

    #[test]
    fn envelope_is_valid_and_stable() {
        let e = envelope();
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        assert_eq!(e.max_mounts, 64);
        assert_eq!(e.network_modes, vec![NetworkMode::None]);
        assert!(e.snapshots && e.snapshot_clone && e.list_dir && e.physically_contained_file_read);
        assert!(!e.active_mount_write);
    }
}
