//! The provider traits (spec "The operations", "Allocation handoff",
//! "openProcess"; DESIGN D1, D2, D5).
//!
//! A provider implements [`SandboxProvider`] (the thirteen required members)
//! and exposes each optional member through an accessor that returns
//! `None` by default. The envelope's flags and a member's presence are
//! independent, so the runtime can tell "absent" (a typed refusal) from
//! "declared but missing" and "present but wrong" (protocol failures).
//!
//! Providers are untrusted: they never validate identity and are only ever
//! called by the runtime, which checks every result.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures_io::{AsyncRead, AsyncWrite};

pub use crate::active_write::{ActiveWriteTransaction, DispatchMarker, ProceedMarker};
use crate::capabilities::SandboxProviderCapabilities;
use crate::error::SandboxError;
use crate::types::*;

/// A cold compensation for exactly one allocation.
///
/// The provider builds it from its own record of what it allocated, never
/// from the returned value. It must be idempotent: a second call after a
/// lost response settles the same way. The runtime bounds it at 30 seconds.
#[async_trait]
pub trait Rollback: Send + Sync {
    /// Undo the allocation.
    ///
    /// # Errors
    /// Any closed [`SandboxError`]; the runtime combines it with the
    /// rejection that triggered the rollback.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime runs it in a task of its own,
    /// spawned before anything is awaited, and past the 30 s bound detaches
    /// that task rather than dropping it; the wire server does not abort a
    /// `sandbox/rollback` on `$/cancel`.
    async fn rollback(&self) -> Result<(), SandboxError>;
}

/// The result of an allocating member: the value and its rollback.
///
/// The runtime invokes `rollback` at most once, and only when it rejects
/// `value` or is interrupted before taking ownership of it.
pub struct Handoff<T> {
    /// The allocated value, untrusted until the runtime checks it.
    pub value: T,
    /// Compensation for this exact allocation.
    pub rollback: Arc<dyn Rollback>,
}

impl<T: fmt::Debug> fmt::Debug for Handoff<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handoff")
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// Operation names as they appear in errors, as [`Operation`](crate::Operation) values
/// (snake_case member names and the identity checks).
pub mod op {
    use crate::operation::{Member, Operation};

    /// capabilities
    pub const CAPABILITIES: Operation = Operation::Member(Member::Capabilities);
    /// provision
    pub const PROVISION: Operation = Operation::Member(Member::Provision);
    /// writeFile
    pub const WRITE_FILE: Operation = Operation::Member(Member::WriteFile);
    /// beginActiveWrite
    pub const BEGIN_ACTIVE_WRITE: Operation = Operation::Member(Member::BeginActiveWrite);
    /// activate
    pub const ACTIVATE: Operation = Operation::Member(Member::Activate);
    /// execute
    pub const EXECUTE: Operation = Operation::Member(Member::Execute);
    /// readFile
    pub const READ_FILE: Operation = Operation::Member(Member::ReadFile);
    /// readFiles
    pub const READ_FILES: Operation = Operation::Member(Member::ReadFiles);
    /// listDir
    pub const LIST_DIR: Operation = Operation::Member(Member::ListDir);
    /// listProjectDir
    pub const LIST_PROJECT_DIR: Operation = Operation::Member(Member::ListProjectDir);
    /// snapshot
    pub const SNAPSHOT: Operation = Operation::Member(Member::Snapshot);
    /// cloneSnapshot
    pub const CLONE_SNAPSHOT: Operation = Operation::Member(Member::CloneSnapshot);
    /// release
    pub const RELEASE: Operation = Operation::Member(Member::Release);
    /// resume
    pub const RESUME: Operation = Operation::Member(Member::Resume);
    /// destroy
    pub const DESTROY: Operation = Operation::Member(Member::Destroy);
    /// destroySnapshot
    pub const DESTROY_SNAPSHOT: Operation = Operation::Member(Member::DestroySnapshot);
    /// cleanup
    pub const CLEANUP: Operation = Operation::Member(Member::Cleanup);
    /// openProcess
    pub const OPEN_PROCESS: Operation = Operation::Member(Member::OpenProcess);
    /// Instance identity cross-check.
    pub const INSTANCE_IDENTITY: Operation = Operation::InstanceIdentity;
    /// Snapshot identity cross-check.
    pub const SNAPSHOT_IDENTITY: Operation = Operation::SnapshotIdentity;
    /// Clone identity cross-check.
    pub const CLONE_IDENTITY: Operation = Operation::CloneIdentity;
    /// Process evidence cross-check.
    pub const OPEN_PROCESS_IDENTITY: Operation = Operation::OpenProcessIdentity;
    /// resolveImage (contract extension).
    pub const RESOLVE_IMAGE: Operation = Operation::Member(Member::ResolveImage);
    /// cleanupInventory (contract extension).
    pub const CLEANUP_INVENTORY: Operation = Operation::Member(Member::CleanupInventory);
}

