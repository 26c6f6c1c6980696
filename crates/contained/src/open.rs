//! Opening and reading regular files beneath a root descriptor
//! (`openat2(2)` with `RESOLVE_BENEATH`).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, CWD};

use crate::error::{map_errno, ContainedError};

/// Opens `root` (an absolute or relative host path) as the directory
/// descriptor that all contained operations resolve beneath.
///
/// The root itself may be reached through symlinks: it is chosen by the
/// provider, not by the workload.
///
/// # Errors
///
/// [`ContainedError::NotFound`] when it does not exist, `Io` otherwise
/// (including "not a directory").
pub fn open_root(root: &Path) -> Result<OwnedFd, ContainedError> {
    rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| map_errno(root, e))
}

pub(crate) fn check_relative(relative_path: &Path) -> Result<(), ContainedError> {
    let bytes = relative_path.as_os_str().as_bytes();
    if bytes.is_empty() || bytes.contains(&0) {
        return Err(ContainedError::InvalidPath {
            path: relative_path.to_path_buf(),
        });
    }
    Ok(())
}

fn open_path_beneath(
    root: BorrowedFd<'_>,
    relative_path: &Path,
    extra: ResolveFlags,
) -> Result<OwnedFd, ContainedError> {
    check_relative(relative_path)?;
    rustix::fs::openat2(
        root,
        relative_path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | extra,
    )
    .map_err(|e| map_errno(relative_path, e))
}

/// Reopens an `O_PATH` descriptor of a regular file for reading, through
/// the descriptor itself rather than any path the workload controls.
pub(crate) fn reopen_regular(
    path_fd: &OwnedFd,
    relative_path: &Path,
) -> Result<OwnedFd, ContainedError> {
    let st = rustix::fs::fstat(path_fd).map_err(|e| map_errno(relative_path, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(ContainedError::NotRegularFile {
            path: relative_path.to_path_buf(),
        });
    }
    let proc_path = format!("/proc/self/fd/{}", path_fd.as_raw_fd());
    let fd = rustix::fs::openat(
        CWD,
        proc_path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| ContainedError::Io {
        path: relative_path.to_path_buf(),
        source: io::Error::from(e),
    })?;
    // Same object? (The procfs link designates the O_PATH file itself, so
    // this only guards against a misconfigured /proc.)
    let st2 = rustix::fs::fstat(&fd).map_err(|e| map_errno(relative_path, e))?;
    if st2.st_dev != st.st_dev || st2.st_ino != st.st_ino {
        return Err(ContainedError::Io {
            path: relative_path.to_path_buf(),
            source: io::Error::other("reopened descriptor designates another file"),
        });
    }
    Ok(fd)
}

/// Resolves `relative_path` beneath `root` to an `O_PATH` descriptor of
/// whatever is there (file, directory, link target, special file), without
/// opening it for I/O. Follows relative symlinks that stay under the root.
///
/// Useful to check physically that a path (for example a symlink just
/// created) does not lead outside the root.
///
/// # Errors
///
/// [`ContainedError::OutsideRoot`], [`ContainedError::NotFound`],
/// [`ContainedError::InvalidPath`] and `Io`, as for [`open_beneath`].
pub fn resolve_beneath(
    root: BorrowedFd<'_>,
    relative_path: &Path,
) -> Result<OwnedFd, ContainedError> {
    open_path_beneath(root, relative_path, ResolveFlags::empty())
}

/// Opens the directory at `relative_path` beneath `root` (the root itself
/// when `relative_path` is empty) for use as the parent of further
/// `*at` calls, refusing every symlink on the way
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`).
///
/// # Errors
///
/// [`ContainedError::OutsideRoot`] for a symlink, `..` above the root or
/// absolute path; [`ContainedError::NotFound`] for a missing component or
/// one that is not a directory; `InvalidPath` for a NUL byte; `Io`.
pub fn open_dir_beneath_nofollow(
    root: BorrowedFd<'_>,
    relative_path: &Path,
) -> Result<OwnedFd, ContainedError> {
    let p: &Path = if relative_path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative_path
    };
    check_relative(p)?;
    rustix::fs::openat2(
        root,
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| map_errno(relative_path, e))
}

/// Opens the regular file at `relative_path` beneath `root` for reading.
///
/// Follows relative symlinks that stay under the root (see the module
/// documentation); refuses everything that would leave it.
///
/// # Errors
///
/// * [`ContainedError::OutsideRoot`]: escaping `..`, absolute path or link,
///   magic link, or a symlink loop;
/// * [`ContainedError::NotFound`]: a missing component or dangling link;
/// * [`ContainedError::NotRegularFile`]: a directory, FIFO, socket, device;
/// * [`ContainedError::InvalidPath`]: empty path or NUL byte;
/// * [`ContainedError::Io`]: anything else.
pub fn open_beneath(root: BorrowedFd<'_>, relative_path: &Path) -> Result<OwnedFd, ContainedError> {
    let path_fd = open_path_beneath(root, relative_path, ResolveFlags::empty())?;
    reopen_regular(&path_fd, relative_path)
}

/// Like [`open_beneath`] but refuses every symlink on the way
/// (`RESOLVE_NO_SYMLINKS`), reported as [`ContainedError::OutsideRoot`].
/// For callers that want a strictly link-free view.
///
/// # Errors
///
/// As [`open_beneath`].
pub fn open_beneath_nofollow(
    root: BorrowedFd<'_>,
    relative_path: &Path,
) -> Result<OwnedFd, ContainedError> {
    let path_fd = open_path_beneath(root, relative_path, ResolveFlags::NO_SYMLINKS)?;
    reopen_regular(&path_fd, relative_path)
}

/// Reads the regular file at `relative_path` beneath `root`, holding at
/// most `maximum_bytes` bytes.
///
/// Reads at most `maximum_bytes + 1` bytes from the descriptor, so a file
/// that grows while being read is still bounded.
///
/// # Errors
///
/// As [`open_beneath`], plus [`ContainedError::TooLarge`] when the file
/// holds more than `maximum_bytes` bytes.
pub fn read_beneath(
    root: BorrowedFd<'_>,
    relative_path: &Path,
    maximum_bytes: u64,
) -> Result<Vec<u8>, ContainedError> {
    let fd = open_beneath(root, relative_path)?;
    read_bounded(fd, relative_path, maximum_bytes)
}

fn read_bounded(
    fd: OwnedFd,
    relative_path: &Path,
    maximum_bytes: u64,
) -> Result<Vec<u8>, ContainedError> {
    let file = File::from(fd);
    let mut out = Vec::new();
    file.take(maximum_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|source| ContainedError::Io {
            path: relative_path.to_path_buf(),
            source,
        })?;
    if out.len() as u64 > maximum_bytes {
        return Err(ContainedError::TooLarge {
            path: relative_path.to_path_buf(),
            maximum_bytes,
        });
    }
    Ok(out)
}
