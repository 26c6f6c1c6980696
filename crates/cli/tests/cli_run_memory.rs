//! `checkfu sandbox run` end to end on the embedded memory oracle.

mod common;

use std::time::Duration;

use common::*;

fn run_memory(args: &[&str]) -> std::process::Command {
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
}

#[test]
fn outputs_are_copied_from_a_read_only_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let x = pattern(70_000);
    write(&data, "x", &x);
    write(&data, "sub/z", b"nested");
    let out = tmp.path().join("out");
    let o = output(run_memory(&[
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
    assert_eq!(std::fs::read(out.join("y")).unwrap(), x);
    assert!(
        stderr(&o).contains("checkfu: image demo@sha256:"),
        "{}",
        describe(&o)
    );
}

#[test]
fn the_workload_status_is_the_exit_status() {
    let o = output(run_memory(&["--", "sh", "-c", "exit 42"]));
    assert_eq!(code(&o), 42, "{}", describe(&o));
    let o = output(run_memory(&["--", "no-such-command"]));
    assert_eq!(code(&o), 127, "{}", describe(&o));
    let o = output(run_memory(&["--", "true"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
}

#[test]
fn stdout_stderr_and_environment_reach_the_caller() {
    let o = output(run_memory(&["--env", "GREETING=hello world", "--", "env"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains("GREETING=hello world"),
        "{}",
        describe(&o)
    );
    let o = output(run_memory(&["--", "cat", "/nope"]));
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("/nope"), "{}", describe(&o));
}

#[test]
fn a_timed_out_workload_exits_124() {
    let o = output(run_memory(&["--timeout", "1", "--", "sleep", "30"]));
    assert_eq!(code(&o), 124, "{}", describe(&o));
    assert!(
        stderr(&o).contains("timed out after 1 s"),
        "{}",
        describe(&o)
    );
}

#[test]
fn a_prompt_goes_to_stdin_and_stdout_comes_back_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let prompt = pattern(3 * 1024 * 1024);
    let p = write(tmp.path(), "p.txt", &prompt);
    let o = output(run_memory(&["--prompt", p.to_str().unwrap(), "--", "cat"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        o.stdout == prompt,
        "stdout differs ({} bytes)",
        o.stdout.len()
    );
}

#[test]
fn a_git_revision_stages_as_a_read_only_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let head = git_repo(&repo, &[("docs/a.txt", b"from git\n")]);
    let o = output(run_memory(&[
        "--git",
        &format!("{}:{head}:docs:/src", repo.display()),
        "--",
        "cat",
        "/src/a.txt",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "from git\n");
    let o = output(run_memory(&[
        "--git",
        &format!("{}:{head}:docs:/src", repo.display()),
        "--",
        "touch",
        "/src/new",
    ]));
    assert_ne!(code(&o), 0, "a git mount is read-only: {}", describe(&o));
}

#[test]
fn durable_runs_print_the_snapshot_id() {
    let o = output(run_memory(&["--durable", "--", "true"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stderr(&o).contains("checkfu: snapshot mem-snap-"),
        "{}",
        describe(&o)
    );
}

#[test]
fn bad_input_fails_with_one_line_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mount = format!("{}:/tmp/x", data.display());
    let o = output(run_memory(&["--mount", &mount, "--", "true"]));
    assert_one_line_failure(
        &o,
        125,
        &[
            "SandboxCapabilityUnavailable: requirement mounts",
            "reserved root /tmp",
            &mount,
        ],
    );

    let missing = format!("{}:/data", tmp.path().join("missing").display());
    let o = output(run_memory(&["--mount", &missing, "--", "true"]));
    assert_one_line_failure(
        &o,
        125,
        &["operation stage_folder", "reason not_found", &missing],
    );

    let repo = tmp.path().join("repo");
    git_repo(&repo, &[("a", b"a")]);
    let git = format!("{}:no-such-rev::/src", repo.display());
    let o = output(run_memory(&["--git", &git, "--", "true"]));
    assert_one_line_failure(&o, 125, &["operation stage_git", "no-such-rev", &git]);

    // A key the contract refuses is a usage error naming flag and key.
    let o = output(run_memory(&["--env", "1BAD=x", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--env 1BAD=x", "\"1BAD\""]);

    let many: Vec<String> = (0..257).map(|i| i.to_string()).collect();
    let mut c = run_memory(&["--", "echo"]);
    c.args(&many);
    let o = output(&mut c);
    assert_one_line_failure(
        &o,
        125,
        &[
            "field command.arguments",
            "at most 256 arguments",
            "actual 257 arguments",
        ],
    );

    let o = output(run_memory(&["--mount", "no-colon", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--mount no-colon"]);
    let o = output(run_memory(&["--env", "NOEQUALS", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--env NOEQUALS"]);
    let o = output(run_memory(&["--output-limit", "99999999999", "--", "true"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--output-limit"), "{}", describe(&o));
    let o = output(checkfu().args(["sandbox", "run", "--image", "demo:1", "true"]));
    assert_eq!(code(&o), 2, "the command needs --: {}", describe(&o));
}

#[test]
fn sigint_destroys_the_instance_and_exits_130() {
    let mut c = run_memory(&["--", "sleep", "60"]);
    c.env("RUST_LOG", "checkfu=info");
    let mut w = Watched::spawn(&mut c);
    w.wait_for_line("workload started", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    w.interrupt();
    let (status, lines) = w.finish(Duration::from_secs(30));
    assert_eq!(status, 130, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("interrupted; destroying instance mem-inst-")),
        "{lines:#?}"
    );
}

#[test]
fn staging_many_files_shows_progress_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    for i in 0..150 {
        write(
            &data,
            &format!("d{}/f{i}", i % 7),
            format!("{i}").as_bytes(),
        );
    }
    let o = output(run_memory(&[
        "--mount",
        &format!("{}:/data:ro", data.display()),
        "--",
        "cat",
        "/data/d3/f10",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "10");
    let err = stderr(&o);
    assert!(
        err.contains("checkfu: staging /data: 15/150 files"),
        "{err}"
    );
    assert!(
        err.contains("checkfu: staging /data: 150/150 files"),
        "{err}"
    );
}

#[test]
fn an_output_over_16_mib_is_named_and_the_run_exits_125() {
    let tmp = tempfile::tempdir().unwrap();
    let size = 16 * 1024 * 1024 + 1;
    let p = write(tmp.path(), "p.bin", &vec![7u8; size]);
    let out = tmp.path().join("out");
    let o = output(run_memory(&[
        "--outputs",
        out.to_str().unwrap(),
        "--prompt",
        p.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "cat > /mnt/session/outputs/big",
    ]));
    assert_eq!(code(&o), 125, "{}", describe(&o));
    let err = stderr(&o);
    let skipped: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("/mnt/session/outputs/big"))
        .collect();
    assert_eq!(skipped.len(), 1, "{err}");
    assert!(
        skipped[0].contains(&format!("{size} bytes")) && skipped[0].contains("16 MiB"),
        "{err}"
    );
    assert!(
        err.contains("the workload exited with status 0; the output copy is incomplete"),
        "{err}"
    );
    assert!(out.is_dir(), "the output folder is created: {err}");
    assert!(!out.join("big").exists());
    let help = output(checkfu().args(["sandbox", "run", "--help"]));
    let help = stdout(&help)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("or when the output copy is incomplete (the workload's status is reported on stderr first)"),
        "{help}"
    );
}

#[test]
fn prompt_and_output_limit_together_are_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "p.txt", b"hi\n");
    let o = output(run_memory(&[
        "--prompt",
        p.to_str().unwrap(),
        "--output-limit",
        "10",
        "--",
        "cat",
    ]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(
        stderr(&o).contains("cannot be used with"),
        "{}",
        describe(&o)
    );
}

#[test]
fn a_repeated_env_key_is_refused() {
    let o = output(run_memory(&[
        "--env", "KEY=one", "--env", "OTHER=x", "--env", "KEY=two", "--", "env",
    ]));
    assert_one_line_failure(
        &o,
        125,
        &[
            "field command.environment",
            "KEY given more than once",
            "--env KEY",
        ],
    );
    assert_eq!(stdout(&o), "", "nothing ran: {}", describe(&o));
}

#[test]
fn resource_limits_the_oracle_does_not_enforce_are_refused() {
    // No flag: the oracle enforces no process limit, so no default is asked.
    let o = output(run_memory(&["--", "true"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    for flag in [["--pids", "64"], ["--memory", "512M"], ["--cpus", "1.5"]] {
        let o = output(run_memory(&[flag[0], flag[1], "--", "true"]));
        assert_one_line_failure(&o, 125, &["resources"]);
    }
    for bad in [
        ["--pids", "0"],
        ["--memory", "12Q"],
        ["--memory", "0"],
        ["--cpus", "0"],
        ["--cpus", "1.2345"],
    ] {
        let o = output(run_memory(&[bad[0], bad[1], "--", "true"]));
        assert_eq!(code(&o), 2, "{bad:?}: {}", describe(&o));
    }
}

#[test]
fn an_output_that_cannot_be_written_is_named_and_the_rest_is_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // A link in the host folder where an output file would go: never
    // followed, so that one file cannot be written.
    let victim = tmp.path().join("victim");
    std::os::unix::fs::symlink(&victim, out.join("b")).unwrap();
    let o = output(run_memory(&[
        "--outputs",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "touch /mnt/session/outputs/a /mnt/session/outputs/b /mnt/session/outputs/c; exit 3",
    ]));
    assert_eq!(code(&o), 125, "{}", describe(&o));
    let err = stderr(&o);
    assert!(err.contains("/mnt/session/outputs/b not copied"), "{err}");
    assert!(
        err.contains("the workload exited with status 3; the output copy is incomplete"),
        "{err}"
    );
    assert!(out.join("a").is_file() && out.join("c").is_file(), "{err}");
    assert!(!victim.exists(), "the link was followed");
}

#[test]
fn a_zero_timeout_and_a_relative_workdir_are_usage_errors() {
    let o = output(run_memory(&["--timeout", "0", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--timeout 0"]);
    let o = output(run_memory(&["--workdir", "src", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--workdir src", "absolute"]);
}

#[test]
fn an_output_limit_over_16_mib_and_a_bad_mount_mode_are_usage_errors() {
    let o = output(run_memory(&["--output-limit", "16777217", "--", "true"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--output-limit"), "{}", describe(&o));
    assert!(stderr(&o).contains("16777217"), "{}", describe(&o));
    let o = output(run_memory(&["--mount", "data:/d:xx", "--", "true"]));
    assert_one_line_failure(&o, 2, &["--mount data:/d:xx", "ro or rw", "\"xx\""]);
}

#[test]
fn sighup_destroys_the_instance_and_exits_129() {
    let mut c = run_memory(&["--", "sleep", "60"]);
    c.env("RUST_LOG", "checkfu=info");
    let mut w = Watched::spawn(&mut c);
    w.wait_for_line("workload started", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    w.signal(rustix::process::Signal::HUP);
    let (status, lines) = w.finish(Duration::from_secs(30));
    assert_eq!(status, 129, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("destroying instance mem-inst-")),
        "{lines:#?}"
    );
}
