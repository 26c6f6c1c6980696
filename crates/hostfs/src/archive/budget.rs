//! Bounds on snapshot archives: host bytes (a ceiling and the free space
//! of the file system they go to) and a deadline, checked before a byte
//! is written (from what the tree allocates) and again while writing.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use checkfu_sandbox_contained::{self as contained, WalkEntry};
use checkfu_sandbox_contract::{FailureReason, Operation, SandboxError, Timestamp};

use super::sparse::{round_up, BLOCK};
use super::{archive_dir, ArchiveError};
use crate::errors::{chain, provider_error};

/// The environment variable that sets the most host bytes one snapshot
/// may take (decimal bytes); [`DEFAULT_SNAPSHOT_MAX_BYTES`] when unset.
pub const SNAPSHOT_MAX_BYTES_ENV: &str = "CHECKFU_SNAPSHOT_MAX_BYTES";

/// The most host bytes one snapshot may take unless configured (4 GiB):
/// its archives together, and for Docker its committed layer too.
pub const DEFAULT_SNAPSHOT_MAX_BYTES: u64 = 4 << 30;

/// Free space a snapshot always leaves on the file system it writes to
/// (1 GiB): a snapshot that would eat into it is refused.
pub const FREE_SPACE_RESERVE_BYTES: u64 = 1 << 30;

/// Host bytes an entry may take beyond its file's allocated bytes: its
/// header, a PAX sparse header and one block of sparse map.
const ENTRY_OVERHEAD_BYTES: u64 = 4 * BLOCK;

/// Bounds of one archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Most entries (directories, files, links, skipped special files).
    pub max_entries: usize,
    /// Most bytes the archive may take, headers and padding included.
    pub max_bytes: u64,
    /// When writing must stop; `None` for no deadline.
    pub deadline: Option<Instant>,
}

impl ArchiveLimits {
    /// At most `max_entries` entries, no byte bound, no deadline.
    pub fn entries(max_entries: usize) -> Self {
        ArchiveLimits {
            max_entries,
            max_bytes: u64::MAX,
            deadline: None,
        }
    }
}

/// Why a bounded write stopped (carried inside an `io::Error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The next write would pass `max_bytes`.
    Bytes,
    /// The deadline passed.
    Deadline,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Bytes => "archive byte bound reached",
            Stop::Deadline => "archive deadline passed",
        })
    }
}

impl std::error::Error for Stop {}

/// The [`Stop`] inside `e`, if any.
pub(crate) fn stop_of(e: &io::Error) -> Option<Stop> {
    e.get_ref()?.downcast_ref::<Stop>().copied()
}

/// A writer that refuses to pass `limit` bytes or its deadline.
pub(crate) struct Bounded<W> {
    pub(crate) inner: W,
    pub(crate) written: u64,
    limit: u64,
    deadline: Option<Instant>,
}

impl<W> Bounded<W> {
    pub(crate) fn new(inner: W, limits: &ArchiveLimits) -> Self {
        Bounded {
            inner,
            written: 0,
            limit: limits.max_bytes,
            deadline: limits.deadline,
        }
    }
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_bytes(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Bounded<W> {
    fn write_bytes(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::other(Stop::Deadline));
        }
        if self.written.saturating_add(buf.len() as u64) > self.limit {
            return Err(io::Error::other(Stop::Bytes));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
}

/// An upper estimate of the bytes [`archive_dir`] writes for the tree
/// under `root`, from what it allocates: each regular file's
/// `st_blocks * 512` plus 2 KiB per entry, plus long names and the end
/// of the archive. Reads no file body.
///
/// # Errors
///
/// [`ArchiveError::Contained`] from the walk (more than `max_entries`
/// entries included).
pub fn estimate_archive_bytes(root: &Path, max_entries: usize) -> Result<u64, ArchiveError> {
    let root_fd = contained::open_root(root)?;
    let mut total = 2 * BLOCK;
    let long = |bytes: usize| {
        if bytes >= 100 {
            BLOCK + round_up(bytes as u64 + 1)
        } else {
            0
        }
    };
    contained::walk(root_fd.as_fd(), max_entries, &mut |entry| {
        let add = match entry {
            WalkEntry::Directory { path, .. } | WalkEntry::Special { path, .. } => {
                ENTRY_OVERHEAD_BYTES + long(path.as_os_str().len())
            }
            WalkEntry::Symlink { path, target } => {
                ENTRY_OVERHEAD_BYTES + long(path.as_os_str().len()) + long(target.as_os_str().len())
            }
            WalkEntry::RegularFile { path, file, .. } => {
                let allocated = file
                    .metadata()
                    .map_err(|source| contained::ContainedError::Io {
                        path: path.to_path_buf(),
                        source,
                    })?
                    .blocks()
                    .saturating_mul(512);
                // The sparse map takes at most one line of 42 bytes per
                // 4 KiB block of data, under allocated / 64.
                let name = path.as_os_str().len();
                ENTRY_OVERHEAD_BYTES
                    + long(name)
                    + round_up(name as u64 + 32)
                    + round_up(allocated)
                    + allocated / 64
            }
        };
        total = total.saturating_add(add);
        Ok(())
    })?;
    Ok(total)
}

/// The ceiling on one snapshot's host bytes: [`SNAPSHOT_MAX_BYTES_ENV`]
/// when set, else [`DEFAULT_SNAPSHOT_MAX_BYTES`].
///
/// # Errors
///
/// `invalid_request` of `operation` naming the variable, what it must be
/// and its value, when it is not a decimal number of bytes.
pub fn snapshot_ceiling_bytes(operation: Operation) -> Result<u64, SandboxError> {
    match std::env::var(SNAPSHOT_MAX_BYTES_ENV) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse::<u64>().map_err(|_| {
            SandboxError::invalid_request(
                operation,
                SNAPSHOT_MAX_BYTES_ENV,
                "a decimal number of bytes",
                v.clone(),
            )
        }),
        _ => Ok(DEFAULT_SNAPSHOT_MAX_BYTES),
    }
}

/// Bytes that may still be written to the file system of `dir`: its free
/// space for unprivileged users less [`FREE_SPACE_RESERVE_BYTES`].
///
/// # Errors
///
/// `statvfs` failures.
pub fn free_bytes(dir: &Path) -> io::Result<u64> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(st
        .f_bavail
        .saturating_mul(st.f_frsize)
        .saturating_sub(FREE_SPACE_RESERVE_BYTES))
}

