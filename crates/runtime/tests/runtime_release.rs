//! release: ZDR must be destroyed, durable must be released with a
//! snapshot carrying the requested deadline (spec operations table row
//! release; "Lifecycle and states").

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::RecordState;
use support::*;

fn later() -> Timestamp {
    t0().add_seconds(86_400)
}

#[tokio::test]
async fn zdr_release_is_destroyed() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let d = h.adapter.release(&i.instance_id, None).await.unwrap();
    assert_eq!(d, ReleaseDisposition::Destroyed);
    assert_eq!(
        h.adapter.instances(),
        vec![(i.instance_id.clone(), RecordState::Released)]
    );
    assert!(
        h.provider.instance_ids().is_empty(),
        "every trace destroyed"
    );
    assert!(h.provider.snapshot_ids().is_empty());
}

#[tokio::test]
async fn released_disposition_on_zdr_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let snapshot = SandboxSnapshot {
        snapshot_id: "snap-kept".into(),
        provider: PROVIDER.into(),
        placement: Placement::Runner,
        source_instance_id: i.instance_id.clone(),
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        profile_id: "profile-1".into(),
        profile_version: 3,
        profile_digest: Digest::parse(PROFILE_DIGEST).unwrap(),
        created_at: t0(),
        expires_at: later(),
    };
    h.provider.on_release(move |d| {
        *d = ReleaseDisposition::Released {
            snapshot: snapshot.clone(),
        }
    });
    let f = h.adapter.release(&i.instance_id, None).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::RELEASE,
        "disposition",
        "destroyed (ephemeral_zdr)",
        "released",
    );
    assert_eq!(h.provider.count("release_rollback"), 1);
    assert_eq!(
        h.adapter.instances(),
        vec![(i.instance_id.clone(), RecordState::Active)],
        "not taken"
    );
}

#[tokio::test]
async fn durable_release_is_released_with_the_requested_deadline() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let d = h
        .adapter
        .release(&i.instance_id, Some(later()))
        .await
        .unwrap();
    let ReleaseDisposition::Released { snapshot } = d else {
        panic!("durable release must settle a snapshot")
    };
    assert_eq!(snapshot.expires_at, later());
    assert_eq!(snapshot.source_instance_id, i.instance_id);
    assert_eq!(
        h.adapter.instances(),
        vec![(i.instance_id.clone(), RecordState::Released)]
    );
}

#[tokio::test]
async fn destroyed_disposition_on_durable_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    h.provider
        .on_release(|d| *d = ReleaseDisposition::Destroyed);
    let f = h
        .adapter
        .release(&i.instance_id, Some(later()))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::RELEASE,
        "disposition",
        "released (durable)",
        "destroyed",
    );
    assert_eq!(h.provider.count("release_rollback"), 1);
    assert!(h.provider.snapshot_ids().is_empty(), "rolled back");
}

#[tokio::test]
async fn durable_release_snapshot_is_identity_checked() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    h.provider
        .on_snapshot(op::RELEASE, |s| s.expires_at = s.expires_at.add_seconds(-1));
    let f = h
        .adapter
        .release(&i.instance_id, Some(later()))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::SNAPSHOT_IDENTITY,
        "expires_at",
        &show(&later()),
        &show(&later().add_seconds(-1)),
    );
    assert_eq!(h.provider.count("release_rollback"), 1);
}

#[tokio::test]
async fn durable_release_without_a_deadline_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let f = h.adapter.release(&i.instance_id, None).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::RELEASE,
        "snapshot_expires_at",
        "a retention deadline for a durable release",
        "absent",
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn zdr_release_with_a_deadline_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .release(&i.instance_id, Some(later()))
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::RELEASE,
        "snapshot_expires_at",
        "absent for an ephemeral_zdr release",
        &later().to_string(),
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn durable_release_deadline_not_after_now_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let f = h
        .adapter
        .release(&i.instance_id, Some(t0()))
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::RELEASE,
        "expires_at",
        &format!("an instant after now ({T0})"),
        T0,
    );
    assert!(h.provider.calls().is_empty());
}
