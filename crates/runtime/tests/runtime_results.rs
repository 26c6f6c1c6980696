//! Results re-checked after the call: execute's streams and interval,
//! readFile and readFiles budgets and the closed per-file union, listings,
//! cleanup, and the closed error vocabulary (spec operations table "Runtime
//! rejects" column, "Bounds", "Errors"; DESIGN D4, D9, D10).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::wire;
use checkfu_sandbox_contract::*;
use support::*;

// ---- execute ----

#[tokio::test]
async fn execute_stdout_over_the_limit_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider
        .on_command_result(|r| r.stdout_base64 = Bytes(vec![b'x'; 11]));
    let mut c = echo(&["hi"]);
    c.output_limit_bytes = 10;
    let f = h.adapter.execute(&i.instance_id, c).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::EXECUTE,
        "stdout_base64",
        "at most 10 bytes",
        "11 bytes",
    );
}

#[tokio::test]
async fn execute_stderr_over_the_limit_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider
        .on_command_result(|r| r.stderr_base64 = Bytes(vec![b'x'; 11]));
    let mut c = echo(&["hi"]);
    c.output_limit_bytes = 10;
    let f = h.adapter.execute(&i.instance_id, c).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::EXECUTE,
        "stderr_base64",
        "at most 10 bytes",
        "11 bytes",
    );
}

#[tokio::test]
async fn execute_streams_exactly_at_the_limit_are_accepted() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.on_command_result(|r| {
        r.stdout_base64 = Bytes(vec![b'x'; 10]);
        r.stderr_base64 = Bytes(vec![b'y'; 10]);
    });
    let mut c = echo(&["hi"]);
    c.output_limit_bytes = 10;
    h.adapter.execute(&i.instance_id, c).await.unwrap();
}

#[tokio::test]
async fn execute_non_monotonic_interval_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider
        .on_command_result(|r| r.finished_at = r.started_at.add_millis(-1));
    let f = h
        .adapter
        .execute(&i.instance_id, echo(&["hi"]))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::EXECUTE,
        "finished_at",
        &format!("at or after started_at {T0}"),
        &t0().add_millis(-1).to_string(),
    );
}

#[tokio::test]
async fn execute_output_limit_exceeded_passes_through() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let mut c = echo(&["a long line of output"]);
    c.output_limit_bytes = 4;
    let f = h.adapter.execute(&i.instance_id, c).await.unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stdout,
            limit_bytes: 4,
        }
    );
}

fn result_json(exit: &str) -> String {
    format!(
        r#"{{"exit":{exit},"stdout_base64":"","stderr_base64":"","started_at":"{T0}","finished_at":"{T0}"}}"#
    )
}

#[test]
fn execute_result_with_two_exit_causes_fails_decode() {
    let e = wire::decode::<SandboxCommandResult>(
        WireType::CommandResult,
        result_json(r#"{"exit_code":0,"signal":"SIGKILL"}"#).as_bytes(),
    )
    .unwrap_err();
    match e {
        SandboxError::SandboxProtocolInvalid {
            operation,
            field,
            expected,
            ..
        } => {
            assert_eq!(operation, "decode_command_result");
            assert_eq!(field, "exit");
            assert!(expected.contains("exactly one exit cause"), "{expected}");
            assert!(
                expected.contains("actual 2 (exit_code, signal)"),
                "{expected}"
            );
        }
        other => panic!("{other}"),
    }
}

#[test]
fn execute_result_with_no_exit_cause_fails_decode() {
    let e =
        wire::decode::<SandboxCommandResult>(WireType::CommandResult, result_json("{}").as_bytes())
            .unwrap_err();
    match e {
        SandboxError::SandboxProtocolInvalid {
            operation,
            field,
            expected,
            ..
        } => {
            assert_eq!(operation, "decode_command_result");
            assert_eq!(field, "exit");
            assert!(expected.contains("actual 0 (none)"), "{expected}");
        }
        other => panic!("{other}"),
    }
}

// ---- readFile ----

#[tokio::test]
async fn read_file_content_over_maximum_bytes_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let path = format!("{OUT}/f");
    h.provider.put_file(&i.instance_id, &path, b"12345");
    h.provider
        .on_read_file(|c| c.content_base64 = Bytes(b"123456".to_vec()));
    let f = h
        .adapter
        .read_file(&i.instance_id, &path, 5)
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::READ_FILE,
        "content_base64",
        "at most 5 bytes",
        "6 bytes",
    );
}

