//! Path admission before the provider is called: writeFile scope and its
//! narrowing at activation, the root each read carries, beginActiveWrite's
//! one read-write mount, and provision/resume request admission (spec
//! "Paths, mounts, and what the Runner admits first", operations table
//! rows writeFile and beginActiveWrite; DESIGN D8).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::bounds::MAX_FILE_BYTES;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

/// Asserts `e` is `SandboxOperationFailed{operation, reason, field,
/// expected, actual}` with any message.
#[track_caller]
fn assert_failed_field(
    e: &SandboxError,
    operation: Operation,
    reason: FailureReason,
    field: &str,
    expected: &str,
    actual: &str,
) {
    match e {
        SandboxError::SandboxOperationFailed {
            operation: o,
            reason: r,
            field: f,
            expected: x,
            actual: a,
            ..
        } => {
            assert_eq!(*o, operation, "{e}");
            assert_eq!(*r, reason, "{e}");
            assert_eq!(f.as_deref(), Some(field), "{e}");
            assert_eq!(x.as_deref(), Some(expected), "{e}");
            assert_eq!(a.as_deref(), Some(actual), "{e}");
        }
        other => panic!("{other}"),
    }
}

const NOT_ADMITTED: &str = "a path under /mnt/session/outputs or a declared mount";

#[tokio::test]
async fn write_file_outside_every_mount_and_the_output_tree_is_refused() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    for path in [
        "/etc/passwd",
        "/workspace/projectx/f",
        "/mnt/session/outputsx",
    ] {
        let f = h
            .adapter
            .write_file(&i.instance_id, path, b"x".to_vec())
            .await
            .unwrap_err();
        assert_failed_field(
            only(&f),
            op::WRITE_FILE,
            FailureReason::PathNotAdmitted,
            "path",
            NOT_ADMITTED,
            path,
        );
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn write_file_while_provisioning_accepts_mounts_and_output_tree() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    for path in [
        format!("{PROJECT}/src/main.rs"),
        format!("{VENDOR}/lib.rs"),
        format!("{DATA}/set.csv"),
        format!("{OUT}/early"),
    ] {
        h.adapter
            .write_file(&i.instance_id, &path, b"x".to_vec())
            .await
            .unwrap();
        assert_eq!(h.provider.file(&i.instance_id, &path).unwrap(), b"x");
    }
}

#[tokio::test]
async fn write_file_in_active_outside_the_output_tree_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    for path in [format!("{PROJECT}/f"), format!("{DATA}/f")] {
        let f = h
            .adapter
            .write_file(&i.instance_id, &path, b"x".to_vec())
            .await
            .unwrap_err();
        assert_conflict(
            only(&f),
            op::WRITE_FILE,
            "provisioning",
            ConflictActual::Active,
        );
    }
    assert!(h.provider.calls().is_empty());
    h.adapter
        .write_file(&i.instance_id, &format!("{OUT}/report"), b"ok".to_vec())
        .await
        .unwrap();
    assert_eq!(h.provider.count(op::WRITE_FILE), 1);
}

#[tokio::test]
async fn write_file_with_a_non_normalized_path_is_refused() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    for path in [
        "relative",
        "/mnt/session/outputs/../x",
        "/workspace/project//f",
        "/mnt/session/outputs/x/",
    ] {
        let f = h
            .adapter
            .write_file(&i.instance_id, path, b"x".to_vec())
            .await
            .unwrap_err();
        assert_invalid(
            only(&f),
            op::WRITE_FILE,
            "path",
            "an absolute normalized path (no empty, '.' or '..' components, no NUL, no trailing '/')",
            &format!("{path:?}"),
        );
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn write_file_at_a_root_itself_is_refused() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    for path in [PROJECT, OUT] {
        let f = h
            .adapter
            .write_file(&i.instance_id, path, b"x".to_vec())
            .await
            .unwrap_err();
        assert_invalid(
            only(&f),
            op::WRITE_FILE,
            "path",
            "a file path below its root",
            path,
        );
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn write_file_over_16_mib_is_too_large_before_the_call() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    let path = format!("{OUT}/big");
    let f = h
        .adapter
        .write_file(&i.instance_id, &path, vec![0; MAX_FILE_BYTES as usize + 1])
        .await
        .unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxFileTooLarge {
            path: path.clone(),
            limit_bytes: MAX_FILE_BYTES,
            actual_bytes: MAX_FILE_BYTES + 1,
        }
    );
    assert!(h.provider.calls().is_empty());
    h.adapter
        .write_file(&i.instance_id, &path, vec![0; MAX_FILE_BYTES as usize])
        .await
        .unwrap();
}

