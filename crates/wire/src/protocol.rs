//! The wire protocol: JSON-RPC 2.0, one message per line (see
//! `author-kit/PROTOCOL.md` for the whole protocol written down).
//!
//! Every params and result shape here is either a contract boundary type
//! (decoded with the contract's strict decoder) or one of the small
//! protocol-only shapes below, all `deny_unknown_fields`.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::bounds::{MAX_WIRE_DOCUMENT_BYTES, MIB};
use checkfu_sandbox_contract::conformance::token::Token;
use checkfu_sandbox_contract::{
    Bytes, ControlSignal, Mismatch, Platform, ProcessExit, SandboxError, SandboxProcessEvidence,
    SandboxProviderCapabilities, Tier, Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The wire protocol's own revision literal, sent in `initialize` next to
/// the contract revision ([`checkfu_sandbox_contract::wire::WIRE_REVISION`]).
/// Changing it is a compatibility decision.
pub const WIRE_PROTOCOL_REVISION: &str = "checkfu.sandbox.wire/v1";

/// The bound on one line (one message, without its `\n`), in bytes:
/// the contract's document bound (192 MiB, which carries a 128 MiB
/// readFiles result in base64) plus 1 MiB of JSON-RPC framing, so
/// 193 MiB = 202,375,168 bytes. Both sides refuse a longer line.
pub const MAX_LINE_BYTES: usize = MAX_WIRE_DOCUMENT_BYTES + MIB as usize;

/// The stdin credit a receiver grants when a process opens, in bytes
/// (256 KiB). The sender never has more than this in flight unacknowledged.
pub const STDIN_CREDIT_BYTES: u64 = 256 * 1024;

/// The largest data chunk in one process frame, in bytes (64 KiB).
pub const STREAM_CHUNK_BYTES: usize = 64 * 1024;

/// The replay window of stdout and stderr, in bytes per stream (4 MiB):
/// the server keeps at most this many sent-but-unacknowledged bytes and
/// stops reading the process's stream while the window is full.
pub const REPLAY_WINDOW_BYTES: u64 = 4 * MIB;

/// How long a served process outlives its connection waiting for
/// `process/resume`, in milliseconds (30 s).
pub const RESUME_WINDOW_MS: u64 = 30_000;

/// How long a client waits for a reply to an ordinary call, in seconds.
pub const DEFAULT_CALL_TIMEOUT_SECONDS: u64 = 120;

/// Extra time on top of an execute's own `timeout_seconds`, in seconds.
pub const EXECUTE_GRACE_SECONDS: u64 = 30;

/// How long a client waits for `initialize`, in seconds.
pub const INITIALIZE_TIMEOUT_SECONDS: u64 = 10;

/// Method names.
pub mod method {
    /// Handshake: revisions in, envelope and members out.
    pub const INITIALIZE: &str = "initialize";
    /// The capability envelope again.
    pub const CAPABILITIES: &str = "sandbox/capabilities";
    /// provision (allocating).
    pub const PROVISION: &str = "sandbox/provision";
    /// writeFile.
    pub const WRITE_FILE: &str = "sandbox/writeFile";
    /// activate (allocating).
    pub const ACTIVATE: &str = "sandbox/activate";
    /// execute.
    pub const EXECUTE: &str = "sandbox/execute";
    /// readFile.
    pub const READ_FILE: &str = "sandbox/readFile";
    /// readFiles (optional).
    pub const READ_FILES: &str = "sandbox/readFiles";
    /// listDir (optional).
    pub const LIST_DIR: &str = "sandbox/listDir";
    /// listProjectDir (optional).
    pub const LIST_PROJECT_DIR: &str = "sandbox/listProjectDir";
    /// beginActiveWrite (optional).
    pub const BEGIN_ACTIVE_WRITE: &str = "sandbox/beginActiveWrite";
    /// snapshot (allocating).
    pub const SNAPSHOT: &str = "sandbox/snapshot";
    /// cloneSnapshot (allocating).
    pub const CLONE_SNAPSHOT: &str = "sandbox/cloneSnapshot";
    /// release (allocating).
    pub const RELEASE: &str = "sandbox/release";
    /// resume (allocating).
    pub const RESUME: &str = "sandbox/resume";
    /// destroy.
    pub const DESTROY: &str = "sandbox/destroy";
    /// destroySnapshot.
    pub const DESTROY_SNAPSHOT: &str = "sandbox/destroySnapshot";
    /// cleanup.
    pub const CLEANUP: &str = "sandbox/cleanup";
    /// openProcess (optional).
    pub const OPEN_PROCESS: &str = "sandbox/openProcess";
    /// resolveImage (optional extension): pin an image reference.
    pub const RESOLVE_IMAGE: &str = "sandbox/resolveImage";
    /// Run a handoff's rollback (request).
    pub const ROLLBACK: &str = "sandbox/rollback";
    /// The runner took ownership: drop the rollback unrun (notification).
    pub const COMMIT: &str = "sandbox/commit";
    /// The caller stopped observing a request (notification).
    pub const CANCEL: &str = "$/cancel";
    /// Provider to runner: a beginActiveWrite transaction is about to be
    /// dispatched (request).
    pub const ACTIVE_WRITE_DISPATCHED: &str = "runner/activeWriteDispatched";
    /// Runner to provider: stdin bytes (notification).
    pub const PROCESS_STDIN: &str = "process/stdin";
    /// Runner to provider: stdin half-close (notification).
    pub const PROCESS_STDIN_CLOSE: &str = "process/stdinClose";
    /// Provider to runner: more stdin credit (notification).
    pub const PROCESS_CREDIT: &str = "process/credit";
    /// Provider to runner: stdout or stderr bytes (notification).
    pub const PROCESS_OUTPUT: &str = "process/output";
    /// Runner to provider: output consumed up to an offset (notification).
    pub const PROCESS_ACK: &str = "process/ack";
    /// Provider to runner: end of a stream (notification).
    pub const PROCESS_EOF: &str = "process/eof";
    /// Provider to runner: the process ended (notification).
    pub const PROCESS_EXIT: &str = "process/exit";
    /// Provider to runner: the process failed before an exit (notification).
    pub const PROCESS_FAILED: &str = "process/failed";
    /// Deliver one control signal (request).
    pub const PROCESS_SIGNAL: &str = "process/signal";
    /// Idempotent teardown (request).
    pub const PROCESS_DESTROY: &str = "process/destroy";
    /// Reattach a process after a reconnect (request).
    pub const PROCESS_RESUME: &str = "process/resume";
    /// Conformance hook: what the target declares (request).
    pub const CONFORMANCE_DESCRIBE: &str = "conformance/describe";
    /// Conformance hook: start a listener (request).
    pub const CONFORMANCE_START_LISTENER: &str = "conformance/startListener";
    /// Conformance hook: the positive control dial (request).
    pub const CONFORMANCE_CONTROL_PROBE: &str = "conformance/controlProbe";
    /// Conformance hook: stop a listener (request).
    pub const CONFORMANCE_STOP_LISTENER: &str = "conformance/stopListener";
    /// Conformance hook: what the provider holds now (request).
    pub const CONFORMANCE_LIVE_OBJECTS: &str = "conformance/liveObjects";
    /// Conformance hook: remove everything of the target's scope
    /// (request, idempotent).
    pub const CONFORMANCE_CLOSE: &str = "conformance/close";
    /// Conformance hook (optional): pause or unpause an instance's
    /// workload from outside the provider (request).
    pub const CONFORMANCE_PAUSE_WORKLOAD: &str = "conformance/pauseWorkload";
    /// Conformance hook (optional): whether an instance's workload is
    /// paused (request).
    pub const CONFORMANCE_WORKLOAD_PAUSED: &str = "conformance/workloadPaused";
}

/// JSON-RPC error codes this protocol uses.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The message is not a valid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method, or an optional member the provider does not serve.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not decode.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A closed sandbox error; `data` is the `SandboxError` object.
    pub const SANDBOX_ERROR: i64 = -32000;
    /// `initialize` named a revision the server does not speak; `data` is
    /// a [`super::RevisionMismatch`].
    pub const REVISION_MISMATCH: i64 = -32001;
    /// A method called before `initialize`.
    pub const NOT_INITIALIZED: i64 = -32002;
    /// A `conformance/*` hook failed; `data` is a [`super::HookFailure`].
    pub const HOOK_FAILED: i64 = -32010;
}

