//! The contract's required members over the pieces of this module.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::rollbacks::InstanceRollback;
use checkfu_sandbox_hostfs::{lifecycle, snapshot_files};

use super::{
    envelope::envelope,
    errors::{blocking, provider_error},
    inner::{LinuxProvider, PROVIDER_ID},
    instances::{instance_of, prepare_root},
};
use crate::store::{InstanceRecord, RECORD_REVISION};

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
        let stored = inner.resolve_root(&request).await?;
        let (image, image_env) = (stored.manifest_hex.clone(), stored.env.clone());
        let id = lifecycle::fresh_instance_id(&**inner);
        let rollback = Arc::new(InstanceRollback {
            inner: inner.clone(),
            member: Member::Provision,
            instance_id: id.clone(),
        });
        let rec = InstanceRecord {
            record_revision: RECORD_REVISION,
            scope: inner.scope.clone(),
            instance_id: id.clone(),
            created_at: inner.clock.now(),
            state: InstanceState::Provisioning,
            request: request.clone(),
            image,
            image_env,
            root_mode: inner.root_mode,
            init: None,
            resumed_from: None,
        };
        let prepared =
            snapshot_files::publish_instance(OP, &inner.layout, &id, &rec).and_then(|()| {
                inner
                    .prepare_dirs(&id, &request)
                    .map_err(|m| provider_error(OP, m))
            });
        let prepared = match prepared {
            Ok(()) => {
                let (layout, images, rec) =
                    (inner.layout.clone(), inner.images.clone(), rec.clone());
                blocking(OP, move || {
                    images.unpacked(&stored).map_err(|e| e.to_string())?;
                    prepare_root(&layout, &images, &rec, true)
                })
                .await
                .and_then(|r| r.map_err(|m| provider_error(OP, m)))
            }
            Err(e) => Err(e),
        };
        if let Err(e) = prepared {
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
