//! Inputs real workloads send, through `checkfu sandbox run`, on every
//! provider with the same assertions: the memory oracle always, Docker
//! when a daemon answers, linux when the host gives root and cgroups.
//! A provider whose gate is closed prints a `SKIP` line (a failure under
//! `CI=true`); the oracle's row always runs.
//!
//! The inputs: a staged `run.sh` 0755 and a script made executable with
//! `chmod`; a file name that is not UTF-8; a huge sparse output; a file
//! still being written by a process left running; an argv over the
//! kernel's argument space; a missing working directory and a file as the
//! working directory.

// The linux gate checks the cgroup mount by path.
#![allow(clippy::disallowed_methods)]

mod common;

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use common::providers::{providers, Provider};
use common::*;

/// A host folder with `run.sh` 0755, `data.txt` 0644 and `a/b/tool.sh`
/// 0700.
fn staged_tree(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let run = write(dir, "run.sh", b"#!/bin/sh\necho ran\n");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(dir, "data.txt", b"data\n");
    let deep = write(dir, "a/b/tool.sh", b"#!/bin/sh\necho deep\n");
    std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_staged_script_0755_runs_and_a_0644_file_does_not() {
    for p in providers("workloads_staged") {
        let tmp = tempfile::tempdir().unwrap();
        let m = tmp.path().join("m");
        staged_tree(&m);
        let mount = format!("{}:/src", m.display());
        let name = p.name();
        let o = output(p.run(&["--mount", &mount, "--", "/src/run.sh"]));
        assert_eq!(code(&o), 0, "{name}: {}", describe(&o));
        assert_eq!(stdout(&o), "ran\n", "{name}: {}", describe(&o));
        let o = output(p.run(&["--mount", &mount, "--", "/src/a/b/tool.sh"]));
        assert_eq!(code(&o), 0, "{name}: {}", describe(&o));
        assert_eq!(stdout(&o), "deep\n", "{name}: {}", describe(&o));
        let o = output(p.run(&["--mount", &mount, "--", "/src/data.txt"]));
        assert_eq!(
            code(&o),
            126,
            "{name}: a 0644 file is not executable: {}",
            describe(&o)
        );
        p.finish();
    }
}

#[test]
fn a_script_written_and_made_executable_with_chmod_runs() {
    for p in providers("workloads_chmod") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        let name = p.name();
        let o = output(p.run(&[
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo \"#!/bin/sh\" > /mnt/session/outputs/x.sh; chmod 755 /mnt/session/outputs/x.sh \
             && /mnt/session/outputs/x.sh && echo ran",
        ]));
        assert_eq!(code(&o), 0, "{name}: {}", describe(&o));
        assert_eq!(stdout(&o), "ran\n", "{name}: {}", describe(&o));
        assert_eq!(
            std::fs::read(out.join("x.sh")).ok(),
            Some(b"#!/bin/sh\n".to_vec()),
            "{name}: {}",
            describe(&o)
        );
        p.finish();
    }
}

#[test]
fn a_name_that_is_not_utf8_is_copied_under_its_exact_bytes() {
    for p in providers("workloads_bytes_names") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        let name = p.name();
        // The input, exactly.
        let o = output(p.run(&[
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "cd /mnt/session/outputs && echo good > good.txt && echo bad > \"$(printf \"bad-\\377\")\"",
        ]));
        assert_eq!(code(&o), 0, "{name}: {}", describe(&o));
        assert!(
            !stderr(&o).contains("SandboxProtocolInvalid"),
            "{name}: {}",
            describe(&o)
        );
        assert_eq!(std::fs::read(out.join("good.txt")).unwrap(), b"good\n");
        let bad = out.join(std::ffi::OsStr::from_bytes(b"bad-\xff"));
        assert_eq!(
            std::fs::read(&bad).unwrap(),
            b"bad\n",
            "{name}: {}",
            describe(&o)
        );
        let mut names: Vec<Vec<u8>> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![b"bad-\xff".to_vec(), b"good.txt".to_vec()],
            "{name}"
        );
        p.finish();
    }
}

#[test]
fn a_huge_sparse_output_is_named_and_skipped_without_reading_it() {
    for p in providers("workloads_sparse") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        let name = p.name();
        let o = output(p.run(&[
            "--timeout",
            "5",
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo ok > /mnt/session/outputs/a.txt; \
             dd if=/dev/zero of=/mnt/session/outputs/s bs=1 count=0 seek=24G",
        ]));
        assert_eq!(code(&o), 125, "{name}: {}", describe(&o));
        let err = stderr(&o);
        // The run's deadline bounds output copying: a listing that read the
        // holes would still be hashing when the deadline abandons the copy.
        assert!(!err.contains("deadline"), "{name}: {}", describe(&o));
        assert_eq!(
            std::fs::read(out.join("a.txt")).ok(),
            Some(b"ok\n".to_vec()),
            "{name}: {}",
            describe(&o)
        );
        let named: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("/mnt/session/outputs/s "))
            .collect();
        assert_eq!(named.len(), 1, "{name}: {err}");
        assert!(
            named[0].contains(&format!("{} bytes", 24u64 << 30)) && named[0].contains("16 MiB"),
            "{name}: {err}"
        );
        assert!(
            err.contains("the workload exited with status 0; the output copy is incomplete"),
            "{name}: {}",
            describe(&o)
        );
        assert!(
            !out.join("s").exists(),
            "{name}: the huge file is not copied"
        );
        p.finish();
    }
}

