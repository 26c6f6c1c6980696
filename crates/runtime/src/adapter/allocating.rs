//! The allocating calls: provision, activate, snapshot, cloneSnapshot,
//! release and resume, each through the allocation handoff (decision 009)
//! and the identity checks.

use super::*;

impl Adapter {
    /// provision: allocate and return the instance in `provisioning`.
    ///
    /// # Errors
    /// Admission errors before the call (see [`Requirements`]); the
    /// provider's error; or `SandboxProtocolInvalid{operation:
    /// instance_identity}` for each of the 21 checks that fails, after the
    /// rollback has run once (a rollback failure is appended).
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's provision is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.
    pub async fn provision(&self, request: SandboxProvisionRequest) -> Res<SandboxInstance> {
        self.admit_request(op::PROVISION, &request)?;
        let (provider, req) = (self.shared.provider.clone(), request.clone());
        let (instance, guard) = acquire(
            &self.shared.tasks,
            Member::Provision,
            async move { provider.provision(req).await },
            self.shared.rollback_bound,
            self.shared.verdicts,
            None,
        )
        .await
        .map_err(|e| self.admit_error(op::PROVISION, e))?;
        self.take_new_instance(request, RecordState::Provisioning, instance, guard)
            .await
    }

    /// Checks a freshly allocated instance (provision, resume) against its
    /// request and takes ownership of it, or unwinds it through its
    /// rollback. The id check and the insertion happen under one lock.
    async fn take_new_instance(
        &self,
        request: SandboxProvisionRequest,
        state: RecordState,
        instance: SandboxInstance,
        guard: Guard,
    ) -> Res<SandboxInstance> {
        let expected = if state == RecordState::Active {
            InstanceState::Active
        } else {
            InstanceState::Provisioning
        };
        let mut problems = check_instance(&request, expected, self.envelope(), &instance);
        {
            let mut records = self.records();
            if records.state_of(&instance.instance_id).is_some() {
                problems.push(Mismatch::new(
                    "instance_id",
                    "an id not already held",
                    instance.instance_id.clone(),
                ));
            } else if problems.is_empty() {
                records.live.insert(
                    instance.instance_id.clone(),
                    Record {
                        request: Arc::new(request),
                        instance: Arc::new(instance.clone()),
                        state,
                        minimum_egress: self.minimum_egress,
                        in_flight: None,
                    },
                );
                drop(records);
                guard.accept();
                return Ok(instance);
            }
        }
        match mismatches(op::INSTANCE_IDENTITY, problems) {
            Some(rejection) => Err(guard.reject(rejection).await),
            None => unreachable!("a refused instance has at least one mismatch"),
        }
    }

    /// activate: seal mounts; the instance comes back `active`.
    ///
    /// # Errors
    /// Lifecycle and network admission; the provider's error;
    /// `instance_identity` mismatches (21 checks plus an unchanged
    /// `instance_id`) after the activation's rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's activate is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the instance's in-flight marker is held until that settles, so a
    /// repeat meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.; the
    /// record stays `provisioning` unless the value was taken.
    pub async fn activate(&self, instance_id: &str) -> Res<SandboxInstance> {
        let (rec, mark) = self.claim(
            op::ACTIVATE,
            Member::Activate,
            instance_id,
            &[RecordState::Provisioning],
        )?;
        self.recheck_network(&rec.request.profile, rec.minimum_egress)?;
        let (provider, req) = (
            self.shared.provider.clone(),
            ActivateRequest {
                instance_id: instance_id.to_owned(),
            },
        );
        let (instance, guard) = acquire(
            &self.shared.tasks,
            Member::Activate,
            async move { provider.activate(req).await },
            self.shared.rollback_bound,
            self.shared.verdicts,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| self.admit_error(op::ACTIVATE, e))?;
        let mut problems = check_instance(
            &rec.request,
            InstanceState::Active,
            self.envelope(),
            &instance,
        );
        if instance.instance_id != instance_id {
            problems.push(Mismatch::new(
                "instance_id",
                instance_id,
                instance.instance_id.clone(),
            ));
        }
        if let Some(rejection) = mismatches(op::INSTANCE_IDENTITY, problems) {
            return Err(guard.reject(rejection).await);
        }
        if let Some(r) = self.records().live.get_mut(instance_id) {
            r.state = RecordState::Active;
            r.instance = Arc::new(instance.clone());
        }
        guard.accept();
        Ok(instance)
    }

