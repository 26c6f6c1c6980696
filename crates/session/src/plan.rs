//! What a session runs, and the checks made before anything is
//! provisioned.

use checkfu_sandbox_contract::{op, Operation};
use std::path::PathBuf;

use checkfu_sandbox_contract::bounds::{MAX_ARGUMENTS, MAX_ARGUMENT_BYTES, MAX_OUTPUT_LIMIT_BYTES};
use checkfu_sandbox_contract::{
    FailureReason, Resources, SandboxCommand, SandboxError, SandboxFailure, SandboxMount,
};
use checkfu_sandbox_runtime::select::check_mount_plan;
use checkfu_sandbox_runtime::staging::read_git_blobs;

use crate::SessionError;

/// Where a mount's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountSource {
    /// Every regular file under a host folder.
    Folder(PathBuf),
    /// A path of a Git revision.
    Git {
        /// The repository.
        repo: PathBuf,
        /// The revision.
        rev: String,
        /// The file or tree in it (empty: the whole tree).
        repo_path: String,
    },
}

/// One mount of the plan, with the input it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPlan {
    /// The input as the caller gave it (`--mount ./data:/data:ro`); errors
    /// about this mount name it.
    pub input: String,
    /// Where the files come from.
    pub source: MountSource,
    /// The declared mount.
    pub mount: SandboxMount,
}

/// Everything a session needs.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// The root image: `name@sha256:<hex>`, or `name[:tag]`, which the
    /// provider pins (resolveImage) before provisioning.
    pub image: String,
    /// The mounts, staged in order before activation.
    pub mounts: Vec<MountPlan>,
    /// The command (executable, arguments, directory, environment,
    /// timeout in seconds, output bound in bytes per stream).
    pub command: SandboxCommand,
    /// Host folder the output tree is copied into, if any.
    pub outputs: Option<PathBuf>,
    /// Durable retention: release settles a snapshot.
    pub durable: bool,
    /// The prompt's bytes: run through openProcess with the one-shot
    /// driver instead of execute.
    pub prompt: Option<Vec<u8>>,
    /// The limits asked for; `pids: None` takes
    /// [`DEFAULT_PIDS`](crate::DEFAULT_PIDS) on a provider that enforces a
    /// process limit.
    pub resources: Resources,
    /// An enrolled provider's envelope and ceiling: the runtime registers
    /// it under the ceiling and refuses a drifted live envelope. `None`
    /// for a provider registered as it declares itself.
    pub enrollment: Option<checkfu_sandbox_runtime::Enrollment>,
    /// The workspace id of the instance (and of the snapshot a durable
    /// release settles); the CLI uses its scope. A resumed snapshot must
    /// carry the same (the runtime refuses `snapshot.workspace_id`).
    pub workspace_id: String,
    /// How long a durable release's snapshot is retained, in seconds (at
    /// least 1); [`SNAPSHOT_RETENTION_SECONDS`](crate::SNAPSHOT_RETENTION_SECONDS)
    /// by default.
    pub snapshot_retention_seconds: i64,
    /// Resume this checkpoint instead of provisioning: the instance comes
    /// back active with the snapshot's files, its root image and mounts;
    /// no mount is staged (`mounts` must be empty) and `image` is not
    /// resolved.
    pub resume: Option<crate::Checkpoint>,
}

fn refuse(field: &str, expected: impl Into<String>, actual: impl Into<String>) -> SessionError {
    SandboxError::invalid_request(op::EXECUTE, field, expected, actual).into()
}

