//! Snapshots: archives of the writable root layer and of every host
//! directory; clones are copies of the archives; resume unpacks them into
//! a fresh instance. Archives keep holes as holes and are bounded in
//! host bytes and by the instance's expiry (hostfs's `write_archives`).
//!
//! Nothing of a workload runs between two commands (each command's PID
//! namespace dies with it), so a snapshot taken between commands sees one
//! instant without pausing anything; a process opened with openProcess
//! keeps running while its instance is archived.

use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    errors::{blocking, chain, provider_error},
    inner::{Inner, SNAPSHOT_PREFIX},
    instances::{owner_of, prepare_root},
};
use crate::store::RootLayout as _;
use crate::store::{
    self, ArchivedMount, Home, InstanceRecord, RootMode, SnapshotRecord, RECORD_REVISION,
};
use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_hostfs::archive::{self, ArchiveJob};
use checkfu_sandbox_hostfs::rootfs::CHECKFU_UID;

/// Most entries an archive of one host directory may hold.
pub(super) const ARCHIVE_MAX_ENTRIES: usize = 1_000_000;

impl Inner {
    /// Removes a snapshot's directory. Idempotent.
    pub(super) async fn destroy_snapshot_inner(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<(), SandboxError> {
        if !store::is_id(SNAPSHOT_PREFIX, id) {
            return Ok(());
        }
        let rec = store::read_record::<SnapshotRecord>(&self.layout.snapshot_record(id))
            .ok()
            .flatten();
        if rec.as_ref().is_some_and(|r| r.scope != self.scope) {
            return Ok(());
        }
        let dir = self.layout.snapshot_dir(id);
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

    /// Captures a snapshot of an active instance: its archives.
    /// On failure, whatever was allocated is removed again.
    pub(super) async fn capture(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        expires_at: Timestamp,
    ) -> Result<SandboxSnapshot, SandboxError> {
        let sid = store::fresh_id(SNAPSHOT_PREFIX, &self.scope);
        let res = self.capture_into(operation, rec, expires_at, &sid).await;
        if res.is_err() {
            let _ = self.destroy_snapshot_inner(operation, &sid).await;
        }
        res
    }

    pub(super) async fn capture_into(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        expires_at: Timestamp,
        sid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        let r = &rec.request;
        let snapshot = SandboxSnapshot {
            snapshot_id: sid.to_owned(),
            provider: r.provider.clone(),
            placement: r.placement,
            source_instance_id: rec.instance_id.clone(),
            workspace_id: r.workspace_id.clone(),
            session_id: r.session_id.clone(),
            profile_id: r.profile.profile_id.clone(),
            profile_version: r.profile.profile_version,
            profile_digest: r.profile.profile_digest.clone(),
            created_at: self.clock.now(),
            expires_at,
        };
        let dir = self.layout.snapshot_dir(sid);
        let mounts: Vec<ArchivedMount> = r
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| ArchivedMount {
                path: m.path.clone(),
                access: m.access,
                archive: format!("mounts/{i}.tar"),
            })
            .collect();
        let record = SnapshotRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            snapshot: snapshot.clone(),
            image: rec.image.clone(),
            image_env: rec.image_env.clone(),
            rootfs_archive: "rootfs.tar".to_owned(),
            mounts,
            outputs_archive: "outputs.tar".to_owned(),
        };
        // The record first, so a sweep knows the snapshot's times from now on.
        store::publish_dir(&dir, store::SNAPSHOT_RECORD, &record).map_err(|e| {
            provider_error(operation, format!("creating the snapshot directory: {e}"))
        })?;
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
        let mut jobs: Vec<ArchiveJob> = record
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| ArchiveJob {
                source: self.layout.mount_dir(&rec.instance_id, i),
                archive: dir.join(&m.archive),
                sandbox_path: m.path.clone(),
            })
            .collect();
        jobs.push(ArchiveJob {
            source: self.layout.outputs_dir(&rec.instance_id),
            archive: dir.join(&record.outputs_archive),
            sandbox_path: OUTPUT_PATH.to_owned(),
        });
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
        let deadline = archive::instant_of(self.clock.now(), rec.request.expires_at);
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

