//! cleanup: the cutoff, the pin bound, swept instances recorded destroyed,
//! and the result's shape (spec "Cleanup and pinning", "Bounds"). Which
//! snapshots a pin keeps is the provider's rule, tested on the memory
//! oracle (`memory_lifecycle::cleanup_honours_the_pin_rule_both_ways`);
//! the runtime's check of a swept pin is in `runtime_audit`.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::RecordState;
use support::*;

#[tokio::test]
async fn orphaned_before_after_now_is_refused_before_the_call() {
    let h = Harness::new();
    let f = h
        .adapter
        .cleanup(t0(), t0().add_millis(1), vec![])
        .await
        .unwrap_err();
    assert_invalid(
        only(&f),
        op::CLEANUP,
        "orphaned_before",
        &format!("at or before now ({T0})"),
        &t0().add_millis(1).to_string(),
    );
    assert!(h.provider.calls().is_empty());
}

#[tokio::test]
async fn more_than_1024_pins_are_refused_before_the_call() {
    let h = Harness::new();
    let pins: Vec<String> = (0..1025).map(|n| format!("snap-{n}")).collect();
    let f = h.adapter.cleanup(t0(), t0(), pins).await.unwrap_err();
    assert_invalid(
        only(&f),
        op::CLEANUP,
        "pinned_snapshots",
        "at most 1024",
        "1025",
    );
    assert!(h.provider.calls().is_empty());
    let pins: Vec<String> = (0..1024).map(|n| format!("snap-{n}")).collect();
    h.adapter.cleanup(t0(), t0(), pins.clone()).await.unwrap();
    assert_eq!(h.provider.cleanup_requests()[0].pinned_snapshots, pins);
}

#[tokio::test]
async fn swept_instances_are_recorded_destroyed() {
    let h = Harness::new();
    let i = h.active(RetentionMode::EphemeralZdr).await;
    h.clock.advance_seconds(10);
    let now = h.clock.now();
    let r = h.adapter.cleanup(now, now, vec![]).await.unwrap();
    assert_eq!(r.instances, vec![i.instance_id.clone()]);
    assert_eq!(
        h.adapter.instances(),
        vec![(i.instance_id.clone(), RecordState::Destroyed)]
    );
    let f = h
        .adapter
        .execute(&i.instance_id, echo(&["x"]))
        .await
        .unwrap_err();
    assert_conflict(only(&f), op::EXECUTE, "active", ConflictActual::Destroyed);
}

#[tokio::test]
async fn cleanup_result_repeating_an_instance_id_is_a_protocol_error() {
    let h = Harness::new();
    h.provider
        .on_cleanup(|r| r.instances = vec!["inst-9".into(), "inst-9".into()]);
    let f = h.adapter.cleanup(t0(), t0(), vec![]).await.unwrap_err();
    assert_protocol(
        only(&f),
        op::CLEANUP,
        "instances",
        "each id once",
        "inst-9 repeated",
    );
}
