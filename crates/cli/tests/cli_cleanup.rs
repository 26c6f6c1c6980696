//! `checkfu sandbox cleanup` flags and the memory oracle (Docker sweeps are
//! exercised in `cli_run_docker.rs`, where a durable run leaves a snapshot
//! to sweep), and the sweep of the scope a SIGKILLed `checkfu sandbox test
//! --provider docker` left: every object listed (by the dry run too) and
//! counted.

mod common;

use std::collections::BTreeSet;

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
    if kind == ["images"] {
        // `docker images --format` has no labels: inspect each image.
        let o = output(std::process::Command::new("docker").args([
            "images",
            "-aq",
            "--no-trunc",
            "--filter",
            "label=checkfu.sandbox.scope",
        ]));
        assert_eq!(code(&o), 0, "docker images: {}", describe(&o));
        let ids: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
        if ids.is_empty() {
            return Vec::new();
        }
        let mut args = vec![
            "image",
            "inspect",
            "--format",
            "{{index .Config.Labels \"checkfu.sandbox.scope\"}} {{.ID}}",
        ];
        args.extend(ids.iter().map(String::as_str));
        let o = output(std::process::Command::new("docker").args(&args));
        // An image another test removed meanwhile is no leak of this one.
        return stdout(&o)
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect();
    }
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

