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
//! * [`process`]: the one-live-process-per-instance table of openProcess;
//! * [`errors`]: containment and host failures as the contract's errors;
//! * [`nft`]: the allowlist egress nftables rule set, a pure function of
//!   the endpoints, loaded by both providers into an instance namespace.
//!
//! Everything inside a directory a workload can write is touched only
//! through [`checkfu_sandbox_contained`].

pub mod active_write;
pub mod archive;
pub mod busybox;
pub mod errors;
pub mod leaves;
pub mod nft;
pub mod process;
pub mod reads;
pub mod rootfs;
pub mod store;
pub mod write;
