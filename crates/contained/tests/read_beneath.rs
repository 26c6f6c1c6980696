//! Contained reads beneath a root with real files: plain reads, in-root
//! links, and every escape shape (absolute, relative, dangling, climbing
//! and chained symlinks, `..`, procfs magic links, races).

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use checkfu_sandbox_contained::{open_beneath_nofollow, read_beneath, ContainedError};
use common::setup;
use rustix::fs::{FileType, Mode, CWD};

fn read(fd: &OwnedFd, p: &str) -> Result<Vec<u8>, ContainedError> {
    read_beneath(fd.as_fd(), Path::new(p), 1024)
}

fn assert_outside(r: Result<Vec<u8>, ContainedError>) {
    match r {
        Err(ContainedError::OutsideRoot { .. }) => {}
        other => panic!("expected OutsideRoot, got {other:?}"),
    }
}

#[test]
fn plain_reads_and_in_root_links_work() {
    let (_s, root, fd) = setup("plain");
    assert_eq!(read(&fd, "ok.txt").unwrap(), b"hello");
    assert_eq!(read(&fd, "sub/deep/f.txt").unwrap(), b"deep");
    assert_eq!(read(&fd, "sub/../ok.txt").unwrap(), b"hello");
    symlink("sub/deep/f.txt", root.join("rel-in")).unwrap();
    symlink("../ok.txt", root.join("sub/up-in")).unwrap();
    symlink("sub", root.join("dirlink")).unwrap();
    assert_eq!(read(&fd, "rel-in").unwrap(), b"deep");
    assert_eq!(read(&fd, "sub/up-in").unwrap(), b"hello");
    assert_eq!(read(&fd, "dirlink/deep/f.txt").unwrap(), b"deep");
    // The strict variant refuses in-root links too.
    assert!(matches!(
        open_beneath_nofollow(fd.as_fd(), Path::new("rel-in")),
        Err(ContainedError::OutsideRoot { .. })
    ));
}

#[test]
fn escape_absolute_symlink() {
    let (s, root, fd) = setup("abs");
    symlink(s.0.join("secret"), root.join("abs")).unwrap();
    assert_outside(read(&fd, "abs"));
}

#[test]
fn escape_relative_dotdot_symlink() {
    let (_s, root, fd) = setup("reldd");
    symlink("../secret", root.join("up")).unwrap();
    assert_outside(read(&fd, "up"));
    symlink("../../secret", root.join("sub/up2")).unwrap();
    assert_outside(read(&fd, "sub/up2"));
}

#[test]
fn escape_dotdot_in_path() {
    let (_s, _root, fd) = setup("ddpath");
    assert_outside(read(&fd, "../secret"));
    assert_outside(read(&fd, "sub/../../secret"));
    assert_outside(read(&fd, "sub/deep/../../../secret"));
}

#[test]
fn escape_absolute_path_argument() {
    let (s, _root, fd) = setup("abspath");
    let p = s.0.join("secret");
    assert_outside(read(&fd, p.to_str().unwrap()));
    assert_outside(read(&fd, "/etc/passwd"));
}

#[test]
fn dangling_link_is_not_found() {
    let (_s, root, fd) = setup("dangling");
    symlink("nowhere", root.join("dangle")).unwrap();
    assert!(matches!(
        read(&fd, "dangle"),
        Err(ContainedError::NotFound { .. })
    ));
    assert!(matches!(
        read(&fd, "missing"),
        Err(ContainedError::NotFound { .. })
    ));
    // A dangling absolute link is still an escape, not a miss.
    symlink("/nonexistent/checkfu", root.join("dangle-abs")).unwrap();
    assert_outside(read(&fd, "dangle-abs"));
}

#[test]
fn escape_link_chain() {
    let (_s, root, fd) = setup("chain");
    symlink("b", root.join("a")).unwrap();
    symlink("sub/c", root.join("b")).unwrap();
    symlink("../../secret", root.join("sub/c")).unwrap();
    assert_outside(read(&fd, "a"));
}

