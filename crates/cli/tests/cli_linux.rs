//! `checkfu` with `--provider linux`: the suite passes all nine cases
//! where the host can enforce allowlists (eight with allowlist-egress a
//! recorded skip where it cannot); a run in a fixture written into the
//! provider's store; `image import` of an OCI layout; `sandbox cleanup
//! --scope` after `sandbox test` was SIGKILLed mid-run, and `sandbox
//! cleanup` after `sandbox run` was SIGKILLed mid-command, leave no
//! instance, process, cgroup, mount, link or state of the scope.
//!
//! Gate: without root (the provider is unavailable) each test prints a
//! `SKIP` line and returns, except under `CI=true`, where it fails.

// Host checks by path: /proc, cgroups and the temporary directory.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

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

/// A `checkfu` with a state directory and scope of its own.
fn env(
    name: &str,
) -> (
    tempfile::TempDir,
    String,
    impl Fn() -> std::process::Command,
) {
    let state = tempfile::tempdir().expect("state dir");
    let scope = format!("t-{name}-{}", std::process::id()).replace('_', "-");
    let dir = state.path().to_path_buf();
    let s = scope.clone();
    let make = move || {
        let mut c = checkfu();
        c.env("CHECKFU_STATE_DIR", &dir).env("CHECKFU_SCOPE", &s);
        c
    };
    (state, scope, make)
}

/// Cgroup directories of `scope` still present.
fn scope_cgroups(scope: &str) -> Vec<PathBuf> {
    ["", "memory", "pids", "cpu", "freezer"]
        .iter()
        .map(|h| {
            Path::new("/sys/fs/cgroup")
                .join(h)
                .join("checkfu-linux")
                .join(scope)
        })
        .filter(|p| p.exists())
        .collect()
}

/// Live processes in a cgroup of `scope` (each instance's init and
/// commands are, from before they run anything of the workload).
fn processes_in_scope(scope: &str) -> Vec<String> {
    let needle = format!("/checkfu-linux/{scope}/");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let zombie = stat[stat.rfind(')')? + 2..].starts_with('Z');
            let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
            (!zombie && cgroups.contains(&needle)).then(|| format!("{pid}"))
        })
        .collect()
}

/// Whether the provider offers `allowlist` on this host (its own probe).
fn allowlist_enforced() -> bool {
    checkfu_sandbox_linux::EgressSupport::probe().is_enforced()
}

/// Host links whose alias names `scope` (the allowlist bridge and veth
/// host ends).
fn scope_links(scope: &str) -> Vec<String> {
    let own = format!("checkfu-linux:{scope}");
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let alias = std::fs::read_to_string(e.path().join("ifalias")).unwrap_or_default();
            let alias = alias.trim();
            alias == own || alias.starts_with(&format!("{own}:"))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Mount points in the host's mount table under `dir`.
fn host_mounts_under(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| Path::new(m).starts_with(dir))
        .map(str::to_owned)
        .collect()
}

/// The scope of a conformance state directory `checkfu-linux-<scope>-<suffix>`.
fn scope_of(dir: &Path) -> String {
    let name = dir.file_name().unwrap().to_str().unwrap();
    name.strip_prefix("checkfu-linux-")
        .and_then(|r| r.rsplit_once('-'))
        .map(|(s, _)| s.to_owned())
        .unwrap()
}

