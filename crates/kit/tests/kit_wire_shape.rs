//! Re-reads the contract's wire output with independent test-only types
//! (STYLE 10), so an unplanned format change fails here even when the
//! contract's own types round-trip.

use checkfu_sandbox_contract::wire::encode;
use checkfu_sandbox_contract::{
    op, ExitCause, FailureReason, Member, Operation, ProcessExit, ProjectEntry, ProjectEntryKind,
    SandboxError, SignalName,
};
use serde::Deserialize;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ProtocolInvalidShape {
    #[serde(rename = "_tag")]
    tag: String,
    operation: String,
    field: String,
    expected: String,
    actual: String,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct OperationFailedShape {
    #[serde(rename = "_tag")]
    tag: String,
    operation: String,
    reason: String,
    message: Option<String>,
    field: Option<String>,
    expected: Option<String>,
    actual: Option<String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ExitShape {
    exit_code: Option<i64>,
    signal: Option<String>,
    timed_out: Option<bool>,
}

#[test]
fn protocol_error_is_a_flat_tagged_object() {
    let e = SandboxError::protocol(Operation::InstanceIdentity, "expires_at", "\"a\"", "\"b\"");
    let shape: ProtocolInvalidShape = serde_json::from_slice(&encode(&e)).unwrap();
    assert_eq!(
        shape,
        ProtocolInvalidShape {
            tag: "SandboxProtocolInvalid".into(),
            operation: "instance_identity".into(),
            field: "expires_at".into(),
            expected: "\"a\"".into(),
            actual: "\"b\"".into(),
        }
    );
}

#[test]
fn operation_failed_omits_empty_details() {
    let e = SandboxError::failed(
        Operation::Rollback(Member::Provision),
        FailureReason::TimedOut,
        "",
    );
    let text = String::from_utf8(encode(&e)).unwrap();
    assert_eq!(
        text,
        r#"{"_tag":"SandboxOperationFailed","operation":"provision_rollback","reason":"timed_out"}"#
    );
    let shape: OperationFailedShape = serde_json::from_str(&text).unwrap();
    assert_eq!(shape.reason, "timed_out");
    assert_eq!((shape.message, shape.field), (None, None));
    let e = SandboxError::invalid_request(op::EXECUTE, "arguments", "at most 256 arguments", "257");
    let shape: OperationFailedShape = serde_json::from_slice(&encode(&e)).unwrap();
    assert_eq!(shape.field.as_deref(), Some("arguments"));
    assert_eq!(shape.expected.as_deref(), Some("at most 256 arguments"));
    assert_eq!(shape.actual.as_deref(), Some("257"));
}

#[test]
fn exit_cause_has_exactly_one_member_on_the_wire() {
    let cases = [
        (ExitCause::ExitCode(3), r#"{"exit_code":3}"#),
        (
            ExitCause::Signal(SignalName::Sigkill),
            r#"{"signal":"SIGKILL"}"#,
        ),
        (ExitCause::TimedOut, r#"{"timed_out":true}"#),
    ];
    for (cause, wire) in cases {
        let text = String::from_utf8(encode(&cause)).unwrap();
        assert_eq!(text, wire);
        let shape: ExitShape = serde_json::from_str(&text).unwrap();
        let present = [
            shape.exit_code.is_some(),
            shape.signal.is_some(),
            shape.timed_out.is_some(),
        ];
        assert_eq!(present.iter().filter(|p| **p).count(), 1, "{text}");
    }
    let text = String::from_utf8(encode(&ProcessExit::Signal(SignalName::Sigterm))).unwrap();
    assert_eq!(text, r#"{"signal":"SIGTERM"}"#);
}

#[test]
fn project_entry_is_one_flat_object() {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct EntryShape {
        path: String,
        kind: String,
        size_bytes: Option<u64>,
        sha256: Option<String>,
        target: Option<String>,
    }
    let entry = ProjectEntry {
        path: "/p/l".into(),
        kind: ProjectEntryKind::Symlink {
            target: "../x".into(),
        },
    };
    let shape: EntryShape = serde_json::from_slice(&encode(&entry)).unwrap();
    assert_eq!(
        (
            shape.path.as_str(),
            shape.kind.as_str(),
            shape.target.as_deref()
        ),
        ("/p/l", "symlink", Some("../x"))
    );
    assert_eq!((shape.size_bytes, shape.sha256), (None, None));
    let fifo = ProjectEntry {
        path: "/p/f".into(),
        kind: ProjectEntryKind::Fifo,
    };
    assert_eq!(
        String::from_utf8(encode(&fifo)).unwrap(),
        r#"{"path":"/p/f","kind":"fifo"}"#
    );
}
