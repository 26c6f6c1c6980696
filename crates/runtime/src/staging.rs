//! Mount staging: the runtime resolves every mount file from a Git
//! repository or a host folder, verifies it, and pushes it into the
//! instance one file at a time through writeFile while the instance is
//! provisioning (spec "Paths, mounts": mount staging is push, not pull).
//! The provider never fetches anything and holds no credential.
//!
//! The tree in the sandbox is the tree that was staged: every file keeps
//! its permission bits, and every directory of a host folder exists with
//! its bits. A directory that holds a staged file appears when the file is
//! written (`0o755`); a host folder's directory that is empty, or whose
//! bits are not `0o755`, is also sent as a writeFile of `kind:
//! "directory"`, after every file, so its bits are the last word (decision
//! `039-directories-and-output-modes`). A Git tree records no empty
//! directory and no directory bits, so Git staging sends files only. The
//! mount's root itself is the provider's and is never written.

use checkfu_sandbox_contract::op;
use checkfu_sandbox_contract::Operation;
use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::{
    Digest, FailureReason, SandboxError, SandboxFailure, SandboxPath, WriteKind,
    DEFAULT_DIRECTORY_MODE,
};
use sha2::{Digest as _, Sha256};

use crate::admission::is_normalized;
pub use crate::git::{GitBlob, GitMode};
use crate::Adapter;

/// One file (or directory) pushed into the instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedFile {
    /// The path in the sandbox, as bytes (a host file name that is not
    /// UTF-8 is staged under exactly that name).
    pub path: SandboxPath,
    /// What was written: a file, or a directory (`size_bytes` 0 and
    /// `sha256` the digest of no bytes).
    pub kind: WriteKind,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// SHA-256 of the bytes written.
    pub sha256: Digest,
    /// The entry's Git mode (`100644` or `100755`) when staged from Git;
    /// `None` from a host folder.
    pub git_mode: Option<GitMode>,
    /// The permission bits sent with writeFile (`0o000..=0o777`): the host
    /// file's or directory's bits, or `0o755` / `0o644` for a Git blob's
    /// mode.
    pub mode: u32,
}

/// Progress of a staging run: `done` of `total` writes (files and
/// directories) made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageProgress {
    /// Writes made so far.
    pub done: usize,
    /// Writes to make in all.
    pub total: usize,
}

/// The SHA-256 digest of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> Digest {
    Digest::from_sha256_bytes(Sha256::digest(bytes).into())
}

fn stage_error(
    operation: Operation,
    reason: FailureReason,
    message: impl Into<String>,
) -> SandboxFailure {
    SandboxError::failed(operation, reason, message).into()
}

fn join_sandbox(mount_path: &str, rel: &[u8]) -> SandboxPath {
    if rel.is_empty() {
        SandboxPath::from(mount_path)
    } else {
        SandboxPath::join(mount_path, rel)
    }
}

/// Reads every blob at `repo_path` (a file or a tree) of revision `rev` in
/// the Git repository at `repo` through the `git` command line, verifying
/// each blob's object id against its content ([`crate::git::read_blobs`]).
///
/// # Errors
/// As [`crate::git::read_blobs`].
pub fn read_git_blobs(
    repo: &Path,
    rev: &str,
    repo_path: &str,
) -> Result<Vec<GitBlob>, SandboxFailure> {
    crate::git::read_blobs(repo, rev, repo_path)
}

/// Stages `repo_path` at `rev` of the Git repository `repo` under
/// `mount_path` of a provisioning instance, through writeFile. Files only:
/// a Git tree holds no empty directory and no directory bits, so every
/// directory appears (`0o755`) with the files below it.
///
/// # Errors
/// As [`read_git_blobs`], plus every writeFile admission and provider error.
pub async fn stage_git(
    adapter: &Adapter,
    instance_id: &str,
    repo: &Path,
    rev: &str,
    repo_path: &str,
    mount_path: &str,
    progress: &(dyn Fn(StageProgress) + Send + Sync),
) -> Result<Vec<StagedFile>, SandboxFailure> {
    let (repo, rev, repo_path) = (repo.to_path_buf(), rev.to_owned(), repo_path.to_owned());
    let blobs = tokio::task::spawn_blocking(move || read_git_blobs(&repo, &rev, &repo_path))
        .await
        .map_err(|e| {
            stage_error(
                Operation::StageGit,
                FailureReason::ProviderError,
                e.to_string(),
            )
        })??;
    let files = blobs
        .into_iter()
        .map(|b| {
            let bits = b.mode.octal() & 0o777;
            ToStage {
                rel: b.path.into_bytes(),
                kind: WriteKind::File,
                bytes: b.bytes,
                git_mode: Some(b.mode),
                mode: bits,
            }
        })
        .collect();
    push(adapter, instance_id, mount_path, files, progress).await
}

/// One regular file, or one directory to send, of a host folder: its
/// relative path, bytes and permission bits (`st_mode & 0o777`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderFile {
    /// Relative path, `/`-separated, as bytes (a name need not be UTF-8).
    pub path: Vec<u8>,
    /// A regular file, or a directory (which has no bytes).
    pub kind: WriteKind,
    /// The content (empty for a directory).
    pub bytes: Vec<u8>,
    /// The host file's or directory's permission bits (`0o000..=0o777`).
    pub mode: u32,
}

