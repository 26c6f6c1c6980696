//! The steps every host-side provider's snapshots share (spec
//! "snapshot", "cloneSnapshot", "resume"): the snapshot value, the record
//! published before anything else (so a sweep knows its times), the
//! archives of an instance's host directories, a clone's copies of them,
//! and the host directories rehydrated from them at resume. A provider
//! adds its own layer (a committed image, a root file system archive).
//!
//! ```text
//! <state_dir>/snapshots/<snapshot_id>/snapshot.json
//! <state_dir>/snapshots/<snapshot_id>/mounts/<index>.tar   request.mounts[index]
//! <state_dir>/snapshots/<snapshot_id>/outputs.tar          /mnt/session/outputs
//! ```

use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    Operation, SandboxError, SandboxProvisionRequest, SandboxSnapshot, Timestamp,
};
use serde::Serialize;

use crate::archive::{self, ArchiveJob};
use crate::errors::{blocking, chain, provider_error};
use crate::host::InstanceRecordView;
use crate::rootfs::CHECKFU_UID;
use crate::store::{self, owner_of, ArchivedMount, Home, Layout};

/// Most entries an archive of one host directory may hold.
pub const ARCHIVE_MAX_ENTRIES: usize = 1_000_000;

/// The name of the output tree's archive in a snapshot directory.
pub const OUTPUTS_ARCHIVE: &str = "outputs.tar";

/// The snapshot `sid` of instance `instance_id` made from `request`,
/// created at `created_at` and kept until `expires_at`.
pub fn snapshot_of(
    request: &SandboxProvisionRequest,
    instance_id: &str,
    sid: &str,
    created_at: Timestamp,
    expires_at: Timestamp,
) -> SandboxSnapshot {
    SandboxSnapshot {
        snapshot_id: sid.to_owned(),
        provider: request.provider.clone(),
        placement: request.placement,
        source_instance_id: instance_id.to_owned(),
        workspace_id: request.workspace_id.clone(),
        session_id: request.session_id.clone(),
        profile_id: request.profile.profile_id.clone(),
        profile_version: request.profile.profile_version,
        profile_digest: request.profile.profile_digest.clone(),
        created_at,
        expires_at,
    }
}

/// The archives of `request`'s mounts, in its order:
/// `mounts/<index>.tar` with each mount's path and access.
pub fn archived_mounts(request: &SandboxProvisionRequest) -> Vec<ArchivedMount> {
    request
        .mounts
        .iter()
        .enumerate()
        .map(|(i, m)| ArchivedMount {
            path: m.path.clone(),
            access: m.access,
            archive: format!("mounts/{i}.tar"),
        })
        .collect()
}

/// Creates snapshot `sid`'s directory holding `record`, in one step.
///
/// # Errors
///
/// `ProviderError` of `operation` when the directory cannot be created.
pub fn publish_snapshot<T: Serialize>(
    operation: Operation,
    layout: &Layout,
    sid: &str,
    record: &T,
) -> Result<(), SandboxError> {
    store::publish_dir(
        &layout.snapshot_dir(sid),
        store::SNAPSHOT_RECORD,
        record,
        store::Durability::HostCrash,
        true,
    )
    .map_err(|e| provider_error(operation, format!("creating the snapshot directory: {e}")))
}

/// Creates instance `id`'s directory holding `record`, in one step, with
/// the `mounts` directory only when the record's request has mounts (a
/// directory made and removed per instance costs a file system metadata
/// operation each way).
///
/// # Errors
///
/// `ProviderError` of `operation` when the directory cannot be created.
pub fn publish_instance<T: Serialize + InstanceRecordView>(
    operation: Operation,
    layout: &Layout,
    id: &str,
    record: &T,
) -> Result<(), SandboxError> {
    store::publish_dir(
        &layout.instance_dir(id),
        store::INSTANCE_RECORD,
        record,
        store::Durability::ProcessCrash,
        !record.request().mounts.is_empty(),
    )
    .map_err(|e| provider_error(operation, format!("creating the instance directory: {e}")))
}

/// Removes snapshot `id`'s directory; a missing one is already removed.
///
/// # Errors
///
/// `ProviderError` of `operation` when it cannot be removed.
pub async fn remove_snapshot_dir(
    operation: Operation,
    layout: &Layout,
    id: &str,
) -> Result<(), SandboxError> {
    let dir = layout.snapshot_dir(id);
    blocking(
        op::DESTROY_SNAPSHOT,
        move || match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        },
    )
    .await?
    .map_err(|e| provider_error(operation, format!("removing the snapshot directory: {e}")))
}

/// The archives of instance `instance_id`'s host directories into the
/// snapshot directory `dir`: each of `mounts` (in the request's order),
/// then the output tree into `outputs_archive`.
pub fn host_dir_jobs(
    layout: &Layout,
    instance_id: &str,
    mounts: &[ArchivedMount],
    outputs_archive: &str,
    dir: &Path,
) -> Vec<ArchiveJob> {
    let mut jobs: Vec<ArchiveJob> = mounts
        .iter()
        .enumerate()
        .map(|(i, m)| ArchiveJob {
            source: layout.mount_dir(instance_id, i),
            archive: dir.join(&m.archive),
            sandbox_path: m.path.clone(),
        })
        .collect();
    jobs.push(ArchiveJob {
        source: layout.outputs_dir(instance_id),
        archive: dir.join(outputs_archive),
        sandbox_path: OUTPUT_PATH.to_owned(),
    });
    jobs
}

