//! Docker provider for the checkfu sandbox seam.
//!
//! [`DockerProvider`] implements the contract's
//! [`SandboxProvider`](checkfu_sandbox_contract::SandboxProvider) over the
//! local Docker daemon, with the optional readFiles, listDir,
//! listProjectDir and openProcess members (see [`provider`] for the
//! design: objects, labels, user, snapshots). It is built in layers:
//!
//! * [`contained`]: physically contained reads and walks on the host
//!   directories the provider owns (openat2, `RESOLVE_BENEATH`);
//! * [`fixture`]: builds the offline `FROM scratch` busybox fixture image
//!   (from Debian's `busybox-static` at [`fixture::DEFAULT_BUSYBOX_PATH`],
//!   `/bin/busybox`) with [`fixture::ensure_fixture`], and resolves pinned
//!   image references;
//! * [`daemon`]: thin helpers over bollard for containers, bounded and
//!   streaming execs, commits, label sweeps and snapshot archives;
//! * [`store`]: the state directory (records, host directories, contained
//!   writes);
//! * [`provider`] and the private `process` module: the provider itself;
//! * [`testnet`]: listeners and a control dialer on a private network, for
//!   the egress conformance cases.

pub mod busybox;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod contained;
pub mod daemon;
pub mod fixture;
mod members;
mod process;
pub mod provider;
pub mod store;
pub mod testnet;

pub use bollard;
pub use bollard::Docker;
pub use provider::{DockerConfig, DockerProvider, DockerProviderError, Inventory, ObjectTimes};
