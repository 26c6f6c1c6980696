//! Rules an audit of the spec against the runtime found unchecked: the
//! whole envelope is unchanging, the network re-check holds an instance to
//! the egress grade its selection required, cleanup never sweeps a pinned
//! unexpired Checkpoint, process evidence starts before the instance
//! expires, openProcess is protected from a cancelled caller, and the
//! Checkpoint release helper sends only SIGTERM and bounds every wait.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::drivers::terminate;
use checkfu_sandbox_runtime::Requirements;
use support::*;

fn allowlist_request() -> SandboxProvisionRequest {
    let mut req = request(RetentionMode::EphemeralZdr);
    req.profile.network_policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "api.example.test".into(),
            port: 443,
        }],
    };
    req
}

#[tokio::test]
async fn an_envelope_drifted_in_any_field_is_refused_before_the_call() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.set_envelope(|e| e.max_mounts = 8);
    let f = h
        .adapter
        .execute(&i.instance_id, echo(&["x"]))
        .await
        .unwrap_err();
    assert_protocol(only(&f), op::CAPABILITIES, "max_mounts", "64", "8");
    h.provider.set_envelope(|e| {
        e.max_mounts = 64;
        e.enforcement.cpu = EnforcementLevel::NotEnforced;
    });
    let f = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::CAPABILITIES,
        "enforcement.cpu",
        "\"provider_enforced\"",
        "\"not_enforced\"",
    );
    assert!(h.provider.calls().is_empty(), "{:?}", h.provider.calls());
    h.provider
        .set_envelope(|e| e.enforcement.cpu = EnforcementLevel::ProviderEnforced);
    h.adapter
        .execute(&i.instance_id, echo(&["x"]))
        .await
        .unwrap();
}

#[tokio::test]
async fn provision_holds_an_allowlist_to_the_egress_grade_its_selection_required() {
    let mut env = full_envelope();
    env.egress_certification = EgressCertification::AdvisoryFilter;
    let h = Harness::with_envelope(env);
    let strict = h
        .adapter
        .clone()
        .requiring_egress(EgressCertification::Enforced);
    let f = strict.provision(allowlist_request()).await.unwrap_err();
    assert_unavailable(only(&f), Requirement::NetworkPolicy);
    assert!(h.provider.calls().is_empty());
    // The default handle requires advisory_filter, which the provider meets.
    h.adapter.provision(allowlist_request()).await.unwrap();
}

#[tokio::test]
async fn the_network_recheck_uses_the_grade_the_selection_required_not_a_constant() {
    let h = Harness::new();
    let req = allowlist_request();
    let mut needs =
        Requirements::for_profile(&req.profile, req.target, req.platform, req.mounts.clone());
    needs.minimum_egress = EgressCertification::Enforced;
    let selected = h.runtime.select(&needs).unwrap();
    assert_eq!(selected.minimum_egress(), EgressCertification::Enforced);
    let i = selected.provision(req).await.unwrap();
    h.provider.clear_calls();
    h.provider
        .set_envelope(|e| e.egress_certification = EgressCertification::AdvisoryFilter);
    // Any handle of the adapter: the instance keeps its requirement.
    let f = h.adapter.activate(&i.instance_id).await.unwrap_err();
    match only(&f) {
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::NetworkPolicy,
            detail,
        } => assert!(detail.contains("needs egress Enforced"), "{detail}"),
        other => panic!("{other}"),
    }
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn cleanup_sweeping_a_pinned_unexpired_snapshot_is_a_protocol_error() {
    let h = Harness::new();
    let (_, snap) = h.snapshot().await;
    let id = snap.snapshot_id.clone();
    let swept = id.clone();
    h.provider
        .on_cleanup(move |r| r.snapshots = vec![swept.clone()]);
    let now = h.clock.now();
    let f = h
        .adapter
        .cleanup(now, now, vec![id.clone()])
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::CLEANUP,
        "snapshots",
        &format!(
            "the pinned snapshot {id} kept until its expires_at {}",
            snap.expires_at
        ),
        &format!("{id} swept at {now}"),
    );
    // Unpinned, the same sweep is the provider's call to make.
    h.adapter.cleanup(now, now, vec![]).await.unwrap();
}

#[tokio::test]
async fn cleanup_may_sweep_a_pinned_snapshot_past_its_own_expiry() {
    let h = Harness::new();
    let (_, snap) = h.snapshot().await;
    h.clock.advance_seconds(86_400);
    let now = h.clock.now();
    let r = h
        .adapter
        .cleanup(now, now, vec![snap.snapshot_id.clone()])
        .await
        .unwrap();
    assert_eq!(r.snapshots, vec![snap.snapshot_id]);
}

#[tokio::test]
async fn process_evidence_started_at_or_after_the_instance_expiry_is_refused() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let expires_at = i.expires_at;
    h.provider.on_evidence(move |e| e.started_at = expires_at);
    let f = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap_err();
    assert_protocol(
        only(&f),
        op::OPEN_PROCESS_IDENTITY,
        "started_at",
        &format!(
            "strictly before the instance's expires_at {}",
            show(&expires_at)
        ),
        &show(&expires_at),
    );
    assert_eq!(h.provider.process_destroys(), 1);
}

#[tokio::test]
async fn a_cancelled_open_process_destroys_the_process_nobody_claimed() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let gate = h.provider.gate(op::OPEN_PROCESS);
    let cancelled = {
        let (a, id) = (h.adapter.clone(), i.instance_id.clone());
        tokio::spawn(async move { a.open_process(process_request(&id)).await.map(drop) })
    };
    gate.entered.notified().await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    gate.proceed.notify_one();
    assert!(h.adapter.settle(Duration::from_secs(30)).await);
    assert_eq!(h.provider.process_destroys(), 1);
    assert_eq!(h.provider.calls(), vec!["open_process", "process_destroy"]);
}

#[tokio::test(start_paused = true)]
async fn the_checkpoint_release_helper_sends_only_sigterm_when_the_process_settles() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let p = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap();
    h.provider.clear_calls();
    assert_eq!(
        terminate(&p.handle).await.unwrap(),
        ProcessExit::Signal(SignalName::Sigterm),
        "the process's own exit: ended by the SIGTERM"
    );
    assert_eq!(h.provider.calls(), vec!["process_signal SIGTERM"]);
}

#[tokio::test(start_paused = true)]
async fn the_checkpoint_release_helper_bounds_every_wait_and_never_sends_sigkill() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let p = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap();
    h.provider.clear_calls();
    h.provider.set_process_wait(Behaviour::Hang);
    let e = terminate(&p.handle).await.unwrap_err();
    match e {
        SandboxError::SandboxOperationFailed {
            operation: Operation::Process(ProcessStep::Wait),
            reason: FailureReason::TimedOut,
            ..
        } => {}
        other => panic!("{other}"),
    }
    assert_eq!(
        h.provider.calls(),
        vec!["process_signal SIGTERM", "process_destroy"]
    );
}
