//! What the provider has already found true of an unpacked shared tree,
//! remembered for the life of the process (decision 051).
//!
//! A tree is unpacked under a temporary name and published whole by one
//! rename, then only ever read: every instance writes to a layer of its
//! own. A fact found true of a published tree (its `/dev` is the one the
//! store makes, it holds a mount point as a directory) therefore stays
//! true, and asking the disk again at every provision and activation is
//! work that finds nothing new. Only such positive findings are kept: a
//! tree found lacking is asked again next time.
//!
//! `/dev` is the one fact that guards the workload (a tree's own device
//! nodes would be the workload's), so its finding is also tied to the
//! directory as one `lstat` sees it (device, inode, modification and
//! change times): a `/dev` with an entry added, removed or replaced since,
//! by whatever hand, is asked again in full. A node cannot change its
//! device number without being replaced. What the stamp does not see is a
//! node's mode or owner changed in place (`chmod`, `chown` of the node,
//! which change only its own times): only root can write the store, the
//! workload writes to its own layer, and such a change gives no workload
//! a device it did not have (at worst a `/dev/null` it cannot use).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// One remembered finding: the tree, and what was found of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Fact {
    /// [`super::dev_ready`] held while the tree's `/dev` looked like this.
    DevReady(PathBuf, DirStamp),
    /// The relative path is a directory of the tree, reached without
    /// following links.
    Directory(PathBuf, PathBuf),
}

/// A directory as `lstat` sees it: device, inode, modification and
/// change times (seconds, nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DirStamp([i64; 6]);

fn dir_stamp(dir: &Path) -> Option<DirStamp> {
    let st = rustix::fs::lstat(dir).ok()?;
    Some(DirStamp([
        st.st_dev as i64,
        st.st_ino as i64,
        st.st_mtime as i64,
        st.st_mtime_nsec as i64,
        st.st_ctime as i64,
        st.st_ctime_nsec as i64,
    ]))
}

fn seen() -> &'static Mutex<HashSet<Fact>> {
    static SEEN: OnceLock<Mutex<HashSet<Fact>>> = OnceLock::new();
    SEEN.get_or_init(Mutex::default)
}

/// `check()` the first time it holds for `fact`, remembered once true.
fn once_true(fact: Fact, check: impl FnOnce() -> bool) -> bool {
    if seen()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&fact)
    {
        return true;
    }
    let holds = check();
    if holds {
        seen()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fact);
    }
    holds
}

/// [`super::dev_ready`] of the published tree `tree`, asked of the disk
/// in full until it first holds, then again only when the tree's `/dev`
/// changed (one `lstat` per call).
pub fn dev_ready_seen(tree: &Path) -> bool {
    let Some(stamp) = dir_stamp(&tree.join("dev")) else {
        return false;
    };
    once_true(Fact::DevReady(tree.to_path_buf(), stamp), || {
        super::dev_ready(tree)
    })
}

/// Whether `rel` is a directory of the published tree `tree`, reached
/// beneath it without following links: `is_directory` asks the disk, and
/// is called only until it first answers `true`.
pub fn directory_seen(tree: &Path, rel: &Path, is_directory: impl FnOnce() -> bool) -> bool {
    once_true(
        Fact::Directory(tree.to_path_buf(), rel.to_path_buf()),
        is_directory,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_is_remembered_once_true_and_asked_again_while_false() {
        let tree = Path::new("/nonexistent/seen-test-tree");
        let rel = Path::new("proc");
        let mut asked = 0;
        assert!(!directory_seen(tree, rel, || {
            asked += 1;
            false
        }));
        assert!(directory_seen(tree, rel, || {
            asked += 1;
            true
        }));
        assert!(directory_seen(tree, rel, || {
            asked += 1;
            false
        }));
        assert_eq!(asked, 2, "asked while false, not once true");
        // Another path of the same tree is its own finding.
        assert!(!directory_seen(tree, Path::new("dev"), || false));
    }

    #[test]
    fn a_dev_seen_ready_is_asked_again_once_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev");
        std::fs::create_dir(&dev).unwrap();
        let stamp = dir_stamp(&dev).unwrap();
        // Remembered ready for this stamp (a tree is made ready by the
        // store as root; here the finding is put in directly).
        once_true(Fact::DevReady(dir.path().to_path_buf(), stamp), || true);
        assert!(seen()
            .lock()
            .unwrap()
            .contains(&Fact::DevReady(dir.path().to_path_buf(), stamp)));
        // The same /dev: the finding answers (dev_ready itself would say
        // no: this /dev has none of the nodes).
        assert!(!crate::image::dev_ready(dir.path()));
        assert!(dev_ready_seen(dir.path()));
        // An entry added: another stamp, so dev_ready itself is asked
        // (and this tree is not ready).
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dev.join("sda"), b"").unwrap();
        assert_ne!(dir_stamp(&dev), Some(stamp));
        assert!(!dev_ready_seen(dir.path()));
    }
}
