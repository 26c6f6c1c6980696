//! Calls that move bytes in or out of an instance: writeFile, execute,
//! readFile, readFiles, listDir and listProjectDir.

use super::*;

impl Adapter {
    /// writeFile: bytes at an admitted path. While provisioning any declared
    /// mount or the output tree; once active only the output tree.
    ///
    /// # Errors
    /// `SandboxFileTooLarge` over 16 MiB; `invalid_request` /
    /// `path_not_admitted` for a bad path; `SandboxLifecycleConflict{
    /// write_file, expected: provisioning, actual: active}` for a mount path
    /// after activation; the provider's error.
    ///
    /// # Cancel safety
    /// Not cancel-safe: the provider's writeFile is dropped with this future,
    /// so the file may or may not have been written. The runtime records
    /// nothing for a write, so a repeat with the same bytes settles it.
    pub async fn write_file(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        content: Vec<u8>,
    ) -> Res<()> {
        self.write_file_mode(instance_id, path, content, None).await
    }

    /// writeFile with permission bits: as [`Adapter::write_file`], sending
    /// `mode` (`0o000..=0o777`) to the provider. `None` and `Some(0o644)`
    /// both send no `mode` member, so a request that needs no more than
    /// the default is byte-identical to one of a provider that predates
    /// the member (decision 016).
    ///
    /// # Errors
    /// As [`Adapter::write_file`]; `invalid_request{write_file, mode}` for
    /// bits over `0o777`.
    ///
    /// # Cancel safety
    /// As [`Adapter::write_file`].
    pub async fn write_file_mode(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        content: Vec<u8>,
        mode: Option<u32>,
    ) -> Res<()> {
        self.write_entry(instance_id, path, WriteKind::File, content, mode)
            .await
    }

    /// writeFile of a directory (`kind: "directory"`): the provider creates
    /// it (or keeps the one there) with exactly `mode` (`None` and
    /// `Some(0o755)` send no `mode` member). Admission as
    /// [`Adapter::write_file`] (decision
    /// `039-directories-and-output-modes`).
    ///
    /// # Errors
    /// As [`Adapter::write_file_mode`].
    ///
    /// # Cancel safety
    /// As [`Adapter::write_file`]; a repeat creates nothing new.
    pub async fn write_directory(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        mode: Option<u32>,
    ) -> Res<()> {
        self.write_entry(instance_id, path, WriteKind::Directory, Vec::new(), mode)
            .await
    }

