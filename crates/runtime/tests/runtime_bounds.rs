//! Request bounds, enforced before the provider is called, and readFiles
//! grouping by allowed_root with its fallback (spec "Bounds", "Paths,
//! mounts": roots are separate trust domains; "Optional capabilities":
//! readFiles absent; DESIGN D9).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::bounds::*;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

async fn execute_refused(command: SandboxCommand) -> SandboxError {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .execute(&i.instance_id, command)
        .await
        .unwrap_err();
    assert!(h.provider.calls().is_empty(), "{:?}", h.provider.calls());
    only(&f).clone()
}

fn cmd(f: impl FnOnce(&mut SandboxCommand)) -> SandboxCommand {
    let mut c = echo(&[]);
    c.executable = "true".into();
    f(&mut c);
    c
}

#[tokio::test]
async fn execute_over_256_arguments_is_refused() {
    let e = execute_refused(cmd(|c| c.arguments = vec!["a".into(); 257])).await;
    assert_invalid(&e, op::EXECUTE, "arguments", "at most 256 arguments", "257");
}

#[tokio::test]
async fn execute_argument_over_65536_bytes_is_refused() {
    let e = execute_refused(cmd(|c| c.arguments = vec!["ok".into(), "a".repeat(65_537)])).await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "arguments[1]",
        "at most 65536 bytes",
        "65537 bytes",
    );
}

#[tokio::test]
async fn execute_argument_with_nul_is_refused() {
    let e = execute_refused(cmd(|c| c.arguments = vec!["a\0b".into()])).await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "arguments[0]",
        "an argument without NUL",
        "\"a\\u0000b\"",
    );
}

#[tokio::test]
async fn execute_environment_key_outside_the_pattern_is_refused() {
    for key in ["1BAD", "A-B", "", "Ä"] {
        let e = execute_refused(cmd(|c| {
            c.environment.insert(key.into(), "v".into());
        }))
        .await;
        assert_invalid(
            &e,
            op::EXECUTE,
            &format!("environment[{key:?}]"),
            "a key matching ^[A-Za-z_][A-Za-z0-9_]*$",
            &format!("{key:?}"),
        );
    }
}

#[tokio::test]
async fn execute_timeout_above_max_duration_is_refused() {
    let e = execute_refused(cmd(|c| c.timeout_seconds = 601)).await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "timeout_seconds",
        "1..=600 (the profile's max_duration_seconds)",
        "601",
    );
    let e = execute_refused(cmd(|c| c.timeout_seconds = 0)).await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "timeout_seconds",
        "1..=600 (the profile's max_duration_seconds)",
        "0",
    );
}

#[tokio::test]
async fn execute_output_limit_over_16_mib_is_refused() {
    let e = execute_refused(cmd(|c| c.output_limit_bytes = MAX_OUTPUT_LIMIT_BYTES + 1)).await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "output_limit_bytes",
        "at most 16777216",
        "16777217",
    );
}

#[tokio::test]
async fn execute_stdin_over_16_mib_is_refused() {
    let e = execute_refused(cmd(|c| {
        c.stdin_base64 = Some(Bytes(vec![0; MAX_STDIN_BYTES as usize + 1]))
    }))
    .await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "stdin_base64",
        "at most 16777216 bytes",
        "16777217 bytes",
    );
}

#[tokio::test]
async fn execute_relative_working_directory_is_refused() {
    let e = execute_refused(cmd(|c| c.working_directory = "project".into())).await;
    assert_invalid(
        &e,
        op::EXECUTE,
        "working_directory",
        "an absolute path",
        "\"project\"",
    );
}

#[tokio::test]
async fn execute_exactly_at_every_bound_is_admitted() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let c = cmd(|c| {
        c.arguments = vec!["a".repeat(MAX_ARGUMENT_BYTES); MAX_ARGUMENTS];
        c.timeout_seconds = 600;
        c.output_limit_bytes = MAX_OUTPUT_LIMIT_BYTES;
        c.environment.insert("_OK_1".into(), "v".into());
    });
    h.adapter.execute(&i.instance_id, c.clone()).await.unwrap();
    // Admitted unchanged: the provider received exactly this command. (The
    // oracle then refuses to launch it, exit 126, as a kernel would: the
    // arguments fill more than the kernel's argument space; that is the
    // provider's answer, not an admission.)
    let seen: Vec<ExecuteRequest> = h.provider.requests(op::EXECUTE);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].command, c);
}

