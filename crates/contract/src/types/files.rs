//! The file members: writeFile, readFile, readFiles, listDir, listProjectDir
//! and beginActiveWrite (spec "The operations").

use serde::{Deserialize, Serialize};

use crate::bytes::Bytes;
use crate::digest::Digest;
use crate::path::SandboxPath;

/// writeFile: bytes at an admitted path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WriteFileRequest {
    /// The instance.
    pub instance_id: String,
    /// Absolute normalized path under a declared mount or the output tree,
    /// as bytes (a string, or `{"bytes_base64": ...}` when not UTF-8).
    pub path: SandboxPath,
    /// Content, at most 16 MiB.
    pub content_base64: Bytes,
    /// Permission bits of the file written (`0o000..=0o777`, a JSON
    /// integer, e.g. `493` for `0o755`). Absent means `0o644` (`0o755`
    /// for a directory, see `kind`). No set-id or sticky bits. The provider applies exactly these bits (no umask)
    /// and creates every missing parent directory (`0o755`). Added to
    /// `checkfu.sandbox/v1` as an optional member: a request that needs
    /// no more than `0o644` omits it (decision 016).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(max = 511)))]
    pub mode: Option<u32>,
    /// What to create at `path`: `"file"` (the default when absent) or
    /// `"directory"`. A directory write carries empty `content_base64`;
    /// the provider creates the directory (and every missing parent,
    /// `0o755`) or keeps the one there, and applies `mode` exactly
    /// (absent means `0o755` for a directory). Writing a directory where a
    /// file is, or a file where a directory is, fails. Added to
    /// `checkfu.sandbox/v1` as an optional member: a file write omits it
    /// (decision `039-directories-and-output-modes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<WriteKind>,
}

/// What a writeFile creates (`WriteFileRequest.kind`). Closed; append-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WriteKind {
    /// A regular file holding `content_base64` (what writeFile wrote
    /// before the member existed).
    File,
    /// A directory: `content_base64` is empty.
    Directory,
}

/// The permission bits a writeFile without `mode` applies to a file
/// (`0o644`).
pub const DEFAULT_FILE_MODE: u32 = 0o644;

/// The permission bits a writeFile without `mode` applies to a directory,
/// and those of every missing parent a writeFile creates (`0o755`).
pub const DEFAULT_DIRECTORY_MODE: u32 = 0o755;

/// The largest permission bits writeFile accepts, and listDir reports
/// (`0o777`).
pub const MAX_FILE_MODE: u32 = 0o777;

impl WriteKind {
    /// The bits a write of this kind applies when `mode` is absent:
    /// [`DEFAULT_FILE_MODE`] or [`DEFAULT_DIRECTORY_MODE`].
    pub fn default_mode(self) -> u32 {
        match self {
            WriteKind::File => DEFAULT_FILE_MODE,
            WriteKind::Directory => DEFAULT_DIRECTORY_MODE,
        }
    }
}

impl WriteFileRequest {
    /// What the write creates: `kind`, or [`WriteKind::File`].
    pub fn effective_kind(&self) -> WriteKind {
        self.kind.unwrap_or(WriteKind::File)
    }

    /// The permission bits to apply: `mode`, or the kind's default
    /// ([`WriteKind::default_mode`]).
    pub fn effective_mode(&self) -> u32 {
        self.mode
            .unwrap_or_else(|| self.effective_kind().default_mode())
    }
}

/// readFile: one file under `allowed_root`, physically contained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFileRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// Absolute normalized path under `allowed_root`.
    pub path: SandboxPath,
    /// The mount root or output tree the read must stay inside.
    pub allowed_root: String,
    /// Most bytes to return, at most 16 MiB.
    #[cfg_attr(feature = "schema", schemars(range(max = 16_777_216)))]
    pub maximum_bytes: u64,
}

/// readFile's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxFileContent {
    /// The path read (echo of the request).
    pub path: SandboxPath,
    /// The whole content, at most `maximum_bytes`.
    pub content_base64: Bytes,
}

/// One member of a readFiles request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFilesEntry {
    /// Absolute normalized path under the group's `allowed_root`.
    pub path: SandboxPath,
    /// Most bytes for this file, at most 16 MiB.
    #[cfg_attr(feature = "schema", schemars(range(max = 16_777_216)))]
    pub maximum_bytes: u64,
}

/// readFiles: a native batch inside one `allowed_root`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFilesRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// The one root every member must stay inside.
    pub allowed_root: String,
    /// Members, at most 1,024.
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub files: Vec<ReadFilesEntry>,
    /// Exactly the checked sum of the members' `maximum_bytes`, at most 128 MiB.
    #[cfg_attr(feature = "schema", schemars(range(max = 134_217_728)))]
    pub aggregate_maximum_bytes: u64,
}

