//! The leaves of a host directory (files with size and SHA-256, symlinks,
//! special files, empty directories), listed by descriptor through
//! [`checkfu_sandbox_contained::walk`]: what listDir and listProjectDir
//! report.

use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use checkfu_sandbox_contained::{self as contained, ContainedError, SpecialKind, WalkEntry};
use sha2::{Digest, Sha256};

/// What a walk found at one path. Directories that hold entries are not
/// leaves; an empty directory is reported so that it is not lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafKind {
    /// A regular file: its size in bytes and the SHA-256 of its content,
    /// both computed from the same descriptor.
    RegularFile {
        /// Size in bytes, as read.
        size_bytes: u64,
        /// SHA-256 of the bytes read; `None` when the file was over the
        /// walk's hash limit and was not read (`size_bytes` is then
        /// `fstat`'s).
        sha256: Option<[u8; 32]>,
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

/// Lists every leaf under `root` (regular files with size and SHA-256,
/// symlinks with their targets, special files, empty directories), without
/// following symlinks, in walk order.
///
/// A regular file over `hash_limit` bytes (per `fstat`) is not read: its
/// leaf has no SHA-256.
///
/// # Errors
///
/// As [`contained::walk`].
pub fn walk_leaves(
    root: BorrowedFd<'_>,
    max_entries: usize,
    hash_limit: Option<u64>,
) -> Result<Vec<Leaf>, ContainedError> {
    let mut leaves = Vec::new();
    contained::walk(root, max_entries, &mut |entry| {
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
                path,
                mode,
                file,
                size_bytes: size,
            } => {
                if let Some(limit) = hash_limit {
                    if size > limit {
                        // Never read: no member can return such a body.
                        leaves.push(Leaf {
                            path: path.to_path_buf(),
                            kind: LeafKind::RegularFile {
                                size_bytes: size,
                                sha256: None,
                                mode,
                            },
                        });
                        return Ok(());
                    }
                }
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
                        sha256: Some(hasher.finalize().into()),
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
                kind: LeafKind::from(kind),
            }),
        }
        Ok(())
    })?;
    Ok(leaves)
}

impl From<SpecialKind> for LeafKind {
    fn from(kind: SpecialKind) -> Self {
        match kind {
            SpecialKind::CharDevice => LeafKind::CharDevice,
            SpecialKind::BlockDevice => LeafKind::BlockDevice,
            SpecialKind::Socket => LeafKind::Socket,
            SpecialKind::Fifo => LeafKind::Fifo,
            SpecialKind::Other => LeafKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{FileType, Mode, CWD};
    use std::os::fd::AsFd;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    #[test]
    fn walk_classifies_without_following() {
        let scratch = tempfile::tempdir().unwrap();
        let s = (scratch.path().to_path_buf(),);
        let root = s.0.join("root");
        std::fs::create_dir_all(root.join("sub/deep")).unwrap();
        std::fs::write(s.0.join("secret"), b"TOP-SECRET").unwrap();
        std::fs::write(root.join("ok.txt"), b"hello").unwrap();
        std::fs::write(root.join("sub/deep/f.txt"), b"deep").unwrap();
        let fd = contained::open_root(&root).unwrap();
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
        let leaves = walk_leaves(fd.as_fd(), 100, None).unwrap();
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
                assert_eq!(*sha256, Some(want));
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
            walk_leaves(fd.as_fd(), 3, None),
            Err(ContainedError::TooManyEntries { max_entries: 3 })
        ));
    }
}
