//! The identity faults' corruptions of an otherwise honest value.

use super::*;

/// A different, well-formed digest.
fn other_digest(d: &Digest) -> Digest {
    let raw: [u8; 32] = Sha256::digest(format!("memory-fault:{d}").as_bytes()).into();
    Digest::from_sha256_bytes(raw)
}

/// A different, well-formed image reference with the same digest.
fn other_image(r: &ImageReference) -> ImageReference {
    let name = r.name();
    let changed = if let Some(stem) = name.strip_suffix('x') {
        format!("{stem}y")
    } else if name.len() < 255 {
        format!("{name}x")
    } else {
        format!("{}x", &name[..name.len() - 1])
    };
    ImageReference::parse(&format!("{changed}@{}", r.digest())).unwrap_or_else(|_| r.clone())
}

/// Misreports one identity field of an instance.
pub(super) fn corrupt_instance(field: IdentityField, v: &mut SandboxInstance) {
    match field {
        IdentityField::Provider => v.provider.push_str("-impostor"),
        IdentityField::Placement => {
            v.placement = match v.placement {
                Placement::Hosted => Placement::Runner,
                Placement::Runner => Placement::Hosted,
            }
        }
        IdentityField::State => {
            v.state = match v.state {
                InstanceState::Provisioning => InstanceState::Active,
                InstanceState::Active => InstanceState::Provisioning,
            }
        }
        IdentityField::WorkspaceId => v.workspace_id.push_str("-x"),
        IdentityField::SessionId => v.session_id.push_str("-x"),
        IdentityField::RunId => v.run_id.push_str("-x"),
        IdentityField::AttemptId => v.attempt_id.push_str("-x"),
        IdentityField::LeaseId => v.lease_id.push_str("-x"),
        IdentityField::LeaseEpoch => v.lease_epoch = v.lease_epoch.wrapping_add(1),
        IdentityField::Target => {
            v.target = match v.target {
                Tier::Container => Tier::Microvm,
                Tier::Microvm => Tier::Container,
            }
        }
        IdentityField::Profile => {
            v.profile.profile_version = v.profile.profile_version.wrapping_add(1)
        }
        IdentityField::Platform => {
            v.platform.architecture = match v.platform.architecture {
                Architecture::Amd64 => Architecture::Arm64,
                Architecture::Arm64 => Architecture::Amd64,
            }
        }
        IdentityField::RootImage => v.root_image = other_image(&v.root_image),
        IdentityField::Mounts => v.mounts.push(SandboxMount {
            path: "/mnt/memory-fault".to_string(),
            access: MountAccess::ReadOnly,
        }),
        IdentityField::OutputPath => v.output_path = "/mnt/session/output".to_string(),
        IdentityField::ExpiresAt => v.expires_at = v.expires_at.add_seconds(3600),
        IdentityField::MaterializationProfileDigest => {
            v.materialization.profile_digest = other_digest(&v.materialization.profile_digest)
        }
        IdentityField::MaterializationImageReference => {
            v.materialization.image_reference = other_image(&v.materialization.image_reference)
        }
        IdentityField::MaterializationImageDigest => {
            v.materialization.image_digest = other_digest(&v.materialization.image_digest)
        }
        IdentityField::MaterializationProviderRevision => {
            v.materialization.provider_revision.push_str("-stale")
        }
        IdentityField::MaterializationMaterializationRevision => v
            .materialization
            .materialization_revision
            .push_str("-stale"),
    }
}

// ---- rollback -------------------------------------------------------------
