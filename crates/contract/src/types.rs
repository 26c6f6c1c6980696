//! Request and result types of the eighteen members (spec "The operations";
//! DESIGN D1, D3). Field names are the spec's, snake_case; byte content is
//! [`Bytes`] in `*_base64` fields; every struct refuses unknown fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bytes::Bytes;
use crate::capabilities::{NetworkMode, PackageManager, Placement, Platform, RetentionMode, Tier};
use crate::digest::{Digest, ImageReference};
use crate::timestamp::Timestamp;

/// An instance's lifecycle state (spec "Lifecycle and states").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    /// Allocated; mounts and the output tree accept writes.
    Provisioning,
    /// Sealed and runnable.
    Active,
}

impl InstanceState {
    /// The snake_case wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            InstanceState::Provisioning => "provisioning",
            InstanceState::Active => "active",
        }
    }
}

/// Access mode of a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MountAccess {
    /// Sealed read-only at activation.
    ReadOnly,
    /// Writable by the workload after activation.
    ReadWrite,
}

/// A declared mount: a directory the provider creates and the Runner stages
/// files into during provisioning.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxMount {
    /// Absolute, normalized path in the sandbox (no `..`, no empty or `.`
    /// components, no NUL, no trailing `/`), outside every reserved root.
    pub path: String,
    /// Access after activation.
    pub access: MountAccess,
}

/// A network destination for an allowlist policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NetworkDestination {
    /// Host name or IP literal.
    pub host: String,
    /// TCP port, 1..=65535.
    pub port: u16,
}

/// A profile's network policy (DESIGN D11).
///
/// Wire form: `{"mode": "none"}` or `{"mode": "allowlist", "destinations":
/// [...]}`; any other member is refused, for the unit mode too (decoded
/// through [`NetworkPolicyWire`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "mode",
    rename_all = "snake_case",
    deny_unknown_fields,
    from = "NetworkPolicyWire"
)]
pub enum NetworkPolicy {
    /// Loopback only.
    None,
    /// Only these destinations.
    Allowlist {
        /// The reachable destinations.
        destinations: Vec<NetworkDestination>,
    },
}

/// The decoding shape of [`NetworkPolicy`].
///
/// serde accepts unknown members beside the tag of an internally tagged
/// unit variant even under `deny_unknown_fields`; an empty struct variant
/// refuses them, so `{"mode": "none", "extra": 1}` is a decode error.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "NetworkPolicy"))]
pub enum NetworkPolicyWire {
    /// Loopback only.
    None {},
    /// Only these destinations.
    Allowlist {
        /// The reachable destinations.
        destinations: Vec<NetworkDestination>,
    },
}

impl From<NetworkPolicyWire> for NetworkPolicy {
    fn from(w: NetworkPolicyWire) -> Self {
        match w {
            NetworkPolicyWire::None {} => NetworkPolicy::None,
            NetworkPolicyWire::Allowlist { destinations } => {
                NetworkPolicy::Allowlist { destinations }
            }
        }
    }
}

impl NetworkPolicy {
    /// The policy's mode.
    pub fn mode(&self) -> NetworkMode {
        match self {
            NetworkPolicy::None => NetworkMode::None,
            NetworkPolicy::Allowlist { .. } => NetworkMode::Allowlist,
        }
    }
}

/// Resource limits of a profile. Absent members are unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// CPU in thousandths of a core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u32>,
    /// Memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Most processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    /// Disk in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
}

/// A package to materialize into the derived image.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PackageSpec {
    /// The package manager.
    pub manager: PackageManager,
    /// Package name.
    pub name: String,
    /// Exact version.
    pub version: String,
}

/// A sandbox profile: what a Run asks of its sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProfile {
    /// Profile id.
    pub profile_id: String,
    /// Profile version, counting from 1.
    pub profile_version: u32,
    /// Digest of the profile's derived image.
    pub profile_digest: Digest,
    /// Retention mode.
    pub retention: RetentionMode,
    /// Network policy.
    pub network_policy: NetworkPolicy,
    /// Longest command the profile admits, in seconds (>= 1).
    pub max_duration_seconds: u32,
    /// Resource limits.
    #[serde(default)]
    pub resources: Resources,
    /// Packages to materialize.
    #[serde(default)]
    pub packages: Vec<PackageSpec>,
}

