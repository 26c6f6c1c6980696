//! beginActiveWrite's ownership handoff as the runtime checks it: the
//! dispatch marker's place, redelivery consistency and the outcome's shape
//! (spec "beginActiveWrite has an explicit ownership handoff"; decision
//! `027-active-write-journal`).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::active_write::batch_digest;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use support::*;

const A: &str = "/workspace/project/a";

fn batch(id: &str, tx: &str, body: &str) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.into(),
        transaction_id: tx.into(),
        files: vec![ActiveWriteFile {
            path: A.into(),
            content_base64: Bytes::from(body),
        }],
    }
}

/// A caller marker that counts and optionally aborts.
#[derive(Default)]
struct Caller {
    calls: AtomicUsize,
    abort: bool,
}

#[async_trait]
impl DispatchMarker for Caller {
    async fn dispatch(&self, _t: &str) -> Result<(), SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.abort {
            Err(SandboxError::failed(
                op::BEGIN_ACTIVE_WRITE,
                FailureReason::InvalidRequest,
                "abort",
            ))
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn the_callers_marker_is_asked_once_before_the_commit() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let caller = Arc::new(Caller::default());
    let out = h
        .adapter
        .begin_active_write_with(batch(&i.instance_id, "t", "x"), caller.clone())
        .await
        .unwrap();
    assert!(matches!(out, ActiveWriteOutcome::Committed { .. }));
    assert_eq!(caller.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_redelivery_with_another_batch_is_refused_before_the_provider() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let first = batch(&i.instance_id, "t", "one");
    h.adapter.begin_active_write(first.clone()).await.unwrap();
    let other = batch(&i.instance_id, "t", "two");
    let calls = h.provider.count(op::BEGIN_ACTIVE_WRITE);
    let e = h
        .adapter
        .begin_active_write(other.clone())
        .await
        .unwrap_err();
    assert_invalid(
        only(&e),
        op::BEGIN_ACTIVE_WRITE,
        "transaction_id",
        &format!("a redelivery of t's batch {}", batch_digest(&first)),
        &format!("another batch {}", batch_digest(&other)),
    );
    assert_eq!(h.provider.count(op::BEGIN_ACTIVE_WRITE), calls);
    // The same batch is a redelivery and reaches the provider.
    h.adapter.begin_active_write(first).await.unwrap();
    assert_eq!(h.provider.count(op::BEGIN_ACTIVE_WRITE), calls + 1);
}

#[tokio::test]
async fn a_commit_without_the_dispatch_marker_is_a_protocol_error() {
    let h = Harness::new();
    h.provider.active_write_skips_marker();
    let i = h.active(RetentionMode::Durable).await;
    let e = h
        .adapter
        .begin_active_write(batch(&i.instance_id, "t", "x"))
        .await
        .unwrap_err();
    assert_protocol(
        only(&e),
        op::BEGIN_ACTIVE_WRITE,
        "dispatch_marker",
        "invoked before the journal became dispatched",
        "committed without the dispatch marker",
    );
}

#[tokio::test]
async fn indeterminate_without_the_dispatch_marker_is_a_protocol_error() {
    let h = Harness::new();
    h.provider.active_write_skips_marker();
    h.provider.on_active_write(|o| {
        *o = ActiveWriteOutcome::Indeterminate {
            transaction_id: o.transaction_id().to_owned(),
            reason: "unknown".into(),
        }
    });
    let i = h.active(RetentionMode::Durable).await;
    let e = h
        .adapter
        .begin_active_write(batch(&i.instance_id, "t", "x"))
        .await
        .unwrap_err();
    assert_protocol(
        only(&e),
        op::BEGIN_ACTIVE_WRITE,
        "dispatch_marker",
        "invoked before the journal became dispatched",
        "indeterminate without the dispatch marker",
    );
}

#[tokio::test]
async fn a_commit_after_the_caller_aborted_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let abort = Arc::new(Caller {
        abort: true,
        ..Caller::default()
    });
    // Honest: the abort settles rolled_back.
    let out = h
        .adapter
        .begin_active_write_with(batch(&i.instance_id, "t1", "x"), abort.clone())
        .await
        .unwrap();
    assert!(
        matches!(out, ActiveWriteOutcome::RolledBack { .. }),
        "{out:?}"
    );
    h.provider.active_write_ignores_abort();
    let e = h
        .adapter
        .begin_active_write_with(batch(&i.instance_id, "t2", "x"), abort)
        .await
        .unwrap_err();
    assert_protocol(
        only(&e),
        op::BEGIN_ACTIVE_WRITE,
        "outcome",
        "rolled_back (the caller aborted at the dispatch marker)",
        "committed",
    );
}

#[tokio::test]
async fn a_redelivery_settling_differently_is_a_protocol_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let req = batch(&i.instance_id, "t", "x");
    h.adapter.begin_active_write(req.clone()).await.unwrap();
    h.provider.on_active_write(|o| {
        *o = ActiveWriteOutcome::RolledBack {
            transaction_id: o.transaction_id().to_owned(),
            reason: "already applied".into(),
        }
    });
    let e = h.adapter.begin_active_write(req).await.unwrap_err();
    match only(&e) {
        SandboxError::SandboxProtocolInvalid {
            operation, field, ..
        } => {
            assert_eq!(*operation, op::BEGIN_ACTIVE_WRITE);
            assert_eq!(field, "outcome");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_provider_error_after_the_marker_leaves_the_transaction_indeterminate() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    h.provider
        .active_write_fails_after_marker(SandboxError::failed(
            op::BEGIN_ACTIVE_WRITE,
            FailureReason::ProviderError,
            "the daemon went away",
        ));
    let out = h
        .adapter
        .begin_active_write(batch(&i.instance_id, "t", "x"))
        .await
        .unwrap();
    match out {
        ActiveWriteOutcome::Indeterminate {
            transaction_id,
            reason,
        } => {
            assert_eq!(transaction_id, "t");
            assert!(reason.contains("the daemon went away"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_provider_error_before_the_marker_is_the_providers_error() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let refusal = SandboxError::unavailable(Requirement::ActiveMountWrite, "durable journal");
    h.provider.fail(op::BEGIN_ACTIVE_WRITE, refusal.clone());
    let e = h
        .adapter
        .begin_active_write(batch(&i.instance_id, "t", "x"))
        .await
        .unwrap_err();
    assert_eq!(only(&e), &refusal);
}