/// The literal `"2.0"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum JsonRpcVersion {
    /// JSON-RPC 2.0.
    #[serde(rename = "2.0")]
    V2,
}

/// One line on the wire: a request (`id` and `method`), a notification
/// (`method`, no `id`) or a response (`id` and exactly one of `result`,
/// `error`). Ids are non-negative integers chosen by the sender of the
/// request; each side numbers its own requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// Request or response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Request or notification method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Request or notification params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// Success result (`null` for members that return nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RpcError {
    /// One of [`code`].
    pub code: i64,
    /// Human text.
    pub message: String,
    /// For [`code::SANDBOX_ERROR`]: the `SandboxError` object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// A closed sandbox error as `{code: -32000, data: <SandboxError>}`.
    pub fn sandbox(e: &SandboxError) -> Self {
        RpcError {
            code: code::SANDBOX_ERROR,
            message: e.to_string(),
            data: serde_json::to_value(e).ok(),
        }
    }

    /// A plain protocol error with no data.
    pub fn plain(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A classified incoming line.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request to answer.
    Request {
        /// Its id.
        id: u64,
        /// Its method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// Its method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A response to one of our requests.
    Response {
        /// The id we sent.
        id: u64,
        /// The result or the error.
        outcome: Result<Value, RpcError>,
    },
}

/// Why a line is not a protocol message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineViolation {
    /// Not JSON, or not the message shape.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// Both `result` and `error`, or a response without an id.
    #[error("ambiguous message: {0}")]
    Ambiguous(&'static str),
}

/// Classifies one line (without its newline). Never panics; the work is
/// linear in the line's length.
///
/// # Errors
/// [`LineViolation`] for anything that is not a request, notification or
/// response of this protocol.
pub fn decode_line(line: &[u8]) -> Result<Incoming, LineViolation> {
    let msg: Message =
        serde_json::from_slice(line).map_err(|e| LineViolation::Malformed(e.to_string()))?;
    match (msg.id, msg.method) {
        (Some(id), Some(method)) => {
            if msg.result.is_some() || msg.error.is_some() {
                return Err(LineViolation::Ambiguous(
                    "a request carrying result or error",
                ));
            }
            Ok(Incoming::Request {
                id,
                method,
                params: msg.params.unwrap_or(Value::Null),
            })
        }
        (None, Some(method)) => {
            if msg.result.is_some() || msg.error.is_some() {
                return Err(LineViolation::Ambiguous(
                    "a notification carrying result or error",
                ));
            }
            Ok(Incoming::Notification {
                method,
                params: msg.params.unwrap_or(Value::Null),
            })
        }
        (Some(id), None) => {
            if msg.params.is_some() {
                return Err(LineViolation::Ambiguous("a response carrying params"));
            }
            match msg.error {
                Some(_) if msg.result.is_some() => Err(LineViolation::Ambiguous(
                    "a response with both result and error",
                )),
                Some(error) => Ok(Incoming::Response {
                    id,
                    outcome: Err(error),
                }),
                None => Ok(Incoming::Response {
                    id,
                    outcome: Ok(msg.result.unwrap_or(Value::Null)),
                }),
            }
        }
        (None, None) => Err(LineViolation::Ambiguous("neither a method nor an id")),
    }
}

/// Encodes a request line (with its newline).
pub fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    line(&Message {
        jsonrpc: JsonRpcVersion::V2,
        id: Some(id),
        method: Some(method.into()),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// Encodes a notification line (with its newline).
pub fn notification_line(method: &str, params: Value) -> Vec<u8> {
    line(&Message {
        jsonrpc: JsonRpcVersion::V2,
        id: None,
        method: Some(method.into()),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// Encodes a response line (with its newline).
pub fn response_line(id: u64, outcome: Result<Value, RpcError>) -> Vec<u8> {
    let (result, error) = match outcome {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    line(&Message {
        jsonrpc: JsonRpcVersion::V2,
        id: Some(id),
        method: None,
        params: None,
        result: Some(result.unwrap_or(Value::Null)).filter(|_| error.is_none()),
        error,
    })
}

fn line(m: &Message) -> Vec<u8> {
    let mut out = serde_json::to_vec(m).unwrap_or_default();
    out.push(b'\n');
    out
}

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

/// Which output stream a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamName {
    /// Standard output: lossless inside the replay window.
    Stdout,
    /// Standard error: diagnostic, same framing.
    Stderr,
}

/// The runner's account of one output stream (stdout or stderr) of a
/// served process: the rules `process/output`, `process/ack` and
/// `process/eof` frames are held to, as one pure state machine that the
/// client and the author kit's `frames:open_process` vectors both run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputAccount {
    /// Bytes received (the next expected offset).
    pub received: u64,
    /// Bytes the runner acknowledged (consumed).
    pub acked: u64,
}

impl OutputAccount {
    /// Applies a `process/output` of `len` bytes at `offset` under the
    /// replay window `window`; returns how many leading bytes are a resend
    /// already received (a chunk resent after a reconnect may overlap).
    ///
    /// # Errors
    /// A [`Mismatch`] naming `process/output.offset` for a gap (an offset
    /// past what was received) or `process/output.data_base64` for more
    /// unacknowledged bytes than the window.
    pub fn output(&mut self, offset: u64, len: usize, window: u64) -> Result<usize, Mismatch> {
        if offset > self.received {
            return Err(Mismatch::new(
                format!("{}.offset", method::PROCESS_OUTPUT),
                format!("at most {} (no gap)", self.received),
                offset.to_string(),
            ));
        }
        let skip = usize::try_from(self.received - offset).unwrap_or(usize::MAX);
        let fresh = len.saturating_sub(skip) as u64;
        let unacked = self.received + fresh - self.acked;
        if unacked > window {
            return Err(Mismatch::new(
                format!("{}.data_base64", method::PROCESS_OUTPUT),
                format!("at most {window} unacknowledged bytes (the replay window)"),
                format!("{unacked} bytes"),
            ));
        }
        self.received += fresh;
        Ok(skip)
    }

    /// Applies a `process/eof` at `offset`.
    ///
    /// # Errors
    /// A [`Mismatch`] naming `process/eof.offset` unless `offset` is
    /// exactly the bytes received.
    pub fn eof(&self, offset: u64) -> Result<(), Mismatch> {
        if offset != self.received {
            return Err(Mismatch::new(
                format!("{}.offset", method::PROCESS_EOF),
                self.received.to_string(),
                offset.to_string(),
            ));
        }
        Ok(())
    }

    /// The runner acknowledged every byte before `offset` (never moves
    /// back, never past what was received).
    pub fn ack(&mut self, offset: u64) {
        self.acked = self.acked.max(offset.min(self.received));
    }
}

/// `process/stdin`: bytes at `offset` of the stdin stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdinFrame {
    /// The process handle.
    pub process: String,
    /// Offset of the first byte in the stdin stream.
    pub offset: u64,
    /// At most 64 KiB, and never more than the credit left.
    pub data_base64: Bytes,
}

/// `process/stdinClose`: end of stdin after `offset` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdinCloseFrame {
    /// The process handle.
    pub process: String,
    /// Total stdin bytes sent.
    pub offset: u64,
}

/// `process/credit`: the receiver delivered bytes to the process and
/// grants that many more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreditFrame {
    /// The process handle.
    pub process: String,
    /// Additional bytes the sender may send.
    pub bytes: u64,
}

/// `process/output`: bytes at `offset` of stdout or stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputFrame {
    /// The process handle.
    pub process: String,
    /// Which stream.
    pub stream: StreamName,
    /// Offset of the first byte (the sequence number).
    pub offset: u64,
    /// At most 64 KiB.
    pub data_base64: Bytes,
}

/// `process/ack`: the runner holds every byte of `stream` before `offset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AckFrame {
    /// The process handle.
    pub process: String,
    /// Which stream.
    pub stream: StreamName,
    /// Bytes received and consumed.
    pub offset: u64,
}

