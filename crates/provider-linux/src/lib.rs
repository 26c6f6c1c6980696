//! Daemonless Linux provider for the checkfu sandbox seam.
//!
//! [`LinuxProvider`] implements the contract's
//! [`SandboxProvider`](checkfu_sandbox_contract::SandboxProvider) with
//! Linux namespaces, cgroups and seccomp, started directly from the
//! provider process (no daemon, no container runtime), with the optional
//! readFiles, listDir, listProjectDir, openProcess and beginActiveWrite
//! members (beginActiveWrite where the host has a cgroup freezer) and the
//! resolveImage and cleanupInventory extensions. How instances are built
//! and what isolates them is described on the provider module
//! (`src/provider/mod.rs`); the choice of direct system calls over runc,
//! crun, bubblewrap or youki's `libcontainer` is decision `linux-namespaces`
//! in `docs/decisions/`.
//!
//! # Public API
//!
//! * the provider: [`LinuxProvider`], [`LinuxConfig`], [`WorkloadUser`],
//!   [`LinuxProviderError`], [`availability`], [`Inventory`],
//!   [`ObjectTimes`], [`host_platform`], [`envelope`] and the identity
//!   constants ([`PROVIDER_ID`], [`PROVIDER_REVISION`],
//!   [`MATERIALIZATION_REVISION`]);
//! * [`image`]: the local OCI image store (the offline fixture, imports of
//!   OCI layouts and `docker save` tarballs);
//! * [`cgroup`]: the per-instance cgroups and the freezer;
//! * beginActiveWrite's crash-test seam and recovery report:
//!   [`ActiveWriteStep`], [`StepHook`], [`ActiveWriteRecovery`];
//! * [`seccomp`]: the default filter;
//! * [`network`]: allowlist egress (the host probe, the scope's bridge,
//!   the rule set loaded into an instance's network namespace);
//! * [`Layout`]: where the state directory keeps everything;
//! * [`OverlaySupport`]: what the kernel accepts for overlay roots.

pub mod cgroup;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod image;
mod members;
pub mod network;
mod overlay;
mod procfs;
mod provider;
pub mod seccomp;
mod spawn;
mod store;

pub use checkfu_sandbox_hostfs::active_write::{ActiveWriteRecovery, ActiveWriteStep, StepHook};
pub use network::EgressSupport;
pub use overlay::OverlaySupport;
pub use provider::{
    availability, envelope, envelope_for, host_platform, Inventory, LinuxConfig, LinuxProvider,
    LinuxProviderError, ObjectTimes, WorkloadUser, INSTANCE_HOSTNAME, MATERIALIZATION_REVISION,
    PROVIDER_ID, PROVIDER_REVISION,
};
pub use store::Layout;
