//! What exists of this scope (from the daemon's labels and the state
//! directory), and cleanup of orphans and expired objects.

use std::collections::{BTreeMap, BTreeSet};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::records::{StoredInstance as _, StoredSnapshot as _};
use checkfu_sandbox_hostfs::sweep_rule;

use super::{
    errors::daemon_error,
    inner::{DockerProvider, Inner, INSTANCE_PREFIX, PROVIDER_ID, SNAPSHOT_PREFIX},
    labels::{
        parse_time, INSTANCE_REPOSITORY, KIND_INSTANCE, LABEL_CREATED_AT, LABEL_EXPIRES_AT,
        LABEL_INSTANCE_ID, LABEL_KIND, LABEL_PROVIDER, LABEL_SCOPE, LABEL_SNAPSHOT_ID,
        SNAPSHOT_REPOSITORY,
    },
};
use crate::daemon;
use crate::store::{self, InstanceRecord, SnapshotRecord};

pub use checkfu_sandbox_hostfs::sweep_rule::ObjectTimes;

/// Everything of this provider's scope that exists now, observed from the
/// daemon's labels and the state directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Instances by id.
    pub instances: BTreeMap<String, ObjectTimes>,
    /// Instances that have a container or an image at the daemon (the rest
    /// exist only as records in the state directory).
    pub instances_on_daemon: BTreeSet<String>,
    /// Snapshots by id.
    pub snapshots: BTreeMap<String, ObjectTimes>,
    /// Warm-pool containers that instance records claimed (they belong to
    /// those instances, not to the pool).
    pub pool_containers: BTreeSet<String>,
}

impl DockerProvider {
    /// Everything of this scope that exists now (see [`Inventory`]).
    ///
    /// # Errors
    ///
    /// `SandboxOperationFailed{provider_error}` when the daemon or the
    /// state directory cannot be read.
    pub async fn inventory(&self) -> Result<Inventory, SandboxError> {
        self.inner.inventory().await
    }

    /// Drains the warm pool ([`DockerProvider::drain_pool`]), then destroys
    /// every instance (first: a container may be built from a snapshot's
    /// image) and then every snapshot of this scope, attempting each one.
    /// Returns one line per object that could not be destroyed (empty when
    /// all were); used by teardown that must leave nothing.
    pub async fn destroy_all(&self) -> Vec<String> {
        let mut problems = self.drain_pool().await;
        let inv = match self.inventory().await {
            Ok(inv) => inv,
            Err(e) => {
                problems.push(format!("inventory: {e}"));
                return problems;
            }
        };
        problems.extend(
            sweep_rule::destroy_every(&*self.inner, inv.instances.keys(), inv.snapshots.keys())
                .await,
        );
        problems
    }