/// `process/eof`: `stream` ended after `offset` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EofFrame {
    /// The process handle.
    pub process: String,
    /// Which stream.
    pub stream: StreamName,
    /// The stream's total length.
    pub offset: u64,
}

/// `process/exit`: the exit, sent once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitFrame {
    /// The process handle.
    pub process: String,
    /// Exit code xor signal.
    pub exit: ProcessExit,
}

/// `process/failed`: the process cannot settle with an exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessFailedFrame {
    /// The process handle.
    pub process: String,
    /// A closed sandbox error.
    pub error: SandboxError,
}

/// `process/destroy` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessParams {
    /// The process handle.
    pub process: String,
}

/// `process/resume` params: what the runner already holds of each stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeProcessParams {
    /// The process handle.
    pub process: String,
    /// Stdout bytes received.
    pub stdout_offset: u64,
    /// Stderr bytes received.
    pub stderr_offset: u64,
}

/// `process/resume` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeProcessResult {
    /// Stdin bytes the provider received; the runner resends from here.
    pub stdin_offset: u64,
    /// Stdin credit granted in all so far.
    pub stdin_granted: u64,
}

/// `process/signal` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalParams {
    /// The process handle.
    pub process: String,
    /// `SIGINT`, `SIGTERM` or `SIGKILL`.
    pub signal: ControlSignal,
}

