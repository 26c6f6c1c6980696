//! Capability envelopes that break one cross-field rule or bound (`decode:SandboxProviderCapabilities`).

use super::*;

pub(super) fn envelope_invalid(v: &mut Vectors) {
    let min = || j(&caps_minimal());
    let full = || j(&caps_full());
    v.bad_envelope(
        "envelope-snapshot-clone-requires-snapshots",
        "snapshot_clone: true while snapshots is false: a clone source is a snapshot you produced.",
        set(min(), "/snapshot_clone", json!(true)),
        "snapshot_clone",
        EnvelopeRule::SnapshotCloneRequiresSnapshots,
        "accepts",
    );
    v.bad_envelope(
        "envelope-durable-requires-snapshots",
        "durable retention while snapshots is false.",
        set(
            min(),
            "/retention_modes",
            json!(["ephemeral_zdr", "durable"]),
        ),
        "retention_modes",
        EnvelopeRule::DurableRequiresSnapshots,
        "accepts",
    );
    v.bad_envelope(
        "envelope-provider-custody-requires-snapshots",
        "snapshot_custody: provider while snapshots is false.",
        set(min(), "/snapshot_custody", json!("provider")),
        "snapshot_custody",
        EnvelopeRule::ProviderCustodyRequiresSnapshots,
        "accepts",
    );
    v.bad_envelope(
        "envelope-allowlist-requires-egress-certification",
        "allowlist offered with egress_certification absent (unsupported).",
        remove(
            set(min(), "/network_modes", json!(["none", "allowlist"])),
            "/egress_certification",
        ),
        "egress_certification",
        EnvelopeRule::AllowlistRequiresEgressCertification,
        "accepts",
    );
    v.bad_envelope(
        "envelope-active-mount-write-requires-mounts",
        "active_mount_write: true with max_mounts 0.",
        set(min(), "/active_mount_write", json!(true)),
        "active_mount_write",
        EnvelopeRule::ActiveMountWriteRequiresMounts,
        "accepts",
    );
    v.bad_envelope(
        "envelope-max-mounts-over-bound",
        "max_mounts 65, one over the bound of 64.",
        set(full(), "/max_mounts", json!(65)),
        "max_mounts",
        EnvelopeRule::MaxMountsBound,
        "rejects",
    );
    v.bad_decode(
        "envelope-max-mounts-not-a-byte",
        "max_mounts 256 does not even decode.",
        "SandboxProviderCapabilities",
        set(full(), "/max_mounts", json!(256)),
        "max_mounts",
        "rejects",
    );
    for list in ["tiers", "platforms", "network_modes", "retention_modes"] {
        let name = format!("envelope-non-empty-{}", list.replace('_', "-"));
        v.bad_envelope(
            &name,
            &format!("{list} is empty."),
            set(full(), &format!("/{list}"), json!([])),
            list,
            EnvelopeRule::NonEmpty,
            "rejects",
        );
    }
    let dupes = [
        ("tiers", json!(["container", "container"])),
        (
            "platforms",
            json!([{"os": "linux", "architecture": "amd64"}, {"os": "linux", "architecture": "amd64"}]),
        ),
        ("network_modes", json!(["none", "none"])),
        ("retention_modes", json!(["ephemeral_zdr", "ephemeral_zdr"])),
        ("package_managers", json!(["apt", "pip", "apt"])),
    ];
    for (list, value) in dupes {
        let name = format!("envelope-no-duplicates-{}", list.replace('_', "-"));
        v.bad_envelope(
            &name,
            &format!("{list} repeats a member."),
            set(min(), &format!("/{list}"), value),
            list,
            EnvelopeRule::NoDuplicates,
            "rejects",
        );
    }
    for field in ["provider_revision", "materialization_revision"] {
        let name = format!("envelope-empty-{}", field.replace('_', "-"));
        v.bad_envelope(
            &name,
            &format!("{field} is empty; instances must echo it."),
            set(min(), &format!("/{field}"), json!("")),
            field,
            EnvelopeRule::RevisionNonEmpty,
            "rejects",
        );
    }
    v.bad_decode(
        "envelope-unknown-field",
        "An envelope member the revision does not define.",
        "SandboxProviderCapabilities",
        set(min(), "/gpu", json!(true)),
        "gpu",
        "rejects",
    );
    v.bad_decode(
        "envelope-unknown-enforcement-axis",
        "A tenth enforcement axis, nested.",
        "SandboxProviderCapabilities",
        set(min(), "/enforcement/gpu", json!("not_enforced")),
        "enforcement.gpu",
        "rejects",
    );
    v.bad_decode(
        "envelope-missing-enforcement-axis",
        "An enforcement axis absent: all nine are required.",
        "SandboxProviderCapabilities",
        remove(min(), "/enforcement/privilege"),
        "enforcement.privilege",
        "rejects",
    );
    v.bad_decode(
        "envelope-unknown-egress-grade",
        "egress_certification outside its closed set.",
        "SandboxProviderCapabilities",
        set(min(), "/egress_certification", json!("best_effort")),
        "egress_certification",
        "rejects",
    );
}
