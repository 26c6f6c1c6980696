//! Selection: exactly one adapter, the closed requirement vocabulary, the
//! mount plan, and envelopes refused at decode (spec "Errors", "Optional
//! capabilities", "Paths, mounts", operations table row capabilities;
//! DESIGN D12, D13).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::{Requirements, SandboxRuntime};
use support::*;

fn needs() -> Requirements {
    Requirements::for_profile(
        &profile(RetentionMode::EphemeralZdr),
        Tier::Container,
        Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        mounts(),
    )
}

fn runtime_with(envelopes: Vec<(&str, SandboxProviderCapabilities)>) -> SandboxRuntime {
    let clock = ManualClock::new(t0());
    let mut rt = SandboxRuntime::new(Arc::new(clock.clone()));
    for (id, env) in envelopes {
        rt.register(double(id, clock.clone(), env));
    }
    rt
}

/// The requirements one adapter with `env` fails for `needs`.
fn unmet_of(
    env: impl FnOnce(&mut SandboxProviderCapabilities),
    req: impl FnOnce(&mut Requirements),
) -> Vec<Requirement> {
    let mut e = full_envelope();
    env(&mut e);
    let mut n = needs();
    req(&mut n);
    let rt = runtime_with(vec![(PROVIDER, e)]);
    let f = rt.select(&n).unwrap_err();
    match only(&f) {
        SandboxError::SandboxAdapterUnavailable { adapters, invalid } => {
            assert!(invalid.is_empty(), "{invalid:?}");
            assert_eq!(adapters.len(), 1);
            assert_eq!(adapters[0].provider, PROVIDER);
            adapters[0].unmet.clone()
        }
        other => panic!("{other}"),
    }
}

#[test]
fn selects_the_only_fitting_adapter() {
    let mut zdr_only = full_envelope();
    zdr_only.tiers = vec![Tier::Microvm];
    let rt = runtime_with(vec![("a", full_envelope()), ("b", zdr_only)]);
    assert_eq!(rt.select(&needs()).unwrap().provider_id(), "a");
}

#[test]
fn no_fitting_adapter_is_adapter_unavailable_naming_each() {
    let mut micro = full_envelope();
    micro.tiers = vec![Tier::Microvm];
    let mut arm = full_envelope();
    arm.platforms[0].architecture = Architecture::Arm64;
    arm.tiers = vec![Tier::Microvm];
    let rt = runtime_with(vec![("a", micro), ("b", arm)]);
    let f = rt.select(&needs()).unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxAdapterUnavailable {
            adapters: vec![
                UnmetAdapter {
                    provider: "a".into(),
                    unmet: vec![Requirement::Tier],
                },
                UnmetAdapter {
                    provider: "b".into(),
                    unmet: vec![Requirement::Tier, Requirement::Platform],
                },
            ],
            invalid: vec![],
        }
    );
}

#[test]
fn no_adapters_registered_is_adapter_unavailable() {
    let rt = runtime_with(vec![]);
    let f = rt.select(&needs()).unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxAdapterUnavailable {
            adapters: vec![],
            invalid: vec![],
        }
    );
    let f = rt.adapter("nobody").unwrap_err();
    assert_eq!(only(&f).tag(), "SandboxAdapterUnavailable");
}

#[test]
fn two_fitting_adapters_are_ambiguous() {
    let rt = runtime_with(vec![("a", full_envelope()), ("b", full_envelope())]);
    let f = rt.select(&needs()).unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxAdapterAmbiguous {
            candidates: vec!["a".into(), "b".into()],
        }
    );
}

#[test]
fn unmet_tier() {
    assert_eq!(
        unmet_of(|_| {}, |n| n.tier = Tier::Microvm),
        [Requirement::Tier]
    );
}

#[test]
fn unmet_platform() {
    assert_eq!(
        unmet_of(|_| {}, |n| n.platform.architecture = Architecture::Arm64),
        [Requirement::Platform]
    );
}

#[test]
fn unmet_packages() {
    assert_eq!(
        unmet_of(
            |_| {},
            |n| {
                n.package_managers.insert(PackageManager::Npm);
            }
        ),
        [Requirement::Packages]
    );
}

#[test]
fn unmet_network_mode_not_offered() {
    // A `none` profile never selects a provider that does not offer none.
    assert_eq!(
        unmet_of(|e| e.network_modes = vec![NetworkMode::Allowlist], |_| {}),
        [Requirement::NetworkPolicy]
    );
}

fn allowlist() -> NetworkPolicy {
    NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "api.example.test".into(),
            port: 443,
        }],
    }
}

#[test]
fn unmet_egress_unsupported_for_allowlist() {
    assert_eq!(
        unmet_of(
            |e| {
                e.network_modes = vec![NetworkMode::None];
                e.egress_certification = EgressCertification::Unsupported;
            },
            |n| n.network_policy = allowlist()
        ),
        [Requirement::NetworkPolicy]
    );
}

