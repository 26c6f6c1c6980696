//! beginActiveWrite on Linux: the shared journal, publication and recovery
//! of [`checkfu_sandbox_hostfs::active_write`] (its module documentation
//! lists the steps), with the workload paused by the instance's cgroup
//! freezer ([`crate::cgroup::InstanceCgroups::freeze`]: v1 `freezer.state`,
//! v2 `cgroup.freeze`). Every process of an instance is in its cgroups
//! before it runs workload code, so a frozen group runs none of it while
//! the batch moves into the mount's host directory. Offered only where the
//! host has a freezer ([`crate::cgroup::FreezerSupport`]).
//!
//! Recovery runs when the provider is constructed ([`LinuxProvider::new`];
//! also [`LinuxProvider::recover_active_writes`]).

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::active_write::{
    self as shared, ActiveWriteHost, ActiveWriteInstance, ActiveWriteRecovery, ActiveWriteStep,
    StepHook,
};

use super::errors::blocking;
use super::inner::{LinuxProvider, PROVIDER_ID};
use crate::cgroup::{FreezerSupport, InstanceCgroups};
use crate::store::Layout;

const OP: Operation = op::BEGIN_ACTIVE_WRITE;

/// The Linux provider as the shared code's [`ActiveWriteHost`].
struct LinuxHost<'a>(&'a LinuxProvider);

impl LinuxHost<'_> {
    fn cgroups(&self, instance_id: &str) -> Result<InstanceCgroups, String> {
        let i = &self.0.inner;
        let version = i
            .cgroup_version
            .ok_or_else(|| "the provider runs without cgroups".to_owned())?;
        Ok(InstanceCgroups::new(version, &i.scope, instance_id))
    }

    /// Runs a freezer operation of `instance_id`'s cgroups off the executor.
    async fn freezer<T: Send + 'static>(
        &self,
        instance_id: &str,
        f: impl FnOnce(&InstanceCgroups) -> std::io::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let cg = self.cgroups(instance_id)?;
        blocking(OP, move || f(&cg))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl ActiveWriteHost for LinuxHost<'_> {
    fn provider_name(&self) -> &str {
        PROVIDER_ID
    }

    fn layout(&self) -> &Layout {
        &self.0.inner.layout
    }

    fn instance(&self, instance_id: &str) -> Result<ActiveWriteInstance, SandboxError> {
        let rec = self.0.inner.load_instance(OP, instance_id)?;
        Ok(ActiveWriteInstance {
            instance_id: rec.instance_id,
            state: rec.state,
            request: rec.request,
        })
    }

    /// The freezer's state; `None` when the instance's cgroups are gone.
    async fn workload_paused(&self, instance_id: &str) -> Result<Option<bool>, String> {
        self.freezer(instance_id, InstanceCgroups::frozen).await
    }

    async fn pause_workload(&self, instance_id: &str) -> Result<(), String> {
        self.freezer(instance_id, InstanceCgroups::freeze).await
    }

    async fn unpause_workload(&self, instance_id: &str) -> Result<(), String> {
        self.freezer(instance_id, InstanceCgroups::thaw).await
    }

    fn reached(&self, step: ActiveWriteStep) {
        if let Some(h) = self.0.inner.active_write_hook.get() {
            h(step);
        }
    }
}

impl LinuxProvider {
    /// Whether this host has a cgroup freezer (probed once per process);
    /// the envelope offers `active_mount_write` only when it does.
    pub fn freezer_support(&self) -> FreezerSupport {
        FreezerSupport::probe_cached()
    }

    /// Sets the hook called at each [`ActiveWriteStep`] (once per
    /// provider object; later calls are ignored). A crash-test seam.
    pub fn set_active_write_step_hook(&self, hook: StepHook) {
        let _ = self.inner.active_write_hook.set(hook);
    }

    /// Recovery of every instance of this provider's scope
    /// ([`checkfu_sandbox_hostfs::active_write::recover`]): dispatched
    /// journals rolled back from their evidence, committed ones finished
    /// forward, open ones left to their callers, inherited pause tokens
    /// taken over and the workloads thawed.
    ///
    /// # Errors
    /// `SandboxOperationFailed{begin_active_write, provider_error}` naming
    /// what could not be recovered (the rest is still attempted first).
    ///
    /// # Cancel safety
    /// As [`checkfu_sandbox_hostfs::active_write::recover`]: a dropped call
    /// leaves work a later call or a redelivery finishes.
    pub async fn recover_active_writes(&self) -> Result<ActiveWriteRecovery, SandboxError> {
        shared::recover(&LinuxHost(self)).await
    }

    /// [`LinuxProvider::recover_active_writes`] from synchronous code (the
    /// constructor), on a thread with a runtime of its own so that it may
    /// be called from inside a runtime too.
    pub(super) fn recover_active_writes_blocking(&self) {
        let provider = self.clone();
        let outcome = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
                .and_then(|rt| {
                    rt.block_on(provider.recover_active_writes())
                        .map_err(|e| e.to_string())
                })
        })
        .join();
        match outcome {
            Ok(Ok(_)) => {}
            // A failure is reported and retried by the next delivery of
            // the same transaction.
            Ok(Err(e)) => tracing::warn!(error = %e, "active-write recovery incomplete"),
            Err(_) => tracing::warn!("active-write recovery panicked"),
        }
    }
}

#[async_trait]
impl ActiveWriteMember for LinuxProvider {
    /// See [`checkfu_sandbox_hostfs::active_write`]; the workload is paused
    /// with the cgroup freezer.
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        shared::begin(&LinuxHost(self), transaction).await
    }
}
