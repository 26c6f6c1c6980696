//! The shared part of a host-side provider's cleanup (spec "cleanup"):
//! the times a sweep knows of each object ([`ObjectTimes`]), the records
//! of the state directory ([`recorded_objects`]), the objects as the
//! contract's sweep candidates ([`candidates`]), and the destroys of a
//! planned sweep, instances first ([`sweep_planned`], [`destroy_every`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    CleanupInventory, CleanupResult, Operation, SandboxError, SweepCandidate, Timestamp,
};
use futures_util::StreamExt as _;

use crate::errors::blocking;
use crate::host::HostInstances;
use crate::records::{StoredInstance, StoredSnapshot, INSTANCE_PREFIX, SNAPSHOT_PREFIX};
use crate::store::{self, Layout};

/// How many objects a sweep destroys at once (within a phase).
pub const SWEEP_CONCURRENCY: usize = 8;

/// Creation and expiry of a live object, when known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectTimes {
    /// `created_at`, from the record (or what the backend labelled).
    pub created_at: Option<Timestamp>,
    /// `expires_at`, from the record (or what the backend labelled).
    pub expires_at: Option<Timestamp>,
}

impl ObjectTimes {
    /// Takes each time this one lacks from `other`.
    pub fn fill(&mut self, other: ObjectTimes) {
        self.created_at = self.created_at.or(other.created_at);
        self.expires_at = self.expires_at.or(other.expires_at);
    }
}

/// The objects of one kind as the contract's sweep candidates (a lost time
/// is `None`, which the rule sweeps).
fn candidate_list(objects: &BTreeMap<String, ObjectTimes>) -> Vec<SweepCandidate> {
    objects
        .iter()
        .map(|(id, t)| SweepCandidate {
            id: id.clone(),
            created_at: t.created_at,
            expires_at: t.expires_at,
        })
        .collect()
}

/// A provider's instances and snapshots as the contract's cleanup
/// inventory (cleanupInventory, and what cleanup's rule runs over).
pub fn candidates(
    instances: &BTreeMap<String, ObjectTimes>,
    snapshots: &BTreeMap<String, ObjectTimes>,
) -> CleanupInventory {
    CleanupInventory {
        instances: candidate_list(instances),
        snapshots: candidate_list(snapshots),
    }
}

/// An id with its record, `None` when the directory has no readable record
/// (a crash between its creation and the first write).
pub type Recorded<R> = Vec<(String, Option<R>)>;

/// The ids under `dir` of the `prefix` shape.
fn listed_ids(dir: &Path, prefix: &str) -> Vec<String> {
    // `instances/` and `snapshots/` of the state directory are the
    // provider's own, never bound into an instance.
    #[allow(clippy::disallowed_methods)]
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| store::is_id(prefix, n))
                .collect()
        })
        .unwrap_or_default()
}

/// The `prefix`-shaped directories under `dir` that hold a record of
/// `scope` or none readable (records of another scope are left out).
fn recorded<R>(
    dir: &Path,
    prefix: &str,
    record: &str,
    scope: &str,
    of: fn(&R) -> &str,
) -> Recorded<R>
where
    R: serde::de::DeserializeOwned,
{
    let mut out = Vec::new();
    for id in listed_ids(dir, prefix) {
        match store::read_record::<R>(&dir.join(&id).join(record)) {
            Ok(Some(r)) if of(&r) == scope => out.push((id, Some(r))),
            Ok(Some(_)) => {}
            _ => out.push((id, None)),
        }
    }
    out
}

/// The instance and snapshot directories of `scope` in the state directory
/// with their records, read on the blocking pool.
///
/// # Errors
///
/// `ProviderError` of `operation` when the blocking task fails.
pub async fn recorded_objects<I, S>(
    operation: Operation,
    layout: &Layout,
    scope: &str,
) -> Result<(Recorded<I>, Recorded<S>), SandboxError>
where
    I: StoredInstance + Send + 'static,
    S: StoredSnapshot + Send + 'static,
{
    let (instances_dir, snapshots_dir) = (layout.instances(), layout.snapshots());
    let scope = scope.to_owned();
    blocking(operation, move || {
        let recs = recorded::<I>(
            &instances_dir,
            INSTANCE_PREFIX,
            store::INSTANCE_RECORD,
            &scope,
            I::scope,
        );
        let snaps = recorded::<S>(
            &snapshots_dir,
            SNAPSHOT_PREFIX,
            store::SNAPSHOT_RECORD,
            &scope,
            S::scope,
        );
        (recs, snaps)
    })
    .await
}

/// One destroy of a sweep: the id and what destroying it did.
pub type Sweep<'a> = Pin<Box<dyn Future<Output = (String, Result<(), SandboxError>)> + Send + 'a>>;

/// Destroys what `planned` names: its instances first, each through
/// `destroy_instance` (a container or a layer may be built from a
/// snapshot), then its snapshots through the host's
/// [`HostInstances::destroy_snapshot`]. Within a phase up to
/// [`SWEEP_CONCURRENCY`] run at once; every object is attempted. The
/// outcomes in the order they finished, phase by phase.
pub async fn sweep_planned<'a, H: HostInstances>(
    host: &'a H,
    operation: Operation,
    planned: &'a CleanupResult,
    destroy_instance: impl Fn(&'a str) -> Sweep<'a>,
) -> Vec<(String, Result<(), SandboxError>)> {
    let instance_sweeps: Vec<Sweep<'a>> = planned
        .instances
        .iter()
        .map(|id| destroy_instance(id))
        .collect();
    let snapshot_sweeps: Vec<Sweep<'a>> = planned
        .snapshots
        .iter()
        .map(|id| {
            Box::pin(async move { (id.clone(), host.destroy_snapshot(operation, id).await) })
                as Sweep<'a>
        })
        .collect();
    let mut outcomes = Vec::new();
    for phase in [instance_sweeps, snapshot_sweeps] {
        let phase: Vec<(String, Result<(), SandboxError>)> = futures_util::stream::iter(phase)
            .buffer_unordered(SWEEP_CONCURRENCY)
            .collect()
            .await;
        outcomes.extend(phase);
    }
    outcomes
}

/// Destroys every one of `instances`, then every one of `snapshots`, one
/// at a time, attempting each. One line per object that could not be
/// destroyed (`instance <id>: <error>`, `snapshot <id>: <error>`).
pub async fn destroy_every<'a, H: HostInstances>(
    host: &H,
    instances: impl IntoIterator<Item = &'a String>,
    snapshots: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for id in instances {
        if let Err(e) = host.destroy_instance(op::DESTROY, id).await {
            problems.push(format!("instance {id}: {e}"));
        }
    }
    for id in snapshots {
        if let Err(e) = host.destroy_snapshot(op::DESTROY_SNAPSHOT, id).await {
            problems.push(format!("snapshot {id}: {e}"));
        }
    }
    problems
}
