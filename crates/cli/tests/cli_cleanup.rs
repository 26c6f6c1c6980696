//! `checkfu sandbox cleanup` flags and the memory oracle (Docker sweeps are
//! exercised in `cli_run_docker.rs`, where a durable run leaves a snapshot
//! to sweep).

mod common;

use common::*;

#[test]
fn memory_cleanup_has_nothing_to_sweep() {
    for extra in [&[][..], &["--dry-run"][..], &["--older-than", "30m"][..]] {
        let o = output(checkfu().args(["sandbox", "cleanup"]).args(extra));
        assert_eq!(code(&o), 0, "{}", describe(&o));
        assert_eq!(stdout(&o), "");
        assert!(
            stderr(&o).contains("0 instance(s) and 0 snapshot(s)"),
            "{}",
            describe(&o)
        );
    }
}

#[test]
fn a_malformed_duration_is_a_usage_error() {
    let o = output(checkfu().args(["sandbox", "cleanup", "--older-than", "1w"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--older-than"), "{}", describe(&o));
}

#[test]
fn docker_cleanup_dry_run_on_an_empty_scope() {
    let Some(env) = docker("docker_cleanup_empty") else {
        return;
    };
    let o = output(
        env.checkfu()
            .args(["sandbox", "cleanup", "--provider", "docker", "--dry-run"]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "");
    env.finish();
}

/// Ids or names of the daemon's `kind` objects (`ps -a`, `images`,
/// `network ls`) whose scope label starts with `prefix`.
fn scoped(kind: &[&str], prefix: &str) -> Vec<String> {
    let mut args: Vec<&str> = kind.to_vec();
    args.extend(["--format", "{{.Label \"checkfu.sandbox.scope\"}} {{.ID}}"]);
    args.extend(["--filter", "label=checkfu.sandbox.scope"]);
    let o = output(std::process::Command::new("docker").args(&args));
    assert_eq!(code(&o), 0, "docker {args:?}: {}", describe(&o));
    stdout(&o)
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn docker_cleanup_sweeps_the_scope_a_killed_conformance_run_left() {
    let Some(env) = docker("docker_cleanup_conf") else {
        return;
    };
    let mut child = env
        .checkfu()
        .args(["sandbox", "test", "--provider", "docker"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("checkfu spawns");
    let prefix = format!("conf-{}-", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while scoped(&["ps", "-a"], &prefix).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no container of {prefix}* appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let left = scoped(&["ps", "-a"], &prefix);
    let scope = left[0].split(' ').next().unwrap().to_owned();
    let state_dirs = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&format!("checkfu-{scope}-")))
            })
            .count()
    };
    let o = output(env.checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "docker",
        "--scope",
        &scope,
        "--older-than",
        "0s",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stderr(&o).contains(&format!("removed conformance scope {scope}")),
        "{}",
        describe(&o)
    );
    assert_eq!(scoped(&["ps", "-a"], &prefix), Vec::<String>::new());
    assert_eq!(scoped(&["images"], &prefix), Vec::<String>::new());
    assert_eq!(scoped(&["network", "ls"], &prefix), Vec::<String>::new());
    assert_eq!(state_dirs(), 0, "the target's state directory is left");
    env.finish();
}

/// `checkfu sandbox test --case allowlist-egress` SIGKILLed while its
/// allowlist instance runs (rules loaded in the instance's namespace):
/// `sandbox cleanup` of the scope then leaves no container, image, network
/// or state directory, the instance's namespace (where its rules lived)
/// has no process left, and no `nsenter` into it is still running.
#[test]
fn docker_cleanup_sweeps_a_killed_allowlist_egress_case() {
    let Some(env) = docker("docker_cleanup_allowlist") else {
        return;
    };
    let mut child = env
        .checkfu()
        .args([
            "sandbox",
            "test",
            "--provider",
            "docker",
            "--case",
            "allowlist-egress",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("checkfu spawns");
    let scope = format!("conf-{}-0", child.id());
    let prefix = format!("{scope} ");
    // The allowlist instance: a container of the scope whose kind is
    // `instance`, running.
    let instance = || -> Option<(String, String)> {
        let o = output(std::process::Command::new("docker").args([
            "ps",
            "--filter",
            &format!("label=checkfu.sandbox.scope={scope}"),
            "--filter",
            "label=checkfu.sandbox.kind=instance",
            "--format",
            "{{.ID}}",
        ]));
        let id = stdout(&o).lines().next()?.to_owned();
        let o = output(std::process::Command::new("docker").args([
            "inspect",
            "-f",
            "{{.State.Pid}}",
            &id,
        ]));
        let pid = stdout(&o).trim().to_owned();
        (pid != "0" && !pid.is_empty()).then_some((id, pid))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let (_, pid) = loop {
        if let Some(found) = instance() {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no allowlist instance of {scope} appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let netns = std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("netns");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let o = output(env.checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "docker",
        "--scope",
        &scope,
        "--older-than",
        "0s",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(scoped(&["ps", "-a"], &prefix), Vec::<String>::new());
    assert_eq!(scoped(&["images"], &prefix), Vec::<String>::new());
    assert_eq!(scoped(&["network", "ls"], &prefix), Vec::<String>::new());
    let o = output(std::process::Command::new("docker").args([
        "network",
        "inspect",
        &format!("checkfu-{scope}"),
    ]));
    assert_ne!(code(&o), 0, "network checkfu-{scope} left");
    let procs: Vec<std::path::PathBuf> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    let in_netns: Vec<_> = procs
        .iter()
        .filter(|p| std::fs::read_link(p.join("ns/net")).is_ok_and(|l| l == netns))
        .collect();
    assert!(
        in_netns.is_empty(),
        "processes left in {netns:?}: {in_netns:?}"
    );
    let nsenters: Vec<String> = procs
        .iter()
        .filter_map(|p| std::fs::read(p.join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("nsenter") && c.contains(&format!("--target={pid}")))
        .collect();
    assert!(nsenters.is_empty(), "{nsenters:?}");
    let state_dirs = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&format!("checkfu-{scope}-")))
        })
        .count();
    assert_eq!(state_dirs, 0, "the target's state directory is left");
    env.finish();
}