    pub(super) async fn clone_snapshot_into(
        &self,
        source: &SnapshotRecord,
        target_session_id: &str,
        cid: &str,
    ) -> Result<SandboxSnapshot, SandboxError> {
        const OP: Operation = op::CLONE_SNAPSHOT;
        let src = &source.snapshot;
        let created_at = self.clock.now().max(src.created_at);
        if created_at >= src.expires_at {
            return Err(SandboxError::invalid_request(
                OP,
                "source.expires_at",
                format!("after now ({created_at})"),
                src.expires_at.to_string(),
            ));
        }
        let clone = SandboxSnapshot {
            snapshot_id: cid.to_owned(),
            session_id: target_session_id.to_owned(),
            created_at,
            ..src.clone()
        };
        let record = SnapshotRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            snapshot: clone.clone(),
            ..source.clone()
        };
        // The record first, so a sweep knows the clone's times from now on.
        store::publish_dir(
            &self.layout.snapshot_dir(cid),
            store::SNAPSHOT_RECORD,
            &record,
        )
        .map_err(|e| provider_error(OP, format!("creating the snapshot directory: {e}")))?;
        let from = self.layout.snapshot_dir(&src.snapshot_id);
        let to = self.layout.snapshot_dir(cid);
        let mut files: Vec<String> = source.mounts.iter().map(|m| m.archive.clone()).collect();
        files.push(source.outputs_archive.clone());
        files.push(source.rootfs_archive.clone());
        blocking(OP, move || -> Result<(), String> {
            for f in files {
                std::fs::copy(from.join(&f), to.join(&f))
                    .map_err(|e| format!("copying {f}: {e}"))?;
            }
            Ok(())
        })
        .await?
        .map_err(|m| provider_error(OP, m))?;
        Ok(clone)
    }

    pub(super) async fn resume_into(
        &self,
        request: &SandboxProvisionRequest,
        source: &SnapshotRecord,
        id: &str,
    ) -> Result<InstanceRecord, SandboxError> {
        const OP: Operation = op::RESUME;
        let mut rec = InstanceRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            instance_id: id.to_owned(),
            created_at: self.clock.now(),
            state: InstanceState::Provisioning,
            request: request.clone(),
            image: source.image.clone(),
            image_env: source.image_env.clone(),
            root_mode: self.root_mode,
            init: None,
            resumed_from: Some(source.snapshot.snapshot_id.clone()),
        };
        // The record first, so a sweep finds the instance from now on.
        store::publish_dir(&self.layout.instance_dir(id), store::INSTANCE_RECORD, &rec)
            .map_err(|e| provider_error(OP, format!("creating the instance directory: {e}")))?;
        // The image must still be unpacked (it is shared and read-only).
        let images = self.images.clone();
        let reference = request.root_image.as_str().to_owned();
        blocking(OP, move || {
            images
                .resolve(&reference)
                .and_then(|image| images.unpacked(&image))
        })
        .await?
        .map_err(|e| provider_error(OP, format!("the root image: {}", chain(&e))))?;
        // Rehydrate the host directories and the writable root layer.
        let snap_dir = self.layout.snapshot_dir(&source.snapshot.snapshot_id);
        let mut jobs: Vec<(Option<PathBuf>, PathBuf, Option<u32>)> = Vec::new();
        for (i, m) in request.mounts.iter().enumerate() {
            let archive = source
                .mounts
                .iter()
                .find(|a| a.path == m.path)
                .map(|a| snap_dir.join(&a.archive));
            jobs.push((
                archive,
                self.layout.mount_dir(id, i),
                owner_of(request, Home::Mount(i)),
            ));
        }
        jobs.push((
            Some(snap_dir.join(&source.outputs_archive)),
            self.layout.outputs_dir(id),
            Some(CHECKFU_UID),
        ));
        // The layer's owners are not archived: what it holds comes back
        // owned by the workload user (an overlay upper layer only holds
        // what the workload wrote; a copy keeps root's files root's).
        let layer_owner = match self.root_mode {
            RootMode::Overlay => Some(CHECKFU_UID),
            RootMode::Copy => None,
        };
        jobs.push((
            Some(snap_dir.join(&source.rootfs_archive)),
            match self.root_mode {
                RootMode::Overlay => self.layout.upper_dir(id),
                RootMode::Copy => self.layout.root_dir(id),
            },
            layer_owner,
        ));
        blocking(OP, move || -> Result<(), String> {
            for (archive, dest, owner) in jobs {
                match archive {
                    Some(a) => {
                        // The archive sits in the snapshot's directory,
                        // which is never mounted into an instance.
                        #[allow(clippy::disallowed_methods)]
                        let file =
                            std::fs::File::open(&a).map_err(|e| format!("{}: {e}", a.display()))?;
                        archive::extract_archive_keeping_links(
                            std::io::BufReader::new(file),
                            &dest,
                        )
                        .map_err(|e| format!("extracting {}: {}", a.display(), chain(&e)))?;
                    }
                    None => std::fs::create_dir(&dest)
                        .map_err(|e| format!("{}: {e}", dest.display()))?,
                }
                if let Some(uid) = owner {
                    store::chown_tree(&dest, uid)
                        .map_err(|e| format!("chown of {}: {}", dest.display(), chain(&e)))?;
                }
            }
            Ok(())
        })
        .await?
        .map_err(|m| provider_error(OP, m))?;
        self.prepare_mount_points(id, request)
            .map_err(|m| provider_error(OP, m))?;
        let (layout, images, layer_rec) = (self.layout.clone(), self.images.clone(), rec.clone());
        blocking(OP, move || {
            prepare_root(&layout, &images, &layer_rec, false)
        })
        .await?
        .map_err(|m| provider_error(OP, m))?;
        rec.init = Some(self.start_init(OP, &rec).await?);
        rec.state = InstanceState::Active;
        self.save_instance(OP, &rec)?;
        Ok(rec)
    }
}
