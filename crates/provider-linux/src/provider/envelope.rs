//! The provider's one capability envelope (hostfs's
//! [`host_envelope`](checkfu_sandbox_hostfs::host_envelope::host_envelope))
//! and the host platform.
//!
//! How this provider enforces each area: the filesystem by the mount
//! namespace, pivot_root, read-only binds and contained host reads;
//! processes by a PID namespace per instance and per command; the network
//! `none` by an empty network namespace (loopback only), `allowlist` by nft
//! rules in that namespace, loaded from the host; memory, cpu and pids by
//! cgroup limits (v1 or v2); the duration by execute's timeout killing the
//! command's PID namespace; privilege by empty capability sets,
//! no_new_privs and the seccomp deny list. The disk is not enforced (no
//! quota on the writable layer or the host directories). beginActiveWrite
//! is the shared journal with the cgroup freezer as its pause.

use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::host_envelope::{host_envelope, HostEnvelope};

use super::inner::{MATERIALIZATION_REVISION, PROVIDER_REVISION};
use crate::cgroup::FreezerSupport;
use crate::network::EgressSupport;

/// The platform of this host.
pub use checkfu_sandbox_hostfs::host_envelope::host_platform;

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
    host_envelope(HostEnvelope {
        egress_enforced: egress.is_enforced(),
        active_mount_write: freezer.is_available(),
        provider_revision: PROVIDER_REVISION,
        materialization_revision: MATERIALIZATION_REVISION,
    })
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
