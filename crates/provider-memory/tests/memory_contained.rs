//! Physically contained reads: readFile, readFiles, listDir, listProjectDir.

mod common;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{FsNode, MemoryProvider, SpecialKind};
use common::*;

/// An active instance whose read-write mount holds files and, planted by
/// the workload itself, links of every escape shape.
async fn fixture() -> (MemoryProvider, String) {
    let (p, _) = provider();
    let id = active_with(
        &p,
        &request(RetentionMode::EphemeralZdr),
        &[
            ("/data/rw/a.txt", b"inside"),
            ("/data/rw/sub/b.txt", b"nested"),
            ("/data/ro/secret.txt", b"other mount"),
            ("/mnt/session/outputs/result.json", b"{}"),
        ],
    )
    .await;
    p.plant(&id, "/etc/shadow", FsNode::File(b"outside".to_vec()))
        .unwrap();
    let links: &[(&str, &str)] = &[
        ("abs", "/etc/shadow"),
        ("abs_inside", "/data/rw/a.txt"),
        ("rel_out", "../../etc/shadow"),
        ("sub/deep_out", "../../../etc/shadow"),
        ("up", ".."),
        ("sibling", "../ro/secret.txt"),
        ("dangling_out", "../../nowhere"),
        ("dangling_abs", "/nowhere"),
        ("dangling_in", "missing.txt"),
        ("loop_a", "loop_b"),
        ("loop_b", "loop_a"),
        ("self", "self"),
        ("root", "/"),
        ("ok", "sub/b.txt"),
        ("ok_up_down", "sub/../a.txt"),
        ("dir", "sub"),
    ];
    for (at, target) in links {
        let r = run(&p, &id, &["ln", "-s", target, &format!("/data/rw/{at}")]).await;
        assert_eq!(r.exit, ExitCause::ExitCode(0), "{at}: {}", stderr(&r));
    }
    run(&p, &id, &["mkfifo", "/data/rw/fifo"]).await;
    (p, id)
}

const ESCAPES: [&str; 14] = [
    "/data/rw/abs",
    "/data/rw/abs_inside",
    "/data/rw/rel_out",
    "/data/rw/sub/deep_out",
    "/data/rw/up/ro/secret.txt",
    "/data/rw/sub/../up/ro/secret.txt",
    "/data/rw/sibling",
    "/data/rw/dangling_out",
    "/data/rw/dangling_abs",
    "/data/rw/loop_a",
    "/data/rw/self",
    "/data/rw/root/etc/shadow",
    "/data/rw/dir/../../ro/secret.txt",
    "/data/ro/secret.txt",
];

#[tokio::test]
async fn read_file_refuses_every_escape_shape() {
    let (p, id) = fixture().await;
    for path in ESCAPES {
        let e = read(&p, &id, RW, path).await.unwrap_err();
        assert_eq!(reason(&e), Some(FailureReason::OutsideRoot), "{path}: {e}");
        if let SandboxError::SandboxOperationFailed { operation, .. } = &e {
            assert_eq!(operation, "read_file");
        }
    }
}

#[tokio::test]
async fn read_file_follows_links_inside_and_names_other_failures() {
    let (p, id) = fixture().await;
    for (path, want) in [
        ("/data/rw/a.txt", &b"inside"[..]),
        ("/data/rw/ok", b"nested"),
        ("/data/rw/ok_up_down", b"inside"),
        ("/data/rw/dir/b.txt", b"nested"),
    ] {
        let got = read(&p, &id, "/data/rw", path).await;
        assert_eq!(got.map(|c| c.content_base64.0), Ok(want.to_vec()), "{path}");
    }
    // A deeper root works the same way.
    let got = read(&p, &id, "/data/rw/sub", "/data/rw/sub/b.txt")
        .await
        .unwrap();
    assert_eq!(got.path, "/data/rw/sub/b.txt");
    for (path, want) in [
        ("/data/rw/missing", FailureReason::NotFound),
        ("/data/rw/dangling_in", FailureReason::NotFound),
        ("/data/rw/a.txt/x", FailureReason::NotFound),
        ("/data/rw/sub", FailureReason::NotRegularFile),
        ("/data/rw/fifo", FailureReason::NotRegularFile),
    ] {
        let e = read(&p, &id, RW, path).await.unwrap_err();
        assert_eq!(reason(&e), Some(want), "{path}");
    }
    let e = p
        .read_file(ReadFileRequest {
            instance_id: id.clone(),
            path: "/data/rw/a.txt".into(),
            allowed_root: RW.into(),
            maximum_bytes: 5,
        })
        .await
        .unwrap_err();
    assert_eq!(
        e,
        SandboxError::SandboxFileTooLarge {
            path: "/data/rw/a.txt".into(),
            limit_bytes: 5,
            actual_bytes: 6
        }
    );
    let out = read(
        &p,
        &id,
        "/mnt/session/outputs",
        "/mnt/session/outputs/result.json",
    )
    .await
    .unwrap();
    assert_eq!(out.content_base64.0, b"{}");
}