/// What the Runner asks a provider to allocate (the identity every returned
/// instance must echo; spec "Identity is cross-checked").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProvisionRequest {
    /// The selected adapter's provider id.
    pub provider: String,
    /// Placement.
    pub placement: Placement,
    /// Workspace id.
    pub workspace_id: String,
    /// Session id.
    pub session_id: String,
    /// Run id.
    pub run_id: String,
    /// Attempt id.
    pub attempt_id: String,
    /// Lease id.
    pub lease_id: String,
    /// Lease epoch (fencing token).
    pub lease_epoch: u64,
    /// Isolation tier.
    pub target: Tier,
    /// The profile.
    pub profile: SandboxProfile,
    /// Platform.
    pub platform: Platform,
    /// Pinned root image.
    pub root_image: ImageReference,
    /// Declared mounts (at most 64).
    #[cfg_attr(feature = "schema", schemars(length(max = 64)))]
    pub mounts: Vec<SandboxMount>,
    /// Hard expiry of the instance.
    pub expires_at: Timestamp,
}

/// The materialization an instance reports: five of the 21 identity checks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Materialization {
    /// Must equal `profile.profile_digest`.
    pub profile_digest: Digest,
    /// Must equal `root_image`.
    pub image_reference: ImageReference,
    /// Must equal the digest suffix of `root_image` (derived, not reported by
    /// an image store).
    pub image_digest: Digest,
    /// Must equal the envelope's `provider_revision`.
    pub provider_revision: String,
    /// Must equal the envelope's `materialization_revision`.
    pub materialization_revision: String,
}

/// An instance as a provider returns it from provision, activate and resume.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxInstance {
    /// Provider-assigned id, non-empty, at most 128 bytes.
    pub instance_id: String,
    /// Echo of the request.
    pub provider: String,
    /// Echo of the request.
    pub placement: Placement,
    /// `provisioning` after provision, `active` after activate and resume.
    pub state: InstanceState,
    /// Echo of the request.
    pub workspace_id: String,
    /// Echo of the request.
    pub session_id: String,
    /// Echo of the request.
    pub run_id: String,
    /// Echo of the request.
    pub attempt_id: String,
    /// Echo of the request.
    pub lease_id: String,
    /// Echo of the request.
    pub lease_epoch: u64,
    /// Echo of the request.
    pub target: Tier,
    /// Echo of the request.
    pub profile: SandboxProfile,
    /// Echo of the request.
    pub platform: Platform,
    /// Echo of the request.
    pub root_image: ImageReference,
    /// Echo of the request.
    pub mounts: Vec<SandboxMount>,
    /// Always `/mnt/session/outputs`.
    pub output_path: String,
    /// Echo of the request, unchanged.
    pub expires_at: Timestamp,
    /// Derived from the request and the envelope.
    pub materialization: Materialization,
}

/// writeFile: bytes at an admitted path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WriteFileRequest {
    /// The instance.
    pub instance_id: String,
    /// Absolute normalized path under a declared mount or the output tree.
    pub path: String,
    /// Content, at most 16 MiB.
    pub content_base64: Bytes,
}

/// activate: seal staged mounts and make the instance runnable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ActivateRequest {
    /// The instance, in `provisioning`.
    pub instance_id: String,
}

/// One bounded command (execute).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxCommand {
    /// Program to run (resolved on the sandbox PATH when not absolute).
    pub executable: String,
    /// Arguments after the executable: at most 256, each at most 65,536
    /// bytes, no NUL.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = 256),
            inner(length(max = 65536), regex(pattern = r"^[^\x00]*$"))
        )
    )]
    pub arguments: Vec<String>,
    /// Absolute working directory.
    pub working_directory: String,
    /// Environment; keys match `^[A-Za-z_][A-Za-z0-9_]*$`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"})))]
    pub environment: BTreeMap<String, String>,
    /// Bytes for standard input, then end of file. Absent: stdin is closed
    /// at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_base64: Option<Bytes>,
    /// Wall-clock bound in seconds, 1..= the profile's `max_duration_seconds`.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub timeout_seconds: u32,
    /// Bound on each of stdout and stderr, in bytes, at most 16 MiB.
    #[cfg_attr(feature = "schema", schemars(range(max = 16_777_216)))]
    pub output_limit_bytes: u64,
}

/// execute: run one command in an active instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ExecuteRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// The command.
    pub command: SandboxCommand,
}

