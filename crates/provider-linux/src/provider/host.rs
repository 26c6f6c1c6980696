//! This provider as the shared lifecycle code sees it
//! ([`checkfu_sandbox_hostfs::host`]): its records, and what undoing an
//! activation means here (the init goes, and every process and mount of
//! the instance with it).

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::host::{HostInstances, InstanceRecordView};

use super::inner::Inner;
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

    /// Kills the init (and with it every process and mount of the
    /// instance); the record forgets it.
    async fn deactivate(
        &self,
        operation: Operation,
        _id: &str,
        record: Option<&mut InstanceRecord>,
    ) -> Result<(), SandboxError> {
        if let Some(rec) = record {
            self.stop_init(operation, rec).await?;
            rec.state = InstanceState::Provisioning;
            rec.init = None;
        }
        Ok(())
    }
}
