//! `--provider-cmd` and `--provider-socket`: the suite, runs and usage
//! errors against a provider served over the wire by `checkfu sandbox
//! serve` as a child process.

mod common;

use std::time::{Duration, Instant};

use common::*;

const CHECKFU: &str = env!("CARGO_BIN_EXE_checkfu");

/// `--provider-cmd '<checkfu> sandbox serve <serve_args>'`.
fn served(serve_args: &str) -> String {
    format!("{CHECKFU} sandbox serve {serve_args}")
}

/// The children of `pid` (every thread's), from procfs.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

fn gone(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state is Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn suite_over_provider_cmd_reports_nine_passed_and_names_the_command() {
    let line = served("");
    let o = output(checkfu().args(["sandbox", "test", "--provider-cmd", &line, "--json", "-"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("evidence JSON");
    assert_eq!(evidence["summary"]["passed"], 9, "{}", describe(&o));
    assert_eq!(evidence["summary"]["failed"], 0, "{}", describe(&o));
    let command = &evidence["provider_command"];
    assert_eq!(
        command["argv"],
        serde_json::json!([CHECKFU, "sandbox", "serve"])
    );
    assert_eq!(command["executable"], CHECKFU);
    let want = {
        use sha2::Digest;
        let bytes = std::fs::read(CHECKFU).unwrap();
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)))
    };
    assert_eq!(command["executable_sha256"], want.as_str());
    let digest = evidence["envelope_sha256"].as_str().unwrap();
    assert!(
        digest.len() == 71
            && digest.starts_with("sha256:")
            && digest[7..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{digest}"
    );
}

#[test]
fn provider_cmd_is_looked_up_in_path() {
    let dir = std::path::Path::new(CHECKFU).parent().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = output(checkfu().env("PATH", &path).args([
        "sandbox",
        "test",
        "--provider-cmd",
        "checkfu sandbox serve",
        "--case",
        "zdr-release",
        "--json",
        "-",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(evidence["provider_command"]["executable"], CHECKFU);
    assert_eq!(
        evidence["provider_command"]["argv"],
        serde_json::json!(["checkfu", "sandbox", "serve"])
    );
}

#[test]
fn every_named_fault_on_the_served_side_exits_one() {
    let o = output(checkfu().args(["sandbox", "faults"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // `NAME  rule  [caught by CASE]`: each fault is run against the case
    // that catches it, so the loop stays fast.
    let faults: Vec<(String, String)> = stdout(&o)
        .lines()
        .map(|l| {
            let name = l.split_whitespace().next().unwrap().to_owned();
            let case = l
                .rsplit("[caught by ")
                .next()
                .and_then(|c| c.strip_suffix(']'))
                .unwrap_or_else(|| panic!("no case in {l:?}"))
                .to_owned();
            (name, case)
        })
        .collect();
    assert!(faults.len() > 10, "{faults:?}");
    // Every fault is caught through the wire, envelope-drifts included:
    // the wire client asks `sandbox/capabilities` again after each member
    // call, so the runtime's re-check sees the served side's drift.
    assert!(
        faults.iter().any(|(name, _)| name == "envelope-drifts"),
        "{faults:?}"
    );
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = faults
            .chunks(faults.len().div_ceil(4))
            .map(|chunk| {
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for (fault, case) in chunk {
                        let line = served(&format!("--inject {fault}"));
                        let o = output(checkfu().args([
                            "sandbox",
                            "test",
                            "--provider-cmd",
                            &line,
                            "--case",
                            case,
                        ]));
                        if code(&o) != 1 {
                            bad.push(format!("{fault} ({case}): {}", describe(&o)));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn run_over_provider_cmd_echoes_hi() {
    let line = served("");
    let o = output(checkfu().args([
        "sandbox",
        "run",
        "--provider-cmd",
        &line,
        "--image",
        "demo:1",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "hi\n", "{}", describe(&o));
}

#[test]
fn capabilities_and_cleanup_over_provider_cmd() {
    let line = served("");
    let o = output(checkfu().args(["sandbox", "capabilities", "--provider-cmd", &line, "--json"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["provider"], "memory");
    let o = output(checkfu().args(["sandbox", "cleanup", "--provider-cmd", &line]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
}

#[test]
fn sigterm_during_a_served_run_reaps_the_provider_process() {
    let line = served("");
    let mut c = checkfu();
    c.env("RUST_LOG", "checkfu=info").args([
        "sandbox",
        "run",
        "--provider-cmd",
        &line,
        "--image",
        "demo:1",
        "--",
        "sleep",
        "60",
    ]);
    let mut w = Watched::spawn(&mut c);
    w.wait_for_line("workload started", Duration::from_secs(30));
    let served_pids = children(w.child.id());
    assert_eq!(served_pids.len(), 1, "{served_pids:?}");
    w.signal(rustix::process::Signal::TERM);
    let (status, lines) = w.finish(Duration::from_secs(30));
    assert_eq!(status, 143, "{lines:#?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(served_pids[0]) {
        assert!(
            Instant::now() < deadline,
            "the served process {} outlived checkfu",
            served_pids[0]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn provider_flags_combined_wrongly_are_usage_errors() {
    for (args, needle) in [
        (
            vec!["--provider", "docker", "--provider-cmd", "x"],
            "--provider and --provider-cmd each name the provider",
        ),
        (
            vec!["--provider-cmd", "x", "--provider-socket", "/nonexistent"],
            "--provider-cmd and --provider-socket each name the provider",
        ),
        (
            vec!["--provider-cmd", "'unbalanced"],
            "expected a command line with balanced quotes",
        ),
        (
            vec!["--provider-cmd", "  "],
            "expected a command and its arguments",
        ),
    ] {
        for sub in ["test", "run", "capabilities", "cleanup"] {
            let mut c = checkfu();
            c.args(["sandbox", sub]).args(&args);
            if sub == "run" {
                c.args(["--image", "demo:1", "--", "true"]);
            }
            let o = output(c);
            assert_one_line_failure(&o, 2, &[needle]);
        }
    }
    let line = served("");
    let o = output(checkfu().args([
        "sandbox",
        "test",
        "--provider-cmd",
        &line,
        "--inject",
        "identity-session-id",
    ]));
    assert_one_line_failure(
        &o,
        2,
        &["--inject applies to the embedded memory oracle only"],
    );
}

#[test]
fn a_missing_executable_or_socket_is_named() {
    let o = output(checkfu().args([
        "sandbox",
        "capabilities",
        "--provider-cmd",
        "checkfu-no-such-provider --flag",
    ]));
    assert_one_line_failure(&o, 125, &["\"checkfu-no-such-provider\" in PATH"]);
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("none.sock");
    let o = output(checkfu().args([
        "sandbox",
        "capabilities",
        "--provider-socket",
        sock.to_str().unwrap(),
    ]));
    assert_one_line_failure(&o, 125, &["--provider-socket", "could not connect"]);
}

#[test]
fn suite_over_provider_socket_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("p.sock");
    let mut server = std::process::Command::new(CHECKFU)
        .args(["sandbox", "serve", "--socket", sock.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "no socket at {}", sock.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = output(checkfu().args([
        "sandbox",
        "test",
        "--provider-socket",
        sock.to_str().unwrap(),
        "--case",
        "stage-seal-execute",
        "--json",
        "-",
    ]));
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_child(&server),
        rustix::process::Signal::TERM,
    );
    let _ = server.wait();
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(evidence["summary"]["passed"], 1);
    assert!(evidence.get("provider_command").is_none(), "{evidence}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_hooks_is_refused_naming_every_missing_hook() {
    use checkfu_sandbox_wire::conformance::{WireTarget, WireTargetError, CONFORMANCE_HOOKS};
    use checkfu_sandbox_wire::{serve_connection, Served, WireClient, WireOptions};
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let provider = std::sync::Arc::new(checkfu_sandbox_memory::MemoryProvider::with_system_clock());
    let (sr, sw) = tokio::io::split(server_end);
    let server = tokio::spawn(serve_connection(Served::new(provider), sr, sw));
    let (cr, cw) = tokio::io::split(client_end);
    let client = WireClient::over(cr, cw, WireOptions::default())
        .await
        .unwrap();
    let err = WireTarget::new(client.clone()).await.err().unwrap();
    assert_eq!(
        err,
        WireTargetError::HooksMissing {
            missing: CONFORMANCE_HOOKS.to_vec()
        }
    );
    let text = err.to_string();
    for hook in CONFORMANCE_HOOKS {
        assert!(text.contains(hook), "{text}");
    }
    client.close().await;
    server.abort();
}

/// The Docker provider served over the wire passes what it passes in
/// process (9 passed, allowlist-egress included) and leaves nothing of its
/// scope.
#[test]
fn docker_served_over_the_wire_passes_and_leaves_nothing() {
    let Some(env) = docker("docker_over_wire") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let line = served("--provider docker");
    let mut c = env.checkfu();
    c.env("TMPDIR", tmp.path())
        .args(["sandbox", "test", "--provider-cmd", &line]);
    let mut w = Watched::spawn(&mut c);
    // The served side's target scope is `conf-<its pid>-0`.
    let deadline = Instant::now() + Duration::from_secs(60);
    let served_pid = loop {
        if let Some(p) = children(w.child.id()).first() {
            break *p;
        }
        assert!(Instant::now() < deadline, "no served process appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    w.wait_for_line("[9/9]", Duration::from_secs(600));
    let (status, lines) = w.finish(Duration::from_secs(300));
    assert_eq!(status, 0, "{lines:#?}");
    let scope = format!("conf-{served_pid}-0");
    let left = scope_objects(&scope, &format!("checkfu-{scope}"));
    assert!(left.is_empty(), "left of {scope}: {left:#?}");
    assert!(gone(served_pid), "the served process outlived checkfu");
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "state left under TMPDIR"
    );
    env.finish();
    // The summary goes to stdout (discarded by Watched); the per-case
    // lines on stderr carry the outcomes.
    let passed = lines.iter().filter(|l| l.contains(" passed (")).count();
    let skipped = lines.iter().filter(|l| l.contains(" skipped (")).count();
    assert_eq!((passed, skipped), (9, 0), "{lines:#?}");
}

/// Pids of live (non-zombie) processes whose argv is exactly `argv`.
fn processes_running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want) && !gone(*pid)
        })
        .collect()
}

/// A provider command that forks a helper (a shell wrapper's child) leaves
/// nothing behind: closing the connection kills the provider's whole
/// process group, after a passing run and after a broken one alike.
#[test]
fn processes_a_provider_command_forked_are_killed_with_it() {
    let marker = format!(
        "{}.{}",
        7000 + std::process::id() % 1000,
        std::process::id()
    );
    let helper = ["sleep", marker.as_str()];
    // The helper's stdio goes to /dev/null, so a leak shows as a live
    // process rather than as a test that waits for its stderr to close.
    let fork = format!("sleep {marker} </dev/null >/dev/null 2>&1 &");
    let passing = format!("sh -c '{fork} exec {}'", served(""));
    let o = output(checkfu().args([
        "sandbox",
        "test",
        "--case",
        "stage-seal-execute",
        "--provider-cmd",
        &passing,
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let broken = format!("sh -c '{fork} echo garbage; exec cat'");
    let o = output(checkfu().args(["sandbox", "capabilities", "--provider-cmd", &broken]));
    assert_eq!(code(&o), 125, "{}", describe(&o));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_running(&helper).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = processes_running(&helper);
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert_eq!(left, Vec::<u32>::new(), "helpers left");
}

/// A provider command that names a file without an execute bit is
/// refused saying so (its mode), not as if nothing were there; the
/// example the partner guide runs as a command is executable.
#[test]
fn a_provider_file_that_is_not_executable_is_named_by_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("provider.py");
    std::fs::write(&script, "#!/usr/bin/env python3\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = output(
        checkfu()
            .args(["sandbox", "capabilities", "--provider-cmd"])
            .arg(&script),
    );
    assert_one_line_failure(
        &o,
        125,
        &[
            "expected an executable file at",
            "mode 0644, not executable",
        ],
    );
    let o = output(
        checkfu()
            .args(["sandbox", "capabilities", "--provider-cmd"])
            .arg(tmp.path().join("absent.py")),
    );
    assert_one_line_failure(&o, 125, &["actual none"]);
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/python-provider/provider.py");
    let mode = std::fs::metadata(&example).unwrap().permissions().mode();
    assert_ne!(mode & 0o111, 0, "{} mode {mode:o}", example.display());
}
