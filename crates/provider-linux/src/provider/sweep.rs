//! What exists of this scope (from the state directory, and the provider's
//! cgroups for instances whose directory is gone), and cleanup of orphans
//! and expired objects.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::records::{StoredInstance as _, StoredSnapshot as _};
use checkfu_sandbox_hostfs::sweep_rule;

use super::inner::{Inner, LinuxProvider, INSTANCE_PREFIX};
use crate::store::{self, InstanceRecord, SnapshotRecord};

pub use checkfu_sandbox_hostfs::sweep_rule::ObjectTimes;

/// Everything of this provider's scope that exists now, observed from the
/// state directory and the provider's cgroup directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Instances by id (a cgroup directory without a record is an instance
    /// with unknown times).
    pub instances: BTreeMap<String, ObjectTimes>,
    /// Snapshots by id.
    pub snapshots: BTreeMap<String, ObjectTimes>,
}

impl LinuxProvider {
    /// Everything of this scope that exists now (see [`Inventory`]).
    ///
    /// # Errors
    ///
    /// `SandboxOperationFailed{provider_error}` when the state directory
    /// cannot be read.
    pub async fn inventory(&self) -> Result<Inventory, SandboxError> {
        self.inner.inventory().await
    }

    /// Destroys every instance and then every snapshot of this scope, attempting
    /// each one. Returns one line per object that could not be destroyed
    /// (empty when all were); used by teardown that must leave nothing.
    pub async fn destroy_all(&self) -> Vec<String> {
        let inv = match self.inventory().await {
            Ok(inv) => inv,
            Err(e) => return vec![format!("inventory: {e}")],
        };
        sweep_rule::destroy_every(&*self.inner, inv.instances.keys(), inv.snapshots.keys()).await
    }
}

impl Inner {
    pub(super) async fn inventory(&self) -> Result<Inventory, SandboxError> {
        const OP: Operation = op::CLEANUP;
        let mut inv = Inventory::default();
        // The state directory.
        let (recs, snaps) = sweep_rule::recorded_objects::<InstanceRecord, SnapshotRecord>(
            OP,
            &self.layout,
            &self.scope,
        )
        .await?;
        for (id, rec) in recs {
            inv.instances
                .insert(id, rec.map(|r| r.times()).unwrap_or_default());
        }
        for (id, rec) in snaps {
            inv.snapshots
                .insert(id, rec.map(|r| r.times()).unwrap_or_default());
        }
        // Cgroup directories of instances whose directory is gone (a crash
        // between the two removals).
        if let Some(version) = self.cgroup_version {
            let scope_dir = crate::cgroup::InstanceCgroups::new(version, &self.scope, "x");
            for dir in scope_dir.dirs() {
                let Some(parent) = dir.parent() else { continue };
                // The provider's own cgroup directory.
                #[allow(clippy::disallowed_methods)]
                let listed = std::fs::read_dir(parent);
                for e in listed.into_iter().flatten().filter_map(Result::ok) {
                    if let Some(id) = e.file_name().to_str() {
                        if store::is_id(INSTANCE_PREFIX, id) {
                            inv.instances.entry(id.to_owned()).or_default();
                        }
                    }
                }
            }
        }
        Ok(inv)
    }
}

impl Inner {
    pub(super) async fn cleanup(
        &self,
        request: CleanupRequest,
    ) -> Result<CleanupResult, SandboxError> {
        const OP: Operation = op::CLEANUP;
        let inner = self;
        let inv = inner.inventory().await?;
        // The contract's rule; unknown times count as orphaned and expired.
        let result = request.would_sweep(&crate::members::candidates(&inv));
        // Instances first, then snapshots; a few at once, every object
        // attempted, and the first failure reported after.
        let outcomes = sweep_rule::sweep_planned(inner, OP, &result, |id| {
            Box::pin(async move { (id.to_owned(), inner.destroy_instance(OP, id).await) })
        })
        .await;
        let first_failure = outcomes.into_iter().find_map(|(_, outcome)| outcome.err());
        if let Some(version) = inner.cgroup_version {
            let scope = inner.scope.clone();
            let _ = tokio::task::spawn_blocking(move || {
                crate::cgroup::remove_scope_dirs(version, &scope);
            })
            .await;
        }
        if let Some(e) = first_failure {
            return Err(e);
        }
        let leftovers = inner.egress_sweep().await;
        if !leftovers.is_empty() {
            return Err(SandboxError::failed(
                OP,
                FailureReason::ProviderError,
                format!("allowlist plumbing left: {}", leftovers.join("; ")),
            ));
        }
        Ok(result)
    }
}
