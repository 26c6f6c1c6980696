//! Host file trees a sandbox provider owns, shared by the providers that
//! keep them (Docker, Linux namespaces):
//!
//! * [`active_write`]: beginActiveWrite's journal, pause token,
//!   publication by rename and recovery, behind the small
//!   [`active_write::ActiveWriteHost`] trait a provider implements (how
//!   its workload is paused and resumed, how an instance is looked up);
//! * [`busybox`]: finding a static busybox (the given path, else Debian's
//!   `busybox-static` fetched with `apt-get download` into a cache);
//! * [`rootfs`]: the checked busybox and the deterministic root file
//!   system tar of the offline fixture image;
//! * [`archive`]: snapshot archives of host directories, written by
//!   descriptor and extracted without ever writing through a link,
//!   sparse-aware and bounded in host bytes and time;
//! * [`leaves`]: the leaves of a host directory (files with size and
//!   SHA-256, symlinks, special files, empty directories) for listDir and
//!   listProjectDir;
//! * [`store`]: the state directory's shared layout, records on disk, ids
//!   and where a sandbox path lives ([`store::home_of`],
//!   [`store::relative_to`]);
//! * [`reads`]: readFile, readFiles, listDir and listProjectDir over an
//!   instance's host directories;
//! * [`write`](mod@write): writeFile into an instance's host directories;
//! * [`process`]: the one-live-process-per-instance table of openProcess
//!   and the opening of a process up to its start;
//! * [`errors`]: containment and host failures as the contract's errors;
//! * [`host`]: what the shared lifecycle code needs of a provider
//!   ([`host::HostInstances`], implemented once per provider);
//! * [`rollbacks`]: the rollbacks of the allocating members over it;
//! * [`instance`]: an instance as returned, and the provider-side
//!   admission of a provision request;
//! * [`instance_dirs`]: an instance's host directories made at provision
//!   and removed at destroy;
//! * [`argument_space`]: the kernel's argument space a command must fit;
//! * [`nft`]: the allowlist egress nftables rule set, a pure function of
//!   the endpoints, loaded by both providers into an instance namespace;
//! * [`allowlist`]: an allowlist's destinations resolved into endpoints
//!   and name pins;
//! * [`host_tools`]: finding `nsenter`, `nft` and `ip`, and checking that
//!   a rule set loads.
//!
//! Everything inside a directory a workload can write is touched only
//! through [`checkfu_sandbox_contained`].

pub mod active_write;
pub mod allowlist;
pub mod archive;
pub mod argument_space;
pub mod busybox;
pub mod conformance_target;
pub mod errors;
pub mod host;
pub mod host_envelope;
pub mod host_tools;
pub mod instance;
pub mod instance_dirs;
pub mod leaves;
pub mod lifecycle;
pub mod nft;
pub mod process;
pub mod reads;
pub mod records;
pub mod rollbacks;
pub mod rootfs;
pub mod snapshot_files;
pub mod store;
pub mod sweep_rule;
pub mod write;
