//! Optional capabilities, absent versus wrong: an absent member is a typed
//! refusal at a known point, never a permissive substitute (spec "Optional
//! capabilities: absent versus wrong"; DESIGN D2).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

#[tokio::test]
async fn list_dir_false_is_list_dir_unsupported_at_call_time() {
    let mut env = full_envelope();
    env.list_dir = false;
    let h = Harness::with_envelope(env);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .list_dir(&i.instance_id, OUT, 10)
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::LIST_DIR,
        "list_dir: true",
        ConflictActual::ListDirUnsupported,
    );
    assert!(
        h.provider.calls().is_empty(),
        "the present member was not used"
    );
}

#[tokio::test]
async fn list_dir_true_with_the_member_absent_refuses_identically() {
    let h = Harness::new();
    h.provider.hide(op::LIST_DIR);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .list_dir(&i.instance_id, OUT, 10)
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::LIST_DIR,
        "list_dir: true",
        ConflictActual::ListDirUnsupported,
    );

    let mut env = full_envelope();
    env.list_dir = false;
    let h2 = Harness::with_envelope(env);
    let i2 = h2.active(RetentionMode::EphemeralZdr).await;
    let f2 = h2
        .adapter
        .list_dir(&i2.instance_id, OUT, 10)
        .await
        .unwrap_err();
    assert_eq!(f, f2, "absent and declared-but-missing refuse identically");
}

#[tokio::test]
async fn list_project_dir_absent_is_a_typed_refusal() {
    let h = Harness::new();
    h.provider.hide(op::LIST_PROJECT_DIR);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .list_project_dir(&i.instance_id, PROJECT, 10)
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::LIST_PROJECT_DIR,
        "list_project_dir member",
        ConflictActual::ListProjectDirUnsupported,
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn open_process_absent_is_a_typed_refusal() {
    let h = Harness::new();
    h.provider.hide(op::OPEN_PROCESS);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::OPEN_PROCESS,
        "open_process member",
        ConflictActual::OpenProcessUnsupported,
    );
    assert!(h.provider.calls().is_empty());
}

fn one_file(id: &str) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.into(),
        transaction_id: "tx-1".into(),
        files: vec![ActiveWriteFile {
            path: format!("{PROJECT}/f"),
            content_base64: Bytes::from("x"),
        }],
    }
}

#[tokio::test]
async fn begin_active_write_without_the_capability_is_refused() {
    let mut env = full_envelope();
    env.active_mount_write = false;
    let h = Harness::with_envelope(env);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .begin_active_write(one_file(&i.instance_id))
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "active_mount_write: true",
        ConflictActual::ActiveMountWriteUnsupported,
    );
    assert!(
        h.provider.calls().is_empty(),
        "the present member was not used"
    );
}

#[tokio::test]
async fn begin_active_write_declared_but_absent_refuses_identically() {
    let h = Harness::new();
    h.provider.hide(op::BEGIN_ACTIVE_WRITE);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .begin_active_write(one_file(&i.instance_id))
        .await
        .unwrap_err();
    assert_conflict(
        only(&f),
        op::BEGIN_ACTIVE_WRITE,
        "active_mount_write: true",
        ConflictActual::ActiveMountWriteUnsupported,
    );
}

#[tokio::test]
async fn read_file_without_physical_containment_fails_closed_before_the_call() {
    let mut env = full_envelope();
    env.physically_contained_file_read = false;
    let h = Harness::with_envelope(env);
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .read_file(&i.instance_id, &format!("{OUT}/x"), 10)
        .await
        .unwrap_err();
    assert_unavailable(only(&f), Requirement::PhysicallyContainedFileRead);
    let f = h
        .adapter
        .read_files(
            &i.instance_id,
            vec![ReadFilesEntry {
                path: format!("{OUT}/x").into(),
                maximum_bytes: 10,
            }],
        )
        .await
        .unwrap_err();
    assert_unavailable(only(&f), Requirement::PhysicallyContainedFileRead);
    assert!(h.provider.calls().is_empty(), "nothing moved out");
}

#[tokio::test]
async fn a_provider_failing_read_file_closed_passes_through() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let e = SandboxError::unavailable(Requirement::PhysicallyContainedFileRead, "path APIs only");
    h.provider.fail(op::READ_FILE, e.clone());
    let f = h
        .adapter
        .read_file(&i.instance_id, &format!("{OUT}/x"), 10)
        .await
        .unwrap_err();
    assert_eq!(only(&f), &e);
}

#[tokio::test]
async fn a_minimum_provider_runs_the_one_shot_floor() {
    // The spec's minimum provider: none network, ZDR only, no snapshots,
    // no mounts, no optional member, readFile failing closed.
    let mut env = full_envelope();
    env.placement = Placement::Hosted;
    env.package_managers.clear();
    env.network_modes = vec![NetworkMode::None];
    env.retention_modes = vec![RetentionMode::EphemeralZdr];
    env.snapshots = false;
    env.snapshot_clone = false;
    env.list_dir = false;
    env.physically_contained_file_read = false;
    env.active_mount_write = false;
    env.egress_certification = EgressCertification::Unsupported;
    env.max_mounts = 0;
    let h = Harness::with_envelope(env);
    for member in [
        op::READ_FILES,
        op::LIST_DIR,
        op::LIST_PROJECT_DIR,
        op::OPEN_PROCESS,
        op::BEGIN_ACTIVE_WRITE,
    ] {
        h.provider.hide(member);
    }
    let mut req = request(RetentionMode::EphemeralZdr);
    req.placement = Placement::Hosted;
    req.mounts.clear();
    let i = h.adapter.provision(req).await.unwrap();
    h.adapter
        .write_file(&i.instance_id, &format!("{OUT}/prompt"), b"hi".to_vec())
        .await
        .unwrap();
    h.adapter.activate(&i.instance_id).await.unwrap();
    h.adapter
        .execute(&i.instance_id, echo(&["ok"]))
        .await
        .unwrap();
    assert_eq!(
        h.adapter.release(&i.instance_id, None).await.unwrap(),
        ReleaseDisposition::Destroyed
    );
}
