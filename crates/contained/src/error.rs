//! The one error type of contained operations and the errno mapping.

use std::io;
use std::path::{Path, PathBuf};

/// Failure of a contained operation. Every variant names the relative path
/// it was asked about (or the entry that failed during a walk).
#[derive(Debug, thiserror::Error)]
pub enum ContainedError {
    /// The path resolves, or tries to resolve, outside the root: a `..`
    /// above the root, an absolute path or symlink, a procfs magic link, or
    /// (with [`crate::open_beneath_nofollow`]) any symlink.
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

pub(crate) fn map_errno(path: &Path, err: rustix::io::Errno) -> ContainedError {
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

pub(crate) fn io_at(path: &Path, err: rustix::io::Errno) -> ContainedError {
    ContainedError::Io {
        path: path.to_path_buf(),
        source: io::Error::from(err),
    }
}
