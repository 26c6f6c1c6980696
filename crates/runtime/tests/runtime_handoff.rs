//! Allocation handoff for the six allocating members (spec "Allocation
//! handoff"; DESIGN D5): the rollback runs exactly once on rejection, never
//! on acceptance, the value is not returned; cancellation at each await
//! point of a handoff; a rollback that hangs past 30 s (paused time); a
//! failing rollback keeps both causes.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::RecordState;
use support::*;

/// What an operation needs before it can be called.
#[derive(Clone)]
enum Ctx {
    None,
    Instance(String),
    Snapshot(SandboxSnapshot),
}

async fn prepare(h: &Harness, operation: Operation) -> Ctx {
    let ctx = match operation {
        op::PROVISION => Ctx::None,
        op::ACTIVATE => Ctx::Instance(h.provisioned(RetentionMode::Durable).await.instance_id),
        op::SNAPSHOT | op::RELEASE => {
            Ctx::Instance(h.active(RetentionMode::Durable).await.instance_id)
        }
        op::CLONE_SNAPSHOT | op::RESUME => Ctx::Snapshot(h.snapshot().await.1),
        other => panic!("not an allocating member: {other}"),
    };
    h.provider.clear_calls();
    ctx
}

type Call<'a> = Pin<Box<dyn Future<Output = Result<(), SandboxFailure>> + 'a>>;

fn call<'a>(h: &'a Harness, operation: Operation, ctx: &'a Ctx) -> Call<'a> {
    let a = &h.adapter;
    let later = t0().add_seconds(86_400);
    match (operation, ctx) {
        (op::PROVISION, _) => {
            Box::pin(async move { a.provision(request(RetentionMode::Durable)).await.map(drop) })
        }
        (op::ACTIVATE, Ctx::Instance(id)) => {
            Box::pin(async move { a.activate(id).await.map(drop) })
        }
        (op::SNAPSHOT, Ctx::Instance(id)) => {
            Box::pin(async move { a.snapshot(id, later).await.map(drop) })
        }
        (op::RELEASE, Ctx::Instance(id)) => {
            Box::pin(async move { a.release(id, Some(later)).await.map(drop) })
        }
        (op::CLONE_SNAPSHOT, Ctx::Snapshot(s)) => {
            Box::pin(async move { a.clone_snapshot(s, "session-2").await.map(drop) })
        }
        (op::RESUME, Ctx::Snapshot(s)) => Box::pin(async move {
            a.resume(request(RetentionMode::Durable), s.clone())
                .await
                .map(drop)
        }),
        _ => panic!("no call for {operation}"),
    }
}

/// Makes `operation`'s value fail its identity check on `session_id` (or
/// `run_id` for instances); returns the expected rejection's operation
/// and field.
fn break_value(h: &Harness, operation: Operation) -> (Operation, &'static str) {
    match operation {
        op::PROVISION | op::ACTIVATE | op::RESUME => {
            h.provider
                .on_instance(operation, |i| i.run_id = "run-other".into());
            (op::INSTANCE_IDENTITY, "run_id")
        }
        op::SNAPSHOT | op::RELEASE => {
            h.provider
                .on_snapshot(operation, |s| s.session_id = "session-other".into());
            (op::SNAPSHOT_IDENTITY, "session_id")
        }
        op::CLONE_SNAPSHOT => {
            h.provider
                .on_snapshot(operation, |s| s.session_id = "session-other".into());
            (op::CLONE_IDENTITY, "session_id")
        }
        other => panic!("{other}"),
    }
}

/// The rollback of the allocating member `operation`.
fn rollback(operation: Operation) -> Operation {
    operation
        .rollback()
        .unwrap_or_else(|| panic!("not a member: {operation}"))
}

fn rollbacks(h: &Harness) -> (usize, usize) {
    (h.provider.rollbacks(), h.provider.rollbacks_done())
}

/// Lets spawned tasks run for a while.
async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

