//! `checkfu sandbox run --mount m:/src --outputs DIR` on memory, Docker and
//! Linux: the staged tree arrives whole (empty directories, a 0700
//! directory, a 0755 script that runs) and outputs keep their permission
//! bits (`common::tree`; the Python provider's row is in
//! `cli_python_provider.rs`).
//!
//! Gates: the Docker test needs a daemon, the Linux test root and cgroups;
//! without them each prints a `SKIP` line and returns, except under
//! `CI=true`, where it fails. Each removes what it created.

// The Linux gate checks host paths.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::Command;

use common::tree::{assert_script_ran, assert_tree_and_outputs, mount_arg, staged_tree, workload};
use common::*;

/// Runs the scenario through `run` (`checkfu sandbox run --provider P
/// --image I` with the caller's environment, plus the given arguments).
fn scenario(run: &dyn Fn(&[&str]) -> Command) {
    let tmp = tempfile::tempdir().unwrap();
    let m = staged_tree(tmp.path());
    let mount = mount_arg(&m);
    assert_script_ran(&output(run(&["--mount", &mount, "--", "/src/run.sh"])));
    let out = tmp.path().join("out");
    let (script, expected) = workload(&m);
    let o = output(run(&[
        "--mount",
        &mount,
        "--outputs",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]));
    assert_tree_and_outputs(&o, &expected, &out);
}

#[test]
fn memory_stages_the_whole_tree_and_outputs_keep_their_bits() {
    scenario(&|args| {
        let mut c = checkfu();
        c.args([
            "sandbox",
            "run",
            "--provider",
            "memory",
            "--image",
            "demo:1",
        ])
        .args(args);
        c
    });
}

#[test]
fn docker_stages_the_whole_tree_and_outputs_keep_their_bits() {
    let Some(env) = docker("docker_tree_modes") else {
        return;
    };
    scenario(&|args| env.run(args));
    env.finish();
}

#[test]
fn linux_stages_the_whole_tree_and_outputs_keep_their_bits() {
    let root = rustix::process::geteuid().is_root();
    let cgroups = Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        || Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    if !(root && cgroups) {
        checkfu_test_support::gate::skip_or_fail(
            "linux_tree_modes",
            &format!("the linux provider needs root and cgroups (root {root}, cgroups {cgroups})"),
        );
        return;
    }
    let state = tempfile::tempdir().expect("state dir");
    let scope = format!("t-linux-tree-modes-{}", std::process::id());
    let linux = || {
        let mut c = checkfu();
        c.env("CHECKFU_STATE_DIR", state.path())
            .env("CHECKFU_SCOPE", &scope);
        c
    };
    let o = output(linux().args(["sandbox", "fixture", "--provider", "linux"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let image = stdout(&o).lines().last().unwrap().to_owned();
    scenario(&|args| {
        let mut c = linux();
        c.args(["sandbox", "run", "--provider", "linux", "--image", &image])
            .args(args);
        c
    });
    let cleanup = |dry: bool| {
        let mut c = linux();
        c.args([
            "sandbox",
            "cleanup",
            "--provider",
            "linux",
            "--older-than",
            "0s",
        ]);
        if dry {
            c.arg("--dry-run");
        }
        output(c)
    };
    let o = cleanup(false);
    assert_eq!(code(&o), 0, "cleanup: {}", describe(&o));
    let o = cleanup(true);
    assert_eq!(code(&o), 0, "dry-run: {}", describe(&o));
    assert_eq!(stdout(&o), "", "left behind: {}", describe(&o));
}
