//! [`SandboxProvider`] and the optional member traits over the wire, and
//! the handoff's [`Rollback`].

use super::*;

/// A handoff's rollback over the wire: `sandbox/rollback {handle}` each
/// time it is run; `sandbox/commit {handle}` when the runner drops it
/// (it took ownership of the value, or it is done rolling back).
pub(super) struct WireRollback {
    pub(super) conn: Arc<Conn>,
    pub(super) handle: String,
    pub(super) member: Member,
}

#[async_trait]
impl Rollback for WireRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = Operation::Rollback(self.member);
        let v = self
            .conn
            .call(
                op,
                method::ROLLBACK,
                &HandleParams {
                    handle: self.handle.clone(),
                },
                false,
                Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS + 5),
            )
            .await?;
        if v.is_null() {
            Ok(())
        } else {
            Err(SandboxError::protocol(
                op,
                ".",
                "null",
                excerpt(&v.to_string()),
            ))
        }
    }
}

impl Drop for WireRollback {
    fn drop(&mut self) {
        // Run or not, the runner is done with this handle: release it.
        self.conn.notify(
            method::COMMIT,
            &HandleParams {
                handle: self.handle.clone(),
            },
        );
    }
}

#[async_trait]
impl SandboxProvider for WireClient {
    fn provider_id(&self) -> &str {
        &self.init.provider_id
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        self.envelope()
    }

    /// The client judges the bytes its provider sends: its
    /// `SandboxProtocolInvalid` errors (`line`, `error`, `decode_*`) are
    /// its own verdicts, and a runtime-only tag the served provider writes
    /// is refused here, naming `error` (see `conn::refuse_forged_tag`).
    fn transport_verdicts(&self) -> bool {
        true
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.handoff(
            Member::Provision,
            method::PROVISION,
            WireType::Instance,
            &request,
        )
        .await
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        self.call_unit(
            op::WRITE_FILE,
            method::WRITE_FILE,
            WireType::WriteFileResult,
            &request,
        )
        .await
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.handoff(
            Member::Activate,
            method::ACTIVATE,
            WireType::Instance,
            &request,
        )
        .await
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        let own =
            Duration::from_secs(u64::from(request.command.timeout_seconds) + EXECUTE_GRACE_SECONDS);
        let deadline = own.max(self.conn.options.call_timeout);
        let v = self
            .conn
            .call(op::EXECUTE, method::EXECUTE, &request, false, deadline)
            .await;
        decode_value(WireType::CommandResult, &v?)
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        self.call(
            op::READ_FILE,
            method::READ_FILE,
            WireType::FileContent,
            &request,
        )
        .await
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.handoff(
            Member::Snapshot,
            method::SNAPSHOT,
            WireType::Snapshot,
            &request,
        )
        .await
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.handoff(
            Member::CloneSnapshot,
            method::CLONE_SNAPSHOT,
            WireType::Snapshot,
            &request,
        )
        .await
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.handoff(
            Member::Release,
            method::RELEASE,
            WireType::ReleaseDisposition,
            &request,
        )
        .await
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.handoff(Member::Resume, method::RESUME, WireType::Instance, &request)
            .await
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.call_unit(
            op::DESTROY,
            method::DESTROY,
            WireType::DestroyResult,
            &request,
        )
        .await
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.call_unit(
            op::DESTROY_SNAPSHOT,
            method::DESTROY_SNAPSHOT,
            WireType::DestroySnapshotResult,
            &request,
        )
        .await
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.call(
            op::CLEANUP,
            method::CLEANUP,
            WireType::CleanupResult,
            &request,
        )
        .await
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        self.has(OptionalMember::ReadFiles).then_some(self as _)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        self.has(OptionalMember::ListDir).then_some(self as _)
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        self.has(OptionalMember::ListProjectDir)
            .then_some(self as _)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        self.has(OptionalMember::OpenProcess).then_some(self as _)
    }

    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        self.has(OptionalMember::BeginActiveWrite)
            .then_some(self as _)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        self.has(OptionalMember::ResolveImage).then_some(self as _)
    }
}

#[async_trait]
impl ResolveImageMember for WireClient {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        let pinned: ImageReferenceParams = self
            .call(
                op::RESOLVE_IMAGE,
                method::RESOLVE_IMAGE,
                WireType::ImageReference,
                &ImageReferenceParams {
                    reference: reference.to_owned(),
                },
            )
            .await?;
        Ok(pinned.reference)
    }
}

impl WireClient {
    pub(super) fn has(&self, m: OptionalMember) -> bool {
        self.init.members.contains(&m)
    }
}

#[async_trait]
impl ReadFilesMember for WireClient {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        self.call(
            op::READ_FILES,
            method::READ_FILES,
            WireType::ReadFilesResult,
            &request,
        )
        .await
    }
}

#[async_trait]
impl ListDirMember for WireClient {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        self.call(
            op::LIST_DIR,
            method::LIST_DIR,
            WireType::ListDirResult,
            &request,
        )
        .await
    }
}

#[async_trait]
impl ListProjectDirMember for WireClient {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        self.call(
            op::LIST_PROJECT_DIR,
            method::LIST_PROJECT_DIR,
            WireType::ListProjectDirResult,
            &request,
        )
        .await
    }
}

#[async_trait]
impl ActiveWriteMember for WireClient {
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        /// Unregisters the marker however the call ends.
        struct Registered<'a>(&'a Conn, String);
        impl Drop for Registered<'_> {
            fn drop(&mut self) {
                self.0.lock().markers.remove(&self.1);
            }
        }
        let request = transaction.request();
        self.conn
            .lock()
            .markers
            .insert(request.transaction_id.clone(), transaction.marker());
        let _registered = Registered(&self.conn, request.transaction_id.clone());
        self.call(
            op::BEGIN_ACTIVE_WRITE,
            method::BEGIN_ACTIVE_WRITE,
            WireType::ActiveWriteOutcome,
            request,
        )
        .await
    }
}

#[async_trait]
impl OpenProcessMember for WireClient {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        let v = self
            .conn
            .call(
                op::OPEN_PROCESS,
                method::OPEN_PROCESS,
                &request,
                false,
                self.conn.options.call_timeout,
            )
            .await;
        let opened = v.and_then(|v| {
            decode_value::<OpenProcessResult>(WireType::OpenProcessResult, &v)
                .and_then(|opened| crate::process::client_process(&self.conn, opened))
        });
        // The process exists before the envelope is asked again: a caller
        // that stops observing drops it like any other.
        self.refresh_capabilities(method::OPEN_PROCESS, opened.as_ref().err())
            .await;
        opened
    }
}
