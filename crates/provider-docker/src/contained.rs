//! Physically contained reads and walks on provider-owned host directories.
//!
//! The Docker provider keeps every mount and the output tree of an instance
//! in host directories it owns and bind-mounts into the container. The
//! workload can write anything into the read-write ones, including symlinks
//! that point outside, so reading them back must bind resolution and
//! consumption together: every operation here resolves to a file descriptor
//! under a root directory descriptor and reads from that descriptor. Nothing
//! compares path strings, so nothing can be swapped between a check and the
//! read.
//!
//! # Resolution rules
//!
//! [`open_beneath`] resolves with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`:
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
//! * the final object is opened with `O_PATH` first, checked with `fstat`
//!   to be a regular file, and only then reopened for reading through the
//!   descriptor (`/proc/self/fd/N`). Opening a FIFO, socket or device node
//!   for reading therefore never happens, so a workload-created FIFO cannot
//!   block a read and a device node cannot be poked.
//!
//! The walk ([`walk_leaves`], [`walk`]) never follows a symlink: every step
//! is `statat(AT_SYMLINK_NOFOLLOW)` plus `openat(O_NOFOLLOW)` relative to
//! the parent's descriptor, and a directory is only descended into after its
//! descriptor's device and inode match what was listed.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, CWD};
use sha2::{Digest, Sha256};

/// Failure of a contained operation. Every variant names the relative path
/// it was asked about (or the entry that failed during a walk).
#[derive(Debug, thiserror::Error)]
pub enum ContainedError {
    /// The path resolves, or tries to resolve, outside the root: a `..`
    /// above the root, an absolute path or symlink, a procfs magic link, or
    /// (with [`open_beneath_nofollow`]) any symlink.
    #[error("path {path:?} resolves outside the root")]
    OutsideRoot {
        /// The relative path requested.
        path: PathBuf,
    },
    /// A component of the path does not exist (including a dangling link).
    #[error("path {path:?} not found under the root")]
    NotFound {
        /// The relative path requested.
        path: PathBuf,
    },
    /// The path resolves to something that is not a regular file.
    #[error("path {path:?} is not a regular file")]
    NotRegularFile {
        /// The relative path requested.
        path: PathBuf,
    },
    /// The file holds more than the caller's `maximum_bytes`.
    #[error("file {path:?} is larger than {maximum_bytes} bytes")]
    TooLarge {
        /// The relative path requested.
        path: PathBuf,
        /// The caller's bound.
        maximum_bytes: u64,
    },
    /// The walk met more than `max_entries` entries.
    #[error("more than {max_entries} entries under the root")]
    TooManyEntries {
        /// The caller's bound.
        max_entries: usize,
    },
    /// The path is empty or holds a NUL byte.
    #[error("path {path:?} is not a valid relative path")]
    InvalidPath {
        /// The relative path requested.
        path: PathBuf,
    },
    /// Any other operating-system failure.
    #[error("i/o failure on {path:?}")]
    Io {
        /// The relative path (or entry) involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn map_errno(path: &Path, err: rustix::io::Errno) -> ContainedError {
    use rustix::io::Errno;
    let path = path.to_path_buf();
    match err {
        // EXDEV: `..` above the root, absolute path or absolute symlink.
        // ELOOP: magic link under RESOLVE_NO_MAGICLINKS, a symlink under
        // O_NOFOLLOW / RESOLVE_NO_SYMLINKS, or a link loop; none of them is
        // a file under the root that we may read.
        Errno::XDEV | Errno::LOOP => ContainedError::OutsideRoot { path },
        Errno::NOENT => ContainedError::NotFound { path },
        // A non-directory used as a directory component.
        Errno::NOTDIR => ContainedError::NotFound { path },
        other => ContainedError::Io {
            path,
            source: io::Error::from(other),
        },
    }
}

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

fn check_relative(relative_path: &Path) -> Result<(), ContainedError> {
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
fn reopen_regular(path_fd: &OwnedFd, relative_path: &Path) -> Result<OwnedFd, ContainedError> {
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

/// What a walk found at one path. Directories that hold entries are not
/// leaves; an empty directory is reported so that it is not lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafKind {
    /// A regular file: its size in bytes and the SHA-256 of its content,
    /// both computed from the same descriptor.
    RegularFile {
        /// Size in bytes, as read.
        size_bytes: u64,
        /// SHA-256 of the bytes read.
        sha256: [u8; 32],
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
    },
    /// A symbolic link (never followed); its target as stored.
    Symlink {
        /// The raw link target.
        target: PathBuf,
    },
    /// A directory with no entries.
    EmptyDirectory,
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

/// One leaf found by [`walk_leaves`]: its path relative to the root
/// (components joined by `/`, no leading `/`) and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    /// Path relative to the root.
    pub path: PathBuf,
    /// What is there.
    pub kind: LeafKind,
}

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
        /// Its kind (one of the special [`LeafKind`] variants).
        kind: LeafKind,
    },
}

