//! The state directory a host-side provider keeps: the paths shared by
//! every such provider, the record files' reading and atomic writing, the
//! ids joined to those paths, and where a sandbox path lives (its mount or
//! the output tree, [`home_of`], [`relative_to`]).
//!
//! # Layout
//!
//! ```text
//! <state_dir>/instances/<instance_id>/instance.json    the instance record
//! <state_dir>/instances/<instance_id>/mounts/<index>/  host dir of request.mounts[index]
//!                                                      (no mounts/ without mounts)
//! <state_dir>/instances/<instance_id>/outputs/         host dir of /mnt/session/outputs
//! <state_dir>/snapshots/<snapshot_id>/snapshot.json    the snapshot record
//! <state_dir>/snapshots/<snapshot_id>/mounts/<index>.tar
//! <state_dir>/snapshots/<snapshot_id>/outputs.tar
//! ```
//!
//! A provider adds its own entries beside these (and its own record
//! types). The record files sit beside the directories mounted into an
//! instance, out of the workload's reach, so they are read and written with
//! ordinary path-based calls. Everything *inside* a mounted directory is
//! workload-controlled and is only touched through descriptor based,
//! contained operations ([`checkfu_sandbox_contained`]).

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use checkfu_sandbox_contained::{self as contained, ContainedError, WalkEntry};
use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::{MountAccess, SandboxProvisionRequest};

use crate::rootfs::CHECKFU_UID;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Revision of the on-disk record format.
pub const RECORD_REVISION: u32 = 1;
/// File name of an instance record.
pub const INSTANCE_RECORD: &str = "instance.json";
/// File name of a snapshot record.
pub const SNAPSHOT_RECORD: &str = "snapshot.json";

/// One archived host directory of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedMount {
    /// The mount path in the sandbox.
    pub path: String,
    /// Its access mode in the source instance.
    pub access: MountAccess,
    /// Archive file name relative to the snapshot directory.
    pub archive: String,
}

/// Paths of the state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// A layout rooted at `state_dir`.
    pub fn new(state_dir: PathBuf) -> Self {
        Layout { root: state_dir }
    }

    /// The state directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<state_dir>/instances`.
    pub fn instances(&self) -> PathBuf {
        self.root.join("instances")
    }

    /// `<state_dir>/snapshots`.
    pub fn snapshots(&self) -> PathBuf {
        self.root.join("snapshots")
    }

    /// The directory of one instance.
    pub fn instance_dir(&self, id: &str) -> PathBuf {
        self.instances().join(id)
    }

    /// The record of one instance.
    pub fn instance_record(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join(INSTANCE_RECORD)
    }

    /// The host directory of `request.mounts[index]`.
    pub fn mount_dir(&self, id: &str, index: usize) -> PathBuf {
        self.instance_dir(id).join("mounts").join(index.to_string())
    }

    /// The host directory of the output tree.
    pub fn outputs_dir(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("outputs")
    }

    /// The host directory of `home` (a mount or the output tree) of
    /// instance `id`.
    pub fn home_dir(&self, id: &str, home: Home) -> PathBuf {
        match home {
            Home::Output => self.outputs_dir(id),
            Home::Mount(i) => self.mount_dir(id, i),
        }
    }

    /// The directory of one snapshot.
    pub fn snapshot_dir(&self, id: &str) -> PathBuf {
        self.snapshots().join(id)
    }

    /// The record of one snapshot.
    pub fn snapshot_record(&self, id: &str) -> PathBuf {
        self.snapshot_dir(id).join(SNAPSHOT_RECORD)
    }
}

static ID_COUNTER: AtomicU64 = AtomicU64::new(0);
const ID_HEX: usize = 24;

/// A fresh id `<prefix>-<24 hex>`: SHA-256 over the process id, a counter,
/// the wall clock and `salt`.
pub fn fresh_id(prefix: &str, salt: &str) -> String {
    let n = ID_COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let digest = Sha256::digest(format!("{salt}/{}/{n}/{nanos}", std::process::id()).as_bytes());
    let hex = crate::rootfs::hex(&digest);
    format!("{prefix}-{}", &hex[..ID_HEX])
}