#[tokio::test]
async fn read_file_maximum_bytes_over_16_mib_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .read_file(&i.instance_id, &format!("{OUT}/x"), MAX_READ_FILE_BYTES + 1)
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::READ_FILE,
        "maximum_bytes",
        "at most 16777216",
        "16777217",
    );
    assert!(h.provider.calls().is_empty());
}

fn entry(path: &str, maximum_bytes: u64) -> ReadFilesEntry {
    ReadFilesEntry {
        path: path.into(),
        maximum_bytes,
    }
}

#[tokio::test]
async fn read_files_over_1024_members_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let files: Vec<_> = (0..1025).map(|n| entry(&format!("{OUT}/{n}"), 1)).collect();
    let f = h
        .adapter
        .read_files(&i.instance_id, files)
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::READ_FILES,
        "files",
        "at most 1024 files",
        "1025 files",
    );
    assert!(h.provider.calls().is_empty());
    let files: Vec<_> = (0..1024).map(|n| entry(&format!("{OUT}/{n}"), 1)).collect();
    assert_eq!(
        h.adapter
            .read_files(&i.instance_id, files)
            .await
            .unwrap()
            .len(),
        1024
    );
}

#[tokio::test]
async fn read_files_member_over_16_mib_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let files = vec![
        entry(&format!("{OUT}/a"), 1),
        entry(&format!("{OUT}/b"), MAX_READ_FILE_BYTES + 1),
    ];
    let f = h
        .adapter
        .read_files(&i.instance_id, files)
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::READ_FILES,
        "files[1].maximum_bytes",
        "at most 16777216",
        "16777217",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn read_files_aggregate_over_128_mib_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let nine: Vec<_> = (0..9)
        .map(|n| entry(&format!("{OUT}/{n}"), MAX_READ_FILE_BYTES))
        .collect();
    let f = h
        .adapter
        .read_files(&i.instance_id, nine)
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::READ_FILES,
        "files",
        "an aggregate of at most 134217728 bytes",
        "more",
    );
    assert!(h.provider.calls().is_empty());
    // Exactly 128 MiB is admitted.
    let eight: Vec<_> = (0..8)
        .map(|n| entry(&format!("{OUT}/{n}"), MAX_READ_FILE_BYTES))
        .collect();
    h.adapter.read_files(&i.instance_id, eight).await.unwrap();
    assert_eq!(
        h.provider.read_files_requests()[0].aggregate_maximum_bytes,
        MAX_READ_FILES_AGGREGATE_BYTES
    );
}

/// A batch spanning three roots, interleaved, with a missing member and
/// one over its own budget.
fn three_root_batch() -> Vec<ReadFilesEntry> {
    vec![
        entry("/workspace/project/a", 100),
        entry("/data/b", 200),
        entry("/mnt/session/outputs/c", 300),
        entry("/workspace/project/missing", 400),
        entry("/data/big", 3),
        entry("/mnt/session/outputs/d", 500),
    ]
}

fn seed(h: &Harness, id: &str) {
    for (p, c) in [
        ("/workspace/project/a", "A"),
        ("/data/b", "B"),
        ("/mnt/session/outputs/c", "C"),
        ("/data/big", "too big"),
        ("/mnt/session/outputs/d", "D"),
    ] {
        h.provider.put_file(id, p, c.as_bytes());
    }
}

fn expected_outcomes() -> Vec<ReadFileOutcome> {
    let read = |p: &str, c: &str| ReadFileOutcome::Read {
        path: p.into(),
        content_base64: Bytes::from(c),
    };
    vec![
        read("/workspace/project/a", "A"),
        read("/data/b", "B"),
        read("/mnt/session/outputs/c", "C"),
        ReadFileOutcome::NotFound {
            path: "/workspace/project/missing".into(),
        },
        ReadFileOutcome::TooLarge {
            path: "/data/big".into(),
            size_bytes: 7,
        },
        read("/mnt/session/outputs/d", "D"),
    ]
}

