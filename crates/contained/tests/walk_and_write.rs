//! Walking and writing beneath a root with real files: the walk reports
//! links and special files without following or opening them; creation and
//! writes refuse every symlink among the parents.

// The tests check by path, from outside, what the contained calls did.
#![allow(clippy::disallowed_methods)]

mod common;

use std::os::fd::AsFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use checkfu_sandbox_contained::{
    create_dir_beneath_mode, create_dirs_beneath, open_dir_beneath_nofollow, overwrite_beneath,
    overwrite_beneath_mode, replace_beneath, resolve_beneath, walk, ContainedError, SpecialKind,
    WalkEntry,
};
use common::setup;
use rustix::fs::{FileType, Mode, CWD};

#[derive(Debug, PartialEq)]
enum Seen {
    Dir { empty: bool },
    File(Vec<u8>),
    Link(PathBuf),
    Special(SpecialKind),
}

fn walk_all(
    fd: std::os::fd::BorrowedFd<'_>,
    max: usize,
) -> Result<Vec<(String, Seen)>, ContainedError> {
    let mut out = Vec::new();
    walk(fd, max, &mut |entry| {
        let (path, seen) = match entry {
            WalkEntry::Directory { path, empty, .. } => (path.to_path_buf(), Seen::Dir { empty }),
            WalkEntry::RegularFile { path, file, .. } => {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(file, &mut bytes).unwrap();
                (path.to_path_buf(), Seen::File(bytes))
            }
            WalkEntry::Symlink { path, target } => {
                (path.to_path_buf(), Seen::Link(target.to_path_buf()))
            }
            WalkEntry::Special { path, kind } => (path.to_path_buf(), Seen::Special(kind)),
        };
        out.push((path.to_str().unwrap().to_owned(), seen));
        Ok(())
    })?;
    Ok(out)
}