    /// writeFile with every member: `kind`, `content` and `mode`. The
    /// members that say nothing new are not sent (`kind` for a file, `mode`
    /// equal to the kind's default), so such a request is byte-identical to
    /// one of a provider that predates them.
    ///
    /// # Errors
    /// As [`Adapter::write_file_mode`]; `invalid_request{write_file,
    /// content_base64}` for a directory with content.
    ///
    /// # Cancel safety
    /// As [`Adapter::write_file`].
    pub async fn write_entry(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        kind: WriteKind,
        content: Vec<u8>,
        mode: Option<u32>,
    ) -> Res<()> {
        let path = &path.into();
        if let Some(m) = mode.filter(|m| *m > MAX_FILE_MODE) {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "mode",
                "permission bits of at most 0o777",
                format!("0o{m:o}"),
            )
            .into());
        }
        if kind == WriteKind::Directory && !content.is_empty() {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "content_base64",
                "empty content for kind directory",
                format!("{} bytes", content.len()),
            )
            .into());
        }
        let mode = mode.filter(|m| *m != kind.default_mode());
        let rec = self.admit(
            op::WRITE_FILE,
            instance_id,
            &[RecordState::Provisioning, RecordState::Active],
        )?;
        let home = home_of(op::WRITE_FILE, "path", path, &rec.instance.mounts)?;
        if path == home.allowed_root() {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "path",
                "a file path below its root",
                path,
            )
            .into());
        }
        if rec.state == RecordState::Active && home != PathHome::Output {
            return Err(SandboxError::conflict(
                op::WRITE_FILE,
                "provisioning",
                ConflictActual::Active,
            )
            .into());
        }
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(SandboxError::SandboxFileTooLarge {
                path: path.display(),
                limit_bytes: MAX_FILE_BYTES,
                actual_bytes: content.len() as u64,
            }
            .into());
        }
        let request = WriteFileRequest {
            instance_id: instance_id.to_owned(),
            path: path.to_owned(),
            content_base64: Bytes(content),
            mode,
            kind: (kind != WriteKind::File).then_some(kind),
        };
        checks::first_refusal(op::WRITE_FILE, validate::write_file_request(&request))?;
        self.provider()
            .write_file(request)
            .await
            .map_err(|e| self.admit_error(op::WRITE_FILE, e))
    }

    /// execute: one bounded command.
    ///
    /// # Errors
    /// `invalid_request` naming the field for arguments over 256 or 65,536
    /// bytes or with NUL, bad environment keys, `timeout_seconds` outside
    /// 1..=max_duration_seconds, `output_limit_bytes` over 16 MiB, stdin
    /// over 16 MiB; lifecycle and network admission; the provider's error
    /// (`SandboxOutputLimitExceeded` included); `SandboxProtocolInvalid{
    /// execute}` for a stream over the limit or `finished_at` before
    /// `started_at`.
    ///
    /// # Cancel safety
    /// Not cancel-safe: the provider's execute is dropped with this future
    /// (over the wire, a `$/cancel` aborts it on the server). What happens to
    /// the running command is the provider's; the runtime records nothing for
    /// it, and destroying the instance ends it.
    pub async fn execute(
        &self,
        instance_id: &str,
        command: SandboxCommand,
    ) -> Res<SandboxCommandResult> {
        let rec = self.admit(op::EXECUTE, instance_id, &[RecordState::Active])?;
        self.recheck_network(&rec.request.profile, rec.minimum_egress)?;
        checks::command(&command, rec.request.profile.max_duration_seconds)?;
        let limit = command.output_limit_bytes;
        let result = self
            .provider()
            .execute(ExecuteRequest {
                instance_id: instance_id.to_owned(),
                command,
            })
            .await
            .map_err(|e| self.admit_error(op::EXECUTE, e))?;
        checks::protocol(op::EXECUTE, results::command_result(limit, &result))?;
        Ok(result)
    }

    fn contained_reads(&self) -> Res<()> {
        if self.envelope().physically_contained_file_read {
            Ok(())
        } else {
            Err(SandboxError::unavailable(
                Requirement::PhysicallyContainedFileRead,
                format!(
                    "provider {} does not bind resolution to the read; reads fail closed",
                    self.provider_id()
                ),
            )
            .into())
        }
    }

    /// readFile: one file, contained under the root the runtime derives
    /// from the instance's own mounts (or the output tree).
    ///
    /// # Errors
    /// `SandboxCapabilityUnavailable{physically_contained_file_read}` when
    /// the envelope does not claim contained reads (fail closed);
    /// `invalid_request` for `maximum_bytes` over 16 MiB or a bad path;
    /// `path_not_admitted`; the provider's error (`outside_root`,
    /// `not_found`, `SandboxFileTooLarge`, ...); `SandboxProtocolInvalid{
    /// read_file}` for content over `maximum_bytes` or a different path.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing; the provider's call is dropped
    /// with the future.
    pub async fn read_file(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        maximum_bytes: u64,
    ) -> Res<Vec<u8>> {
        let path = &path.into();
        let rec = self.admit(op::READ_FILE, instance_id, &[RecordState::Active])?;
        if maximum_bytes > MAX_READ_FILE_BYTES {
            return Err(SandboxError::invalid_request(
                op::READ_FILE,
                "maximum_bytes",
                format!("at most {MAX_READ_FILE_BYTES}"),
                maximum_bytes.to_string(),
            )
            .into());
        }
        let home = home_of(op::READ_FILE, "path", path, &rec.instance.mounts)?;
        self.contained_reads()?;
        let request = ReadFileRequest {
            instance_id: instance_id.to_owned(),
            path: path.to_owned(),
            allowed_root: home.allowed_root().to_owned(),
            maximum_bytes,
        };
        checks::first_refusal(op::READ_FILE, validate::read_file_request(&request))?;
        let content = self
            .provider()
            .read_file(request)
            .await
            .map_err(|e| self.admit_error(op::READ_FILE, e))?;
        if content.path != *path {
            return Err(SandboxError::protocol(op::READ_FILE, "path", path, &content.path).into());
        }
        let len = content.content_base64.len() as u64;
        if len > maximum_bytes {
            return Err(SandboxError::protocol(
                op::READ_FILE,
                "content_base64",
                format!("at most {maximum_bytes} bytes"),
                format!("{len} bytes"),
            )
            .into());
        }
        Ok(content.content_base64.0)
    }

    /// readFiles: members grouped by their allowed root, one provider call
    /// per group with that group's own aggregate budget (or sequential
    /// readFile when the member is absent). Outcomes come back in request
    /// order.
    ///
    /// # Errors
    /// `invalid_request` for more than 1,024 files, a member over 16 MiB or
    /// an aggregate over 128 MiB; path admission; the provider's error;
    /// `SandboxProtocolInvalid{read_files}` for a result that is short,
    /// long, out of order, over a member's or the group's budget.
    ///
    /// # Cancel safety
    /// Cancel-safe: reads only (the native member or sequential readFile
    /// calls); the provider's call in progress is dropped with the future.
    pub async fn read_files(
        &self,
        instance_id: &str,
        files: Vec<ReadFilesEntry>,
    ) -> Res<Vec<ReadFileOutcome>> {
        let rec = self.admit(op::READ_FILES, instance_id, &[RecordState::Active])?;
        if files.len() > MAX_READ_FILES_COUNT {
            return Err(SandboxError::invalid_request(
                op::READ_FILES,
                "files",
                format!("at most {MAX_READ_FILES_COUNT} files"),
                format!("{} files", files.len()),
            )
            .into());
        }
        let mut total: u64 = 0;
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            if f.maximum_bytes > MAX_READ_FILE_BYTES {
                return Err(SandboxError::invalid_request(
                    op::READ_FILES,
                    format!("files[{i}].maximum_bytes"),
                    format!("at most {MAX_READ_FILE_BYTES}"),
                    f.maximum_bytes.to_string(),
                )
                .into());
            }
            total = total
                .checked_add(f.maximum_bytes)
                .filter(|t| *t <= MAX_READ_FILES_AGGREGATE_BYTES)
                .ok_or_else(|| {
                    SandboxError::invalid_request(
                        op::READ_FILES,
                        "files",
                        format!("an aggregate of at most {MAX_READ_FILES_AGGREGATE_BYTES} bytes"),
                        "more",
                    )
                })?;
            let root = home_of(
                op::READ_FILES,
                &format!("files[{i}].path"),
                &f.path,
                &rec.instance.mounts,
            )?
            .allowed_root()
            .to_owned();
            match groups.iter_mut().find(|(r, _)| *r == root) {
                Some((_, members)) => members.push(i),
                None => groups.push((root, vec![i])),
            }
        }
        self.contained_reads()?;
        let mut outcomes: Vec<Option<ReadFileOutcome>> = vec![None; files.len()];
        for (root, members) in groups {
            let group: Vec<ReadFilesEntry> = members.iter().map(|i| files[*i].clone()).collect();
            let got = match self.provider().read_files() {
                Some(member) => {
                    let aggregate: u64 = group.iter().map(|f| f.maximum_bytes).sum();
                    let request = ReadFilesRequest {
                        instance_id: instance_id.to_owned(),
                        allowed_root: root.clone(),
                        files: group.clone(),
                        aggregate_maximum_bytes: aggregate,
                    };
                    checks::first_refusal(op::READ_FILES, validate::read_files_request(&request))?;
                    let result = member
                        .read_files(request)
                        .await
                        .map_err(|e| self.admit_error(op::READ_FILES, e))?;
                    checks::read_files_result(&group, aggregate, &result.files)?;
                    result.files
                }
                None => self.read_files_sequentially(instance_id, &group).await?,
            };
            for (slot, outcome) in members.into_iter().zip(got) {
                outcomes[slot] = Some(outcome);
            }
        }
        Ok(outcomes.into_iter().flatten().collect())
    }

    async fn read_files_sequentially(
        &self,
        instance_id: &str,
        group: &[ReadFilesEntry],
    ) -> Res<Vec<ReadFileOutcome>> {
        let mut out = Vec::with_capacity(group.len());
        for f in group {
            let path = f.path.clone();
            let outcome = match self.read_file(instance_id, &f.path, f.maximum_bytes).await {
                Ok(content) => ReadFileOutcome::Read {
                    path,
                    content_base64: Bytes(content),
                },
                Err(failure) => match failure.error() {
                    SandboxError::SandboxFileTooLarge { actual_bytes, .. } => {
                        ReadFileOutcome::TooLarge {
                            path,
                            size_bytes: *actual_bytes,
                        }
                    }
                    SandboxError::SandboxOperationFailed { reason, .. } => match reason {
                        FailureReason::NotFound => ReadFileOutcome::NotFound { path },
                        FailureReason::OutsideRoot => ReadFileOutcome::OutsideRoot { path },
                        FailureReason::NotRegularFile => ReadFileOutcome::NotRegularFile { path },
                        _ => return Err(failure),
                    },
                    _ => return Err(failure),
                },
            };
            out.push(outcome);
        }
        Ok(out)
    }

    fn listing_root(
        &self,
        operation: Operation,
        rec: &Record,
        root: &str,
        max_entries: u32,
    ) -> Res<()> {
        checks::first_refusal(operation, validate::list_request(root, max_entries))?;
        let home = home_of(operation, "root", root, &rec.instance.mounts)?;
        if home.allowed_root() != root {
            return Err(SandboxError::invalid_request(
                operation,
                "root",
                "a mount root or the output tree",
                root,
            )
            .into());
        }
        Ok(())
    }

    /// listDir: regular files under a mount root with size and SHA-256.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{list_dir, actual: list_dir_unsupported}`
    /// when the envelope says `list_dir: false` or the member is absent;
    /// `invalid_request` for `max_entries` over 100,000 or a root that is
    /// not a mount root; `SandboxProtocolInvalid{list_dir}` for more
    /// entries than `max_entries` or an entry outside the root.
    ///
    /// # Cancel safety
    /// Cancel-safe: a listing changes nothing; the provider's call is dropped
    /// with the future.
    pub async fn list_dir(
        &self,
        instance_id: &str,
        root: &str,
        max_entries: u32,
    ) -> Res<ListDirResult> {
        let rec = self.admit(op::LIST_DIR, instance_id, &[RecordState::Active])?;
        let member = match (self.envelope().list_dir, self.provider().list_dir()) {
            (true, Some(m)) => m,
            _ => {
                return Err(SandboxError::conflict(
                    op::LIST_DIR,
                    "list_dir: true",
                    ConflictActual::ListDirUnsupported,
                )
                .into())
            }
        };
        self.listing_root(op::LIST_DIR, &rec, root, max_entries)?;
        let result = member
            .list_dir(ListDirRequest {
                instance_id: instance_id.to_owned(),
                root: root.to_owned(),
                max_entries,
            })
            .await
            .map_err(|e| self.admit_error(op::LIST_DIR, e))?;
        checks::protocol(
            op::LIST_DIR,
            results::list_dir_result(root, max_entries, &result),
        )?;
        Ok(result)
    }

    /// listProjectDir: complete leaf enumeration, special files named.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{list_project_dir, actual:
    /// list_project_dir_unsupported}` when the member is absent;
    /// `SandboxProtocolInvalid{list_project_dir}` for `complete: false`,
    /// more entries than `max_entries` or an entry outside the root.
    ///
    /// # Cancel safety
    /// Cancel-safe: a listing changes nothing; the provider's call is dropped
    /// with the future.
    pub async fn list_project_dir(
        &self,
        instance_id: &str,
        root: &str,
        max_entries: u32,
    ) -> Res<ListProjectDirResult> {
        let rec = self.admit(op::LIST_PROJECT_DIR, instance_id, &[RecordState::Active])?;
        let Some(member) = self.provider().list_project_dir() else {
            return Err(SandboxError::conflict(
                op::LIST_PROJECT_DIR,
                "list_project_dir member",
                ConflictActual::ListProjectDirUnsupported,
            )
            .into());
        };
        self.listing_root(op::LIST_PROJECT_DIR, &rec, root, max_entries)?;
        let result = member
            .list_project_dir(ListProjectDirRequest {
                instance_id: instance_id.to_owned(),
                root: root.to_owned(),
                max_entries,
            })
            .await
            .map_err(|e| self.admit_error(op::LIST_PROJECT_DIR, e))?;
        checks::protocol(
            op::LIST_PROJECT_DIR,
            results::list_project_dir_result(root, max_entries, &result),
        )?;
        Ok(result)
    }
}
