//! Creating directories and writing files beneath a root descriptor without
//! following any symlink.
//!
//! Every directory on the way is created with `mkdirat` relative to its
//! parent's descriptor and opened with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, so a symlink planted anywhere among the parents is
//! refused ([`ContainedError::OutsideRoot`]) rather than written through.
//! Here a component that must be a directory and is not one (and a
//! directory where a file is to be written) is
//! [`ContainedError::NotRegularFile`].

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};

use crate::error::ContainedError;

/// Mode of the directories created on the way.
pub const DIR_MODE: u32 = 0o755;
/// Mode of the files written.
pub const FILE_MODE: u32 = 0o644;
/// Prefix of the temporary name [`replace_beneath`] writes to before it
/// renames the file into place.
pub const TEMP_PREFIX: &str = ".checkfu-write-";

fn map_errno(path: &Path, e: rustix::io::Errno) -> ContainedError {
    use rustix::io::Errno;
    let path = path.to_path_buf();
    match e {
        Errno::XDEV | Errno::LOOP => ContainedError::OutsideRoot { path },
        Errno::NOENT => ContainedError::NotFound { path },
        Errno::NOTDIR => ContainedError::NotRegularFile { path },
        other => ContainedError::Io {
            path,
            source: io::Error::from(other),
        },
    }
}

fn chown_fd(fd: BorrowedFd<'_>, owner: Option<u32>, path: &Path) -> Result<(), ContainedError> {
    if let Some(uid) = owner {
        std::os::unix::fs::fchown(fd, Some(uid), Some(uid)).map_err(|source| {
            ContainedError::Io {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Opens (creating when missing, mode [`DIR_MODE`], owned by `owner`) every
/// directory of `components` beneath `root`, refusing any symlink on the
/// way, and returns the last one (a duplicate of `root` when empty).
fn open_dirs_creating(
    root: BorrowedFd<'_>,
    components: &[&OsStr],
    owner: Option<u32>,
    rel: &Path,
) -> Result<OwnedFd, ContainedError> {
    let mut dir = rustix::io::fcntl_dupfd_cloexec(root, 0).map_err(|e| map_errno(rel, e))?;
    for name in components {
        let created = match rustix::fs::mkdirat(&dir, *name, Mode::from_raw_mode(DIR_MODE)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(map_errno(rel, e)),
        };
        let next = rustix::fs::openat2(
            &dir,
            *name,
            // No O_NOFOLLOW: with O_DIRECTORY it turns a symlink into
            // ENOTDIR; RESOLVE_NO_SYMLINKS refuses it as ELOOP instead.
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| map_errno(rel, e))?;
        if created {
            // Exactly DIR_MODE whatever the process umask.
            rustix::fs::fchmod(&next, Mode::from_raw_mode(DIR_MODE))
                .map_err(|e| map_errno(rel, e))?;
            chown_fd(next.as_fd(), owner, rel)?;
        }
        dir = next;
    }
    Ok(dir)
}

/// The plain components of `rel`: no `.`, `..`, root or NUL, at least one.
fn split_components(rel: &Path) -> Result<Vec<&OsStr>, ContainedError> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) if !n.as_bytes().contains(&0) => out.push(n),
            _ => {
                return Err(ContainedError::InvalidPath {
                    path: rel.to_path_buf(),
                })
            }
        }
    }
    if out.is_empty() {
        return Err(ContainedError::InvalidPath {
            path: rel.to_path_buf(),
        });
    }
    Ok(out)
}

/// Creates the directory `rel` (and its parents) beneath `root` without
/// following any symlink, and returns it open. New directories get mode
/// [`DIR_MODE`] and, when `owner` is set, `owner:owner`.
///
/// # Errors
///
/// [`ContainedError::InvalidPath`] unless `rel` is one or more plain
/// components; [`ContainedError::OutsideRoot`] when a component is a
/// symlink; [`ContainedError::NotRegularFile`] when one is not a
/// directory; `Io` otherwise.
pub fn create_dirs_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    owner: Option<u32>,
) -> Result<OwnedFd, ContainedError> {
    let comps = split_components(rel)?;
    open_dirs_creating(root, &comps, owner, rel)
}

/// Makes `rel` beneath `root` a directory with permission bits `mode`
/// (masked to `0o777`, applied exactly whatever the process umask), without
/// following any symlink: missing parents are created as by
/// [`create_dirs_beneath`], the last component is created when missing or
/// kept when it is a directory, then set to `mode` and, when `owner` is
/// set, `owner:owner`.
///
/// # Errors
///
/// As [`create_dirs_beneath`]: a symlink at any component (the last one
/// included) is [`ContainedError::OutsideRoot`], a file there
/// [`ContainedError::NotRegularFile`].
pub fn create_dir_beneath_mode(
    root: BorrowedFd<'_>,
    rel: &Path,
    owner: Option<u32>,
    mode: u32,
) -> Result<(), ContainedError> {
    let comps = split_components(rel)?;
    let dir = open_dirs_creating(root, &comps, owner, rel)?;
    chown_fd(dir.as_fd(), owner, rel)?;
    rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode & 0o777)).map_err(|e| map_errno(rel, e))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
