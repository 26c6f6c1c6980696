//! The session's own shapes: initialize, the allocation handoff, cancel,
//! and the activeWrite dispatch notification.

use super::*;

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeParams {
    /// The contract revision the runner speaks: `checkfu.sandbox/v1`.
    pub contract_revision: String,
    /// The wire revision the runner speaks: `checkfu.sandbox.wire/v1`.
    pub wire_revision: String,
}

/// The optional members a served provider implements.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OptionalMember {
    /// readFiles.
    ReadFiles,
    /// listDir.
    ListDir,
    /// listProjectDir.
    ListProjectDir,
    /// openProcess.
    OpenProcess,
    /// beginActiveWrite.
    BeginActiveWrite,
    /// resolveImage (extension).
    ResolveImage,
}

/// The bounds a server states in `initialize`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireLimits {
    /// The longest line either side accepts.
    pub max_line_bytes: u64,
    /// Initial stdin credit of an opened process.
    pub stdin_credit_bytes: u64,
    /// Per-stream replay window of an opened process.
    pub replay_window_bytes: u64,
    /// Largest data chunk in one process frame.
    pub stream_chunk_bytes: u64,
    /// How long a process outlives its connection awaiting
    /// `process/resume`, in milliseconds.
    pub resume_window_ms: u64,
}

impl Default for WireLimits {
    fn default() -> Self {
        WireLimits {
            max_line_bytes: MAX_LINE_BYTES as u64,
            stdin_credit_bytes: STDIN_CREDIT_BYTES,
            replay_window_bytes: REPLAY_WINDOW_BYTES,
            stream_chunk_bytes: STREAM_CHUNK_BYTES as u64,
            resume_window_ms: RESUME_WINDOW_MS,
        }
    }
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeResult {
    /// Echo of the contract revision.
    pub contract_revision: String,
    /// Echo of the wire revision.
    pub wire_revision: String,
    /// The provider's id (`memory`, `docker`, ...).
    pub provider_id: String,
    /// A human name for the provider.
    pub provider_name: String,
    /// The capability envelope (decoded strictly by the runner).
    #[schemars(with = "SandboxProviderCapabilities")]
    pub capabilities: Value,
    /// The optional members served; the rest answer `-32601`.
    pub members: Vec<OptionalMember>,
    /// Whether the `conformance/*` hooks are served.
    pub conformance: bool,
    /// The server's bounds.
    pub limits: WireLimits,
}

/// A refused `initialize`: the `error.data` of [`code::REVISION_MISMATCH`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionMismatch {
    /// `contract_revision` or `wire_revision`.
    pub field: String,
    /// What the server speaks.
    pub expected: String,
    /// What the runner sent.
    pub actual: String,
}

/// The result of an allocating member: the value and a rollback handle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffResult<T> {
    /// The allocated value, a contract boundary type.
    pub value: T,
    /// Names the provider's rollback for this allocation until
    /// `sandbox/rollback` runs it or `sandbox/commit` drops it.
    pub rollback_handle: String,
}

/// `sandbox/rollback` and `sandbox/commit` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandleParams {
    /// A rollback handle from a [`HandoffResult`].
    pub handle: String,
}

/// `sandbox/resolveImage` params and result: an image reference, in the
/// params as the runner was given it (`name[:tag]` or
/// `name@sha256:<hex>`), in the result pinned (`name@sha256:<64 lowercase
/// hex>`; the runtime checks it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageReferenceParams {
    /// The reference.
    pub reference: String,
}

/// `$/cancel` params.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    /// The id of the request the caller stopped observing.
    pub id: u64,
}

/// `runner/activeWriteDispatched` params: the dispatch marker of a
/// beginActiveWrite transaction (spec "The operations").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActiveWriteDispatchedParams {
    /// The `sandbox/beginActiveWrite` request's id.
    pub request_id: u64,
    /// The transaction.
    pub transaction_id: String,
}

/// `sandbox/openProcess` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenProcessResult {
    /// The process handle every `process/*` frame names.
    pub process: String,
    /// Trusted provider evidence.
    pub evidence: SandboxProcessEvidence,
    /// The stdin credit granted now, in bytes.
    pub stdin_credit_bytes: u64,
    /// The per-stream replay window, in bytes.
    pub replay_window_bytes: u64,
}