/// Every container of `scope`: its 12-hex id, its kind and its instance
/// id label (`""` when none).
fn scope_containers(scope: &str) -> Vec<(String, String, String)> {
    let o = output(std::process::Command::new("docker").args([
        "ps",
        "-a",
        "--filter",
        &format!("label=checkfu.sandbox.scope={scope}"),
        "--format",
        "{{.ID}} {{.Label \"checkfu.sandbox.kind\"}} {{.Label \"checkfu.sandbox.instance_id\"}}",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    stdout(&o)
        .lines()
        .map(|l| {
            let mut w = l.split(' ').map(str::to_owned);
            let id = w.next().unwrap_or_default();
            (
                id,
                w.next().unwrap_or_default(),
                w.next().unwrap_or_default(),
            )
        })
        .collect()
}

/// The counts a cleanup printed are the number of objects it listed.
fn assert_counts_match(o: &std::process::Output, verb: &str, listed: &BTreeSet<String>) {
    let of = |kind: &str| listed.iter().filter(|l| l.starts_with(kind)).count();
    assert_eq!(
        swept_count(o, verb, "instance"),
        of("instance "),
        "{}",
        describe(o)
    );
    assert_eq!(
        swept_count(o, verb, "snapshot"),
        of("snapshot "),
        "{}",
        describe(o)
    );
    let support = listed.len() - of("instance ") - of("snapshot ");
    assert_eq!(
        swept_count(o, verb, "support object"),
        support,
        "{}",
        describe(o)
    );
}

/// Every container is listed: by its id, or (an instance's) by its
/// instance id; warm-pool containers an instance claimed are that
/// instance's, so at most one per listed instance goes unnamed.
fn assert_accounts_for(containers: &[(String, String, String)], listed: &BTreeSet<String>) {
    let named = |id: &str| {
        listed
            .iter()
            .any(|l| l.starts_with(&format!("container {id} ")))
    };
    let instances = listed.iter().filter(|l| l.starts_with("instance ")).count();
    let mut claimed = 0;
    for (id, kind, instance) in containers {
        if named(id) {
            continue;
        }
        match kind.as_str() {
            "instance" => assert!(
                listed.contains(&format!("instance {instance}")),
                "instance container {id} ({instance}) not listed: {listed:?}"
            ),
            "pool" => claimed += 1,
            _ => panic!("container {id} ({kind}) not listed: {listed:?}"),
        }
    }
    assert!(
        claimed <= instances,
        "{claimed} pool containers unnamed: {listed:?}"
    );
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
    // The default --older-than (1h): a conformance scope is swept whole
    // all the same, and what the dry run lists is what is then removed.
    let cleanup = |dry_run: bool| {
        let mut c = env.checkfu();
        c.args([
            "sandbox",
            "cleanup",
            "--provider",
            "docker",
            "--scope",
            &scope,
        ]);
        if dry_run {
            c.arg("--dry-run");
        }
        output(c)
    };
    // Requests the killed run had already sent (a create, a forced
    // remove) still complete in the daemon: take the inventory once it
    // has settled, so that what the dry run must leave is well defined.
    let mut containers = scope_containers(&scope);
    let settle = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let again = scope_containers(&scope);
        if again == containers || std::time::Instant::now() > settle {
            containers = again;
            break;
        }
        containers = again;
    }
    let dry = cleanup(true);
    assert_eq!(code(&dry), 0, "{}", describe(&dry));
    let would = swept_objects(&dry, "would remove");
    assert_counts_match(&dry, "would remove", &would);
    assert_accounts_for(&containers, &would);
    assert_eq!(
        scope_containers(&scope).len(),
        containers.len(),
        "the dry run removed something"
    );
    let o = cleanup(false);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stderr(&o).contains(&format!("removed conformance scope {scope}")),
        "{}",
        describe(&o)
    );
    assert_eq!(swept_objects(&o, "removed"), would, "{}", describe(&o));
    assert_counts_match(&o, "removed", &would);
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
    let containers = scope_containers(&scope);
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
    // The running instance is counted as an instance, beside the support
    // objects.
    let removed = swept_objects(&o, "removed");
    assert!(
        removed.iter().any(|l| l.starts_with("instance ")),
        "{}",
        describe(&o)
    );
    assert_counts_match(&o, "removed", &removed);
    assert_accounts_for(&containers, &removed);
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

#[test]
fn malformed_scopes_and_snapshot_ids_are_usage_errors() {
    for scope in ["", "a b", "UPPER"] {
        for provider in ["docker", "linux"] {
            let o = output(checkfu().args([
                "sandbox",
                "cleanup",
                "--provider",
                provider,
                "--scope",
                scope,
            ]));
            assert_eq!(code(&o), 2, "{scope:?}: {}", describe(&o));
            assert!(
                stderr(&o)
                    .lines()
                    .next()
                    .is_some_and(|l| l.contains("--scope")
                        && l.contains(&format!("{scope:?}"))
                        && l.contains("[a-z0-9._-]")),
                "{}",
                describe(&o)
            );
        }
    }
    for id in ["", " x"] {
        let o = output(checkfu().args([
            "sandbox",
            "run",
            "--provider",
            "docker",
            "--resume",
            id,
            "--",
            "true",
        ]));
        assert_eq!(code(&o), 2, "{id:?}: {}", describe(&o));
        assert!(
            stderr(&o)
                .lines()
                .next()
                .is_some_and(|l| l.contains("--resume") && l.contains(&format!("{id:?}"))),
            "{}",
            describe(&o)
        );
    }
}

/// A conformance scope whose process is alive (this test's own pid) is
/// skipped with a line naming it, for Linux as for Docker, before any
/// provider is opened: exit 1 when it was all that was asked, 0 beside
/// another scope.
#[test]
fn a_live_runs_scope_is_skipped_on_every_provider() {
    let state = tempfile::tempdir().unwrap();
    let scope = format!("conf-{}-0", std::process::id());
    for provider in ["docker", "linux"] {
        for dry in [false, true] {
            let mut c = checkfu();
            c.env("CHECKFU_STATE_DIR", state.path()).args([
                "sandbox",
                "cleanup",
                "--provider",
                provider,
                "--scope",
                &scope,
            ]);
            if dry {
                c.arg("--dry-run");
            }
            let o = output(c);
            assert_eq!(code(&o), 1, "{provider}: {}", describe(&o));
            assert_eq!(stdout(&o), "", "{provider}");
            assert!(
                stderr(&o).contains(&format!(
                    "skipped conformance scope {scope}: its `checkfu sandbox test` (pid {})",
                    std::process::id()
                )),
                "{provider}: {}",
                describe(&o)
            );
        }
    }
}

/// `checkfu sandbox cleanup --scope conf-<pid>-0` (and its dry run, and
/// `--all-scopes --dry-run`) while that `sandbox test` runs: nothing of
/// the scope is listed or removed; once the run is killed the same
/// command sweeps it.
#[test]
fn docker_cleanup_leaves_a_live_conformance_run_alone() {
    let Some(env) = docker("docker_cleanup_live") else {
        return;
    };
    let mut child = env
        .checkfu()
        .args(["sandbox", "test", "--provider", "docker"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("checkfu spawns");
    let scope = format!("conf-{}-0", child.id());
    let prefix = format!("{scope} ");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while scoped(&["ps", "-a"], &prefix).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no container of {scope} appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let cleanup = |extra: &[&str]| {
        output(
            env.checkfu()
                .args(["sandbox", "cleanup", "--provider", "docker"])
                .args(extra),
        )
    };
    let skipped = format!("skipped conformance scope {scope}");
    for extra in [
        &["--scope", &scope][..],
        &["--scope", &scope, "--dry-run"][..],
    ] {
        let o = cleanup(extra);
        assert_eq!(code(&o), 1, "{extra:?}: {}", describe(&o));
        assert_eq!(stdout(&o), "", "{extra:?}");
        assert!(stderr(&o).contains(&skipped), "{}", describe(&o));
    }
    let o = cleanup(&["--all-scopes", "--dry-run"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(stderr(&o).contains(&skipped), "{}", describe(&o));
    assert!(
        !stderr(&o).contains(&format!("in conformance scope {scope},"))
            && !stderr(&o).contains(&format!("of conformance scope {scope}")),
        "{}",
        describe(&o)
    );
    let still_running = child.try_wait().expect("try_wait").is_none();
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(still_running, "the run ended during the test");
    let o = cleanup(&["--scope", &scope, "--older-than", "0s"]);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(!stderr(&o).contains(&skipped), "{}", describe(&o));
    assert_eq!(scoped(&["ps", "-a"], &prefix), Vec::<String>::new());
    assert_eq!(scoped(&["images"], &prefix), Vec::<String>::new());
    assert_eq!(scoped(&["network", "ls"], &prefix), Vec::<String>::new());
    env.finish();
}
