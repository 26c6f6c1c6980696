//! The contract extensions behind the runtime's checks (decision
//! 010): resolveImage answers are checked, the
//! cleanup dry run applies the contract's rule to the provider's inventory
//! and removes nothing, and the rollback probe provisions through the
//! handoff guard (decision 009).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::sync::Arc;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};
use support::*;

fn adapter_over(provider: Arc<dyn SandboxProvider>, clock: &ManualClock) -> Adapter {
    let mut runtime = SandboxRuntime::new(Arc::new(clock.clone()));
    runtime.register(provider.clone());
    runtime.adapter(provider.provider_id()).unwrap()
}

fn memory() -> (MemoryProvider, ManualClock, Adapter) {
    let clock = ManualClock::new(t0());
    let memory = MemoryProvider::new(clock.clone());
    let adapter = adapter_over(Arc::new(memory.clone()), &clock);
    (memory, clock, adapter)
}

/// The memory oracle whose resolveImage answers `image` and whose
/// cleanupInventory answers `inventory`, each member hidden when `None`.
fn answering(image: Option<&str>, inventory: Option<CleanupInventory>) -> Adapter {
    let clock = ManualClock::new(t0());
    let provider = Hooked::new(MemoryProvider::new(clock.clone()));
    match image {
        Some(pin) => {
            let pin = pin.to_owned();
            provider.on(op::RESOLVE_IMAGE, move |s: &mut String| *s = pin.clone());
        }
        None => provider.hide(op::RESOLVE_IMAGE),
    }
    match inventory {
        Some(inventory) => provider.on(op::CLEANUP_INVENTORY, move |i: &mut CleanupInventory| {
            *i = inventory.clone()
        }),
        None => provider.hide(op::CLEANUP_INVENTORY),
    }
    adapter_over(Arc::new(provider), &clock)
}

const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn protocol_field(f: &SandboxFailure) -> (Operation, String) {
    match &f.causes().collect::<Vec<_>>()[..] {
        [SandboxError::SandboxProtocolInvalid {
            operation, field, ..
        }] => (*operation, field.clone()),
        other => panic!("expected one protocol failure, got {other:?}"),
    }
}

#[tokio::test]
async fn the_memory_oracle_pins_a_tag_to_the_digest_of_its_text() {
    let (_, _, adapter) = memory();
    let pinned = adapter.resolve_image("demo:1").await.unwrap();
    assert_eq!(pinned.name(), "demo");
    assert_eq!(adapter.resolve_image("demo:1").await.unwrap(), pinned);
    assert_ne!(adapter.resolve_image("demo:2").await.unwrap(), pinned);
    let given = format!("demo@sha256:{HEX}");
    assert_eq!(adapter.resolve_image(&given).await.unwrap().as_str(), given);
}

#[tokio::test]
async fn a_malformed_or_foreign_pin_is_a_protocol_failure() {
    for (answer, input) in [
        ("demo@sha256:abc".to_owned(), "demo:1"),
        (format!("demo@sha256:{}", HEX.to_uppercase()), "demo:1"),
        (format!("other@sha256:{HEX}"), "demo:1"),
        (
            format!("demo@sha256:{HEX}"),
            &format!("demo@sha256:{}", "f".repeat(64)),
        ),
    ] {
        let adapter = answering(Some(&answer), None);
        let f = adapter.resolve_image(input).await.unwrap_err();
        assert_eq!(
            protocol_field(&f),
            (op::RESOLVE_IMAGE, "reference".to_owned()),
            "{answer} for {input}"
        );
    }
    let adapter = answering(Some(&format!("demo@sha256:{HEX}")), None);
    assert!(adapter.resolve_image("demo:1").await.is_ok());
}

#[tokio::test]
async fn an_image_id_pins_to_any_name_with_its_own_digest_only() {
    let id = format!("sha256:{HEX}");
    let adapter = answering(Some(&format!("checkfu-fixture@sha256:{HEX}")), None);
    assert_eq!(
        adapter.resolve_image(&id).await.unwrap().as_str(),
        format!("checkfu-fixture@sha256:{HEX}")
    );
    let other = "f".repeat(64);
    let adapter = answering(Some(&format!("checkfu-fixture@sha256:{other}")), None);
    let f = adapter.resolve_image(&id).await.unwrap_err();
    assert_eq!(
        protocol_field(&f),
        (op::RESOLVE_IMAGE, "reference".to_owned())
    );
}

#[tokio::test]
async fn the_memory_oracle_pins_every_accepted_form() {
    let (_, _, adapter) = memory();
    // A bare image ID keeps its own hex, under the fixture's repository.
    let pinned = adapter
        .resolve_image(&format!("sha256:{HEX}"))
        .await
        .unwrap();
    assert_eq!(pinned.as_str(), format!("checkfu-fixture@sha256:{HEX}"));
    // A registry port stays in the name; the tag is the part after it.
    let pinned = adapter.resolve_image("host:5000/demo:1").await.unwrap();
    assert_eq!(pinned.name(), "host:5000/demo");
    let pinned = adapter.resolve_image("host:5000/demo").await.unwrap();
    assert_eq!(pinned.name(), "host:5000/demo");
}