/// The runtime did not take the value: nothing new is held, a released
/// instance is still active, and the provider no longer holds the
/// allocation once the rollback completed.
fn assert_not_taken(
    h: &Harness,
    operation: Operation,
    ctx: &Ctx,
    held: &[(String, RecordState)],
    snaps: &[String],
) {
    assert_eq!(h.adapter.instances(), held, "runtime records unchanged");
    if operation == op::ACTIVATE || operation == op::RELEASE {
        let Ctx::Instance(id) = ctx else {
            unreachable!()
        };
        let want = if operation == op::ACTIVATE {
            RecordState::Provisioning
        } else {
            RecordState::Active
        };
        assert!(held.contains(&(id.clone(), want)));
    }
    if matches!(operation, op::SNAPSHOT | op::CLONE_SNAPSHOT | op::RELEASE) {
        assert_eq!(
            h.provider.snapshot_ids(),
            snaps,
            "rollback removed the snapshot"
        );
    }
}

async fn rejection_rolls_back_once(operation: Operation) {
    let h = Harness::new();
    let ctx = prepare(&h, operation).await;
    let held = h.adapter.instances();
    let snaps = h.provider.snapshot_ids();
    let (check, field) = break_value(&h, operation);
    let f = call(&h, operation, &ctx).await.unwrap_err();
    match only(&f) {
        SandboxError::SandboxProtocolInvalid {
            operation: o,
            field: got,
            expected,
            actual,
        } => {
            assert_eq!((*o, got.as_str()), (check, field));
            assert_ne!(expected, actual);
        }
        other => panic!("{other}"),
    }
    assert_eq!(rollbacks(&h), (1, 1));
    assert_eq!(h.provider.count(rollback(operation)), 1);
    settle().await;
    assert_eq!(rollbacks(&h), (1, 1), "no second rollback later");
    assert_not_taken(&h, operation, &ctx, &held, &snaps);
}

async fn acceptance_never_rolls_back(operation: Operation) {
    let h = Harness::new();
    let ctx = prepare(&h, operation).await;
    call(&h, operation, &ctx).await.unwrap();
    settle().await;
    assert_eq!(rollbacks(&h), (0, 0));
    assert_eq!(h.provider.count(rollback(operation)), 0);
}

async fn drop_while_provider_pending(operation: Operation) {
    let h = Harness::new();
    let ctx = prepare(&h, operation).await;
    let held = h.adapter.instances();
    let snaps = h.provider.snapshot_ids();
    let gate = h.provider.gate(operation);
    tokio::select! {
        r = call(&h, operation, &ctx) => panic!("the call settled: {r:?}"),
        () = gate.entered.notified() => {}
    }
    // The caller's future is dropped with the provider call pending. The
    // call is not cancelled half-way (a dropped Rust future cannot clean
    // up): it runs to completion, and the handoff nobody claims is rolled
    // back exactly once, so nothing of it is left.
    gate.proceed.notify_one();
    settle().await;
    assert_eq!(h.provider.count(operation), 1);
    assert_eq!(rollbacks(&h), (1, 1));
    assert_eq!(h.adapter.instances(), held);
    assert_eq!(h.provider.snapshot_ids(), snaps);
}

async fn drop_during_slow_rollback(operation: Operation) {
    let h = Harness::new();
    let ctx = prepare(&h, operation).await;
    let held = h.adapter.instances();
    let snaps = h.provider.snapshot_ids();
    break_value(&h, operation);
    let gate = h.provider.gate(rollback(operation));
    tokio::select! {
        r = call(&h, operation, &ctx) => panic!("the call settled: {r:?}"),
        () = gate.entered.notified() => {}
    }
    // Dropped after the handoff, while its rollback is in flight.
    assert_eq!(rollbacks(&h), (1, 0));
    gate.proceed.notify_one();
    settle().await;
    assert_eq!(rollbacks(&h), (1, 1), "the rollback completed exactly once");
    assert_eq!(h.provider.count(rollback(operation)), 1);
    assert_not_taken(&h, operation, &ctx, &held, &snaps);
}

