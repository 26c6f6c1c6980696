//! Snapshot, clone and resume identity (spec "Identity is cross-checked":
//! snapshots and clones; operations table rows snapshot, cloneSnapshot,
//! resume; DESIGN D7).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

fn later() -> Timestamp {
    t0().add_seconds(86_400)
}

/// Snapshots an active durable instance with `mutate` applied to the
/// returned ref; asserts the one exact mismatch, one rollback, and that
/// the provider no longer holds the snapshot.
async fn snapshot_field(
    field: &str,
    mutate: fn(&mut SandboxSnapshot),
    expected: fn(&SandboxInstance, &Timestamp) -> String,
    render: fn(&SandboxSnapshot) -> String,
) {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let broken = std::sync::Arc::new(std::sync::Mutex::new(None));
    let b = broken.clone();
    h.provider.on_snapshot(op::SNAPSHOT, move |s| {
        mutate(s);
        *b.lock().unwrap() = Some(s.clone());
    });
    let f = h
        .adapter
        .snapshot(&i.instance_id, later())
        .await
        .unwrap_err();
    let broken: SandboxSnapshot = broken.lock().unwrap().clone().unwrap();
    assert_protocol(
        only(&f),
        op::SNAPSHOT_IDENTITY,
        field,
        &expected(&i, &later()),
        &render(&broken),
    );
    assert_eq!(h.provider.count("snapshot_rollback"), 1);
    assert_eq!(h.provider.rollbacks_done(), 1);
    assert!(h.provider.snapshot_ids().is_empty(), "rolled back");
}

macro_rules! snapshot_case {
    ($name:ident, $field:literal, |$s:ident| $mutate:expr, |$i:ident, $t:ident| $expected:expr, |$v:ident| $render:expr) => {
        #[tokio::test]
        async fn $name() {
            #[allow(unused_variables)]
            fn expected($i: &SandboxInstance, $t: &Timestamp) -> String {
                $expected
            }
            snapshot_field(
                $field,
                |$s: &mut SandboxSnapshot| $mutate,
                expected,
                |$v: &SandboxSnapshot| $render,
            )
            .await
        }
    };
}

snapshot_case!(
    snapshot_provider_mismatch,
    "provider",
    |s| s.provider = "impostor".into(),
    |i, t| show(&i.provider),
    |v| show(&v.provider)
);
snapshot_case!(
    snapshot_placement_mismatch,
    "placement",
    |s| s.placement = Placement::Hosted,
    |i, t| show(&i.placement),
    |v| show(&v.placement)
);
snapshot_case!(
    snapshot_source_instance_mismatch,
    "source_instance_id",
    |s| s.source_instance_id = "inst-other".into(),
    |i, t| show(&i.instance_id),
    |v| show(&v.source_instance_id)
);
snapshot_case!(
    snapshot_workspace_mismatch,
    "workspace_id",
    |s| s.workspace_id = "ws-other".into(),
    |i, t| show(&i.workspace_id),
    |v| show(&v.workspace_id)
);
snapshot_case!(
    snapshot_session_mismatch,
    "session_id",
    |s| s.session_id = "session-other".into(),
    |i, t| show(&i.session_id),
    |v| show(&v.session_id)
);
snapshot_case!(
    snapshot_profile_id_mismatch,
    "profile_id",
    |s| s.profile_id = "profile-other".into(),
    |i, t| show(&i.profile.profile_id),
    |v| show(&v.profile_id)
);
snapshot_case!(
    snapshot_profile_version_mismatch,
    "profile_version",
    |s| s.profile_version += 1,
    |i, t| show(&i.profile.profile_version),
    |v| show(&v.profile_version)
);
snapshot_case!(
    snapshot_profile_digest_mismatch,
    "profile_digest",
    |s| s.profile_digest =
        Digest::parse("sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc")
            .unwrap(),
    |i, t| show(&i.profile.profile_digest),
    |v| show(&v.profile_digest)
);
snapshot_case!(
    snapshot_expires_at_substituted,
    "expires_at",
    // The provider's own retention deadline instead of the requested one.
    |s| s.expires_at = s.expires_at.add_seconds(3600),
    |i, t| show(t),
    |v| show(&v.expires_at)
);
snapshot_case!(
    snapshot_empty_id,
    "snapshot_id",
    |s| s.snapshot_id = String::new(),
    |i, t| "a non-empty id of at most 128 bytes".into(),
    |v| show(&v.snapshot_id)
);

#[tokio::test]
async fn snapshot_on_zdr_is_forbidden_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let f = h
        .adapter
        .snapshot(&i.instance_id, later())
        .await
        .unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxSnapshotForbidden {
            instance_id: i.instance_id.clone(),
            retention: RetentionMode::EphemeralZdr,
        }
    );
    assert_eq!(h.provider.count(op::SNAPSHOT), 0);
}