#[tokio::test]
async fn reads_carry_the_root_derived_from_the_instances_mounts() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let cases = [
        (format!("{PROJECT}/src/a.rs"), PROJECT),
        (format!("{VENDOR}/dep/lib.rs"), VENDOR),
        (format!("{DATA}/set.csv"), DATA),
        (format!("{OUT}/report"), OUT),
    ];
    for (path, _) in &cases {
        h.provider.put_file(&i.instance_id, path, b"content");
    }
    for (path, _) in &cases {
        assert_eq!(
            h.adapter
                .read_file(&i.instance_id, path, 100)
                .await
                .unwrap(),
            b"content"
        );
    }
    let roots: Vec<(String, String)> = h
        .provider
        .read_file_requests()
        .into_iter()
        .map(|r| (r.path.display(), r.allowed_root))
        .collect();
    let want: Vec<(String, String)> = cases
        .iter()
        .map(|(p, r)| (p.clone(), r.to_string()))
        .collect();
    assert_eq!(roots, want, "the deepest mount is the root");
}

#[tokio::test]
async fn read_file_outside_every_root_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .read_file(&i.instance_id, "/etc/shadow", 100)
        .await
        .unwrap_err();
    assert_failed_field(
        only(&f),
        op::READ_FILE,
        FailureReason::PathNotAdmitted,
        "path",
        NOT_ADMITTED,
        "/etc/shadow",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn a_providers_outside_root_refusal_passes_through() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let e = SandboxError::failed(op::READ_FILE, FailureReason::OutsideRoot, "symlink escape");
    h.provider.fail(op::READ_FILE, e.clone());
    let f = h
        .adapter
        .read_file(&i.instance_id, &format!("{PROJECT}/link"), 100)
        .await
        .unwrap_err();
    assert_eq!(only(&f), &e);
}

// ---- beginActiveWrite ----

fn batch(id: &str, paths: &[&str]) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.into(),
        transaction_id: "tx-1".into(),
        files: paths
            .iter()
            .map(|p| ActiveWriteFile {
                path: p.to_string(),
                content_base64: Bytes::from("body"),
            })
            .collect(),
    }
}

#[tokio::test]
async fn active_write_publishes_inside_one_read_write_mount() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let out = h
        .adapter
        .begin_active_write(batch(
            &i.instance_id,
            &["/workspace/project/a", "/workspace/project/b/c"],
        ))
        .await
        .unwrap();
    assert_eq!(
        out,
        ActiveWriteOutcome::Committed {
            transaction_id: "tx-1".into(),
            mount_path: PROJECT.into(),
            published: vec![
                "/workspace/project/a".into(),
                "/workspace/project/b/c".into()
            ],
        }
    );
}