/// A POSIX signal name in the contract's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum SignalName {
    /// Hang-up.
    #[serde(rename = "SIGHUP")]
    Sighup,
    /// Interrupt.
    #[serde(rename = "SIGINT")]
    Sigint,
    /// Quit.
    #[serde(rename = "SIGQUIT")]
    Sigquit,
    /// Abort.
    #[serde(rename = "SIGABRT")]
    Sigabrt,
    /// Kill.
    #[serde(rename = "SIGKILL")]
    Sigkill,
    /// Segmentation fault.
    #[serde(rename = "SIGSEGV")]
    Sigsegv,
    /// Broken pipe.
    #[serde(rename = "SIGPIPE")]
    Sigpipe,
    /// Alarm.
    #[serde(rename = "SIGALRM")]
    Sigalrm,
    /// Terminate.
    #[serde(rename = "SIGTERM")]
    Sigterm,
    /// User 1.
    #[serde(rename = "SIGUSR1")]
    Sigusr1,
    /// User 2.
    #[serde(rename = "SIGUSR2")]
    Sigusr2,
    /// Bus error.
    #[serde(rename = "SIGBUS")]
    Sigbus,
    /// Floating-point exception.
    #[serde(rename = "SIGFPE")]
    Sigfpe,
    /// Illegal instruction.
    #[serde(rename = "SIGILL")]
    Sigill,
    /// Trap.
    #[serde(rename = "SIGTRAP")]
    Sigtrap,
    /// CPU time exceeded.
    #[serde(rename = "SIGXCPU")]
    Sigxcpu,
    /// File size exceeded.
    #[serde(rename = "SIGXFSZ")]
    Sigxfsz,
    /// Another signal.
    #[serde(rename = "SIGOTHER")]
    Other,
}

impl SignalName {
    /// The name as on the wire (`SIGKILL`).
    pub fn as_str(&self) -> &'static str {
        match self {
            SignalName::Sighup => "SIGHUP",
            SignalName::Sigint => "SIGINT",
            SignalName::Sigquit => "SIGQUIT",
            SignalName::Sigabrt => "SIGABRT",
            SignalName::Sigkill => "SIGKILL",
            SignalName::Sigsegv => "SIGSEGV",
            SignalName::Sigpipe => "SIGPIPE",
            SignalName::Sigalrm => "SIGALRM",
            SignalName::Sigterm => "SIGTERM",
            SignalName::Sigusr1 => "SIGUSR1",
            SignalName::Sigusr2 => "SIGUSR2",
            SignalName::Sigbus => "SIGBUS",
            SignalName::Sigfpe => "SIGFPE",
            SignalName::Sigill => "SIGILL",
            SignalName::Sigtrap => "SIGTRAP",
            SignalName::Sigxcpu => "SIGXCPU",
            SignalName::Sigxfsz => "SIGXFSZ",
            SignalName::Other => "SIGOTHER",
        }
    }

    /// The Linux signal number's name, from a raw number.
    pub fn from_number(n: i32) -> Self {
        match n {
            1 => SignalName::Sighup,
            2 => SignalName::Sigint,
            3 => SignalName::Sigquit,
            4 => SignalName::Sigill,
            5 => SignalName::Sigtrap,
            6 => SignalName::Sigabrt,
            7 => SignalName::Sigbus,
            8 => SignalName::Sigfpe,
            9 => SignalName::Sigkill,
            10 => SignalName::Sigusr1,
            11 => SignalName::Sigsegv,
            12 => SignalName::Sigusr2,
            13 => SignalName::Sigpipe,
            14 => SignalName::Sigalrm,
            15 => SignalName::Sigterm,
            24 => SignalName::Sigxcpu,
            25 => SignalName::Sigxfsz,
            _ => SignalName::Other,
        }
    }
}

/// How a command ended: exactly one cause (DESIGN D10).
///
/// Wire form: an object with exactly one of `exit_code` (0..=255), `signal`
/// (a [`SignalName`]) or `timed_out` (`true`). Two causes or none are
/// refused at decode, naming the field `exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "ExitCauseWire", into = "ExitCauseWire")]
pub enum ExitCause {
    /// Exited with this status.
    ExitCode(u8),
    /// Ended by this signal.
    Signal(SignalName),
    /// Ended by the runtime's `timeout_seconds`.
    TimedOut,
}