fn kind_of_special(ft: FileType) -> LeafKind {
    match ft {
        FileType::CharacterDevice => LeafKind::CharDevice,
        FileType::BlockDevice => LeafKind::BlockDevice,
        FileType::Socket => LeafKind::Socket,
        FileType::Fifo => LeafKind::Fifo,
        _ => LeafKind::Other,
    }
}

fn io_at(path: &Path, err: rustix::io::Errno) -> ContainedError {
    ContainedError::Io {
        path: path.to_path_buf(),
        source: io::Error::from(err),
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

/// Lists every leaf under `root` (regular files with size and SHA-256,
/// symlinks with their targets, special files, empty directories), without
/// following symlinks, in walk order.
///
/// # Errors
///
/// As [`walk`].
pub fn walk_leaves(root: BorrowedFd<'_>, max_entries: usize) -> Result<Vec<Leaf>, ContainedError> {
    let mut leaves = Vec::new();
    walk(root, max_entries, &mut |entry| {
        match entry {
            WalkEntry::Directory { path, empty, .. } => {
                if empty {
                    leaves.push(Leaf {
                        path: path.to_path_buf(),
                        kind: LeafKind::EmptyDirectory,
                    });
                }
            }
            WalkEntry::RegularFile {
                path, mode, file, ..
            } => {
                let mut hasher = Sha256::new();
                let mut buf = vec![0u8; 64 * 1024];
                let mut size_bytes = 0u64;
                loop {
                    let n = file.read(&mut buf).map_err(|source| ContainedError::Io {
                        path: path.to_path_buf(),
                        source,
                    })?;
                    if n == 0 {
                        break;
                    }
                    size_bytes += n as u64;
                    hasher.update(&buf[..n]);
                }
                leaves.push(Leaf {
                    path: path.to_path_buf(),
                    kind: LeafKind::RegularFile {
                        size_bytes,
                        sha256: hasher.finalize().into(),
                        mode,
                    },
                });
            }
            WalkEntry::Symlink { path, target } => leaves.push(Leaf {
                path: path.to_path_buf(),
                kind: LeafKind::Symlink {
                    target: target.to_path_buf(),
                },
            }),
            WalkEntry::Special { path, kind } => leaves.push(Leaf {
                path: path.to_path_buf(),
                kind,
            }),
        }
        Ok(())
    })?;
    Ok(leaves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A scratch directory removed on drop.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(tag: &str) -> Self {
            let p = std::env::temp_dir().join(format!(
                "checkfu-contained-{tag}-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// root/ plus a sibling secret outside it.
    fn setup(tag: &str) -> (Scratch, PathBuf, OwnedFd) {
        let s = Scratch::new(tag);
        let root = s.0.join("root");
        std::fs::create_dir_all(root.join("sub/deep")).unwrap();
        std::fs::write(s.0.join("secret"), b"TOP-SECRET").unwrap();
        std::fs::write(root.join("ok.txt"), b"hello").unwrap();
        std::fs::write(root.join("sub/deep/f.txt"), b"deep").unwrap();
        let fd = open_root(&root).unwrap();
        (s, root, fd)
    }

    fn read(fd: &OwnedFd, p: &str) -> Result<Vec<u8>, ContainedError> {
        read_beneath(fd.as_fd(), Path::new(p), 1024)
    }

    fn assert_outside(r: Result<Vec<u8>, ContainedError>) {
        match r {
            Err(ContainedError::OutsideRoot { .. }) => {}
            other => panic!("expected OutsideRoot, got {other:?}"),
        }
    }

    #[test]
    fn plain_reads_and_in_root_links_work() {
        let (_s, root, fd) = setup("plain");
        assert_eq!(read(&fd, "ok.txt").unwrap(), b"hello");
        assert_eq!(read(&fd, "sub/deep/f.txt").unwrap(), b"deep");
        assert_eq!(read(&fd, "sub/../ok.txt").unwrap(), b"hello");
        symlink("sub/deep/f.txt", root.join("rel-in")).unwrap();
        symlink("../ok.txt", root.join("sub/up-in")).unwrap();
        symlink("sub", root.join("dirlink")).unwrap();
        assert_eq!(read(&fd, "rel-in").unwrap(), b"deep");
        assert_eq!(read(&fd, "sub/up-in").unwrap(), b"hello");
        assert_eq!(read(&fd, "dirlink/deep/f.txt").unwrap(), b"deep");
        // The strict variant refuses in-root links too.
        assert!(matches!(
            open_beneath_nofollow(fd.as_fd(), Path::new("rel-in")),
            Err(ContainedError::OutsideRoot { .. })
        ));
    }

    #[test]
    fn escape_absolute_symlink() {
        let (s, root, fd) = setup("abs");
        symlink(s.0.join("secret"), root.join("abs")).unwrap();
        assert_outside(read(&fd, "abs"));
    }

    #[test]
    fn escape_relative_dotdot_symlink() {
        let (_s, root, fd) = setup("reldd");
        symlink("../secret", root.join("up")).unwrap();
        assert_outside(read(&fd, "up"));
        symlink("../../secret", root.join("sub/up2")).unwrap();
        assert_outside(read(&fd, "sub/up2"));
    }

    #[test]
    fn escape_dotdot_in_path() {
        let (_s, _root, fd) = setup("ddpath");
        assert_outside(read(&fd, "../secret"));
        assert_outside(read(&fd, "sub/../../secret"));
        assert_outside(read(&fd, "sub/deep/../../../secret"));
    }

    #[test]
    fn escape_absolute_path_argument() {
        let (s, _root, fd) = setup("abspath");
        let p = s.0.join("secret");
        assert_outside(read(&fd, p.to_str().unwrap()));
        assert_outside(read(&fd, "/etc/passwd"));
    }

    #[test]
    fn dangling_link_is_not_found() {
        let (_s, root, fd) = setup("dangling");
        symlink("nowhere", root.join("dangle")).unwrap();
        assert!(matches!(
            read(&fd, "dangle"),
            Err(ContainedError::NotFound { .. })
        ));
        assert!(matches!(
            read(&fd, "missing"),
            Err(ContainedError::NotFound { .. })
        ));
        // A dangling absolute link is still an escape, not a miss.
        symlink("/nonexistent/checkfu", root.join("dangle-abs")).unwrap();
        assert_outside(read(&fd, "dangle-abs"));
    }

    #[test]
    fn escape_link_chain() {
        let (_s, root, fd) = setup("chain");
        symlink("b", root.join("a")).unwrap();
        symlink("sub/c", root.join("b")).unwrap();
        symlink("../../secret", root.join("sub/c")).unwrap();
        assert_outside(read(&fd, "a"));
    }

    #[test]
    fn escape_proc_self_root() {
        let (_s, root, fd) = setup("procroot");
        symlink("/proc/self/root", root.join("pr")).unwrap();
        assert_outside(read(&fd, "pr/etc/passwd"));
        // A relative path that walks into a bind-mounted-like procfs is
        // refused by RESOLVE_BENEATH before magic links matter.
        symlink("/proc/self/fd", root.join("pfd")).unwrap();
        assert_outside(read(&fd, "pfd/0"));
    }

    #[test]
    fn escape_symlinked_directory_component() {
        let (s, root, fd) = setup("dircomp");
        std::fs::create_dir(s.0.join("outside")).unwrap();
        std::fs::write(s.0.join("outside/f"), b"OUT").unwrap();
        symlink(s.0.join("outside"), root.join("d-abs")).unwrap();
        symlink("../outside", root.join("d-rel")).unwrap();
        assert_outside(read(&fd, "d-abs/f"));
        assert_outside(read(&fd, "d-rel/f"));
        symlink("../d-rel", root.join("sub/d2")).unwrap();
        assert_outside(read(&fd, "sub/d2/f"));
    }

    #[test]
    fn link_loop_is_refused() {
        let (_s, root, fd) = setup("loop");
        symlink("l2", root.join("l1")).unwrap();
        symlink("l1", root.join("l2")).unwrap();
        assert_outside(read(&fd, "l1"));
    }

    #[test]
    fn non_regular_and_too_large() {
        let (_s, root, fd) = setup("nonreg");
        assert!(matches!(
            read(&fd, "sub"),
            Err(ContainedError::NotRegularFile { .. })
        ));
        let fifo = root.join("fifo");
        rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        // Must not block: O_PATH never opens the FIFO for reading.
        assert!(matches!(
            read(&fd, "fifo"),
            Err(ContainedError::NotRegularFile { .. })
        ));
        std::fs::write(root.join("big"), vec![7u8; 2048]).unwrap();
        assert!(matches!(
            read(&fd, "big"),
            Err(ContainedError::TooLarge {
                maximum_bytes: 1024,
                ..
            })
        ));
        std::fs::write(root.join("exact"), vec![7u8; 1024]).unwrap();
        assert_eq!(read(&fd, "exact").unwrap().len(), 1024);
        assert!(matches!(
            read(&fd, ""),
            Err(ContainedError::InvalidPath { .. })
        ));
    }

    #[test]
    fn root_swap_after_open_still_contained() {
        // The root descriptor keeps designating the original directory
        // even when its path is replaced by a symlink to elsewhere.
        let (s, root, fd) = setup("rootswap");
        std::fs::rename(&root, s.0.join("moved")).unwrap();
        symlink(s.0.clone(), &root).unwrap();
        assert_eq!(read(&fd, "ok.txt").unwrap(), b"hello");
        assert!(matches!(
            read(&fd, "secret"),
            Err(ContainedError::NotFound { .. })
        ));
    }

    #[test]
    fn racing_swap_never_returns_secret() {
        let (s, root, fd) = setup("race");
        let target = root.join("victim");
        let tmp_file = root.join("victim.file");
        let tmp_link = root.join("victim.link");
        let secret = s.0.join("secret");
        std::fs::write(&target, b"benign").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (target, tmp_file, tmp_link, secret) = (
                target.clone(),
                tmp_file.clone(),
                tmp_link.clone(),
                secret.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Atomically replace the file by a link, then back.
                    let _ = std::fs::remove_file(&tmp_link);
                    symlink(&secret, &tmp_link).unwrap();
                    std::fs::rename(&tmp_link, &target).unwrap();
                    std::fs::write(&tmp_file, b"benign").unwrap();
                    std::fs::rename(&tmp_file, &target).unwrap();
                    n += 1;
                }
                n
            })
        };
        let (mut ok, mut refused) = (0, 0);
        for _ in 0..2000 {
            match read(&fd, "victim") {
                Ok(bytes) => {
                    assert_ne!(bytes, b"TOP-SECRET", "secret leaked");
                    assert_eq!(bytes, b"benign");
                    ok += 1;
                }
                Err(ContainedError::OutsideRoot { .. }) | Err(ContainedError::NotFound { .. }) => {
                    refused += 1
                }
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 0);
        eprintln!("race: {ok} benign reads, {refused} refusals, {swaps} swaps");
    }

    #[test]
    fn walk_classifies_without_following() {
        let (s, root, fd) = setup("walk");
        symlink(s.0.join("secret"), root.join("abs")).unwrap();
        symlink("../secret", root.join("sub/rel")).unwrap();
        symlink(s.0.clone(), root.join("dirout")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        rustix::fs::mknodat(
            CWD,
            root.join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let leaves = walk_leaves(fd.as_fd(), 100).unwrap();
        let paths: Vec<_> = leaves
            .iter()
            .map(|l| l.path.to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            paths,
            vec![
                "abs",
                "dirout",
                "empty",
                "fifo",
                "ok.txt",
                "sub/rel",
                "sub/deep/f.txt"
            ]
        );
        let ok = leaves
            .iter()
            .find(|l| l.path == Path::new("ok.txt"))
            .unwrap();
        match &ok.kind {
            LeafKind::RegularFile {
                size_bytes, sha256, ..
            } => {
                assert_eq!(*size_bytes, 5);
                let want: [u8; 32] = Sha256::digest(b"hello").into();
                assert_eq!(*sha256, want);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(leaves[0].kind, LeafKind::Symlink { .. }));
        assert_eq!(leaves[3].kind, LeafKind::Fifo);
        assert_eq!(leaves[2].kind, LeafKind::EmptyDirectory);
        assert!(!leaves
            .iter()
            .any(|l| l.path.to_str().unwrap().contains("secret")));
        assert!(matches!(
            walk_leaves(fd.as_fd(), 3),
            Err(ContainedError::TooManyEntries { max_entries: 3 })
        ));
    }
}