/// Reads every regular file under the host folder `dir` with its
/// permission bits, then every directory below `dir` that is empty or
/// whose bits are not `0o755` (files first, then directories, each sorted
/// by relative path). Symlinks and special files are refused, not skipped.
///
/// # Errors
/// `SandboxOperationFailed{operation: stage_folder}` naming the path.
pub fn read_folder(dir: &Path) -> Result<Vec<FolderFile>, SandboxFailure> {
    use std::os::unix::fs::PermissionsExt as _;
    const OP: Operation = Operation::StageFolder;
    let io = |p: &Path, e: std::io::Error| {
        stage_error(OP, FailureReason::NotFound, format!("{}: {e}", p.display()))
    };
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = Vec::new();
    let mut directories = Vec::new();
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&abs)
            .map_err(|e| io(&abs, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| io(&abs, e))?;
        if !rel.as_os_str().is_empty() {
            let mode = std::fs::symlink_metadata(&abs)
                .map_err(|e| io(&abs, e))?
                .permissions()
                .mode()
                & 0o777;
            if entries.is_empty() || mode != DEFAULT_DIRECTORY_MODE {
                directories.push(FolderFile {
                    path: rel.as_os_str().as_bytes().to_vec(),
                    kind: WriteKind::Directory,
                    bytes: Vec::new(),
                    mode,
                });
            }
        }
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let child_rel = rel.join(entry.file_name());
            let kind = entry.file_type().map_err(|e| io(&entry.path(), e))?;
            if kind.is_dir() {
                stack.push(child_rel);
            } else if kind.is_file() {
                let bytes = std::fs::read(entry.path()).map_err(|e| io(&entry.path(), e))?;
                let mode = entry
                    .metadata()
                    .map_err(|e| io(&entry.path(), e))?
                    .permissions()
                    .mode()
                    & 0o777;
                out.push(FolderFile {
                    path: child_rel.as_os_str().as_bytes().to_vec(),
                    kind: WriteKind::File,
                    bytes,
                    mode,
                });
            } else {
                return Err(stage_error(
                    OP,
                    FailureReason::NotRegularFile,
                    format!(
                        "{}: only directories and regular files are staged",
                        entry.path().display()
                    ),
                ));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    directories.sort_by(|a, b| a.path.cmp(&b.path));
    out.extend(directories);
    Ok(out)
}

/// Stages every regular file under host folder `dir` into `mount_path`,
/// then every directory [`read_folder`] names (empty, or with bits other
/// than `0o755`) as a writeFile of `kind: "directory"`.
///
/// # Errors
/// As [`read_folder`], plus writeFile errors.
pub async fn stage_folder(
    adapter: &Adapter,
    instance_id: &str,
    dir: &Path,
    mount_path: &str,
    progress: &(dyn Fn(StageProgress) + Send + Sync),
) -> Result<Vec<StagedFile>, SandboxFailure> {
    let dir = dir.to_path_buf();
    let files = tokio::task::spawn_blocking(move || read_folder(&dir))
        .await
        .map_err(|e| {
            stage_error(
                Operation::StageFolder,
                FailureReason::ProviderError,
                e.to_string(),
            )
        })??;
    let files = files
        .into_iter()
        .map(|f| ToStage {
            rel: f.path,
            kind: f.kind,
            bytes: f.bytes,
            git_mode: None,
            mode: f.mode,
        })
        .collect();
    push(adapter, instance_id, mount_path, files, progress).await
}

/// One write to stage.
struct ToStage {
    /// The path below the mount, as bytes.
    rel: Vec<u8>,
    /// A file or a directory.
    kind: WriteKind,
    /// The content (empty for a directory).
    bytes: Vec<u8>,
    /// The Git mode, when from Git.
    git_mode: Option<GitMode>,
    /// The permission bits.
    mode: u32,
}

async fn push(
    adapter: &Adapter,
    instance_id: &str,
    mount_path: &str,
    files: Vec<ToStage>,
    progress: &(dyn Fn(StageProgress) + Send + Sync),
) -> Result<Vec<StagedFile>, SandboxFailure> {
    let total = files.len();
    let mut staged = Vec::with_capacity(total);
    for (done, file) in files.into_iter().enumerate() {
        let ToStage {
            rel,
            kind,
            bytes,
            git_mode,
            mode,
        } = file;
        let path = join_sandbox(mount_path, &rel);
        if !is_normalized(&path) {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "path",
                "an absolute normalized path",
                checkfu_sandbox_contract::show(&path),
            )
            .into());
        }
        let sha256 = sha256_digest(&bytes);
        let size_bytes = bytes.len() as u64;
        adapter
            .write_entry(instance_id, path.clone(), kind, bytes, Some(mode))
            .await?;
        staged.push(StagedFile {
            path,
            kind,
            size_bytes,
            sha256,
            git_mode,
            mode,
        });
        progress(StageProgress {
            done: done + 1,
            total,
        });
    }
    Ok(staged)
}