impl RunPlan {
    /// Checks every input the contract would refuse, without provisioning
    /// or contacting a provider: each mount's source exists (a folder, a
    /// Git revision and path), the mount plan is admissible, the command's
    /// bounds hold, and the output folder is not a file and its ceiling of
    /// host bytes is well formed.
    ///
    /// # Errors
    /// [`SessionError::Input`] naming a mount; [`SessionError::Sandbox`]
    /// with `invalid_request` naming the command field, or the mount
    /// plan's refusal, or a malformed `CHECKFU_OUTPUT_MAX_BYTES` with an
    /// output folder; [`SessionError::Host`] for an output path that
    /// exists and is not a folder.
    pub fn check(&self) -> Result<(), SessionError> {
        for plan in &self.mounts {
            let missing = |detail: String| {
                SessionError::input(
                    &plan.input,
                    SandboxError::failed(Operation::StageFolder, FailureReason::NotFound, detail),
                )
            };
            match &plan.source {
                MountSource::Folder(host) => match std::fs::metadata(host) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => return Err(missing(format!("{}: not a directory", host.display()))),
                    Err(e) => return Err(missing(format!("{}: {e}", host.display()))),
                },
                MountSource::Git {
                    repo,
                    rev,
                    repo_path,
                } => {
                    read_git_blobs(repo, rev, repo_path)
                        .map_err(|f| SessionError::input(&plan.input, f))?;
                }
            }
            check_mount_plan(std::slice::from_ref(&plan.mount))
                .map_err(|e| SessionError::input(&plan.input, e))?;
        }
        check_mount_plan(&self.declared_mounts())
            .map_err(|e| SessionError::Sandbox(SandboxFailure::from(e)))?;
        self.check_command()?;
        if self.resume.is_some() && !self.mounts.is_empty() {
            return Err(SandboxError::invalid_request(
                op::RESUME,
                "mounts",
                "none: a resumed instance keeps its snapshot's mounts",
                format!("{} mount(s)", self.mounts.len()),
            )
            .into());
        }
        if self.snapshot_retention_seconds < 1 {
            return Err(SandboxError::invalid_request(
                op::RELEASE,
                "snapshot_expires_at",
                "a retention of at least 1 second",
                format!("{} s", self.snapshot_retention_seconds),
            )
            .into());
        }
        if let Some(dir) = &self.outputs {
            if dir.exists() && !dir.is_dir() {
                return Err(SessionError::Host(format!(
                    "output folder {}: exists and is not a directory",
                    dir.display()
                )));
            }
            crate::host_write::output_ceiling_bytes()?;
        }
        Ok(())
    }

    fn check_command(&self) -> Result<(), SessionError> {
        let c = &self.command;
        if c.executable.is_empty() {
            return Err(refuse("command.executable", "a non-empty name", ""));
        }
        if c.arguments.len() > MAX_ARGUMENTS {
            return Err(refuse(
                "command.arguments",
                format!("at most {MAX_ARGUMENTS} arguments"),
                format!("{} arguments", c.arguments.len()),
            ));
        }
        for (i, a) in std::iter::once(&c.executable)
            .chain(&c.arguments)
            .enumerate()
        {
            if a.len() > MAX_ARGUMENT_BYTES || a.contains('\0') {
                let field = if i == 0 {
                    "command.executable".to_owned()
                } else {
                    format!("command.arguments[{}]", i - 1)
                };
                return Err(refuse(
                    &field,
                    format!("at most {MAX_ARGUMENT_BYTES} bytes without NUL"),
                    format!("{} bytes", a.len()),
                ));
            }
        }
        if !c.working_directory.starts_with('/') {
            return Err(refuse(
                "command.working_directory",
                "an absolute path",
                c.working_directory.clone(),
            ));
        }
        if c.timeout_seconds == 0 {
            return Err(refuse("command.timeout_seconds", "at least 1", "0"));
        }
        if c.output_limit_bytes > MAX_OUTPUT_LIMIT_BYTES {
            return Err(refuse(
                "command.output_limit_bytes",
                format!("at most {MAX_OUTPUT_LIMIT_BYTES}"),
                c.output_limit_bytes.to_string(),
            ));
        }
        Ok(())
    }

    /// The declared mounts, in plan order (a resumed checkpoint's own).
    pub fn declared_mounts(&self) -> Vec<SandboxMount> {
        if let Some(c) = &self.resume {
            return c.mounts.clone();
        }
        self.mounts.iter().map(|m| m.mount.clone()).collect()
    }
}
