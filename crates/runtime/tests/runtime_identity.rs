//! Instance identity: each of the 21 checks, on provision, activate and
//! resume (spec "Identity is cross-checked, not trusted"; DESIGN D7).
//!
//! Every case breaks exactly one field and asserts the exact error
//! (`SandboxProtocolInvalid{instance_identity, field, expected, actual}`),
//! that the rollback ran exactly once, and that the value was not taken.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::sync::{Arc, Mutex};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::RecordState;
use support::*;

#[derive(Clone, Copy, Debug)]
enum Via {
    Provision,
    Activate,
    Resume,
}

impl Via {
    fn op(self) -> Operation {
        match self {
            Via::Provision => op::PROVISION,
            Via::Activate => op::ACTIVATE,
            Via::Resume => op::RESUME,
        }
    }
    fn state(self) -> InstanceState {
        match self {
            Via::Provision => InstanceState::Provisioning,
            Via::Activate | Via::Resume => InstanceState::Active,
        }
    }
}

type Seen = Arc<Mutex<Option<(SandboxInstance, SandboxInstance)>>>;

/// Installs `mutate` on `via`'s results, remembering the honest and the
/// broken instance.
fn install(h: &Harness, via: Via, mutate: fn(&mut SandboxInstance)) -> Seen {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    h.provider.on_instance(via.op(), move |i| {
        let honest = i.clone();
        mutate(i);
        *s.lock().unwrap() = Some((honest, i.clone()));
    });
    seen
}

/// Runs `via` against a provider that applies `mutate`; returns the
/// failure, the request, the honest and the broken instance.
async fn broken(
    h: &Harness,
    via: Via,
    mutate: fn(&mut SandboxInstance),
) -> (
    SandboxFailure,
    SandboxProvisionRequest,
    SandboxInstance,
    SandboxInstance,
) {
    match via {
        Via::Provision => {
            let seen = install(h, via, mutate);
            let req = request(RetentionMode::EphemeralZdr);
            let f = h.adapter.provision(req.clone()).await.unwrap_err();
            let (honest, broken) = seen.lock().unwrap().clone().unwrap();
            (f, req, honest, broken)
        }
        Via::Activate => {
            let i = h.provisioned(RetentionMode::EphemeralZdr).await;
            let seen = install(h, via, mutate);
            let f = h.adapter.activate(&i.instance_id).await.unwrap_err();
            let (honest, broken) = seen.lock().unwrap().clone().unwrap();
            // Not taken: the runtime still holds it provisioning, and the
            // rollback put the provider back to provisioning.
            assert_eq!(
                h.adapter.instances(),
                vec![(i.instance_id.clone(), RecordState::Provisioning)]
            );
            assert_eq!(
                h.provider.state_of(&i.instance_id),
                Some(InstanceState::Provisioning)
            );
            (f, request(RetentionMode::EphemeralZdr), honest, broken)
        }
        Via::Resume => {
            let (_, snap) = h.snapshot().await;
            let seen = install(h, via, mutate);
            let req = request(RetentionMode::Durable);
            let f = h.adapter.resume(req.clone(), snap).await.unwrap_err();
            let (honest, broken) = seen.lock().unwrap().clone().unwrap();
            (f, req, honest, broken)
        }
    }
}

async fn check(
    via: Via,
    field: &str,
    mutate: fn(&mut SandboxInstance),
    render: fn(&SandboxInstance) -> String,
    expected: fn(&SandboxProvisionRequest, &SandboxProviderCapabilities, InstanceState) -> String,
) {
    let h = Harness::new();
    let (failure, req, honest, broken) = broken(&h, via, mutate).await;
    let want = expected(&req, h.adapter.envelope(), via.state());
    assert_eq!(
        render(&honest),
        want,
        "the honest echo is the expected value"
    );
    assert_ne!(render(&broken), want, "the mutation changed {field}");
    assert_protocol(
        only(&failure),
        op::INSTANCE_IDENTITY,
        field,
        &want,
        &render(&broken),
    );
    let rollback = format!("{}_rollback", via.op());
    assert_eq!(h.provider.count(&rollback), 1, "{:?}", h.provider.calls());
    assert_eq!(h.provider.rollbacks(), 1);
    assert_eq!(h.provider.rollbacks_done(), 1);
    if !matches!(via, Via::Activate) {
        // The new instance is neither held by the runtime nor left at the
        // provider.
        assert!(h
            .adapter
            .instances()
            .iter()
            .all(|(id, _)| *id != honest.instance_id));
        assert!(
            !h.provider.instance_ids().contains(&honest.instance_id),
            "rollback removed {}",
            honest.instance_id
        );
    }
}