/// `conformance/describe` result: what a conformance target declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeResult {
    /// Short target name for evidence.
    pub name: String,
    /// Declared conformance tokens.
    pub declared_tokens: Vec<Token>,
    /// The pinned root image (`name@sha256:<hex>`).
    pub root_image: String,
    /// The tier to request.
    pub tier: Tier,
    /// The platform to request.
    pub platform: Platform,
    /// The provider's clock now; with `manual_clock` the runner starts a
    /// manual clock at this instant, otherwise it uses the system clock.
    pub clock_now: Timestamp,
    /// Whether the served provider's clock is manual (deterministic).
    pub manual_clock: bool,
    /// Whether the provider's beginActiveWrite journal keeps file bodies on
    /// durable host storage (then `ephemeral_zdr` transactions must be
    /// refused). Absent: `false`.
    #[serde(default)]
    pub active_write_journal_durable: bool,
}

/// `conformance/pauseWorkload` params: pause (`paused: true`) or unpause an
/// instance's workload from outside the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseWorkloadParams {
    /// The instance.
    pub instance_id: String,
    /// `true` to pause, `false` to unpause.
    pub paused: bool,
}

/// `conformance/workloadPaused` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPausedParams {
    /// The instance.
    pub instance_id: String,
}

/// `conformance/workloadPaused` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPausedResult {
    /// Whether the workload is paused now.
    pub paused: bool,
}

