//! This provider as the shared lifecycle flows see it
//! ([`checkfu_sandbox_hostfs::lifecycle`]): its scope, admission and
//! snapshot records, and the backend steps of activation, capture, clone
//! and resume (in [`super::snapshots`]).

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::instance::HostProviderIdentity;
use checkfu_sandbox_hostfs::lifecycle::HostLifecycle;

use super::{inner::Inner, instances::IDENTITY};
use crate::store::{InstanceRecord, SnapshotRecord};

#[async_trait]
impl HostLifecycle for Inner {
    type Snapshot = SnapshotRecord;

    fn identity(&self) -> &HostProviderIdentity {
        &IDENTITY
    }

    fn scope(&self) -> &str {
        &self.scope
    }

    fn admit(
        &self,
        operation: Operation,
        request: &SandboxProvisionRequest,
    ) -> Result<(), SandboxError> {
        Inner::admit(self, operation, request)
    }

    fn load_snapshot(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<SnapshotRecord, SandboxError> {
        Inner::load_snapshot(self, operation, id)
    }

    /// Starts the container, unless the instance claimed a pooled one:
    /// that was started when the pool filled, and activation only records
    /// the state; then captures the exec route of its commands.
    async fn start_workload(
        &self,
        operation: Operation,
        rec: &mut InstanceRecord,
    ) -> Result<(), SandboxError> {
        if rec.pool_container.is_none() {
            self.start_container(operation, rec).await?;
        }
        // Before any workload command runs: what the host exec path enters.
        self.capture_exec_route(rec).await;
        Ok(())
    }

    async fn capture_into(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        expires_at: Timestamp,
        sid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        Inner::capture_into(self, operation, rec, expires_at, sid).await
    }

    async fn clone_snapshot_into(
        &self,
        source: &SnapshotRecord,
        target_session_id: &str,
        cid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        Inner::clone_snapshot_into(self, source, target_session_id, cid).await
    }

    async fn resume_into(
        &self,
        request: &SandboxProvisionRequest,
        source: &SnapshotRecord,
        id: &str,
    ) -> Result<InstanceRecord, SandboxError> {
        Inner::resume_into(self, request, source, id).await
    }
}
