//! `checkfu sandbox run --durable`, then `run --resume` reading back what
//! the first run wrote; `checkfu sandbox snapshots`; an expired snapshot
//! refused on resume and swept by `cleanup`; each bad input (unknown id,
//! another scope, another provider, the memory oracle) refused with the
//! field and both values, exit 125.
//!
//! Docker tests run when the daemon answers (see `common`); Linux tests
//! need root and cgroups (a `SKIP` line otherwise, a failure under
//! `CI=true`). Every test removes what it created.

// Host checks by path: the checkpoint directory of a test's state dir.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// The snapshot id of the `checkfu: snapshot ID (expires ...)` line.
fn snapshot_id(o: &std::process::Output) -> String {
    stderr(o)
        .lines()
        .find_map(|l| l.strip_prefix("checkfu: snapshot "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no snapshot line: {}", describe(o)))
        .to_owned()
}

/// Checkpoint files under `state`.
fn checkpoint_files(state: &Path) -> usize {
    std::fs::read_dir(state.join("checkpoints"))
        .map(|d| d.filter_map(Result::ok).count())
        .unwrap_or(0)
}

/// `snapshots --json` of `provider` through `checkfu`, parsed.
fn listing(mut c: Command, provider: &str) -> Vec<serde_json::Value> {
    let o = output(c.args(["sandbox", "snapshots", "--provider", provider, "--json"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    serde_json::from_str::<Vec<serde_json::Value>>(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}", describe(&o)))
}

#[test]
fn memory_snapshots_cannot_be_resumed_and_say_why() {
    let state = tempfile::tempdir().unwrap();
    let with_state = || {
        let mut c = checkfu();
        c.env("CHECKFU_STATE_DIR", state.path());
        c
    };
    let o = output(with_state().args([
        "sandbox",
        "run",
        "--image",
        "demo:1",
        "--durable",
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let id = snapshot_id(&o);
    assert!(
        stderr(&o).contains("lives only inside this process"),
        "{}",
        describe(&o)
    );
    assert_eq!(checkpoint_files(state.path()), 0, "nothing recorded");
    let o = output(with_state().args([
        "sandbox",
        "run",
        "--provider",
        "memory",
        "--resume",
        &id,
        "--",
        "true",
    ]));
    assert_one_line_failure(
        &o,
        125,
        &[
            "SandboxOperationFailed",
            "invalid_request",
            "resume",
            "provider",
            "docker, linux",
            "memory",
        ],
    );
    let o = output(with_state().args(["sandbox", "snapshots"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "", "a fresh memory oracle holds nothing");
}

#[test]
fn an_unknown_snapshot_id_is_refused_before_any_provider_is_opened() {
    let state = tempfile::tempdir().unwrap();
    for provider in ["docker", "linux"] {
        let o = output(checkfu().env("CHECKFU_STATE_DIR", state.path()).args([
            "sandbox",
            "run",
            "--provider",
            provider,
            "--resume",
            "snap-nope",
            "--",
            "true",
        ]));
        assert_one_line_failure(
            &o,
            125,
            &["SandboxSnapshotNotFound", "snap-nope", "--resume snap-nope"],
        );
    }
}

#[test]
fn resume_flag_conflicts_are_usage_errors() {
    for args in [
        vec!["--resume", "s", "--image", "demo:1", "--", "true"],
        vec!["--resume", "s", "--mount", "/tmp:/data", "--", "true"],
        vec!["--image", "demo:1", "--retention", "1h", "--", "true"],
        vec![
            "--image",
            "demo:1",
            "--durable",
            "--retention",
            "0s",
            "--",
            "true",
        ],
        vec!["--", "true"],
    ] {
        let o = output(checkfu().args(["sandbox", "run"]).args(&args));
        assert_eq!(code(&o), 2, "{args:?}: {}", describe(&o));
    }
}

#[test]
fn docker_resume_reads_back_lists_refuses_and_sweeps() {
    let Some(env) = docker("docker_resume") else {
        return;
    };
    let o = output(env.run(&[
        "--durable",
        "--",
        "sh",
        "-c",
        "echo written before the snapshot > /mnt/session/outputs/note",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let id = snapshot_id(&o);
    assert_eq!(checkpoint_files(env.state.path()), 1);

    // Listed as live and resumable, in the table and as JSON.
    let o = output(
        env.checkfu()
            .args(["sandbox", "snapshots", "--provider", "docker"]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let table = stdout(&o);
    let row: Vec<&str> = table.lines().map(str::trim).collect();
    assert_eq!(row.len(), 1, "{}", describe(&o));
    assert!(
        row[0].starts_with(&id) && row[0].ends_with("live  yes"),
        "{row:?}"
    );
    let listed = listing(env.checkfu(), "docker");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["snapshot_id"], id.as_str());
    assert_eq!(listed[0]["scope"], env.scope.as_str());
    assert_eq!(listed[0]["resumable"], true);
    assert_eq!(listed[0]["root_image"], env.fixture.as_str());

    // Resumed: the file the first run wrote is there.
    let out = tempfile::tempdir().unwrap();
    let copied = out.path().join("copied");
    let o = output(env.checkfu().args([
        "sandbox",
        "run",
        "--provider",
        "docker",
        "--resume",
        &id,
        "--outputs",
        copied.to_str().unwrap(),
        "--",
        "cat",
        "/mnt/session/outputs/note",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "written before the snapshot\n");
    assert_eq!(
        std::fs::read(copied.join("note")).unwrap(),
        b"written before the snapshot\n"
    );
    assert_eq!(env.containers(), Vec::<String>::new(), "instance gone");

    // Another scope: the runtime names the workspace (scope) both ways.
    let o = output(
        env.checkfu()
            .env("CHECKFU_SCOPE", "another-scope")
            .args(["sandbox", "run", "--provider", "docker", "--resume", &id])
            .args(["--", "true"]),
    );
    assert_one_line_failure(
        &o,
        125,
        &[
            "SandboxOperationFailed",
            "invalid_request",
            "resume",
            "snapshot.workspace_id",
            "another-scope",
            &env.scope,
        ],
    );

    // An expired snapshot: refused on resume, swept by cleanup though not
    // an orphan of 1h, and its checkpoint forgotten.
    let o = output(env.run(&["--durable", "--retention", "1s", "--", "true"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let short = snapshot_id(&o);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = listing(env.checkfu(), "docker");
        let entry = l
            .iter()
            .find(|e| e["snapshot_id"] == short.as_str())
            .unwrap();
        if entry["expired"] == true {
            assert_eq!(entry["resumable"], false);
            break;
        }
        assert!(Instant::now() < deadline, "never expired: {l:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = output(
        env.checkfu()
            .args(["sandbox", "run", "--provider", "docker", "--resume", &short])
            .args(["--", "true"]),
    );
    assert_one_line_failure(
        &o,
        125,
        &[
            "SandboxOperationFailed",
            "invalid_request",
            "resume",
            "snapshot.expires_at",
        ],
    );
    let o = output(
        env.checkfu()
            .args(["sandbox", "cleanup", "--provider", "docker"]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), format!("removed snapshot {short}\n"));
    let left: Vec<serde_json::Value> = listing(env.checkfu(), "docker");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["snapshot_id"], id.as_str());
    assert_eq!(checkpoint_files(env.state.path()), 1);

    // finish sweeps the rest; the checkpoint goes with its snapshot.
    let state = env.state.path().to_path_buf();
    env.finish();
    assert_eq!(checkpoint_files(&state), 0);
}

fn linux_or_skip(name: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    let cgroups = Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        || Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    if root && cgroups {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{name}: CI=true but the linux provider cannot run here (root {root}, cgroups {cgroups})");
    }
    println!("SKIP {name}: the linux provider needs root and cgroups");
    false
}

#[test]
fn linux_resume_reads_back_and_another_provider_is_refused() {
    if !linux_or_skip("linux_resume") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let scope = format!("t-linux-resume-{}", std::process::id());
    let checkfu = || {
        let mut c = checkfu();
        c.env("CHECKFU_STATE_DIR", state.path())
            .env("CHECKFU_SCOPE", &scope);
        c
    };
    let o = output(checkfu().args(["sandbox", "fixture", "--provider", "linux"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let image = stdout(&o).lines().last().unwrap().to_owned();
    let data = tempfile::tempdir().unwrap();
    write(data.path(), "seed", b"seed\n");
    let mount = format!("{}:/data:rw", data.path().display());
    let o = output(
        checkfu()
            .args(["sandbox", "run", "--provider", "linux", "--image", &image])
            .args([
                "--mount",
                &mount,
                "--durable",
                "--",
                "sh",
                "-c",
                "echo from the first run > /mnt/session/outputs/note; echo more >> /data/seed",
            ]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let id = snapshot_id(&o);
    let listed = listing(checkfu(), "linux");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["resumable"], true);
    assert_eq!(listed[0]["mounts"][0], "/data:rw");

    let o = output(
        checkfu()
            .args(["sandbox", "run", "--provider", "linux", "--resume", &id])
            .args(["--", "cat", "/mnt/session/outputs/note", "/data/seed"]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "from the first run\nseed\nmore\n");

    // The Docker provider is another provider: the runtime names both ids.
    if std::process::Command::new("docker")
        .args(["version"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let o = output(
            checkfu()
                .args(["sandbox", "run", "--provider", "docker", "--resume", &id])
                .args(["--", "true"]),
        );
        assert_one_line_failure(
            &o,
            125,
            &[
                "SandboxOperationFailed",
                "invalid_request",
                "snapshot.provider",
                "docker",
                "linux",
            ],
        );
    }

    let o = output(checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "linux",
        "--older-than",
        "0s",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), format!("removed snapshot {id}\n"));
    assert_eq!(listing(checkfu(), "linux"), Vec::<serde_json::Value>::new());
    assert_eq!(checkpoint_files(state.path()), 0);
}

#[test]
fn help_teaches_resume_and_snapshots_with_examples() {
    let o = output(checkfu().args(["sandbox", "snapshots", "--help"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let text = stdout(&o);
    assert!(text.contains("Examples:"), "{text}");
    assert!(
        text.contains("checkfu sandbox snapshots --provider docker"),
        "{text}"
    );
    let o = output(checkfu().args(["sandbox", "run", "--help"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let text = stdout(&o);
    assert!(text.contains("--resume SNAPSHOT"), "{text}");
    assert!(text.contains("--retention"), "{text}");
    assert!(
        text.contains("run --provider docker --resume SNAPSHOT"),
        "{text}"
    );
}