async fn rollback_hanging_past_30_s(operation: Operation) {
    let h = Harness::new();
    let ctx = prepare(&h, operation).await;
    let (check, field) = break_value(&h, operation);
    h.provider.set_rollback(Behaviour::Hang);
    let started = tokio::time::Instant::now();
    let f = call(&h, operation, &ctx).await.unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(30), "{waited:?}");
    assert!(waited < Duration::from_secs(31), "{waited:?}");
    assert_eq!(f.cause_count(), 2, "{f}");
    match f.error() {
        SandboxError::SandboxProtocolInvalid {
            operation: o,
            field: got,
            ..
        } => assert_eq!((*o, got.as_str()), (check, field)),
        other => panic!("first cause must be the rejection: {other}"),
    }
    assert_failed(&f.later()[0], rollback(operation), FailureReason::TimedOut);
    assert_eq!(rollbacks(&h), (1, 0));
}

async fn rollback_failure_keeps_both_causes(operation: Operation) {
    let h = Harness::new();
    let ctx = prepare(&h, operation).await;
    break_value(&h, operation);
    let boom = SandboxError::failed(operation, FailureReason::ProviderError, "disk gone");
    h.provider.set_rollback(Behaviour::Fail(boom.clone()));
    let f = call(&h, operation, &ctx).await.unwrap_err();
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_eq!(f.error().tag(), "SandboxProtocolInvalid");
    assert_eq!(f.later()[0], boom);
    assert_eq!(rollbacks(&h), (1, 0));
}

macro_rules! handoff_cases {
    ($name:ident, $op:expr) => {
        mod $name {
            use super::*;

            #[tokio::test]
            async fn rejection_rolls_back_once() {
                super::rejection_rolls_back_once($op).await
            }

            #[tokio::test]
            async fn acceptance_never_rolls_back() {
                super::acceptance_never_rolls_back($op).await
            }

            #[tokio::test]
            async fn drop_while_provider_pending() {
                super::drop_while_provider_pending($op).await
            }

            #[tokio::test]
            async fn drop_during_slow_rollback() {
                super::drop_during_slow_rollback($op).await
            }

            #[tokio::test(start_paused = true)]
            async fn rollback_hanging_past_30_s() {
                super::rollback_hanging_past_30_s($op).await
            }

            #[tokio::test]
            async fn rollback_failure_keeps_both_causes() {
                super::rollback_failure_keeps_both_causes($op).await
            }
        }
    };
}

handoff_cases!(provision, op::PROVISION);
handoff_cases!(activate, op::ACTIVATE);
handoff_cases!(snapshot, op::SNAPSHOT);
handoff_cases!(clone_snapshot, op::CLONE_SNAPSHOT);
handoff_cases!(release, op::RELEASE);
handoff_cases!(resume, op::RESUME);

#[tokio::test]
async fn rollback_returning_a_runtime_only_tag_is_a_protocol_error() {
    let h = Harness::new();
    break_value(&h, op::PROVISION);
    h.provider
        .set_rollback(Behaviour::Fail(SandboxError::SandboxAdapterAmbiguous {
            candidates: vec!["x".into()],
        }));
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_eq!(f.cause_count(), 2, "{f}");
    assert_protocol(
        &f.later()[0],
        Operation::Rollback(Member::Provision),
        "_tag",
        "one of the eight adapter error tags",
        "SandboxAdapterAmbiguous",
    );
}

#[tokio::test]
async fn a_provider_error_is_not_a_handoff_and_rolls_nothing_back() {
    let h = Harness::new();
    let e = SandboxError::failed(op::PROVISION, FailureReason::ProviderError, "no capacity");
    h.provider.fail(op::PROVISION, e.clone());
    let f = h
        .adapter
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap_err();
    assert_eq!(only(&f), &e);
    assert_eq!(rollbacks(&h), (0, 0));
}