/// Whether `id` has the shape [`fresh_id`] gives with `prefix`. Ids from
/// requests are checked with this before they are joined to any path.
pub fn is_id(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| {
            hex.len() == ID_HEX && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

/// Reads a JSON record; `Ok(None)` when the file does not exist.
///
/// # Errors
///
/// A message for unreadable or undecodable files.
// Records sit beside the bound directories, out of the workload's reach.
#[allow(clippy::disallowed_methods)]
pub fn read_record<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("record {} is invalid: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("record {} is unreadable: {e}", path.display())),
    }
}

/// What a record write must survive (decision 043).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Written to the disk before it is renamed into place (`fsync`): the
    /// record survives a crash of the host. For what outlives the kernel:
    /// snapshot records, journals.
    HostCrash,
    /// Renamed into place without waiting for the disk: the record
    /// survives a crash of this process (the page cache keeps it), and a
    /// crash of the host leaves it whole, absent or unreadable. For
    /// instance records: a host crash ends every process, namespace and
    /// cgroup they describe, and a sweep removes a directory whose record
    /// is unreadable.
    ProcessCrash,
}

/// Writes a JSON record atomically (temporary file, fsync, rename).
///
/// # Errors
///
/// The underlying i/o error.
pub fn write_record<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    write_record_with(path, value, Durability::HostCrash)
}

/// Writes a JSON record atomically (temporary file, rename), waiting for
/// the disk as `durability` says.
///
/// # Errors
///
/// The underlying i/o error.
pub fn write_record_with<T: Serialize>(
    path: &Path,
    value: &T,
    durability: Durability,
) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    write_file_with(&tmp, value, durability)?;
    std::fs::rename(&tmp, path)
}

/// Writes a JSON record to a new file at `path` (not atomically: for a
/// file nobody reads yet), waiting for the disk as `durability` says.
fn write_file_with<T: Serialize>(path: &Path, value: &T, durability: Durability) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    let mut f = std::fs::File::create(path)?;
    f.write_all(&bytes)?;
    if durability == Durability::HostCrash {
        f.sync_all()?;
    }
    Ok(())
}

/// Creates the directory `dir` holding `record_name` (and an empty
/// `mounts` directory when `with_mounts`) in one step: everything is
/// prepared under a temporary sibling name that is then renamed to `dir`,
/// so a sweep never sees the directory without its record.
///
/// # Errors
///
/// The underlying i/o error (`dir` existing already included).
pub fn publish_dir<T: Serialize>(
    dir: &Path,
    record_name: &str,
    record: &T,
    durability: Durability,
    with_mounts: bool,
) -> io::Result<()> {
    let parent = dir
        .parent()
        .ok_or_else(|| io::Error::other("a record directory needs a parent"))?;
    let name = dir
        .file_name()
        .ok_or_else(|| io::Error::other("a record directory needs a name"))?;
    let tmp = parent.join(format!(".{}.tmp", name.to_string_lossy()));
    std::fs::create_dir(&tmp)?;
    let res = (|| {
        if with_mounts {
            std::fs::create_dir(tmp.join("mounts"))?;
        }
        // Written in place: the directory is renamed into view whole, so
        // the record needs no temporary name (and no rename) of its own.
        write_file_with(&tmp.join(record_name), record, durability)?;
        std::fs::rename(&tmp, dir)
    })();
    if res.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    res
}

/// Where a sandbox path lives: the output tree or a declared mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// `/mnt/session/outputs`.
    Output,
    /// `request.mounts[index]`.
    Mount(usize),
}

/// Whether `path` is `root` or below it (both normalized, absolute),
/// compared by whole components: the contract's rule.
pub use checkfu_sandbox_contract::validate::is_within;

/// The deepest mount (or the output tree) containing `path`, with its root.
pub fn home_of(request: &SandboxProvisionRequest, path: impl AsRef<[u8]>) -> Option<(Home, &str)> {
    let path = path.as_ref();
    if is_within(path, OUTPUT_PATH) {
        return Some((Home::Output, OUTPUT_PATH));
    }
    request
        .mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| is_within(path, &m.path))
        .max_by_key(|(_, m)| m.path.len())
        .map(|(i, m)| (Home::Mount(i), m.path.as_str()))
}

