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

mod catalogue;
mod envelope;
mod hooks;
mod session;
mod stream;

pub use self::catalogue::{message_schemas, Direction, MethodSpec, METHODS};
pub use self::envelope::{
    decode_line, notification_line, request_line, response_line, Incoming, JsonRpcVersion,
    LineViolation, Message, RpcError,
};
pub use self::hooks::{
    DescribeResult, HookFailure, ListenerWire, LiveObjectsWire, PauseWorkloadParams, ProbeResult,
    WorkloadPausedParams, WorkloadPausedResult,
};
pub use self::session::{
    ActiveWriteDispatchedParams, CancelParams, HandleParams, HandoffResult, ImageReferenceParams,
    InitializeParams, InitializeResult, OpenProcessResult, OptionalMember, RevisionMismatch,
    WireLimits,
};
pub use self::stream::{
    AckFrame, CreditFrame, EofFrame, ExitFrame, OutputAccount, OutputFrame, ProcessFailedFrame,
    ProcessParams, ResumeProcessParams, ResumeProcessResult, SignalParams, StdinCloseFrame,
    StdinFrame, StreamName,
};

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