    /// snapshot: capture a durable active instance.
    ///
    /// # Errors
    /// `SandboxSnapshotForbidden` for a ZDR profile (before the call);
    /// `SandboxCapabilityUnavailable{snapshots}` when the envelope has none;
    /// `invalid_request` for an `expires_at` not after now;
    /// `snapshot_identity` mismatches after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's snapshot is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the instance's in-flight marker is held until that settles, so a
    /// repeat meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back..
    pub async fn snapshot(&self, instance_id: &str, expires_at: Timestamp) -> Res<SandboxSnapshot> {
        let (rec, mark) = self.claim(
            op::SNAPSHOT,
            Member::Snapshot,
            instance_id,
            &[RecordState::Active],
        )?;
        self.admit_snapshot(op::SNAPSHOT, &rec, &expires_at)?;
        let (provider, req) = (
            self.shared.provider.clone(),
            SnapshotRequest {
                instance_id: instance_id.to_owned(),
                expires_at,
            },
        );
        let (snapshot, guard) = acquire(
            &self.shared.tasks,
            Member::Snapshot,
            async move { provider.snapshot(req).await },
            self.shared.rollback_bound,
            self.shared.verdicts,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| self.admit_error(op::SNAPSHOT, e))?;
        if let Some(rejection) = mismatches(
            op::SNAPSHOT_IDENTITY,
            check_snapshot(&rec.instance, &expires_at, &snapshot),
        ) {
            return Err(guard.reject(rejection).await);
        }
        self.records()
            .note_snapshot(&snapshot, self.shared.clock.now());
        guard.accept();
        Ok(snapshot)
    }

    fn admit_snapshot(
        &self,
        operation: Operation,
        rec: &Record,
        expires_at: &Timestamp,
    ) -> Res<()> {
        if rec.request.profile.retention == RetentionMode::EphemeralZdr {
            return Err(SandboxError::SandboxSnapshotForbidden {
                instance_id: rec.instance.instance_id.clone(),
                retention: RetentionMode::EphemeralZdr,
            }
            .into());
        }
        if !self.envelope().snapshots {
            return Err(SandboxError::unavailable(
                Requirement::Snapshots,
                "the provider does not capture snapshots",
            )
            .into());
        }
        let now = self.shared.clock.now();
        if *expires_at <= now {
            return Err(SandboxError::invalid_request(
                operation,
                "expires_at",
                format!("an instant after now ({now})"),
                expires_at.to_string(),
            )
            .into());
        }
        Ok(())
    }

    /// cloneSnapshot: an independent snapshot bound to `target_session_id`.
    ///
    /// # Errors
    /// `SandboxCapabilityUnavailable{snapshots | snapshot_clone}`;
    /// `clone_identity` mismatches (reused id, moved expiry, predating the
    /// source, wrong Session, ...) after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's cloneSnapshot is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.
    pub async fn clone_snapshot(
        &self,
        source: &SandboxSnapshot,
        target_session_id: &str,
    ) -> Res<SandboxSnapshot> {
        if !self.envelope().snapshots {
            return Err(SandboxError::unavailable(
                Requirement::Snapshots,
                "the provider does not capture snapshots",
            )
            .into());
        }
        if !self.envelope().snapshot_clone {
            return Err(SandboxError::unavailable(
                Requirement::SnapshotClone,
                "the provider does not clone snapshots",
            )
            .into());
        }
        if source.provider != self.provider_id() {
            return Err(SandboxError::invalid_request(
                op::CLONE_SNAPSHOT,
                "source.provider",
                self.provider_id(),
                &source.provider,
            )
            .into());
        }
        if target_session_id.is_empty() {
            return Err(SandboxError::invalid_request(
                op::CLONE_SNAPSHOT,
                "target_session_id",
                "a non-empty Session id",
                "\"\"",
            )
            .into());
        }
        let (provider, req) = (
            self.shared.provider.clone(),
            CloneSnapshotRequest {
                source: source.clone(),
                target_session_id: target_session_id.to_owned(),
            },
        );
        let (clone, guard) = acquire(
            &self.shared.tasks,
            Member::CloneSnapshot,
            async move { provider.clone_snapshot(req).await },
            self.shared.rollback_bound,
            self.shared.verdicts,
            None,
        )
        .await
        .map_err(|e| self.admit_error(op::CLONE_SNAPSHOT, e))?;
        if let Some(rejection) = mismatches(
            op::CLONE_IDENTITY,
            check_clone(source, target_session_id, &clone),
        ) {
            return Err(guard.reject(rejection).await);
        }
        self.records()
            .note_snapshot(&clone, self.shared.clock.now());
        guard.accept();
        Ok(clone)
    }

