//! beginActiveWrite on Docker: the shared journal, publication and
//! recovery of [`checkfu_sandbox_hostfs::active_write`] (its module
//! documentation lists the steps), with the workload paused and resumed
//! through the daemon (`docker pause` / `docker unpause` of the instance's
//! container) and seen paused in the container's `State.Paused` (decision
//! `027-active-write-journal`).
//!
//! Recovery runs at [`DockerProvider::connect`] (also
//! [`DockerProvider::recover_active_writes`]).

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::active_write::{self as shared, ActiveWriteHost, ActiveWriteInstance};

use crate::provider::DockerProvider;
use crate::store::{self, InstanceRecord, Layout};

pub use checkfu_sandbox_hostfs::active_write::{ActiveWriteRecovery, ActiveWriteStep, StepHook};

/// The Docker provider as the shared code's [`ActiveWriteHost`].
struct DockerHost<'a>(&'a DockerProvider);

impl DockerHost<'_> {
    fn load(&self, id: &str) -> Result<InstanceRecord, SandboxError> {
        let not_found = || SandboxError::SandboxInstanceNotFound {
            instance_id: id.to_owned(),
        };
        match store::read_record::<InstanceRecord>(&self.0.inner.layout.instance_record(id)) {
            Ok(Some(rec)) if rec.scope == self.0.inner.scope => Ok(rec),
            Ok(_) => Err(not_found()),
            Err(m) => Err(SandboxError::failed(
                op::BEGIN_ACTIVE_WRITE,
                FailureReason::ProviderError,
                m,
            )),
        }
    }

    /// The instance's container: the pooled container its record names
    /// (a warm-pool claim), else `checkfu-<id>`.
    fn container(&self, id: &str) -> String {
        self.load(id)
            .ok()
            .and_then(|rec| rec.pool_container)
            .unwrap_or_else(|| crate::provider::container_name(id))
    }
}

#[async_trait]
impl ActiveWriteHost for DockerHost<'_> {
    fn provider_name(&self) -> &str {
        crate::PROVIDER_ID
    }

    fn layout(&self) -> &Layout {
        &self.0.inner.layout
    }

    fn instance(&self, instance_id: &str) -> Result<ActiveWriteInstance, SandboxError> {
        let rec = self.load(instance_id)?;
        Ok(ActiveWriteInstance {
            instance_id: rec.instance_id,
            state: rec.state,
            request: rec.request,
        })
    }

    /// The container's `State.Paused`; `None` when it does not exist.
    async fn workload_paused(&self, instance_id: &str) -> Result<Option<bool>, String> {
        crate::daemon::inspect_container(self.0.docker(), &self.container(instance_id))
            .await
            .map(|c| c.map(|c| c.state.and_then(|s| s.paused).unwrap_or(false)))
            .map_err(|e| e.to_string())
    }

    async fn pause_workload(&self, instance_id: &str) -> Result<(), String> {
        self.0
            .docker()
            .pause_container(&self.container(instance_id))
            .await
            .map_err(|e| e.to_string())
    }

    async fn unpause_workload(&self, instance_id: &str) -> Result<(), String> {
        self.0
            .docker()
            .unpause_container(&self.container(instance_id))
            .await
            .map_err(|e| e.to_string())
    }

    fn reached(&self, step: ActiveWriteStep) {
        if let Some(h) = self.0.inner.active_write_hook.get() {
            h(step);
        }
    }
}

impl DockerProvider {
    /// Sets the hook called at each [`ActiveWriteStep`] (once per
    /// provider object; later calls are ignored). A crash-test seam.
    pub fn set_active_write_step_hook(&self, hook: StepHook) {
        let _ = self.inner.active_write_hook.set(hook);
    }

    /// Recovery of every instance of this provider's scope
    /// ([`checkfu_sandbox_hostfs::active_write::recover`]): dispatched
    /// journals rolled back from their evidence, committed ones finished
    /// forward, open ones left to their callers, inherited pause tokens
    /// taken over and released.
    ///
    /// # Errors
    /// `SandboxOperationFailed{begin_active_write, provider_error}` naming
    /// what could not be recovered (the rest is still attempted first).
    pub async fn recover_active_writes(&self) -> Result<ActiveWriteRecovery, SandboxError> {
        shared::recover(&DockerHost(self)).await
    }
}

#[async_trait]
impl ActiveWriteMember for DockerProvider {
    /// See [`checkfu_sandbox_hostfs::active_write`].
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        shared::begin(&DockerHost(self), transaction).await
    }
}
