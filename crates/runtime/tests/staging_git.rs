//! Git staging through the `git` command line: modes kept, object ids
//! verified, both object formats, refusals typed.

use std::path::Path;
use std::process::Command;

use checkfu_sandbox_contract::{FailureReason, SandboxError};
use checkfu_sandbox_runtime::git::{read_blobs, GitMode};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// A repository in `dir` (object format `format`) with a regular file, an
/// executable one in a subdirectory, committed; returns the commit id.
fn repo(dir: &Path, format: &str) -> String {
    git(dir, &["init", "-q", &format!("--object-format={format}")]);
    std::fs::write(dir.join("a.txt"), b"alpha\n").unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/run.sh"), b"#!/bin/sh\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["update-index", "--chmod=+x", "bin/run.sh"]);
    git(dir, &["commit", "-q", "-m", "fixture"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn reason(f: &checkfu_sandbox_contract::SandboxFailure) -> FailureReason {
    match f.error() {
        SandboxError::SandboxOperationFailed { reason, .. } => *reason,
        other => panic!("expected SandboxOperationFailed, actual {other:?}"),
    }
}

#[test]
fn modes_and_bytes_are_kept_in_both_object_formats() {
    for format in ["sha1", "sha256"] {
        let dir = tempfile::tempdir().unwrap();
        let head = repo(dir.path(), format);
        let blobs = read_blobs(dir.path(), &head, "").unwrap();
        let listed: Vec<(&str, GitMode, &[u8])> = blobs
            .iter()
            .map(|b| (b.path.as_str(), b.mode, b.bytes.as_slice()))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("a.txt", GitMode::Regular, &b"alpha\n"[..]),
                ("bin/run.sh", GitMode::Executable, &b"#!/bin/sh\n"[..]),
            ],
            "{format}"
        );
        let one = read_blobs(dir.path(), "HEAD", "/bin/run.sh").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].path.as_str(), one[0].mode),
            ("run.sh", GitMode::Executable)
        );
        let sub = read_blobs(dir.path(), "HEAD", "bin").unwrap();
        assert_eq!(sub[0].path, "run.sh");
    }
}

#[test]
fn missing_revision_path_and_repository_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), "sha1");
    let f = read_blobs(dir.path(), "no-such-rev", "").unwrap_err();
    assert_eq!(reason(&f), FailureReason::NotFound);
    assert!(f.to_string().contains("no-such-rev"), "{f}");
    let f = read_blobs(dir.path(), "HEAD", "nope").unwrap_err();
    assert_eq!(reason(&f), FailureReason::NotFound);
    assert!(f.to_string().contains("nope"), "{f}");
    // A plain directory inside no repository (discovery stops at it).
    let plain = tempfile::tempdir().unwrap();
    let f = read_blobs(plain.path(), "HEAD", "").unwrap_err();
    assert_eq!(reason(&f), FailureReason::NotFound);
}

#[test]
fn symlinks_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), "sha1");
    std::os::unix::fs::symlink("a.txt", dir.path().join("link")).unwrap();
    git(dir.path(), &["add", "link"]);
    git(dir.path(), &["commit", "-q", "-m", "link"]);
    let f = read_blobs(dir.path(), "HEAD", "").unwrap_err();
    assert_eq!(reason(&f), FailureReason::InvalidRequest);
    assert!(
        f.to_string().contains("link") && f.to_string().contains("120000"),
        "{f}"
    );
}

/// A loose object whose bytes are another blob's: git serves them under
/// the first id, and the recomputed id catches it.
#[test]
fn a_blob_whose_bytes_do_not_hash_to_its_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let head = repo(dir.path(), "sha1");
    let id = git(dir.path(), &["rev-parse", "HEAD:a.txt"]);
    std::fs::write(dir.path().join("other"), b"omega\n").unwrap();
    let other = git(dir.path(), &["hash-object", "-w", "other"]);
    let loose = |id: &str| {
        dir.path()
            .join(".git/objects")
            .join(&id[..2])
            .join(&id[2..])
    };
    std::fs::remove_file(loose(&id)).unwrap();
    std::fs::copy(loose(&other), loose(&id)).unwrap();
    let f = read_blobs(dir.path(), &head, "").unwrap_err();
    assert_eq!(reason(&f), FailureReason::ProviderError);
    assert!(f.to_string().contains(&id), "{f}");
}

#[test]
fn git_missing_is_a_typed_not_found() {
    // The tests of this file share one process: run the check in a child
    // with an empty PATH instead of changing this process's environment.
    if std::env::var_os("CHECKFU_GIT_MISSING_CHILD").is_some() {
        let dir = tempfile::tempdir().unwrap();
        let f = read_blobs(dir.path(), "HEAD", "").unwrap_err();
        assert_eq!(reason(&f), FailureReason::NotFound);
        assert!(
            f.to_string().contains("git command line is not installed"),
            "{f}"
        );
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let o = Command::new(exe)
        .args(["--exact", "git_missing_is_a_typed_not_found", "--nocapture"])
        .env("CHECKFU_GIT_MISSING_CHILD", "1")
        .env("PATH", "")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("1 passed"), "{o:?}");
}
