//! Which conformance case catches each memory-oracle fault. The test
//! `conformance_faults` runs the suite once per fault and checks this
//! table, so it cannot drift from what the suite really does.

/// The case id (or runtime rule) that catches the named fault.
pub fn caught_by(fault_name: &str) -> &'static str {
    match CAUGHT_BY.iter().find(|(name, _)| *name == fault_name) {
        Some((_, by)) => by,
        None => "not yet recorded",
    }
}

/// (fault name, catching case id) for every fault.
pub const CAUGHT_BY: &[(&str, &str)] = &[
    ("identity-provider", "stage-seal-execute"),
    ("identity-placement", "stage-seal-execute"),
    ("identity-state", "stage-seal-execute"),
    ("identity-workspace-id", "stage-seal-execute"),
    ("identity-session-id", "stage-seal-execute"),
    ("identity-run-id", "stage-seal-execute"),
    ("identity-attempt-id", "stage-seal-execute"),
    ("identity-lease-id", "stage-seal-execute"),
    ("identity-lease-epoch", "stage-seal-execute"),
    ("identity-target", "stage-seal-execute"),
    ("identity-profile", "stage-seal-execute"),
    ("identity-platform", "stage-seal-execute"),
    ("identity-root-image", "stage-seal-execute"),
    ("identity-mounts", "stage-seal-execute"),
    ("identity-output-path", "stage-seal-execute"),
    ("identity-expires-at", "stage-seal-execute"),
    (
        "identity-materialization-profile-digest",
        "stage-seal-execute",
    ),
    (
        "identity-materialization-image-reference",
        "stage-seal-execute",
    ),
    (
        "identity-materialization-image-digest",
        "stage-seal-execute",
    ),
    (
        "identity-materialization-provider-revision",
        "stage-seal-execute",
    ),
    (
        "identity-materialization-materialization-revision",
        "stage-seal-execute",
    ),
    ("snapshot-expiry-replaced", "checkpoint-clone"),
    ("snapshot-source-mismatch", "checkpoint-clone"),
    ("clone-reuses-source-id", "checkpoint-clone"),
    ("clone-moves-expiry", "checkpoint-clone"),
    ("clone-predates-source", "checkpoint-clone"),
    ("exit-two-causes", "stage-seal-execute"),
    ("exit-no-cause", "stage-seal-execute"),
    ("output-over-limit", "stage-seal-execute"),
    ("textual-containment", "stage-seal-execute"),
    ("list-project-dir-drops-special", "stage-seal-execute"),
    ("list-project-dir-incomplete", "stage-seal-execute"),
    ("cleanup-ignores-pin", "pause-pinning"),
    ("cleanup-keeps-expired-pin", "pause-pinning"),
    ("released-on-zdr", "stage-seal-execute"),
    ("destroyed-on-durable", "durable-round-trip"),
    ("rollback-derives-from-value", "orphan-reclaim"),
    ("rollback-not-idempotent", "orphan-reclaim"),
    ("rollback-hangs", "orphan-reclaim"),
    ("network-none-reaches-listener", "none-egress"),
    ("allowlist-ignored", "allowlist-egress"),
    ("second-open-process-allowed", "stage-seal-execute"),
    ("stdin-eof-never-delivered", "stage-seal-execute"),
    ("process-evidence-mismatch", "stage-seal-execute"),
    ("list-dir-member-absent", "stage-seal-execute"),
    ("read-files-out-of-order", "stage-seal-execute"),
    ("read-files-over-budget", "stage-seal-execute"),
    ("non-monotonic-interval", "stage-seal-execute"),
    ("process-starts-at-expiry", "stage-seal-execute"),
    ("envelope-drifts", "stage-seal-execute"),
    ("seal-ignored", "stage-seal-execute"),
    ("active-write-marker-skipped", "stage-seal-execute"),
    ("active-write-abort-ignored", "stage-seal-execute"),
    ("active-write-redelivery-differs", "stage-seal-execute"),
    ("active-write-redelivery-reapplied", "stage-seal-execute"),
    ("active-write-partial-publish", "stage-seal-execute"),
    ("active-write-shallow-mount", "stage-seal-execute"),
    ("active-write-foreign-pause-resumed", "stage-seal-execute"),
    ("active-write-zdr-body-accepted", "stage-seal-execute"),
    (
        "active-write-indeterminate-undispatched",
        "stage-seal-execute",
    ),
];
