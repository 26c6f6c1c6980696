//! One lifecycle call at a time per instance: activate, snapshot, release,
//! destroy, resume and beginActiveWrite on one instance (resume: on one
//! snapshot) are refused or serialized before the provider is called
//! (spec "Lifecycle and states"; decision 022);
//! and the runtime's records stay bounded over many lifecycles.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::{Adapter, RecordState, ENDED_RECORDS_KEPT};
use support::*;
use tokio::sync::mpsc;

const N: usize = 8;

/// The conflict a serialized call gets while `busy` is in flight.
fn in_flight(operation: Operation, busy: ConflictActual) -> SandboxError {
    SandboxError::conflict(operation, "no lifecycle call in flight", busy)
}

fn write_request(instance_id: &str) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: instance_id.into(),
        transaction_id: "tx-1".into(),
        files: vec![ActiveWriteFile {
            path: format!("{PROJECT}/f"),
            content_base64: Bytes::from("x"),
        }],
    }
}

/// Fires `N` concurrent activates of one instance while the provider holds
/// the first: the provider sees exactly one, the other `N - 1` are refused
/// naming the activate in flight, and the one that got through succeeds.
#[tokio::test]
async fn concurrent_activates_reach_the_provider_once() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    let gate = h.provider.gate(op::ACTIVATE);
    let (tx, mut rx) = mpsc::unbounded_channel();
    for _ in 0..N {
        let (a, id, tx) = (h.adapter.clone(), i.instance_id.clone(), tx.clone());
        tokio::spawn(async move {
            let _ = tx.send(a.activate(&id).await);
        });
    }
    gate.entered.notified().await;
    let mut refused = Vec::new();
    for _ in 0..N - 1 {
        refused.push(rx.recv().await.unwrap().unwrap_err());
    }
    gate.proceed.notify_one();
    let admitted = rx.recv().await.unwrap().unwrap();
    assert_eq!(admitted.state, InstanceState::Active);
    for f in &refused {
        assert_eq!(
            only(f),
            &in_flight(op::ACTIVATE, ConflictActual::ActivateInFlight)
        );
    }
    assert_eq!(
        h.provider.count(op::ACTIVATE),
        1,
        "{:?}",
        h.provider.calls()
    );
    assert_eq!(h.provider.calls(), vec!["activate"]);
}

/// While a snapshot is in flight, snapshot, release and beginActiveWrite on
/// the same instance are refused before the call, naming the snapshot; a
/// destroy waits for it and then runs; execute is not serialized.
#[tokio::test]
async fn a_snapshot_in_flight_refuses_the_other_lifecycle_calls_and_destroy_waits() {
    let h = Harness::new();
    let i = h.active(RetentionMode::Durable).await;
    let id = i.instance_id.clone();
    let later = t0().add_seconds(600);
    let gate = h.provider.gate(op::SNAPSHOT);
    let first = {
        let (a, id) = (h.adapter.clone(), id.clone());
        tokio::spawn(async move { a.snapshot(&id, later).await })
    };
    gate.entered.notified().await;
    let busy = ConflictActual::SnapshotInFlight;
    let f = h.adapter.snapshot(&id, later).await.unwrap_err();
    assert_eq!(only(&f), &in_flight(op::SNAPSHOT, busy));
    let f = h.adapter.release(&id, Some(later)).await.unwrap_err();
    assert_eq!(only(&f), &in_flight(op::RELEASE, busy));
    let f = h
        .adapter
        .begin_active_write(write_request(&id))
        .await
        .unwrap_err();
    assert_eq!(only(&f), &in_flight(op::BEGIN_ACTIVE_WRITE, busy));
    h.adapter.execute(&id, echo(&["x"])).await.unwrap();
    let destroy = {
        let (a, id) = (h.adapter.clone(), id.clone());
        tokio::spawn(async move { a.destroy(&id).await })
    };
    // Give the destroy every chance to run early; it must not reach the
    // provider while the snapshot is in flight.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(h.provider.count(op::DESTROY), 0, "destroy waits");
    gate.proceed.notify_one();
    first.await.unwrap().unwrap();
    destroy.await.unwrap().unwrap();
    assert_eq!(h.provider.calls(), vec!["snapshot", "execute", "destroy"]);
}

/// While a destroy is in flight, activate is refused naming the destroy.
#[tokio::test]
async fn a_destroy_in_flight_refuses_activate() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    let gate = h.provider.gate(op::DESTROY);
    let destroy = {
        let (a, id) = (h.adapter.clone(), i.instance_id.clone());
        tokio::spawn(async move { a.destroy(&id).await })
    };
    gate.entered.notified().await;
    let f = h.adapter.activate(&i.instance_id).await.unwrap_err();
    assert_eq!(
        only(&f),
        &in_flight(op::ACTIVATE, ConflictActual::DestroyInFlight)
    );
    gate.proceed.notify_one();
    destroy.await.unwrap().unwrap();
    assert_eq!(h.provider.calls(), vec!["destroy"]);
}