#[tokio::test]
async fn snapshot_expiry_not_after_now_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let f = h.adapter.snapshot(&i.instance_id, t0()).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::SNAPSHOT,
        "expires_at",
        &format!("an instant after now ({T0})"),
        T0,
    );
    assert_eq!(h.provider.count(op::SNAPSHOT), 0);
}

// ---- cloneSnapshot ----

async fn clone_broken(
    mutate: impl Fn(&mut SandboxSnapshot) + Send + Sync + 'static,
) -> (Harness, SandboxSnapshot, SandboxFailure) {
    let h = Harness::new();
    let (_, source) = h.snapshot().await;
    h.provider.on_snapshot(op::CLONE_SNAPSHOT, mutate);
    let f = h
        .adapter
        .clone_snapshot(&source, "session-2")
        .await
        .unwrap_err();
    assert_eq!(h.provider.count("clone_snapshot_rollback"), 1);
    assert_eq!(h.provider.rollbacks_done(), 1);
    // Only the source is left: the rollback removed the clone it made.
    assert_eq!(h.provider.snapshot_ids(), vec![source.snapshot_id.clone()]);
    (h, source, f)
}

#[tokio::test]
async fn clone_reusing_the_source_id_is_refused() {
    let (h, source, f) = {
        let h = Harness::new();
        let (_, source) = h.snapshot().await;
        let id = source.snapshot_id.clone();
        h.provider
            .on_snapshot(op::CLONE_SNAPSHOT, move |s| s.snapshot_id = id.clone());
        let f = h
            .adapter
            .clone_snapshot(&source, "session-2")
            .await
            .unwrap_err();
        (h, source, f)
    };
    assert_protocol(
        only(&f),
        op::CLONE_IDENTITY,
        "snapshot_id",
        &format!(
            "an id other than the source's {}",
            show(&source.snapshot_id)
        ),
        &show(&source.snapshot_id),
    );
    assert_eq!(h.provider.count("clone_snapshot_rollback"), 1);
    // The rollback did not take its authority from the value: the source
    // (whose id the value named) survives, the real clone is gone.
    assert_eq!(h.provider.snapshot_ids(), vec![source.snapshot_id.clone()]);
}

#[tokio::test]
async fn clone_moving_the_expiry_is_refused() {
    let (_, source, f) = clone_broken(|s| s.expires_at = s.expires_at.add_seconds(1)).await;
    assert_protocol(
        only(&f),
        op::CLONE_IDENTITY,
        "expires_at",
        &show(&source.expires_at),
        &show(&source.expires_at.add_seconds(1)),
    );
}

#[tokio::test]
async fn clone_predating_the_source_is_refused() {
    let (_, source, f) = clone_broken(|s| s.created_at = ts(T0).add_millis(-1)).await;
    assert_protocol(
        only(&f),
        op::CLONE_IDENTITY,
        "created_at",
        &format!("at or after the source's {}", show(&source.created_at)),
        &show(&t0().add_millis(-1)),
    );
}

#[tokio::test]
async fn clone_created_at_its_own_expiry_is_refused() {
    let (_, source, f) = clone_broken(|s| s.created_at = s.expires_at).await;
    assert_protocol(
        only(&f),
        op::CLONE_IDENTITY,
        "created_at",
        &format!("strictly before expires_at {}", show(&source.expires_at)),
        &show(&source.expires_at),
    );
}

#[tokio::test]
async fn clone_not_bound_to_the_target_session_is_refused() {
    let (_, source, f) = clone_broken(|s| s.session_id = "session-1".into()).await;
    assert_eq!(source.session_id, "session-1");
    assert_protocol(
        only(&f),
        op::CLONE_IDENTITY,
        "session_id",
        &show(&"session-2"),
        &show(&"session-1"),
    );
}

#[tokio::test]
async fn clone_disagreeing_with_the_source_identity_is_refused() {
    type Case = (
        &'static str,
        fn(&mut SandboxSnapshot),
        fn(&SandboxSnapshot) -> String,
    );
    let cases: [Case; 6] = [
        (
            "provider",
            |s| s.provider = "impostor".into(),
            |s| show(&s.provider),
        ),
        (
            "placement",
            |s| s.placement = Placement::Hosted,
            |s| show(&s.placement),
        ),
        (
            "source_instance_id",
            |s| s.source_instance_id = "inst-x".into(),
            |s| show(&s.source_instance_id),
        ),
        (
            "workspace_id",
            |s| s.workspace_id = "ws-x".into(),
            |s| show(&s.workspace_id),
        ),
        (
            "profile_id",
            |s| s.profile_id = "profile-x".into(),
            |s| show(&s.profile_id),
        ),
        (
            "profile_version",
            |s| s.profile_version += 9,
            |s| show(&s.profile_version),
        ),
    ];
    for (field, mutate, render) in cases {
        let (_, source, f) = clone_broken(mutate).await;
        let mut broken = source.clone();
        mutate(&mut broken);
        assert_protocol(
            only(&f),
            op::CLONE_IDENTITY,
            field,
            &render(&source),
            &render(&broken),
        );
    }
}

