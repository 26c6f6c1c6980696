//! Typed base values the vectors start from. Every one is valid; vectors
//! change exactly one thing.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::capabilities::*;
use checkfu_sandbox_contract::digest::{Digest, ImageReference};
use checkfu_sandbox_contract::types::*;
use checkfu_sandbox_contract::{Bytes, Timestamp};

pub(crate) fn hex(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

pub(crate) fn digest(c: char) -> Digest {
    Digest::parse(&format!("sha256:{}", hex(c))).unwrap_or_else(|_| unreachable!())
}

pub(crate) fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap_or_else(|_| unreachable!("fixture timestamp {text}"))
}

pub(crate) const ROOT_IMAGE: &str =
    "checkfu-fixture@sha256:1111111111111111111111111111111111111111111111111111111111111111";

pub(crate) fn root_image() -> ImageReference {
    ImageReference::parse(ROOT_IMAGE).unwrap_or_else(|_| unreachable!())
}

fn all_enforced(level: EnforcementLevel) -> Enforcement {
    Enforcement {
        filesystem: level,
        process: level,
        network: level,
        memory: level,
        cpu: level,
        pids: level,
        disk: level,
        duration: level,
        privilege: level,
    }
}

/// The spec's minimum provider.
pub(crate) fn caps_minimal() -> SandboxProviderCapabilities {
    SandboxProviderCapabilities {
        placement: Placement::Hosted,
        tiers: vec![Tier::Container],
        platforms: vec![Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        }],
        image_mode: ImageMode::Profile,
        package_managers: vec![],
        network_modes: vec![NetworkMode::None],
        retention_modes: vec![RetentionMode::EphemeralZdr],
        snapshots: false,
        snapshot_clone: false,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: false,
        physically_contained_file_read: false,
        active_mount_write: false,
        egress_certification: EgressCertification::Unsupported,
        enforcement: all_enforced(EnforcementLevel::ProviderEnforced),
        max_mounts: 0,
        provider_revision: "minimal-1".into(),
        materialization_revision: "m1".into(),
    }
}

/// Everything offered, every optional capability claimed.
pub(crate) fn caps_full() -> SandboxProviderCapabilities {
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container, Tier::Microvm],
        platforms: vec![
            Platform {
                os: Os::Linux,
                architecture: Architecture::Amd64,
            },
            Platform {
                os: Os::Linux,
                architecture: Architecture::Arm64,
            },
        ],
        image_mode: ImageMode::Profile,
        package_managers: vec![PackageManager::Apt, PackageManager::Pip],
        network_modes: vec![NetworkMode::None, NetworkMode::Allowlist],
        retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
        snapshots: true,
        snapshot_clone: true,
        snapshot_custody: SnapshotCustody::Provider,
        list_dir: true,
        physically_contained_file_read: true,
        active_mount_write: true,
        egress_certification: EgressCertification::Enforced,
        enforcement: all_enforced(EnforcementLevel::RunnerEnforced),
        max_mounts: 64,
        provider_revision: "memory-1".into(),
        materialization_revision: "mat-1".into(),
    }
}

pub(crate) fn profile() -> SandboxProfile {
    SandboxProfile {
        profile_id: "prof-1".into(),
        profile_version: 3,
        profile_digest: digest('2'),
        retention: RetentionMode::Durable,
        network_policy: NetworkPolicy::Allowlist {
            destinations: vec![NetworkDestination {
                host: "registry.example".into(),
                port: 443,
            }],
        },
        max_duration_seconds: 600,
        resources: Resources {
            cpu_millis: Some(2000),
            memory_bytes: Some(1 << 30),
            pids: None,
            disk_bytes: None,
        },
        packages: vec![PackageSpec {
            manager: PackageManager::Apt,
            name: "git".into(),
            version: "1:2.39.5-0+deb12u2".into(),
        }],
    }
}

pub(crate) fn mounts() -> Vec<SandboxMount> {
    vec![
        SandboxMount {
            path: "/workspace/project".into(),
            access: MountAccess::ReadWrite,
        },
        SandboxMount {
            path: "/opt/data".into(),
            access: MountAccess::ReadOnly,
        },
    ]
}

/// A provision request matching [`caps_full`].
pub(crate) fn provision_request() -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: "memory".into(),
        placement: Placement::Runner,
        workspace_id: "ws-1".into(),
        session_id: "sess-1".into(),
        run_id: "run-1".into(),
        attempt_id: "att-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 7,
        target: Tier::Container,
        profile: profile(),
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: root_image(),
        mounts: mounts(),
        expires_at: ts("2026-11-30T08:30:00.000Z"),
    }
}