#[tokio::test]
async fn the_memory_oracle_refuses_a_malformed_reference_as_unavailable() {
    let (_, _, adapter) = memory();
    for input in ["", "a b", "demo@sha256:abc", "Demo:1", ":1"] {
        let f = adapter.resolve_image(input).await.unwrap_err();
        assert!(
            matches!(
                &f.causes().collect::<Vec<_>>()[..],
                [SandboxError::SandboxCapabilityUnavailable {
                    requirement: Requirement::BaseImage,
                    detail,
                }] if detail.contains(&format!("{input:?}"))
            ),
            "{input:?}: {f}"
        );
    }
}

#[tokio::test]
async fn a_malformed_image_id_is_refused_before_the_provider_answers() {
    // The provider would answer a name `sha256` with a tag; the runtime
    // refuses the input itself, naming the field and both values.
    let adapter = answering(Some(&format!("sha256@sha256:{HEX}")), None);
    for input in ["sha256:abc", &format!("sha256:{}", HEX.to_uppercase())] {
        let f = adapter.resolve_image(input).await.unwrap_err();
        match &f.causes().collect::<Vec<_>>()[..] {
            [SandboxError::SandboxOperationFailed {
                operation,
                reason: FailureReason::InvalidRequest,
                field,
                expected,
                actual,
                ..
            }] => {
                assert_eq!(*operation, op::RESOLVE_IMAGE);
                assert_eq!(field.as_deref(), Some("reference"));
                assert!(expected
                    .as_deref()
                    .unwrap()
                    .contains("sha256:<64 lowercase hex>"));
                assert_eq!(actual.as_deref(), Some(input));
            }
            other => panic!("{input}: expected invalid_request, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn without_the_member_an_image_is_unavailable() {
    let adapter = answering(None, None);
    let f = adapter.resolve_image("demo:1").await.unwrap_err();
    assert!(
        matches!(
            &f.causes().collect::<Vec<_>>()[..],
            [SandboxError::SandboxCapabilityUnavailable {
                requirement: Requirement::BaseImage,
                ..
            }]
        ),
        "{f}"
    );
}

#[tokio::test]
async fn without_the_member_a_pinned_reference_passes_unchanged() {
    let adapter = answering(None, None);
    let pinned = format!("demo@sha256:{HEX}");
    let got = adapter.resolve_image(&pinned).await.expect("pinned");
    assert_eq!(got.as_str(), pinned);
}

#[tokio::test]
async fn the_dry_run_lists_what_cleanup_then_sweeps_and_removes_nothing() {
    let (memory, clock, adapter) = memory();
    let for_memory = || {
        let mut r = request_for(memory.provider_id(), RetentionMode::Durable);
        r.placement = adapter.envelope().placement;
        r
    };
    let old = adapter.provision(for_memory()).await.unwrap();
    clock.advance_seconds(3_600);
    let mut fresh = for_memory();
    fresh.lease_id = "lease-2".into();
    fresh.expires_at = clock.now().add_seconds(86_400);
    let fresh = adapter.provision(fresh).await.unwrap();
    let now = clock.now();
    let cutoff = now.add_seconds(-60);
    let would = adapter.cleanup_dry_run(now, cutoff, vec![]).await.unwrap();
    assert_eq!(would.instances, vec![old.instance_id.clone()]);
    assert!(would.snapshots.is_empty());
    assert_eq!(
        memory.live_instances().len(),
        2,
        "a dry run removes nothing"
    );
    let swept = adapter.cleanup(now, cutoff, vec![]).await.unwrap();
    assert_eq!(swept, would);
    assert_eq!(memory.live_instances(), vec![fresh.instance_id]);
}

#[tokio::test]
async fn the_dry_run_refuses_a_repeated_or_empty_id() {
    let c = |id: &str| SweepCandidate {
        id: id.into(),
        created_at: None,
        expires_at: None,
    };
    for (inventory, field) in [
        (
            CleanupInventory {
                instances: vec![c("a"), c("a")],
                snapshots: vec![],
            },
            "instances.id",
        ),
        (
            CleanupInventory {
                instances: vec![],
                snapshots: vec![c("")],
            },
            "snapshots.id",
        ),
    ] {
        let adapter = answering(None, Some(inventory));
        let f = adapter
            .cleanup_dry_run(t0(), t0(), vec![])
            .await
            .unwrap_err();
        assert_eq!(
            protocol_field(&f),
            (op::CLEANUP_INVENTORY, field.to_owned())
        );
    }
    let f = answering(None, None)
        .cleanup_dry_run(t0(), t0().add_millis(1), vec![])
        .await
        .unwrap_err();
    assert!(f.to_string().contains("orphaned_before"), "{f}");
}

#[tokio::test]
async fn a_probe_dropped_mid_provision_strands_nothing() {
    let h = Harness::new();
    let gate = h.provider.gate(op::PROVISION);
    tokio::select! {
        r = h.adapter.probe_rollback(request(RetentionMode::Durable)) => panic!("settled: {r:?}"),
        () = gate.entered.notified() => {}
    }
    gate.proceed.notify_one();
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
    assert_eq!(h.provider.count(op::PROVISION), 1);
    assert_eq!(h.provider.rollbacks(), 1);
    assert_eq!(h.provider.rollbacks_done(), 1);
    assert!(h.adapter.instances().is_empty());
}
