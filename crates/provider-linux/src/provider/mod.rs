//! [`LinuxProvider`]: the sandbox provider over Linux namespaces, with no
//! daemon.
//!
//! # Objects and where they live
//!
//! | object | on the host | state directory ([`crate::store`]) |
//! |---|---|---|
//! | instance in `provisioning` | nothing | `instances/<id>/instance.json`, host dirs, root layer |
//! | instance in `active` | its init (pid 1 of its namespaces) and cgroups | the same, with the init's pid and start time |
//! | snapshot | nothing | `snapshots/<id>/` record and archives |
//! | image | nothing | `images/` (OCI layout and unpacked roots) |
//!
//! The records are the only inventory: a fresh provider object over the
//! same state directory and scope ([`LinuxProvider::reopen`], or a new
//! [`LinuxProvider::new`] after a restart) finds everything again, and
//! cleanup sweeps from them. An init is recognised by its pid and start
//! time together, so a reused pid is never killed.
//!
//! # Isolation
//!
//! Each instance is a mount, PID, network, UTS and IPC namespace: its root
//! is an overlay of the image (shared, read-only) with a writable layer of
//! its own, entered with `pivot_root`, the old root detached; `/proc` is
//! the instance's own with `/proc/sys` and a few more read-only or masked;
//! `/dev` holds only the null, zero, full, random and urandom nodes and
//! the fd and stdio links, read-only to the workload user (the image's
//! shared tree holds them, [`crate::image::dev_ready`]; else a small
//! tmpfs with the host's nodes bound in); `/sys` is not mounted; the network namespace is empty but for
//! loopback. Every command runs in a PID namespace nested in the
//! instance's, as the workload user, with empty capability sets,
//! `no_new_privs` and the seccomp deny list ([`crate::seccomp`]), inside
//! the instance's cgroups. There is no user namespace: uid 0 inside is
//! uid 0 on the host without capabilities, which is why the workload runs
//! as uid 1000 by default. Namespaces share the host kernel: they are not
//! a virtual machine boundary.
//!
//! # Decisions
//!
//! * **Derived image.** The envelope offers no package manager: the root
//!   is the root image from the store ([`crate::image`]), never pulled.
//! * **Containment.** Reads, listings and writes of mounts and the output
//!   tree go through descriptors beneath their host directories
//!   ([`checkfu_sandbox_contained`]).
//! * **Snapshots.** Uncompressed tars of every mount's host directory, of
//!   the output tree and of the writable root layer. Custody `runner`.
//! * **beginActiveWrite.** The journal, publication and recovery of
//!   [`checkfu_sandbox_hostfs::active_write`], the workload paused with
//!   the instance's cgroup freezer (`active_write`), offered where the host
//!   has one ([`crate::cgroup::FreezerSupport`]).
//! * **Network.** Mode `none` is an empty network namespace (loopback
//!   only). Mode `allowlist`, offered only where
//!   [`crate::network::EgressSupport`] probed it enforceable, adds a veth
//!   pair to the scope's bridge and an nftables rule set loaded from the
//!   host ([`crate::network`]).

mod active_write;
mod command;
mod egress;
mod envelope;
mod errors;
mod execute;
mod host;
mod inner;
mod instances;
mod lifecycle;
mod open_process;
mod reads;
mod sandbox;
mod snapshots;
mod sweep;

pub use envelope::{envelope, envelope_for, host_platform};
pub use inner::{
    availability, LinuxConfig, LinuxProvider, LinuxProviderError, WorkloadUser,
    MATERIALIZATION_REVISION, PROVIDER_ID, PROVIDER_REVISION,
};
pub use instances::INSTANCE_HOSTNAME;
pub use sweep::{Inventory, ObjectTimes};
