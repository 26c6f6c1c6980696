//! The rollbacks of a host-side provider's allocating calls, each undoing
//! exactly what its call allocated, over the provider's
//! [`HostInstances`].

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::{Member, Operation, Rollback, SandboxError};

use crate::host::HostInstances;

/// Rollback of an instance allocation (provision, resume): destroys the
/// instance id captured at allocation.
pub struct InstanceRollback<H> {
    /// The provider.
    pub inner: Arc<H>,
    /// The allocating member.
    pub member: Member,
    /// The instance it allocated.
    pub instance_id: String,
}

#[async_trait]
impl<H: HostInstances> Rollback for InstanceRollback<H> {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = Operation::Rollback(self.member);
        self.inner.destroy_instance(op, &self.instance_id).await
    }
}

/// Rollback of an activation: undoes what the activation started
/// ([`HostInstances::deactivate`]) and puts the record back to
/// `provisioning` (if the instance still exists).
pub struct ActivateRollback<H> {
    /// The provider.
    pub inner: Arc<H>,
    /// The activated instance.
    pub instance_id: String,
}

#[async_trait]
impl<H: HostInstances> Rollback for ActivateRollback<H> {
    async fn rollback(&self) -> Result<(), SandboxError> {
        const OP: Operation = Operation::Rollback(Member::Activate);
        let mut rec = match self.inner.load_instance(OP, &self.instance_id) {
            Ok(rec) => Some(rec),
            Err(SandboxError::SandboxInstanceNotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        self.inner
            .deactivate(OP, &self.instance_id, rec.as_mut())
            .await?;
        match rec {
            Some(rec) => self.inner.save_instance(OP, &rec),
            None => Ok(()),
        }
    }
}

/// Rollback of a snapshot allocation (snapshot, clone, durable release).
pub struct SnapshotRollback<H> {
    /// The provider.
    pub inner: Arc<H>,
    /// The allocating member.
    pub member: Member,
    /// The snapshot it allocated.
    pub snapshot_id: String,
}

#[async_trait]
impl<H: HostInstances> Rollback for SnapshotRollback<H> {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = Operation::Rollback(self.member);
        self.inner.destroy_snapshot(op, &self.snapshot_id).await
    }
}

/// Rollback of an allocation that left nothing to undo (a ZDR release).
pub struct NothingToUndo;

#[async_trait]
impl Rollback for NothingToUndo {
    async fn rollback(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}