/// The wire shape of [`ExitCause`], before the exactly-one check.
///
/// Its JSON Schema states the exactly-one rule (a `null` member counts as
/// absent, as the decoder treats it).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ExitCause", extend("oneOf" = [
    {
        "required": ["exit_code"],
        "properties": {
            "exit_code": {"type": "integer"},
            "signal": {"type": "null"},
            "timed_out": {"type": "null"}
        }
    },
    {
        "required": ["signal"],
        "properties": {
            "exit_code": {"type": "null"},
            "signal": {"type": "string"},
            "timed_out": {"type": "null"}
        }
    },
    {
        "required": ["timed_out"],
        "properties": {
            "exit_code": {"type": "null"},
            "signal": {"type": "null"},
            "timed_out": {"const": true}
        }
    }
])))]
pub struct ExitCauseWire {
    /// Exit status, 0..=255.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// Signal name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalName>,
    /// Present and `true` when the command timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
}

impl TryFrom<ExitCauseWire> for ExitCause {
    type Error = String;
    fn try_from(w: ExitCauseWire) -> Result<Self, String> {
        let mut causes = Vec::new();
        if w.exit_code.is_some() {
            causes.push("exit_code");
        }
        if w.signal.is_some() {
            causes.push("signal");
        }
        match w.timed_out {
            Some(true) => causes.push("timed_out"),
            Some(false) => return Err("timed_out: expected true or absent, actual false".into()),
            None => {}
        }
        match (causes.len(), w.exit_code, w.signal) {
            (1, Some(code), _) => Ok(ExitCause::ExitCode(code)),
            (1, _, Some(sig)) => Ok(ExitCause::Signal(sig)),
            (1, _, _) => Ok(ExitCause::TimedOut),
            (n, _, _) => {
                Err(format!(
                "expected exactly one exit cause of exit_code, signal, timed_out; actual {n} ({})",
                if causes.is_empty() { "none".to_string() } else { causes.join(", ") }
            ))
            }
        }
    }
}

impl From<ExitCause> for ExitCauseWire {
    fn from(c: ExitCause) -> Self {
        match c {
            ExitCause::ExitCode(code) => ExitCauseWire {
                exit_code: Some(code),
                ..Default::default()
            },
            ExitCause::Signal(s) => ExitCauseWire {
                signal: Some(s),
                ..Default::default()
            },
            ExitCause::TimedOut => ExitCauseWire {
                timed_out: Some(true),
                ..Default::default()
            },
        }
    }
}

/// execute's settlement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxCommandResult {
    /// Exactly one exit cause.
    pub exit: ExitCause,
    /// Standard output, at most `output_limit_bytes`.
    pub stdout_base64: Bytes,
    /// Standard error, at most `output_limit_bytes`.
    pub stderr_base64: Bytes,
    /// When the command started.
    pub started_at: Timestamp,
    /// When it settled; not before `started_at`.
    pub finished_at: Timestamp,
}

/// readFile: one file under `allowed_root`, physically contained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFileRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// Absolute normalized path under `allowed_root`.
    pub path: String,
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
    pub path: String,
    /// The whole content, at most `maximum_bytes`.
    pub content_base64: Bytes,
}

/// One member of a readFiles request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFilesEntry {
    /// Absolute normalized path under the group's `allowed_root`.
    pub path: String,
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
        path: String,
        /// At most the member's `maximum_bytes`.
        content_base64: Bytes,
    },
    /// No such file.
    NotFound {
        /// Echo of the member's path.
        path: String,
    },
    /// Over the member's `maximum_bytes`.
    TooLarge {
        /// Echo of the member's path.
        path: String,
        /// The file's size in bytes.
        size_bytes: u64,
    },
    /// Resolution left the root.
    OutsideRoot {
        /// Echo of the member's path.
        path: String,
    },
    /// Not a regular file.
    NotRegularFile {
        /// Echo of the member's path.
        path: String,
    },
}

