//! A scratch tree for the tests: `root/` with a few files, and a secret
//! beside it that no contained operation may ever reach.

#![allow(dead_code)]

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use checkfu_sandbox_contained::open_root;

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);
impl Scratch {
    pub fn new(tag: &str) -> Self {
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
pub fn setup(tag: &str) -> (Scratch, PathBuf, OwnedFd) {
    let s = Scratch::new(tag);
    let root = s.0.join("root");
    std::fs::create_dir_all(root.join("sub/deep")).unwrap();
    std::fs::write(s.0.join("secret"), b"TOP-SECRET").unwrap();
    std::fs::write(root.join("ok.txt"), b"hello").unwrap();
    std::fs::write(root.join("sub/deep/f.txt"), b"deep").unwrap();
    let fd = open_root(&root).unwrap();
    (s, root, fd)
}
