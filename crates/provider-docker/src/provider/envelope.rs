//! The provider's one capability envelope (hostfs's
//! [`host_envelope`](checkfu_sandbox_hostfs::host_envelope::host_envelope))
//! and the host platform.
//!
//! How this provider enforces each area: the filesystem by the mount
//! namespace, read-only binds and contained host reads; processes by the
//! PID namespace (commands end with their process group); the network
//! `none` by loopback only, `allowlist` by nftables rules in the
//! instance's namespace, out of the workload's reach; memory, cpu and pids
//! by the cgroup limits set on the container; the duration by execute's
//! timeout killing the command's process group; privilege by cap_drop
//! ALL, no-new-privileges and an unprivileged user. The disk is not
//! enforced (overlay2 without project quotas). beginActiveWrite keeps a
//! journal in the state directory (crate::active_write).

use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::host_envelope::{host_envelope, HostEnvelope};

use super::inner::{MATERIALIZATION_REVISION, PROVIDER_REVISION};
use crate::egress::EgressSupport;

/// The platform of this host (the daemon is local).
pub use checkfu_sandbox_hostfs::host_envelope::host_platform;

/// The provider's one envelope on a host with `egress` support: `allowlist`
/// graded `enforced` when [`EgressSupport::Enforced`], otherwise only `none`
/// with egress `unsupported`. Fixed for a provider object's lifetime.
pub fn envelope(egress: &EgressSupport) -> SandboxProviderCapabilities {
    host_envelope(HostEnvelope {
        egress_enforced: egress.is_enforced(),
        active_mount_write: true,
        provider_revision: PROVIDER_REVISION,
        materialization_revision: MATERIALIZATION_REVISION,
    })
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