#[test]
fn the_suite_passes_nine_where_allowlists_are_enforced() {
    if !linux_or_skip("linux_suite") {
        return;
    }
    let (_state, _scope, checkfu) = env("linux_suite");
    let o = output(checkfu().args(["sandbox", "test", "--provider", "linux"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let out = stdout(&o);
    let expected = if allowlist_enforced() {
        "9 passed, 0 failed, 0 skipped"
    } else {
        "8 passed, 0 failed, 1 skipped"
    };
    assert!(out.contains(expected), "{}", describe(&o));
    assert!(out.contains("allowlist-egress"), "{}", describe(&o));
}

#[test]
fn a_run_in_the_fixture_written_into_the_store_exits_with_its_status() {
    if !linux_or_skip("linux_run") {
        return;
    }
    let (state, scope, checkfu) = env("linux_run");
    let o = output(checkfu().args(["sandbox", "fixture", "--provider", "linux"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let image = stdout(&o).lines().last().unwrap().to_owned();
    assert!(image.starts_with("checkfu-fixture@sha256:"), "{image}");
    let o = output(checkfu().args([
        "sandbox",
        "run",
        "--provider",
        "linux",
        "--image",
        &image,
        "--",
        "sh",
        "-c",
        "echo hi from $(hostname); exit 42",
    ]));
    assert_eq!(code(&o), 42, "{}", describe(&o));
    assert!(stdout(&o).contains("hi from checkfu"), "{}", describe(&o));
    let o = output(checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "linux",
        "--older-than",
        "0s",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(scope_cgroups(&scope), Vec::<PathBuf>::new());
    assert_eq!(processes_in_scope(&scope), Vec::<String>::new());
    drop(state);
}

#[test]
fn an_oci_layout_imports_and_runs() {
    if !linux_or_skip("linux_import") {
        return;
    }
    let (_state, _scope, checkfu) = env("linux_import");
    // An OCI layout made by writing the fixture into a store of its own.
    let layout = tempfile::tempdir().unwrap();
    let o = output(checkfu().env("CHECKFU_STATE_DIR", layout.path()).args([
        "sandbox",
        "fixture",
        "--provider",
        "linux",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let pinned = stdout(&o).lines().last().unwrap().to_owned();
    let source = layout.path().join("linux").join("images");
    let o = output(checkfu().args(["sandbox", "image", "import"]).arg(&source));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o).trim(), pinned, "{}", describe(&o));
    let o = output(checkfu().args([
        "sandbox",
        "run",
        "--provider",
        "linux",
        "--image",
        &pinned,
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // Nothing importable: a typed failure naming the path.
    let empty = tempfile::tempdir().unwrap();
    let o = output(
        checkfu()
            .args(["sandbox", "image", "import"])
            .arg(empty.path()),
    );
    assert_eq!(code(&o), 125, "{}", describe(&o));
    assert!(stderr(&o).contains("no image found"), "{}", describe(&o));
}

#[test]
fn cleanup_sweeps_what_a_sigkilled_conformance_run_left() {
    if !linux_or_skip("linux_cleanup_conf") {
        return;
    }
    let (_state, _scope, checkfu) = env("linux_cleanup_conf");
    let mut child = checkfu()
        .args(["sandbox", "test", "--provider", "linux"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("checkfu spawns");
    let prefix = format!("checkfu-linux-conf-{}-", child.id());
    let state_dir = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(Result::ok)
            .find(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .map(|e| e.path())
    };
    // Wait until an instance of the run is active (its init has a pid).
    let deadline = Instant::now() + Duration::from_secs(120);
    let dir = loop {
        if let Some(dir) = state_dir() {
            if !processes_in_scope(&scope_of(&dir)).is_empty() {
                break dir;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no instance of {prefix}* started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let scope = scope_of(&dir);
    // The killed run left its instance running.
    assert!(!processes_in_scope(&scope).is_empty());
    assert!(!scope_cgroups(&scope).is_empty());
    // The instances the run left, by their cgroup directories.
    let live: Vec<String> = scope_cgroups(&scope)
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().filter_map(Result::ok))
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.starts_with("i-"))
        .collect();
    assert!(!live.is_empty(), "no instance cgroup in {scope}");
    // The default --older-than (1h): the scope is swept whole all the
    // same, and the dry run lists what is then removed, each once.
    let cleanup = |dry_run: bool| {
        let mut c = checkfu();
        c.args([
            "sandbox",
            "cleanup",
            "--provider",
            "linux",
            "--scope",
            &scope,
        ]);
        if dry_run {
            c.arg("--dry-run");
        }
        output(c)
    };
    let dry = cleanup(true);
    assert_eq!(code(&dry), 0, "{}", describe(&dry));
    let would = swept_objects(&dry, "would remove");
    assert_eq!(
        stdout(&dry).lines().count(),
        would.len(),
        "listed twice: {}",
        describe(&dry)
    );
    for id in &live {
        assert!(
            would.contains(&format!("instance {id}")),
            "{id}: {}",
            describe(&dry)
        );
    }
    assert!(
        would.contains(&format!("state directory {}", dir.display())),
        "{}",
        describe(&dry)
    );
    let counted = |o: &std::process::Output, verb: &str| {
        swept_count(o, verb, "instance")
            + swept_count(o, verb, "snapshot")
            + swept_count(o, verb, "support object")
    };
    assert_eq!(
        counted(&dry, "would remove"),
        would.len(),
        "{}",
        describe(&dry)
    );
    assert!(dir.exists(), "the dry run removed the state directory");
    let o = cleanup(false);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stderr(&o).contains(&format!("removed conformance scope {scope}")),
        "{}",
        describe(&o)
    );
    assert_eq!(swept_objects(&o, "removed"), would, "{}", describe(&o));
    assert_eq!(counted(&o, "removed"), would.len(), "{}", describe(&o));
    assert!(!dir.exists(), "state directory {} left", dir.display());
    assert_eq!(processes_in_scope(&scope), Vec::<String>::new());
    assert_eq!(scope_cgroups(&scope), Vec::<PathBuf>::new());
}

#[test]
fn the_envelope_backs_allowlist_only_where_it_is_enforced() {
    if !linux_or_skip("linux_capabilities") {
        return;
    }
    let (_state, _scope, checkfu) = env("linux_capabilities");
    let o = output(checkfu().args(["sandbox", "capabilities", "--provider", "linux", "--json"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["provider"], "linux", "{doc}");
    let unbacked: Vec<&str> = doc["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .filter(|t| t["backed"] == false)
        .filter_map(|t| t["token"].as_str())
        .collect();
    if allowlist_enforced() {
        assert_eq!(unbacked, Vec::<&str>::new(), "{doc}");
        return;
    }
    assert_eq!(unbacked, vec!["network-allowlist"], "{doc}");
    let o = output(checkfu().args(["sandbox", "capabilities", "--provider", "linux"]));
    assert!(
        stdout(&o).contains("network-allowlist  not backed: needs"),
        "{}",
        describe(&o)
    );
}

#[test]
fn cleanup_sweeps_what_a_sigkilled_run_left() {
    if !linux_or_skip("linux_cleanup_run") {
        return;
    }
    let (state, scope, checkfu) = env("linux_cleanup_run");
    let o = output(checkfu().args(["sandbox", "fixture", "--provider", "linux"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let image = stdout(&o).lines().last().unwrap().to_owned();
    let mut child = checkfu()
        .args([
            "sandbox",
            "run",
            "--provider",
            "linux",
            "--image",
            &image,
            "--",
            "sleep",
            "100",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("checkfu spawns");
    // Wait until the command runs: a `sleep` in the scope's cgroups.
    let sleeping = || {
        processes_in_scope(&scope).iter().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !sleeping() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // The killed run left its instance running (its init at least; the
    // command dies with the provider through its parent-death signal).
    assert!(!processes_in_scope(&scope).is_empty());
    assert!(!scope_cgroups(&scope).is_empty());
    let instances = state.path().join("linux").join("instances");
    let listed = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(listed(&instances).len(), 1, "one instance record");
    let o = output(checkfu().args([
        "sandbox",
        "cleanup",
        "--provider",
        "linux",
        "--older-than",
        "0s",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(processes_in_scope(&scope), Vec::<String>::new());
    assert_eq!(scope_cgroups(&scope), Vec::<PathBuf>::new());
    assert_eq!(listed(&instances), Vec::<String>::new());
    assert_eq!(
        listed(&state.path().join("linux").join("snapshots")),
        Vec::<String>::new()
    );
    assert_eq!(host_mounts_under(state.path()), Vec::<String>::new());
    assert_eq!(scope_links(&scope), Vec::<String>::new());
    drop(state);
}
