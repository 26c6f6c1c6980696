//! The lifecycle members whose flow every host-side provider shares (spec
//! "activate", "writeFile", "snapshot", "cloneSnapshot", "release",
//! "resume"): the state checks, the order of the steps and the rollback
//! each allocation hands back, written once against [`HostLifecycle`].
//! A provider implements the backend steps (starting its workload,
//! capturing, cloning and resuming a snapshot) and its contract members
//! call these functions.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::host::{HostInstances, InstanceRecordView as _};
use crate::instance::{instance_of, HostProviderIdentity};
use crate::records::{StoredInstance, StoredSnapshot, INSTANCE_PREFIX, SNAPSHOT_PREFIX};
use crate::rollbacks::{ActivateRollback, InstanceRollback, NothingToUndo, SnapshotRollback};
use crate::store;

/// What the shared lifecycle flows need of a provider beyond its records
/// ([`HostInstances`]): its scope, its admission, its snapshot records and
/// the backend steps.
#[async_trait]
pub trait HostLifecycle: HostInstances<Record: StoredInstance> {
    /// The provider's snapshot record.
    type Snapshot: StoredSnapshot + Send + Sync;

    /// The provider's id and revisions, as its instances echo them.
    fn identity(&self) -> &HostProviderIdentity;

    /// The scope every record of this provider carries.
    fn scope(&self) -> &str;

    /// The provider-side admission of a provision (or resume) request.
    ///
    /// # Errors
    ///
    /// The contract's refusal of `request` for `operation`.
    fn admit(
        &self,
        operation: Operation,
        request: &SandboxProvisionRequest,
    ) -> Result<(), SandboxError>;

    /// The record of snapshot `snapshot_id` of this scope.
    ///
    /// # Errors
    ///
    /// `SandboxSnapshotNotFound`, or `ProviderError` of `operation` for an
    /// unreadable record.
    fn load_snapshot(
        &self,
        operation: Operation,
        snapshot_id: &str,
    ) -> Result<Self::Snapshot, SandboxError>;

    /// Starts the workload of a `provisioning` instance (activation) and
    /// notes in `rec` what it started; the caller records the state.
    ///
    /// # Errors
    ///
    /// `ProviderError` of `operation` when the workload cannot start.
    async fn start_workload(
        &self,
        operation: Operation,
        rec: &mut Self::Record,
    ) -> Result<(), SandboxError>;

    /// Captures snapshot `sid` of the active instance `rec`, kept until
    /// `expires_at`; may leave a partial snapshot behind on failure (the
    /// caller removes it).
    ///
    /// # Errors
    ///
    /// `ProviderError` (or a size refusal) of `operation`.
    async fn capture_into(
        &self,
        operation: Operation,
        rec: &Self::Record,
        expires_at: Timestamp,
        sid: &str,
    ) -> Result<SandboxSnapshot, SandboxError>;

    /// Makes snapshot `cid`, a clone of `source` for session
    /// `target_session_id`; may leave a partial clone behind on failure.
    ///
    /// # Errors
    ///
    /// As [`crate::snapshot_files::clone_of`]; `ProviderError` of
    /// cloneSnapshot.
    async fn clone_snapshot_into(
        &self,
        source: &Self::Snapshot,
        target_session_id: &str,
        cid: &str,
    ) -> Result<SandboxSnapshot, SandboxError>;

    /// Makes the active instance `id` from `request` and the snapshot
    /// `source`; may leave a partial instance behind on failure.
    ///
    /// # Errors
    ///
    /// `ProviderError` of resume.
    async fn resume_into(
        &self,
        request: &SandboxProvisionRequest,
        source: &Self::Snapshot,
        id: &str,
    ) -> Result<Self::Record, SandboxError>;
}

/// A fresh instance id of `host`'s scope.
pub fn fresh_instance_id<H: HostLifecycle>(host: &H) -> String {
    store::fresh_id(INSTANCE_PREFIX, host.scope())
}

/// A fresh snapshot id of `host`'s scope.
pub fn fresh_snapshot_id<H: HostLifecycle>(host: &H) -> String {
    store::fresh_id(SNAPSHOT_PREFIX, host.scope())
}

/// Captures a fresh snapshot of the active instance `rec`; whatever a
/// failed capture allocated is removed again.
///
/// # Errors
///
/// As [`HostLifecycle::capture_into`].
pub async fn capture<H: HostLifecycle>(
    host: &H,
    operation: Operation,
    rec: &H::Record,
    expires_at: Timestamp,
) -> Result<SandboxSnapshot, SandboxError> {
    let sid = fresh_snapshot_id(host);
    let res = host.capture_into(operation, rec, expires_at, &sid).await;
    if res.is_err() {
        let _ = host.destroy_snapshot(operation, &sid).await;
    }
    res
}