/// The instance that echoes [`provision_request`] under [`caps_full`].
pub(crate) fn instance(state: InstanceState) -> SandboxInstance {
    let r = provision_request();
    let caps = caps_full();
    SandboxInstance {
        instance_id: "inst-1".into(),
        provider: r.provider.clone(),
        placement: r.placement,
        state,
        workspace_id: r.workspace_id.clone(),
        session_id: r.session_id.clone(),
        run_id: r.run_id.clone(),
        attempt_id: r.attempt_id.clone(),
        lease_id: r.lease_id.clone(),
        lease_epoch: r.lease_epoch,
        target: r.target,
        profile: r.profile.clone(),
        platform: r.platform,
        root_image: r.root_image.clone(),
        mounts: r.mounts.clone(),
        output_path: checkfu_sandbox_contract::bounds::OUTPUT_PATH.into(),
        expires_at: r.expires_at,
        materialization: Materialization {
            profile_digest: r.profile.profile_digest.clone(),
            image_reference: r.root_image.clone(),
            image_digest: r.root_image.digest(),
            provider_revision: caps.provider_revision,
            materialization_revision: caps.materialization_revision,
        },
    }
}

/// The snapshot requested expiry used with [`snapshot`].
pub(crate) fn snapshot_expiry() -> Timestamp {
    ts("2026-12-07T07:30:00.000Z")
}

/// A snapshot of [`instance`] taken with [`snapshot_expiry`].
pub(crate) fn snapshot() -> SandboxSnapshot {
    let i = instance(InstanceState::Active);
    SandboxSnapshot {
        snapshot_id: "snap-1".into(),
        provider: i.provider,
        placement: i.placement,
        source_instance_id: i.instance_id,
        workspace_id: i.workspace_id,
        session_id: i.session_id,
        profile_id: i.profile.profile_id,
        profile_version: i.profile.profile_version,
        profile_digest: i.profile.profile_digest,
        created_at: ts("2026-11-30T07:45:00.000Z"),
        expires_at: snapshot_expiry(),
    }
}

/// A clone of [`snapshot`] into `sess-2`.
pub(crate) fn clone_of() -> SandboxSnapshot {
    SandboxSnapshot {
        snapshot_id: "snap-2".into(),
        session_id: "sess-2".into(),
        created_at: ts("2026-11-30T08:00:00.000Z"),
        ..snapshot()
    }
}

pub(crate) fn command() -> SandboxCommand {
    let mut environment = BTreeMap::new();
    environment.insert("PATH".into(), "/usr/bin:/bin".into());
    environment.insert("_X9".into(), "1".into());
    SandboxCommand {
        executable: "sh".into(),
        arguments: vec!["-c".into(), "exit 3".into()],
        working_directory: "/workspace/project".into(),
        environment,
        stdin_base64: Some(Bytes::from("hello\n")),
        timeout_seconds: 60,
        output_limit_bytes: 1 << 20,
    }
}

pub(crate) fn process_request() -> SandboxProcessRequest {
    let mut environment = BTreeMap::new();
    environment.insert("HOME".into(), "/home/checkfu".into());
    SandboxProcessRequest {
        instance_id: "inst-1".into(),
        executable: "/usr/local/bin/agent".into(),
        arguments: vec!["--acp".into()],
        working_directory: "/workspace/project".into(),
        environment,
    }
}

pub(crate) fn evidence() -> SandboxProcessEvidence {
    SandboxProcessEvidence {
        provider: "memory".into(),
        instance_id: "inst-1".into(),
        session_id: "sess-1".into(),
        placement: Placement::Runner,
        tier: Tier::Container,
        network_mode: NetworkMode::Allowlist,
        executable: "/usr/local/bin/agent".into(),
        started_at: ts("2026-11-30T07:50:00.000Z"),
    }
}

pub(crate) fn read_files_request(members: usize, each: u64) -> ReadFilesRequest {
    ReadFilesRequest {
        instance_id: "inst-1".into(),
        allowed_root: "/workspace/project".into(),
        files: (0..members)
            .map(|i| ReadFilesEntry {
                path: format!("/workspace/project/f{i}").into(),
                maximum_bytes: each,
            })
            .collect(),
        aggregate_maximum_bytes: members as u64 * each,
    }
}