#[tokio::test]
async fn read_files_spanning_three_roots_is_three_calls_each_with_its_own_budget() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    seed(&h, &i.instance_id);
    let got = h
        .adapter
        .read_files(&i.instance_id, three_root_batch())
        .await
        .unwrap();
    assert_eq!(got, expected_outcomes(), "outcomes in request order");
    let calls: Vec<(String, Vec<String>, u64)> = h
        .provider
        .read_files_requests()
        .into_iter()
        .map(|r| {
            (
                r.allowed_root,
                r.files.into_iter().map(|f| f.path.display()).collect(),
                r.aggregate_maximum_bytes,
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            (
                PROJECT.to_string(),
                vec![
                    "/workspace/project/a".to_string(),
                    "/workspace/project/missing".to_string()
                ],
                500,
            ),
            (
                DATA.to_string(),
                vec!["/data/b".to_string(), "/data/big".to_string()],
                203,
            ),
            (
                OUT.to_string(),
                vec![
                    "/mnt/session/outputs/c".to_string(),
                    "/mnt/session/outputs/d".to_string()
                ],
                800,
            ),
        ]
    );
    assert_eq!(h.provider.count(op::READ_FILES), 3);
    assert_eq!(h.provider.count(op::READ_FILE), 0);
}

#[tokio::test]
async fn read_files_absent_falls_back_to_sequential_read_file_with_identical_results() {
    let h = Harness::new();
    h.provider.hide(op::READ_FILES);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    seed(&h, &i.instance_id);
    let got = h
        .adapter
        .read_files(&i.instance_id, three_root_batch())
        .await
        .unwrap();
    assert_eq!(got, expected_outcomes());
    assert_eq!(h.provider.count(op::READ_FILES), 0);
    assert_eq!(h.provider.count(op::READ_FILE), 6);
    let roots: Vec<String> = h
        .provider
        .read_file_requests()
        .into_iter()
        .map(|r| r.allowed_root)
        .collect();
    assert_eq!(roots, [PROJECT, PROJECT, DATA, DATA, OUT, OUT]);
}

#[tokio::test]
async fn list_dir_max_entries_over_100000_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    for operation in [op::LIST_DIR, op::LIST_PROJECT_DIR] {
        let f = if operation == op::LIST_DIR {
            h.adapter
                .list_dir(&i.instance_id, OUT, MAX_LIST_ENTRIES + 1)
                .await
                .map(drop)
        } else {
            h.adapter
                .list_project_dir(&i.instance_id, OUT, MAX_LIST_ENTRIES + 1)
                .await
                .map(drop)
        }
        .unwrap_err();
        assert_invalid(only(&f), operation, "max_entries", "1..=100000", "100001");
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn list_dir_root_that_is_not_a_mount_root_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .list_dir(&i.instance_id, "/workspace/project/src", 10)
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::LIST_DIR,
        "root",
        "a mount root or the output tree",
        "/workspace/project/src",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn open_process_arguments_are_bounded_like_execute() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let mut r = process_request(&i.instance_id);
    r.arguments = vec!["a".into(); 257];
    let f = h.adapter.open_process(r).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::OPEN_PROCESS,
        "arguments",
        "at most 256 arguments",
        "257",
    );
    let mut r = process_request(&i.instance_id);
    r.arguments = vec!["a\0".into()];
    let f = h.adapter.open_process(r).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::OPEN_PROCESS,
        "arguments[0]",
        "an argument without NUL",
        "\"a\\u0000\"",
    );
    let mut r = process_request(&i.instance_id);
    r.environment.insert("9X".into(), "v".into());
    let f = h.adapter.open_process(r).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::OPEN_PROCESS,
        "environment[\"9X\"]",
        "a key matching ^[A-Za-z_][A-Za-z0-9_]*$",
        "\"9X\"",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn active_write_batch_bounds_are_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let files: Vec<_> = (0..1025)
        .map(|n| ActiveWriteFile {
            path: format!("{PROJECT}/f{n}"),
            content_base64: Bytes::from("x"),
        })
        .collect();
    let f = h
        .adapter
        .begin_active_write(ActiveWriteRequest {
            instance_id: i.instance_id.clone(),
            transaction_id: "tx".into(),
            files,
        })
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "files",
        "at most 1024",
        "1025",
    );
    let f = h
        .adapter
        .begin_active_write(ActiveWriteRequest {
            instance_id: i.instance_id.clone(),
            transaction_id: "tx".into(),
            files: vec![ActiveWriteFile {
                path: format!("{PROJECT}/big"),
                content_base64: Bytes(vec![0; MAX_FILE_BYTES as usize + 1]),
            }],
        })
        .await
        .unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxFileTooLarge {
            path: format!("{PROJECT}/big"),
            limit_bytes: MAX_FILE_BYTES,
            actual_bytes: MAX_FILE_BYTES + 1,
        }
    );
    assert!(h.provider.calls().is_empty());
}
