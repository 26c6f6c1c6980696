//! Walking a tree beneath a root descriptor without following symlinks.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

use crate::error::{io_at, ContainedError};
use crate::open::reopen_regular;

/// One entry as [`walk`] visits it, parents before children, siblings in
/// byte order of their names.
#[derive(Debug)]
pub enum WalkEntry<'a> {
    /// A directory (visited before its entries). `mode` is `st_mode & 0o7777`.
    Directory {
        /// Path relative to the root.
        path: &'a Path,
        /// Permission bits.
        mode: u32,
        /// Whether it holds no entries.
        empty: bool,
    },
    /// A regular file, with a descriptor open for reading on the very file
    /// that was listed.
    RegularFile {
        /// Path relative to the root.
        path: &'a Path,
        /// Permission bits.
        mode: u32,
        /// Size in bytes per `fstat` at open time.
        size_bytes: u64,
        /// Open for reading; the visitor may consume it.
        file: &'a mut File,
    },
    /// A symlink and its raw target (not followed).
    Symlink {
        /// Path relative to the root.
        path: &'a Path,
        /// Raw target.
        target: &'a Path,
    },
    /// A FIFO, socket, device or unknown object (not opened).
    Special {
        /// Path relative to the root.
        path: &'a Path,
        /// Its kind.
        kind: SpecialKind,
    },
}

/// The kind of an entry that is neither a directory, a regular file nor
/// a symlink. Such entries are reported, never opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialKind {
    /// A character device node.
    CharDevice,
    /// A block device node.
    BlockDevice,
    /// A Unix domain socket.
    Socket,
    /// A named pipe.
    Fifo,
    /// Anything else the kernel reports.
    Other,
}

fn kind_of_special(ft: FileType) -> SpecialKind {
    match ft {
        FileType::CharacterDevice => SpecialKind::CharDevice,
        FileType::BlockDevice => SpecialKind::BlockDevice,
        FileType::Socket => SpecialKind::Socket,
        FileType::Fifo => SpecialKind::Fifo,
        _ => SpecialKind::Other,
    }
}

/// Walks everything under `root` without following any symlink, calling
/// `visit` for each entry (the root itself is not visited).
///
/// `max_entries` bounds the number of entries visited (directories
/// included). Uses an explicit stack, so depth is bounded only by
/// `max_entries`.
///
/// # Errors
///
/// [`ContainedError::TooManyEntries`] past the bound; `Io` when an entry
/// changes under the walk (for example a directory swapped for a symlink
/// between listing and opening) or any other failure; whatever `visit`
/// returns.
pub fn walk(
    root: BorrowedFd<'_>,
    max_entries: usize,
    visit: &mut dyn FnMut(WalkEntry<'_>) -> Result<(), ContainedError>,
) -> Result<(), ContainedError> {
    let root_dup = rustix::io::fcntl_dupfd_cloexec(root, 0).map_err(|e| io_at(Path::new(""), e))?;
    let mut stack: Vec<(PathBuf, OwnedFd)> = vec![(PathBuf::new(), root_dup)];
    let mut seen = 0usize;
    while let Some((dir_path, dir_fd)) = stack.pop() {
        let names = list_names(&dir_fd, &dir_path)?;
        // Children pushed in reverse so they pop in byte order.
        let mut subdirs = Vec::new();
        for name in names {
            seen += 1;
            if seen > max_entries {
                return Err(ContainedError::TooManyEntries { max_entries });
            }
            let rel = dir_path.join(OsStr::from_bytes(&name));
            let st = rustix::fs::statat(&dir_fd, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io_at(&rel, e))?;
            let ft = FileType::from_raw_mode(st.st_mode);
            let mode = st.st_mode & 0o7777;
            match ft {
                FileType::Directory => {
                    let fd = rustix::fs::openat(
                        &dir_fd,
                        name.as_slice(),
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| io_at(&rel, e))?;
                    same_object(&fd, &st, &rel)?;
                    let empty = list_names(&fd, &rel)?.is_empty();
                    visit(WalkEntry::Directory {
                        path: &rel,
                        mode,
                        empty,
                    })?;
                    if !empty {
                        subdirs.push((rel, fd));
                    }
                }
                FileType::RegularFile => {
                    let path_fd = rustix::fs::openat(
                        &dir_fd,
                        name.as_slice(),
                        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| io_at(&rel, e))?;
                    same_object(&path_fd, &st, &rel)?;
                    let fd = reopen_regular(&path_fd, &rel)?;
                    let mut file = File::from(fd);
                    visit(WalkEntry::RegularFile {
                        path: &rel,
                        mode,
                        size_bytes: st.st_size as u64,
                        file: &mut file,
                    })?;
                }
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(&dir_fd, name.as_slice(), Vec::new())
                        .map_err(|e| io_at(&rel, e))?;
                    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    visit(WalkEntry::Symlink {
                        path: &rel,
                        target: &target,
                    })?;
                }
                other => {
                    visit(WalkEntry::Special {
                        path: &rel,
                        kind: kind_of_special(other),
                    })?;
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

fn same_object(fd: &OwnedFd, listed: &rustix::fs::Stat, rel: &Path) -> Result<(), ContainedError> {
    let st = rustix::fs::fstat(fd).map_err(|e| io_at(rel, e))?;
    if st.st_dev != listed.st_dev || st.st_ino != listed.st_ino {
        return Err(ContainedError::Io {
            path: rel.to_path_buf(),
            source: io::Error::other("entry changed during the walk"),
        });
    }
    Ok(())
}

fn list_names(dir_fd: &OwnedFd, dir_path: &Path) -> Result<Vec<Vec<u8>>, ContainedError> {
    // `Dir::read_from` opens "." relative to the descriptor, so the
    // listing is of this very directory and our descriptor's offset is
    // left alone.
    let mut dir = Dir::read_from(dir_fd.as_fd()).map_err(|e| io_at(dir_path, e))?;
    let mut names = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(|e| io_at(dir_path, e))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        names.push(name.to_vec());
    }
    names.sort();
    Ok(names)
}
