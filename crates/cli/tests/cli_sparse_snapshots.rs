//! A durable run whose workload writes 0 bytes into a 24 GiB sparse file
//! snapshots in a few KiB of the state directory and resumes with the
//! same apparent size, on Docker and on the linux provider; a snapshot
//! over the host-byte bound, or (Docker) whose commit would write holes
//! the workload never wrote, is refused with `SandboxFileTooLarge` naming
//! the path, the bound and the size, after the workload's status, and
//! leaves nothing behind.
//!
//! Docker tests run when the daemon answers, linux tests as root with
//! cgroups (a `SKIP` line otherwise, a failure under `CI=true`). Every
//! test removes what it created.

// Host checks by path: the state directory's allocated bytes.
#![allow(clippy::disallowed_methods)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// The reviewer's workload: a 24 GiB file, never written.
const SPARSE_24G: &str = "dd if=/dev/zero of=/mnt/session/outputs/s bs=1 count=0 seek=24G";
const BYTES_24G: u64 = 24 << 30;
/// Most bytes the state directory may grow by for such a run.
const GROWTH_BOUND: u64 = 4 << 20;

/// Bytes allocated on disk under `dir` (st_blocks * 512), links not
/// followed.
fn allocated(dir: &Path) -> u64 {
    let meta = std::fs::symlink_metadata(dir).unwrap();
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for e in std::fs::read_dir(dir).unwrap() {
            total += allocated(&e.unwrap().path());
        }
    }
    total
}

