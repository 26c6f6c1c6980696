//! The bound on what a snapshot's `docker commit` writes (decision 036).
//!
//! A commit writes every file of the container's writable layer densely
//! into the daemon's image store: a sparse file's holes become zeros on
//! disk. Before committing, the layer is therefore measured twice:
//!
//! * **Holes.** Where the daemon's graph driver names an upper directory
//!   (`GraphDriver.Data.UpperDir`: `overlay2`, `fuse-overlayfs`) that this
//!   host can open, the directory is walked by descriptor, never following
//!   a link, summing each regular file's apparent size (`st_size`) and
//!   what it allocates (`st_blocks * 512`), each inode once. When the
//!   apparent size exceeds the allocated bytes by more than
//!   [`COMMIT_HOLE_SLACK_BYTES`], the commit would write holes the
//!   workload never wrote, and the snapshot is refused. Where no such
//!   directory can be opened (another storage driver, a daemon on another
//!   host), this check is skipped and only the ceiling below holds.
//! * **Ceiling.** The daemon's `SizeRw` (the layer's apparent size) must
//!   fit the snapshot ceiling and the free space of the daemon's data root.
//!
//! Both refusals are `SandboxFileTooLarge{path: "/"}`.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use checkfu_sandbox_contained::{self as contained, ContainedError, WalkEntry};
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::archive;
use checkfu_sandbox_hostfs::errors::contained_error;

use super::errors::{blocking, daemon_error, provider_error};
use crate::daemon;
use checkfu_sandbox_hostfs::snapshot_files::ARCHIVE_MAX_ENTRIES;

/// Bytes by which the apparent size of a container's writable layer may
/// exceed what its files allocate before a snapshot is refused (64 MiB).
///
/// Room for small sparse files and for file systems whose `st_blocks`
/// trails `st_size` a little (inline or compressed data); a commit may
/// thus write at most this many bytes the workload did not write.
pub const COMMIT_HOLE_SLACK_BYTES: u64 = 64 << 20;

/// The sandbox path a refusal of the root file system's layer names.
const LAYER_PATH: &str = "/";

/// What a writable layer's regular files take: apparent and allocated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LayerBytes {
    /// Sum of `st_size`, in bytes: what a commit writes.
    pub apparent: u64,
    /// Sum of `st_blocks * 512`, in bytes: what the workload wrote.
    pub allocated: u64,
}

/// Checks that committing `container` writes host bytes in proportion
/// to what its workload wrote, and within the snapshot's `ceiling`;
/// returns the layer's apparent size in bytes (what the commit takes of
/// the ceiling). `deadline` bounds the walk of the upper directory.
///
/// # Errors
///
/// `SandboxFileTooLarge{path: "/"}` with `limit_bytes` the allocated
/// bytes plus [`COMMIT_HOLE_SLACK_BYTES`] and `actual_bytes` the apparent
/// size, when the layer holds more holes than that; with `limit_bytes`
/// the ceiling (or the data root's free space, if less) and
/// `actual_bytes` the daemon's `SizeRw`, when the layer is over it.
/// `SandboxOperationFailed{timed_out}` past `deadline`;
/// `SandboxOperationFailed{provider_error}` for daemon failures and for
/// an upper directory that opens but cannot be walked (more than
/// [`ARCHIVE_MAX_ENTRIES`] entries included).
pub(super) async fn check_commit_bound(
    docker: &bollard::Docker,
    operation: Operation,
    container: &str,
    ceiling: u64,
    deadline: Instant,
) -> Result<u64, SandboxError> {
    if let Some(upper) = upper_dir(docker, operation, container).await? {
        let measured = blocking(operation, move || {
            measure_upper(operation, &upper, deadline)
        })
        .await??;
        if let Some(bytes) = measured {
            let limit = bytes.allocated.saturating_add(COMMIT_HOLE_SLACK_BYTES);
            if bytes.apparent > limit {
                return Err(SandboxError::SandboxFileTooLarge {
                    path: LAYER_PATH.to_owned(),
                    limit_bytes: limit,
                    actual_bytes: bytes.apparent,
                });
            }
        }
    }
    let layer = daemon::writable_layer_bytes(docker, container)
        .await
        .map_err(|e| daemon_error(operation, &e))?;
    let root_free = match daemon::data_root(docker).await {
        Ok(Some(root)) => archive::free_bytes(Path::new(&root)).ok(),
        _ => None,
    };
    let limit = ceiling.min(root_free.unwrap_or(u64::MAX));
    if layer > limit {
        return Err(SandboxError::SandboxFileTooLarge {
            path: LAYER_PATH.to_owned(),
            limit_bytes: limit,
            actual_bytes: layer,
        });
    }
    Ok(layer)
}

