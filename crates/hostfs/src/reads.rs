//! readFile, readFiles, listDir and listProjectDir over the host
//! directories behind an instance's mounts and output tree: contained
//! reads and leaf walks, mapped onto the contract's results and errors.
//! A provider answers the four members by calling these with itself as
//! [`InstanceHomes`].

use std::path::{Path, PathBuf};

use checkfu_sandbox_contained::{self as contained, ContainedError};
use checkfu_sandbox_contract::bounds::{MAX_FILE_BYTES, MAX_LIST_ENTRIES};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::errors::{blocking, contained_error};
use crate::leaves::{self, LeafKind};
use crate::store::{self, Layout};

/// What the reads need of a provider: an instance's provision request and
/// where its host directories are.
pub trait InstanceHomes: Sync {
    /// The provision request of this provider's instance `instance_id`.
    ///
    /// # Errors
    ///
    /// `SandboxInstanceNotFound` for an id this provider does not hold;
    /// `ProviderError` of `operation` for an unreadable record.
    fn instance_request(
        &self,
        operation: Operation,
        instance_id: &str,
    ) -> Result<SandboxProvisionRequest, SandboxError>;

    /// The provider's state directory.
    fn layout(&self) -> &Layout;
}

/// How often a listing is walked again when the tree changed under it.
const LISTING_ATTEMPTS: u32 = 3;

enum ReadFailure {
    Contained(ContainedError),
    TooLarge { size_bytes: u64 },
}

/// Reads the regular file at `rel` beneath `root`, at most `maximum_bytes`.
fn read_contained(root: &Path, rel: &Path, maximum_bytes: u64) -> Result<Vec<u8>, ReadFailure> {
    use std::io::Read;
    let root_fd = contained::open_root(root).map_err(ReadFailure::Contained)?;
    let fd = contained::open_beneath(std::os::fd::AsFd::as_fd(&root_fd), rel)
        .map_err(ReadFailure::Contained)?;
    let size = rustix::fs::fstat(&fd)
        .map(|s| s.st_size as u64)
        .unwrap_or(0);
    let mut out = Vec::new();
    std::fs::File::from(fd)
        .take(maximum_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|source| {
            ReadFailure::Contained(ContainedError::Io {
                path: rel.to_path_buf(),
                source,
            })
        })?;
    if out.len() as u64 > maximum_bytes {
        return Err(ReadFailure::TooLarge {
            size_bytes: size.max(out.len() as u64),
        });
    }
    Ok(out)
}

/// The host directory of the mount or output tree of instance
/// `instance_id` whose root is exactly `allowed_root`.
///
/// # Errors
///
/// As [`InstanceHomes::instance_request`]; `PathNotAdmitted` when
/// `allowed_root` is neither a mount root nor the output tree.
pub fn root_dir(
    homes: &impl InstanceHomes,
    operation: Operation,
    instance_id: &str,
    allowed_root: &str,
) -> Result<PathBuf, SandboxError> {
    let request = homes.instance_request(operation, instance_id)?;
    match store::home_at(&request, allowed_root) {
        Some(home) => Ok(homes.layout().home_dir(instance_id, home)),
        None => Err(SandboxError::failed(
            operation,
            FailureReason::PathNotAdmitted,
            format!("{allowed_root} is neither a mount root nor the output tree"),
        )),
    }
}

/// The leaves under `root` of instance `instance_id`, walked again up to
/// [`LISTING_ATTEMPTS`] times while the tree changes under the walk; files
/// up to `hash_limit` bytes are hashed (`None`: all).
fn listing(
    homes: &impl InstanceHomes,
    operation: Operation,
    instance_id: &str,
    root: &str,
    max_entries: u32,
    hash_limit: Option<u64>,
) -> impl std::future::Future<Output = Result<Vec<leaves::Leaf>, SandboxError>> + Send + 'static {
    let host = root_dir(homes, operation, instance_id, root);
    let root = root.to_owned();
    async move {
        let host = host?;
        // The walk bound counts directories too; listings are bounded
        // again by their leaves below.
        let bound = (max_entries.min(MAX_LIST_ENTRIES) as usize)
            .saturating_mul(4)
            .max(1024);
        blocking(operation, move || {
            let fd = contained::open_root(&host)?;
            // A tree the workload changes under the walk (an entry gone
            // between listing and opening) fails the walk: try again a
            // few times, then fail closed.
            let mut attempt = 0;
            loop {
                attempt += 1;
                match leaves::walk_leaves(std::os::fd::AsFd::as_fd(&fd), bound, hash_limit) {
                    Err(ContainedError::Io { .. }) if attempt < LISTING_ATTEMPTS => continue,
                    other => return other,
                }
            }
        })
        .await?
        .map_err(|e| match e {
            ContainedError::TooManyEntries { .. } => too_many(operation, None, max_entries),
            other => contained_error(operation, &root, other),
        })
    }
}