/// The required members of a sandbox provider.
///
/// Every method may be called concurrently for different instances. Each
/// returns a closed [`SandboxError`] on failure; anything else is a defect.
#[async_trait]
pub trait SandboxProvider: Send + Sync {
    /// A stable id naming this adapter (`memory`, `docker`, ...); instances
    /// echo it as `provider`.
    fn provider_id(&self) -> &str;

    /// One honest envelope, unchanging for this revision.
    fn capabilities(&self) -> SandboxProviderCapabilities;

    /// True only for a transport in front of a provider in another
    /// process (the wire client): its `SandboxProtocolInvalid` errors are
    /// the Runner side's own verdicts on what crossed the transport (a
    /// line that is not a message, an error answer outside the closed
    /// vocabulary; PROTOCOL.md names their fields), and the runtime passes
    /// them through. Every other provider keeps the default `false`: a
    /// runtime-only tag it returns is itself a protocol failure naming
    /// `_tag` (spec "Errors": the runtime-only tags are never a
    /// provider's).
    fn transport_verdicts(&self) -> bool {
        false
    }

    /// Allocate the instance, materialize the derived image, prepare the
    /// declared mounts and the output tree; return it in `provisioning`.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime never drops this future before
    /// it completes (decision 009). A call still pending after its first
    /// poll runs on in a task of its own, and a value its caller no longer
    /// waits for is rolled back through its [`Rollback`], once; the wire
    /// server does not abort it on `$/cancel` either.
    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError>;

    /// Write bytes at a path the runtime already admitted.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. The file at `path` may or may not have
    /// been written, and the runtime records nothing either way (a repeat
    /// with the same bytes settles it).
    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError>;

    /// Seal staged mounts and make the instance runnable; return it `active`.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime never drops this future before
    /// it completes (decision 009). A call still pending after its first
    /// poll runs on in a task of its own, and a value its caller no longer
    /// waits for is rolled back through its [`Rollback`], once; the wire
    /// server does not abort it on `$/cancel` either.
    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError>;

    /// Run one bounded command to completion and report its settlement. A
    /// stream over `output_limit_bytes` ends the command's process tree and
    /// fails `SandboxOutputLimitExceeded`.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. The runtime records nothing for the command,
    /// so ending a command whose caller is gone is the provider's to do
    /// (destroy ends every process).
    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError>;

    /// Read one file, physically contained under `allowed_root`, or fail
    /// closed with `SandboxCapabilityUnavailable{physically_contained_file_read}`.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A read changes nothing, so a dropped call leaves
    /// nothing behind.
    async fn read_file(&self, request: ReadFileRequest)
        -> Result<SandboxFileContent, SandboxError>;

    /// Capture a durable instance under the requested retention deadline.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime never drops this future before
    /// it completes (decision 009). A call still pending after its first
    /// poll runs on in a task of its own, and a value its caller no longer
    /// waits for is rolled back through its [`Rollback`], once; the wire
    /// server does not abort it on `$/cancel` either.
    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError>;

