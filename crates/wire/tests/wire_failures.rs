//! A provider process that misbehaves: each failure is a closed error
//! naming what was wrong, within the stated bound, and the process is
//! gone afterwards. The providers are real `sh` processes.

mod common;

use std::time::{Duration, Instant};

use checkfu_sandbox_contract::wire::WIRE_REVISION;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_wire::protocol::{InitializeResult, WireLimits, WIRE_PROTOCOL_REVISION};
use checkfu_sandbox_wire::{WireClient, WireOptions};
use common::*;

/// How long a failure may take to surface in these tests: the 300 ms call
/// deadline plus scheduling slack.
const BOUND: Duration = Duration::from_secs(3);

fn options() -> WireOptions {
    WireOptions {
        call_timeout: Duration::from_millis(300),
        initialize_timeout: Duration::from_secs(5),
        max_line_bytes: 64 * 1024,
    }
}

fn init_line(wire_revision: &str) -> String {
    let result = InitializeResult {
        contract_revision: WIRE_REVISION.into(),
        wire_revision: wire_revision.into(),
        provider_id: "memory".into(),
        provider_name: "scripted".into(),
        capabilities: serde_json::to_value(memory().capabilities()).unwrap(),
        members: vec![],
        conformance: false,
        limits: WireLimits::default(),
    };
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string()
}

/// A provider that answers `initialize`, reads one request, then runs
/// `then`.
fn scripted(then: &str, wire_revision: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("sh");
    c.arg("-c")
        .arg(format!("read l; printf '%s\\n' \"$INIT\"; read l; {then}"))
        .env("INIT", init_line(wire_revision));
    c
}

async fn client(then: &str) -> WireClient {
    WireClient::spawn(scripted(then, WIRE_PROTOCOL_REVISION), options())
        .await
        .unwrap()
}

fn destroy_request() -> DestroyRequest {
    DestroyRequest {
        instance_id: "inst-1".into(),
    }
}

async fn assert_gone(client: &WireClient, pid: u32) {
    client.close().await;
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "provider process {pid} leaked"
    );
}

fn protocol_field(e: &SandboxError) -> (Operation, &str, &str, &str) {
    match e {
        SandboxError::SandboxProtocolInvalid {
            operation,
            field,
            expected,
            actual,
        } => (*operation, field, expected, actual),
        other => panic!("expected SandboxProtocolInvalid, got {other:?}"),
    }
}

#[tokio::test]
async fn a_provider_that_never_answers_times_out_within_the_deadline() {
    let c = client("exec sleep 30").await;
    let pid = c.child_pid().unwrap();
    let started = Instant::now();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    assert!(started.elapsed() < BOUND);
    assert!(
        matches!(&e, SandboxError::SandboxOperationFailed { operation, reason: FailureReason::TimedOut, message, .. }
            if operation == "destroy" && message.contains("300 ms")),
        "{e:?}"
    );
    assert_gone(&c, pid).await;
}

#[tokio::test]
async fn a_provider_process_that_exits_fails_the_call_naming_the_exit() {
    let c = client("exit 3").await;
    let pid = c.child_pid().unwrap();
    let started = Instant::now();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    assert!(started.elapsed() < BOUND);
    assert!(
        matches!(&e, SandboxError::SandboxOperationFailed { operation, reason: FailureReason::ProviderError, message, .. }
            if operation == "destroy" && message.contains("exited") && message.contains('3')),
        "{e:?}"
    );
    // Every later call fails the same way, at once.
    let again = c.destroy(destroy_request()).await.unwrap_err();
    assert!(matches!(again, SandboxError::SandboxOperationFailed { .. }));
    assert_gone(&c, pid).await;
}

#[tokio::test]
async fn a_malformed_line_is_a_protocol_violation_naming_the_line() {
    let c = client("echo 'not json'; exec sleep 30").await;
    let pid = c.child_pid().unwrap();
    let started = Instant::now();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    assert!(started.elapsed() < BOUND);
    let (op, field, _, actual) = protocol_field(&e);
    assert_eq!((op, field), (op::DESTROY, "line"));
    assert!(actual.contains("malformed"), "{actual}");
    assert_gone(&c, pid).await;
}