#[test]
fn a_file_still_being_written_does_not_abort_the_copy() {
    for p in providers("workloads_changing") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        let name = p.name();
        let o = output(p.run(&[
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "cd /mnt/session/outputs; echo ok > a.txt; \
             setsid sh -c 'while :; do echo x >> log.txt; done' </dev/null >/dev/null 2>&1 & sleep 1",
        ]));
        let err = stderr(&o);
        assert!(
            !err.contains("SandboxProtocolInvalid"),
            "{name}: {}",
            describe(&o)
        );
        assert_eq!(
            std::fs::read(out.join("a.txt")).unwrap(),
            b"ok\n",
            "{name}: {}",
            describe(&o)
        );
        // Whether the writer appended between the listing and the read is
        // up to the scheduler on a real kernel (the oracle's writer appends
        // on every observation, so there it always did). Either the
        // changing file is named, or it was read exactly as listed: whole
        // lines only.
        if !err.contains("log.txt") {
            let log = std::fs::read(out.join("log.txt")).unwrap_or_default();
            assert!(
                !log.is_empty() && log.chunks(2).all(|l| l == b"x\n"),
                "{name}: log.txt was neither named nor copied as listed: {}",
                describe(&o)
            );
        }
        match code(&o) {
            0 => assert!(out.join("log.txt").exists(), "{name}: {}", describe(&o)),
            125 => assert!(
                err.contains("exited with status 0"),
                "{name}: {}",
                describe(&o)
            ),
            other => panic!("{name}: exit {other}: {}", describe(&o)),
        }
        if let Provider::Memory = p {
            // Deterministic on the oracle: the file grew under the read,
            // was read again whole and copied as read.
            let line = err
                .lines()
                .find(|l| l.contains("/mnt/session/outputs/log.txt"))
                .unwrap_or_else(|| panic!("log.txt is named: {}", describe(&o)));
            assert!(line.contains("grew from"), "{line}");
            assert!(line.contains("copied as read"), "{line}");
            assert_eq!(code(&o), 0, "{}", describe(&o));
        }
        p.finish();
    }
}

/// Lets this process pass `checkfu` an argv of a few MiB: the kernel sizes
/// a new program's argument space from the caller's stack limit (a
/// quarter of it), so 8 MiB would refuse the test's own spawn. The sandbox
/// keeps its own limits.
fn room_for_a_big_argv() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let want: u64 = 64 * 1024 * 1024;
    let now = getrlimit(Resource::Stack);
    if now.current.is_some_and(|c| c < want) && now.maximum.is_none_or(|m| m >= want) {
        setrlimit(
            Resource::Stack,
            Rlimit {
                current: Some(want),
                maximum: now.maximum,
            },
        )
        .expect("raise the stack limit");
    }
}

#[test]
fn an_argv_over_the_kernels_argument_space_could_not_be_executed() {
    room_for_a_big_argv();
    let big = "a".repeat(64_000);
    for p in providers("workloads_argv") {
        let name = p.name();
        let mut over = vec!["--", "true"];
        over.extend(std::iter::repeat_n(big.as_str(), 33));
        let o = output(p.run(&over));
        assert_eq!(code(&o), 126, "{name}: {}", short(&o));
        assert!(
            stderr(&o)
                .to_ascii_lowercase()
                .contains("argument list too long"),
            "{name}: {}",
            short(&o)
        );
        let mut within = vec!["--", "true"];
        within.extend(std::iter::repeat_n(big.as_str(), 32));
        let o = output(p.run(&within));
        assert_eq!(code(&o), 0, "{name}: just within: {}", short(&o));
        p.finish();
    }
}

/// Status and stderr of a run whose argv is too long to print.
fn short(o: &std::process::Output) -> String {
    format!("status {:?}, stderr {}", o.status.code(), stderr(o))
}

#[test]
fn a_missing_or_non_directory_workdir_could_not_be_executed() {
    for p in providers("workloads_workdir") {
        let tmp = tempfile::tempdir().unwrap();
        let m = tmp.path().join("m");
        staged_tree(&m);
        let mount = format!("{}:/src", m.display());
        let name = p.name();
        for workdir in ["/no/such/dir", "/src/data.txt"] {
            let o = output(p.run(&["--mount", &mount, "--workdir", workdir, "--", "true"]));
            assert_eq!(
                code(&o),
                126,
                "{name}: --workdir {workdir}: {}",
                describe(&o)
            );
            assert!(stderr(&o).contains(workdir), "{name}: {}", describe(&o));
        }
        p.finish();
    }
}