/// How many fresh temporary names [`replace_beneath`] tries before giving up.
const TEMP_ATTEMPTS: u32 = 8;

fn temp_name() -> String {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{TEMP_PREFIX}{}-{n}-{nanos:x}", std::process::id())
}

/// Writes `content` at `rel` beneath `root`, replacing what is there:
/// parents are created as by [`create_dirs_beneath`], the bytes go to a
/// fresh temporary file in the parent (`O_CREAT | O_EXCL | O_NOFOLLOW`,
/// mode [`FILE_MODE`], `owner`) that is then renamed over the name. A
/// symlink at the name is replaced, never followed; a directory there is
/// refused. On failure the temporary file is removed.
///
/// # Errors
///
/// [`ContainedError::OutsideRoot`] for a symlink among the parents,
/// [`ContainedError::NotRegularFile`] when a parent is not a directory or
/// the name is a directory, `InvalidPath`, `Io`.
pub fn replace_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    content: &[u8],
    owner: Option<u32>,
) -> Result<(), ContainedError> {
    replace_beneath_mode(root, rel, content, owner, FILE_MODE)
}

/// [`replace_beneath`] with the file's permission bits `mode` (masked to
/// `0o777`, applied exactly, whatever the process umask) instead of
/// [`FILE_MODE`].
///
/// # Errors
///
/// As [`replace_beneath`].
pub fn replace_beneath_mode(
    root: BorrowedFd<'_>,
    rel: &Path,
    content: &[u8],
    owner: Option<u32>,
    mode: u32,
) -> Result<(), ContainedError> {
    let mode = mode & 0o777;
    let comps = split_components(rel)?;
    let (name, parents) = comps
        .split_last()
        .ok_or_else(|| ContainedError::InvalidPath {
            path: rel.to_path_buf(),
        })?;
    let dir = open_dirs_creating(root, parents, owner, rel)?;
    let mut attempt = 0;
    let (tmp, fd) = loop {
        let tmp = temp_name();
        match rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        ) {
            Ok(fd) => break (tmp, fd),
            Err(rustix::io::Errno::EXIST) if attempt + 1 < TEMP_ATTEMPTS => attempt += 1,
            Err(e) => return Err(map_errno(rel, e)),
        }
    };
    let result = (|| {
        let mut file = std::fs::File::from(fd);
        file.write_all(content)
            .and_then(|()| file.flush())
            .map_err(|source| ContainedError::Io {
                path: rel.to_path_buf(),
                source,
            })?;
        chown_fd(file.as_fd(), owner, rel)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|e| map_errno(rel, e))?;
        rustix::fs::renameat(&dir, tmp.as_str(), &dir, *name).map_err(|e| match e {
            rustix::io::Errno::ISDIR | rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST => {
                ContainedError::NotRegularFile {
                    path: rel.to_path_buf(),
                }
            }
            other => map_errno(rel, other),
        })
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
    }
    result
}

/// Writes `content` at `rel` beneath `root` in place: parents are created
/// as by [`create_dirs_beneath`] (no owner change), and the name is opened
/// with `O_CREAT | O_TRUNC | O_NOFOLLOW` (mode [`FILE_MODE`] when created).
/// Unlike [`replace_beneath`], a symlink at the name is refused rather than
/// replaced.
///
/// # Errors
///
/// [`ContainedError::OutsideRoot`] for a symlink among the parents or at
/// the name, [`ContainedError::NotRegularFile`] when a parent is not a
/// directory, `InvalidPath`, `Io` (including a directory at the name).
pub fn overwrite_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    content: &[u8],
) -> Result<(), ContainedError> {
    overwrite(root, rel, content).map(drop)
}

/// [`overwrite_beneath`], then the file's permission bits set to exactly
/// `mode` (masked to `0o777`: no set-id or sticky bit, whatever the
/// process umask and whatever bits the file had).
///
/// # Errors
///
/// As [`overwrite_beneath`].
pub fn overwrite_beneath_mode(
    root: BorrowedFd<'_>,
    rel: &Path,
    content: &[u8],
    mode: u32,
) -> Result<(), ContainedError> {
    let file = overwrite(root, rel, content)?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o777)).map_err(|e| map_errno(rel, e))
}

fn overwrite(
    root: BorrowedFd<'_>,
    rel: &Path,
    content: &[u8],
) -> Result<std::fs::File, ContainedError> {
    let comps = split_components(rel)?;
    let (name, parents) = comps
        .split_last()
        .ok_or_else(|| ContainedError::InvalidPath {
            path: rel.to_path_buf(),
        })?;
    let dir = open_dirs_creating(root, parents, None, rel)?;
    let fd = rustix::fs::openat(
        &dir,
        *name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(FILE_MODE),
    )
    .map_err(|e| map_errno(rel, e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(content)
        .and_then(|()| file.flush())
        .map_err(|source| ContainedError::Io {
            path: rel.to_path_buf(),
            source,
        })?;
    Ok(file)
}
