//! The network policy re-check on activate, execute, resume and
//! openProcess (spec "Errors": network_policy condition 3; DESIGN D11).
//!
//! The runtime validates the envelope at registration; to observe the
//! re-check, the double changes the envelope it advertises
//! after registration (a provider breaking "unchanging for this
//! revision"). The re-check refuses before the provider is called.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

fn drop_none_mode(h: &Harness) {
    h.provider
        .set_envelope(|e| e.network_modes = vec![NetworkMode::Allowlist]);
}

#[track_caller]
fn assert_network_refusal(f: &SandboxFailure) {
    match only(f) {
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::NetworkPolicy,
            detail,
        } => assert!(
            detail.starts_with("requested"),
            "names the requested policy: {detail}"
        ),
        other => panic!("expected SandboxCapabilityUnavailable{{network_policy}}, got {other}"),
    }
}

#[tokio::test]
async fn activate_rechecks_the_network_policy() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    drop_none_mode(&h);
    let f = h.adapter.activate(&i.instance_id).await.unwrap_err();
    assert_network_refusal(&f);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn execute_rechecks_the_network_policy() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    drop_none_mode(&h);
    let f = h
        .adapter
        .execute(&i.instance_id, echo(&["x"]))
        .await
        .unwrap_err();
    assert_network_refusal(&f);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn open_process_rechecks_the_network_policy() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    drop_none_mode(&h);
    let f = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap_err();
    assert_network_refusal(&f);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn resume_rechecks_the_network_policy() {
    let h = Harness::new();
    let (_, snap) = h.snapshot().await;
    drop_none_mode(&h);
    let f = h
        .adapter
        .resume(request(RetentionMode::Durable), snap)
        .await
        .unwrap_err();
    assert_network_refusal(&f);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn a_lowered_egress_grade_is_refused_for_an_allowlist_profile() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.profile.network_policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "api.example.test".into(),
            port: 443,
        }],
    };
    let i = h.adapter.provision(req).await.unwrap();
    h.adapter.activate(&i.instance_id).await.unwrap();
    h.provider.clear_calls();
    h.provider
        .set_envelope(|e| e.egress_certification = EgressCertification::Unsupported);
    let f = h
        .adapter
        .execute(&i.instance_id, echo(&["x"]))
        .await
        .unwrap_err();
    assert_network_refusal(&f);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn resume_with_a_mode_the_envelope_never_offered_is_refused_before_the_call() {
    let mut env = full_envelope();
    env.network_modes = vec![NetworkMode::None];
    env.egress_certification = EgressCertification::Unsupported;
    let h = Harness::with_envelope(env);
    let (_, snap) = h.snapshot().await;
    let mut req = request(RetentionMode::Durable);
    req.profile.network_policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "api.example.test".into(),
            port: 443,
        }],
    };
    let f = h.adapter.resume(req, snap).await.unwrap_err();
    assert_unavailable(only(&f), Requirement::NetworkPolicy);
    assert_eq!(h.provider.count(op::RESUME), 0);
}

#[tokio::test]
async fn a_malformed_allowlist_is_refused_at_provision() {
    let h = Harness::new();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.profile.network_policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "api.example.test".into(),
            port: 0,
        }],
    };
    let f = h.adapter.provision(req).await.unwrap_err();
    assert_unavailable(only(&f), Requirement::NetworkPolicy);
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn an_unchanged_envelope_passes_the_recheck() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.adapter
        .execute(&i.instance_id, echo(&["x"]))
        .await
        .unwrap();
    h.adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap();
}
