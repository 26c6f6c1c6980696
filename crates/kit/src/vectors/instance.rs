//! The instance identity checks of provision and resume (`instance_identity`).

use super::*;

fn identity_input(returned: &SandboxInstance, state: InstanceState) -> Value {
    json!({"request": provision_request(), "expected_state": state, "envelope": caps_full(), "returned": returned})
}

pub(super) fn instance_identity(v: &mut Vectors) {
    let check = "instance_identity";
    v.ok_identity(
        "instance-identity-provisioning",
        "An instance that echoes the request after provision.",
        check,
        identity_input(
            &instance(InstanceState::Provisioning),
            InstanceState::Provisioning,
        ),
    );
    v.ok_identity(
        "instance-identity-active",
        "An instance that echoes the request after activate.",
        check,
        identity_input(&instance(InstanceState::Active), InstanceState::Active),
    );
    let base = instance(InstanceState::Provisioning);
    let r = provision_request();
    let caps = caps_full();
    let mut case = |field: &str,
                    description: &str,
                    expected: String,
                    actual: String,
                    change: &dyn Fn(&mut SandboxInstance)| {
        let mut returned = base.clone();
        change(&mut returned);
        let name = format!("instance-identity-{}", field.replace(['.', '_'], "-"));
        v.bad_identity(
            &name,
            description,
            check,
            identity_input(&returned, InstanceState::Provisioning),
            field,
            Some(expected),
            actual,
        );
    };
    case(
        "provider",
        "Another provider id.",
        show(&r.provider),
        show(&"docker"),
        &|i| i.provider = "docker".into(),
    );
    case(
        "placement",
        "Another placement.",
        show(&r.placement),
        show(&Placement::Hosted),
        &|i| i.placement = Placement::Hosted,
    );
    case(
        "state",
        "active straight after provision.",
        show(&InstanceState::Provisioning),
        show(&InstanceState::Active),
        &|i| i.state = InstanceState::Active,
    );
    case(
        "workspace_id",
        "Another Workspace.",
        show(&r.workspace_id),
        show(&"ws-2"),
        &|i| i.workspace_id = "ws-2".into(),
    );
    case(
        "session_id",
        "Another Session.",
        show(&r.session_id),
        show(&"sess-9"),
        &|i| i.session_id = "sess-9".into(),
    );
    case(
        "run_id",
        "Another Run.",
        show(&r.run_id),
        show(&"run-2"),
        &|i| i.run_id = "run-2".into(),
    );
    case(
        "attempt_id",
        "Another attempt.",
        show(&r.attempt_id),
        show(&"att-2"),
        &|i| i.attempt_id = "att-2".into(),
    );
    case(
        "lease_id",
        "Another lease.",
        show(&r.lease_id),
        show(&"lease-2"),
        &|i| i.lease_id = "lease-2".into(),
    );
    case(
        "lease_epoch",
        "A stale lease epoch (fencing token).",
        show(&r.lease_epoch),
        show(&6u64),
        &|i| i.lease_epoch = 6,
    );
    case(
        "target",
        "Another tier.",
        show(&r.target),
        show(&Tier::Microvm),
        &|i| i.target = Tier::Microvm,
    );
    let mut other_profile = r.profile.clone();
    other_profile.profile_version = 4;
    let op = other_profile.clone();
    case(
        "profile",
        "The profile echoed with another version.",
        show(&r.profile),
        show(&other_profile),
        &move |i| i.profile = op.clone(),
    );
    let arm = Platform {
        os: Os::Linux,
        architecture: Architecture::Arm64,
    };
    case(
        "platform",
        "Another architecture.",
        show(&r.platform),
        show(&arm),
        &move |i| i.platform = arm,
    );
    let other_image = checkfu_sandbox_contract::digest::ImageReference::parse(&format!(
        "checkfu-fixture@sha256:{}",
        hex('9')
    ))
    .unwrap_or_else(|_| unreachable!());
    let oi = other_image.clone();
    case(
        "root_image",
        "Another pinned image; materialization still names the requested one.",
        show(&r.root_image),
        show(&other_image),
        &move |i| i.root_image = oi.clone(),
    );
    let mut fewer = r.mounts.clone();
    fewer.pop();
    let fm = fewer.clone();
    case(
        "mounts",
        "A declared mount missing.",
        show(&r.mounts),
        show(&fewer),
        &move |i| i.mounts = fm.clone(),
    );
    case(
        "output_path",
        "Any output path but /mnt/session/outputs.",
        show(&"/mnt/session/outputs"),
        show(&"/outputs"),
        &|i| i.output_path = "/outputs".into(),
    );
    let platform_expiry = ts("2026-11-30T09:30:00.000Z");
    case(
        "expires_at",
        "The platform's own deadline instead of the requested expires_at.",
        show(&r.expires_at),
        show(&platform_expiry),
        &move |i| i.expires_at = platform_expiry,
    );
    case(
        "materialization.profile_digest",
        "A profile digest other than the profile's derived image digest.",
        show(&r.profile.profile_digest),
        show(&digest('8')),
        &|i| i.materialization.profile_digest = digest('8'),
    );
    let oi2 = other_image.clone();
    case(
        "materialization.image_reference",
        "An image reference other than root_image.",
        show(&r.root_image),
        show(&other_image),
        &move |i| i.materialization.image_reference = oi2.clone(),
    );
    case(
        "materialization.image_digest",
        "The image store's digest instead of root_image's digest suffix.",
        show(&r.root_image.digest()),
        show(&digest('7')),
        &|i| i.materialization.image_digest = digest('7'),
    );
    case(
        "materialization.provider_revision",
        "A provider revision other than the envelope's.",
        show(&caps.provider_revision),
        show(&"memory-2"),
        &|i| i.materialization.provider_revision = "memory-2".into(),
    );
    case(
        "materialization.materialization_revision",
        "A materialization revision other than the envelope's.",
        show(&caps.materialization_revision),
        show(&"mat-0"),
        &|i| i.materialization.materialization_revision = "mat-0".into(),
    );
    let mut empty = base.clone();
    empty.instance_id = String::new();
    v.bad_identity(
        "instance-identity-empty-instance-id",
        "An instance without an id.",
        check,
        identity_input(&empty, InstanceState::Provisioning),
        "instance_id",
        None,
        show(&""),
    );
}
