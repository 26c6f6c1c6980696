//! The optional members: resolveImage, cleanupInventory, readFiles,
//! listDir, listProjectDir and openProcess (beginActiveWrite is in
//! `active_write`).

use super::*;

/// The oracle has no image store: a pinned reference is taken as is, and
/// `name[:tag]` is pinned to the SHA-256 of its whole text, so the same
/// tag always gives the same reference.
#[async_trait]
impl ResolveImageMember for Inner {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        if reference.is_empty() || reference.chars().any(char::is_whitespace) {
            return Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("image {reference:?} is not a reference"),
            ));
        }
        if reference.contains('@') {
            return Ok(reference.to_owned());
        }
        let name = match reference.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => name,
            _ => reference,
        };
        let hex: String = Sha256::digest(reference.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(format!("{name}@sha256:{hex}"))
    }
}

#[async_trait]
impl CleanupInventoryMember for Inner {
    async fn cleanup_inventory(&self) -> Result<CleanupInventory, SandboxError> {
        let st = self.lock();
        Ok(CleanupInventory {
            instances: st
                .instances
                .iter()
                .map(|(id, r)| SweepCandidate {
                    id: id.clone(),
                    created_at: Some(r.created_at),
                    expires_at: Some(r.request.expires_at),
                })
                .collect(),
            snapshots: st
                .snapshots
                .iter()
                .map(|(id, r)| SweepCandidate {
                    id: id.clone(),
                    created_at: Some(r.snapshot.created_at),
                    expires_at: Some(r.snapshot.expires_at),
                })
                .collect(),
        })
    }
}

#[async_trait]
impl ReadFilesMember for Inner {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        let textual = self.has(Fault::TextualContainment);
        let over_budget = self.has(Fault::ReadFilesOverBudget);
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        let mut remaining = request.aggregate_maximum_bytes;
        let mut files = Vec::with_capacity(request.files.len());
        for entry in &request.files {
            let path = entry.path.clone();
            let outcome =
                match record
                    .fs
                    .read_contained(&request.allowed_root, &entry.path, textual)
                {
                    Ok(bytes) => {
                        let size = bytes.len() as u64;
                        let limit = entry.maximum_bytes.min(remaining);
                        if size > limit && !over_budget {
                            ReadFileOutcome::TooLarge {
                                path,
                                size_bytes: size,
                            }
                        } else {
                            remaining = remaining.saturating_sub(size);
                            ReadFileOutcome::Read {
                                path,
                                content_base64: Bytes(bytes.clone()),
                            }
                        }
                    }
                    Err(ReadRefusal::OutsideRoot) => ReadFileOutcome::OutsideRoot { path },
                    Err(ReadRefusal::NotFound) => ReadFileOutcome::NotFound { path },
                    Err(ReadRefusal::NotRegular) => ReadFileOutcome::NotRegularFile { path },
                };
            files.push(outcome);
        }
        if self.has(Fault::ReadFilesOutOfOrder) {
            files.reverse();
        }
        Ok(ReadFilesResult { files })
    }
}

fn sha256_digest(bytes: &[u8]) -> Digest {
    Digest::from_sha256_bytes(Sha256::digest(bytes).into())
}

fn too_many(operation: Operation, found: usize, max: u32) -> SandboxError {
    SandboxError::invalid_request(
        operation,
        "max_entries",
        format!("at least {found} (the listing's size)"),
        max.to_string(),
    )
}

#[async_trait]
impl ListDirMember for Inner {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        record
            .fs
            .physical_root(&request.root)
            .map_err(|r| read_refusal(op::LIST_DIR, r, &request.root))?;
        let entries: Vec<DirEntry> = record
            .fs
            .subtree(&request.root)
            .into_iter()
            .filter_map(|(path, node)| match node {
                FsNode::File(b) => Some(DirEntry {
                    path: path.clone().into(),
                    size_bytes: b.len() as u64,
                    // A body no member can return is not hashed.
                    sha256: (b.len() as u64 <= MAX_FILE_BYTES).then(|| sha256_digest(b)),
                    mode: DirEntry::listed_mode(record.fs.mode(path)),
                }),
                _ => None,
            })
            .collect();
        if entries.len() > request.max_entries as usize {
            return Err(too_many(op::LIST_DIR, entries.len(), request.max_entries));
        }
        Ok(ListDirResult { entries })
    }
}

