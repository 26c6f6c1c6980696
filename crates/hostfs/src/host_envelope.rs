//! The capability envelope a host-side provider offers (one per provider
//! object, fixed for its lifetime) and the platform of the host it runs
//! on. The providers differ only in what their host's probes allow
//! ([`HostEnvelope`]); how each enforces the levels is written beside its
//! own call.

use checkfu_sandbox_contract::bounds::MAX_MOUNTS;
use checkfu_sandbox_contract::*;

/// The platform of this host: Linux on the architecture this binary was
/// built for (`arm64` for `aarch64`, `amd64` otherwise).
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

/// What a host-side provider's envelope depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostEnvelope<'a> {
    /// Whether the host lets the provider enforce an allowlist: network
    /// modes `none` and `allowlist` with egress certification `enforced`,
    /// else `none` only with egress `unsupported`.
    pub egress_enforced: bool,
    /// Whether beginActiveWrite is offered (`active_mount_write`).
    pub active_mount_write: bool,
    /// `provider_revision`.
    pub provider_revision: &'a str,
    /// `materialization_revision`.
    pub materialization_revision: &'a str,
}

/// The envelope of a host-side provider (spec "capability envelope"):
/// placement `runner`, tier `container` on [`host_platform`], profile
/// images, both retention modes, snapshots and clones in the Runner's
/// custody, listDir and physically contained reads, every enforcement
/// area `provider_enforced` but `disk` (`not_enforced`: no quota on the
/// writable layer or the host directories), at most
/// [`MAX_MOUNTS`] mounts; the rest as `host` says.
pub fn host_envelope(host: HostEnvelope<'_>) -> SandboxProviderCapabilities {
    use EnforcementLevel::{NotEnforced, ProviderEnforced};
    let (network_modes, egress_certification) = if host.egress_enforced {
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
        active_mount_write: host.active_mount_write,
        egress_certification,
        enforcement: Enforcement {
            filesystem: ProviderEnforced,
            process: ProviderEnforced,
            network: ProviderEnforced,
            memory: ProviderEnforced,
            cpu: ProviderEnforced,
            pids: ProviderEnforced,
            disk: NotEnforced,
            duration: ProviderEnforced,
            privilege: ProviderEnforced,
        },
        max_mounts: MAX_MOUNTS,
        provider_revision: host.provider_revision.into(),
        materialization_revision: host.materialization_revision.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(egress_enforced: bool, active_mount_write: bool) -> HostEnvelope<'static> {
        HostEnvelope {
            egress_enforced,
            active_mount_write,
            provider_revision: "p/1",
            materialization_revision: "m/1",
        }
    }

    #[test]
    fn every_combination_is_a_valid_envelope() {
        for (egress, write) in [(false, false), (false, true), (true, false), (true, true)] {
            let e = host_envelope(host(egress, write));
            assert!(e.violations().is_empty(), "{:?}", e.violations());
            assert_eq!(e.active_mount_write, write);
            assert_eq!(e.provider_revision, "p/1");
            assert_eq!(e.materialization_revision, "m/1");
        }
    }

    #[test]
    fn allowlist_is_offered_only_when_enforced() {
        let off = host_envelope(host(false, false));
        assert_eq!(off.network_modes, vec![NetworkMode::None]);
        assert_eq!(off.egress_certification, EgressCertification::Unsupported);
        let on = host_envelope(host(true, false));
        assert_eq!(
            on.network_modes,
            vec![NetworkMode::None, NetworkMode::Allowlist]
        );
        assert_eq!(on.egress_certification, EgressCertification::Enforced);
    }
}
