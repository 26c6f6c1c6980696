//! Pure identity cross-checks (spec "Identity is cross-checked, not
//! trusted"; DESIGN D7). The runtime calls these on every returned
//! instance, snapshot, clone and process evidence; the author kit's vectors
//! exercise them without a runtime.

use serde::Serialize;

use crate::bounds::OUTPUT_PATH;
use crate::capabilities::SandboxProviderCapabilities;
use crate::types::{
    InstanceState, SandboxInstance, SandboxProcessEvidence, SandboxProcessRequest,
    SandboxProvisionRequest, SandboxSnapshot,
};
use crate::Timestamp;

pub use crate::mismatch::Mismatch;

use crate::mismatch::show;

fn eq<T: Serialize + PartialEq>(out: &mut Vec<Mismatch>, field: &str, expected: &T, actual: &T) {
    if expected != actual {
        out.push(Mismatch::new(field, show(expected), show(actual)));
    }
}

/// The 21 instance identity checks, in the spec's order: every mismatch,
/// empty when the instance echoes the request.
///
/// `expected_state` is `provisioning` after provision and `active` after
/// activate and resume. Operation name for errors: `instance_identity`.
pub fn check_instance(
    request: &SandboxProvisionRequest,
    expected_state: InstanceState,
    envelope: &SandboxProviderCapabilities,
    returned: &SandboxInstance,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let m = &mut out;
    eq(m, "provider", &request.provider, &returned.provider);
    eq(m, "placement", &request.placement, &returned.placement);
    eq(m, "state", &expected_state, &returned.state);
    eq(
        m,
        "workspace_id",
        &request.workspace_id,
        &returned.workspace_id,
    );
    eq(m, "session_id", &request.session_id, &returned.session_id);
    eq(m, "run_id", &request.run_id, &returned.run_id);
    eq(m, "attempt_id", &request.attempt_id, &returned.attempt_id);
    eq(m, "lease_id", &request.lease_id, &returned.lease_id);
    eq(
        m,
        "lease_epoch",
        &request.lease_epoch,
        &returned.lease_epoch,
    );
    eq(m, "target", &request.target, &returned.target);
    eq(m, "profile", &request.profile, &returned.profile);
    eq(m, "platform", &request.platform, &returned.platform);
    eq(m, "root_image", &request.root_image, &returned.root_image);
    eq(m, "mounts", &request.mounts, &returned.mounts);
    eq(
        m,
        "output_path",
        &OUTPUT_PATH.to_string(),
        &returned.output_path,
    );
    eq(m, "expires_at", &request.expires_at, &returned.expires_at);
    let mat = &returned.materialization;
    eq(
        m,
        "materialization.profile_digest",
        &request.profile.profile_digest,
        &mat.profile_digest,
    );
    eq(
        m,
        "materialization.image_reference",
        &request.root_image,
        &mat.image_reference,
    );
    eq(
        m,
        "materialization.image_digest",
        &request.root_image.digest(),
        &mat.image_digest,
    );
    eq(
        m,
        "materialization.provider_revision",
        &envelope.provider_revision,
        &mat.provider_revision,
    );
    eq(
        m,
        "materialization.materialization_revision",
        &envelope.materialization_revision,
        &mat.materialization_revision,
    );
    if returned.instance_id.is_empty() || returned.instance_id.len() > 128 {
        m.push(Mismatch::new(
            "instance_id",
            "a non-empty id of at most 128 bytes",
            show(&returned.instance_id),
        ));
    }
    out
}

/// The snapshot identity checks: the snapshot must agree with its source
/// instance and carry exactly the requested `expires_at`. Operation name:
/// `snapshot_identity`.
pub fn check_snapshot(
    source: &SandboxInstance,
    requested_expires_at: &Timestamp,
    returned: &SandboxSnapshot,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let m = &mut out;
    eq(m, "provider", &source.provider, &returned.provider);
    eq(m, "placement", &source.placement, &returned.placement);
    eq(
        m,
        "source_instance_id",
        &source.instance_id,
        &returned.source_instance_id,
    );
    eq(
        m,
        "workspace_id",
        &source.workspace_id,
        &returned.workspace_id,
    );
    eq(m, "session_id", &source.session_id, &returned.session_id);
    eq(
        m,
        "profile_id",
        &source.profile.profile_id,
        &returned.profile_id,
    );
    eq(
        m,
        "profile_version",
        &source.profile.profile_version,
        &returned.profile_version,
    );
    eq(
        m,
        "profile_digest",
        &source.profile.profile_digest,
        &returned.profile_digest,
    );
    eq(m, "expires_at", requested_expires_at, &returned.expires_at);
    if returned.snapshot_id.is_empty() || returned.snapshot_id.len() > 128 {
        m.push(Mismatch::new(
            "snapshot_id",
            "a non-empty id of at most 128 bytes",
            show(&returned.snapshot_id),
        ));
    }
    out
}

