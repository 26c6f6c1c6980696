//! The runtime's test double and fixtures.
//!
//! [`Double`] is the memory oracle on a manual clock behind
//! `checkfu_test_support::hooked::Hooked`: the oracle answers every member
//! correctly, and a test's hook makes exactly one answer wrong (mutate a
//! returned value, fail an operation, hide an optional member, gate a call,
//! change the envelope after registration) so the runtime's check can be
//! seen to catch it. Every call is recorded, so a test can assert the
//! provider was *not* called when the runtime refused first. Ids, files,
//! snapshots and lifecycle states are the oracle's own ([`Oracle`] reads
//! them).

// Each test file uses a different subset of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{FsNode, MemoryProvider, MATERIALIZATION_REVISION, PROVIDER_REVISION};
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};
#[allow(unused_imports)] // Each test file uses a different subset.
pub use checkfu_test_support::hooked::{Behaviour, Gate, Hooked};

/// The provider id the double registers under unless told otherwise.
pub const PROVIDER: &str = "hooked";
/// The instant the shared manual clock starts at.
pub const T0: &str = "2026-11-30T07:30:00.000Z";
/// The profile's derived image digest.
pub const PROFILE_DIGEST: &str =
    "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// The pinned root image.
pub const ROOT_IMAGE: &str =
    "fixture@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// A read-write project mount.
pub const PROJECT: &str = "/workspace/project";
/// A read-only data mount.
pub const DATA: &str = "/data";
/// A read-only mount nested inside the project mount.
pub const VENDOR: &str = "/workspace/project/vendor";
/// The fixed output tree.
pub const OUT: &str = "/mnt/session/outputs";

/// A timestamp from canonical text.
pub fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

/// The clock's start.
pub fn t0() -> Timestamp {
    ts(T0)
}

/// The every-token envelope: both network modes (enforced egress), both
/// retentions, snapshots and clones, every optional flag, 64 mounts, every
/// axis provider-enforced, Runner placement and custody; the oracle's own
/// revisions (its instances echo them in `materialization`).
pub fn full_envelope() -> SandboxProviderCapabilities {
    let e = EnforcementLevel::ProviderEnforced;
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        }],
        image_mode: ImageMode::Profile,
        package_managers: vec![PackageManager::Apt],
        network_modes: vec![NetworkMode::None, NetworkMode::Allowlist],
        retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
        snapshots: true,
        snapshot_clone: true,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: true,
        physically_contained_file_read: true,
        active_mount_write: true,
        egress_certification: EgressCertification::Enforced,
        enforcement: Enforcement {
            filesystem: e,
            process: e,
            network: e,
            memory: e,
            cpu: e,
            pids: e,
            disk: e,
            duration: e,
            privilege: e,
        },
        max_mounts: 64,
        provider_revision: PROVIDER_REVISION.into(),
        materialization_revision: MATERIALIZATION_REVISION.into(),
    }
}

/// A profile with network mode `none` and a 600 s command bound.
pub fn profile(retention: RetentionMode) -> SandboxProfile {
    SandboxProfile {
        profile_id: "profile-1".into(),
        profile_version: 3,
        profile_digest: Digest::parse(PROFILE_DIGEST).unwrap(),
        retention,
        network_policy: NetworkPolicy::None,
        max_duration_seconds: 600,
        resources: Resources::default(),
        packages: Vec::new(),
    }
}

/// The standard mount plan: a read-write project with a nested read-only
/// vendor directory, and a read-only data mount.
pub fn mounts() -> Vec<SandboxMount> {
    vec![
        SandboxMount {
            path: PROJECT.into(),
            access: MountAccess::ReadWrite,
        },
        SandboxMount {
            path: VENDOR.into(),
            access: MountAccess::ReadOnly,
        },
        SandboxMount {
            path: DATA.into(),
            access: MountAccess::ReadOnly,
        },
    ]
}

/// A provision request for `provider` with the standard plan, expiring an
/// hour after [`T0`].
pub fn request_for(provider: &str, retention: RetentionMode) -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: provider.into(),
        placement: Placement::Runner,
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        run_id: "run-1".into(),
        attempt_id: "attempt-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 7,
        target: Tier::Container,
        profile: profile(retention),
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: ImageReference::parse(ROOT_IMAGE).unwrap(),
        mounts: mounts(),
        expires_at: t0().add_seconds(3600),
    }
}