/// The snapshot id of the `checkfu: snapshot ID (expires ...)` line.
fn snapshot_id(o: &std::process::Output) -> String {
    stderr(o)
        .lines()
        .find_map(|l| l.strip_prefix("checkfu: snapshot "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no snapshot line: {}", describe(o)))
        .to_owned()
}

/// Runs the reviewer's command (`--durable --timeout 5 --outputs DIR`)
/// through `run`, checks it finished quickly with the huge file named and
/// not copied, that the state directory grew by less than
/// [`GROWTH_BOUND`], and returns the snapshot id.
fn sparse_durable_run(run: impl FnOnce(&[&str]) -> Command, state: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let before = allocated(state);
    let started = Instant::now();
    let o = output(run(&[
        "--durable",
        "--timeout",
        "5",
        "--outputs",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        SPARSE_24G,
    ]));
    let took = started.elapsed();
    // The workload succeeded; the one file over 16 MiB is named and not
    // copied, so the output copy is incomplete (exit 125, as without
    // --durable).
    assert_eq!(code(&o), 125, "{}", describe(&o));
    let err = stderr(&o);
    assert!(err.contains("/mnt/session/outputs/s"), "{}", describe(&o));
    assert!(err.contains("exited with status 0"), "{}", describe(&o));
    assert!(!out.join("s").exists(), "the huge file is not copied");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    let id = snapshot_id(&o);
    let grown = allocated(state).saturating_sub(before);
    assert!(
        grown < GROWTH_BOUND,
        "the state directory grew by {grown} bytes: {}",
        describe(&o)
    );
    id
}

/// `ls -l` of a path through `--resume`: the size column.
fn resumed_size(resume: Command, path: &str) -> u64 {
    let mut resume = resume;
    let o = output(resume.args(["--", "ls", "-l", path]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let line = stdout(&o);
    line.split_whitespace()
        .nth(4)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no size in {line:?}"))
}

#[test]
fn docker_a_sparse_output_snapshots_small_and_resumes_whole() {
    let Some(env) = docker("docker_sparse_snapshot") else {
        return;
    };
    let id = sparse_durable_run(|args| env.run(args), env.state.path());
    let mut resume = env.checkfu();
    resume.args(["sandbox", "run", "--provider", "docker", "--resume", &id]);
    assert_eq!(resumed_size(resume, "/mnt/session/outputs/s"), BYTES_24G);
    env.finish();
}

/// The number after `key ` on the one failure line of `o`.
fn failure_number(o: &std::process::Output, key: &str) -> u64 {
    let line = failure_lines(o).join(" ");
    line.split(&format!("{key} "))
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// The reviewer's input: 300 MiB of holes in the container's own root
/// file system, well under the snapshot ceiling. `docker commit` would
/// write them densely, so the snapshot is refused before it, fast, with
/// the workload's status on the failure line, and leaves no image or
/// container.
#[test]
fn docker_holes_in_the_root_file_system_are_refused_before_the_commit() {
    let Some(env) = docker("docker_root_holes") else {
        return;
    };
    let before = allocated(env.state.path());
    let started = Instant::now();
    let o = output(env.run(&[
        "--durable",
        "--",
        "sh",
        "-c",
        "dd if=/dev/zero of=/tmp/sp bs=1 count=0 seek=300M && exit 3",
    ]));
    let took = started.elapsed();
    assert_one_line_failure(
        &o,
        125,
        &[
            "the workload exited with status 3; ",
            "SandboxFileTooLarge",
            "path /:",
            &format!("actual_bytes {}", 300u64 << 20),
        ],
    );
    // The bound is what the layer allocates plus the slack: far less
    // than the holes.
    let limit = failure_number(&o, "limit_bytes");
    let slack = checkfu_sandbox_docker::COMMIT_HOLE_SLACK_BYTES;
    assert!(
        (slack..slack + (16 << 20)).contains(&limit),
        "limit_bytes {limit}: {}",
        describe(&o)
    );
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert!(
        !stderr(&o).contains("checkfu: snapshot "),
        "{}",
        describe(&o)
    );
    assert!(allocated(env.state.path()).saturating_sub(before) < GROWTH_BOUND);
    assert_eq!(env.images(), Vec::<String>::new(), "no snapshot image");
    assert_eq!(env.containers(), Vec::<String>::new(), "instance gone");
    env.finish();
}

/// 2 MiB the workload really wrote, no holes: the snapshot is taken and
/// resumes with the same bytes.
#[test]
fn docker_written_data_without_holes_snapshots_and_resumes() {
    let Some(env) = docker("docker_root_written") else {
        return;
    };
    let o = output(env.run(&[
        "--durable",
        "--",
        "sh",
        "-c",
        "dd if=/dev/urandom of=/tmp/data bs=1024 count=2048 2>/dev/null && sha256sum /tmp/data",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let written = stdout(&o);
    assert!(written.contains("/tmp/data"), "{}", describe(&o));
    let id = snapshot_id(&o);
    let mut resume = env.checkfu();
    resume.args(["sandbox", "run", "--provider", "docker", "--resume", &id]);
    let o = output(resume.args(["--", "sh", "-c", "sha256sum /tmp/data && wc -c < /tmp/data"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(
        stdout(&o),
        format!("{written}2097152\n"),
        "{}",
        describe(&o)
    );
    env.finish();
}

/// Without holes the ceiling still holds: 2 MiB really written under a
/// 1 MiB ceiling is refused with the layer's size (`SizeRw`).
#[test]
fn docker_a_root_layer_over_the_ceiling_is_refused() {
    let Some(env) = docker("docker_root_ceiling") else {
        return;
    };
    let bound: u64 = 1 << 20;
    let o = output(
        env.run(&[
            "--durable",
            "--",
            "sh",
            "-c",
            "dd if=/dev/urandom of=/tmp/data bs=1024 count=2048 2>/dev/null",
        ])
        .env("CHECKFU_SNAPSHOT_MAX_BYTES", bound.to_string()),
    );
    assert_one_line_failure(
        &o,
        125,
        &[
            "the workload exited with status 0; ",
            "SandboxFileTooLarge",
            "path /:",
            &format!("limit_bytes {bound}"),
        ],
    );
    assert!(
        failure_number(&o, "actual_bytes") >= 2 << 20,
        "{}",
        describe(&o)
    );
    assert_eq!(env.images(), Vec::<String>::new(), "no snapshot image");
    assert_eq!(env.containers(), Vec::<String>::new(), "instance gone");
    env.finish();
}

fn linux_or_skip(name: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    let cgroups = Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        || Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    if root && cgroups {
        return true;
    }
    checkfu_test_support::gate::skip_or_fail(
        name,
        &format!("the linux provider needs root and cgroups (root {root}, cgroups {cgroups})"),
    )
}

/// A state directory, scope and fixture image of the linux provider;
/// `checkfu` with both set.
struct LinuxEnv {
    state: tempfile::TempDir,
    scope: String,
    image: String,
}

impl LinuxEnv {
    fn new(name: &str) -> LinuxEnv {
        let state = tempfile::tempdir().unwrap();
        let scope = format!("t-{name}-{}", std::process::id()).replace('_', "-");
        let mut env = LinuxEnv {
            state,
            scope,
            image: String::new(),
        };
        let o = output(
            env.checkfu()
                .args(["sandbox", "fixture", "--provider", "linux"]),
        );
        assert_eq!(code(&o), 0, "{}", describe(&o));
        env.image = stdout(&o).lines().last().unwrap().to_owned();
        env
    }
    fn checkfu(&self) -> Command {
        let mut c = checkfu();
        c.env("CHECKFU_STATE_DIR", self.state.path())
            .env("CHECKFU_SCOPE", &self.scope);
        c
    }
    fn run(&self, args: &[&str]) -> Command {
        let mut c = self.checkfu();
        c.args([
            "sandbox",
            "run",
            "--provider",
            "linux",
            "--image",
            &self.image,
        ])
        .args(args);
        c
    }
    fn snapshots(&self) -> Vec<serde_json::Value> {
        let o =
            output(
                self.checkfu()
                    .args(["sandbox", "snapshots", "--provider", "linux", "--json"]),
            );
        assert_eq!(code(&o), 0, "{}", describe(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    }
    /// Sweeps the scope and checks nothing of it is left.
    fn finish(self) {
        let o = output(self.checkfu().args([
            "sandbox",
            "cleanup",
            "--provider",
            "linux",
            "--older-than",
            "0s",
        ]));
        assert_eq!(code(&o), 0, "{}", describe(&o));
        assert_eq!(self.snapshots(), Vec::<serde_json::Value>::new());
    }
}

#[test]
fn linux_a_sparse_output_snapshots_small_and_resumes_whole() {
    if !linux_or_skip("linux_sparse_snapshot") {
        return;
    }
    let env = LinuxEnv::new("linux_sparse_snapshot");
    let id = sparse_durable_run(|args| env.run(args), env.state.path());
    let mut resume = env.checkfu();
    resume.args(["sandbox", "run", "--provider", "linux", "--resume", &id]);
    assert_eq!(resumed_size(resume, "/mnt/session/outputs/s"), BYTES_24G);

    // The writable root layer is archived sparse too.
    let before = allocated(env.state.path());
    let o = output(env.run(&[
        "--durable",
        "--",
        "sh",
        "-c",
        "dd if=/dev/zero of=/tmp/r bs=1 count=0 seek=24G",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let root = snapshot_id(&o);
    assert!(allocated(env.state.path()).saturating_sub(before) < GROWTH_BOUND);
    let mut resume = env.checkfu();
    resume.args(["sandbox", "run", "--provider", "linux", "--resume", &root]);
    assert_eq!(resumed_size(resume, "/tmp/r"), BYTES_24G);
    env.finish();
}

#[test]
fn linux_a_snapshot_over_the_bound_is_refused() {
    if !linux_or_skip("linux_snapshot_bound") {
        return;
    }
    let env = LinuxEnv::new("linux_snapshot_bound");
    let bound: u64 = 1 << 20;
    // 4 MiB the workload really wrote, under a 1 MiB ceiling.
    let o = output(
        env.run(&[
            "--durable",
            "--",
            "sh",
            "-c",
            "head -c 4194304 /dev/zero > /mnt/session/outputs/big",
        ])
        .env("CHECKFU_SNAPSHOT_MAX_BYTES", bound.to_string()),
    );
    assert_one_line_failure(
        &o,
        125,
        &[
            "SandboxFileTooLarge",
            "path /mnt/session/outputs",
            &format!("limit_bytes {bound}"),
            "actual_bytes",
        ],
    );
    let line = failure_lines(&o).join(" ");
    let actual: u64 = line
        .rsplit("actual_bytes ")
        .next()
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(actual >= 4 << 20, "{line}");
    // Nothing of the refused snapshot is left.
    assert_eq!(env.snapshots(), Vec::<serde_json::Value>::new());
    assert!(
        !stderr(&o).contains("checkfu: snapshot "),
        "{}",
        describe(&o)
    );

    // A ceiling that is not a number is a usage error naming it and its
    // value, before anything runs.
    let o = output(
        env.run(&["--durable", "--", "sh", "-c", "echo ran"])
            .env("CHECKFU_SNAPSHOT_MAX_BYTES", "lots"),
    );
    assert_one_line_failure(
        &o,
        2,
        &[
            "CHECKFU_SNAPSHOT_MAX_BYTES",
            "\"lots\"",
            "a decimal number of bytes",
        ],
    );
    assert_eq!(stdout(&o), "", "nothing ran: {}", describe(&o));
    env.finish();
}