/// The clone checks: a new snapshot id, the target Session, the source's
/// `expires_at` byte-identical, `source.created_at <= created_at <
/// expires_at`, and the source's other identity fields. Operation name:
/// `clone_identity`.
pub fn check_clone(
    source: &SandboxSnapshot,
    target_session_id: &str,
    returned: &SandboxSnapshot,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let m = &mut out;
    if returned.snapshot_id == source.snapshot_id {
        m.push(Mismatch::new(
            "snapshot_id",
            format!(
                "an id other than the source's {}",
                show(&source.snapshot_id)
            ),
            show(&returned.snapshot_id),
        ));
    }
    if returned.snapshot_id.is_empty() || returned.snapshot_id.len() > 128 {
        m.push(Mismatch::new(
            "snapshot_id",
            "a non-empty id of at most 128 bytes",
            show(&returned.snapshot_id),
        ));
    }
    eq(m, "provider", &source.provider, &returned.provider);
    eq(m, "placement", &source.placement, &returned.placement);
    eq(
        m,
        "source_instance_id",
        &source.source_instance_id,
        &returned.source_instance_id,
    );
    eq(
        m,
        "workspace_id",
        &source.workspace_id,
        &returned.workspace_id,
    );
    eq(
        m,
        "session_id",
        &target_session_id.to_string(),
        &returned.session_id,
    );
    eq(m, "profile_id", &source.profile_id, &returned.profile_id);
    eq(
        m,
        "profile_version",
        &source.profile_version,
        &returned.profile_version,
    );
    eq(
        m,
        "profile_digest",
        &source.profile_digest,
        &returned.profile_digest,
    );
    eq(m, "expires_at", &source.expires_at, &returned.expires_at);
    if returned.created_at < source.created_at {
        m.push(Mismatch::new(
            "created_at",
            format!("at or after the source's {}", show(&source.created_at)),
            show(&returned.created_at),
        ));
    }
    if returned.created_at >= returned.expires_at {
        m.push(Mismatch::new(
            "created_at",
            format!("strictly before expires_at {}", show(&returned.expires_at)),
            show(&returned.created_at),
        ));
    }
    out
}

/// The process evidence checks against the instance, the request and the
/// envelope (decision 003): provider, instance, session, placement, tier,
/// network mode, executable, and `started_at` strictly before the
/// instance's `expires_at` (no process starts in an expired instance).
/// Operation name: `open_process_identity`.
pub fn check_process_evidence(
    instance: &SandboxInstance,
    request: &SandboxProcessRequest,
    envelope: &SandboxProviderCapabilities,
    evidence: &SandboxProcessEvidence,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let m = &mut out;
    eq(m, "provider", &instance.provider, &evidence.provider);
    eq(
        m,
        "instance_id",
        &instance.instance_id,
        &evidence.instance_id,
    );
    eq(m, "session_id", &instance.session_id, &evidence.session_id);
    eq(m, "placement", &instance.placement, &evidence.placement);
    if evidence.placement != envelope.placement {
        m.push(Mismatch::new(
            "placement",
            format!("the envelope's {}", show(&envelope.placement)),
            show(&evidence.placement),
        ));
    }
    eq(m, "tier", &instance.target, &evidence.tier);
    if !envelope.tiers.contains(&evidence.tier) {
        m.push(Mismatch::new(
            "tier",
            format!("one of the envelope's {}", show(&envelope.tiers)),
            show(&evidence.tier),
        ));
    }
    eq(
        m,
        "network_mode",
        &instance.profile.network_policy.mode(),
        &evidence.network_mode,
    );
    if !envelope.network_modes.contains(&evidence.network_mode) {
        m.push(Mismatch::new(
            "network_mode",
            format!("one of the envelope's {}", show(&envelope.network_modes)),
            show(&evidence.network_mode),
        ));
    }
    eq(m, "executable", &request.executable, &evidence.executable);
    if evidence.started_at >= instance.expires_at {
        m.push(Mismatch::new(
            "started_at",
            format!(
                "strictly before the instance's expires_at {}",
                show(&instance.expires_at)
            ),
            show(&evidence.started_at),
        ));
    }
    out
}