/// writeFile into instance `request.instance_id`'s host directories
/// ([`crate::write::write_file`]).
///
/// # Errors
///
/// As [`HostInstances::load_instance`] and [`crate::write::write_file`].
pub async fn write_file<H: HostLifecycle>(
    host: &H,
    request: WriteFileRequest,
) -> Result<(), SandboxError> {
    let rec = host.load_instance(op::WRITE_FILE, &request.instance_id)?;
    crate::write::write_file(host.layout(), rec.request(), rec.state(), request).await
}

/// activate: a `provisioning` instance's workload starts and it becomes
/// `active`; the rollback undoes the activation.
///
/// # Errors
///
/// `SandboxConflict{expected: "provisioning"}` for an instance in another
/// state; as [`HostLifecycle::start_workload`] and
/// [`HostInstances::save_instance`] (the activation undone first).
pub async fn activate<H: HostLifecycle>(
    inner: &Arc<H>,
    request: ActivateRequest,
) -> Result<Handoff<SandboxInstance>, SandboxError> {
    const OP: Operation = op::ACTIVATE;
    let mut rec = inner.load_instance(OP, &request.instance_id)?;
    if rec.state() != InstanceState::Provisioning {
        return Err(SandboxError::conflict(OP, "provisioning", rec.state()));
    }
    let rollback = Arc::new(ActivateRollback {
        inner: inner.clone(),
        instance_id: rec.instance_id().to_owned(),
    });
    inner.start_workload(OP, &mut rec).await?;
    rec.set_state(InstanceState::Active);
    if let Err(e) = inner.save_instance(OP, &rec) {
        let _ = rollback.rollback().await;
        return Err(e);
    }
    Ok(Handoff {
        value: instance_of(
            inner.identity(),
            rec.request(),
            rec.instance_id(),
            InstanceState::Active,
        ),
        rollback,
    })
}

/// snapshot: a durable, active instance is captured; the rollback
/// destroys the snapshot.
///
/// # Errors
///
/// `SandboxSnapshotForbidden` for an `ephemeral_zdr` instance;
/// `SandboxConflict{expected: "active"}`; as [`capture`].
pub async fn snapshot<H: HostLifecycle>(
    inner: &Arc<H>,
    request: SnapshotRequest,
) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
    const OP: Operation = op::SNAPSHOT;
    let rec = inner.load_instance(OP, &request.instance_id)?;
    if rec.request().profile.retention != RetentionMode::Durable {
        return Err(SandboxError::SandboxSnapshotForbidden {
            instance_id: rec.instance_id().to_owned(),
            retention: rec.request().profile.retention,
        });
    }
    if rec.state() != InstanceState::Active {
        return Err(SandboxError::conflict(OP, "active", rec.state()));
    }
    let snapshot = capture(&**inner, OP, &rec, request.expires_at).await?;
    Ok(Handoff {
        rollback: Arc::new(SnapshotRollback {
            inner: inner.clone(),
            member: Member::Snapshot,
            snapshot_id: snapshot.snapshot_id.clone(),
        }),
        value: snapshot,
    })
}

/// cloneSnapshot: a new snapshot of the target session from the source;
/// the rollback destroys the clone.
///
/// # Errors
///
/// `SandboxInvalidRequest` on `source` when the request's source is not
/// the snapshot as recorded; as [`HostLifecycle::clone_snapshot_into`]
/// (the partial clone removed first).
pub async fn clone_snapshot<H: HostLifecycle>(
    inner: &Arc<H>,
    request: CloneSnapshotRequest,
) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
    const OP: Operation = op::CLONE_SNAPSHOT;
    let source = inner.load_snapshot(OP, &request.source.snapshot_id)?;
    if *source.snapshot() != request.source {
        let (field, recorded, given) =
            snapshot_mismatch("source", source.snapshot(), &request.source);
        return Err(SandboxError::invalid_request(OP, field, recorded, given));
    }
    let cid = fresh_snapshot_id(&**inner);
    let rollback = Arc::new(SnapshotRollback {
        inner: inner.clone(),
        member: Member::CloneSnapshot,
        snapshot_id: cid.clone(),
    });
    match inner
        .clone_snapshot_into(&source, &request.target_session_id, &cid)
        .await
    {
        Ok(clone) => Ok(Handoff {
            value: clone,
            rollback,
        }),
        Err(e) => {
            let _ = rollback.rollback().await;
            Err(e)
        }
    }
}

