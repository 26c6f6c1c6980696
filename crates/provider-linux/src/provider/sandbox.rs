//! The contract's required members over the pieces of this module.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::lifecycle;
use checkfu_sandbox_hostfs::rollbacks::InstanceRollback;

use super::{
    envelope::envelope,
    errors::blocking,
    inner::{LinuxProvider, PROVIDER_ID},
    instances::{instance_of, ProvisionFailure},
};

#[async_trait]
impl SandboxProvider for LinuxProvider {
    fn provider_id(&self) -> &str {
        PROVIDER_ID
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        envelope()
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        const OP: Operation = op::PROVISION;
        let inner = &self.inner;
        inner.admit(OP, &request)?;
        let id = lifecycle::fresh_instance_id(&**inner);
        let rollback = Arc::new(InstanceRollback {
            inner: inner.clone(),
            member: Member::Provision,
            instance_id: id.clone(),
        });
        let (task, task_request, task_id) = (inner.clone(), request.clone(), id.clone());
        let failed =
            match blocking(OP, move || task.provision_blocking(&task_request, &task_id)).await {
                Ok(Ok(())) => None,
                Ok(Err(ProvisionFailure::Nothing(e))) => return Err(e),
                Ok(Err(ProvisionFailure::Partly(e))) | Err(e) => Some(e),
            };
        if let Some(e) = failed {
            let _ = rollback.rollback().await;
            return Err(e);
        }
        Ok(Handoff {
            value: instance_of(&request, &id, InstanceState::Provisioning),
            rollback,
        })
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        lifecycle::write_file(&*self.inner, request).await
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        lifecycle::activate(&self.inner, request).await
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        self.inner.execute(request).await
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        checkfu_sandbox_hostfs::reads::read_file(&*self.inner, request).await
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        lifecycle::snapshot(&self.inner, request).await
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        lifecycle::clone_snapshot(&self.inner, request).await
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        lifecycle::release(&self.inner, request).await
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        lifecycle::resume(&self.inner, request).await
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.inner
            .destroy_instance(op::DESTROY, &request.instance_id)
            .await
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.inner
            .destroy_snapshot_inner(op::DESTROY_SNAPSHOT, &request.snapshot_id)
            .await
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.inner.cleanup(request).await
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        Some(self)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        Some(self)
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        Some(self)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        Some(self)
    }

    /// Present where the envelope offers `active_mount_write` (the host
    /// has a cgroup freezer).
    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        self.freezer_support().is_available().then_some(self as _)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        Some(self)
    }

    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        Some(self)
    }
}