impl ReadFileOutcome {
    /// The member path this outcome answers.
    pub fn path(&self) -> &str {
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
    /// Absolute path under the root.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// SHA-256 of the content.
    pub sha256: Digest,
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
        target: String,
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
    pub path: String,
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
        path: String,
        /// Size in bytes.
        size_bytes: u64,
        /// SHA-256 of the content.
        sha256: Digest,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// Absolute path under the root.
        path: String,
        /// The link text.
        target: String,
    },
    /// A Git submodule (gitlink).
    Submodule {
        /// Absolute path under the root.
        path: String,
    },
    /// A character or block device.
    Device {
        /// Absolute path under the root.
        path: String,
    },
    /// A socket.
    Socket {
        /// Absolute path under the root.
        path: String,
    },
    /// A named pipe.
    Fifo {
        /// Absolute path under the root.
        path: String,
    },
    /// Anything else.
    Other {
        /// Absolute path under the root.
        path: String,
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

/// snapshot: capture a durable instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// The instance, in `active`, durable.
    pub instance_id: String,
    /// Retention deadline the snapshot must carry exactly.
    pub expires_at: Timestamp,
}

/// A snapshot reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxSnapshot {
    /// Provider-assigned id, non-empty, at most 128 bytes.
    pub snapshot_id: String,
    /// The provider id.
    pub provider: String,
    /// Placement.
    pub placement: Placement,
    /// The instance it was captured from.
    pub source_instance_id: String,
    /// Workspace id.
    pub workspace_id: String,
    /// Session id (the target Session for a clone).
    pub session_id: String,
    /// Profile id.
    pub profile_id: String,
    /// Profile version.
    pub profile_version: u32,
    /// Profile digest.
    pub profile_digest: Digest,
    /// When it was captured.
    pub created_at: Timestamp,
    /// Retention deadline, exactly as requested.
    pub expires_at: Timestamp,
}

/// cloneSnapshot: a physical clone into another Session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CloneSnapshotRequest {
    /// The source snapshot.
    pub source: SandboxSnapshot,
    /// The target Session.
    pub target_session_id: String,
}

/// release: end an active instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// For durable profiles: the retention deadline of the settled snapshot.
    /// Absent for ZDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_expires_at: Option<Timestamp>,
}

/// How release settled.
///
/// Wire form: `{"disposition": "released", "snapshot": {...}}` or
/// `{"disposition": "destroyed"}`; any other member is refused (decoded
/// through [`ReleaseDispositionWire`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "disposition",
    rename_all = "snake_case",
    deny_unknown_fields,
    from = "ReleaseDispositionWire"
)]
#[allow(clippy::large_enum_variant)] // a wire value settled once per release; boxing would change its public shape
pub enum ReleaseDisposition {
    /// Durable: a settled snapshot.
    Released {
        /// The snapshot.
        snapshot: SandboxSnapshot,
    },
    /// ZDR: every trace destroyed.
    Destroyed,
}

/// The decoding shape of [`ReleaseDisposition`]: the unit variant as an
/// empty struct variant so that unknown members beside the tag are refused
/// (see [`NetworkPolicyWire`]).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "disposition", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ReleaseDisposition"))]
#[allow(clippy::large_enum_variant)] // a wire value settled once per release; boxing would change its public shape
pub enum ReleaseDispositionWire {
    /// Durable: a settled snapshot.
    Released {
        /// The snapshot.
        snapshot: SandboxSnapshot,
    },
    /// ZDR: every trace destroyed.
    Destroyed {},
}

impl From<ReleaseDispositionWire> for ReleaseDisposition {
    fn from(w: ReleaseDispositionWire) -> Self {
        match w {
            ReleaseDispositionWire::Released { snapshot } => {
                ReleaseDisposition::Released { snapshot }
            }
            ReleaseDispositionWire::Destroyed {} => ReleaseDisposition::Destroyed,
        }
    }
}

/// resume: rehydrate a snapshot into a fresh active instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The identity the new instance must echo.
    pub request: SandboxProvisionRequest,
    /// The snapshot to rehydrate.
    pub snapshot: SandboxSnapshot,
}

/// destroy: idempotent teardown of one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DestroyRequest {
    /// The instance (any state; unknown ids settle as success).
    pub instance_id: String,
}

/// destroySnapshot: idempotent teardown of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DestroySnapshotRequest {
    /// The snapshot (unknown ids settle as success).
    pub snapshot_id: String,
}

/// cleanup: sweep orphans (spec "Cleanup and pinning").
///
/// An instance is swept when it was created before `orphaned_before` or its
/// `expires_at` is at or before `now`. A snapshot is swept when its
/// `expires_at` is at or before `now`, or when it is not pinned and was
/// created before `orphaned_before`: retention expiry always wins over a pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CleanupRequest {
    /// The sweep's clock.
    pub now: Timestamp,
    /// The orphan cutoff, not after `now`.
    pub orphaned_before: Timestamp,
    /// Snapshot ids exempt from the cutoff (not from their expiry), at most 1,024.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub pinned_snapshots: Vec<String>,
}