#[async_trait]
impl ListProjectDirMember for Inner {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        let drop_special = self.has(Fault::ListProjectDirDropsSpecial);
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        record
            .fs
            .physical_root(&request.root)
            .map_err(|r| read_refusal(op::LIST_PROJECT_DIR, r, &request.root))?;
        let entries: Vec<ProjectEntry> = record
            .fs
            .subtree(&request.root)
            .into_iter()
            .filter_map(|(path, node)| {
                let kind = match node {
                    FsNode::Directory => return None,
                    FsNode::File(b) => ProjectEntryKind::Regular {
                        size_bytes: b.len() as u64,
                        sha256: sha256_digest(b),
                    },
                    FsNode::Symlink(t) => ProjectEntryKind::Symlink {
                        target: t.clone().into(),
                    },
                    FsNode::Special(_) if drop_special => return None,
                    FsNode::Special(kind) => match kind {
                        SpecialKind::NullDevice | SpecialKind::ZeroDevice | SpecialKind::Device => {
                            ProjectEntryKind::Device
                        }
                        SpecialKind::Socket => ProjectEntryKind::Socket,
                        SpecialKind::Fifo => ProjectEntryKind::Fifo,
                        SpecialKind::Submodule => ProjectEntryKind::Submodule,
                        SpecialKind::Other => ProjectEntryKind::Other,
                    },
                };
                Some(ProjectEntry {
                    path: path.clone().into(),
                    kind,
                })
            })
            .collect();
        if entries.len() > request.max_entries as usize {
            return Err(too_many(
                op::LIST_PROJECT_DIR,
                entries.len(),
                request.max_entries,
            ));
        }
        Ok(ListProjectDirResult {
            entries,
            complete: !self.has(Fault::ListProjectDirIncomplete),
        })
    }
}

#[async_trait]
impl OpenProcessMember for Inner {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        let now = self.clock.now();
        let mut guard = self.lock();
        let st = &mut *guard;
        let record = find(&mut st.instances, &request.instance_id)?;
        if record.state != InstanceState::Active {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "active",
                record.state,
            ));
        }
        record.processes.retain(|p| p.is_live());
        if !record.processes.is_empty() && !self.has(Fault::SecondOpenProcessAllowed) {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "no live process",
                ConflictActual::ProcessAlreadyOpen,
            ));
        }
        let plan = self.plan(record, &st.external, &request);
        let shared = ProcessShared::new(ignored_signals(&request));
        record.processes.push(shared.clone());
        let req = &record.request;
        let evidence = SandboxProcessEvidence {
            provider: req.provider.clone(),
            instance_id: if self.has(Fault::ProcessEvidenceMismatch) {
                "mem-inst-000000".to_string()
            } else {
                request.instance_id.clone()
            },
            session_id: req.session_id.clone(),
            placement: req.placement,
            tier: req.target,
            network_mode: req.profile.network_policy.mode(),
            executable: request.executable.clone(),
            started_at: if self.has(Fault::ProcessStartsAtExpiry) {
                req.expires_at
            } else {
                now
            },
        };
        drop(guard);
        let (caller_in, child_in) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        let (child_out, caller_out) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        let (child_err, caller_err) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        spawn_child(
            shared.clone(),
            plan,
            ChildPipes {
                stdin: child_in,
                stdout: child_out,
                stderr: child_err,
            },
            self.has(Fault::StdinEofNeverDelivered),
        );
        Ok(SandboxProcess {
            input: Box::pin(caller_in.compat()),
            output: Box::pin(caller_out.compat()),
            error: Box::pin(caller_err.compat()),
            control: Arc::new(Control { shared }),
            evidence,
        })
    }
}
