//! The contract's required members over the pieces of this module.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    envelope::envelope,
    errors::{blocking, provider_error},
    inner::{LinuxProvider, INSTANCE_PREFIX, PROVIDER_ID, SNAPSHOT_PREFIX},
    instances::{instance_of, prepare_root},
    rollbacks::{ActivateRollback, InstanceRollback, NothingToUndo, SnapshotRollback},
};
use crate::store::{self, InstanceRecord, RECORD_REVISION};

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
        let (image, image_env) = inner.resolve_root(&request).await?;
        let id = store::fresh_id(INSTANCE_PREFIX, &inner.scope);
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
        let prepared = store::publish_dir(
            &inner.layout.instance_dir(&id),
            store::INSTANCE_RECORD,
            &rec,
        )
        .map_err(|e| provider_error(OP, format!("creating the instance directory: {e}")))
        .and_then(|()| {
            inner
                .prepare_dirs(&id, &request)
                .map_err(|m| provider_error(OP, m))
        });
        let prepared = match prepared {
            Ok(()) => {
                let (layout, images, rec) =
                    (inner.layout.clone(), inner.images.clone(), rec.clone());
                blocking(OP, move || {
                    let image = images
                        .resolve(rec.request.root_image.as_str())
                        .map_err(|e| e.to_string())?;
                    images.unpacked(&image).map_err(|e| e.to_string())?;
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
        let inner = &self.inner;
        let rec = inner.load_instance(op::WRITE_FILE, &request.instance_id)?;
        checkfu_sandbox_hostfs::write::write_file(&inner.layout, &rec.request, rec.state, request)
            .await
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        const OP: Operation = op::ACTIVATE;
        let inner = &self.inner;
        let mut rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Provisioning {
            return Err(SandboxError::conflict(OP, "provisioning", rec.state));
        }
        let rollback = Arc::new(ActivateRollback {
            inner: inner.clone(),
            instance_id: rec.instance_id.clone(),
        });
        rec.init = Some(inner.start_init(OP, &rec).await?);
        rec.state = InstanceState::Active;
        if let Err(e) = inner.save_instance(OP, &rec) {
            let _ = rollback.rollback().await;
            return Err(e);
        }
        Ok(Handoff {
            value: instance_of(&rec.request, &rec.instance_id, InstanceState::Active),
            rollback,
        })
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
        const OP: Operation = op::SNAPSHOT;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.request.profile.retention != RetentionMode::Durable {
            return Err(SandboxError::SandboxSnapshotForbidden {
                instance_id: rec.instance_id,
                retention: rec.request.profile.retention,
            });
        }
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state));
        }
        let snapshot = inner.capture(OP, &rec, request.expires_at).await?;
        Ok(Handoff {
            rollback: Arc::new(SnapshotRollback {
                inner: inner.clone(),
                member: Member::Snapshot,
                snapshot_id: snapshot.snapshot_id.clone(),
            }),
            value: snapshot,
        })
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        const OP: Operation = op::CLONE_SNAPSHOT;
        let inner = &self.inner;
        let source = inner.load_snapshot(OP, &request.source.snapshot_id)?;
        if source.snapshot != request.source {
            return Err(SandboxError::invalid_request(
                OP,
                "source",
                format!("{:?}", source.snapshot),
                format!("{:?}", request.source),
            ));
        }
        let cid = store::fresh_id(SNAPSHOT_PREFIX, &inner.scope);
        let rollback = Arc::new(SnapshotRollback {
            inner: inner.clone(),
            member: Member::CloneSnapshot,
            snapshot_id: cid.clone(),
        });
        match inner
            .clone_snapshot_into(&source, &request.target_session_id, &cid)
            .await
        {
            Ok(clone) => Ok(Handoff {
                value: clone,
                rollback,
            }),
            Err(e) => {
                let _ = rollback.rollback().await;
                Err(e)
            }
        }
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        const OP: Operation = op::RELEASE;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state));
        }
        match (rec.request.profile.retention, request.snapshot_expires_at) {
            (RetentionMode::Durable, Some(expires_at)) => {
                let snapshot = inner.capture(OP, &rec, expires_at).await?;
                let rollback = Arc::new(SnapshotRollback {
                    inner: inner.clone(),
                    member: Member::Release,
                    snapshot_id: snapshot.snapshot_id.clone(),
                });
                if let Err(e) = inner.destroy_instance(OP, &rec.instance_id).await {
                    let _ = rollback.rollback().await;
                    return Err(e);
                }
                Ok(Handoff {
                    value: ReleaseDisposition::Released { snapshot },
                    rollback,
                })
            }
            (RetentionMode::EphemeralZdr, None) => {
                inner.destroy_instance(OP, &rec.instance_id).await?;
                Ok(Handoff {
                    value: ReleaseDisposition::Destroyed,
                    rollback: Arc::new(NothingToUndo),
                })
            }
            (RetentionMode::Durable, None) => Err(SandboxError::invalid_request(
                OP,
                "snapshot_expires_at",
                "a retention deadline for a durable release",
                "absent",
            )),
            (RetentionMode::EphemeralZdr, Some(t)) => Err(SandboxError::invalid_request(
                OP,
                "snapshot_expires_at",
                "absent for an ephemeral_zdr release",
                t.to_string(),
            )),
        }
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        const OP: Operation = op::RESUME;
        let inner = &self.inner;
        inner.admit(OP, &request.request)?;
        let source = inner.load_snapshot(OP, &request.snapshot.snapshot_id)?;
        if source.snapshot != request.snapshot {
            return Err(SandboxError::invalid_request(
                OP,
                "snapshot",
                format!("{:?}", source.snapshot),
                format!("{:?}", request.snapshot),
            ));
        }
        let id = store::fresh_id(INSTANCE_PREFIX, &inner.scope);
        let rollback = Arc::new(InstanceRollback {
            inner: inner.clone(),
            member: Member::Resume,
            instance_id: id.clone(),
        });
        match inner.resume_into(&request.request, &source, &id).await {
            Ok(rec) => Ok(Handoff {
                value: instance_of(&rec.request, &id, InstanceState::Active),
                rollback,
            }),
            Err(e) => {
                let _ = rollback.rollback().await;
                Err(e)
            }
        }
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
