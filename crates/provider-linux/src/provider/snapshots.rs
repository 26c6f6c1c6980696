//! Snapshots: archives of the writable root layer and of every host
//! directory; clones are copies of the archives; resume unpacks them into
//! a fresh instance. Archives keep holes as holes and are bounded in
//! host bytes and by the instance's expiry (hostfs's `write_archives`).
//!
//! Nothing of a workload runs between two commands (each command's PID
//! namespace dies with it), so a snapshot taken between commands sees one
//! instant without pausing anything; a process opened with openProcess
//! keeps running while its instance is archived.

use std::path::Path;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    errors::{blocking, chain, provider_error},
    inner::Inner,
    instances::prepare_root,
};
use crate::store::RootLayout as _;
use crate::store::{InstanceRecord, RootMode, SnapshotRecord, RECORD_REVISION};
use checkfu_sandbox_hostfs::archive::{self, ArchiveJob};
use checkfu_sandbox_hostfs::rootfs::CHECKFU_UID;
use checkfu_sandbox_hostfs::snapshot_files::{self, Rehydration};
use checkfu_sandbox_hostfs::{instance_dirs, records};

impl Inner {
    /// Removes a snapshot's directory. Idempotent.
    pub(super) async fn destroy_snapshot_inner(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<(), SandboxError> {
        if !records::snapshot_destroyable::<SnapshotRecord>(&self.layout, &self.scope, id) {
            return Ok(());
        }
        snapshot_files::remove_snapshot_dir(operation, &self.layout, id).await
    }

    /// Captures snapshot `sid` of an active instance: its archives
    /// (hostfs's `lifecycle::capture` removes a partial one).
    pub(super) async fn capture_into(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        expires_at: Timestamp,
        sid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        let snapshot = snapshot_files::snapshot_of(
            &rec.request,
            &rec.instance_id,
            sid,
            self.clock.now(),
            expires_at,
        );
        let dir = self.layout.snapshot_dir(sid);
        let mounts = snapshot_files::archived_mounts(&rec.request);
        let record = SnapshotRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            snapshot: snapshot.clone(),
            image: rec.image.clone(),
            image_env: rec.image_env.clone(),
            rootfs_archive: "rootfs.tar".to_owned(),
            mounts,
            outputs_archive: snapshot_files::OUTPUTS_ARCHIVE.to_owned(),
        };
        // The record first, so a sweep knows the snapshot's times from now on.
        snapshot_files::publish_snapshot(operation, &self.layout, sid, &record)?;
        self.archive_into(operation, rec, &record, &dir).await?;
        Ok(snapshot)
    }

    pub(super) async fn archive_into(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        record: &SnapshotRecord,
        dir: &Path,
    ) -> Result<(), SandboxError> {
        let mut jobs = snapshot_files::host_dir_jobs(
            &self.layout,
            &rec.instance_id,
            &record.mounts,
            &record.outputs_archive,
            dir,
        );
        jobs.push(ArchiveJob {
            source: match rec.root_mode {
                RootMode::Overlay => self.layout.upper_dir(&rec.instance_id),
                RootMode::Copy => self.layout.root_dir(&rec.instance_id),
            },
            archive: dir.join(&record.rootfs_archive),
            sandbox_path: "/".to_owned(),
        });
        // Bounded in host bytes (a ceiling and the free space) and by the
        // instance's own expiry.
        let max_bytes = archive::snapshot_budget(operation, dir)?;
        snapshot_files::write_snapshot_archives(
            operation,
            jobs,
            max_bytes,
            self.clock.now(),
            rec.request.expires_at,
        )
        .await
    }

    pub(super) async fn clone_snapshot_into(
        &self,
        source: &SnapshotRecord,
        target_session_id: &str,
        cid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        const OP: Operation = op::CLONE_SNAPSHOT;
        let src = &source.snapshot;
        let clone = snapshot_files::clone_of(src, cid, target_session_id, self.clock.now())?;
        let record = SnapshotRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            snapshot: clone.clone(),
            ..source.clone()
        };
        // The record first, so a sweep knows the clone's times from now on.
        snapshot_files::publish_snapshot(OP, &self.layout, cid, &record)?;
        let mut files: Vec<String> = source.mounts.iter().map(|m| m.archive.clone()).collect();
        files.push(source.outputs_archive.clone());
        files.push(source.rootfs_archive.clone());
        snapshot_files::copy_archives(&self.layout, &src.snapshot_id, cid, files).await?;
        Ok(clone)
    }

    pub(super) async fn resume_into(
        &self,
        request: &SandboxProvisionRequest,
        source: &SnapshotRecord,
        id: &str,
    ) -> Result<InstanceRecord, SandboxError> {
        const OP: Operation = op::RESUME;
        let mut rec = self.provisioning_record(
            id,
            request,
            (source.image.clone(), source.image_env.clone()),
            Some(source.snapshot.snapshot_id.clone()),
        );
        // The record first, so a sweep finds the instance from now on.
        snapshot_files::publish_instance(OP, &self.layout, id, &rec)?;
        // Rehydrate the host directories and the writable root layer.
        let snap_dir = self.layout.snapshot_dir(&source.snapshot.snapshot_id);
        let mut jobs = snapshot_files::rehydrations(
            &self.layout,
            request,
            &source.mounts,
            &source.outputs_archive,
            &snap_dir,
            id,
        );
        // The layer's owners are not archived: what it holds comes back
        // owned by the workload user (an overlay upper layer only holds
        // what the workload wrote; a copy keeps root's files root's).
        let layer_owner = match self.root_mode {
            RootMode::Overlay => Some(CHECKFU_UID),
            RootMode::Copy => None,
        };
        jobs.push(Rehydration {
            archive: Some(snap_dir.join(&source.rootfs_archive)),
            dest: match self.root_mode {
                RootMode::Overlay => self.layout.upper_dir(id),
                RootMode::Copy => self.layout.root_dir(id),
            },
            owner: layer_owner,
        });
        // One blocking task for the files (each hop to the blocking pool
        // waits for a thread to be scheduled).
        let (layout, images, layer_rec) = (self.layout.clone(), self.images.clone(), rec.clone());
        let reference = request.root_image.as_str().to_owned();
        blocking(OP, move || {
            // The image must still be unpacked (it is shared and read-only).
            images
                .resolve(&reference)
                .and_then(|image| images.unpacked(&image))
                .map_err(|e| provider_error(OP, format!("the root image: {}", chain(&e))))?;
            snapshot_files::rehydrate_blocking(OP, jobs)?;
            let id = &layer_rec.instance_id;
            instance_dirs::prepare_mount_points(&layout, id, &layer_rec.request)
                .and_then(|()| prepare_root(&layout, &images, &layer_rec, false))
                .map_err(|m| provider_error(OP, m))
        })
        .await??;
        rec.init = Some(self.start_init(OP, &rec).await?);
        rec.state = InstanceState::Active;
        self.save_instance(OP, &rec)?;
        Ok(rec)
    }
}