/// The host bytes a snapshot written under `dir` may take: the ceiling
/// ([`snapshot_ceiling_bytes`]) or the free space of `dir`'s file system
/// less [`FREE_SPACE_RESERVE_BYTES`] ([`free_bytes`]), whichever is less.
///
/// # Errors
///
/// `invalid_request` for a malformed ceiling; `provider_error` when the
/// file system cannot be queried.
pub fn snapshot_budget(operation: Operation, dir: &Path) -> Result<u64, SandboxError> {
    let ceiling = snapshot_ceiling_bytes(operation)?;
    let free = free_bytes(dir)
        .map_err(|e| provider_error(operation, format!("free space of {}: {e}", dir.display())))?;
    Ok(ceiling.min(free))
}

/// The instant of `expires_at` on this host's monotonic clock, given that
/// the injected clock says `now` (an instant already passed when
/// `expires_at` is not after `now`).
pub fn instant_of(now: Timestamp, expires_at: Timestamp) -> Instant {
    let millis = expires_at
        .unix_millis()
        .saturating_sub(now.unix_millis())
        .max(0);
    Instant::now() + std::time::Duration::from_millis(millis as u64)
}

/// One host directory a snapshot archives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveJob {
    /// The host directory.
    pub source: PathBuf,
    /// The archive file to create (its directory exists).
    pub archive: PathBuf,
    /// The sandbox path the directory backs (`/mnt/session/outputs`, a
    /// mount path, `/` for a root file system layer): what a refusal names.
    pub sandbox_path: String,
}

/// Writes the archive of each job in turn, each synced to disk, within
/// `max_bytes` host bytes for all of them and before `deadline`. Each
/// archive's estimate ([`estimate_archive_bytes`]) is checked against
/// what is left before its file is created, and the writer stops at what
/// is left, so a tree that allocates more is refused before the disk
/// fills. A failed archive's file is removed. Returns the bytes written.
///
/// # Errors
///
/// * `SandboxFileTooLarge{path: sandbox_path, limit_bytes: bytes left,
///   actual_bytes: bytes needed}` when an archive would pass the bound;
/// * `SandboxOperationFailed{operation, timed_out}` when the deadline
///   passed;
/// * `SandboxOperationFailed{operation, provider_error}` otherwise.
pub fn write_archives(
    operation: Operation,
    jobs: &[ArchiveJob],
    max_entries: usize,
    max_bytes: u64,
    deadline: Option<Instant>,
) -> Result<u64, SandboxError> {
    let mut left = max_bytes;
    for job in jobs {
        let written = write_one(operation, job, max_entries, left, deadline).inspect_err(|_| {
            let _ = std::fs::remove_file(&job.archive);
        })?;
        left = left.saturating_sub(written);
    }
    Ok(max_bytes - left)
}

fn write_one(
    operation: Operation,
    job: &ArchiveJob,
    max_entries: usize,
    left: u64,
    deadline: Option<Instant>,
) -> Result<u64, SandboxError> {
    let fail = |e: ArchiveError| match e {
        ArchiveError::OverBudget {
            needed_bytes,
            limit_bytes,
        } => SandboxError::SandboxFileTooLarge {
            path: job.sandbox_path.clone(),
            limit_bytes,
            actual_bytes: needed_bytes,
        },
        ArchiveError::DeadlineExceeded => SandboxError::failed(
            operation,
            FailureReason::TimedOut,
            format!(
                "archiving {}: the snapshot's deadline passed",
                job.sandbox_path
            ),
        ),
        e => provider_error(
            operation,
            format!("archiving {}: {}", job.sandbox_path, chain(&e)),
        ),
    };
    let needed = estimate_archive_bytes(&job.source, max_entries).map_err(fail)?;
    if needed > left {
        return Err(fail(ArchiveError::OverBudget {
            needed_bytes: needed,
            limit_bytes: left,
        }));
    }
    let io_fail =
        |e: io::Error| provider_error(operation, format!("{}: {e}", job.archive.display()));
    let file = std::fs::File::create(&job.archive).map_err(io_fail)?;
    let limits = ArchiveLimits {
        max_entries,
        max_bytes: left,
        deadline,
    };
    let (w, summary) = archive_dir(&job.source, &limits, io::BufWriter::new(file)).map_err(fail)?;
    let file = w.into_inner().map_err(|e| io_fail(e.into_error()))?;
    file.sync_all().map_err(io_fail)?;
    Ok(summary.bytes)
}
