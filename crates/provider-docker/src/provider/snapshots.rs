//! Snapshots: a commit of the container plus archives of its host
//! directories; clones and resumes from them.

use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    commit_bound::check_commit_bound,
    errors::{blocking, chain, daemon_error, provider_error},
    inner::{Inner, SNAPSHOT_PREFIX},
    instances::owner_of,
    labels::{instance_tag, snapshot_tag, INSTANCE_REPOSITORY, LABEL_SCOPE, SNAPSHOT_REPOSITORY},
};
use crate::daemon;
use crate::fixture::CHECKFU_UID;
use crate::store::{self, ArchivedMount, Home, InstanceRecord, SnapshotRecord, RECORD_REVISION};
use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_hostfs::archive::{self, ArchiveJob};

/// Most entries an archive of one host directory may hold.
pub(super) const ARCHIVE_MAX_ENTRIES: usize = 1_000_000;

impl Inner {
    /// Removes a snapshot's image tag and directory. Idempotent.
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
        daemon::remove_container(&self.docker, &format!("checkfu-clone-{id}"))
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        // Temporary clone containers built from this snapshot's image (a
        // clone abandoned mid-way) would pin the image; they are ours.
        let scope = [(LABEL_SCOPE, self.scope.as_str())];
        let tag = snapshot_tag(id);
        // An error means the tag is already gone: nothing uses it by name.
        let users = daemon::list_containers_from_image(&self.docker, &tag, &scope)
            .await
            .unwrap_or_default();
        for c in users {
            let temp = c
                .names
                .unwrap_or_default()
                .iter()
                .any(|n| n.trim_start_matches('/').starts_with("checkfu-clone-"));
            if let (true, Some(cid)) = (temp, c.id) {
                daemon::remove_container(&self.docker, &cid)
                    .await
                    .map_err(|e| daemon_error(operation, &e))?;
            }
        }
        daemon::remove_image(&self.docker, &tag, false)
            .await
            .map_err(|e| daemon_error(operation, &e))?;
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

    /// Captures a snapshot of an active instance: commit plus archives.
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
            image: snapshot_tag(sid),
            mounts,
            outputs_archive: "outputs.tar".to_owned(),
        };
        // The record first, so a sweep knows the snapshot's times from now on.
        store::publish_dir(&dir, store::SNAPSHOT_RECORD, &record).map_err(|e| {
            provider_error(operation, format!("creating the snapshot directory: {e}"))
        })?;
        let name = Inner::container_of(rec);
        // Pause so that the commit and the archives see one instant.
        self.docker
            .pause_container(&name)
            .await
            .map_err(|e| provider_error(operation, format!("pausing {name}: {}", chain(&e))))?;
        let captured = self.commit_and_archive(operation, rec, &record, &dir).await;
        let unpaused = self.docker.unpause_container(&name).await;
        captured?;
        unpaused
            .map_err(|e| provider_error(operation, format!("unpausing {name}: {}", chain(&e))))?;
        Ok(snapshot)
    }

    pub(super) async fn commit_and_archive(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        record: &SnapshotRecord,
        dir: &Path,
    ) -> Result<(), SandboxError> {
        let snapshot = &record.snapshot;
        let container = Inner::container_of(rec);
        // A commit writes the writable layer's files densely into the
        // image store: it is bounded before anything is written, by what
        // the workload wrote, the ceiling and the daemon's free space.
        let ceiling = archive::snapshot_ceiling_bytes(operation)?;
        let deadline = archive::instant_of(self.clock.now(), rec.request.expires_at);
        let layer =
            check_commit_bound(&self.docker, operation, &container, ceiling, deadline).await?;
        daemon::commit_container(
            &self.docker,
            &container,
            Some((SNAPSHOT_REPOSITORY, &snapshot.snapshot_id)),
            &self.snapshot_labels(snapshot),
        )
        .await
        .map_err(|e| daemon_error(operation, &e))?;
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
        // The archives share what the layer left of the ceiling, within
        // the free space, and end by the instance's own expiry.
        let max_bytes = archive::snapshot_budget(operation, dir)?.min(ceiling - layer);
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
            image: snapshot_tag(cid),
            mounts: source.mounts.clone(),
            outputs_archive: source.outputs_archive.clone(),
        };
        // The record first, so a sweep knows the clone's times from now on.
        store::publish_dir(
            &self.layout.snapshot_dir(cid),
            store::SNAPSHOT_RECORD,
            &record,
        )
        .map_err(|e| provider_error(OP, format!("creating the snapshot directory: {e}")))?;
        let labels = self.snapshot_labels(&clone);
        // A never-started container from the source image, committed with
        // the clone's labels: an image of its own.
        let temp = format!("checkfu-clone-{cid}");
        let body = bollard::models::ContainerCreateBody {
            image: Some(source.image.clone()),
            cmd: Some(daemon::INIT_COMMAND.iter().map(|s| s.to_string()).collect()),
            entrypoint: Some(Vec::new()),
            labels: Some(labels.clone()),
            network_disabled: Some(true),
            host_config: Some(bollard::models::HostConfig {
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let opts = bollard::query_parameters::CreateContainerOptionsBuilder::new()
            .name(&temp)
            .build();
        self.docker
            .create_container(Some(opts), body)
            .await
            .map_err(|e| provider_error(OP, format!("creating {temp}: {}", chain(&e))))?;
        let committed = daemon::commit_container(
            &self.docker,
            &temp,
            Some((SNAPSHOT_REPOSITORY, cid)),
            &labels,
        )
        .await;
        let removed = daemon::remove_container(&self.docker, &temp).await;
        committed.map_err(|e| daemon_error(OP, &e))?;
        removed.map_err(|e| daemon_error(OP, &e))?;
        let from = self.layout.snapshot_dir(&src.snapshot_id);
        let to = self.layout.snapshot_dir(cid);
        let mut files: Vec<String> = source.mounts.iter().map(|m| m.archive.clone()).collect();
        files.push(source.outputs_archive.clone());
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
        let tag = instance_tag(id);
        let mut rec = InstanceRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            instance_id: id.to_owned(),
            created_at: self.clock.now(),
            state: InstanceState::Provisioning,
            request: request.clone(),
            image: tag.clone(),
            owned_image: Some(tag.clone()),
            resumed_from: Some(source.snapshot.snapshot_id.clone()),
            pool_container: None,
        };
        // The record first, so a sweep finds the instance from now on.
        store::publish_dir(&self.layout.instance_dir(id), store::INSTANCE_RECORD, &rec)
            .map_err(|e| provider_error(OP, format!("creating the instance directory: {e}")))?;
        let opts = bollard::query_parameters::TagImageOptionsBuilder::new()
            .repo(INSTANCE_REPOSITORY)
            .tag(id)
            .build();
        self.docker
            .tag_image(&source.image, Some(opts))
            .await
            .map_err(|e| provider_error(OP, format!("tagging {}: {}", source.image, chain(&e))))?;
        // Rehydrate the host directories.
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
        blocking(OP, move || -> Result<(), String> {
            for (archive, dest, owner) in jobs {
                match archive {
                    Some(a) => {
                        // The archive sits in the snapshot's directory,
                        // which is never bound into a container.
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
        self.start_container(OP, &rec).await?;
        rec.state = InstanceState::Active;
        self.save_instance(OP, &rec)?;
        Ok(rec)
    }
}