#[test]
fn walk_reports_links_and_specials_without_following() {
    let (s, root, fd) = setup("walk");
    symlink(s.0.join("secret"), root.join("abs")).unwrap();
    symlink("../secret", root.join("sub/rel")).unwrap();
    symlink(s.0.clone(), root.join("dirout")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    std::fs::create_dir(root.join("empty")).unwrap();
    rustix::fs::mknodat(
        CWD,
        root.join("fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let seen = walk_all(fd.as_fd(), 100).unwrap();
    let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "abs",
            "dangling",
            "dirout",
            "empty",
            "fifo",
            "ok.txt",
            "sub",
            "sub/deep",
            "sub/rel",
            "sub/deep/f.txt"
        ]
    );
    let at = |p: &str| &seen.iter().find(|(q, _)| q == p).unwrap().1;
    assert_eq!(*at("abs"), Seen::Link(s.0.join("secret")));
    assert_eq!(*at("sub/rel"), Seen::Link(PathBuf::from("../secret")));
    assert_eq!(*at("dirout"), Seen::Link(s.0.clone()));
    assert_eq!(*at("empty"), Seen::Dir { empty: true });
    assert_eq!(*at("sub"), Seen::Dir { empty: false });
    assert_eq!(*at("fifo"), Seen::Special(SpecialKind::Fifo));
    assert_eq!(*at("ok.txt"), Seen::File(b"hello".to_vec()));
    assert!(!seen
        .iter()
        .any(|(_, k)| *k == Seen::File(b"TOP-SECRET".to_vec())));
    assert!(matches!(
        walk_all(fd.as_fd(), 3),
        Err(ContainedError::TooManyEntries { max_entries: 3 })
    ));
}

#[test]
fn create_dirs_refuses_symlinked_parents() {
    let (s, root, fd) = setup("mkdirs");
    std::fs::create_dir(s.0.join("outside")).unwrap();
    symlink(s.0.join("outside"), root.join("abs")).unwrap();
    symlink("../outside", root.join("rel")).unwrap();
    symlink("sub", root.join("inroot")).unwrap();
    for via in ["abs/x", "rel/x", "inroot/x"] {
        assert!(
            matches!(
                create_dirs_beneath(fd.as_fd(), Path::new(via), None),
                Err(ContainedError::OutsideRoot { .. })
            ),
            "{via}"
        );
    }
    assert!(std::fs::read_dir(s.0.join("outside"))
        .unwrap()
        .next()
        .is_none());
    for bad in ["", "../x", "/abs", "./a", "a/../b"] {
        assert!(
            matches!(
                create_dirs_beneath(fd.as_fd(), Path::new(bad), None),
                Err(ContainedError::InvalidPath { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        create_dirs_beneath(fd.as_fd(), Path::new("ok.txt/x"), None),
        Err(ContainedError::NotRegularFile { .. })
    ));
    create_dirs_beneath(fd.as_fd(), Path::new("a/b/c"), None).unwrap();
    assert!(root.join("a/b/c").is_dir());
    // Idempotent.
    create_dirs_beneath(fd.as_fd(), Path::new("a/b/c"), None).unwrap();
}

#[test]
fn replace_replaces_a_link_at_the_name_and_never_writes_outside() {
    let (s, root, fd) = setup("replace");
    symlink(s.0.join("secret"), root.join("victim")).unwrap();
    replace_beneath(fd.as_fd(), Path::new("victim"), b"new", None).unwrap();
    assert_eq!(std::fs::read(s.0.join("secret")).unwrap(), b"TOP-SECRET");
    assert!(!std::fs::symlink_metadata(root.join("victim"))
        .unwrap()
        .is_symlink());
    assert_eq!(std::fs::read(root.join("victim")).unwrap(), b"new");
    symlink("..", root.join("up")).unwrap();
    assert!(matches!(
        replace_beneath(fd.as_fd(), Path::new("up/secret"), b"x", None),
        Err(ContainedError::OutsideRoot { .. })
    ));
    assert!(matches!(
        replace_beneath(fd.as_fd(), Path::new("sub"), b"x", None),
        Err(ContainedError::NotRegularFile { .. })
    ));
    replace_beneath(fd.as_fd(), Path::new("n/e/w.txt"), b"deep", None).unwrap();
    assert_eq!(std::fs::read(root.join("n/e/w.txt")).unwrap(), b"deep");
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(checkfu_sandbox_contained::TEMP_PREFIX))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn overwrite_refuses_a_link_at_the_name() {
    let (s, root, fd) = setup("overwrite");
    symlink(s.0.join("secret"), root.join("victim")).unwrap();
    assert!(matches!(
        overwrite_beneath(fd.as_fd(), Path::new("victim"), b"x"),
        Err(ContainedError::OutsideRoot { .. })
    ));
    symlink(s.0.clone(), root.join("dir")).unwrap();
    assert!(matches!(
        overwrite_beneath(fd.as_fd(), Path::new("dir/secret"), b"x"),
        Err(ContainedError::OutsideRoot { .. })
    ));
    assert_eq!(std::fs::read(s.0.join("secret")).unwrap(), b"TOP-SECRET");
    overwrite_beneath(fd.as_fd(), Path::new("ok.txt"), b"bye").unwrap();
    assert_eq!(std::fs::read(root.join("ok.txt")).unwrap(), b"bye");
    overwrite_beneath(fd.as_fd(), Path::new("d/e"), b"ok").unwrap();
    assert_eq!(std::fs::read(root.join("d/e")).unwrap(), b"ok");
}

fn bits(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_directory_gets_exactly_its_bits_and_never_through_a_link() {
    let (s, root, fd) = setup("mkdir-mode");
    // 0o777: bits a creation mode would lose to the usual umask (022).
    create_dir_beneath_mode(fd.as_fd(), Path::new("n/e/w"), None, 0o777).unwrap();
    assert_eq!(bits(&root.join("n/e/w")), 0o777);
    assert_eq!(bits(&root.join("n/e")), 0o755, "parents are 0755");
    // An existing directory keeps its place and takes the new bits; set-id
    // and sticky bits are masked off.
    create_dir_beneath_mode(fd.as_fd(), Path::new("n/e/w"), None, 0o7700).unwrap();
    assert_eq!(bits(&root.join("n/e/w")), 0o700);
    assert!(matches!(
        create_dir_beneath_mode(fd.as_fd(), Path::new("ok.txt"), None, 0o755),
        Err(ContainedError::NotRegularFile { .. })
    ));
    std::fs::create_dir(s.0.join("outside")).unwrap();
    let outside_bits = bits(&s.0.join("outside"));
    symlink(s.0.join("outside"), root.join("abs")).unwrap();
    for via in ["abs", "abs/x"] {
        assert!(
            matches!(
                create_dir_beneath_mode(fd.as_fd(), Path::new(via), None, 0o700),
                Err(ContainedError::OutsideRoot { .. })
            ),
            "{via}"
        );
    }
    assert_eq!(
        bits(&s.0.join("outside")),
        outside_bits,
        "never chmod through a link"
    );
}

#[test]
fn overwrite_with_a_mode_sets_exactly_those_bits() {
    let (_s, root, fd) = setup("overwrite-mode");
    overwrite_beneath_mode(fd.as_fd(), Path::new("x.sh"), b"#!/bin/sh\n", 0o777).unwrap();
    assert_eq!(bits(&root.join("x.sh")), 0o777);
    // An existing file takes the new bits, not the ones it had.
    overwrite_beneath_mode(fd.as_fd(), Path::new("x.sh"), b"again", 0o4600).unwrap();
    assert_eq!(bits(&root.join("x.sh")), 0o600);
    assert_eq!(std::fs::read(root.join("x.sh")).unwrap(), b"again");
}

#[test]
fn parent_directories_open_without_links() {
    let (s, root, fd) = setup("parent");
    open_dir_beneath_nofollow(fd.as_fd(), Path::new("")).unwrap();
    open_dir_beneath_nofollow(fd.as_fd(), Path::new("sub/deep")).unwrap();
    symlink("sub", root.join("inroot")).unwrap();
    symlink(s.0.clone(), root.join("abs")).unwrap();
    for p in ["inroot", "abs", "..", "sub/../.."] {
        assert!(
            matches!(
                open_dir_beneath_nofollow(fd.as_fd(), Path::new(p)),
                Err(ContainedError::OutsideRoot { .. })
            ),
            "{p}"
        );
    }
    assert!(matches!(
        open_dir_beneath_nofollow(fd.as_fd(), Path::new("missing")),
        Err(ContainedError::NotFound { .. })
    ));
    // resolve_beneath follows in-root links but not climbing ones.
    resolve_beneath(fd.as_fd(), Path::new("inroot/deep/f.txt")).unwrap();
    symlink("../secret", root.join("climb")).unwrap();
    assert!(matches!(
        resolve_beneath(fd.as_fd(), Path::new("climb")),
        Err(ContainedError::OutsideRoot { .. })
    ));
}