/// The container's upper directory as its graph driver names it, if any.
async fn upper_dir(
    docker: &bollard::Docker,
    operation: Operation,
    container: &str,
) -> Result<Option<PathBuf>, SandboxError> {
    let inspected = daemon::inspect_container(docker, container)
        .await
        .map_err(|e| daemon_error(operation, &e))?
        .ok_or_else(|| provider_error(operation, format!("container {container} is gone")))?;
    Ok(inspected
        .graph_driver
        .and_then(|d| d.data.get("UpperDir").cloned())
        .filter(|p| Path::new(p).is_absolute())
        .map(PathBuf::from))
}

/// Measures the regular files under `upper` (hard links once), or `None`
/// when `upper` cannot be opened as a directory on this host.
fn measure_upper(
    operation: Operation,
    upper: &Path,
    deadline: Instant,
) -> Result<Option<LayerBytes>, SandboxError> {
    let root = match contained::open_root(upper) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::info!(
                upper = %upper.display(),
                error = %e,
                "the writable layer's upper directory is not readable here; \
            only the snapshot ceiling bounds the commit"
            );
            return Ok(None);
        }
    };
    measure(root.as_fd(), deadline)
        .map(Some)
        .map_err(|e| match e {
            Measure::Deadline => SandboxError::failed(
                operation,
                FailureReason::TimedOut,
                "measuring the writable layer: the snapshot's deadline passed",
            ),
            Measure::Walk(e) => contained_error(operation, upper.display(), e),
        })
}

enum Measure {
    Deadline,
    Walk(ContainedError),
}

/// Sums apparent and allocated bytes of the regular files beneath `root`.
fn measure(root: std::os::fd::BorrowedFd<'_>, deadline: Instant) -> Result<LayerBytes, Measure> {
    let mut bytes = LayerBytes::default();
    let mut linked = HashSet::new();
    let mut late = false;
    let walked = contained::walk(root, ARCHIVE_MAX_ENTRIES, &mut |entry| {
        if Instant::now() >= deadline {
            late = true;
            return Err(ContainedError::Io {
                path: PathBuf::new(),
                source: std::io::Error::other("deadline passed"),
            });
        }
        let WalkEntry::RegularFile { path, file, .. } = entry else {
            return Ok(());
        };
        let meta = file.metadata().map_err(|source| ContainedError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.nlink() > 1 && !linked.insert((meta.dev(), meta.ino())) {
            return Ok(());
        }
        bytes.apparent = bytes.apparent.saturating_add(meta.size());
        bytes.allocated = bytes
            .allocated
            .saturating_add(meta.blocks().saturating_mul(512));
        Ok(())
    });
    match walked {
        Ok(()) => Ok(bytes),
        Err(_) if late => Err(Measure::Deadline),
        Err(e) => Err(Measure::Walk(e)),
    }
}

#[cfg(test)]
mod tests {
    // Tests build their trees by path.
    #![allow(clippy::disallowed_methods)]

    use super::*;
    use std::time::Duration;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn measured(dir: &Path) -> LayerBytes {
        measure_upper(op::RELEASE, dir, later()).unwrap().unwrap()
    }

    #[test]
    fn a_hole_counts_in_the_apparent_size_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        let f = std::fs::File::create(dir.path().join("tmp/sp")).unwrap();
        f.set_len(300 << 20).unwrap();
        std::fs::write(dir.path().join("data"), vec![7u8; 1 << 20]).unwrap();
        let b = measured(dir.path());
        assert_eq!(b.apparent, (300 << 20) + (1 << 20));
        assert!(b.allocated >= 1 << 20, "{b:?}");
        assert!(b.allocated < 2 << 20, "{b:?}");
    }

    #[test]
    fn hard_links_count_once_and_symlinks_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("big"), vec![1u8; 3 << 20]).unwrap();
        std::fs::write(dir.path().join("a"), vec![2u8; 1 << 20]).unwrap();
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("big"), dir.path().join("big")).unwrap();
        let b = measured(dir.path());
        assert_eq!(b.apparent, 1 << 20);
    }

    #[test]
    fn a_missing_upper_directory_is_not_measured() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("absent");
        assert_eq!(measure_upper(op::RELEASE, &gone, later()).unwrap(), None);
    }

    #[test]
    fn a_passed_deadline_times_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let e = measure_upper(op::RELEASE, dir.path(), Instant::now()).unwrap_err();
        assert!(
            matches!(
                &e,
                SandboxError::SandboxOperationFailed {
                    reason: FailureReason::TimedOut,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