    /// Physically clone a snapshot into a distinct target Session.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime never drops this future before
    /// it completes (decision 009). A call still pending after its first
    /// poll runs on in a task of its own, and a value its caller no longer
    /// waits for is rolled back through its [`Rollback`], once; the wire
    /// server does not abort it on `$/cancel` either.
    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError>;

    /// End an active instance: durable settles a snapshot, ZDR destroys
    /// every trace.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime never drops this future before
    /// it completes (decision 009). A call still pending after its first
    /// poll runs on in a task of its own, and a value its caller no longer
    /// waits for is rolled back through its [`Rollback`], once; the wire
    /// server does not abort it on `$/cancel` either.
    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError>;

    /// Rehydrate a snapshot into a fresh active instance.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime never drops this future before
    /// it completes (decision 009). A call still pending after its first
    /// poll runs on in a task of its own, and a value its caller no longer
    /// waits for is rolled back through its [`Rollback`], once; the wire
    /// server does not abort it on `$/cancel` either.
    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError>;

    /// Idempotent teardown of one instance.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A dropped teardown may stop half-way, and
    /// the runtime keeps the instance's record, so a repeat (destroy is
    /// idempotent) finishes it.
    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError>;

    /// Idempotent teardown of one snapshot.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A dropped teardown may stop half-way; a
    /// repeat (idempotent) finishes it.
    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError>;

    /// Sweep instances and snapshots orphaned before the cutoff.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A dropped sweep may have removed some
    /// orphans and not others; the next sweep removes the rest.
    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError>;

    /// The optional readFiles member, if implemented.
    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        None
    }

    /// The optional listDir member, if implemented.
    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        None
    }

    /// The optional listProjectDir member, if implemented.
    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        None
    }

    /// The optional openProcess member, if implemented.
    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        None
    }

    /// The optional beginActiveWrite member, if implemented.
    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        None
    }

    /// The optional resolveImage member (a contract extension), if
    /// implemented.
    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        None
    }

    /// The optional cleanupInventory member (a contract extension), if
    /// implemented.
    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        None
    }
}

/// resolveImage (contract extension): pin a local image reference.
///
/// The runtime checks the answer: a well-formed `name@sha256:<64 hex>`
/// naming the same image name, and for a pinned input the input itself.
#[async_trait]
pub trait ResolveImageMember: Send + Sync {
    /// Resolves `reference` (`name[:tag]` or `name@sha256:<hex>`) to the
    /// pinned reference of the image it designates now, in the provider's
    /// own image store; no registry is contacted.
    ///
    /// # Errors
    /// `SandboxCapabilityUnavailable{requirement: base_image}` for a
    /// malformed or unknown image; another closed error when the store
    /// cannot be asked.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A read changes nothing, so a dropped call leaves
    /// nothing behind.
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError>;
}

/// cleanupInventory (contract extension): every live instance and snapshot
/// with its times, so that the runtime can tell what a cleanup would sweep
/// (the rule of [`crate::sweep`]) without sweeping.
#[async_trait]
pub trait CleanupInventoryMember: Send + Sync {
    /// The provider's live objects now; nothing is changed.
    ///
    /// # Errors
    /// A closed error when the provider cannot observe its own state.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A read changes nothing, so a dropped call leaves
    /// nothing behind.
    async fn cleanup_inventory(&self) -> Result<crate::sweep::CleanupInventory, SandboxError>;
}

/// readFiles: a native batch read inside one `allowed_root`.
#[async_trait]
pub trait ReadFilesMember: Send + Sync {
    /// One outcome per member, in order, within the aggregate budget.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A read changes nothing, so a dropped call leaves
    /// nothing behind.
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError>;
}

/// listDir: regular files under a mount root with size and SHA-256.
#[async_trait]
pub trait ListDirMember: Send + Sync {
    /// At most `max_entries` regular files.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A read changes nothing, so a dropped call leaves
    /// nothing behind.
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError>;
}

