//! Physically contained file access beneath a root directory, for every
//! provider that keeps workload-writable trees on the host.
//!
//! A workload can write anything into a directory it shares with the host,
//! including symlinks that point outside and symlinks it keeps swapping, so
//! the host must bind resolution and consumption together: every operation
//! here resolves to a file descriptor under a root directory descriptor
//! ([`open_root`]) and works on that descriptor. Nothing compares path
//! strings, so nothing can be swapped between a check and the use.
//!
//! # Resolution rules
//!
//! [`open_beneath`], [`read_beneath`] and [`resolve_beneath`] resolve with
//! `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`:
//!
//! * a `..` that would climb above the root, an absolute path, or an
//!   absolute symlink anywhere in the path fails with `EXDEV`; all of these
//!   are [`ContainedError::OutsideRoot`];
//! * procfs magic links (`/proc/self/root`, `/proc/<pid>/fd/<n>`) fail with
//!   `ELOOP` and are also [`ContainedError::OutsideRoot`];
//! * **relative symlinks that stay inside the root are followed**, including
//!   as the last component. `RESOLVE_BENEATH` makes the kernel refuse any
//!   step of the resolution that would leave the root, so following them is
//!   safe, and workloads legitimately produce such links (`latest ->
//!   run-3/out.txt`). `O_NOFOLLOW` is deliberately **not** used on reads;
//!   [`open_beneath_nofollow`] is the strictly link-free variant;
//! * a dangling link, or a missing component, is [`ContainedError::NotFound`];
//! * the final object is opened with `O_PATH` first, checked with `fstat`
//!   to be a regular file, and only then reopened for reading through the
//!   descriptor (`/proc/self/fd/N`). Opening a FIFO, socket or device node
//!   for reading therefore never happens, so a workload-created FIFO cannot
//!   block a read and a device node cannot be poked.
//!
//! The walk ([`walk`]) never follows a symlink: every step is
//! `statat(AT_SYMLINK_NOFOLLOW)` plus `openat(O_NOFOLLOW)` relative to the
//! parent's descriptor, and a directory is only descended into after its
//! descriptor's device and inode match what was listed.
//!
//! Creation and writes ([`create_dirs_beneath`], [`create_dir_beneath_mode`],
//! [`replace_beneath`], [`overwrite_beneath`], [`open_dir_beneath_nofollow`])
//! follow no symlink at all (`RESOLVE_NO_SYMLINKS`, `O_NOFOLLOW`).
//!
//! Linux only (`openat2` needs Linux 5.6).

mod create;
mod error;
mod open;
mod walk;

pub use create::{
    create_dir_beneath_mode, create_dirs_beneath, overwrite_beneath, overwrite_beneath_mode,
    replace_beneath, replace_beneath_mode, DIR_MODE, FILE_MODE, TEMP_PREFIX,
};
pub use error::ContainedError;
pub use open::{
    open_beneath, open_beneath_nofollow, open_dir_beneath_nofollow, open_root, read_beneath,
    resolve_beneath,
};
pub use walk::{walk, SpecialKind, WalkEntry};
