//! The members of [`Hooked`]: each records its call, passes its gate,
//! answers an injected failure or delegates, then lets the hooks mutate
//! what the inner provider returned.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::sweep::CleanupInventory;
use checkfu_sandbox_contract::*;

use super::wrap::{HookedControl, HookedMarker, HookedRollback};
use super::{lock, Hooked};

impl<P> Hooked<P> {
    /// The handoff with its value mutated and its rollback wrapped.
    fn handoff<T: 'static>(&self, operation: Operation, mut h: Handoff<T>) -> Handoff<T> {
        self.shared.mutate(operation, &mut h.value);
        Handoff {
            value: h.value,
            rollback: Arc::new(HookedRollback {
                shared: self.shared.clone(),
                name: format!("{operation}_rollback"),
                inner: h.rollback,
            }),
        }
    }

    fn offered<M: ?Sized>(&self, member: Operation, inner: Option<&M>) -> bool {
        inner.is_some() && !self.shared.hidden(member)
    }
}

/// The inner provider's optional member, which the accessor only offers
/// when it is present.
fn present<M: ?Sized>(member: Option<&M>) -> &M {
    member.expect("the double offers an optional member only when its inner provider does")
}

#[async_trait]
impl<P: SandboxProvider + 'static> SandboxProvider for Hooked<P> {
    fn provider_id(&self) -> &str {
        &self.id
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        lock(&self.shared.envelope)
            .clone()
            .unwrap_or_else(|| self.inner.capabilities())
    }

    fn transport_verdicts(&self) -> bool {
        self.inner.transport_verdicts()
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.shared.enter(op::PROVISION).await?;
        self.shared.keep_request(op::PROVISION, &request);
        let h = self.inner.provision(request).await?;
        Ok(self.handoff(op::PROVISION, h))
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        self.shared.enter(op::WRITE_FILE).await?;
        self.shared.keep_request(op::WRITE_FILE, &request);
        self.inner.write_file(request).await
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.shared.enter(op::ACTIVATE).await?;
        self.shared.keep_request(op::ACTIVATE, &request);
        let h = self.inner.activate(request).await?;
        Ok(self.handoff(op::ACTIVATE, h))
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        self.shared.enter(op::EXECUTE).await?;
        self.shared.keep_request(op::EXECUTE, &request);
        let mut result = self.inner.execute(request).await?;
        self.shared.mutate(op::EXECUTE, &mut result);
        Ok(result)
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        self.shared.enter(op::READ_FILE).await?;
        self.shared.keep_request(op::READ_FILE, &request);
        let mut content = self.inner.read_file(request).await?;
        self.shared.mutate(op::READ_FILE, &mut content);
        Ok(content)
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.shared.enter(op::SNAPSHOT).await?;
        self.shared.keep_request(op::SNAPSHOT, &request);
        let h = self.inner.snapshot(request).await?;
        Ok(self.handoff(op::SNAPSHOT, h))
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.shared.enter(op::CLONE_SNAPSHOT).await?;
        self.shared.keep_request(op::CLONE_SNAPSHOT, &request);
        let h = self.inner.clone_snapshot(request).await?;
        Ok(self.handoff(op::CLONE_SNAPSHOT, h))
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.shared.enter(op::RELEASE).await?;
        self.shared.keep_request(op::RELEASE, &request);
        let mut h = self.inner.release(request).await?;
        if let ReleaseDisposition::Released { snapshot } = &mut h.value {
            self.shared.mutate(op::RELEASE, snapshot);
        }
        Ok(self.handoff(op::RELEASE, h))
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.shared.enter(op::RESUME).await?;
        self.shared.keep_request(op::RESUME, &request);
        let h = self.inner.resume(request).await?;
        Ok(self.handoff(op::RESUME, h))
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.shared.enter(op::DESTROY).await?;
        self.shared.keep_request(op::DESTROY, &request);
        self.inner.destroy(request).await
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.shared.enter(op::DESTROY_SNAPSHOT).await?;
        self.shared.keep_request(op::DESTROY_SNAPSHOT, &request);
        self.inner.destroy_snapshot(request).await
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.shared.enter(op::CLEANUP).await?;
        self.shared.keep_request(op::CLEANUP, &request);
        let mut result = self.inner.cleanup(request).await?;
        self.shared.mutate(op::CLEANUP, &mut result);
        Ok(result)
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        self.offered(op::READ_FILES, self.inner.read_files())
            .then_some(self as &dyn ReadFilesMember)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        self.offered(op::LIST_DIR, self.inner.list_dir())
            .then_some(self as &dyn ListDirMember)
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        self.offered(op::LIST_PROJECT_DIR, self.inner.list_project_dir())
            .then_some(self as &dyn ListProjectDirMember)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        self.offered(op::OPEN_PROCESS, self.inner.open_process())
            .then_some(self as &dyn OpenProcessMember)
    }

    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        self.offered(op::BEGIN_ACTIVE_WRITE, self.inner.begin_active_write())
            .then_some(self as &dyn ActiveWriteMember)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        self.offered(op::RESOLVE_IMAGE, self.inner.resolve_image())
            .then_some(self as &dyn ResolveImageMember)
    }

    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        self.offered(op::CLEANUP_INVENTORY, self.inner.cleanup_inventory())
            .then_some(self as &dyn CleanupInventoryMember)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> ReadFilesMember for Hooked<P> {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        self.shared.enter(op::READ_FILES).await?;
        self.shared.keep_request(op::READ_FILES, &request);
        let mut result = present(self.inner.read_files()).read_files(request).await?;
        self.shared.mutate(op::READ_FILES, &mut result);
        Ok(result)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> ListDirMember for Hooked<P> {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        self.shared.enter(op::LIST_DIR).await?;
        self.shared.keep_request(op::LIST_DIR, &request);
        let mut result = present(self.inner.list_dir()).list_dir(request).await?;
        self.shared.mutate(op::LIST_DIR, &mut result);
        Ok(result)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> ListProjectDirMember for Hooked<P> {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        self.shared.enter(op::LIST_PROJECT_DIR).await?;
        self.shared.keep_request(op::LIST_PROJECT_DIR, &request);
        let mut result = present(self.inner.list_project_dir())
            .list_project_dir(request)
            .await?;
        self.shared.mutate(op::LIST_PROJECT_DIR, &mut result);
        Ok(result)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> OpenProcessMember for Hooked<P> {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        self.shared.enter(op::OPEN_PROCESS).await?;
        self.shared.keep_request(op::OPEN_PROCESS, &request);
        let mut process = present(self.inner.open_process())
            .open_process(request)
            .await?;
        self.shared.mutate(op::OPEN_PROCESS, &mut process.evidence);
        process.control = Arc::new(HookedControl {
            shared: self.shared.clone(),
            inner: process.control,
        });
        Ok(process)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> ActiveWriteMember for Hooked<P> {
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        self.shared.enter(op::BEGIN_ACTIVE_WRITE).await?;
        self.shared
            .keep_request(op::BEGIN_ACTIVE_WRITE, transaction.request());
        let deviation = lock(&self.shared.marker).clone();
        let marker = Arc::new(HookedMarker::new(transaction.marker(), deviation.clone()));
        let request = transaction.into_request();
        let mut outcome = present(self.inner.begin_active_write())
            .begin_active_write(ActiveWriteTransaction::new(request, marker.clone()))
            .await?;
        if let Some(error) = marker.failure_after() {
            return Err(error);
        }
        self.shared.mutate(op::BEGIN_ACTIVE_WRITE, &mut outcome);
        Ok(outcome)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> ResolveImageMember for Hooked<P> {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        self.shared.enter(op::RESOLVE_IMAGE).await?;
        self.shared
            .keep_request(op::RESOLVE_IMAGE, &reference.to_string());
        let mut pinned = present(self.inner.resolve_image())
            .resolve_image(reference)
            .await?;
        self.shared.mutate(op::RESOLVE_IMAGE, &mut pinned);
        Ok(pinned)
    }
}

#[async_trait]
impl<P: SandboxProvider + 'static> CleanupInventoryMember for Hooked<P> {
    async fn cleanup_inventory(&self) -> Result<CleanupInventory, SandboxError> {
        self.shared.enter(op::CLEANUP_INVENTORY).await?;
        let mut inventory = present(self.inner.cleanup_inventory())
            .cleanup_inventory()
            .await?;
        self.shared.mutate(op::CLEANUP_INVENTORY, &mut inventory);
        Ok(inventory)
    }
}