#[tokio::test]
async fn honest_clone_is_accepted() {
    let h = Harness::new();
    let (_, source) = h.snapshot().await;
    h.clock.advance_seconds(5);
    let c = h
        .adapter
        .clone_snapshot(&source, "session-2")
        .await
        .unwrap();
    assert_ne!(c.snapshot_id, source.snapshot_id);
    assert_eq!(c.session_id, "session-2");
    assert_eq!(c.expires_at, source.expires_at);
    assert!(c.created_at >= source.created_at);
    assert_eq!(h.provider.rollbacks(), 0);
}

#[tokio::test]
async fn clone_without_snapshots_is_unavailable_before_the_call() {
    let mut env = full_envelope();
    env.snapshots = false;
    env.snapshot_clone = false;
    env.retention_modes = vec![RetentionMode::EphemeralZdr];
    let h = Harness::with_envelope(env);
    let source = honest_foreign_snapshot();
    let f = h
        .adapter
        .clone_snapshot(&source, "session-2")
        .await
        .unwrap_err();
    assert_unavailable(only(&f), Requirement::Snapshots);
    assert_eq!(h.provider.count(op::CLONE_SNAPSHOT), 0);
}

#[tokio::test]
async fn clone_without_snapshot_clone_is_unavailable_before_the_call() {
    let mut env = full_envelope();
    env.snapshot_clone = false;
    let h = Harness::with_envelope(env);
    let (_, source) = h.snapshot().await;
    let f = h
        .adapter
        .clone_snapshot(&source, "session-2")
        .await
        .unwrap_err();
    assert_unavailable(only(&f), Requirement::SnapshotClone);
    assert_eq!(h.provider.count(op::CLONE_SNAPSHOT), 0);
}

#[tokio::test]
async fn clone_of_another_providers_snapshot_is_refused_before_the_call() {
    let h = Harness::new();
    let mut source = honest_foreign_snapshot();
    source.provider = "elsewhere".into();
    let f = h
        .adapter
        .clone_snapshot(&source, "session-2")
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::CLONE_SNAPSHOT,
        "source.provider",
        PROVIDER,
        "elsewhere",
    );
    assert_eq!(h.provider.count(op::CLONE_SNAPSHOT), 0);
}

fn honest_foreign_snapshot() -> SandboxSnapshot {
    SandboxSnapshot {
        snapshot_id: "snap-x".into(),
        provider: PROVIDER.into(),
        placement: Placement::Runner,
        source_instance_id: "inst-x".into(),
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        profile_id: "profile-1".into(),
        profile_version: 3,
        profile_digest: Digest::parse(PROFILE_DIGEST).unwrap(),
        created_at: t0(),
        expires_at: later(),
    }
}

// ---- resume: snapshot/request agreement, before the call ----

#[tokio::test]
async fn resume_snapshot_request_mismatch_is_refused_before_the_call() {
    type Case = (
        &'static str,
        fn(&mut SandboxSnapshot),
        &'static str,
        &'static str,
    );
    let cases: [Case; 7] = [
        (
            "snapshot.provider",
            |s| s.provider = "elsewhere".into(),
            PROVIDER,
            "elsewhere",
        ),
        (
            "snapshot.placement",
            |s| s.placement = Placement::Hosted,
            "Runner",
            "Hosted",
        ),
        (
            "snapshot.workspace_id",
            |s| s.workspace_id = "ws-9".into(),
            "ws-1",
            "ws-9",
        ),
        (
            "snapshot.session_id",
            |s| s.session_id = "session-9".into(),
            "session-1",
            "session-9",
        ),
        (
            "snapshot.profile_id",
            |s| s.profile_id = "profile-9".into(),
            "profile-1",
            "profile-9",
        ),
        (
            "snapshot.profile_version",
            |s| s.profile_version = 9,
            "3",
            "9",
        ),
        (
            "snapshot.profile_digest",
            |s| {
                s.profile_digest = Digest::parse(
                    "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
                )
                .unwrap()
            },
            PROFILE_DIGEST,
            "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
        ),
    ];
    for (field, mutate, expected, actual) in cases {
        let h = Harness::new();
        let (_, mut snap) = h.snapshot().await;
        mutate(&mut snap);
        let f = h
            .adapter
            .resume(request(RetentionMode::Durable), snap)
            .await
            .unwrap_err();
        assert_invalid(only(&f), op::RESUME, field, expected, actual);
        assert_eq!(h.provider.count(op::RESUME), 0, "{field}");
    }
}

#[tokio::test]
async fn resume_of_an_expired_snapshot_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let snap = h
        .adapter
        .snapshot(&i.instance_id, t0().add_seconds(60))
        .await
        .unwrap();
    h.clock.advance_seconds(60);
    let f = h
        .adapter
        .resume(request(RetentionMode::Durable), snap.clone())
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::RESUME,
        "snapshot.expires_at",
        &format!("an instant after now ({})", t0().add_seconds(60)),
        &snap.expires_at.to_string(),
    );
    assert_eq!(h.provider.count(op::RESUME), 0);
}
