//! Shared fixtures for the memory oracle's integration tests.
#![allow(dead_code)] // each test file uses a different subset

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{Fault, MemoryProvider};

pub const START: &str = "2030-01-01T00:00:00.000Z";
pub const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
pub const RO: &str = "/data/ro";
pub const RW: &str = "/data/rw";
pub const NESTED_RO: &str = "/data/rw/pinned";

pub fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

pub fn clock() -> ManualClock {
    ManualClock::new(ts(START))
}

pub fn provider() -> (MemoryProvider, ManualClock) {
    let c = clock();
    (MemoryProvider::new(c.clone()), c)
}

pub fn faulty(fault: Fault) -> (MemoryProvider, ManualClock) {
    let c = clock();
    (
        MemoryProvider::builder()
            .manual_clock(c.clone())
            .fault(fault)
            .build(),
        c,
    )
}

pub fn mounts() -> Vec<SandboxMount> {
    vec![
        SandboxMount {
            path: RO.into(),
            access: MountAccess::ReadOnly,
        },
        SandboxMount {
            path: RW.into(),
            access: MountAccess::ReadWrite,
        },
        SandboxMount {
            path: NESTED_RO.into(),
            access: MountAccess::ReadOnly,
        },
    ]
}

pub fn request_with(
    session: &str,
    retention: RetentionMode,
    network_policy: NetworkPolicy,
) -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: "memory".into(),
        placement: Placement::Hosted,
        workspace_id: "ws-1".into(),
        session_id: session.into(),
        run_id: "run-1".into(),
        attempt_id: "attempt-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 7,
        target: Tier::Container,
        profile: SandboxProfile {
            profile_id: "profile-1".into(),
            profile_version: 3,
            profile_digest: Digest::parse(&format!("sha256:{HEX}")).unwrap(),
            retention,
            network_policy,
            max_duration_seconds: 600,
            resources: Resources::default(),
            packages: vec![],
        },
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: ImageReference::parse(&format!(
            "checkfu-fixture@sha256:{}",
            HEX.chars().rev().collect::<String>()
        ))
        .unwrap(),
        mounts: mounts(),
        expires_at: ts("2030-01-02T00:00:00.000Z"),
    }
}

pub fn request(retention: RetentionMode) -> SandboxProvisionRequest {
    request_with("session-1", retention, NetworkPolicy::None)
}

pub async fn provision(p: &MemoryProvider, req: &SandboxProvisionRequest) -> String {
    p.provision(req.clone()).await.unwrap().value.instance_id
}

/// Provisions, stages `files` through writeFile, activates.
pub async fn active_with(
    p: &MemoryProvider,
    req: &SandboxProvisionRequest,
    files: &[(&str, &[u8])],
) -> String {
    let id = provision(p, req).await;
    for (path, bytes) in files {
        p.write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: path.to_string().into(),
            content_base64: Bytes(bytes.to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .unwrap();
    }
    p.activate(ActivateRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();
    id
}

pub async fn active(p: &MemoryProvider, retention: RetentionMode) -> String {
    active_with(p, &request(retention), &[]).await
}

pub fn command(argv: &[&str]) -> SandboxCommand {
    SandboxCommand {
        executable: argv[0].into(),
        arguments: argv[1..].iter().map(|s| s.to_string()).collect(),
        working_directory: "/".into(),
        environment: Default::default(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1024 * 1024,
    }
}

pub async fn exec_cmd(
    p: &MemoryProvider,
    id: &str,
    command: SandboxCommand,
) -> Result<SandboxCommandResult, SandboxError> {
    p.execute(ExecuteRequest {
        instance_id: id.into(),
        command,
    })
    .await
}

pub async fn run(p: &MemoryProvider, id: &str, argv: &[&str]) -> SandboxCommandResult {
    exec_cmd(p, id, command(argv)).await.unwrap()
}

pub fn stdout(r: &SandboxCommandResult) -> String {
    String::from_utf8_lossy(r.stdout_base64.as_slice()).into_owned()
}

pub fn stderr(r: &SandboxCommandResult) -> String {
    String::from_utf8_lossy(r.stderr_base64.as_slice()).into_owned()
}

pub async fn read(
    p: &MemoryProvider,
    id: &str,
    root: &str,
    path: &str,
) -> Result<SandboxFileContent, SandboxError> {
    p.read_file(ReadFileRequest {
        instance_id: id.into(),
        path: path.into(),
        allowed_root: root.into(),
        maximum_bytes: 1024 * 1024,
    })
    .await
}

pub fn reason(e: &SandboxError) -> Option<FailureReason> {
    match e {
        SandboxError::SandboxOperationFailed { reason, .. } => Some(*reason),
        _ => None,
    }
}
