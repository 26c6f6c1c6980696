//! The method catalogue ([`METHODS`]) and the JSON Schemas of every
//! message shape ([`message_schemas`]).

use super::*;

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
