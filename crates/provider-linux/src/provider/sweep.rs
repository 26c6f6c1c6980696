//! What exists of this scope (from the state directory, and the provider's
//! cgroups for instances whose directory is gone), and cleanup of orphans
//! and expired objects.

use std::collections::BTreeMap;
use std::path::Path;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use futures_util::StreamExt as _;

use super::{
    errors::blocking,
    inner::{Inner, LinuxProvider, INSTANCE_PREFIX, SNAPSHOT_PREFIX},
};
use crate::store::{self, InstanceRecord, SnapshotRecord};

/// How many orphans a sweep destroys at once.
pub(super) const SWEEP_CONCURRENCY: usize = 8;

/// Creation and expiry of a live object, when known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectTimes {
    /// `created_at`, from the record.
    pub created_at: Option<Timestamp>,
    /// `expires_at`, from the record.
    pub expires_at: Option<Timestamp>,
}

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
        let mut problems = Vec::new();
        for id in inv.instances.keys() {
            if let Err(e) = self.inner.destroy_instance(op::DESTROY, id).await {
                problems.push(format!("instance {id}: {e}"));
            }
        }
        for id in inv.snapshots.keys() {
            if let Err(e) = self
                .inner
                .destroy_snapshot_inner(op::DESTROY_SNAPSHOT, id)
                .await
            {
                problems.push(format!("snapshot {id}: {e}"));
            }
        }
        problems
    }
}

impl Inner {
    pub(super) async fn inventory(&self) -> Result<Inventory, SandboxError> {
        const OP: Operation = op::CLEANUP;
        let mut inv = Inventory::default();
        // The state directory.
        let (instances_dir, snapshots_dir) = (self.layout.instances(), self.layout.snapshots());
        let scope = self.scope.clone();
        let (recs, snaps) = blocking(OP, move || {
            let list = |dir: &Path, prefix: &str| -> Vec<String> {
                // `instances/` and `snapshots/` of the state directory are
                // the provider's own, never bound into a container.
                #[allow(clippy::disallowed_methods)]
                std::fs::read_dir(dir)
                    .map(|rd| {
                        rd.filter_map(Result::ok)
                            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                            .filter(|n| store::is_id(prefix, n))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut recs = Vec::new();
            for id in list(&instances_dir, INSTANCE_PREFIX) {
                let rec = store::read_record::<InstanceRecord>(
                    &instances_dir.join(&id).join(store::INSTANCE_RECORD),
                );
                match rec {
                    Ok(Some(r)) if r.scope == scope => recs.push((id, Some(r))),
                    Ok(Some(_)) => {}
                    // A directory without a readable record: a crash
                    // between mkdir and the first write.
                    _ => recs.push((id, None)),
                }
            }
            let mut snaps = Vec::new();
            for id in list(&snapshots_dir, SNAPSHOT_PREFIX) {
                let rec = store::read_record::<SnapshotRecord>(
                    &snapshots_dir.join(&id).join(store::SNAPSHOT_RECORD),
                );
                match rec {
                    Ok(Some(r)) if r.scope == scope => snaps.push((id, Some(r))),
                    Ok(Some(_)) => {}
                    _ => snaps.push((id, None)),
                }
            }
            (recs, snaps)
        })
        .await?;
        for (id, rec) in recs {
            inv.instances.insert(
                id,
                rec.map(|r| ObjectTimes {
                    created_at: Some(r.created_at),
                    expires_at: Some(r.request.expires_at),
                })
                .unwrap_or_default(),
            );
        }
        for (id, rec) in snaps {
            inv.snapshots.insert(
                id,
                rec.map(|r| ObjectTimes {
                    created_at: Some(r.snapshot.created_at),
                    expires_at: Some(r.snapshot.expires_at),
                })
                .unwrap_or_default(),
            );
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
        // Instances first, then snapshots. Within a phase a few run at once; every
        // object is attempted, and the first failure is reported after.
        type Sweep<'a> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), SandboxError>> + Send + 'a>,
        >;
        let mut instance_sweeps: Vec<Sweep<'_>> = Vec::new();
        for id in &result.instances {
            instance_sweeps.push(Box::pin(inner.destroy_instance(OP, id)));
        }
        let snapshot_sweeps: Vec<Sweep<'_>> = result
            .snapshots
            .iter()
            .map(|id| Box::pin(inner.destroy_snapshot_inner(OP, id)) as Sweep<'_>)
            .collect();
        let mut first_failure = None;
        for phase in [instance_sweeps, snapshot_sweeps] {
            let outcomes: Vec<Result<(), SandboxError>> = futures_util::stream::iter(phase)
                .buffer_unordered(SWEEP_CONCURRENCY)
                .collect()
                .await;
            for outcome in outcomes {
                if let Err(e) = outcome {
                    first_failure.get_or_insert(e);
                }
            }
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