/// cleanup's result: the ids destroyed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CleanupResult {
    /// Instance ids destroyed.
    pub instances: Vec<String>,
    /// Snapshot ids destroyed.
    pub snapshots: Vec<String>,
}

/// openProcess: a long-lived process with live stdio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProcessRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// Program to run.
    pub executable: String,
    /// Arguments: at most 256, each at most 65,536 bytes, no NUL.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = 256),
            inner(length(max = 65536), regex(pattern = r"^[^\x00]*$"))
        )
    )]
    pub arguments: Vec<String>,
    /// Absolute working directory.
    pub working_directory: String,
    /// Environment; keys match `^[A-Za-z_][A-Za-z0-9_]*$`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"})))]
    pub environment: BTreeMap<String, String>,
}

/// Trusted provider evidence about an opened process, checked against the
/// instance and the envelope (`open_process_identity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProcessEvidence {
    /// Must equal the instance's provider.
    pub provider: String,
    /// Must equal the instance's id.
    pub instance_id: String,
    /// Must equal the instance's session.
    pub session_id: String,
    /// Must equal the instance's placement and the envelope's.
    pub placement: Placement,
    /// Must equal the instance's target and be among the envelope's tiers.
    pub tier: Tier,
    /// Must equal the profile's network mode and be among the envelope's.
    pub network_mode: NetworkMode,
    /// Must equal the request's executable.
    pub executable: String,
    /// When the process started.
    pub started_at: Timestamp,
}

/// How a process ended: an exit code xor a signal name.
///
/// Wire form: an object with exactly one of `exit_code` (0..=255) or
/// `signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "ProcessExitWire", into = "ProcessExitWire")]
pub enum ProcessExit {
    /// Exited with this status.
    ExitCode(u8),
    /// Ended by this signal.
    Signal(SignalName),
}

/// The wire shape of [`ProcessExit`], before the exactly-one check.
///
/// Its JSON Schema states the exactly-one rule (a `null` member counts as
/// absent, as the decoder treats it).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ProcessExit", extend("oneOf" = [
    {
        "required": ["exit_code"],
        "properties": {"exit_code": {"type": "integer"}, "signal": {"type": "null"}}
    },
    {
        "required": ["signal"],
        "properties": {"exit_code": {"type": "null"}, "signal": {"type": "string"}}
    }
])))]
pub struct ProcessExitWire {
    /// Exit status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// Signal name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalName>,
}

impl TryFrom<ProcessExitWire> for ProcessExit {
    type Error = String;
    fn try_from(w: ProcessExitWire) -> Result<Self, String> {
        match (w.exit_code, w.signal) {
            (Some(c), None) => Ok(ProcessExit::ExitCode(c)),
            (None, Some(s)) => Ok(ProcessExit::Signal(s)),
            (Some(_), Some(_)) => {
                Err("expected exactly one of exit_code, signal; actual both".into())
            }
            (None, None) => Err("expected exactly one of exit_code, signal; actual none".into()),
        }
    }
}

impl From<ProcessExit> for ProcessExitWire {
    fn from(e: ProcessExit) -> Self {
        match e {
            ProcessExit::ExitCode(c) => ProcessExitWire {
                exit_code: Some(c),
                signal: None,
            },
            ProcessExit::Signal(s) => ProcessExitWire {
                exit_code: None,
                signal: Some(s),
            },
        }
    }
}

/// Control signals openProcess accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ControlSignal {
    /// Interrupt.
    #[serde(rename = "SIGINT")]
    Sigint,
    /// Terminate (the only one sent today).
    #[serde(rename = "SIGTERM")]
    Sigterm,
    /// Kill.
    #[serde(rename = "SIGKILL")]
    Sigkill,
}

impl ControlSignal {
    /// The Linux signal number.
    pub fn number(&self) -> i32 {
        match self {
            ControlSignal::Sigint => 2,
            ControlSignal::Sigterm => 15,
            ControlSignal::Sigkill => 9,
        }
    }
    /// The matching [`SignalName`].
    pub fn name(&self) -> SignalName {
        match self {
            ControlSignal::Sigint => SignalName::Sigint,
            ControlSignal::Sigterm => SignalName::Sigterm,
            ControlSignal::Sigkill => SignalName::Sigkill,
        }
    }
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
}
