//! `checkfu sandbox test` on the memory oracle and on Docker (gated).

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn memory_suite_passes_and_an_injected_fault_fails_it() {
    let o = output(checkfu().args(["sandbox", "test"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains("9 passed, 0 failed"),
        "{}",
        describe(&o)
    );
    let o = output(checkfu().args(["sandbox", "test", "--inject", "clone-reuses-source-id"]));
    assert_eq!(code(&o), 1, "{}", describe(&o));
    let o = output(checkfu().args(["sandbox", "test", "--inject", "no-such-fault"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    // A zero case deadline would time every case out: a usage error.
    let o = output(checkfu().args(["sandbox", "test", "--case-timeout", "0"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--case-timeout"), "{}", describe(&o));
}

#[test]
fn docker_suite_passes_the_chosen_cases_allowlist_included() {
    let Some(env) = docker("docker_suite") else {
        return;
    };
    let o = output(env.checkfu().args([
        "sandbox",
        "test",
        "--provider",
        "docker",
        "--case",
        "stage-seal-execute",
        "--case",
        "allowlist-egress",
        "--case",
        "zdr-release",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains("3 passed, 0 failed, 0 skipped"),
        "{}",
        describe(&o)
    );
    assert!(
        !stderr(&o).contains("closing the docker target"),
        "{}",
        describe(&o)
    );
    env.finish();
}

/// Starts `sandbox test --provider docker --case <case>`, waits until a
/// container of the target's scope (`conf-<child pid>-0`) exists and the
/// case is under way, sends `signal`, and checks that checkfu exits
/// `want` leaving no container, image, network or state directory of
/// that scope.
fn signal_mid_case_leaves_nothing(
    name: &str,
    case: &str,
    signal: rustix::process::Signal,
    want: i32,
) {
    let Some(env) = docker(name) else {
        return;
    };
    // The target's temporary state directory is created under TMPDIR.
    let tmp = tempfile::tempdir().unwrap();
    let mut c = env.checkfu();
    c.env("TMPDIR", tmp.path())
        .args(["sandbox", "test", "--provider", "docker", "--case", case]);
    let w = Watched::spawn(&mut c);
    let scope = format!("conf-{}-0", w.child.id());
    let network = format!("checkfu-{scope}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !scope_objects(&scope, &network)
        .iter()
        .any(|o| o.starts_with("container "))
    {
        assert!(
            Instant::now() < deadline,
            "no container of {scope} appeared: {:#?}",
            w.seen
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Mid-case: instances, clones, snapshots or listeners exist now.
    std::thread::sleep(Duration::from_millis(700));
    w.signal(signal);
    let (status, lines) = w.finish(Duration::from_secs(90));
    assert_eq!(status, want, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("interrupted; stopping the suite and closing the docker target")),
        "{lines:#?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("closing the docker target:")),
        "{lines:#?}"
    );
    assert_eq!(
        scope_objects(&scope, &network),
        Vec::<String>::new(),
        "objects of {scope} left: {lines:#?}"
    );
    let dirs: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(dirs.is_empty(), "state directory left: {dirs:?}");
    env.finish();
}

#[test]
fn docker_sigint_mid_checkpoint_clone_leaves_nothing() {
    signal_mid_case_leaves_nothing(
        "docker_test_sigint_clone",
        "checkpoint-clone",
        rustix::process::Signal::INT,
        130,
    );
}

#[test]
fn docker_sigterm_mid_allowlist_egress_leaves_nothing() {
    signal_mid_case_leaves_nothing(
        "docker_test_sigterm_allowlist",
        "allowlist-egress",
        rustix::process::Signal::TERM,
        143,
    );
}

#[test]
fn docker_sigterm_mid_none_egress_leaves_nothing() {
    signal_mid_case_leaves_nothing(
        "docker_test_sigterm_egress",
        "none-egress",
        rustix::process::Signal::TERM,
        143,
    );
}

#[test]
fn an_unwritable_evidence_path_fails_before_any_case_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-dir/evidence.json");
    let missing = missing.to_str().unwrap();
    let good = tmp.path().join("ok.json");
    let keys = tmp.path().join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let key = keys.join("checkfu-signing.key.pem");
    let key = key.to_str().unwrap();
    for args in [
        vec!["--json", missing],
        vec!["--junit", missing],
        vec!["--json", good.to_str().unwrap(), "--junit", missing],
        vec!["--sign", key, "--evidence", missing],
        vec![
            "--json",
            good.to_str().unwrap(),
            "--sign",
            key,
            "--evidence",
            missing,
        ],
    ] {
        let o = output(checkfu().args(["sandbox", "test"]).args(&args));
        assert_eq!(code(&o), 125, "{args:?}: {}", describe(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{args:?}: {}", describe(&o));
        assert!(err.contains(missing), "{args:?}: {}", describe(&o));
        assert!(!err.contains("[1/"), "a case ran: {}", describe(&o));
        assert!(!good.exists(), "{args:?}: a created file is removed again");
    }
    let help = output(checkfu().args(["sandbox", "test", "--help"]));
    let text = stdout(&help)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("125 when the suite could not start or evidence could not be written"),
        "{text}"
    );
}

#[test]
fn evidence_files_are_written_when_the_suite_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("e.json");
    let junit = tmp.path().join("e.xml");
    let o = output(checkfu().args([
        "sandbox",
        "test",
        "--case",
        "stage-seal-execute",
        "--json",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["summary"]["passed"], 1, "{doc}");
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("<testsuite"));
}

#[test]
fn an_unreachable_daemon_is_reported_with_its_cause() {
    let o = output(
        checkfu()
            .env(
                "DOCKER_HOST",
                "unix:///nonexistent/checkfu-test/docker.sock",
            )
            .args(["sandbox", "test", "--provider", "docker"]),
    );
    assert_one_line_failure(
        &o,
        125,
        &[
            "daemon call failed: ",
            "/nonexistent/checkfu-test/docker.sock",
        ],
    );
}

#[test]
fn a_remote_docker_host_is_refused_not_replaced_by_the_local_socket() {
    // Refused before any connection is attempted: nothing is dialled.
    let o = output(checkfu().env("DOCKER_HOST", "tcp://127.0.0.1:1").args([
        "sandbox",
        "test",
        "--provider",
        "docker",
    ]));
    assert_one_line_failure(
        &o,
        125,
        &[
            "DOCKER_HOST=\"tcp://127.0.0.1:1\"",
            "not a local unix:// socket",
        ],
    );
}