#[test]
fn escape_proc_self_root() {
    let (_s, root, fd) = setup("procroot");
    symlink("/proc/self/root", root.join("pr")).unwrap();
    assert_outside(read(&fd, "pr/etc/passwd"));
    // A relative path that walks into a bind-mounted-like procfs is
    // refused by RESOLVE_BENEATH before magic links matter.
    symlink("/proc/self/fd", root.join("pfd")).unwrap();
    assert_outside(read(&fd, "pfd/0"));
}

#[test]
fn escape_symlinked_directory_component() {
    let (s, root, fd) = setup("dircomp");
    std::fs::create_dir(s.0.join("outside")).unwrap();
    std::fs::write(s.0.join("outside/f"), b"OUT").unwrap();
    symlink(s.0.join("outside"), root.join("d-abs")).unwrap();
    symlink("../outside", root.join("d-rel")).unwrap();
    assert_outside(read(&fd, "d-abs/f"));
    assert_outside(read(&fd, "d-rel/f"));
    symlink("../d-rel", root.join("sub/d2")).unwrap();
    assert_outside(read(&fd, "sub/d2/f"));
}

#[test]
fn link_loop_is_refused() {
    let (_s, root, fd) = setup("loop");
    symlink("l2", root.join("l1")).unwrap();
    symlink("l1", root.join("l2")).unwrap();
    assert_outside(read(&fd, "l1"));
}

#[test]
fn non_regular_and_too_large() {
    let (_s, root, fd) = setup("nonreg");
    assert!(matches!(
        read(&fd, "sub"),
        Err(ContainedError::NotRegularFile { .. })
    ));
    let fifo = root.join("fifo");
    rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    // Must not block: O_PATH never opens the FIFO for reading.
    assert!(matches!(
        read(&fd, "fifo"),
        Err(ContainedError::NotRegularFile { .. })
    ));
    std::fs::write(root.join("big"), vec![7u8; 2048]).unwrap();
    assert!(matches!(
        read(&fd, "big"),
        Err(ContainedError::TooLarge {
            maximum_bytes: 1024,
            ..
        })
    ));
    std::fs::write(root.join("exact"), vec![7u8; 1024]).unwrap();
    assert_eq!(read(&fd, "exact").unwrap().len(), 1024);
    assert!(matches!(
        read(&fd, ""),
        Err(ContainedError::InvalidPath { .. })
    ));
}

#[test]
fn root_swap_after_open_still_contained() {
    // The root descriptor keeps designating the original directory
    // even when its path is replaced by a symlink to elsewhere.
    let (s, root, fd) = setup("rootswap");
    std::fs::rename(&root, s.0.join("moved")).unwrap();
    symlink(s.0.clone(), &root).unwrap();
    assert_eq!(read(&fd, "ok.txt").unwrap(), b"hello");
    assert!(matches!(
        read(&fd, "secret"),
        Err(ContainedError::NotFound { .. })
    ));
}

#[test]
fn racing_swap_never_returns_secret() {
    let (s, root, fd) = setup("race");
    let target = root.join("victim");
    let tmp_file = root.join("victim.file");
    let tmp_link = root.join("victim.link");
    let secret = s.0.join("secret");
    std::fs::write(&target, b"benign").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (target, tmp_file, tmp_link, secret) = (
            target.clone(),
            tmp_file.clone(),
            tmp_link.clone(),
            secret.clone(),
        );
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Atomically replace the file by a link, then back.
                let _ = std::fs::remove_file(&tmp_link);
                symlink(&secret, &tmp_link).unwrap();
                std::fs::rename(&tmp_link, &target).unwrap();
                std::fs::write(&tmp_file, b"benign").unwrap();
                std::fs::rename(&tmp_file, &target).unwrap();
                n += 1;
            }
            n
        })
    };
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..2000 {
        match read(&fd, "victim") {
            Ok(bytes) => {
                assert_ne!(bytes, b"TOP-SECRET", "secret leaked");
                assert_eq!(bytes, b"benign");
                ok += 1;
            }
            Err(ContainedError::OutsideRoot { .. }) | Err(ContainedError::NotFound { .. }) => {
                refused += 1
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0);
    eprintln!("race: {ok} benign reads, {refused} refusals, {swaps} swaps");
}