    /// Ids of the containers and images that still carry this scope's label
    /// (a leak check after [`DockerProvider::destroy_all`]).
    ///
    /// # Errors
    ///
    /// `SandboxOperationFailed{provider_error}` when the daemon cannot be
    /// asked.
    pub async fn scope_leftovers(&self) -> Result<(Vec<String>, Vec<String>), SandboxError> {
        const OP: Operation = op::CLEANUP;
        let labels = [(LABEL_SCOPE, self.inner.scope.as_str())];
        let containers = daemon::list_containers_by_labels(&self.inner.docker, &labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        let images = daemon::list_images_by_labels(&self.inner.docker, &labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        Ok((
            containers.into_iter().filter_map(|c| c.id).collect(),
            images.into_iter().map(|i| i.id).collect(),
        ))
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
            if let Some(container) = rec.as_ref().and_then(|r| r.pool_container.clone()) {
                inv.pool_containers.insert(container);
                inv.instances_on_daemon.insert(id.clone());
            }
            inv.instances
                .insert(id, rec.map(|r| r.times()).unwrap_or_default());
        }
        for (id, rec) in snaps {
            inv.snapshots
                .insert(id, rec.map(|r| r.times()).unwrap_or_default());
        }
        // The daemon.
        let scope_labels = [
            (LABEL_PROVIDER, PROVIDER_ID),
            (LABEL_SCOPE, self.scope.as_str()),
        ];
        let containers = daemon::list_containers_by_labels(&self.docker, &scope_labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        for c in containers {
            let labels = c.labels.unwrap_or_default();
            if labels.get(LABEL_KIND).map(String::as_str) != Some(KIND_INSTANCE) {
                continue;
            }
            let Some(id) = labels
                .get(LABEL_INSTANCE_ID)
                .filter(|i| store::is_id(INSTANCE_PREFIX, i))
            else {
                continue;
            };
            inv.instances_on_daemon.insert(id.clone());
            inv.instances
                .entry(id.clone())
                .or_default()
                .fill(ObjectTimes {
                    created_at: parse_time(&labels, LABEL_CREATED_AT),
                    expires_at: parse_time(&labels, LABEL_EXPIRES_AT),
                });
        }
        let images = daemon::list_images_by_labels(&self.docker, &scope_labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        for img in images {
            for tag in &img.repo_tags {
                if let Some(sid) = tag.strip_prefix(&format!("{SNAPSHOT_REPOSITORY}:")) {
                    if store::is_id(SNAPSHOT_PREFIX, sid) {
                        let labels_match =
                            img.labels.get(LABEL_SNAPSHOT_ID).map(String::as_str) == Some(sid);
                        inv.snapshots
                            .entry(sid.to_owned())
                            .or_default()
                            .fill(if labels_match {
                                ObjectTimes {
                                    created_at: parse_time(&img.labels, LABEL_CREATED_AT),
                                    expires_at: parse_time(&img.labels, LABEL_EXPIRES_AT),
                                }
                            } else {
                                ObjectTimes::default()
                            });
                    }
                } else if let Some(iid) = tag.strip_prefix(&format!("{INSTANCE_REPOSITORY}:")) {
                    if store::is_id(INSTANCE_PREFIX, iid) {
                        // A stray per-instance tag with no record or
                        // container: an instance with unknown times.
                        inv.instances.entry(iid.to_owned()).or_default();
                        inv.instances_on_daemon.insert(iid.to_owned());
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
        // Instances first (a container may be built from a snapshot's
        // image), then snapshots; a few at once, every object attempted.
        let outcomes = sweep_rule::sweep_planned(inner, OP, &result, |id| {
            let on_daemon = inv.instances_on_daemon.contains(id);
            Box::pin(async move {
                let outcome = if on_daemon {
                    inner.destroy_instance(OP, id).await
                } else {
                    inner.destroy_instance_record(OP, id).await
                };
                (id.to_owned(), outcome)
            })
        })
        .await;
        // Warm-pool slots no live provider holds (not contract objects: not
        // in the result; one that stays is swept next time).
        if let Err(e) = inner.pool_sweep_orphans(&inv.pool_containers).await {
            tracing::warn!(error = %e, "cleanup could not remove an orphaned warm-pool slot");
        }
        settle_sweep(result, outcomes)
    }
}

/// The answer of a sweep from what each attempted destroy did: the ids
/// that were destroyed, in the planned order, even when another object
/// failed (that object stays for the next sweep, and the failure is
/// logged); the first failure only when nothing at all was destroyed
/// (decision 025).
///
/// # Errors
/// The first destroy failure, when every attempted destroy failed.
pub(crate) fn settle_sweep(
    planned: CleanupResult,
    outcomes: Vec<(String, Result<(), SandboxError>)>,
) -> Result<CleanupResult, SandboxError> {
    let mut destroyed = BTreeSet::new();
    let mut first_failure = None;
    for (id, outcome) in outcomes {
        match outcome {
            Ok(()) => {
                destroyed.insert(id);
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "cleanup could not destroy an object; it stays for the next sweep");
                first_failure.get_or_insert(e);
            }
        }
    }
    match first_failure {
        Some(e) if destroyed.is_empty() => Err(e),
        _ => Ok(CleanupResult {
            instances: planned
                .instances
                .into_iter()
                .filter(|id| destroyed.contains(id))
                .collect(),
            snapshots: planned
                .snapshots
                .into_iter()
                .filter(|id| destroyed.contains(id))
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_sandbox_contract::FailureReason;

    fn failure() -> SandboxError {
        SandboxError::failed(op::CLEANUP, FailureReason::ProviderError, "daemon refused")
    }

    fn planned() -> CleanupResult {
        CleanupResult {
            instances: vec!["i-1".into(), "i-2".into()],
            snapshots: vec!["s-1".into()],
        }
    }

    #[test]
    fn a_failed_object_does_not_lose_the_ids_destroyed_beside_it() {
        let got = settle_sweep(
            planned(),
            vec![
                ("i-2".into(), Ok(())),
                ("i-1".into(), Err(failure())),
                ("s-1".into(), Ok(())),
            ],
        )
        .unwrap();
        assert_eq!(got.instances, vec!["i-2".to_owned()]);
        assert_eq!(got.snapshots, vec!["s-1".to_owned()]);
    }

    #[test]
    fn a_sweep_that_destroyed_nothing_reports_the_failure() {
        let err = settle_sweep(
            planned(),
            vec![
                ("i-1".into(), Err(failure())),
                ("i-2".into(), Err(failure())),
                ("s-1".into(), Err(failure())),
            ],
        )
        .unwrap_err();
        assert_eq!(err, failure());
    }

    #[test]
    fn a_clean_sweep_reports_every_planned_id() {
        let outcomes = ["i-1", "i-2", "s-1"]
            .into_iter()
            .map(|id| (id.to_owned(), Ok(())))
            .collect();
        assert_eq!(settle_sweep(planned(), outcomes).unwrap(), planned());
    }
}