#[test]
fn unmet_egress_grade_below_the_policys_minimum() {
    assert_eq!(
        unmet_of(
            |e| e.egress_certification = EgressCertification::AdvisoryFilter,
            |n| {
                n.network_policy = allowlist();
                n.minimum_egress = EgressCertification::Enforced;
            }
        ),
        [Requirement::NetworkPolicy]
    );
}

#[test]
fn unmet_malformed_allowlist_policy_shape() {
    for (host, port) in [("api.example.test", 0), ("", 443), ("a b", 443)] {
        let unmet = unmet_of(
            |_| {},
            |n| {
                n.network_policy = NetworkPolicy::Allowlist {
                    destinations: vec![NetworkDestination {
                        host: host.into(),
                        port,
                    }],
                }
            },
        );
        assert_eq!(unmet, [Requirement::NetworkPolicy], "{host}:{port}");
    }
}

#[test]
fn unmet_retention() {
    assert_eq!(
        unmet_of(
            |e| e.retention_modes = vec![RetentionMode::EphemeralZdr],
            |n| n.retention = RetentionMode::Durable
        ),
        [Requirement::Retention]
    );
}

#[test]
fn durable_never_selects_a_provider_without_snapshots() {
    assert_eq!(
        unmet_of(
            |e| {
                e.snapshots = false;
                e.snapshot_clone = false;
                e.retention_modes = vec![RetentionMode::EphemeralZdr];
            },
            |n| n.retention = RetentionMode::Durable
        ),
        [Requirement::Retention, Requirement::Snapshots]
    );
}

#[test]
fn unmet_resources_nobody_enforces() {
    assert_eq!(
        unmet_of(
            |e| e.enforcement.memory = EnforcementLevel::NotEnforced,
            |n| n.resources.memory_bytes = Some(1 << 30)
        ),
        [Requirement::Resources]
    );
}

#[test]
fn unmet_mounts_over_the_envelopes_max_mounts() {
    assert_eq!(
        unmet_of(|e| e.max_mounts = 2, |_| {}),
        [Requirement::Mounts]
    );
}

#[test]
fn unmet_physically_contained_file_read() {
    assert_eq!(
        unmet_of(
            |e| e.physically_contained_file_read = false,
            |n| n.physically_contained_file_read = true
        ),
        [Requirement::PhysicallyContainedFileRead]
    );
}

#[test]
fn unmet_active_mount_write() {
    assert_eq!(
        unmet_of(
            |e| e.active_mount_write = false,
            |n| n.active_mount_write = true
        ),
        [Requirement::ActiveMountWrite]
    );
}

#[test]
fn unmet_snapshot_clone() {
    assert_eq!(
        unmet_of(|e| e.snapshot_clone = false, |n| n.snapshot_clone = true),
        [Requirement::SnapshotClone]
    );
}

// ---- the mount plan, refused at selection ----

fn plan_refusal(plan: Vec<SandboxMount>) -> String {
    let rt = runtime_with(vec![(PROVIDER, full_envelope())]);
    let mut n = needs();
    n.mounts = plan;
    let f = rt.select(&n).unwrap_err();
    match only(&f) {
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::Mounts,
            detail,
        } => detail.clone(),
        other => panic!("expected SandboxCapabilityUnavailable{{mounts}}, got {other}"),
    }
}

fn rw(path: &str) -> SandboxMount {
    SandboxMount {
        path: path.into(),
        access: MountAccess::ReadWrite,
    }
}

#[test]
fn mount_inside_each_reserved_root_is_refused() {
    for root in [
        "/dev",
        "/proc",
        "/run",
        "/sys",
        "/tmp",
        "/home/checkfu",
        "/workspace/.checkfu",
        "/mnt/session/outputs",
    ] {
        for path in [root.to_string(), format!("{root}/inner")] {
            let detail = plan_refusal(vec![rw(&path)]);
            assert_eq!(
                detail,
                format!(
                    "mounts[0].path: expected a path that does not overlap the reserved root {root}, actual {path:?}"
                )
            );
        }
    }
}

#[test]
fn mount_containing_a_reserved_root_is_refused() {
    // /workspace would shadow the provider-owned /workspace/.checkfu.
    for (path, root) in [
        ("/workspace", "/workspace/.checkfu"),
        ("/mnt/session", "/mnt/session/outputs"),
        ("/home", "/home/checkfu"),
    ] {
        assert_eq!(
            plan_refusal(vec![rw(path)]),
            format!(
                "mounts[0].path: expected a path that does not overlap the reserved root {root}, actual {path:?}"
            )
        );
    }
}

#[test]
fn conflicting_mount_paths_are_refused() {
    assert_eq!(
        plan_refusal(vec![rw("/a"), rw("/b"), rw("/a")]),
        "mounts[2].path: expected a path not already declared by mounts[0], actual \"/a\""
    );
}

