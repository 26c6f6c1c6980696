//! This provider as the shared lifecycle code sees it
//! ([`checkfu_sandbox_hostfs::host`]): its records, and what undoing an
//! activation means here (the container goes, unless it is a claimed
//! pool container).

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::host::{HostInstances, InstanceRecordView};

use super::{errors::daemon_error, inner::Inner, labels::container_name};
use crate::daemon;
use crate::store::{InstanceRecord, Layout};

impl InstanceRecordView for InstanceRecord {
    fn state(&self) -> InstanceState {
        self.state
    }

    fn request(&self) -> &SandboxProvisionRequest {
        &self.request
    }
}

#[async_trait]
impl HostInstances for Inner {
    type Record = InstanceRecord;

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn load_instance(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<InstanceRecord, SandboxError> {
        Inner::load_instance(self, operation, id)
    }

    fn save_instance(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        Inner::save_instance(self, operation, rec)
    }

    async fn destroy_instance(&self, operation: Operation, id: &str) -> Result<(), SandboxError> {
        Inner::destroy_instance(self, operation, id).await
    }

    async fn destroy_snapshot(&self, operation: Operation, id: &str) -> Result<(), SandboxError> {
        self.destroy_snapshot_inner(operation, id).await
    }

    /// Removes the container. A pooled instance's container was started at
    /// provision, not by the activation, and nothing ran in it: it stays,
    /// and only the state goes back.
    async fn deactivate(
        &self,
        operation: Operation,
        id: &str,
        record: Option<&mut InstanceRecord>,
    ) -> Result<(), SandboxError> {
        let pooled = record.as_ref().is_some_and(|r| r.pool_container.is_some());
        if !pooled {
            daemon::remove_container(&self.docker, &container_name(id))
                .await
                .map_err(|e| daemon_error(operation, &e))?;
        }
        if let Some(rec) = record {
            rec.state = InstanceState::Provisioning;
        }
        Ok(())
    }
}
