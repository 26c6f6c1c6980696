//! An instance's `/dev` made once per image: when an image is unpacked,
//! its shared tree gets the device nodes and links every instance's `/dev`
//! holds ([`DEV_NODES`], [`DEV_LINKS`]), so an overlay root shows them
//! with no tmpfs and no bind mount per instance ([`dev_ready`]).
//!
//! The nodes work through an instance's overlay even when the state
//! directory's file system is mounted `nodev`: the kernel checks `nodev`
//! on the mount a node is opened through, which is the overlay (mounted
//! without `nodev`), not the mount of the layer holding the node.

use std::os::fd::{AsFd as _, BorrowedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode};

/// The device nodes of an instance's `/dev`: name, major and minor number
/// (the kernel's fixed numbers of the memory devices), each mode 0666,
/// owned by root.
pub const DEV_NODES: [(&str, u32, u32); 5] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
];

/// The links of an instance's `/dev`: name and target.
pub const DEV_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Permission bits of every node.
const NODE_MODE: u32 = 0o666;

/// `dev` beneath `tree`, opened without following a link.
fn open_dev(tree: &Path) -> Option<rustix::fd::OwnedFd> {
    let root = checkfu_sandbox_contained::open_root(tree).ok()?;
    checkfu_sandbox_contained::open_dir_beneath_nofollow(root.as_fd(), Path::new("dev")).ok()
}

/// The names in directory `dir`, without `.` and `..`.
fn names(dir: BorrowedFd<'_>) -> Option<Vec<Vec<u8>>> {
    let listing = rustix::fs::Dir::read_from(dir).ok()?;
    let mut out = Vec::new();
    for e in listing {
        let e = e.ok()?;
        let name = e.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push(name.to_vec());
        }
    }
    Some(out)
}

/// Adds [`DEV_NODES`] and [`DEV_LINKS`] to the `/dev` of an unpacked tree
/// (its mount point, made before), when that directory is empty: an
/// image's own `/dev` entries stay as they are, and its instances keep
/// the tmpfs `/dev` that hides them. Best effort: a host that refuses
/// `mknod` leaves a tree [`dev_ready`] turns down.
pub(super) fn add_dev(tree: &Path) {
    let Some(dev) = open_dev(tree) else {
        return;
    };
    if names(dev.as_fd()).is_none_or(|n| !n.is_empty()) {
        return;
    }
    for (name, major, minor) in DEV_NODES {
        let made = rustix::fs::mknodat(
            &dev,
            name,
            FileType::CharacterDevice,
            Mode::from_raw_mode(NODE_MODE),
            rustix::fs::makedev(major, minor),
        )
        .and_then(|()| {
            // Exactly 0666 and root's, whatever the umask and group.
            rustix::fs::chmodat(&dev, name, Mode::from_raw_mode(NODE_MODE), AtFlags::empty())
        })
        .and_then(|()| {
            rustix::fs::chownat(
                &dev,
                name,
                Some(rustix::fs::Uid::ROOT),
                Some(rustix::fs::Gid::ROOT),
                AtFlags::SYMLINK_NOFOLLOW,
            )
        });
        if made.is_err() {
            return;
        }
    }
    for (name, target) in DEV_LINKS {
        if rustix::fs::symlinkat(target, &dev, name).is_err() {
            return;
        }
    }
}

/// Whether the unpacked tree at `tree` holds an instance's whole `/dev`:
/// a directory (not a link) owned by root and writable by root alone,
/// holding exactly [`DEV_NODES`] (character devices of those numbers,
/// mode 0666, root's) and [`DEV_LINKS`], nothing else. Trees unpacked
/// before the store added them, images with a `/dev` of their own and
/// hosts that refused `mknod` do not.
pub fn dev_ready(tree: &Path) -> bool {
    let Some(dev) = open_dev(tree) else {
        return false;
    };
    let Ok(st) = rustix::fs::fstat(&dev) else {
        return false;
    };
    if st.st_uid != 0 || st.st_mode & 0o022 != 0 {
        return false;
    }
    let Some(mut found) = names(dev.as_fd()) else {
        return false;
    };
    let mut expected: Vec<Vec<u8>> = DEV_NODES
        .iter()
        .map(|(n, _, _)| n.as_bytes().to_vec())
        .chain(DEV_LINKS.iter().map(|(n, _)| n.as_bytes().to_vec()))
        .collect();
    found.sort();
    expected.sort();
    if found != expected {
        return false;
    }
    let nodes_ok = DEV_NODES.iter().all(|&(name, major, minor)| {
        rustix::fs::statat(&dev, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice
                && st.st_rdev == rustix::fs::makedev(major, minor)
                && st.st_mode & 0o7777 == NODE_MODE
                && st.st_uid == 0
        })
    });
    nodes_ok
        && DEV_LINKS.iter().all(|&(name, target)| {
            rustix::fs::readlinkat(&dev, name, Vec::new())
                .is_ok_and(|t| t.as_bytes() == target.as_bytes())
        })
}
