//! `checkfu sandbox serve` as a real child process: the conformance suite
//! through the wire passes 9/9 against the served memory oracle, a fault
//! injected on the served side fails its case through the wire, and the
//! socket transport serves the same.

use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_conformance::{run_suite, ConformanceTarget, Outcome, Progress, SuiteOptions};
use checkfu_sandbox_contract::SandboxError;
use checkfu_sandbox_wire::conformance::WireTarget;
use checkfu_sandbox_wire::{WireClient, WireOptions};

fn quiet(_: Progress<'_>) {}

fn serve(args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_checkfu"));
    c.args(["sandbox", "serve"]).args(args);
    c.env_remove("RUST_LOG");
    c
}

fn gone(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_over_a_served_memory_oracle_passes_nine_of_nine() {
    let client = WireClient::spawn(serve(&[]), WireOptions::default())
        .await
        .unwrap();
    let pid = client.child_pid().unwrap();
    let target = Arc::new(WireTarget::new(client.clone()).await.unwrap());
    assert_eq!(target.name(), "memory");
    let evidence = run_suite(target.clone(), &SuiteOptions::default(), &quiet)
        .await
        .unwrap();
    assert_eq!(evidence.summary.passed, 9, "{}", evidence.table());
    let live = target.live_objects().await.unwrap();
    assert!(
        live.instances.is_empty() && live.snapshots.is_empty(),
        "{live:?}"
    );
    drop(target);
    client.close().await;
    assert!(gone(pid), "the served process {pid} outlived close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_injected_on_the_served_side_fails_its_case_through_the_wire() {
    let client = WireClient::spawn(
        serve(&["--inject", "identity-session-id"]),
        WireOptions::default(),
    )
    .await
    .unwrap();
    let target = Arc::new(WireTarget::new(client.clone()).await.unwrap());
    let options = SuiteOptions {
        cases: vec!["stage-seal-execute".into()],
        ..SuiteOptions::default()
    };
    let evidence = run_suite(target, &options, &quiet).await.unwrap();
    let case = &evidence.cases[0];
    assert_eq!(case.outcome, Outcome::Failed, "{}", evidence.table());
    let failure = case.failure.as_ref().unwrap();
    assert!(
        failure.errors.iter().any(|e| matches!(e,
            SandboxError::SandboxProtocolInvalid { operation, field, .. }
                if operation == "instance_identity" && field == "session_id")),
        "{failure:?}"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_transport_serves_the_suite_and_removes_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sock");
    let mut server = serve(&["--socket", path.to_str().unwrap()]);
    server.kill_on_drop(true);
    let mut child = server.spawn().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "socket never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let client = WireClient::connect_unix(&path, WireOptions::default())
        .await
        .unwrap();
    let target = Arc::new(WireTarget::new(client.clone()).await.unwrap());
    let options = SuiteOptions {
        cases: vec!["stage-seal-execute".into(), "durable-round-trip".into()],
        ..SuiteOptions::default()
    };
    let evidence = run_suite(target, &options, &quiet).await.unwrap();
    assert_eq!(evidence.summary.passed, 2, "{}", evidence.table());
    client.close().await;
    // SIGTERM: the server exits 143 and removes its socket.
    let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(!path.exists());
}

#[test]
fn serving_on_stdio_exits_zero_when_the_runner_closes_and_writes_nothing_else() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox", "serve"])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn an_unknown_fault_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox", "serve", "--inject", "no-such-fault"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-fault"));
}

/// A socket path that exists already is refused, named in the one error
/// line, and left where it was.
#[test]
fn a_socket_path_that_exists_is_named_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("taken.sock");
    std::fs::write(&path, b"not a socket").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox", "serve", "--socket"])
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("serve: --socket {}: ", path.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
}
