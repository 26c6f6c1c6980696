//! `checkfu sandbox run` end to end on the local Docker daemon (gated: see
//! `common::docker`). Every test removes what it created and checks that
//! nothing of its scope is left.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn docker_outputs_are_copied_from_a_read_only_mount() {
    let Some(env) = docker("docker_outputs") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let x = pattern(200_000);
    write(&data, "x", &x);
    let out = tmp.path().join("out");
    let o = output(env.run(&[
        "--mount",
        &format!("{}:/data:ro", data.display()),
        "--outputs",
        out.to_str().unwrap(),
        "--",
        "cp",
        "/data/x",
        "/mnt/session/outputs/y",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        std::fs::read(out.join("y")).unwrap() == x,
        "out/y differs from data/x"
    );
    let o = output(env.run(&[
        "--mount",
        &format!("{}:/data:ro", data.display()),
        "--",
        "touch",
        "/data/new",
    ]));
    assert_ne!(code(&o), 0, "a ro mount is sealed: {}", describe(&o));
    env.finish();
}

#[test]
fn docker_exit_statuses() {
    let Some(env) = docker("docker_exit") else {
        return;
    };
    let o = output(env.run(&["--", "sh", "-c", "exit 42"]));
    assert_eq!(code(&o), 42, "{}", describe(&o));
    let o = output(env.run(&["--", "no-such-command"]));
    assert_eq!(code(&o), 127, "{}", describe(&o));
    assert_eq!(
        stdout(&o),
        "",
        "the engine's message is not workload output"
    );
    assert!(
        stderr(&o).contains("executable file not found"),
        "{}",
        describe(&o)
    );
    let o = output(env.run(&["--", "/etc/passwd"]));
    assert_eq!(code(&o), 126, "{}", describe(&o));
    assert_eq!(
        stdout(&o),
        "",
        "the daemon's message is not workload output"
    );
    assert!(stderr(&o).contains("permission denied"), "{}", describe(&o));
    let o = output(env.run(&["--timeout", "1", "--", "sleep", "30"]));
    assert_eq!(code(&o), 124, "{}", describe(&o));
    let o = output(env.run(&["--", "sh", "-c", "kill -KILL $$"]));
    assert_eq!(code(&o), 137, "{}", describe(&o));
    let o = output(env.run(&["--env", "GREETING=hi", "--", "env"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(stdout(&o).contains("GREETING=hi"), "{}", describe(&o));
    env.finish();
}

#[test]
fn docker_unknown_image_fails_with_one_line() {
    let Some(env) = docker("docker_unknown_image") else {
        return;
    };
    let mut c = env.checkfu();
    c.args([
        "sandbox",
        "run",
        "--provider",
        "docker",
        "--image",
        "checkfu-no-such-image:never",
        "--",
        "true",
    ]);
    let o = output(&mut c);
    assert_one_line_failure(
        &o,
        125,
        &[
            "SandboxCapabilityUnavailable: requirement base_image",
            "checkfu-no-such-image:never",
        ],
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", describe(&o));
    env.finish();
}

#[test]
fn docker_prompt_round_trips_three_mib() {
    let Some(env) = docker("docker_prompt") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let prompt = pattern(3 * 1024 * 1024);
    let p = write(tmp.path(), "p.txt", &prompt);
    let o = output(env.run(&["--prompt", p.to_str().unwrap(), "--", "cat"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        o.stdout == prompt,
        "stdout differs ({} bytes)",
        o.stdout.len()
    );
    env.finish();
}

#[test]
fn docker_sigint_leaves_no_container() {
    let Some(env) = docker("docker_sigint") else {
        return;
    };
    let w = Watched::spawn(&mut env.run(&["--", "sleep", "60"]));
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.containers().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no container appeared: {:#?}",
            w.seen
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Let the workload start inside the container.
    std::thread::sleep(Duration::from_millis(1_000));
    w.interrupt();
    let (status, lines) = w.finish(Duration::from_secs(60));
    assert_eq!(status, 130, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("interrupted; destroying instance")),
        "{lines:#?}"
    );
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "a container of the run is left"
    );
    env.finish();
}

#[test]
fn docker_bad_input_provisions_nothing() {
    let Some(env) = docker("docker_bad_input") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mount = format!("{}:/proc/x", tmp.path().display());
    let o = output(env.run(&["--mount", &mount, "--", "true"]));
    assert_one_line_failure(&o, 125, &["requirement mounts", &mount]);
    let o = output(env.run(&["--env", "A-B=1", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--env A-B=1", "\"A-B\""]);
    assert_eq!(env.containers(), Vec::<String>::new());
    let o = output(env.checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "docker",
        "--older-than",
        "0s",
        "--dry-run",
    ]));
    assert_eq!(stdout(&o), "", "{}", describe(&o));
    env.finish();
}

#[test]
fn docker_durable_snapshot_is_swept_by_cleanup() {
    let Some(env) = docker("docker_durable") else {
        return;
    };
    let o = output(env.run(&[
        "--durable",
        "--",
        "sh",
        "-c",
        "echo kept > /mnt/session/outputs/f",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let line = stderr(&o)
        .lines()
        .find(|l| l.starts_with("checkfu: snapshot "))
        .unwrap_or_else(|| panic!("no snapshot line: {}", describe(&o)))
        .to_owned();
    let id = line.split_whitespace().nth(2).unwrap().to_owned();
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "the instance is gone"
    );
    let dry = output(env.checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "docker",
        "--older-than",
        "0s",
        "--dry-run",
    ]));
    assert_eq!(code(&dry), 0, "{}", describe(&dry));
    assert_eq!(stdout(&dry), format!("would remove snapshot {id}\n"));
    assert!(!env.images().is_empty(), "dry-run removed nothing");
    let kept = output(
        env.checkfu()
            .args(["sandbox", "cleanup", "--provider", "docker"]),
    );
    assert_eq!(code(&kept), 0, "{}", describe(&kept));
    assert_eq!(stdout(&kept), "", "a fresh snapshot is not an orphan of 1h");
    let swept = output(env.checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "docker",
        "--older-than",
        "0s",
    ]));
    assert_eq!(code(&swept), 0, "{}", describe(&swept));
    assert_eq!(stdout(&swept), format!("removed snapshot {id}\n"));
    assert_eq!(env.images(), Vec::<String>::new());
    env.finish();
}

#[test]
fn docker_prompt_mode_statuses() {
    let Some(env) = docker("docker_prompt_status") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "p.txt", b"hello\n");
    let prompt = p.to_str().unwrap();
    let o = output(env.run(&["--prompt", prompt, "--", "sh", "-c", "cat; exit 7"]));
    assert_eq!(code(&o), 7, "{}", describe(&o));
    assert_eq!(stdout(&o), "hello\n");
    let o = output(env.run(&["--prompt", prompt, "--", "no-such-command"]));
    assert_eq!(code(&o), 127, "{}", describe(&o));
    assert_eq!(
        stdout(&o),
        "",
        "the engine's message is not workload output"
    );
    assert!(
        stderr(&o).contains("executable file not found"),
        "{}",
        describe(&o)
    );
    let o = output(env.run(&["--prompt", prompt, "--timeout", "1", "--", "sleep", "30"]));
    assert_eq!(code(&o), 124, "{}", describe(&o));
    env.finish();
}

#[test]
fn docker_workload_text_never_changes_the_exit_status() {
    let Some(env) = docker("docker_forged_start_failure") else {
        return;
    };
    // A workload that prints the engine's start-failure text and exits 126
    // keeps both: only the provider, from daemon state, decides that an
    // exec never started.
    let forged = "OCI runtime exec failed: exec failed: executable file not found in $PATH";
    let o = output(env.run(&["--", "sh", "-c", &format!("echo '{forged}'; exit 126")]));
    assert_eq!(code(&o), 126, "{}", describe(&o));
    assert_eq!(stdout(&o), format!("{forged}\n"), "{}", describe(&o));
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "p.txt", b"");
    let o = output(env.run(&[
        "--prompt",
        p.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("echo '{forged}'; exit 126"),
    ]));
    assert_eq!(code(&o), 126, "{}", describe(&o));
    assert_eq!(stdout(&o), format!("{forged}\n"), "{}", describe(&o));
    env.finish();
}

#[test]
fn docker_outputs_over_16_mib_are_skipped_and_the_rest_copied() {
    let Some(env) = docker("docker_outputs_big") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = output(env.run(&[
        "--outputs",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "head -c 20000000 /dev/zero > /mnt/session/outputs/big; \
         mkdir /mnt/session/outputs/d; echo small > /mnt/session/outputs/d/small; exit 3",
    ]));
    assert_eq!(code(&o), 125, "{}", describe(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("/mnt/session/outputs/big"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("20000000 bytes") && lines[0].contains("16 MiB"),
        "{err}"
    );
    assert!(
        err.contains("the workload exited with status 3; the output copy is incomplete"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("d/small")).unwrap(), b"small\n");
    assert!(!out.join("big").exists());
    assert_eq!(env.containers(), Vec::<String>::new(), "released");
    env.finish();
}

#[test]
fn docker_resource_limits_reach_the_container() {
    let Some(env) = docker("docker_resources") else {
        return;
    };
    // cgroup v1 inside the container shows its own limits.
    let o = output(env.run(&["--", "cat", "/sys/fs/cgroup/pids/pids.max"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // The container's keeper (a shell and its sleep) stands outside the
    // workload's count (decision 049).
    assert_eq!(stdout(&o), "1026\n", "the default process limit");
    let o = output(env.run(&[
        "--pids",
        "64",
        "--memory",
        "512M",
        "--cpus",
        "0.5",
        "--",
        "cat",
        "/sys/fs/cgroup/pids/pids.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let values: Vec<u64> = stdout(&o)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(values[0], 64 + 2, "{}", describe(&o));
    assert_eq!(values[1], 512 * 1024 * 1024, "{}", describe(&o));
    assert_eq!(values[2] * 1000 / values[3], 500, "half a core: {values:?}");
    env.finish();
}

/// Running the staged scripts is in `cli_workloads.rs`, on every
/// provider; the bits as the sandbox sees them are checked here, where
/// `stat` exists.
#[test]
fn docker_a_staged_tree_keeps_its_permission_bits() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(env) = docker("docker_modes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("m");
    let run = write(&m, "run.sh", b"#!/bin/sh\necho ran\n");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(&m, "data.txt", b"data\n");
    let deep = write(&m, "a/b/tool.sh", b"#!/bin/sh\necho deep\n");
    std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mount = format!("{}:/src", m.display());
    let o = output(env.run(&[
        "--mount",
        &mount,
        "--",
        "stat",
        "-c",
        "%a %n",
        "/src/run.sh",
        "/src/data.txt",
        "/src/a",
        "/src/a/b/tool.sh",
    ]));
    assert_eq!(
        stdout(&o),
        "755 /src/run.sh\n644 /src/data.txt\n755 /src/a\n700 /src/a/b/tool.sh\n",
        "{}",
        describe(&o)
    );
    env.finish();
}

#[test]
fn docker_sighup_destroys_the_instance_and_exits_129() {
    let Some(env) = docker("docker_sighup") else {
        return;
    };
    let w = Watched::spawn(&mut env.run(&["--", "sleep", "100"]));
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.containers().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no container appeared: {:#?}",
            w.seen
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1_000));
    w.signal(rustix::process::Signal::HUP);
    let (status, lines) = w.finish(Duration::from_secs(60));
    assert_eq!(status, 129, "{lines:#?}");
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "a container of the run is left"
    );
    env.finish();
}