#[test]
fn mount_plan_over_64_is_refused() {
    let plan: Vec<_> = (0..65).map(|i| rw(&format!("/m{i}"))).collect();
    assert_eq!(
        plan_refusal(plan),
        "mounts: expected at most 64 mounts, actual 65"
    );
    let ok: Vec<_> = (0..64).map(|i| rw(&format!("/m{i}"))).collect();
    let rt = runtime_with(vec![(PROVIDER, full_envelope())]);
    let mut n = needs();
    n.mounts = ok;
    rt.select(&n).unwrap();
}

#[test]
fn malformed_mount_paths_are_refused() {
    for (path, expected) in [
        ("/", "a path that does not overlap the reserved root /dev"),
        ("relative", "an absolute path"),
        ("/a/../b", "a path without . or .. components"),
        ("/a/", "a path without a trailing /"),
        ("/a//b", "a path without empty components"),
    ] {
        assert_eq!(
            plan_refusal(vec![rw(path)]),
            format!("mounts[0].path: expected {expected}, actual {path:?}")
        );
    }
}

// ---- envelopes refused at decode: registered, never selected ----

fn refused_envelope(
    env: impl FnOnce(&mut SandboxProviderCapabilities),
    field: &str,
    rule: &str,
    actual: &str,
) {
    let mut bad = full_envelope();
    env(&mut bad);
    let rt = runtime_with(vec![("bad", bad), ("good", full_envelope())]);
    // The bad adapter is never a candidate, so the good one is selected
    // without ambiguity.
    assert_eq!(rt.select(&needs()).unwrap().provider_id(), "good");
    let f = rt.adapter("bad").unwrap_err();
    match only(&f) {
        SandboxError::SandboxProtocolInvalid {
            operation,
            field: got,
            expected,
            actual: a,
        } => {
            assert_eq!(operation, "decode_capabilities");
            assert_eq!(got, field);
            assert!(expected.starts_with(&format!("{rule}: ")), "{expected}");
            assert_eq!(a, actual);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn envelope_clone_without_snapshots_is_refused() {
    refused_envelope(
        |e| {
            e.snapshots = false;
            e.retention_modes = vec![RetentionMode::EphemeralZdr];
        },
        "snapshot_clone",
        "snapshot_clone_requires_snapshots",
        "true",
    );
}

#[test]
fn envelope_durable_without_snapshots_is_refused() {
    refused_envelope(
        |e| {
            e.snapshots = false;
            e.snapshot_clone = false;
        },
        "retention_modes",
        "durable_requires_snapshots",
        "durable",
    );
}

#[test]
fn envelope_provider_custody_without_snapshots_is_refused() {
    refused_envelope(
        |e| {
            e.snapshots = false;
            e.snapshot_clone = false;
            e.retention_modes = vec![RetentionMode::EphemeralZdr];
            e.snapshot_custody = SnapshotCustody::Provider;
        },
        "snapshot_custody",
        "provider_custody_requires_snapshots",
        "provider",
    );
}

#[test]
fn envelope_allowlist_without_egress_certification_is_refused() {
    refused_envelope(
        |e| e.egress_certification = EgressCertification::Unsupported,
        "egress_certification",
        "allowlist_requires_egress_certification",
        "unsupported",
    );
}

#[test]
fn envelope_active_mount_write_without_mounts_is_refused() {
    refused_envelope(
        |e| e.max_mounts = 0,
        "active_mount_write",
        "active_mount_write_requires_mounts",
        "true",
    );
}

#[test]
fn envelope_max_mounts_over_64_is_refused() {
    refused_envelope(
        |e| e.max_mounts = 65,
        "max_mounts",
        "max_mounts_bound",
        "65",
    );
}

#[test]
fn envelope_empty_tiers_is_refused() {
    refused_envelope(|e| e.tiers.clear(), "tiers", "non_empty", "[]");
}

#[test]
fn envelope_duplicate_network_modes_is_refused() {
    refused_envelope(
        |e| e.network_modes = vec![NetworkMode::None, NetworkMode::None],
        "network_modes",
        "no_duplicates",
        "2 members with a repeat",
    );
}

#[test]
fn envelope_empty_revision_is_refused() {
    refused_envelope(
        |e| e.provider_revision.clear(),
        "provider_revision",
        "revision_non_empty",
        "\"\"",
    );
}

#[test]
fn invalid_envelopes_are_named_when_nothing_fits() {
    let mut bad = full_envelope();
    bad.tiers.clear();
    let rt = runtime_with(vec![("bad", bad)]);
    let f = rt.select(&needs()).unwrap_err();
    assert_eq!(
        only(&f),
        &SandboxError::SandboxAdapterUnavailable {
            adapters: vec![],
            invalid: vec!["bad".into()],
        }
    );
}
