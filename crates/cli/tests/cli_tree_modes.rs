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

use std::process::Command;

use common::providers::providers;
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

/// The staged tree and the output bits, on every provider whose gate is
/// open (the memory oracle always, Docker when a daemon answers, linux
/// with root and cgroups), each swept and checked empty afterwards.
#[test]
fn every_provider_stages_the_whole_tree_and_outputs_keep_their_bits() {
    for p in providers("tree_modes") {
        scenario(&|args| p.run(args));
        p.finish();
    }
}
