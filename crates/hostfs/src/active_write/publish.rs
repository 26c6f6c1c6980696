//! The file moves of a publication and of its rollback, beneath the
//! owning mount's host directory. The mount is workload-controlled, so
//! every parent is opened through [`checkfu_sandbox_contained`] (no
//! symlink followed) and every move is a `renameat` between descriptors.
//!
//! For target `k`: if it existed, the old file is moved to `rollback/<k>`
//! (evidence), then `staged/<k>` is moved to the target. A rollback puts
//! `rollback/<k>` back over the target, or unlinks a target that did not
//! exist before and whose staged body has moved; it never reconstructs a
//! file from anything else.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use checkfu_sandbox_contained::{self as contained};
use rustix::fs::AtFlags;
use rustix::io::Errno;

/// A target split into its parent (relative to the mount root) and name.
pub(crate) struct Target {
    parent: PathBuf,
    name: OsString,
}

impl Target {
    /// `path` (absolute in the sandbox) below `mount_path`.
    pub(crate) fn new(path: &str, mount_path: &str) -> Result<Target, String> {
        let rel = crate::store::relative_to(path, mount_path)
            .ok_or_else(|| format!("{path} is not below {mount_path}"))?;
        let name = rel
            .file_name()
            .ok_or_else(|| format!("{path} has no file name"))?
            .to_os_string();
        let parent = rel.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Target { parent, name })
    }

    fn open_parent(
        &self,
        root: &OwnedFd,
        create_as: Option<Option<u32>>,
    ) -> Result<OwnedFd, String> {
        let r = match create_as {
            Some(owner) if !self.parent.as_os_str().is_empty() => {
                contained::create_dirs_beneath(root.as_fd(), &self.parent, owner)
            }
            _ => contained::open_dir_beneath_nofollow(root.as_fd(), &self.parent),
        };
        r.map_err(|e| format!("{}: {e}", self.parent.join(&self.name).display()))
    }
}

fn plain_dir(path: &Path) -> Result<OwnedFd, String> {
    rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| format!("opening {}: {e}", path.display()))
}

/// Whether each target exists now (creating missing parents as `owner`).
/// A directory at a target, or a parent that is not a directory, refuses.
pub(crate) fn existed(
    mount_root: &Path,
    targets: &[Target],
    owner: Option<u32>,
) -> Result<Vec<bool>, String> {
    let root = contained::open_root(mount_root).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(targets.len());
    for t in targets {
        let parent = t.open_parent(&root, Some(owner))?;
        match rustix::fs::statat(&parent, t.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st)
                if rustix::fs::FileType::from_raw_mode(st.st_mode)
                    == rustix::fs::FileType::Directory =>
            {
                return Err(format!(
                    "{}: is a directory",
                    t.parent.join(&t.name).display()
                ))
            }
            Ok(_) => out.push(true),
            Err(Errno::NOENT) => out.push(false),
            Err(e) => return Err(format!("{}: {e}", t.parent.join(&t.name).display())),
        }
    }
    Ok(out)
}

/// Moves target `k`'s old file (if it existed) to the evidence and the
/// staged body into place.
pub(crate) fn publish_one(
    mount_root: &Path,
    tx_dir: &Path,
    targets: &[Target],
    existed: &[bool],
    k: usize,
) -> Result<(), String> {
    let root = contained::open_root(mount_root).map_err(|e| e.to_string())?;
    let t = &targets[k];
    let parent = t.open_parent(&root, None)?;
    let staged = plain_dir(&super::journal::staged(tx_dir))?;
    let rollback = plain_dir(&super::journal::rollback(tx_dir))?;
    let slot = k.to_string();
    if existed[k] {
        rustix::fs::renameat(&parent, t.name.as_os_str(), &rollback, slot.as_str())
            .map_err(|e| format!("moving the old {} aside: {e}", t.name.to_string_lossy()))?;
    }
    rustix::fs::renameat(&staged, slot.as_str(), &parent, t.name.as_os_str())
        .map_err(|e| format!("publishing {}: {e}", t.name.to_string_lossy()))
}

/// Undoes every move of a dispatched transaction, from its evidence only.
pub(crate) fn roll_back(
    mount_root: &Path,
    tx_dir: &Path,
    targets: &[Target],
    existed: &[bool],
) -> Result<(), String> {
    let root = contained::open_root(mount_root).map_err(|e| e.to_string())?;
    let staged = plain_dir(&super::journal::staged(tx_dir)).ok();
    let rollback = plain_dir(&super::journal::rollback(tx_dir)).ok();
    for (k, t) in targets.iter().enumerate() {
        let slot = k.to_string();
        let has = |dir: &Option<OwnedFd>| {
            dir.as_ref().is_some_and(|d| {
                rustix::fs::statat(d, slot.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok()
            })
        };
        if has(&rollback) {
            let parent = t.open_parent(&root, None)?;
            let rb = rollback.as_ref().expect("checked");
            rustix::fs::renameat(rb, slot.as_str(), &parent, t.name.as_os_str())
                .map_err(|e| format!("restoring {}: {e}", t.name.to_string_lossy()))?;
        } else if !existed.get(k).copied().unwrap_or(true) && !has(&staged) {
            // A target that did not exist, whose staged body has moved in.
            // A parent that cannot be opened holds no new file of ours.
            if let Ok(parent) = t.open_parent(&root, None) {
                match rustix::fs::unlinkat(&parent, t.name.as_os_str(), AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => {
                        return Err(format!(
                            "removing the new {}: {e}",
                            t.name.to_string_lossy()
                        ))
                    }
                }
            }
        }
    }
    Ok(())
}