/// release: a durable instance is captured (with the request's retention
/// deadline) and destroyed, the rollback destroying the snapshot; an
/// `ephemeral_zdr` one is destroyed with nothing to undo.
///
/// # Errors
///
/// `SandboxConflict{expected: "active"}`; `SandboxInvalidRequest` on
/// `snapshot_expires_at` when it is absent for a durable release or
/// present for an `ephemeral_zdr` one; as [`capture`] and
/// [`HostInstances::destroy_instance`].
pub async fn release<H: HostLifecycle>(
    inner: &Arc<H>,
    request: ReleaseRequest,
) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
    const OP: Operation = op::RELEASE;
    let rec = inner.load_instance(OP, &request.instance_id)?;
    if rec.state() != InstanceState::Active {
        return Err(SandboxError::conflict(OP, "active", rec.state()));
    }
    match (rec.request().profile.retention, request.snapshot_expires_at) {
        (RetentionMode::Durable, Some(expires_at)) => {
            let snapshot = capture(&**inner, OP, &rec, expires_at).await?;
            let rollback = Arc::new(SnapshotRollback {
                inner: inner.clone(),
                member: Member::Release,
                snapshot_id: snapshot.snapshot_id.clone(),
            });
            if let Err(e) = inner.destroy_instance(OP, rec.instance_id()).await {
                let _ = rollback.rollback().await;
                return Err(e);
            }
            Ok(Handoff {
                value: ReleaseDisposition::Released { snapshot },
                rollback,
            })
        }
        (RetentionMode::EphemeralZdr, None) => {
            inner.destroy_instance(OP, rec.instance_id()).await?;
            Ok(Handoff {
                value: ReleaseDisposition::Destroyed,
                rollback: Arc::new(NothingToUndo),
            })
        }
        (RetentionMode::Durable, None) => Err(SandboxError::invalid_request(
            OP,
            "snapshot_expires_at",
            "a retention deadline for a durable release",
            "absent",
        )),
        (RetentionMode::EphemeralZdr, Some(t)) => Err(SandboxError::invalid_request(
            OP,
            "snapshot_expires_at",
            "absent for an ephemeral_zdr release",
            t.to_string(),
        )),
    }
}

/// resume: a new active instance from a snapshot, admitted as a provision
/// would be; the rollback destroys the instance.
///
/// # Errors
///
/// As [`HostLifecycle::admit`]; `SandboxInvalidRequest` on `snapshot`
/// when the request's snapshot is not the one recorded; as
/// [`HostLifecycle::resume_into`] (the partial instance removed first).
pub async fn resume<H: HostLifecycle>(
    inner: &Arc<H>,
    request: ResumeRequest,
) -> Result<Handoff<SandboxInstance>, SandboxError> {
    const OP: Operation = op::RESUME;
    inner.admit(OP, &request.request)?;
    let source = inner.load_snapshot(OP, &request.snapshot.snapshot_id)?;
    if *source.snapshot() != request.snapshot {
        let (field, recorded, given) =
            snapshot_mismatch("snapshot", source.snapshot(), &request.snapshot);
        return Err(SandboxError::invalid_request(OP, field, recorded, given));
    }
    let id = fresh_instance_id(&**inner);
    let rollback = Arc::new(InstanceRollback {
        inner: inner.clone(),
        member: Member::Resume,
        instance_id: id.clone(),
    });
    match inner.resume_into(&request.request, &source, &id).await {
        Ok(rec) => Ok(Handoff {
            value: instance_of(inner.identity(), rec.request(), &id, InstanceState::Active),
            rollback,
        }),
        Err(e) => {
            let _ = rollback.rollback().await;
            Err(e)
        }
    }
}

/// Where a request's snapshot differs from the recorded one: the first
/// differing field as `<prefix>.<field>`, with the recorded value (what
/// was expected) and the request's, each as JSON.
fn snapshot_mismatch(
    prefix: &str,
    recorded: &SandboxSnapshot,
    given: &SandboxSnapshot,
) -> (String, String, String) {
    let as_map = |s: &SandboxSnapshot| match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let (r, g) = (as_map(recorded), as_map(given));
    let null = serde_json::Value::Null;
    r.keys()
        .chain(g.keys())
        .find(|k| r.get(*k) != g.get(*k))
        .map(|k| {
            (
                format!("{prefix}.{k}"),
                r.get(k).unwrap_or(&null).to_string(),
                g.get(k).unwrap_or(&null).to_string(),
            )
        })
        .unwrap_or_else(|| {
            (
                prefix.to_owned(),
                "the recorded snapshot".to_owned(),
                "a snapshot that differs from it".to_owned(),
            )
        })
}

#[cfg(test)]
mod mismatch_tests {
    use super::*;

    #[test]
    fn a_differing_snapshot_is_named_by_its_first_differing_field_with_both_values() {
        let recorded = crate::records::tests::sample_snapshot("s-1");
        let mut given = recorded.clone();
        given.expires_at = recorded.expires_at.add_seconds(60);
        let (field, want, got) = snapshot_mismatch("snapshot", &recorded, &given);
        assert_eq!(field, "snapshot.expires_at");
        assert_eq!(want, serde_json::json!(recorded.expires_at).to_string());
        assert_eq!(got, serde_json::json!(given.expires_at).to_string());
        assert_ne!(want, got);
        let (field, ..) = snapshot_mismatch("source", &recorded, &recorded.clone());
        assert_eq!(field, "source");
    }
}