fn too_many(operation: Operation, found: Option<usize>, max: u32) -> SandboxError {
    SandboxError::invalid_request(
        operation,
        "max_entries",
        match found {
            Some(n) => format!("at least {n} (the listing's size)"),
            None => "more than the listing's size".to_owned(),
        },
        max.to_string(),
    )
}

/// `root/rel`, byte-exact (a name that is not UTF-8 is kept as it is).
fn join(root: &str, rel: &Path) -> SandboxPath {
    use std::os::unix::ffi::OsStrExt;
    SandboxPath::join(root, rel.as_os_str().as_bytes())
}

/// readFiles: each file read beneath `allowed_root`, with a per-file
/// outcome (read, too large, not found, not a regular file, outside the
/// root).
///
/// # Errors
///
/// As [`root_dir`]; a containment failure other than the per-file outcomes
/// fails the whole request.
pub async fn read_files(
    homes: &impl InstanceHomes,
    request: ReadFilesRequest,
) -> Result<ReadFilesResult, SandboxError> {
    const OP: Operation = op::READ_FILES;
    let host = root_dir(homes, OP, &request.instance_id, &request.allowed_root)?;
    let root = request.allowed_root.clone();
    let files = request.files;
    blocking(OP, move || -> Result<ReadFilesResult, SandboxError> {
        let mut out = Vec::with_capacity(files.len());
        for f in files {
            let path = f.path;
            let Some(rel) = store::relative_to(&path, &root) else {
                out.push(if path == root {
                    ReadFileOutcome::NotRegularFile { path }
                } else {
                    ReadFileOutcome::OutsideRoot { path }
                });
                continue;
            };
            out.push(match read_contained(&host, &rel, f.maximum_bytes) {
                Ok(content) => ReadFileOutcome::Read {
                    path,
                    content_base64: Bytes(content),
                },
                Err(ReadFailure::TooLarge { size_bytes }) => {
                    ReadFileOutcome::TooLarge { path, size_bytes }
                }
                Err(ReadFailure::Contained(e)) => match e {
                    ContainedError::OutsideRoot { .. } | ContainedError::InvalidPath { .. } => {
                        ReadFileOutcome::OutsideRoot { path }
                    }
                    ContainedError::NotFound { .. } => ReadFileOutcome::NotFound { path },
                    ContainedError::NotRegularFile { .. } => {
                        ReadFileOutcome::NotRegularFile { path }
                    }
                    other => return Err(contained_error(OP, &path, other)),
                },
            });
        }
        Ok(ReadFilesResult { files: out })
    })
    .await?
}

/// listDir: the regular files under `root` with their sizes, the SHA-256
/// of those up to [`MAX_FILE_BYTES`], and their permission bits
/// (`st_mode & 0o777`, absent for `0o644`).
///
/// # Errors
///
/// As [`root_dir`]; `InvalidRequest` naming `max_entries` when the listing
/// holds more; a containment failure of the walk.
pub async fn list_dir(
    homes: &impl InstanceHomes,
    request: ListDirRequest,
) -> Result<ListDirResult, SandboxError> {
    const OP: Operation = op::LIST_DIR;
    // A body over 16 MiB is never read: no member returns it.
    let leaves = listing(
        homes,
        OP,
        &request.instance_id,
        &request.root,
        request.max_entries,
        Some(MAX_FILE_BYTES),
    )
    .await?;
    let entries: Vec<DirEntry> = leaves
        .into_iter()
        .filter_map(|l| match l.kind {
            LeafKind::RegularFile {
                size_bytes,
                sha256,
                mode,
            } => Some(DirEntry {
                path: join(&request.root, &l.path),
                size_bytes,
                sha256: sha256.map(Digest::from_sha256_bytes),
                mode: DirEntry::listed_mode(mode),
            }),
            _ => None,
        })
        .collect();
    if entries.len() > request.max_entries as usize {
        return Err(too_many(OP, Some(entries.len()), request.max_entries));
    }
    Ok(ListDirResult { entries })
}

