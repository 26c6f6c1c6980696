//! The optional members: resolveImage, cleanupInventory, readFiles,
//! listDir, listProjectDir and openProcess (beginActiveWrite is in
//! `active_write`).

use super::*;
use crate::fs::FileView;

/// The oracle has no image store, so every well-formed reference names an
/// image it holds: a pinned reference `name@sha256:<64 hex>` is taken as
/// is; a bare image ID `sha256:<64 hex>` (what `checkfu sandbox fixture`
/// prints) pins to [`IMAGE_ID_REPOSITORY`]`@sha256:<the same hex>`, as
/// Docker pins the fixture's ID; `name[:tag]` is pinned to the SHA-256 of
/// its whole text, so the same tag always gives the same reference.
/// Anything else (empty, whitespace, a malformed digest or image ID) is
/// `SandboxCapabilityUnavailable{base_image}` naming the reference.
#[async_trait]
impl ResolveImageMember for Inner {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        let refuse = |why: &str| {
            Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("image {reference:?} {why}"),
            ))
        };
        if reference.is_empty() || reference.chars().any(char::is_whitespace) {
            return refuse("is not a reference");
        }
        if let Some(hex) = reference.strip_prefix("sha256:") {
            return match Digest::parse(reference) {
                Ok(_) => Ok(format!("{IMAGE_ID_REPOSITORY}@sha256:{hex}")),
                Err(_) => refuse("is not an image ID sha256:<64 lowercase hex>"),
            };
        }
        if reference.contains('@') {
            return match ImageReference::parse(reference) {
                Ok(pinned) => Ok(pinned.as_str().to_owned()),
                Err(_) => refuse("is not name@sha256:<64 lowercase hex>"),
            };
        }
        let name = match reference.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => name,
            _ => reference,
        };
        let hex: String = Sha256::digest(reference.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        match ImageReference::parse(&format!("{name}@sha256:{hex}")) {
            Ok(pinned) => Ok(pinned.as_str().to_owned()),
            Err(_) => refuse("is not a reference name[:tag] (lower-case name)"),
        }
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
        self.observe(&mut st, &request.instance_id);
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
                    Ok(file) => {
                        let size = file.size_bytes;
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
                                content_base64: Bytes(file.to_vec()),
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

/// The SHA-256 of a file's whole body, holes as zeros (streamed: a hole
/// is never held in memory).
fn sha256_of(file: &FileView<'_>) -> Digest {
    let mut hasher = Sha256::new();
    hasher.update(file.stored);
    let zeros = [0u8; 65_536];
    let mut left = file.size_bytes.saturating_sub(file.stored.len() as u64);
    while left > 0 {
        let take = left.min(zeros.len() as u64) as usize;
        hasher.update(&zeros[..take]);
        left -= take as u64;
    }
    Digest::from_sha256_bytes(hasher.finalize().into())
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
        self.observe(&mut st, &request.instance_id);
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
                FsNode::File(b) => {
                    let view = FileView {
                        stored: b,
                        size_bytes: record.fs.apparent_size(path, b.len()),
                    };
                    Some(DirEntry {
                        path: path.clone().into(),
                        size_bytes: view.size_bytes,
                        // A body no member can return is not hashed
                        // (decision 018); a hole over it is never read.
                        sha256: (view.size_bytes <= MAX_FILE_BYTES).then(|| sha256_of(&view)),
                        mode: DirEntry::listed_mode(record.fs.mode(path)),
                    })
                }
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
        self.observe(&mut st, &request.instance_id);
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
                    FsNode::File(b) => {
                        let view = FileView {
                            stored: b,
                            size_bytes: record.fs.apparent_size(path, b.len()),
                        };
                        ProjectEntryKind::Regular {
                            size_bytes: view.size_bytes,
                            sha256: sha256_of(&view),
                        }
                    }
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