/// listProjectDir: complete leaf enumeration, special files named.
#[async_trait]
pub trait ListProjectDirMember: Send + Sync {
    /// Every leaf, `complete: true`.
    ///
    /// # Cancel safety
    /// Must tolerate being dropped at any await point: the runtime drops
    /// it when its own caller is dropped, and the wire server aborts it on
    /// `$/cancel`. A read changes nothing, so a dropped call leaves
    /// nothing behind.
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError>;
}

/// beginActiveWrite: stage and atomically publish a batch into one
/// read-write mount, under the ownership handoff of
/// [`crate::active_write`].
#[async_trait]
pub trait ActiveWriteMember: Send + Sync {
    /// Publish every file or none. The provider stages the batch in an
    /// open journal, invokes [`ActiveWriteTransaction::mark_dispatched`]
    /// immediately before the journal becomes dispatched (an `Err` there
    /// aborts: discard the journal, answer `rolled_back`), publishes,
    /// records the committed marker before deleting rollback evidence, and
    /// answers `committed`. A redelivered `transaction_id` with the same
    /// batch gets the same outcome.
    ///
    /// # Errors
    /// A closed [`SandboxError`]: `SandboxCapabilityUnavailable{
    /// active_mount_write}` for an `ephemeral_zdr` instance when the journal
    /// would place bodies on durable host storage (before any body is
    /// accepted); `invalid_request` naming `transaction_id` for a
    /// redelivery with a different batch.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime runs the call and its checks in
    /// a task of its own that outlives a dropped caller, and the wire
    /// server does not abort it on `$/cancel`, so the transaction always
    /// settles and a redelivery finds its outcome.
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError>;
}

/// openProcess: start a long-lived process with live stdio.
#[async_trait]
pub trait OpenProcessMember: Send + Sync {
    /// Start the process. At most one live process per instance; a second
    /// is refused `SandboxLifecycleConflict{operation: open_process, actual:
    /// process_already_open}`. The provider invents no idle timeout and no
    /// output ceiling.
    ///
    /// # Cancel safety
    /// Need not be cancel-safe: the runtime runs it in a task of its own,
    /// and a process whose caller is gone by the time it starts is
    /// destroyed there at once (under the 30 s bound); the wire server does
    /// not abort it on `$/cancel`.
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError>;
}

/// Control of a live process.
#[async_trait]
pub trait ProcessControl: Send + Sync {
    /// Settle with the exit; may be called again and returns the same exit.
    ///
    /// # Cancel safety
    /// Must be cancel-safe: dropping a wait does not touch the process, and
    /// a later wait returns the same exit.
    async fn wait(&self) -> Result<ProcessExit, SandboxError>;
    /// Deliver one control signal.
    ///
    /// # Cancel safety
    /// May be dropped at an await point (the caller is gone); the signal
    /// is then delivered or not, and nothing else changes.
    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError>;
    /// Idempotent, bounded teardown of the process and its streams.
    ///
    /// # Cancel safety
    /// The runtime runs the destroys it starts itself (a refused or
    /// unclaimed process) in a task of its own, and the wire server does
    /// not abort a `process/destroy` on `$/cancel`; a destroy dropped by
    /// another caller may stop half-way, and a repeat (idempotent)
    /// finishes it.
    async fn destroy(&self) -> Result<(), SandboxError>;
}

/// A live process: byte streams, control and evidence.
///
/// `input` accepts ordered bytes; `close` on it is the half-close the child
/// observes as end of file. `output` delivers ordered bytes with a real end
/// of file. `error` is diagnostic, bounded and best effort.
pub struct SandboxProcess {
    /// The child's standard input.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    /// The child's standard output.
    pub output: Pin<Box<dyn AsyncRead + Send>>,
    /// The child's standard error.
    pub error: Pin<Box<dyn AsyncRead + Send>>,
    /// Wait, signal, destroy.
    pub control: Arc<dyn ProcessControl>,
    /// Trusted provider evidence; workload output never authors it.
    pub evidence: SandboxProcessEvidence,
}

impl fmt::Debug for SandboxProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxProcess")
            .field("evidence", &self.evidence)
            .finish_non_exhaustive()
    }
}