macro_rules! identity_field {
    ($name:ident, $field:literal,
     mutate: |$i:ident| $mutate:expr,
     render: |$v:ident| $render:expr,
     expected: |$r:ident, $e:ident, $st:ident| $expected:expr) => {
        mod $name {
            use super::*;

            fn mutate($i: &mut SandboxInstance) {
                $mutate;
            }
            fn render($v: &SandboxInstance) -> String {
                $render
            }
            #[allow(unused_variables)]
            fn expected(
                $r: &SandboxProvisionRequest,
                $e: &SandboxProviderCapabilities,
                $st: InstanceState,
            ) -> String {
                $expected
            }

            #[tokio::test]
            async fn on_provision() {
                check(Via::Provision, $field, mutate, render, expected).await
            }

            #[tokio::test]
            async fn on_activate() {
                check(Via::Activate, $field, mutate, render, expected).await
            }

            #[tokio::test]
            async fn on_resume() {
                check(Via::Resume, $field, mutate, render, expected).await
            }
        }
    };
}

fn other_digest() -> Digest {
    Digest::parse("sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc")
        .unwrap()
}

fn other_image() -> ImageReference {
    ImageReference::parse(
        "other@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
    )
    .unwrap()
}

identity_field!(provider, "provider",
    mutate: |i| i.provider = "impostor".into(),
    render: |v| show(&v.provider),
    expected: |r, e, st| show(&r.provider));
identity_field!(placement, "placement",
    mutate: |i| i.placement = Placement::Hosted,
    render: |v| show(&v.placement),
    expected: |r, e, st| show(&r.placement));
identity_field!(state, "state",
    mutate: |i| i.state = match i.state {
        InstanceState::Active => InstanceState::Provisioning,
        InstanceState::Provisioning => InstanceState::Active,
    },
    render: |v| show(&v.state),
    expected: |r, e, st| show(&st));
identity_field!(workspace_id, "workspace_id",
    mutate: |i| i.workspace_id = "ws-other".into(),
    render: |v| show(&v.workspace_id),
    expected: |r, e, st| show(&r.workspace_id));
identity_field!(session_id, "session_id",
    mutate: |i| i.session_id = "session-other".into(),
    render: |v| show(&v.session_id),
    expected: |r, e, st| show(&r.session_id));
identity_field!(run_id, "run_id",
    mutate: |i| i.run_id = "run-other".into(),
    render: |v| show(&v.run_id),
    expected: |r, e, st| show(&r.run_id));
identity_field!(attempt_id, "attempt_id",
    mutate: |i| i.attempt_id = "attempt-other".into(),
    render: |v| show(&v.attempt_id),
    expected: |r, e, st| show(&r.attempt_id));
identity_field!(lease_id, "lease_id",
    mutate: |i| i.lease_id = "lease-other".into(),
    render: |v| show(&v.lease_id),
    expected: |r, e, st| show(&r.lease_id));
identity_field!(lease_epoch, "lease_epoch",
    mutate: |i| i.lease_epoch += 1,
    render: |v| show(&v.lease_epoch),
    expected: |r, e, st| show(&r.lease_epoch));
identity_field!(target, "target",
    mutate: |i| i.target = Tier::Microvm,
    render: |v| show(&v.target),
    expected: |r, e, st| show(&r.target));
identity_field!(profile, "profile",
    mutate: |i| i.profile.max_duration_seconds += 1,
    render: |v| show(&v.profile),
    expected: |r, e, st| show(&r.profile));
identity_field!(platform, "platform",
    mutate: |i| i.platform.architecture = Architecture::Arm64,
    render: |v| show(&v.platform),
    expected: |r, e, st| show(&r.platform));
identity_field!(root_image, "root_image",
    mutate: |i| i.root_image = other_image(),
    render: |v| show(&v.root_image),
    expected: |r, e, st| show(&r.root_image));
identity_field!(mounts, "mounts",
    mutate: |i| { i.mounts.pop(); },
    render: |v| show(&v.mounts),
    expected: |r, e, st| show(&r.mounts));
identity_field!(output_path, "output_path",
    mutate: |i| i.output_path = "/mnt/session/output".into(),
    render: |v| show(&v.output_path),
    expected: |r, e, st| show(&"/mnt/session/outputs"));
identity_field!(expires_at, "expires_at",
    // The platform's own deadline substituted for the requested one.
    mutate: |i| i.expires_at = i.expires_at.add_seconds(-60),
    render: |v| show(&v.expires_at),
    expected: |r, e, st| show(&r.expires_at));
identity_field!(materialization_profile_digest, "materialization.profile_digest",
    mutate: |i| i.materialization.profile_digest = other_digest(),
    render: |v| show(&v.materialization.profile_digest),
    expected: |r, e, st| show(&r.profile.profile_digest));
identity_field!(materialization_image_reference, "materialization.image_reference",
    mutate: |i| i.materialization.image_reference = other_image(),
    render: |v| show(&v.materialization.image_reference),
    expected: |r, e, st| show(&r.root_image));
identity_field!(materialization_image_digest, "materialization.image_digest",
    // What an image store might report instead of the root_image suffix.
    mutate: |i| i.materialization.image_digest = other_digest(),
    render: |v| show(&v.materialization.image_digest),
    expected: |r, e, st| show(&r.root_image.digest()));