#[tokio::test]
async fn a_line_over_the_bound_is_refused_naming_the_bound() {
    let c = client("head -c 200000 /dev/zero | tr '\\0' a; exec sleep 30").await;
    let pid = c.child_pid().unwrap();
    let started = Instant::now();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    assert!(started.elapsed() < BOUND);
    let (op, field, expected, _) = protocol_field(&e);
    assert_eq!((op, field), (op::DESTROY, "line"));
    assert_eq!(expected, "a line of at most 65536 bytes");
    assert_gone(&c, pid).await;
}

#[tokio::test]
async fn an_answer_to_an_unknown_id_is_a_protocol_violation_naming_the_id() {
    let c =
        client(r#"printf '%s\n' '{"jsonrpc":"2.0","id":99,"result":null}'; exec sleep 30"#).await;
    let pid = c.child_pid().unwrap();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    let (op, field, _, actual) = protocol_field(&e);
    assert_eq!((op, field, actual), (op::DESTROY, "id", "99"));
    assert_gone(&c, pid).await;
}

#[tokio::test]
async fn an_error_outside_the_closed_vocabulary_is_a_protocol_violation_naming_the_message() {
    let c = client(r#"printf '%s\n' '{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"boom"}}'; exec sleep 30"#).await;
    let pid = c.child_pid().unwrap();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    let (op, field, _, actual) = protocol_field(&e);
    assert_eq!((op, field), (op::DESTROY, "error"));
    assert!(actual.contains("boom"), "{actual}");
    assert_gone(&c, pid).await;
}

#[tokio::test]
async fn a_closed_error_in_error_data_comes_back_as_itself() {
    let c = client(r#"printf '%s\n' '{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"x","data":{"_tag":"SandboxInstanceNotFound","instance_id":"inst-1"}}}'; exec sleep 30"#).await;
    let e = c.destroy(destroy_request()).await.unwrap_err();
    assert_eq!(
        e,
        SandboxError::SandboxInstanceNotFound {
            instance_id: "inst-1".into()
        }
    );
    c.close().await;
}

#[tokio::test]
async fn a_server_speaking_another_wire_revision_is_refused_naming_both_values() {
    let e = WireClient::spawn(
        scripted("exec sleep 30", "checkfu.sandbox.wire/v9"),
        options(),
    )
    .await
    .unwrap_err();
    let (op, field, expected, actual) = protocol_field(&e);
    assert_eq!(
        (op, field, expected, actual),
        (
            Operation::Initialize,
            "wire_revision",
            WIRE_PROTOCOL_REVISION,
            "checkfu.sandbox.wire/v9"
        )
    );
}

#[tokio::test]
async fn an_allocation_whose_value_does_not_decode_is_rolled_back_through_its_handle() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("rollback.log");
    let then = format!(
        r#"printf '%s\n' '{{"jsonrpc":"2.0","id":2,"result":{{"value":{{"instance_id":1}},"rollback_handle":"rb-9"}}}}'; read r; printf '%s\n' "$r" > {}; printf '%s\n' '{{"jsonrpc":"2.0","id":3,"result":null}}'; exec sleep 30"#,
        log.display()
    );
    let c = client(&then).await;
    let e = c.provision(request()).await.unwrap_err();
    let (op, _, _, _) = protocol_field(&e);
    assert_eq!(op, Operation::Decode(WireType::Instance));
    let sent: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(sent["method"], "sandbox/rollback");
    assert_eq!(sent["params"]["handle"], "rb-9");
    c.close().await;
}

/// A dispatch marker naming no transaction in flight is answered with an
/// error (the runner never acknowledges a dispatch it did not ask for).
#[tokio::test]
async fn an_unsolicited_dispatch_marker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("marker.log");
    let then = format!(
        r#"printf '%s\n' '{{"jsonrpc":"2.0","id":1,"method":"runner/activeWriteDispatched","params":{{"request_id":2,"transaction_id":"tx-1"}}}}'; read r; printf '%s\n' "$r" > {}; printf '%s\n' '{{"jsonrpc":"2.0","id":2,"result":null}}'; exec sleep 30"#,
        log.display()
    );
    let c = client(&then).await;
    c.destroy(destroy_request()).await.unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tx-1"),
        "{answer}"
    );
    c.close().await;
}