#[tokio::test]
async fn read_file_answering_another_path_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let path = format!("{OUT}/f");
    h.provider.put_file(&i.instance_id, &path, b"1");
    h.provider.on_read_file(|c| c.path = "/etc/passwd".into());
    let f = h
        .adapter
        .read_file(&i.instance_id, &path, 5)
        .await
        .unwrap_err();
    assert_protocol(only(&f), op::READ_FILE, "path", &path, "/etc/passwd");
}

// ---- readFiles ----

async fn read_files_broken(mutate: fn(&mut ReadFilesResult)) -> SandboxFailure {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    for (p, c) in [("a", "AA"), ("b", "BB"), ("c", "CC")] {
        h.provider
            .put_file(&i.instance_id, &format!("{OUT}/{p}"), c.as_bytes());
    }
    h.provider.on_read_files(mutate);
    let files = ["a", "b", "c"]
        .iter()
        .map(|p| ReadFilesEntry {
            path: format!("{OUT}/{p}").into(),
            maximum_bytes: 2,
        })
        .collect();
    h.adapter
        .read_files(&i.instance_id, files)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn read_files_short_result_fails_the_batch() {
    let f = read_files_broken(|r| {
        r.files.pop();
    })
    .await;
    assert_protocol(
        only(&f),
        op::READ_FILES,
        "files",
        "3 outcomes",
        "2 outcomes",
    );
}

#[tokio::test]
async fn read_files_long_result_fails_the_batch() {
    let f = read_files_broken(|r| r.files.push(r.files[0].clone())).await;
    assert_protocol(
        only(&f),
        op::READ_FILES,
        "files",
        "3 outcomes",
        "4 outcomes",
    );
}

#[tokio::test]
async fn read_files_out_of_order_result_fails_the_batch() {
    let f = read_files_broken(|r| r.files.swap(0, 1)).await;
    assert_protocol(
        only(&f),
        op::READ_FILES,
        "files[0].path",
        "/mnt/session/outputs/a",
        "/mnt/session/outputs/b",
    );
}

#[tokio::test]
async fn read_files_member_over_its_budget_fails_the_batch() {
    let f = read_files_broken(|r| {
        r.files[2] = ReadFileOutcome::Read {
            path: "/mnt/session/outputs/c".into(),
            content_base64: Bytes::from("CCC"),
        }
    })
    .await;
    assert_protocol(
        only(&f),
        op::READ_FILES,
        "files[2].content_base64",
        "at most 2 bytes",
        "3 bytes",
    );
}

#[tokio::test]
async fn read_files_too_large_outcome_within_budget_fails_the_batch() {
    let f = read_files_broken(|r| {
        r.files[1] = ReadFileOutcome::TooLarge {
            path: "/mnt/session/outputs/b".into(),
            size_bytes: 2,
        }
    })
    .await;
    assert_protocol(
        only(&f),
        op::READ_FILES,
        "files[1].size_bytes",
        "more than maximum_bytes 2",
        "2",
    );
}

#[test]
fn read_files_outcome_outside_the_closed_union_fails_decode() {
    let e = wire::decode::<ReadFilesResult>(
        WireType::ReadFilesResult,
        br#"{"files":[{"outcome":"partial","path":"/mnt/session/outputs/a"}]}"#,
    )
    .unwrap_err();
    match e {
        SandboxError::SandboxProtocolInvalid {
            operation, field, ..
        } => {
            assert_eq!(operation, "decode_read_files_result");
            assert!(
                field.starts_with("files[0]") || field.starts_with("files.0"),
                "{field}"
            );
        }
        other => panic!("{other}"),
    }
}

// ---- listings ----

async fn listing_harness() -> (Harness, String) {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    for n in 0..3 {
        h.provider
            .put_file(&i.instance_id, &format!("{OUT}/f{n}"), b"x");
    }
    (h, i.instance_id)
}

fn dir_entry(path: &str) -> DirEntry {
    DirEntry {
        path: path.into(),
        size_bytes: 1,
        sha256: Some(Digest::parse(PROFILE_DIGEST).unwrap()),
        mode: None,
    }
}

#[tokio::test]
async fn list_dir_over_max_entries_is_a_protocol_error() {
    let (h, id) = listing_harness().await;
    h.provider
        .on_list_dir(|r| r.entries.push(dir_entry("/mnt/session/outputs/extra")));
    let f = h.adapter.list_dir(&id, OUT, 3).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::LIST_DIR,
        "entries",
        "at most 3 entries",
        "4 entries",
    );
}

