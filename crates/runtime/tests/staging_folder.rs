//! Reading a host folder for staging: every regular file with its bits,
//! then every directory that is empty or whose bits are not 0o755 (the
//! directories writeFile's `kind: "directory"` makes), each group in path
//! order; symlinks are refused, not skipped.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use checkfu_sandbox_contract::{FailureReason, SandboxError, WriteKind};
use checkfu_sandbox_runtime::staging::read_folder;

fn chmod(p: &Path, bits: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(bits)).unwrap();
}

#[test]
fn files_first_then_empty_and_non_0755_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path();
    for d in ["a/empty", "b", "private", "plain/deeper/empty2", "wide"] {
        std::fs::create_dir_all(m.join(d)).unwrap();
    }
    std::fs::write(m.join("run.sh"), b"#!/bin/sh\n").unwrap();
    chmod(&m.join("run.sh"), 0o755);
    std::fs::write(m.join("private/key"), b"k").unwrap();
    chmod(&m.join("private/key"), 0o600);
    std::fs::write(m.join("wide/f"), b"f").unwrap();
    chmod(&m.join("wide/f"), 0o644);
    for d in ["a", "b", "plain", "plain/deeper", "plain/deeper/empty2"] {
        chmod(&m.join(d), 0o755);
    }
    chmod(&m.join("a/empty"), 0o755);
    chmod(&m.join("private"), 0o700);
    chmod(&m.join("wide"), 0o775);
    let got: Vec<(String, WriteKind, u32, usize)> = read_folder(m)
        .unwrap()
        .into_iter()
        .map(|f| {
            (
                String::from_utf8(f.path).unwrap(),
                f.kind,
                f.mode,
                f.bytes.len(),
            )
        })
        .collect();
    let want = vec![
        ("private/key".to_string(), WriteKind::File, 0o600, 1),
        ("run.sh".to_string(), WriteKind::File, 0o755, 10),
        ("wide/f".to_string(), WriteKind::File, 0o644, 1),
        // `a` holds `empty`, `plain` and `plain/deeper` hold directories:
        // 0755 and not empty, so they appear with what is below them.
        ("a/empty".to_string(), WriteKind::Directory, 0o755, 0),
        ("b".to_string(), WriteKind::Directory, 0o755, 0),
        (
            "plain/deeper/empty2".to_string(),
            WriteKind::Directory,
            0o755,
            0,
        ),
        ("private".to_string(), WriteKind::Directory, 0o700, 0),
        ("wide".to_string(), WriteKind::Directory, 0o775, 0),
    ];
    assert_eq!(got, want);
}

#[test]
fn a_symlink_in_the_folder_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    std::os::unix::fs::symlink("/etc", tmp.path().join("link")).unwrap();
    let f = read_folder(tmp.path()).unwrap_err();
    let e = f.error();
    match e {
        SandboxError::SandboxOperationFailed {
            reason, message, ..
        } => {
            assert_eq!(*reason, FailureReason::NotRegularFile, "{e}");
            assert!(message.contains("link"), "{e}");
        }
        other => panic!("{other}"),
    }
}
