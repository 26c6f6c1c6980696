//! Shared fixtures for the wire tests.
#![allow(dead_code)] // each test file uses a different subset

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;

pub const START: &str = "2030-01-01T00:00:00.000Z";
pub const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

pub fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

pub fn memory() -> MemoryProvider {
    MemoryProvider::new(ManualClock::new(ts(START)))
}

pub fn request() -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: "memory".into(),
        placement: Placement::Hosted,
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        run_id: "run-1".into(),
        attempt_id: "attempt-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 7,
        target: Tier::Container,
        profile: SandboxProfile {
            profile_id: "profile-1".into(),
            profile_version: 3,
            profile_digest: Digest::parse(&format!("sha256:{HEX}")).unwrap(),
            retention: RetentionMode::EphemeralZdr,
            network_policy: NetworkPolicy::None,
            max_duration_seconds: 600,
            resources: Resources::default(),
            packages: vec![],
        },
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: ImageReference::parse(&format!("checkfu-fixture@sha256:{HEX}")).unwrap(),
        mounts: vec![],
        expires_at: ts("2030-01-02T00:00:00.000Z"),
    }
}

/// A process a test builds by hand.
pub type MakeProcess = Arc<dyn Fn() -> SandboxProcess + Send + Sync>;

/// The memory oracle with a slow provision and, optionally, a hand-built
/// openProcess.
pub struct Wrap {
    pub inner: MemoryProvider,
    pub provision_delay: Duration,
    pub process: Option<MakeProcess>,
}

impl Wrap {
    pub fn new(inner: MemoryProvider) -> Self {
        Wrap {
            inner,
            provision_delay: Duration::ZERO,
            process: None,
        }
    }
}

#[async_trait]
impl SandboxProvider for Wrap {
    fn provider_id(&self) -> &str {
        self.inner.provider_id()
    }
    fn capabilities(&self) -> SandboxProviderCapabilities {
        self.inner.capabilities()
    }
    async fn provision(
        &self,
        r: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        tokio::time::sleep(self.provision_delay).await;
        self.inner.provision(r).await
    }
    async fn write_file(&self, r: WriteFileRequest) -> Result<(), SandboxError> {
        self.inner.write_file(r).await
    }
    async fn activate(&self, r: ActivateRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.inner.activate(r).await
    }
    async fn execute(&self, r: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        self.inner.execute(r).await
    }
    async fn read_file(&self, r: ReadFileRequest) -> Result<SandboxFileContent, SandboxError> {
        self.inner.read_file(r).await
    }
    async fn snapshot(&self, r: SnapshotRequest) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.inner.snapshot(r).await
    }
    async fn clone_snapshot(
        &self,
        r: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.inner.clone_snapshot(r).await
    }
    async fn release(
        &self,
        r: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.inner.release(r).await
    }
    async fn resume(&self, r: ResumeRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.inner.resume(r).await
    }
    async fn destroy(&self, r: DestroyRequest) -> Result<(), SandboxError> {
        self.inner.destroy(r).await
    }
    async fn destroy_snapshot(&self, r: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.inner.destroy_snapshot(r).await
    }
    async fn cleanup(&self, r: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.inner.cleanup(r).await
    }
    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        self.process.as_ref().map(|_| self as _)
    }
}

#[async_trait]
impl OpenProcessMember for Wrap {
    async fn open_process(&self, _: SandboxProcessRequest) -> Result<SandboxProcess, SandboxError> {
        Ok((self.process.as_ref().unwrap())())
    }
}

pub fn evidence() -> SandboxProcessEvidence {
    SandboxProcessEvidence {
        provider: "memory".into(),
        instance_id: "inst-1".into(),
        session_id: "session-1".into(),
        placement: Placement::Hosted,
        tier: Tier::Container,
        network_mode: NetworkMode::None,
        executable: "cat".into(),
        started_at: ts(START),
    }
}

pub fn process_request() -> SandboxProcessRequest {
    SandboxProcessRequest {
        instance_id: "inst-1".into(),
        executable: "cat".into(),
        arguments: vec![],
        working_directory: "/".into(),
        environment: Default::default(),
    }
}
