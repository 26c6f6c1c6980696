//! openProcess: evidence checked against the instance and the envelope
//! before the handle is transferred; a mismatch destroys the process under
//! a 30 s bound and keeps both causes (spec "openProcess", "Optional
//! capabilities" row openProcess).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use futures::{AsyncReadExt, AsyncWriteExt};
use support::*;

async fn open_broken(
    h: &Harness,
    mutate: impl Fn(&mut SandboxProcessEvidence) + Send + Sync + 'static,
) -> (SandboxInstance, SandboxFailure) {
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.provider.on_evidence(mutate);
    let f = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap_err();
    (i, f)
}

#[track_caller]
fn assert_identity(e: &SandboxError, field: &str, expected: &str, actual: &str) {
    assert_protocol(e, op::OPEN_PROCESS_IDENTITY, field, expected, actual);
}

async fn one_field(
    field: &str,
    mutate: fn(&mut SandboxProcessEvidence),
    expected: fn(&SandboxInstance) -> String,
    actual: &str,
) {
    let h = Harness::new();
    let (i, f) = open_broken(&h, mutate).await;
    assert_identity(only(&f), field, &expected(&i), actual);
    assert_eq!(h.provider.process_destroys(), 1);
}

#[tokio::test]
async fn evidence_provider_mismatch_destroys_the_process() {
    one_field(
        "provider",
        |e| e.provider = "impostor".into(),
        |i| show(&i.provider),
        "\"impostor\"",
    )
    .await;
}

#[tokio::test]
async fn evidence_instance_mismatch_destroys_the_process() {
    one_field(
        "instance_id",
        |e| e.instance_id = "inst-other".into(),
        |i| show(&i.instance_id),
        "\"inst-other\"",
    )
    .await;
}

#[tokio::test]
async fn evidence_session_mismatch_destroys_the_process() {
    one_field(
        "session_id",
        |e| e.session_id = "session-other".into(),
        |i| show(&i.session_id),
        "\"session-other\"",
    )
    .await;
}

#[tokio::test]
async fn evidence_network_mode_mismatch_destroys_the_process() {
    one_field(
        "network_mode",
        |e| e.network_mode = NetworkMode::Allowlist,
        |_| show(&NetworkMode::None),
        "\"allowlist\"",
    )
    .await;
}

#[tokio::test]
async fn evidence_executable_mismatch_destroys_the_process() {
    one_field(
        "executable",
        |e| e.executable = "sh".into(),
        |_| show(&"cat"),
        "\"sh\"",
    )
    .await;
}

#[tokio::test]
async fn evidence_placement_disagreeing_with_instance_and_envelope() {
    let h = Harness::new();
    let (_, f) = open_broken(&h, |e| e.placement = Placement::Hosted).await;
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_identity(f.error(), "placement", "\"runner\"", "\"hosted\"");
    assert_identity(
        &f.later()[0],
        "placement",
        "the envelope's \"runner\"",
        "\"hosted\"",
    );
    assert_eq!(h.provider.process_destroys(), 1);
}

#[tokio::test]
async fn evidence_tier_disagreeing_with_instance_and_envelope() {
    let h = Harness::new();
    let (_, f) = open_broken(&h, |e| e.tier = Tier::Microvm).await;
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_identity(f.error(), "tier", "\"container\"", "\"microvm\"");
    assert_identity(
        &f.later()[0],
        "tier",
        "one of the envelope's [\"container\"]",
        "\"microvm\"",
    );
    assert_eq!(h.provider.process_destroys(), 1);
}

#[tokio::test]
async fn evidence_network_mode_outside_the_envelope() {
    let mut env = full_envelope();
    env.network_modes = vec![NetworkMode::None];
    env.egress_certification = EgressCertification::Unsupported;
    let h = Harness::with_envelope(env);
    let (_, f) = open_broken(&h, |e| e.network_mode = NetworkMode::Allowlist).await;
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_identity(f.error(), "network_mode", "\"none\"", "\"allowlist\"");
    assert_identity(
        &f.later()[0],
        "network_mode",
        "one of the envelope's [\"none\"]",
        "\"allowlist\"",
    );
}

#[tokio::test]
async fn destroy_failure_after_a_mismatch_keeps_both_causes() {
    let h = Harness::new();
    let boom = SandboxError::failed(
        op::OPEN_PROCESS,
        FailureReason::ProviderError,
        "kill failed",
    );
    h.provider
        .set_process_destroy(Behaviour::Fail(boom.clone()));
    let (i, f) = open_broken(&h, |e| e.session_id = "session-other".into()).await;
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_identity(
        f.error(),
        "session_id",
        &show(&i.session_id),
        "\"session-other\"",
    );
    assert_eq!(f.later()[0], boom);
    assert_eq!(h.provider.process_destroys(), 1);
}

#[tokio::test]
async fn destroy_failure_with_a_runtime_only_tag_is_a_protocol_error() {
    let h = Harness::new();
    h.provider
        .set_process_destroy(Behaviour::Fail(SandboxError::SandboxAdapterAmbiguous {
            candidates: vec![],
        }));
    let (_, f) = open_broken(&h, |e| e.session_id = "session-other".into()).await;
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_protocol(
        &f.later()[0],
        Operation::Process(ProcessStep::Destroy),
        "_tag",
        "one of the eight adapter error tags",
        "SandboxAdapterAmbiguous",
    );
}

#[tokio::test(start_paused = true)]
async fn destroy_hanging_past_30_s_keeps_both_causes() {
    let h = Harness::new();
    h.provider.set_process_destroy(Behaviour::Hang);
    let started = tokio::time::Instant::now();
    let (i, f) = open_broken(&h, |e| e.session_id = "session-other".into()).await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(30), "{waited:?}");
    assert!(waited < Duration::from_secs(31), "{waited:?}");
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_identity(
        f.error(),
        "session_id",
        &show(&i.session_id),
        "\"session-other\"",
    );
    assert_failed(
        &f.later()[0],
        Operation::Process(ProcessStep::Destroy),
        FailureReason::TimedOut,
    );
    assert_eq!(h.provider.process_destroys(), 1);
}

#[tokio::test]
async fn accepted_process_streams_and_wait_settles_once() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let mut p = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap();
    assert_eq!(p.evidence.instance_id, i.instance_id);
    p.input.write_all(b"prompt").await.unwrap();
    p.input.close().await.unwrap();
    let mut out = Vec::new();
    p.output.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, b"prompt", "cat echoes its input through the streams");
    let other = p.handle.clone();
    assert_eq!(p.handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
    assert_eq!(other.wait().await.unwrap(), ProcessExit::ExitCode(0));
    assert_eq!(p.handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
    assert_eq!(h.provider.process_waits(), 1, "settles once");
    p.handle.destroy().await.unwrap();
    p.handle.destroy().await.unwrap();
    assert_eq!(h.provider.process_destroys(), 2);
}

#[tokio::test]
async fn process_destroy_with_a_runtime_only_tag_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let p = h
        .adapter
        .open_process(process_request(&i.instance_id))
        .await
        .unwrap();
    h.provider
        .set_process_destroy(Behaviour::Fail(SandboxError::protocol(
            op::EXECUTE,
            "y",
            "a",
            "b",
        )));
    let e = p.handle.destroy().await.unwrap_err();
    assert_protocol(
        &e,
        Operation::Process(ProcessStep::Destroy),
        "_tag",
        "one of the eight adapter error tags",
        "SandboxProtocolInvalid",
    );
}
