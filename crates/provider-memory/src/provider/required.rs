//! The required members ([`SandboxProvider`]).

use super::*;

#[async_trait]
impl SandboxProvider for MemoryProvider {
    fn provider_id(&self) -> &str {
        PROVIDER_ID
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        let mut envelope = Self::envelope();
        if self.inner.has(Fault::EnvelopeDrifts)
            && self
                .inner
                .lock()
                .instances
                .values()
                .any(|r| r.state == InstanceState::Active)
        {
            envelope.enforcement.cpu = EnforcementLevel::ProviderEnforced;
        }
        envelope
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let id = st.instance_id();
        st.instances.insert(
            id.clone(),
            InstanceRecord {
                fs: Self::fresh_fs(&request),
                request: request.clone(),
                state: InstanceState::Provisioning,
                created_at: now,
                listeners: BTreeMap::new(),
                processes: vec![],
                active_writes: Default::default(),
            },
        );
        drop(st);
        let value = self.instance_value(&request, &id, InstanceState::Provisioning);
        Ok(self.handoff(Member::Provision, value, Target::DestroyInstance(id)))
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        let size = request.content_base64.len() as u64;
        if size > MAX_FILE_BYTES {
            return Err(SandboxError::SandboxFileTooLarge {
                path: request.path.display(),
                limit_bytes: MAX_FILE_BYTES,
                actual_bytes: size,
            });
        }
        let kind = request.effective_kind();
        if kind == WriteKind::Directory && size > 0 {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "content_base64",
                "empty content for kind directory",
                format!("{size} bytes"),
            ));
        }
        let seal_ignored = self.inner.has(Fault::SealIgnored);
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        // The owning root: the deepest declared mount or the output tree.
        let output = SandboxMount {
            path: OUTPUT_PATH.to_string(),
            access: MountAccess::ReadWrite,
        };
        let owner = record
            .request
            .mounts
            .iter()
            .chain(std::iter::once(&output))
            .filter(|m| is_within(&request.path, &m.path))
            .max_by_key(|m| split(&m.path).len())
            .cloned();
        let Some(owner) = owner else {
            return Err(SandboxError::failed(
                op::WRITE_FILE,
                FailureReason::PathNotAdmitted,
                format!(
                    "{} is under no mount and not in the output tree",
                    request.path
                ),
            ));
        };
        let sealed = record.state == InstanceState::Active && !seal_ignored;
        // Write scope narrows at activation (spec "Paths, mounts"): a mount
        // path is provisioning-only, the answer the runtime gives (decision
        // 005) and every provider gives (launch parity table).
        if sealed && owner.path != OUTPUT_PATH {
            return Err(SandboxError::conflict(
                op::WRITE_FILE,
                "provisioning",
                ConflictActual::Active,
            ));
        }
        let fail = |reason, what: &str| {
            SandboxError::failed(op::WRITE_FILE, reason, format!("{}: {what}", request.path))
        };
        let root = record.fs.physical_root(&owner.path).map_err(|_| {
            fail(
                FailureReason::OutsideRoot,
                "its mount root is not a directory",
            )
        })?;
        let depth = root.len();
        let rel = split(&request.path)[depth..].to_vec();
        if rel.is_empty() {
            // A root itself is no file path: the runtime's answer.
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "path",
                "a normalized file path below its root",
                &request.path,
            ));
        }
        // Create missing parents, contained under the owning root.
        let mut parent = root.clone();
        for i in 1..rel.len() {
            match record
                .fs
                .walk(root.clone(), rel[..i].to_vec(), true, Some(depth))
            {
                Ok((p, None)) => {
                    record.fs.insert(crate::fs::join(&p), FsNode::Directory);
                    parent = p;
                }
                Ok((p, Some(FsNode::Directory))) => parent = p,
                Ok((_, Some(_))) | Err(WalkError::NotDirectory) => {
                    return Err(fail(FailureReason::NotFound, "a parent is not a directory"))
                }
                Err(WalkError::NotFound) => {
                    return Err(fail(FailureReason::NotFound, "a parent does not exist"))
                }
                Err(WalkError::Escape) | Err(WalkError::Loop) => {
                    return Err(fail(
                        FailureReason::OutsideRoot,
                        "resolves outside its mount",
                    ))
                }
            }
        }
        let mut target = parent;
        target.push(rel[rel.len() - 1].clone());
        let target = crate::fs::join(&target);
        // A seal applies to where the bytes physically land.
        let landing_access = record
            .request
            .mounts
            .iter()
            .chain(std::iter::once(&output))
            .filter(|m| is_within(&target, &m.path))
            .max_by_key(|m| split(&m.path).len())
            .map(|m| m.access);
        if sealed && landing_access == Some(MountAccess::ReadOnly) {
            return Err(fail(FailureReason::ReadOnly, "read-only file system"));
        }
        let mode = request.effective_mode();
        if mode > MAX_FILE_MODE {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "mode",
                "permission bits of at most 0o777",
                format!("0o{mode:o}"),
            ));
        }
        match (kind, record.fs.get(&target)) {
            (WriteKind::File, Some(FsNode::Directory)) => {
                return Err(fail(FailureReason::NotRegularFile, "is a directory"))
            }
            // Replaces a link or special file there (rename semantics).
            (WriteKind::File, _) => record
                .fs
                .insert(&target, FsNode::File(request.content_base64.0)),
            // A directory there is kept (its entries too); a link is never
            // followed, as openat2(RESOLVE_NO_SYMLINKS) refuses it.
            (WriteKind::Directory, Some(FsNode::Directory)) => {}
            (WriteKind::Directory, None) => record.fs.insert(&target, FsNode::Directory),
            (WriteKind::Directory, Some(FsNode::Symlink(_))) => {
                return Err(fail(FailureReason::OutsideRoot, "is a symbolic link"))
            }
            (WriteKind::Directory, Some(_)) => {
                return Err(fail(FailureReason::NotRegularFile, "is not a directory"))
            }
        }
        record.fs.set_mode(&target, mode);
        Ok(())
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        record.state = InstanceState::Active;
        let req = record.request.clone();
        drop(st);
        let value = self.instance_value(&req, &request.instance_id, InstanceState::Active);
        Ok(self.handoff(
            Member::Activate,
            value,
            Target::Deactivate(request.instance_id),
        ))
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        let started_at = self.inner.clock.now();
        let command = request.command;
        let limit = command.output_limit_bytes;
        let (outcome, stdout, stderr, elapsed) = {
            let mut guard = self.inner.lock();
            let st = &mut *guard;
            self.inner.observe(st, &request.instance_id);
            let record = find(&mut st.instances, &request.instance_id)?;
            if record.state != InstanceState::Active {
                return Err(SandboxError::conflict(op::EXECUTE, "active", record.state));
            }
            let mut env = base_environment();
            env.extend(command.environment.clone());
            let mut argv = vec![command.executable.clone()];
            argv.extend(command.arguments.iter().cloned());
            let cap = limit.min(SINK_SAFETY_CAP_BYTES);
            let mut exec = Exec {
                fs: &mut record.fs,
                mounts: &record.request.mounts,
                sealed: !self.inner.has(Fault::SealIgnored),
                cwd: command.working_directory.clone(),
                env,
                stdin: command.stdin_base64.map(|b| b.0),
                stdout: Sink::new(cap, OutputStream::Stdout),
                stderr: Sink::new(cap, OutputStream::Stderr),
                elapsed_millis: 0,
                timeout_millis: u64::from(command.timeout_seconds) * 1000,
                net: NetView {
                    policy: &record.request.profile.network_policy,
                    loopback: &record.listeners,
                    external: &st.external,
                    none_leaks: self.inner.has(Fault::NetworkNoneReachesListener),
                    allowlist_ignored: self.inner.has(Fault::AllowlistIgnored),
                },
            };
            let outcome = exec.launch(&argv, &command.environment);
            (
                outcome,
                std::mem::take(&mut exec.stdout.buf),
                std::mem::take(&mut exec.stderr.buf),
                exec.elapsed_millis,
            )
        };
        self.inner.spend(elapsed).await;
        let mut finished_at = self.inner.clock.now();
        if self.inner.has(Fault::NonMonotonicInterval) {
            finished_at = started_at.add_millis(-1);
        }
        let exit = match outcome {
            Ok(code) => ExitCause::ExitCode(code),
            Err(Abort::TimedOut) => ExitCause::TimedOut,
            Err(Abort::Signalled(n)) => ExitCause::ExitCode(128 + n),
            Err(Abort::Overflow(_)) if self.inner.has(Fault::OutputOverLimit) => {
                ExitCause::ExitCode(0)
            }
            Err(Abort::Overflow(stream)) => {
                return Err(SandboxError::SandboxOutputLimitExceeded {
                    stream,
                    limit_bytes: limit,
                })
            }
        };
        Ok(SandboxCommandResult {
            exit,
            stdout_base64: Bytes(stdout),
            stderr_base64: Bytes(stderr),
            started_at,
            finished_at,
        })
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        let textual = self.inner.has(Fault::TextualContainment);
        let mut st = self.inner.lock();
        self.inner.observe(&mut st, &request.instance_id);
        let record = st.instance(&request.instance_id)?;
        let file = record
            .fs
            .read_contained(&request.allowed_root, &request.path, textual)
            .map_err(|r| read_refusal(op::READ_FILE, r, &request.path))?;
        let size = file.size_bytes;
        if size > request.maximum_bytes {
            return Err(SandboxError::SandboxFileTooLarge {
                path: request.path.display(),
                limit_bytes: request.maximum_bytes,
                actual_bytes: size,
            });
        }
        Ok(SandboxFileContent {
            content_base64: Bytes(file.to_vec()),
            path: request.path,
        })
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        let retention = record.request.profile.retention;
        if retention == RetentionMode::EphemeralZdr {
            return Err(SandboxError::SandboxSnapshotForbidden {
                instance_id: request.instance_id,
                retention,
            });
        }
        let mut expires_at = request.expires_at;
        if self.inner.has(Fault::SnapshotExpiryReplaced) {
            // "The platform's own deadline": a day later than asked.
            expires_at = expires_at.add_seconds(86_400);
        }
        let mut snapshot = Self::snapshot_of(&mut st, &request.instance_id, expires_at, now)?;
        drop(st);
        let own = Target::DestroySnapshot(snapshot.snapshot_id.clone());
        if self.inner.has(Fault::SnapshotSourceMismatch) {
            snapshot.source_instance_id = "mem-inst-000000".to_string();
        }
        Ok(self.handoff(Member::Snapshot, snapshot, own))
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let source_id = request.source.snapshot_id.clone();
        let Some(source) = st.snapshots.get(&source_id) else {
            return Err(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: source_id,
            });
        };
        let fs = source.fs.clone();
        let mut clone = source.snapshot.clone();
        clone.session_id = request.target_session_id.clone();
        clone.created_at = now.max(source.snapshot.created_at);
        if self.inner.has(Fault::CloneMovesExpiry) {
            clone.expires_at = clone.expires_at.add_seconds(3600);
        }
        if self.inner.has(Fault::ClonePredatesSource) {
            clone.created_at = source.snapshot.created_at.add_millis(-1);
        }
        clone.snapshot_id = st.snapshot_id();
        st.snapshots.insert(
            clone.snapshot_id.clone(),
            SnapshotRecord {
                snapshot: clone.clone(),
                fs,
            },
        );
        drop(st);
        let own = Target::DestroySnapshot(clone.snapshot_id.clone());
        if self.inner.has(Fault::CloneReusesSourceId) {
            clone.snapshot_id = source_id;
        }
        Ok(self.handoff(Member::CloneSnapshot, clone, own))
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        let durable = record.request.profile.retention == RetentionMode::Durable;
        let instance_expiry = record.request.expires_at;
        let settle = if durable {
            !self.inner.has(Fault::DestroyedOnDurable)
        } else {
            self.inner.has(Fault::ReleasedOnZdr)
        };
        if !settle {
            st.destroy_instance(&request.instance_id);
            drop(st);
            return Ok(self.handoff(
                Member::Release,
                ReleaseDisposition::Destroyed,
                Target::Nothing,
            ));
        }
        let expires_at = match request.snapshot_expires_at {
            Some(t) => t,
            None if durable => {
                return Err(SandboxError::invalid_request(
                    op::RELEASE,
                    "snapshot_expires_at",
                    "a retention deadline for a durable release",
                    "absent",
                ))
            }
            None => instance_expiry,
        };
        let snapshot = Self::snapshot_of(&mut st, &request.instance_id, expires_at, now)?;
        st.destroy_instance(&request.instance_id);
        drop(st);
        let own = Target::DestroySnapshot(snapshot.snapshot_id.clone());
        Ok(self.handoff(
            Member::Release,
            ReleaseDisposition::Released { snapshot },
            own,
        ))
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let snapshot_id = &request.snapshot.snapshot_id;
        let Some(snap) = st.snapshots.get(snapshot_id) else {
            return Err(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: snapshot_id.clone(),
            });
        };
        let mut fs = snap.fs.clone();
        Self::prepare_mounts(&mut fs, &request.request);
        let id = st.instance_id();
        st.instances.insert(
            id.clone(),
            InstanceRecord {
                fs,
                request: request.request.clone(),
                state: InstanceState::Active,
                created_at: now,
                listeners: BTreeMap::new(),
                processes: vec![],
                active_writes: Default::default(),
            },
        );
        drop(st);
        let value = self.instance_value(&request.request, &id, InstanceState::Active);
        Ok(self.handoff(Member::Resume, value, Target::DestroyInstance(id)))
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.inner.lock().destroy_instance(&request.instance_id);
        Ok(())
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.inner.lock().snapshots.remove(&request.snapshot_id);
        Ok(())
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        // The contract's rule, with the two cleanup faults bending the pin.
        let ignore_pin = self.inner.has(Fault::CleanupIgnoresPin);
        let pin_beats_expiry = self.inner.has(Fault::CleanupKeepsExpiredPin);
        let mut st = self.inner.lock();
        let instances: Vec<String> = st
            .instances
            .iter()
            .filter(|(_, r)| {
                request.sweeps_instance(Some(r.created_at), Some(r.request.expires_at))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &instances {
            st.destroy_instance(id);
        }
        let unpinned = CleanupRequest {
            pinned_snapshots: Vec::new(),
            ..request.clone()
        };
        let rule = if ignore_pin { &unpinned } else { &request };
        let snapshots: Vec<String> = st
            .snapshots
            .iter()
            .filter(|(id, r)| {
                if pin_beats_expiry && rule.is_pinned(id) {
                    false
                } else {
                    let s = &r.snapshot;
                    rule.sweeps_snapshot(id, Some(s.created_at), Some(s.expires_at))
                }
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &snapshots {
            st.snapshots.remove(id);
        }
        Ok(CleanupResult {
            instances,
            snapshots,
        })
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        Some(&*self.inner)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        if self.inner.has(Fault::ListDirMemberAbsent) {
            None
        } else {
            Some(&*self.inner)
        }
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        Some(&*self.inner)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        Some(&*self.inner)
    }

    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        Some(&*self.inner)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        Some(&*self.inner)
    }

    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        Some(&*self.inner)
    }
}
