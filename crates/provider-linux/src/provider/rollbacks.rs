//! The rollbacks of allocating calls, each undoing exactly what its call
//! allocated.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::*;

use super::inner::Inner;

/// Rollback of an instance allocation (provision, resume): destroys the
/// instance id captured at allocation.
pub(super) struct InstanceRollback {
    pub(super) inner: Arc<Inner>,
    pub(super) member: Member,
    pub(super) instance_id: String,
}

#[async_trait]
impl Rollback for InstanceRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = Operation::Rollback(self.member);
        self.inner.destroy_instance(op, &self.instance_id).await
    }
}

/// Rollback of an activation: kills the init (and with it every process
/// and mount of the instance) and puts the record back to `provisioning`
/// (if the instance still exists).
pub(super) struct ActivateRollback {
    pub(super) inner: Arc<Inner>,
    pub(super) instance_id: String,
}

#[async_trait]
impl Rollback for ActivateRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        const OP: Operation = Operation::Rollback(Member::Activate);
        match self.inner.load_instance(OP, &self.instance_id) {
            Ok(mut rec) => {
                self.inner.stop_init(OP, &rec).await?;
                rec.state = InstanceState::Provisioning;
                rec.init = None;
                self.inner.save_instance(OP, &rec)
            }
            Err(SandboxError::SandboxInstanceNotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Rollback of a snapshot allocation (snapshot, clone, durable release).
pub(super) struct SnapshotRollback {
    pub(super) inner: Arc<Inner>,
    pub(super) member: Member,
    pub(super) snapshot_id: String,
}

#[async_trait]
impl Rollback for SnapshotRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = Operation::Rollback(self.member);
        self.inner
            .destroy_snapshot_inner(op, &self.snapshot_id)
            .await
    }
}

/// Rollback of an allocation that left nothing to undo (a ZDR release).
pub(super) struct NothingToUndo;

#[async_trait]
impl Rollback for NothingToUndo {
    async fn rollback(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}