/// The closed per-file outcome union of readFiles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReadFileOutcome {
    /// The content.
    Read {
        /// Echo of the member's path.
        path: SandboxPath,
        /// At most the member's `maximum_bytes`.
        content_base64: Bytes,
    },
    /// No such file.
    NotFound {
        /// Echo of the member's path.
        path: SandboxPath,
    },
    /// Over the member's `maximum_bytes`.
    TooLarge {
        /// Echo of the member's path.
        path: SandboxPath,
        /// The file's size in bytes.
        size_bytes: u64,
    },
    /// Resolution left the root.
    OutsideRoot {
        /// Echo of the member's path.
        path: SandboxPath,
    },
    /// Not a regular file.
    NotRegularFile {
        /// Echo of the member's path.
        path: SandboxPath,
    },
}

impl ReadFileOutcome {
    /// The member path this outcome answers.
    pub fn path(&self) -> &SandboxPath {
        match self {
            ReadFileOutcome::Read { path, .. }
            | ReadFileOutcome::NotFound { path }
            | ReadFileOutcome::TooLarge { path, .. }
            | ReadFileOutcome::OutsideRoot { path }
            | ReadFileOutcome::NotRegularFile { path } => path,
        }
    }
}

/// readFiles' result: one outcome per member, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFilesResult {
    /// Outcomes in request order.
    pub files: Vec<ReadFileOutcome>,
}

/// listDir: regular files under a mount root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListDirRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// A mount root or the output tree.
    pub root: String,
    /// Most entries, at most 100,000.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 100_000)))]
    pub max_entries: u32,
}

/// One regular file in a listDir listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DirEntry {
    /// Absolute path under the root, as bytes (a string, or
    /// `{"bytes_base64": ...}` when not UTF-8): exactly the file's name.
    pub path: SandboxPath,
    /// Size in bytes.
    pub size_bytes: u64,
    /// SHA-256 of the content. Present for every file of at most 16 MiB;
    /// may be absent (and a provider should leave it absent) for a larger
    /// file, whose body no read member can return: the listing then never
    /// reads it (decision 018).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Digest>,
    /// The file's permission bits (`st_mode & 0o777`: `0o000..=0o777`, a
    /// JSON integer, no set-id or sticky bits). Absent means `0o644`; a
    /// provider leaves it absent for `0o644` files. The output copy
    /// applies exactly these bits. Added to `checkfu.sandbox/v1` as an
    /// optional member (decision `039-directories-and-output-modes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(max = 511)))]
    pub mode: Option<u32>,
}

impl DirEntry {
    /// The permission bits listed: `mode`, or [`DEFAULT_FILE_MODE`].
    pub fn effective_mode(&self) -> u32 {
        self.mode.unwrap_or(DEFAULT_FILE_MODE)
    }

    /// The `mode` member a provider reports for a file whose permission
    /// bits are `bits`: `bits & 0o777`, absent when that is `0o644`.
    pub fn listed_mode(bits: u32) -> Option<u32> {
        Some(bits & MAX_FILE_MODE).filter(|m| *m != DEFAULT_FILE_MODE)
    }
}

/// listDir's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListDirResult {
    /// Regular files, at most `max_entries`.
    pub entries: Vec<DirEntry>,
}

/// listProjectDir: complete leaf enumeration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListProjectDirRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// A mount root or the output tree.
    pub root: String,
    /// Most entries, at most 100,000.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 100_000)))]
    pub max_entries: u32,
}

/// The kind of a listProjectDir leaf. Special files are named, never omitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProjectEntryKind {
    /// A regular file.
    Regular {
        /// Size in bytes.
        size_bytes: u64,
        /// SHA-256 of the content.
        sha256: Digest,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// The link text.
        target: SandboxPath,
    },
    /// A Git submodule (gitlink).
    Submodule,
    /// A character or block device.
    Device,
    /// A socket.
    Socket,
    /// A named pipe.
    Fifo,
    /// Anything else.
    Other,
}

/// One leaf of a listProjectDir listing.
///
/// Wire form: one object with `path`, the `kind` tag and the kind's
/// members, for example `{"path": "/p/a", "kind": "regular", "size_bytes":
/// 5, "sha256": "sha256:..."}`. Decoded through [`ProjectEntryWire`]:
/// serde's `flatten` of an internally tagged enum under
/// `deny_unknown_fields` refuses the `kind` tag itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(from = "ProjectEntryWire")]
pub struct ProjectEntry {
    /// Absolute path under the root.
    pub path: SandboxPath,
    /// What it is.
    #[serde(flatten)]
    pub kind: ProjectEntryKind,
}

