//! Snapshots: a commit of the container plus archives of its host
//! directories; clones and resumes from them.

use std::path::Path;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    commit_bound::check_commit_bound,
    errors::{chain, daemon_error, provider_error},
    inner::Inner,
    labels::{instance_tag, snapshot_tag, INSTANCE_REPOSITORY, LABEL_SCOPE, SNAPSHOT_REPOSITORY},
};
use crate::daemon;
use crate::store::{InstanceRecord, SnapshotRecord, RECORD_REVISION};
use checkfu_sandbox_hostfs::archive;
use checkfu_sandbox_hostfs::{records, snapshot_files};

impl Inner {
    /// Removes a snapshot's image tag and directory. Idempotent.
    pub(super) async fn destroy_snapshot_inner(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<(), SandboxError> {
        if !records::snapshot_destroyable::<SnapshotRecord>(&self.layout, &self.scope, id) {
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
        snapshot_files::remove_snapshot_dir(operation, &self.layout, id).await
    }

    /// Captures snapshot `sid` of an active instance: commit plus
    /// archives (hostfs's `lifecycle::capture` removes a partial one).
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
            image: snapshot_tag(sid),
            mounts,
            outputs_archive: snapshot_files::OUTPUTS_ARCHIVE.to_owned(),
        };
        // The record first, so a sweep knows the snapshot's times from now on.
        snapshot_files::publish_snapshot(operation, &self.layout, sid, &record)?;
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
        let jobs = snapshot_files::host_dir_jobs(
            &self.layout,
            &rec.instance_id,
            &record.mounts,
            &record.outputs_archive,
            dir,
        );
        // The archives share what the layer left of the ceiling, within
        // the free space, and end by the instance's own expiry.
        let max_bytes = archive::snapshot_budget(operation, dir)?.min(ceiling - layer);
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
            image: snapshot_tag(cid),
            mounts: source.mounts.clone(),
            outputs_archive: source.outputs_archive.clone(),
        };
        // The record first, so a sweep knows the clone's times from now on.
        snapshot_files::publish_snapshot(OP, &self.layout, cid, &record)?;
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
        let mut files: Vec<String> = source.mounts.iter().map(|m| m.archive.clone()).collect();
        files.push(source.outputs_archive.clone());
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
        snapshot_files::publish_instance(OP, &self.layout, id, &rec)?;
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
        let jobs = snapshot_files::rehydrations(
            &self.layout,
            request,
            &source.mounts,
            &source.outputs_archive,
            &snap_dir,
            id,
        );
        snapshot_files::rehydrate(OP, jobs).await?;
        self.prepare_mount_points(id, request)
            .map_err(|m| provider_error(OP, m))?;
        self.start_container(OP, &rec).await?;
        self.capture_exec_route(&rec).await;
        rec.state = InstanceState::Active;
        self.save_instance(OP, &rec)?;
        Ok(rec)
    }
}