#[tokio::test]
async fn list_dir_entry_outside_the_root_is_a_protocol_error() {
    let (h, id) = listing_harness().await;
    h.provider
        .on_list_dir(|r| r.entries[1] = dir_entry("/etc/passwd"));
    let f = h.adapter.list_dir(&id, OUT, 10).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::LIST_DIR,
        "entries[1].path",
        "a normalized path below /mnt/session/outputs",
        "/etc/passwd",
    );
}

#[tokio::test]
async fn list_dir_repeated_entry_is_a_protocol_error() {
    let (h, id) = listing_harness().await;
    h.provider
        .on_list_dir(|r| r.entries[2] = r.entries[0].clone());
    let f = h.adapter.list_dir(&id, OUT, 10).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::LIST_DIR,
        "entries[2].path",
        "each path once",
        "/mnt/session/outputs/f0",
    );
}

#[tokio::test]
async fn list_dir_mode_over_0777_is_a_protocol_error() {
    let (h, id) = listing_harness().await;
    h.provider.on_list_dir(|r| {
        r.entries[0].mode = Some(0o755);
        r.entries[1].mode = Some(0o4755);
    });
    let f = h.adapter.list_dir(&id, OUT, 10).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::LIST_DIR,
        "entries[1].mode",
        "permission bits of at most 0o777 (511)",
        "2541 (0o4755)",
    );
    // Bits within 0o777 pass through as listed.
    let (h, id) = listing_harness().await;
    h.provider.on_list_dir(|r| r.entries[0].mode = Some(0o700));
    let listing = h.adapter.list_dir(&id, OUT, 10).await.unwrap();
    assert_eq!(listing.entries[0].mode, Some(0o700));
}

#[tokio::test]
async fn list_project_dir_not_complete_is_a_protocol_error() {
    let (h, id) = listing_harness().await;
    h.provider.on_list_project_dir(|r| r.complete = false);
    let f = h.adapter.list_project_dir(&id, OUT, 10).await.unwrap_err();
    assert_protocol(only(&f), op::LIST_PROJECT_DIR, "complete", "true", "false");
}

#[tokio::test]
async fn list_project_dir_over_max_entries_is_a_protocol_error() {
    let (h, id) = listing_harness().await;
    h.provider.on_list_project_dir(|r| {
        r.entries.push(ProjectEntry {
            path: "/mnt/session/outputs/sock".into(),
            kind: ProjectEntryKind::Socket,
        })
    });
    let f = h.adapter.list_project_dir(&id, OUT, 3).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::LIST_PROJECT_DIR,
        "entries",
        "at most 3 entries",
        "4 entries",
    );
}

#[tokio::test]
async fn list_project_dir_names_special_files() {
    let (h, id) = listing_harness().await;
    // A real symlink in the oracle's tree, not a hooked entry.
    h.provider
        .inner()
        .plant(
            &id,
            "/mnt/session/outputs/link",
            checkfu_sandbox_memory::FsNode::Symlink("../../etc".into()),
        )
        .unwrap();
    let r = h.adapter.list_project_dir(&id, OUT, 10).await.unwrap();
    assert!(r.complete);
    assert_eq!(r.entries.len(), 4);
    assert!(r.entries.contains(&ProjectEntry {
        path: "/mnt/session/outputs/link".into(),
        kind: ProjectEntryKind::Symlink {
            target: "../../etc".into(),
        },
    }));
}