/// A listener (`conformance/startListener` result; `controlProbe` and
/// `stopListener` params).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenerWire {
    /// Host the sandbox would dial.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Bytes the listener sends on accept.
    pub token: String,
}

/// `conformance/controlProbe` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeResult {
    /// What the listener sent.
    pub data_base64: Bytes,
}

/// `conformance/liveObjects` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveObjectsWire {
    /// Instance ids.
    pub instances: Vec<String>,
    /// Snapshot ids.
    pub snapshots: Vec<String>,
}

/// A hook failure: the `error.data` of a failed `conformance/*` call
/// (code [`code::HOOK_FAILED`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookFailure {
    /// What went wrong.
    pub message: String,
}

fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// The JSON Schema (2020-12) of every protocol-only message shape, by
/// name. Params and results that are contract boundary types are named in
/// `PROTOCOL.md` and published by the author kit under the same names.
pub fn message_schemas() -> BTreeMap<&'static str, Value> {
    use checkfu_sandbox_contract::{ReleaseDisposition, SandboxInstance, SandboxSnapshot};
    let mut out = BTreeMap::new();
    out.insert("Message", schema_of::<Message>());
    out.insert("RpcError", schema_of::<RpcError>());
    out.insert("InitializeParams", schema_of::<InitializeParams>());
    out.insert("InitializeResult", schema_of::<InitializeResult>());
    out.insert("RevisionMismatch", schema_of::<RevisionMismatch>());
    out.insert(
        "HandoffResult_SandboxInstance",
        schema_of::<HandoffResult<SandboxInstance>>(),
    );
    out.insert(
        "HandoffResult_SandboxSnapshot",
        schema_of::<HandoffResult<SandboxSnapshot>>(),
    );
    out.insert(
        "HandoffResult_ReleaseDisposition",
        schema_of::<HandoffResult<ReleaseDisposition>>(),
    );
    out.insert("HandleParams", schema_of::<HandleParams>());
    out.insert("ImageReferenceParams", schema_of::<ImageReferenceParams>());
    out.insert("CancelParams", schema_of::<CancelParams>());
    out.insert(
        "ActiveWriteDispatchedParams",
        schema_of::<ActiveWriteDispatchedParams>(),
    );
    out.insert("OpenProcessResult", schema_of::<OpenProcessResult>());
    out.insert("StdinFrame", schema_of::<StdinFrame>());
    out.insert("StdinCloseFrame", schema_of::<StdinCloseFrame>());
    out.insert("CreditFrame", schema_of::<CreditFrame>());
    out.insert("OutputFrame", schema_of::<OutputFrame>());
    out.insert("AckFrame", schema_of::<AckFrame>());
    out.insert("EofFrame", schema_of::<EofFrame>());
    out.insert("ExitFrame", schema_of::<ExitFrame>());
    out.insert("ProcessFailedFrame", schema_of::<ProcessFailedFrame>());
    out.insert("ProcessParams", schema_of::<ProcessParams>());
    out.insert("SignalParams", schema_of::<SignalParams>());
    out.insert("ResumeProcessParams", schema_of::<ResumeProcessParams>());
    out.insert("ResumeProcessResult", schema_of::<ResumeProcessResult>());
    out.insert("DescribeResult", schema_of::<DescribeResult>());
    out.insert("ListenerWire", schema_of::<ListenerWire>());
    out.insert("ProbeResult", schema_of::<ProbeResult>());
    out.insert("LiveObjectsWire", schema_of::<LiveObjectsWire>());
    out.insert("HookFailure", schema_of::<HookFailure>());
    out.insert("PauseWorkloadParams", schema_of::<PauseWorkloadParams>());
    out.insert("WorkloadPausedParams", schema_of::<WorkloadPausedParams>());
    out.insert("WorkloadPausedResult", schema_of::<WorkloadPausedResult>());
    out
}