/// Writes `jobs` on the blocking pool, at most [`ARCHIVE_MAX_ENTRIES`]
/// entries each and `max_bytes` host bytes together, ending by the
/// instance's `expires_at` (the injected clock says `now`).
///
/// # Errors
///
/// As [`archive::write_archives`].
pub async fn write_snapshot_archives(
    operation: Operation,
    jobs: Vec<ArchiveJob>,
    max_bytes: u64,
    now: Timestamp,
    expires_at: Timestamp,
) -> Result<(), SandboxError> {
    let deadline = archive::instant_of(now, expires_at);
    blocking(operation, move || {
        archive::write_archives(
            operation,
            &jobs,
            ARCHIVE_MAX_ENTRIES,
            max_bytes,
            Some(deadline),
        )
    })
    .await??;
    Ok(())
}

/// The clone `cid` of `source` for session `target_session_id`: created at
/// `now` (never before the source), with the source's expiry.
///
/// # Errors
///
/// `SandboxInvalidRequest` on `source.expires_at` when the source expires
/// at or before the clone's creation.
pub fn clone_of(
    source: &SandboxSnapshot,
    cid: &str,
    target_session_id: &str,
    now: Timestamp,
) -> Result<SandboxSnapshot, SandboxError> {
    let created_at = now.max(source.created_at);
    if created_at >= source.expires_at {
        return Err(SandboxError::invalid_request(
            op::CLONE_SNAPSHOT,
            "source.expires_at",
            format!("after now ({created_at})"),
            source.expires_at.to_string(),
        ));
    }
    Ok(SandboxSnapshot {
        snapshot_id: cid.to_owned(),
        session_id: target_session_id.to_owned(),
        created_at,
        ..source.clone()
    })
}

/// Copies the archive files `files` (names relative to a snapshot
/// directory) of snapshot `from` into snapshot `to`, on the blocking pool.
///
/// # Errors
///
/// `ProviderError` of cloneSnapshot naming the file that could not be
/// copied.
pub async fn copy_archives(
    layout: &Layout,
    from: &str,
    to: &str,
    files: Vec<String>,
) -> Result<(), SandboxError> {
    const OP: Operation = op::CLONE_SNAPSHOT;
    let (from, to) = (layout.snapshot_dir(from), layout.snapshot_dir(to));
    blocking(OP, move || -> Result<(), String> {
        for f in files {
            std::fs::copy(from.join(&f), to.join(&f)).map_err(|e| format!("copying {f}: {e}"))?;
        }
        Ok(())
    })
    .await?
    .map_err(|m| provider_error(OP, m))
}

/// One host directory of a resumed instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rehydration {
    /// The archive it comes from (in the snapshot's directory), `None` for
    /// a mount the snapshot did not have (it starts empty).
    pub archive: Option<PathBuf>,
    /// The host directory to create.
    pub dest: PathBuf,
    /// Who owns what it holds afterwards (`None`: as archived).
    pub owner: Option<u32>,
}

/// The host directories of instance `id` resumed with `request` from the
/// snapshot directory `snap_dir` whose archives are `mounts` and
/// `outputs_archive`: each requested mount from the archive of the same
/// path (empty when there is none), owned as [`owner_of`] says, then the
/// output tree, owned by the workload user.
pub fn rehydrations(
    layout: &Layout,
    request: &SandboxProvisionRequest,
    mounts: &[ArchivedMount],
    outputs_archive: &str,
    snap_dir: &Path,
    id: &str,
) -> Vec<Rehydration> {
    let mut jobs: Vec<Rehydration> = request
        .mounts
        .iter()
        .enumerate()
        .map(|(i, m)| Rehydration {
            archive: mounts
                .iter()
                .find(|a| a.path == m.path)
                .map(|a| snap_dir.join(&a.archive)),
            dest: layout.mount_dir(id, i),
            owner: owner_of(request, Home::Mount(i)),
        })
        .collect();
    jobs.push(Rehydration {
        archive: Some(snap_dir.join(outputs_archive)),
        dest: layout.outputs_dir(id),
        owner: Some(CHECKFU_UID),
    });
    jobs
}

/// Creates each directory of `jobs` on the blocking pool: extracted from
/// its archive without ever writing through a link (or empty), then
/// chowned to its owner.
///
/// # Errors
///
/// `ProviderError` of `operation` naming the archive or directory that
/// failed.
pub async fn rehydrate(operation: Operation, jobs: Vec<Rehydration>) -> Result<(), SandboxError> {
    blocking(operation, move || rehydrate_blocking(operation, jobs)).await?
}

/// [`rehydrate`] on the calling thread, for a provider that rehydrates in
/// a blocking task it runs anyway. Blocking.
///
/// # Errors
///
/// As [`rehydrate`].
pub fn rehydrate_blocking(
    operation: Operation,
    jobs: Vec<Rehydration>,
) -> Result<(), SandboxError> {
    let run = || -> Result<(), String> {
        for job in jobs {
            match job.archive {
                Some(a) => {
                    // The archive sits in the snapshot's directory, which
                    // is never mounted into an instance.
                    #[allow(clippy::disallowed_methods)]
                    let file =
                        std::fs::File::open(&a).map_err(|e| format!("{}: {e}", a.display()))?;
                    archive::extract_archive_keeping_links(
                        std::io::BufReader::new(file),
                        &job.dest,
                    )
                    .map_err(|e| format!("extracting {}: {}", a.display(), chain(&e)))?;
                }
                None => std::fs::create_dir(&job.dest)
                    .map_err(|e| format!("{}: {e}", job.dest.display()))?,
            }
            if let Some(uid) = job.owner {
                store::chown_tree(&job.dest, uid)
                    .map_err(|e| format!("chown of {}: {}", job.dest.display(), chain(&e)))?;
            }
        }
        Ok(())
    };
    run().map_err(|m| provider_error(operation, m))
}
