//! Lifecycle: the runtime's own record of each instance's state refuses a
//! mismatch before the provider is called (spec "Lifecycle and states";
//! DESIGN D6); destroy and destroySnapshot pass through and are idempotent.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::{Adapter, RecordState};
use support::*;

/// Calls `operation` on `id` with harmless arguments; returns the failure.
async fn refused(a: &Adapter, operation: Operation, id: &str) -> SandboxFailure {
    let later = t0().add_seconds(600);
    let out = format!("{OUT}/x");
    match operation {
        op::EXECUTE => a.execute(id, echo(&["x"])).await.map(drop),
        op::READ_FILE => a.read_file(id, &out, 10).await.map(drop),
        op::READ_FILES => a
            .read_files(
                id,
                vec![ReadFilesEntry {
                    path: out.into(),
                    maximum_bytes: 10,
                }],
            )
            .await
            .map(drop),
        op::LIST_DIR => a.list_dir(id, OUT, 10).await.map(drop),
        op::LIST_PROJECT_DIR => a.list_project_dir(id, PROJECT, 10).await.map(drop),
        op::OPEN_PROCESS => a.open_process(process_request(id)).await.map(drop),
        op::SNAPSHOT => a.snapshot(id, later).await.map(drop),
        op::RELEASE => a.release(id, None).await.map(drop),
        op::ACTIVATE => a.activate(id).await.map(drop),
        op::BEGIN_ACTIVE_WRITE => a
            .begin_active_write(ActiveWriteRequest {
                instance_id: id.into(),
                transaction_id: "tx".into(),
                files: vec![ActiveWriteFile {
                    path: format!("{PROJECT}/f"),
                    content_base64: Bytes::from("x"),
                }],
            })
            .await
            .map(drop),
        op::WRITE_FILE => a.write_file(id, &out, b"x".to_vec()).await,
        other => panic!("{other}"),
    }
    .unwrap_err()
}

async fn refuses_while_provisioning(operation: Operation) {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    let f = refused(&h.adapter, operation, &i.instance_id).await;
    assert_conflict(only(&f), operation, "active", ConflictActual::Provisioning);
    assert!(h.provider.calls().is_empty(), "{:?}", h.provider.calls());
}

macro_rules! active_only {
    ($($name:ident => $op:expr),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            refuses_while_provisioning($op).await
        }
    )*};
}

active_only!(
    execute_while_provisioning_is_a_conflict => op::EXECUTE,
    read_file_while_provisioning_is_a_conflict => op::READ_FILE,
    read_files_while_provisioning_is_a_conflict => op::READ_FILES,
    list_dir_while_provisioning_is_a_conflict => op::LIST_DIR,
    list_project_dir_while_provisioning_is_a_conflict => op::LIST_PROJECT_DIR,
    open_process_while_provisioning_is_a_conflict => op::OPEN_PROCESS,
    snapshot_while_provisioning_is_a_conflict => op::SNAPSHOT,
    release_while_provisioning_is_a_conflict => op::RELEASE,
    begin_active_write_while_provisioning_is_a_conflict => op::BEGIN_ACTIVE_WRITE,
);