identity_field!(materialization_provider_revision, "materialization.provider_revision",
    mutate: |i| i.materialization.provider_revision = "scripted-rev-2".into(),
    render: |v| show(&v.materialization.provider_revision),
    expected: |r, e, st| show(&e.provider_revision));
identity_field!(materialization_materialization_revision, "materialization.materialization_revision",
    mutate: |i| i.materialization.materialization_revision = "scripted-mat-2".into(),
    render: |v| show(&v.materialization.materialization_revision),
    expected: |r, e, st| show(&e.materialization_revision));

#[tokio::test]
async fn every_mismatch_is_reported_in_order_with_one_rollback() {
    let h = Harness::new();
    h.provider.on_instance(op::PROVISION, |i| {
        i.run_id = "run-other".into();
        i.expires_at = i.expires_at.add_seconds(1);
        i.materialization.image_digest = other_digest();
    });
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    let fields: Vec<&str> = f
        .causes()
        .map(|c| match c {
            SandboxError::SandboxProtocolInvalid {
                operation, field, ..
            } => {
                assert_eq!(*operation, op::INSTANCE_IDENTITY);
                field.as_str()
            }
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(
        fields,
        ["run_id", "expires_at", "materialization.image_digest"]
    );
    assert_eq!(h.provider.count("provision_rollback"), 1);
}

#[tokio::test]
async fn empty_instance_id_is_refused() {
    let h = Harness::new();
    h.provider
        .on_instance(op::PROVISION, |i| i.instance_id = String::new());
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::INSTANCE_IDENTITY,
        "instance_id",
        "a non-empty id of at most 128 bytes",
        "\"\"",
    );
    assert_eq!(h.provider.count("provision_rollback"), 1);
    assert!(h.adapter.instances().is_empty());
}

#[tokio::test]
async fn instance_id_over_128_bytes_is_refused() {
    let h = Harness::new();
    h.provider
        .on_instance(op::PROVISION, |i| i.instance_id = "x".repeat(129));
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::INSTANCE_IDENTITY,
        "instance_id",
        "a non-empty id of at most 128 bytes",
        &show(&"x".repeat(129)),
    );
    assert_eq!(h.provider.count("provision_rollback"), 1);
}

#[tokio::test]
async fn provision_reusing_a_held_instance_id_is_refused() {
    let h = Harness::new();
    let first = h.provisioned(RetentionMode::EphemeralZdr).await;
    let held = first.instance_id.clone();
    h.provider
        .on_instance(op::PROVISION, move |i| i.instance_id = held.clone());
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::INSTANCE_IDENTITY,
        "instance_id",
        "an id not already held",
        &first.instance_id,
    );
    assert_eq!(h.provider.count("provision_rollback"), 1);
    // The held instance is untouched: the rollback removed the provider's
    // own second allocation, not the id the value named.
    assert_eq!(
        h.adapter.instances(),
        vec![(first.instance_id.clone(), RecordState::Provisioning)]
    );
    assert!(h.provider.instance_ids().contains(&first.instance_id));
}

#[tokio::test]
async fn resume_reusing_a_held_instance_id_is_refused() {
    let h = Harness::new();
    let (source, snap) = h.snapshot().await;
    let held = source.instance_id.clone();
    h.provider
        .on_instance(op::RESUME, move |i| i.instance_id = held.clone());
    let f = h
        .adapter
        .resume(request(RetentionMode::Durable), snap)
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::INSTANCE_IDENTITY,
        "instance_id",
        "an id not already held",
        &source.instance_id,
    );
    assert_eq!(h.provider.count("resume_rollback"), 1);
}

#[tokio::test]
async fn activate_returning_another_instance_id_is_refused() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider
        .on_instance(op::ACTIVATE, |i| i.instance_id = "inst-elsewhere".into());
    let f = h.adapter.activate(&i.instance_id).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::INSTANCE_IDENTITY,
        "instance_id",
        &i.instance_id,
        "inst-elsewhere",
    );
    assert_eq!(h.provider.count("activate_rollback"), 1);
    assert_eq!(
        h.adapter.instances(),
        vec![(i.instance_id.clone(), RecordState::Provisioning)]
    );
}

#[tokio::test]
async fn an_honest_echo_is_accepted_without_rollback() {
    let h = Harness::new();
    let req = request(RetentionMode::Durable);
    let p = h.adapter.provision(req.clone()).await.unwrap();
    assert_eq!(p.state, InstanceState::Provisioning);
    let a = h.adapter.activate(&p.instance_id).await.unwrap();
    assert_eq!(a.state, InstanceState::Active);
    let s = h
        .adapter
        .snapshot(&a.instance_id, t0().add_seconds(60))
        .await
        .unwrap();
    let r = h.adapter.resume(req, s).await.unwrap();
    assert_eq!(r.state, InstanceState::Active);
    assert_eq!(h.provider.rollbacks(), 0);
}
