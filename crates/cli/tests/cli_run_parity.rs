//! `checkfu sandbox run` gives one answer on every provider: a directory
//! as the command and a file as the working directory exit 126 with the
//! true reason on stderr; a command starts from the same environment keys
//! and `PATH`, with `HOSTNAME` the instance's host name; a bare image ID
//! `sha256:<hex>` (what `checkfu sandbox fixture` prints) runs, and the
//! Linux provider refuses an ID its store lacks as a capability; a
//! workload over its `--memory` limit is killed, never the run (the
//! providers that run host programs).
//!
//! Gate: the Docker subject prints a `SKIP` line without a daemon and the
//! Linux one without root (each a failure under `CI=true`); the memory
//! oracle always runs.

// Host checks by path: cgroups and the temporary directory.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// One provider the CLI runs: its name, the image ID to give it, and a
/// `checkfu` with the state it needs. Dropping it removes that state.
struct Subject {
    name: &'static str,
    /// A bare image ID `sha256:<hex>` the provider holds.
    image_id: String,
    checkfu: Box<dyn Fn() -> Command>,
    docker: Option<DockerEnv>,
    _state: Option<tempfile::TempDir>,
}

impl Subject {
    /// `checkfu sandbox run --provider <name> --image <id>` plus `args`.
    fn run(&self, args: &[&str]) -> std::process::Output {
        output(
            (self.checkfu)()
                .args(["sandbox", "run", "--provider", self.name])
                .args(["--image", &self.image_id])
                .args(args),
        )
    }

    /// Removes what the subject created and checks that nothing is left.
    fn finish(self) {
        if let Some(env) = self.docker {
            env.finish();
        }
        if self.name == "linux" {
            let o = output((self.checkfu)().args([
                "sandbox",
                "cleanup",
                "--provider",
                "linux",
                "--older-than",
                "0s",
                "--dry-run",
            ]));
            assert_eq!(code(&o), 0, "{}", describe(&o));
            assert_eq!(stdout(&o), "", "linux: instances left");
        }
    }
}

fn linux_available() -> bool {
    rustix::process::geteuid().is_root()
        && (Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
            || Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists())
}

/// Every provider that answers here, memory first.
fn subjects(test: &str) -> Vec<Subject> {
    let mut all = vec![Subject {
        name: "memory",
        image_id: format!("sha256:{}", "ab".repeat(32)),
        checkfu: Box::new(checkfu),
        docker: None,
        _state: None,
    }];
    if let Some(env) = docker(&format!("{test}_docker")) {
        let image_id = env.fixture_id.clone();
        let (scope, state) = (env.scope.clone(), env.state.path().to_path_buf());
        all.push(Subject {
            name: "docker",
            image_id,
            checkfu: Box::new(move || {
                let mut c = checkfu();
                c.env("CHECKFU_SCOPE", &scope)
                    .env("CHECKFU_STATE_DIR", &state);
                c
            }),
            docker: Some(env),
            _state: None,
        });
    }
    if linux_available()
        || !checkfu_test_support::gate::skip_or_fail(
            &format!("{test}_linux"),
            "the linux provider needs root and cgroups",
        )
    {
        let state = tempfile::tempdir().expect("state dir");
        let scope = format!("t-{test}-{}", std::process::id()).replace('_', "-");
        let dir = state.path().to_path_buf();
        let make = move || {
            let mut c = checkfu();
            c.env("CHECKFU_STATE_DIR", &dir)
                .env("CHECKFU_SCOPE", &scope);
            c
        };
        let o = output(make().args(["sandbox", "fixture", "--provider", "linux"]));
        assert_eq!(code(&o), 0, "{}", describe(&o));
        let pinned = stdout(&o).lines().last().unwrap().to_owned();
        let image_id = pinned.split_once('@').expect("pinned").1.to_owned();
        all.push(Subject {
            name: "linux",
            image_id,
            checkfu: Box::new(make),
            docker: None,
            _state: Some(state),
        });
    }
    all
}

/// Runs `check` on every subject, then tears each down.
fn on_every_provider(test: &str, check: impl Fn(&Subject)) {
    let mut ran = Vec::new();
    for subject in subjects(test) {
        check(&subject);
        ran.push(subject.name);
        subject.finish();
    }
    eprintln!("{test} ran on {ran:?}");
}

#[test]
fn a_directory_as_the_command_is_126_with_the_reason_everywhere() {
    on_every_provider("parity_dir_command", |s| {
        let o = s.run(&["--", "/etc"]);
        assert_eq!(code(&o), 126, "{}: {}", s.name, describe(&o));
        assert!(
            stderr(&o).to_lowercase().contains("permission denied"),
            "{}: {}",
            s.name,
            describe(&o)
        );
    });
}

#[test]
fn a_file_as_the_working_directory_is_not_a_directory_everywhere() {
    on_every_provider("parity_file_workdir", |s| {
        for workdir in ["/etc/passwd", "/etc/passwd/below"] {
            let o = s.run(&["--workdir", workdir, "--", "true"]);
            assert_eq!(code(&o), 126, "{} {workdir}: {}", s.name, describe(&o));
            assert!(
                stderr(&o).to_lowercase().contains("not a directory"),
                "{} {workdir}: {}",
                s.name,
                describe(&o)
            );
        }
        let o = s.run(&["--workdir", "/no/such", "--", "true"]);
        assert_eq!(code(&o), 126, "{}: {}", s.name, describe(&o));
        assert!(
            stderr(&o)
                .to_lowercase()
                .contains("no such file or directory"),
            "{}: {}",
            s.name,
            describe(&o)
        );
    });
}

