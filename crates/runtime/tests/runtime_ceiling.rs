//! Enrollment ceilings: declared envelope ∩ ceiling (including
//! `enforcement` and `egress_certification`), selection on the
//! intersection, cut claims reported, a drifted live envelope refused
//! (spec "From adapter to qualified provider").

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::ceiling::{intersect, EnforcementCeiling};
use checkfu_sandbox_runtime::{Ceiling, Requirements, SandboxRuntime};
use support::*;

fn enforced_allowlist() -> Requirements {
    let mut profile = profile(RetentionMode::EphemeralZdr);
    profile.network_policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "example.test".into(),
            port: 443,
        }],
    };
    let mut needs = Requirements::for_profile(
        &profile,
        Tier::Container,
        Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        mounts(),
    );
    needs.minimum_egress = EgressCertification::Enforced;
    needs
}

fn advisory_ceiling() -> Ceiling {
    Ceiling {
        egress_certification: Some(EgressCertification::AdvisoryFilter),
        ..Ceiling::default()
    }
}

#[test]
fn enforced_egress_under_an_advisory_ceiling_is_not_selected_for_enforced() {
    let clock = ManualClock::new(t0());
    let mut rt = SandboxRuntime::new(Arc::new(clock.clone()));
    let provider = double(PROVIDER, clock, full_envelope());
    let cuts = rt
        .register_enrolled(provider, &full_envelope(), &advisory_ceiling())
        .unwrap();
    assert_eq!(cuts.len(), 1, "{cuts:?}");
    assert_eq!(cuts[0].field, "egress_certification");
    assert_eq!(cuts[0].declared, "\"enforced\"");
    assert_eq!(cuts[0].kept, "\"advisory_filter\"");
    let f = rt.select(&enforced_allowlist()).unwrap_err();
    match only(&f) {
        SandboxError::SandboxAdapterUnavailable { adapters, invalid } => {
            assert!(invalid.is_empty());
            assert_eq!(adapters.len(), 1);
            assert_eq!(adapters[0].provider, PROVIDER);
            assert_eq!(adapters[0].unmet, vec![Requirement::NetworkPolicy]);
        }
        other => panic!("{other}"),
    }
    // The same provider registered without the ceiling is selected: the
    // refusal is the ceiling's doing.
    let clock = ManualClock::new(t0());
    let mut plain = SandboxRuntime::new(Arc::new(clock.clone()));
    plain.register(double(PROVIDER, clock, full_envelope()));
    assert!(plain.select(&enforced_allowlist()).is_ok());
}

#[test]
fn an_advisory_filter_profile_still_selects_under_the_advisory_ceiling() {
    let clock = ManualClock::new(t0());
    let mut rt = SandboxRuntime::new(Arc::new(clock.clone()));
    rt.register_enrolled(
        double(PROVIDER, clock, full_envelope()),
        &full_envelope(),
        &advisory_ceiling(),
    )
    .unwrap();
    let mut needs = enforced_allowlist();
    needs.minimum_egress = EgressCertification::AdvisoryFilter;
    let adapter = rt.select(&needs).unwrap();
    assert_eq!(
        adapter.envelope().egress_certification,
        EgressCertification::AdvisoryFilter
    );
}

#[test]
fn a_drifted_live_envelope_is_refused_naming_the_field() {
    let clock = ManualClock::new(t0());
    let mut rt = SandboxRuntime::new(Arc::new(clock.clone()));
    let provider = double(PROVIDER, clock, full_envelope());
    provider.set_envelope(|e| e.enforcement.network = EnforcementLevel::NotEnforced);
    let err = rt
        .register_enrolled(provider, &full_envelope(), &Ceiling::default())
        .unwrap_err();
    assert_eq!(
        err,
        SandboxError::protocol(
            Operation::EnrolledEnvelope,
            "enforcement.network",
            "\"provider_enforced\"",
            "\"not_enforced\""
        )
    );
    assert!(rt.select(&enforced_allowlist()).is_err());
}

#[test]
fn enforcement_axes_above_the_ceiling_are_cut_to_not_enforced() {
    let ceiling = Ceiling {
        enforcement: Some(EnforcementCeiling {
            memory: Some(EnforcementLevel::NotEnforced),
            network: Some(EnforcementLevel::ProviderEnforced),
            ..EnforcementCeiling::default()
        }),
        ..Ceiling::default()
    };
    let (kept, cuts) = intersect(&full_envelope(), &ceiling).unwrap();
    assert_eq!(kept.enforcement.memory, EnforcementLevel::NotEnforced);
    assert_eq!(kept.enforcement.network, EnforcementLevel::ProviderEnforced);
    let fields: Vec<&str> = cuts.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, vec!["enforcement.memory"]);
}

#[test]
fn cutting_snapshots_also_cuts_snapshot_clone() {
    let ceiling = Ceiling {
        snapshots: Some(false),
        retention_modes: Some(vec![RetentionMode::EphemeralZdr]),
        ..Ceiling::default()
    };
    let (kept, cuts) = intersect(&full_envelope(), &ceiling).unwrap();
    assert!(!kept.snapshots && !kept.snapshot_clone);
    let fields: Vec<&str> = cuts.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        vec!["retention_modes", "snapshots", "snapshot_clone"]
    );
}

#[test]
fn a_claim_that_cannot_be_cut_down_is_refused_naming_the_field() {
    let ceiling = Ceiling {
        tiers: Some(vec![Tier::Microvm]),
        ..Ceiling::default()
    };
    let err = intersect(&full_envelope(), &ceiling).unwrap_err();
    assert_eq!(
        err,
        SandboxError::protocol(
            Operation::EnrollmentCeiling,
            "tiers",
            "a subset of [\"microvm\"]",
            "[\"container\"]"
        )
    );
    let placement = Ceiling {
        placement: Some(Placement::Hosted),
        ..Ceiling::default()
    };
    let err = intersect(&full_envelope(), &placement).unwrap_err();
    assert!(
        matches!(&err, SandboxError::SandboxProtocolInvalid { field, .. } if field == "placement"),
        "{err}"
    );
}