/// A release in flight refuses a snapshot naming the release.
#[tokio::test]
async fn a_release_in_flight_refuses_snapshot() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    let gate = h.provider.gate(op::RELEASE);
    let release = {
        let (a, id) = (h.adapter.clone(), i.instance_id.clone());
        tokio::spawn(async move { a.release(&id, None).await })
    };
    gate.entered.notified().await;
    let f = h
        .adapter
        .snapshot(&i.instance_id, t0().add_seconds(600))
        .await
        .unwrap_err();
    assert_eq!(
        only(&f),
        &in_flight(op::SNAPSHOT, ConflictActual::ReleaseInFlight)
    );
    gate.proceed.notify_one();
    release.await.unwrap().unwrap();
    assert_eq!(h.provider.calls(), vec!["release"]);
}

/// Two concurrent resumes of one snapshot: the second is refused naming
/// the resume in flight; the provider sees one.
#[tokio::test]
async fn concurrent_resumes_of_one_snapshot_reach_the_provider_once() {
    let h = Harness::new();
    let (_, snap) = h.snapshot().await;
    let gate = h.provider.gate(op::RESUME);
    let first = {
        let (a, s) = (h.adapter.clone(), snap.clone());
        tokio::spawn(async move { a.resume(request(RetentionMode::Durable), s).await })
    };
    gate.entered.notified().await;
    let f = h
        .adapter
        .resume(request(RetentionMode::Durable), snap.clone())
        .await
        .unwrap_err();
    assert_eq!(
        only(&f),
        &in_flight(op::RESUME, ConflictActual::ResumeInFlight)
    );
    gate.proceed.notify_one();
    first.await.unwrap().unwrap();
    assert_eq!(h.provider.calls(), vec!["resume"]);
}

/// A caller cancelled while its activate is at the provider does not free
/// the instance: the marker stays until the provider call and the rollback
/// of its unclaimed value settle, so a second activate is refused meanwhile
/// and admitted afterwards.
#[tokio::test]
async fn a_cancelled_activate_keeps_the_instance_until_its_rollback_settles() {
    let h = Harness::new();
    let i = h.provisioned(RetentionMode::EphemeralZdr).await;
    h.provider.clear_calls();
    let gate = h.provider.gate(op::ACTIVATE);
    let cancelled = {
        let (a, id) = (h.adapter.clone(), i.instance_id.clone());
        tokio::spawn(async move { a.activate(&id).await })
    };
    gate.entered.notified().await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    let f = h.adapter.activate(&i.instance_id).await.unwrap_err();
    assert_eq!(
        only(&f),
        &in_flight(op::ACTIVATE, ConflictActual::ActivateInFlight)
    );
    gate.proceed.notify_one();
    assert!(h.adapter.settle(Duration::from_secs(30)).await);
    assert_eq!(
        h.provider.calls(),
        vec!["activate", "activate_rollback", "activate_rollback_done"]
    );
    assert_eq!(h.provider.rollbacks_done(), 1);
    // The gate is spent; the next activate reaches the provider.
    h.provider.gate(op::ACTIVATE).proceed.notify_one();
    h.adapter.activate(&i.instance_id).await.unwrap();
}

async fn lifecycle(a: &Adapter) -> String {
    let i = a
        .provision(request(RetentionMode::EphemeralZdr))
        .await
        .unwrap();
    a.activate(&i.instance_id).await.unwrap();
    a.release(&i.instance_id, None).await.unwrap();
    a.destroy(&i.instance_id).await.unwrap();
    i.instance_id
}

/// 100,000 lifecycles (provision, activate, release, destroy) leave at
/// most [`ENDED_RECORDS_KEPT`] records: the newest ended ids still answer
/// a late call with the conflict naming their state, the oldest are
/// forgotten and answer `SandboxInstanceNotFound`.
#[tokio::test]
async fn records_stay_bounded_over_100000_lifecycles() {
    let h = Harness::new();
    let first = lifecycle(&h.adapter).await;
    let mut last = first.clone();
    for _ in 1..100_000 {
        last = lifecycle(&h.adapter).await;
        // The provider double keeps its call log; forget it as we go.
        h.provider.clear_calls();
    }
    let held = h.adapter.instances();
    assert_eq!(held.len(), ENDED_RECORDS_KEPT);
    assert!(held.iter().all(|(_, s)| *s == RecordState::Destroyed));
    let f = h.adapter.execute(&last, echo(&["x"])).await.unwrap_err();
    assert_conflict(only(&f), op::EXECUTE, "active", ConflictActual::Destroyed);
    let f = h.adapter.execute(&first, echo(&["x"])).await.unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxInstanceNotFound { instance_id: first }
    );
}

/// On a multi-threaded runtime the provider call's task may still be
/// finishing when its caller already has the result: the caller's next
/// lifecycle call on the instance must never find the finished call's
/// marker still set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_never_leaves_its_marker_behind() {
    let h = Harness::new();
    for _ in 0..2_000 {
        lifecycle(&h.adapter).await;
        h.provider.clear_calls();
    }
}