/// Who sends a method, and whether it expects a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A runner → provider request.
    Request,
    /// A runner → provider notification.
    Notification,
    /// A provider → runner request.
    Callback,
    /// A provider → runner notification.
    Frame,
}

/// One method: its name, direction, params type and result type, named as
/// the author kit's `schema/<Type>.json` or [`message_schemas`] name them
/// (`null` for JSON null; `—` for a notification's absent result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodSpec {
    /// The method name.
    pub method: &'static str,
    /// Who sends it.
    pub direction: Direction,
    /// The params type.
    pub params: &'static str,
    /// The result type.
    pub result: &'static str,
}

const fn spec(
    method: &'static str,
    direction: Direction,
    params: &'static str,
    result: &'static str,
) -> MethodSpec {
    MethodSpec {
        method,
        direction,
        params,
        result,
    }
}

/// Every method of the protocol with its params and result types, for
/// `PROTOCOL.md` and a kit generator.
pub const METHODS: &[MethodSpec] = {
    use Direction::*;
    &[
        spec(
            method::INITIALIZE,
            Request,
            "InitializeParams",
            "InitializeResult",
        ),
        spec(
            method::CAPABILITIES,
            Request,
            "null",
            "SandboxProviderCapabilities",
        ),
        spec(
            method::PROVISION,
            Request,
            "SandboxProvisionRequest",
            "HandoffResult_SandboxInstance",
        ),
        spec(method::WRITE_FILE, Request, "WriteFileRequest", "null"),
        spec(
            method::ACTIVATE,
            Request,
            "ActivateRequest",
            "HandoffResult_SandboxInstance",
        ),
        spec(
            method::EXECUTE,
            Request,
            "ExecuteRequest",
            "SandboxCommandResult",
        ),
        spec(
            method::READ_FILE,
            Request,
            "ReadFileRequest",
            "SandboxFileContent",
        ),
        spec(
            method::READ_FILES,
            Request,
            "ReadFilesRequest",
            "ReadFilesResult",
        ),
        spec(method::LIST_DIR, Request, "ListDirRequest", "ListDirResult"),
        spec(
            method::LIST_PROJECT_DIR,
            Request,
            "ListProjectDirRequest",
            "ListProjectDirResult",
        ),
        spec(
            method::BEGIN_ACTIVE_WRITE,
            Request,
            "ActiveWriteRequest",
            "ActiveWriteOutcome",
        ),
        spec(
            method::SNAPSHOT,
            Request,
            "SnapshotRequest",
            "HandoffResult_SandboxSnapshot",
        ),
        spec(
            method::CLONE_SNAPSHOT,
            Request,
            "CloneSnapshotRequest",
            "HandoffResult_SandboxSnapshot",
        ),
        spec(
            method::RELEASE,
            Request,
            "ReleaseRequest",
            "HandoffResult_ReleaseDisposition",
        ),
        spec(
            method::RESUME,
            Request,
            "ResumeRequest",
            "HandoffResult_SandboxInstance",
        ),
        spec(method::DESTROY, Request, "DestroyRequest", "null"),
        spec(
            method::DESTROY_SNAPSHOT,
            Request,
            "DestroySnapshotRequest",
            "null",
        ),
        spec(method::CLEANUP, Request, "CleanupRequest", "CleanupResult"),
        spec(
            method::OPEN_PROCESS,
            Request,
            "SandboxProcessRequest",
            "OpenProcessResult",
        ),
        spec(
            method::RESOLVE_IMAGE,
            Request,
            "ImageReferenceParams",
            "ImageReferenceParams",
        ),
        spec(method::ROLLBACK, Request, "HandleParams", "null"),
        spec(method::PROCESS_SIGNAL, Request, "SignalParams", "null"),
        spec(method::PROCESS_DESTROY, Request, "ProcessParams", "null"),
        spec(
            method::PROCESS_RESUME,
            Request,
            "ResumeProcessParams",
            "ResumeProcessResult",
        ),
        spec(
            method::CONFORMANCE_DESCRIBE,
            Request,
            "null",
            "DescribeResult",
        ),
        spec(
            method::CONFORMANCE_START_LISTENER,
            Request,
            "null",
            "ListenerWire",
        ),
        spec(
            method::CONFORMANCE_CONTROL_PROBE,
            Request,
            "ListenerWire",
            "ProbeResult",
        ),
        spec(
            method::CONFORMANCE_STOP_LISTENER,
            Request,
            "ListenerWire",
            "null",
        ),
        spec(
            method::CONFORMANCE_LIVE_OBJECTS,
            Request,
            "null",
            "LiveObjectsWire",
        ),
        spec(method::CONFORMANCE_CLOSE, Request, "null", "null"),
        spec(
            method::CONFORMANCE_PAUSE_WORKLOAD,
            Request,
            "PauseWorkloadParams",
            "null",
        ),
        spec(
            method::CONFORMANCE_WORKLOAD_PAUSED,
            Request,
            "WorkloadPausedParams",
            "WorkloadPausedResult",
        ),
        spec(method::COMMIT, Notification, "HandleParams", "—"),
        spec(method::CANCEL, Notification, "CancelParams", "—"),
        spec(method::PROCESS_STDIN, Notification, "StdinFrame", "—"),
        spec(
            method::PROCESS_STDIN_CLOSE,
            Notification,
            "StdinCloseFrame",
            "—",
        ),
        spec(method::PROCESS_ACK, Notification, "AckFrame", "—"),
        spec(
            method::ACTIVE_WRITE_DISPATCHED,
            Callback,
            "ActiveWriteDispatchedParams",
            "null",
        ),
        spec(method::PROCESS_CREDIT, Frame, "CreditFrame", "—"),
        spec(method::PROCESS_OUTPUT, Frame, "OutputFrame", "—"),
        spec(method::PROCESS_EOF, Frame, "EofFrame", "—"),
        spec(method::PROCESS_EXIT, Frame, "ExitFrame", "—"),
        spec(method::PROCESS_FAILED, Frame, "ProcessFailedFrame", "—"),
    ]
};