#[tokio::test]
async fn activate_while_active_is_a_conflict() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = refused(&h.adapter, op::ACTIVATE, &i.instance_id).await;
    assert_conflict(
        only(&f),
        op::ACTIVATE,
        "provisioning",
        ConflictActual::Active,
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn operations_after_release_are_conflicts() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.adapter.release(&i.instance_id, None).await.unwrap();
    h.provider.clear_calls();
    for operation in [
        op::EXECUTE,
        op::READ_FILE,
        op::SNAPSHOT,
        op::RELEASE,
        op::OPEN_PROCESS,
    ] {
        let f = refused(&h.adapter, operation, &i.instance_id).await;
        assert_conflict(only(&f), operation, "active", ConflictActual::Released);
    }
    let f = refused(&h.adapter, op::ACTIVATE, &i.instance_id).await;
    assert_conflict(
        only(&f),
        op::ACTIVATE,
        "provisioning",
        ConflictActual::Released,
    );
    let f = refused(&h.adapter, op::WRITE_FILE, &i.instance_id).await;
    assert_conflict(
        only(&f),
        op::WRITE_FILE,
        "provisioning|active",
        ConflictActual::Released,
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn operations_after_destroy_are_conflicts() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.adapter.destroy(&i.instance_id).await.unwrap();
    h.provider.clear_calls();
    let f = refused(&h.adapter, op::ACTIVATE, &i.instance_id).await;
    assert_conflict(
        only(&f),
        op::ACTIVATE,
        "provisioning",
        ConflictActual::Destroyed,
    );
    let f = refused(&h.adapter, op::EXECUTE, &i.instance_id).await;
    assert_conflict(only(&f), op::EXECUTE, "active", ConflictActual::Destroyed);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn an_unknown_instance_is_not_found_before_the_call() {
    let h = Harness::new();
    for operation in [op::EXECUTE, op::ACTIVATE, op::WRITE_FILE, op::READ_FILE] {
        let f = refused(&h.adapter, operation, "inst-unknown").await;
        assert_eq!(
            only(&f),
            &SandboxError::SandboxInstanceNotFound {
                instance_id: "inst-unknown".into()
            }
        );
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn resume_produces_an_active_instance_directly() {
    let h = Harness::new();
    let (_, snap) = h.snapshot().await;
    let r = h
        .adapter
        .resume(request(RetentionMode::Durable), snap)
        .await
        .unwrap();
    assert_eq!(r.state, InstanceState::Active);
    assert!(h
        .adapter
        .instances()
        .contains(&(r.instance_id.clone(), RecordState::Active)));
    h.adapter
        .execute(&r.instance_id, echo(&["up"]))
        .await
        .unwrap();
    let f = h.adapter.activate(&r.instance_id).await.unwrap_err();
    assert_conflict(
        only(&f),
        op::ACTIVATE,
        "provisioning",
        ConflictActual::Active,
    );
}

#[tokio::test]
async fn full_lifecycle_round_trip() {
    let h = Harness::new();
    let p = h.provisioned(RetentionMode::Durable).await;
    h.adapter
        .write_file(
            &p.instance_id,
            &format!("{PROJECT}/a.txt"),
            b"staged".to_vec(),
        )
        .await
        .unwrap();
    let a = h.adapter.activate(&p.instance_id).await.unwrap();
    let r = h
        .adapter
        .execute(&a.instance_id, echo(&["hi", "there"]))
        .await
        .unwrap();
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    assert_eq!(r.stdout_base64.as_slice(), b"hi there\n");
    h.adapter
        .write_file(&a.instance_id, &format!("{OUT}/result"), b"done".to_vec())
        .await
        .unwrap();
    assert_eq!(
        h.adapter
            .read_file(&a.instance_id, &format!("{OUT}/result"), 100)
            .await
            .unwrap(),
        b"done"
    );
    let d = h
        .adapter
        .release(&a.instance_id, Some(t0().add_seconds(86_400)))
        .await
        .unwrap();
    let ReleaseDisposition::Released { snapshot } = d else {
        panic!("durable release settles a snapshot")
    };
    let r = h
        .adapter
        .resume(request(RetentionMode::Durable), snapshot)
        .await
        .unwrap();
    assert_eq!(
        h.adapter
            .read_file(&r.instance_id, &format!("{PROJECT}/a.txt"), 100)
            .await
            .unwrap(),
        b"staged"
    );
}

// ---- destroy and destroySnapshot ----

#[tokio::test]
async fn destroy_passes_through_in_any_state_and_is_idempotent() {
    let h = Harness::new();
    let p = h.provisioned(RetentionMode::EphemeralZdr).await;
    let a = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    for id in [&p.instance_id, &a.instance_id] {
        h.adapter.destroy(id).await.unwrap();
        h.adapter.destroy(id).await.unwrap();
    }
    // An id the runtime never held (a lost response) still reaches the
    // provider, and settles the same way.
    h.adapter.destroy("inst-lost").await.unwrap();
    assert_eq!(h.provider.count(op::DESTROY), 5);
    assert!(h.provider.instance_ids().is_empty());
    assert!(h
        .adapter
        .instances()
        .iter()
        .all(|(_, s)| *s == RecordState::Destroyed));
}

#[tokio::test]
async fn destroy_snapshot_passes_through_and_is_idempotent() {
    let h = Harness::new();
    let (_, snap) = h.snapshot().await;
    h.adapter.destroy_snapshot(&snap.snapshot_id).await.unwrap();
    h.adapter.destroy_snapshot(&snap.snapshot_id).await.unwrap();
    h.adapter.destroy_snapshot("snap-lost").await.unwrap();
    assert_eq!(h.provider.count(op::DESTROY_SNAPSHOT), 3);
    assert!(h.provider.snapshot_ids().is_empty());
}

#[tokio::test]
async fn destroy_errors_pass_through_in_vocabulary() {
    let h = Harness::new();
    let e = SandboxError::failed(op::DESTROY, FailureReason::ProviderError, "daemon away");
    h.provider.fail(op::DESTROY, e.clone());
    let f = h.adapter.destroy("inst-1").await.unwrap_err();
    assert_eq!(only(&f), &e);
    let e = SandboxError::SandboxSnapshotNotFound {
        snapshot_id: "s".into(),
    };
    h.provider.fail(op::DESTROY_SNAPSHOT, e.clone());
    let f = h.adapter.destroy_snapshot("s").await.unwrap_err();
    assert_eq!(only(&f), &e);
}