/// The decoding shape of [`ProjectEntry`]: one internally tagged enum whose
/// variants each carry `path`, so every unknown member is refused.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ProjectEntry"))]
pub enum ProjectEntryWire {
    /// A regular file.
    Regular {
        /// Absolute path under the root.
        path: SandboxPath,
        /// Size in bytes.
        size_bytes: u64,
        /// SHA-256 of the content.
        sha256: Digest,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// Absolute path under the root.
        path: SandboxPath,
        /// The link text.
        target: SandboxPath,
    },
    /// A Git submodule (gitlink).
    Submodule {
        /// Absolute path under the root.
        path: SandboxPath,
    },
    /// A character or block device.
    Device {
        /// Absolute path under the root.
        path: SandboxPath,
    },
    /// A socket.
    Socket {
        /// Absolute path under the root.
        path: SandboxPath,
    },
    /// A named pipe.
    Fifo {
        /// Absolute path under the root.
        path: SandboxPath,
    },
    /// Anything else.
    Other {
        /// Absolute path under the root.
        path: SandboxPath,
    },
}

impl From<ProjectEntryWire> for ProjectEntry {
    fn from(w: ProjectEntryWire) -> Self {
        let (path, kind) = match w {
            ProjectEntryWire::Regular {
                path,
                size_bytes,
                sha256,
            } => (path, ProjectEntryKind::Regular { size_bytes, sha256 }),
            ProjectEntryWire::Symlink { path, target } => {
                (path, ProjectEntryKind::Symlink { target })
            }
            ProjectEntryWire::Submodule { path } => (path, ProjectEntryKind::Submodule),
            ProjectEntryWire::Device { path } => (path, ProjectEntryKind::Device),
            ProjectEntryWire::Socket { path } => (path, ProjectEntryKind::Socket),
            ProjectEntryWire::Fifo { path } => (path, ProjectEntryKind::Fifo),
            ProjectEntryWire::Other { path } => (path, ProjectEntryKind::Other),
        };
        ProjectEntry { path, kind }
    }
}

/// listProjectDir's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListProjectDirResult {
    /// Every leaf, at most `max_entries`.
    pub entries: Vec<ProjectEntry>,
    /// Must be `true`: the listing names every leaf.
    pub complete: bool,
}

/// One file of a beginActiveWrite batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ActiveWriteFile {
    /// Absolute normalized path inside one read-write mount.
    pub path: String,
    /// Regular-file content, at most 16 MiB.
    pub content_base64: Bytes,
}

/// beginActiveWrite: stage and atomically publish a bounded batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ActiveWriteRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// Caller-chosen transaction id, for redelivery.
    pub transaction_id: String,
    /// The batch: at most 1,024 files, 128 MiB in all, no path an ancestor
    /// of another.
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub files: Vec<ActiveWriteFile>,
}

/// How a beginActiveWrite transaction settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActiveWriteOutcome {
    /// Every file published atomically.
    Committed {
        /// Echo of the transaction id.
        transaction_id: String,
        /// The deepest read-write mount owning every target.
        mount_path: String,
        /// The paths published, in request order.
        published: Vec<String>,
    },
    /// Nothing published; staged bodies rolled back.
    RolledBack {
        /// Echo of the transaction id.
        transaction_id: String,
        /// Why.
        reason: String,
    },
    /// Dispatched but not settled: the provider could not tell the caller
    /// how the transaction ended (or the caller stopped observing after the
    /// dispatch marker). The journal stays dispatched and is recovery work;
    /// a redelivery of the same batch gets the settled outcome. Only valid
    /// after the transaction's dispatch marker was invoked.
    Indeterminate {
        /// Echo of the transaction id.
        transaction_id: String,
        /// Why the outcome is not known.
        reason: String,
    },
}

impl ActiveWriteOutcome {
    /// The transaction id the outcome names.
    pub fn transaction_id(&self) -> &str {
        match self {
            ActiveWriteOutcome::Committed { transaction_id, .. }
            | ActiveWriteOutcome::RolledBack { transaction_id, .. }
            | ActiveWriteOutcome::Indeterminate { transaction_id, .. } => transaction_id,
        }
    }

    /// `committed`, `rolled_back` or `indeterminate`.
    pub fn kind(&self) -> &'static str {
        match self {
            ActiveWriteOutcome::Committed { .. } => "committed",
            ActiveWriteOutcome::RolledBack { .. } => "rolled_back",
            ActiveWriteOutcome::Indeterminate { .. } => "indeterminate",
        }
    }
}