#[test]
fn a_command_starts_from_the_same_environment_everywhere() {
    on_every_provider("parity_env", |s| {
        let o = s.run(&["--", "env"]);
        assert_eq!(code(&o), 0, "{}: {}", s.name, describe(&o));
        let env = stdout(&o);
        let mut keys: Vec<&str> = env
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["HOME", "HOSTNAME", "PATH"], "{}: {env}", s.name);
        for line in ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/checkfu"] {
            assert!(env.lines().any(|l| l == line), "{}: {env}", s.name);
        }
        // Each run is a fresh instance (Docker names each after its
        // container): compare within one.
        let o = s.run(&["--", "sh", "-c", "env; hostname"]);
        assert_eq!(code(&o), 0, "{}: {}", s.name, describe(&o));
        let text = stdout(&o);
        let named = text.lines().find_map(|l| l.strip_prefix("HOSTNAME="));
        let printed = text.lines().last().filter(|h| !h.is_empty());
        assert!(printed.is_some(), "{}: {text}", s.name);
        assert_eq!(named, printed, "{}: {text}", s.name);
    });
}

#[test]
fn a_bare_image_id_runs_everywhere() {
    on_every_provider("parity_image_id", |s| {
        assert!(s.image_id.starts_with("sha256:"), "{}", s.image_id);
        let o = s.run(&["--", "true"]);
        assert_eq!(code(&o), 0, "{}: {}", s.name, describe(&o));
        let hex = &s.image_id["sha256:".len()..];
        assert!(
            stderr(&o).contains(&format!("@sha256:{hex}")),
            "{}: the pinned image keeps the ID's digest: {}",
            s.name,
            describe(&o)
        );
        if s.name == "linux" {
            let absent = format!("sha256:{}", "0".repeat(64));
            let o = output((s.checkfu)().args([
                "sandbox",
                "run",
                "--provider",
                "linux",
                "--image",
                &absent,
                "--",
                "true",
            ]));
            assert_one_line_failure(
                &o,
                125,
                &["SandboxCapabilityUnavailable", "base_image", &absent],
            );
        }
    });
}

/// A workload over its `--memory` limit is killed by the kernel, and only
/// the workload: the run ends with the workload's own status and report
/// (decision 049; the Linux provider's CLI was killed here before).
#[test]
fn a_workload_over_its_memory_limit_is_killed_not_the_run_everywhere() {
    let probes = tempfile::tempdir().expect("probe dir");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../provider-linux/tests/probes/memory_hog.c");
    let built = Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(probes.path().join("memory_hog"))
        .arg(&src)
        .output()
        .expect("cc runs");
    assert!(built.status.success(), "{}", describe(&built));
    let mount = format!("{}:/probe:ro", probes.path().display());
    on_every_provider("parity_memory_limit", |s| {
        if s.name == "memory" {
            eprintln!("memory: the oracle runs no host program and enforces no memory limit");
            return;
        }
        // 40 children touching 5 MiB each need 200 MiB.
        let o = s.run(&[
            "--memory",
            "128M",
            "--mount",
            &mount,
            "--",
            "/probe/memory_hog",
            "40",
            "5",
            "2",
        ]);
        assert_eq!(code(&o), 0, "{}: {}", s.name, describe(&o));
        let killed: u32 = stdout(&o)
            .trim()
            .strip_prefix("killed ")
            .and_then(|r| r.strip_suffix(" of 40"))
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("{}: {}", s.name, describe(&o)));
        assert!(killed > 0, "{}: the limit was not enforced", s.name);
        // A limit no program starts in is refused up front, alike (the
        // Docker daemon's floor, 6 MiB).
        let o = s.run(&["--memory", "64K", "--", "true"]);
        assert_one_line_failure(
            &o,
            125,
            &["invalid_request", "profile.resources.memory_bytes", "65536"],
        );
    });
}

/// `--pids N` counts the workload's own processes on every provider: no
/// supervisor of the Linux provider or the Docker host path, nor the
/// Docker container's keeper, takes one of them (decision 049).
#[test]
fn the_pids_limit_counts_the_workloads_processes_everywhere() {
    on_every_provider("parity_pids", |s| {
        if s.name == "memory" {
            eprintln!("memory: the oracle runs no processes and enforces no pids limit");
            return;
        }
        let script = "echo ran; sleep 0 & wait && echo forked";
        // One process: the shell runs, its fork is refused.
        let o = s.run(&["--pids", "1", "--", "sh", "-c", script]);
        assert_eq!(code(&o), 2, "{}: {}", s.name, describe(&o));
        assert_eq!(stdout(&o), "ran\n", "{}: {}", s.name, describe(&o));
        assert!(
            stderr(&o).contains("can't fork"),
            "{}: {}",
            s.name,
            describe(&o)
        );
        // Two: the shell and one child.
        let o = s.run(&["--pids", "2", "--", "sh", "-c", script]);
        assert_eq!(code(&o), 0, "{}: {}", s.name, describe(&o));
        assert_eq!(stdout(&o), "ran\nforked\n", "{}: {}", s.name, describe(&o));
        // More than the kernel's largest limit is refused up front, alike.
        let o = s.run(&["--pids", "4194305", "--", "true"]);
        assert_one_line_failure(
            &o,
            125,
            &["invalid_request", "profile.resources.pids", "4194305"],
        );
    });
}