#[tokio::test]
async fn active_write_into_a_read_only_mount_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .begin_active_write(batch(&i.instance_id, &["/data/x"]))
        .await
        .unwrap_err();
    assert_failed_field(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        FailureReason::ReadOnly,
        "files[0].path",
        "a path whose deepest mount is read-write",
        "/data/x in read-only mount /data",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn active_write_cannot_use_an_ancestor_mount_to_reach_a_nested_read_only_one() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .begin_active_write(batch(
            &i.instance_id,
            &["/workspace/project/a", "/workspace/project/vendor/x"],
        ))
        .await
        .unwrap_err();
    assert_failed_field(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        FailureReason::ReadOnly,
        "files[1].path",
        "a path whose deepest mount is read-write",
        "/workspace/project/vendor/x in read-only mount /workspace/project/vendor",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn active_write_outside_every_current_mount_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    for (path, field) in [
        ("/old-mount/f", "files[0].path"),
        ("/etc/x", "files[0].path"),
    ] {
        let f = h
            .adapter
            .begin_active_write(batch(&i.instance_id, &[path]))
            .await
            .unwrap_err();
        assert_failed_field(
            only(&f),
            op::BEGIN_ACTIVE_WRITE,
            FailureReason::PathNotAdmitted,
            field,
            NOT_ADMITTED,
            path,
        );
    }
    let f = h
        .adapter
        .begin_active_write(batch(&i.instance_id, &["/mnt/session/outputs/x"]))
        .await
        .unwrap_err();
    assert_failed_field(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        FailureReason::PathNotAdmitted,
        "files[0].path",
        "a path inside a read-write mount",
        "/mnt/session/outputs/x",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn active_write_with_an_ancestor_conflict_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    for paths in [
        ["/workspace/project/a", "/workspace/project/a/b"],
        ["/workspace/project/a", "/workspace/project/a"],
    ] {
        let f = h
            .adapter
            .begin_active_write(batch(&i.instance_id, &paths))
            .await
            .unwrap_err();
        assert_invalid(
            only(&f),
            op::BEGIN_ACTIVE_WRITE,
            "files",
            "no path equal to or an ancestor of another",
            &format!("{} and {}", paths[0], paths[1]),
        );
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn active_write_spanning_two_read_write_mounts_is_refused() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.mounts.push(SandboxMount {
        path: "/cache".into(),
        access: MountAccess::ReadWrite,
    });
    let i = h.adapter.provision(req).await.unwrap();
    h.adapter.activate(&i.instance_id).await.unwrap();
    h.provider.clear_calls();
    let f = h
        .adapter
        .begin_active_write(batch(&i.instance_id, &["/workspace/project/a", "/cache/b"]))
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "files[1].path",
        "a path owned by the batch's mount /workspace/project",
        "/cache/b owned by /cache",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn active_write_at_the_mount_root_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .begin_active_write(batch(&i.instance_id, &[PROJECT]))
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "files[0].path",
        "a file path strictly inside the mount",
        &format!("the mount root {PROJECT}"),
    );
}

#[tokio::test]
async fn active_write_outcome_naming_another_mount_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.on_active_write(|o| {
        if let ActiveWriteOutcome::Committed { mount_path, .. } = o {
            *mount_path = "/data".into();
        }
    });
    let f = h
        .adapter
        .begin_active_write(batch(&i.instance_id, &["/workspace/project/a"]))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "mount_path",
        PROJECT,
        "/data",
    );
}

#[tokio::test]
async fn active_write_outcome_naming_another_transaction_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.on_active_write(|o| {
        if let ActiveWriteOutcome::Committed { transaction_id, .. } = o {
            *transaction_id = "tx-9".into();
        }
    });
    let f = h
        .adapter
        .begin_active_write(batch(&i.instance_id, &["/workspace/project/a"]))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "transaction_id",
        "tx-1",
        "tx-9",
    );
}

#[tokio::test]
async fn active_write_outcome_with_another_path_list_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.on_active_write(|o| {
        if let ActiveWriteOutcome::Committed { published, .. } = o {
            published.pop();
        }
    });
    let f = h
        .adapter
        .begin_active_write(batch(
            &i.instance_id,
            &["/workspace/project/a", "/workspace/project/b"],
        ))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "published",
        r#"["/workspace/project/a", "/workspace/project/b"]"#,
        r#"["/workspace/project/a"]"#,
    );
}

// ---- provision and resume request admission (even bypassing selection) ----

#[tokio::test]
async fn provision_for_another_provider_is_refused_before_the_call() {
    let h = Harness::new();
    let f = h
        .adapter
        .provision(request_for("elsewhere", RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_invalid(only(&f), op::PROVISION, "provider", PROVIDER, "elsewhere");
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn provision_with_another_placement_is_refused_before_the_call() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.placement = Placement::Hosted;
    let f = h.adapter.provision(req).await.unwrap_err();
    assert_invalid(only(&f), op::PROVISION, "placement", "Runner", "Hosted");
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn provision_already_expired_is_refused_before_the_call() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.expires_at = t0();
    let f = h.adapter.provision(req).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::PROVISION,
        "expires_at",
        &format!("an instant after now ({T0})"),
        T0,
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn provision_with_a_refused_mount_plan_is_refused_before_the_call() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.mounts.push(SandboxMount {
        path: "/tmp/scratch".into(),
        access: MountAccess::ReadWrite,
    });
    let f = h.adapter.provision(req).await.unwrap_err();
    assert_unavailable(only(&f), Requirement::Mounts);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn provision_bypassing_selection_still_meets_the_envelope() {
    let mut env = full_envelope();
    env.max_mounts = 1;
    let h = Harness::with_envelope(env);
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_unavailable(only(&f), Requirement::Mounts);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn provision_with_a_malformed_profile_is_refused_before_the_call() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.profile.max_duration_seconds = 0;
    let f = h.adapter.provision(req).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::PROVISION,
        "profile.max_duration_seconds",
        "at least 1",
        "0",
    );
    assert!(h.provider.calls().is_empty());
}
