//! Host file trees a sandbox provider owns, shared by the providers that
//! keep them (Docker, Linux namespaces):
//!
//! * [`busybox`]: finding a static busybox (the given path, else Debian's
//!   `busybox-static` fetched with `apt-get download` into a cache);
//! * [`rootfs`]: the checked busybox and the deterministic root file
//!   system tar of the offline fixture image;
//! * [`archive`]: snapshot archives of host directories, written by
//!   descriptor and extracted without ever writing through a link;
//! * [`leaves`]: the leaves of a host directory (files with size and
//!   SHA-256, symlinks, special files, empty directories) for listDir and
//!   listProjectDir.
//!
//! Everything inside a directory a workload can write is touched only
//! through [`checkfu_sandbox_contained`].

pub mod archive;
pub mod busybox;
pub mod leaves;
pub mod nft;
pub mod rootfs;