/// [`request_for`] the default provider id.
pub fn request(retention: RetentionMode) -> SandboxProvisionRequest {
    request_for(PROVIDER, retention)
}

/// A command that echoes its arguments.
pub fn echo(args: &[&str]) -> SandboxCommand {
    SandboxCommand {
        executable: "echo".into(),
        arguments: args.iter().map(|s| s.to_string()).collect(),
        working_directory: PROJECT.into(),
        environment: BTreeMap::new(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1024,
    }
}

/// A process request for `cat`.
pub fn process_request(instance_id: &str) -> SandboxProcessRequest {
    SandboxProcessRequest {
        instance_id: instance_id.into(),
        executable: "cat".into(),
        arguments: Vec::new(),
        working_directory: PROJECT.into(),
        environment: BTreeMap::new(),
    }
}

/// The memory oracle behind hooks.
pub type Double = Hooked<MemoryProvider>;

/// A double with this id, clock and envelope.
pub fn double(id: &str, clock: ManualClock, envelope: SandboxProviderCapabilities) -> Arc<Double> {
    Arc::new(
        Hooked::new(MemoryProvider::new(clock))
            .with_id(id)
            .with_envelope(envelope),
    )
}

/// What a test reads from (or plants in) the oracle behind the double,
/// and the requests the double saw, typed.
pub trait Oracle {
    /// Instance ids the oracle holds, in id order.
    fn instance_ids(&self) -> Vec<String>;
    /// Snapshot ids the oracle holds, in id order.
    fn snapshot_ids(&self) -> Vec<String>;
    /// The oracle's own record of an instance's state.
    fn state_of(&self, instance_id: &str) -> Option<InstanceState>;
    /// Puts a file straight into the instance's tree (workload output).
    fn put_file(&self, instance_id: &str, path: &str, content: &[u8]);
    /// A regular file's bytes from the instance's tree.
    fn file(&self, instance_id: &str, path: &str) -> Option<Vec<u8>>;
    /// Every writeFile request that reached the oracle.
    fn write_file_requests(&self) -> Vec<WriteFileRequest>;
    /// Every readFile request that reached the oracle.
    fn read_file_requests(&self) -> Vec<ReadFileRequest>;
    /// Every readFiles request that reached the oracle.
    fn read_files_requests(&self) -> Vec<ReadFilesRequest>;
    /// Every cleanup request that reached the oracle.
    fn cleanup_requests(&self) -> Vec<CleanupRequest>;
}

impl Oracle for Double {
    fn instance_ids(&self) -> Vec<String> {
        self.inner().live_instances()
    }
    fn snapshot_ids(&self) -> Vec<String> {
        self.inner().live_snapshots()
    }
    fn state_of(&self, instance_id: &str) -> Option<InstanceState> {
        self.inner().instance_state(instance_id)
    }
    fn put_file(&self, instance_id: &str, path: &str, content: &[u8]) {
        self.inner()
            .plant(instance_id, path, FsNode::File(content.to_vec()))
            .unwrap();
    }
    fn file(&self, instance_id: &str, path: &str) -> Option<Vec<u8>> {
        match self.inner().node(instance_id, path) {
            Some(FsNode::File(bytes)) => Some(bytes),
            _ => None,
        }
    }
    fn write_file_requests(&self) -> Vec<WriteFileRequest> {
        self.requests(op::WRITE_FILE)
    }
    fn read_file_requests(&self) -> Vec<ReadFileRequest> {
        self.requests(op::READ_FILE)
    }
    fn read_files_requests(&self) -> Vec<ReadFilesRequest> {
        self.requests(op::READ_FILES)
    }
    fn cleanup_requests(&self) -> Vec<CleanupRequest> {
        self.requests(op::CLEANUP)
    }
}

/// A runtime with one double registered, on a shared clock.
pub struct Harness {
    /// The provider.
    pub provider: Arc<Double>,
    /// The runtime.
    pub runtime: SandboxRuntime,
    /// The provider's adapter.
    pub adapter: Adapter,
    /// The shared clock, standing at [`T0`].
    pub clock: ManualClock,
}

impl Harness {
    /// A harness over the full envelope.
    pub fn new() -> Self {
        Self::with_envelope(full_envelope())
    }

    /// A harness over `envelope`.
    pub fn with_envelope(envelope: SandboxProviderCapabilities) -> Self {
        let clock = ManualClock::new(t0());
        let provider = double(PROVIDER, clock.clone(), envelope);
        let mut runtime = SandboxRuntime::new(Arc::new(clock.clone()));
        runtime.register(provider.clone());
        let adapter = runtime.adapter(PROVIDER).unwrap();
        Harness {
            provider,
            runtime,
            adapter,
            clock,
        }
    }

    /// A provisioned instance (standard request).
    pub async fn provisioned(&self, retention: RetentionMode) -> SandboxInstance {
        self.adapter.provision(request(retention)).await.unwrap()
    }

    /// An active instance (standard request), with the call log cleared.
    pub async fn active(&self, retention: RetentionMode) -> SandboxInstance {
        let i = self.provisioned(retention).await;
        let a = self.adapter.activate(&i.instance_id).await.unwrap();
        self.provider.clear_calls();
        a
    }

    /// A snapshot of a fresh durable active instance, with the call log
    /// cleared.
    pub async fn snapshot(&self) -> (SandboxInstance, SandboxSnapshot) {
        let i = self.active(RetentionMode::Durable).await;
        let s = self
            .adapter
            .snapshot(&i.instance_id, t0().add_seconds(86_400))
            .await
            .unwrap();
        self.provider.clear_calls();
        (i, s)
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

/// The only cause of `f`.
#[track_caller]
pub fn only(f: &SandboxFailure) -> &SandboxError {
    assert_eq!(f.cause_count(), 1, "expected exactly one cause: {f}");
    f.error()
}

/// Asserts `e` is `SandboxProtocolInvalid{operation, field, expected, actual}`.
#[track_caller]
pub fn assert_protocol(
    e: &SandboxError,
    operation: Operation,
    field: &str,
    expected: &str,
    actual: &str,
) {
    assert_eq!(
        e,
        &SandboxError::protocol(operation, field, expected, actual),
        "{e}"
    );
}

/// Asserts `e` is `SandboxOperationFailed{operation, invalid_request, field,
/// expected, actual}`.
#[track_caller]
pub fn assert_invalid(
    e: &SandboxError,
    operation: Operation,
    field: &str,
    expected: &str,
    actual: &str,
) {
    assert_eq!(
        e,
        &SandboxError::invalid_request(operation, field, expected, actual),
        "{e}"
    );
}

/// Asserts `e` is `SandboxLifecycleConflict{operation, expected, actual}`.
#[track_caller]
pub fn assert_conflict(
    e: &SandboxError,
    operation: Operation,
    expected: &str,
    actual: ConflictActual,
) {
    assert_eq!(
        e,
        &SandboxError::conflict(operation, expected, actual),
        "{e}"
    );
}

/// Asserts `e` is `SandboxCapabilityUnavailable{requirement}`.
#[track_caller]
pub fn assert_unavailable(e: &SandboxError, requirement: Requirement) {
    match e {
        SandboxError::SandboxCapabilityUnavailable { requirement: r, .. } => {
            assert_eq!(*r, requirement, "{e}")
        }
        other => panic!("expected SandboxCapabilityUnavailable{{{requirement}}}, got {other}"),
    }
}

/// Asserts `e` is `SandboxOperationFailed{operation, reason}`.
#[track_caller]
pub fn assert_failed(e: &SandboxError, operation: Operation, reason: FailureReason) {
    match e {
        SandboxError::SandboxOperationFailed {
            operation: o,
            reason: r,
            ..
        } => {
            assert_eq!(*o, operation, "{e}");
            assert_eq!(*r, reason, "{e}");
        }
        other => panic!("expected SandboxOperationFailed{{{operation}, {reason:?}}}, got {other}"),
    }
}