/// An `initialize` result without its required members names the first
/// one and says what was expected of it: that it be present.
#[tokio::test]
async fn an_initialize_result_missing_a_member_names_it_as_expected_present() {
    let mut c = tokio::process::Command::new("sh");
    c.arg("-c")
        .arg("read l; printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}'; read l");
    let e = WireClient::spawn(c, options()).await.unwrap_err();
    let (_, field, expected, actual) = protocol_field(&e);
    assert_eq!(field, "contract_revision", "{e}");
    assert_eq!(
        expected,
        checkfu_sandbox_contract::wire::MISSING_MEMBER_EXPECTED,
        "{e}"
    );
    assert_eq!(actual, "absent", "{e}");
}

#[tokio::test]
async fn a_failed_conformance_hook_is_its_whole_message_once() {
    // PROTOCOL.md: a hook that fails answers -32010 with `HookFailure`.
    let message = format!(
        "the probe could not reach the listener: {}",
        "x".repeat(600)
    );
    let reply = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32010, "message": "hook failed", "data": {"message": message}}
    })
    .to_string();
    let mut command = scripted(
        r#"printf '%s\n' "$REPLY_LINE"; exec sleep 30"#,
        WIRE_PROTOCOL_REVISION,
    );
    command.env("REPLY_LINE", reply);
    let c = WireClient::spawn(command, options()).await.unwrap();
    let e = c
        .hook::<_, serde_json::Value>("conformance/controlProbe", &serde_json::Value::Null)
        .await
        .unwrap_err();
    assert_eq!(e, message);
    c.close().await;
}

#[tokio::test]
async fn a_provider_gone_before_a_write_is_named_by_its_exit_not_the_pipe() {
    // The provider closes its stdin before it answers initialize, so the
    // next request's write fails (EPIPE) while it is still exiting.
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg("read l; exec 0<&-; printf '%s\\n' \"$INIT\"; sleep 0.2; exit 3")
        .env("INIT", init_line(WIRE_PROTOCOL_REVISION));
    // A call deadline well past the exit, so the exit is what is seen.
    let options = WireOptions {
        call_timeout: Duration::from_secs(30),
        ..options()
    };
    let c = WireClient::spawn(command, options).await.unwrap();
    let pid = c.child_pid().unwrap();
    let e = c.destroy(destroy_request()).await.unwrap_err();
    assert!(
        matches!(&e, SandboxError::SandboxOperationFailed { operation, reason: FailureReason::ProviderError, message, .. }
            if operation == "destroy" && message.contains("exited") && message.contains('3')
                && !message.contains("Broken pipe")),
        "{e:?}"
    );
    assert_gone(&c, pid).await;
}

/// Through the runtime, as a Runner sees a served provider: the client's
/// own verdicts keep the field PROTOCOL.md names (`line`, `error`), and a
/// runtime-only tag the served provider writes is refused naming `error`
/// (never passed through as if the Runner side had judged).
#[tokio::test]
async fn the_runtime_keeps_the_transport_verdicts_field_and_refuses_a_forged_tag() {
    use std::sync::Arc;
    let cases = [
        ("echo 'not json'; exec sleep 30", "line"),
        (
            r#"printf '%s\n' '{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"x","data":{"_tag":"SandboxOops"}}}'; exec sleep 30"#,
            "error",
        ),
        (
            r#"printf '%s\n' '{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"x","data":{"_tag":"SandboxProtocolInvalid","operation":"cleanup","field":"f","expected":"e","actual":"a"}}}'; exec sleep 30"#,
            "error",
        ),
    ];
    for (then, want) in cases {
        let c = Arc::new(client(then).await);
        let pid = c.child_pid().unwrap();
        let clock = ManualClock::new(Timestamp::parse("2030-01-01T00:00:00.000Z").unwrap());
        let mut runtime = checkfu_sandbox_runtime::SandboxRuntime::new(Arc::new(clock.clone()));
        runtime.register(c.clone());
        let adapter = runtime.adapter("memory").expect("adapter");
        let failure = adapter
            .cleanup(clock.now(), clock.now(), vec![])
            .await
            .unwrap_err();
        let (operation, field, _, actual) = protocol_field(failure.error());
        assert_eq!((operation, field), (op::CLEANUP, want), "{then}: {failure}");
        if then.contains("\"SandboxProtocolInvalid\"") {
            assert_eq!(actual, "SandboxProtocolInvalid", "{failure}");
        }
        assert_gone(&c, pid).await;
    }
}