    /// release: durable settles a snapshot carrying `snapshot_expires_at`;
    /// ZDR destroys every trace.
    ///
    /// # Errors
    /// `invalid_request` when a durable release has no
    /// `snapshot_expires_at` or a ZDR release has one;
    /// `SandboxProtocolInvalid{release, field: disposition}` for `released`
    /// on ZDR or `destroyed` on durable, and `snapshot_identity`
    /// mismatches for the settled snapshot, each after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's release is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the instance's in-flight marker is held until that settles, so a
    /// repeat meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.; the
    /// record stays `active` unless the disposition was taken.
    pub async fn release(
        &self,
        instance_id: &str,
        snapshot_expires_at: Option<Timestamp>,
    ) -> Res<ReleaseDisposition> {
        let (rec, mark) = self.claim(
            op::RELEASE,
            Member::Release,
            instance_id,
            &[RecordState::Active],
        )?;
        let durable = rec.request.profile.retention == RetentionMode::Durable;
        match (&snapshot_expires_at, durable) {
            (None, true) => {
                return Err(SandboxError::invalid_request(
                    op::RELEASE,
                    "snapshot_expires_at",
                    "a retention deadline for a durable release",
                    "absent",
                )
                .into())
            }
            (Some(t), false) => {
                return Err(SandboxError::invalid_request(
                    op::RELEASE,
                    "snapshot_expires_at",
                    "absent for an ephemeral_zdr release",
                    t.to_string(),
                )
                .into())
            }
            (Some(t), true) => self.admit_snapshot(op::RELEASE, &rec, t)?,
            (None, false) => {}
        }
        let (provider, req) = (
            self.shared.provider.clone(),
            ReleaseRequest {
                instance_id: instance_id.to_owned(),
                snapshot_expires_at,
            },
        );
        let (disposition, guard) = acquire(
            &self.shared.tasks,
            Member::Release,
            async move { provider.release(req).await },
            self.shared.rollback_bound,
            self.shared.verdicts,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| self.admit_error(op::RELEASE, e))?;
        let problem = match results::release_disposition(snapshot_expires_at.as_ref(), &disposition)
        {
            Some(m) => Some(SandboxFailure::from(m.into_error(op::RELEASE))),
            None => match (&disposition, snapshot_expires_at) {
                (ReleaseDisposition::Released { snapshot }, Some(t)) => mismatches(
                    op::SNAPSHOT_IDENTITY,
                    check_snapshot(&rec.instance, &t, snapshot),
                ),
                _ => None,
            },
        };
        if let Some(rejection) = problem {
            return Err(guard.reject(rejection).await);
        }
        {
            let now = self.shared.clock.now();
            let mut book = self.records();
            if let ReleaseDisposition::Released { snapshot } = &disposition {
                book.note_snapshot(snapshot, now);
            }
            book.set_state(instance_id, RecordState::Released);
        }
        guard.accept();
        Ok(disposition)
    }

    /// resume: a fresh active instance from a snapshot.
    ///
    /// # Errors
    /// Request admission as for provision; `invalid_request` when the
    /// snapshot disagrees with the request on provider, placement,
    /// workspace_id, session_id, profile_id, profile_version or
    /// profile_digest, or has expired; `instance_identity` mismatches
    /// (state `active`) after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's resume is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the snapshot's resume marker is held until that settles, so a second
    /// resume of it meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.
    pub async fn resume(
        &self,
        request: SandboxProvisionRequest,
        snapshot: SandboxSnapshot,
    ) -> Res<SandboxInstance> {
        self.admit_request(op::RESUME, &request)?;
        self.recheck_network(&request.profile, self.minimum_egress)?;
        if !self.envelope().snapshots {
            return Err(SandboxError::unavailable(
                Requirement::Snapshots,
                "the provider does not capture snapshots",
            )
            .into());
        }
        let pairs: [(&str, String, String); 7] = [
            (
                "snapshot.provider",
                request.provider.clone(),
                snapshot.provider.clone(),
            ),
            (
                "snapshot.placement",
                format!("{:?}", request.placement),
                format!("{:?}", snapshot.placement),
            ),
            (
                "snapshot.workspace_id",
                request.workspace_id.clone(),
                snapshot.workspace_id.clone(),
            ),
            (
                "snapshot.session_id",
                request.session_id.clone(),
                snapshot.session_id.clone(),
            ),
            (
                "snapshot.profile_id",
                request.profile.profile_id.clone(),
                snapshot.profile_id.clone(),
            ),
            (
                "snapshot.profile_version",
                request.profile.profile_version.to_string(),
                snapshot.profile_version.to_string(),
            ),
            (
                "snapshot.profile_digest",
                request.profile.profile_digest.to_string(),
                snapshot.profile_digest.to_string(),
            ),
        ];
        for (field, expected, actual) in pairs {
            if expected != actual {
                return Err(
                    SandboxError::invalid_request(op::RESUME, field, expected, actual).into(),
                );
            }
        }
        let now = self.shared.clock.now();
        if snapshot.expires_at <= now {
            return Err(SandboxError::invalid_request(
                op::RESUME,
                "snapshot.expires_at",
                format!("an instant after now ({now})"),
                snapshot.expires_at.to_string(),
            )
            .into());
        }
        let mark = {
            let mut book = self.records();
            if !book.resuming.insert(snapshot.snapshot_id.clone()) {
                return Err(in_flight_conflict(op::RESUME, Member::Resume).into());
            }
            drop(book);
            Arc::new(InFlight {
                shared: self.shared.clone(),
                claim: Claim::Resume(snapshot.snapshot_id.clone()),
            })
        };
        let (provider, req) = (
            self.shared.provider.clone(),
            ResumeRequest {
                request: request.clone(),
                snapshot,
            },
        );
        let (instance, guard) = acquire(
            &self.shared.tasks,
            Member::Resume,
            async move { provider.resume(req).await },
            self.shared.rollback_bound,
            self.shared.verdicts,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| self.admit_error(op::RESUME, e))?;
        self.take_new_instance(request, RecordState::Active, instance, guard)
            .await
    }
}