// ---- cleanup ----

#[tokio::test]
async fn cleanup_result_repeating_an_id_is_a_protocol_error() {
    let h = Harness::new();
    h.provider.on_cleanup(|r| {
        r.snapshots = vec!["snap-1".into(), "snap-1".into()];
    });
    let f = h.adapter.cleanup(t0(), t0(), vec![]).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::CLEANUP,
        "snapshots",
        "each id once",
        "snap-1 repeated",
    );
}

#[test]
fn cleanup_result_that_is_not_two_id_arrays_fails_decode() {
    for bad in [
        &br#"{"instances":["a"]}"#[..],
        br#"{"instances":"a","snapshots":[]}"#,
        br#"{"instances":[],"snapshots":[],"pins":[]}"#,
    ] {
        let e = wire::decode::<CleanupResult>(WireType::CleanupResult, bad).unwrap_err();
        assert_eq!(e.tag(), "SandboxProtocolInvalid");
        match e {
            SandboxError::SandboxProtocolInvalid { operation, .. } => {
                assert_eq!(operation, "decode_cleanup_result")
            }
            _ => unreachable!(),
        }
    }
}

// ---- the closed vocabulary ----

#[tokio::test]
async fn a_provider_returning_a_runtime_only_tag_is_a_protocol_error() {
    let runtime_only = [
        SandboxError::SandboxAdapterUnavailable {
            adapters: vec![],
            invalid: vec![],
        },
        SandboxError::SandboxAdapterAmbiguous {
            candidates: vec!["x".into()],
        },
        SandboxError::protocol(op::INSTANCE_IDENTITY, "run_id", "a", "b"),
    ];
    for e in runtime_only {
        let h = Harness::new();
        let i = h.active(RetentionMode::EphemeralZdr).await;
        h.provider.fail(op::EXECUTE, e.clone());
        h.provider.fail(op::PROVISION, e.clone());
        h.provider.fail(op::DESTROY, e.clone());
        let f = h
            .adapter
            .execute(&i.instance_id, echo(&["x"]))
            .await
            .unwrap_err();
        assert_protocol(
            only(&f),
            op::EXECUTE,
            "_tag",
            "one of the eight adapter error tags",
            e.tag(),
        );
        let f = h
            .adapter
            .provision(request(RetentionMode::EphemeralZdr))
            .await
            .unwrap_err();
        assert_protocol(
            only(&f),
            op::PROVISION,
            "_tag",
            "one of the eight adapter error tags",
            e.tag(),
        );
        let f = h.adapter.destroy(&i.instance_id).await.unwrap_err();
        assert_protocol(
            only(&f),
            op::DESTROY,
            "_tag",
            "one of the eight adapter error tags",
            e.tag(),
        );
    }
}

#[tokio::test]
async fn adapter_vocabulary_errors_pass_through_unchanged() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let errors = [
        SandboxError::unavailable(Requirement::PhysicallyContainedFileRead, "no openat2"),
        SandboxError::SandboxFileTooLarge {
            path: "/x".into(),
            limit_bytes: 1,
            actual_bytes: 2,
        },
        SandboxError::SandboxInstanceNotFound {
            instance_id: "gone".into(),
        },
        SandboxError::conflict(op::EXECUTE, "active", ConflictActual::ProcessAlreadyOpen),
        SandboxError::failed(op::EXECUTE, FailureReason::ProviderError, "daemon"),
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stderr,
            limit_bytes: 1,
        },
        SandboxError::SandboxSnapshotForbidden {
            instance_id: "i".into(),
            retention: RetentionMode::EphemeralZdr,
        },
        SandboxError::SandboxSnapshotNotFound {
            snapshot_id: "s".into(),
        },
    ];
    for e in errors {
        h.provider.fail(op::EXECUTE, e.clone());
        let f = h
            .adapter
            .execute(&i.instance_id, echo(&["x"]))
            .await
            .unwrap_err();
        assert_eq!(only(&f), &e);
    }
}
