//! The rollbacks of allocating calls, each undoing exactly what its call
//! allocated.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::*;

use super::{errors::daemon_error, inner::Inner, labels::container_name};
use crate::daemon;

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

/// Rollback of an activation: removes the container and puts the record
/// back to `provisioning` (if the instance still exists). A pooled
/// instance's container was started at provision, not by the activation,
/// and nothing ran in it: it stays, and only the state goes back.
pub(super) struct ActivateRollback {
    pub(super) inner: Arc<Inner>,
    pub(super) instance_id: String,
}

#[async_trait]
impl Rollback for ActivateRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        const OP: Operation = Operation::Rollback(Member::Activate);
        let pooled = match self.inner.load_instance(OP, &self.instance_id) {
            Ok(rec) => rec.pool_container.is_some(),
            Err(SandboxError::SandboxInstanceNotFound { .. }) => false,
            Err(e) => return Err(e),
        };
        if !pooled {
            daemon::remove_container(&self.inner.docker, &container_name(&self.instance_id))
                .await
                .map_err(|e| daemon_error(OP, &e))?;
        }
        match self.inner.load_instance(OP, &self.instance_id) {
            Ok(mut rec) => {
                rec.state = InstanceState::Provisioning;
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