/// listProjectDir: every leaf under `root` (regular files hashed,
/// symlinks with their targets, devices, sockets, fifos), empty
/// directories left out.
///
/// # Errors
///
/// As [`list_dir`].
pub async fn list_project_dir(
    homes: &impl InstanceHomes,
    request: ListProjectDirRequest,
) -> Result<ListProjectDirResult, SandboxError> {
    const OP: Operation = op::LIST_PROJECT_DIR;
    let leaves = listing(
        homes,
        OP,
        &request.instance_id,
        &request.root,
        request.max_entries,
        None,
    )
    .await?;
    let entries: Vec<ProjectEntry> = leaves
        .into_iter()
        .filter_map(|l| {
            let kind = match l.kind {
                LeafKind::RegularFile {
                    size_bytes,
                    sha256: Some(sha256),
                    ..
                } => ProjectEntryKind::Regular {
                    size_bytes,
                    sha256: Digest::from_sha256_bytes(sha256),
                },
                // Not reached: this listing hashes every file.
                LeafKind::RegularFile { sha256: None, .. } => ProjectEntryKind::Other,
                LeafKind::Symlink { target } => ProjectEntryKind::Symlink {
                    target: SandboxPath::from(target.as_path()),
                },
                // An empty directory holds no file: not a leaf here.
                LeafKind::EmptyDirectory => return None,
                LeafKind::CharDevice | LeafKind::BlockDevice => ProjectEntryKind::Device,
                LeafKind::Socket => ProjectEntryKind::Socket,
                LeafKind::Fifo => ProjectEntryKind::Fifo,
                LeafKind::Other => ProjectEntryKind::Other,
            };
            Some(ProjectEntry {
                path: join(&request.root, &l.path),
                kind,
            })
        })
        .collect();
    if entries.len() > request.max_entries as usize {
        return Err(too_many(OP, Some(entries.len()), request.max_entries));
    }
    Ok(ListProjectDirResult {
        entries,
        complete: true,
    })
}

/// readFile: the regular file at `path` beneath `allowed_root`, at most
/// `maximum_bytes`.
///
/// # Errors
///
/// As [`root_dir`]; `NotRegularFile` for the root itself, `OutsideRoot`
/// for a path not below it, `SandboxFileTooLarge` with the limit and the
/// file's size, and the containment failure of the read.
pub async fn read_file(
    homes: &impl InstanceHomes,
    request: ReadFileRequest,
) -> Result<SandboxFileContent, SandboxError> {
    const OP: Operation = op::READ_FILE;
    let host = root_dir(homes, OP, &request.instance_id, &request.allowed_root)?;
    let Some(rel) = store::relative_to(&request.path, &request.allowed_root) else {
        return Err(if request.path == request.allowed_root {
            SandboxError::failed(
                OP,
                FailureReason::NotRegularFile,
                format!("{} is the root", request.path),
            )
        } else {
            SandboxError::failed(
                OP,
                FailureReason::OutsideRoot,
                format!("{} is not below {}", request.path, request.allowed_root),
            )
        });
    };
    let max = request.maximum_bytes;
    let path = request.path.clone();
    match blocking(OP, move || read_contained(&host, &rel, max)).await? {
        Ok(content) => Ok(SandboxFileContent {
            path: request.path,
            content_base64: Bytes(content),
        }),
        Err(ReadFailure::TooLarge { size_bytes }) => Err(SandboxError::SandboxFileTooLarge {
            path: path.display(),
            limit_bytes: max,
            actual_bytes: size_bytes,
        }),
        Err(ReadFailure::Contained(e)) => Err(contained_error(OP, &path, e)),
    }
}