/// Owner of files in a home's host directory: the workload user for the
/// output tree and read-write mounts, root for read-only mounts.
pub fn owner_of(request: &SandboxProvisionRequest, home: Home) -> Option<u32> {
    match home {
        Home::Output => Some(CHECKFU_UID),
        Home::Mount(i) => match request.mounts.get(i).map(|m| m.access) {
            Some(MountAccess::ReadWrite) => Some(CHECKFU_UID),
            _ => None,
        },
    }
}

/// The home whose root is exactly `root`.
pub fn home_at(request: &SandboxProvisionRequest, root: &str) -> Option<Home> {
    if root == OUTPUT_PATH {
        return Some(Home::Output);
    }
    request
        .mounts
        .iter()
        .position(|m| m.path == root)
        .map(Home::Mount)
}

/// `path` relative to `root` (`None` when it is not strictly below it or
/// holds anything but normal components). Paths are bytes: a name that is
/// not UTF-8 stays exactly what it is.
pub fn relative_to(path: impl AsRef<[u8]>, root: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let rest = path
        .as_ref()
        .strip_prefix(root.as_bytes())?
        .strip_prefix(b"/")?;
    let rel = PathBuf::from(std::ffi::OsStr::from_bytes(rest));
    let normal =
        rel.components().count() > 0 && rel.components().all(|c| matches!(c, Component::Normal(_)));
    normal.then_some(rel)
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

/// Gives every entry under `root` (and `root` itself) to `uid:uid`, never
/// following a symlink. Used on freshly extracted snapshot trees before any
/// container can see them.
///
/// # Errors
///
/// As [`contained::walk`], plus `Io` when a chown fails.
pub fn chown_tree(root: &Path, uid: u32) -> Result<(), ContainedError> {
    let root_fd = contained::open_root(root)?;
    chown_fd(root_fd.as_fd(), Some(uid), Path::new("."))?;
    let base = root_fd.as_fd();
    let owner = Some(rustix::fs::Uid::from_raw(uid));
    let group = Some(rustix::fs::Gid::from_raw(uid));
    contained::walk(base, usize::MAX, &mut |entry| {
        let path = match &entry {
            WalkEntry::Directory { path, .. }
            | WalkEntry::RegularFile { path, .. }
            | WalkEntry::Symlink { path, .. }
            | WalkEntry::Special { path, .. } => path.to_path_buf(),
        };
        rustix::fs::chownat(
            base,
            &path,
            owner,
            group,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| ContainedError::Io {
            path,
            source: io::Error::from(e),
        })
    })
}

/// The directories to pre-create inside a parent mount's host directory so
/// that a nested mount has its mount point (runc cannot create one inside a
/// read-only bind). Returns `(parent index, relative path)` pairs.
pub fn nested_mount_points(request: &SandboxProvisionRequest) -> Vec<(usize, PathBuf)> {
    let mut out = Vec::new();
    for (j, m) in request.mounts.iter().enumerate() {
        let parent = request
            .mounts
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != j && p.path != m.path && is_within(&m.path, &p.path))
            .max_by_key(|(_, p)| p.path.len());
        if let Some((i, p)) = parent {
            if let Some(rel) = relative_to(&m.path, &p.path) {
                out.push((i, rel));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_a_checked_shape() {
        let id = fresh_id("i", "x");
        assert!(is_id("i", &id), "{id}");
        assert!(!is_id("s", &id));
        assert_ne!(id, fresh_id("i", "x"));
        for bad in [
            "",
            "i-",
            "i-../../etc",
            "i-ABCDEFABCDEFABCDEFABCDEF",
            "x-0123",
        ] {
            assert!(!is_id("i", bad), "{bad}");
        }
    }

    #[test]
    fn within_and_relative() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(!is_within("/ab", "/a"));
        assert_eq!(relative_to("/a/b/c", "/a"), Some(PathBuf::from("b/c")));
        assert_eq!(relative_to("/a", "/a"), None);
        assert_eq!(relative_to("/a/../x", "/a"), None);
    }
}