#[tokio::test]
async fn read_files_answers_each_member_in_order() {
    let (p, id) = fixture().await;
    let entry = |path: &str, maximum_bytes| ReadFilesEntry {
        path: path.into(),
        maximum_bytes,
    };
    let files = vec![
        entry("/data/rw/a.txt", 100),
        entry("/data/rw/abs", 100),
        entry("/data/rw/missing", 100),
        entry("/data/rw/sub", 100),
        entry("/data/rw/sub/b.txt", 3),
        entry("/data/rw/ok", 100),
    ];
    let aggregate_maximum_bytes = files.iter().map(|f| f.maximum_bytes).sum();
    let got = SandboxProvider::read_files(&p)
        .unwrap()
        .read_files(ReadFilesRequest {
            instance_id: id,
            allowed_root: RW.into(),
            files,
            aggregate_maximum_bytes,
        })
        .await
        .unwrap();
    assert_eq!(
        got.files,
        vec![
            ReadFileOutcome::Read {
                path: "/data/rw/a.txt".into(),
                content_base64: Bytes(b"inside".to_vec())
            },
            ReadFileOutcome::OutsideRoot {
                path: "/data/rw/abs".into()
            },
            ReadFileOutcome::NotFound {
                path: "/data/rw/missing".into()
            },
            ReadFileOutcome::NotRegularFile {
                path: "/data/rw/sub".into()
            },
            ReadFileOutcome::TooLarge {
                path: "/data/rw/sub/b.txt".into(),
                size_bytes: 6
            },
            ReadFileOutcome::Read {
                path: "/data/rw/ok".into(),
                content_base64: Bytes(b"nested".to_vec())
            },
        ]
    );
}

#[tokio::test]
async fn list_dir_lists_regular_files_with_digests() {
    let (p, id) = fixture().await;
    let got = SandboxProvider::list_dir(&p)
        .unwrap()
        .list_dir(ListDirRequest {
            instance_id: id.clone(),
            root: RW.into(),
            max_entries: 100,
        })
        .await
        .unwrap();
    let paths: Vec<String> = got.entries.iter().map(|e| e.path.display()).collect();
    assert_eq!(paths, vec!["/data/rw/a.txt", "/data/rw/sub/b.txt"]);
    assert_eq!(got.entries[0].size_bytes, 6);
    let r = run(&p, &id, &["sha256sum", "/data/rw/a.txt"]).await;
    assert_eq!(
        format!(
            "{}  /data/rw/a.txt\n",
            got.entries[0].sha256.as_ref().unwrap().hex()
        ),
        stdout(&r)
    );
    let e = SandboxProvider::list_dir(&p)
        .unwrap()
        .list_dir(ListDirRequest {
            instance_id: id,
            root: RW.into(),
            max_entries: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(FailureReason::InvalidRequest));
}

#[tokio::test]
async fn list_project_dir_names_every_leaf() {
    let (p, id) = fixture().await;
    for (path, kind) in [
        ("/data/rw/proj/dev", SpecialKind::Device),
        ("/data/rw/proj/sock", SpecialKind::Socket),
        ("/data/rw/proj/vendor", SpecialKind::Submodule),
        ("/data/rw/proj/odd", SpecialKind::Other),
    ] {
        p.plant(&id, path, FsNode::Special(kind)).unwrap();
    }
    p.plant(&id, "/data/rw/proj/x.rs", FsNode::File(b"fn".to_vec()))
        .unwrap();
    p.plant(
        &id,
        "/data/rw/proj/l",
        FsNode::Symlink("/etc/shadow".into()),
    )
    .unwrap();
    run(&p, &id, &["mkfifo", "/data/rw/proj/fifo"]).await;
    let got = SandboxProvider::list_project_dir(&p)
        .unwrap()
        .list_project_dir(ListProjectDirRequest {
            instance_id: id,
            root: "/data/rw/proj".into(),
            max_entries: 100,
        })
        .await
        .unwrap();
    assert!(got.complete);
    let kinds: Vec<(String, String)> = got
        .entries
        .iter()
        .map(|e| {
            let v = serde_json::to_value(&e.kind).unwrap();
            (e.path.display(), v["kind"].as_str().unwrap().to_string())
        })
        .collect();
    let want = [
        ("/data/rw/proj/dev", "device"),
        ("/data/rw/proj/fifo", "fifo"),
        ("/data/rw/proj/l", "symlink"),
        ("/data/rw/proj/odd", "other"),
        ("/data/rw/proj/sock", "socket"),
        ("/data/rw/proj/vendor", "submodule"),
        ("/data/rw/proj/x.rs", "regular"),
    ];
    assert_eq!(
        kinds,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        got.entries[2].kind,
        ProjectEntryKind::Symlink {
            target: "/etc/shadow".into()
        }
    );
}

#[tokio::test]
async fn listing_roots_must_be_physical_directories() {
    let (p, id) = fixture().await;
    let e = SandboxProvider::list_dir(&p)
        .unwrap()
        .list_dir(ListDirRequest {
            instance_id: id.clone(),
            root: "/data/rw/dir".into(),
            max_entries: 10,
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(FailureReason::OutsideRoot));
}
