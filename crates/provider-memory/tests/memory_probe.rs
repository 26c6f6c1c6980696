//! The probe vocabulary (DESIGN D15) through execute.

mod common;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::FsNode;
use common::*;

async fn fixture() -> (checkfu_sandbox_memory::MemoryProvider, ManualClock, String) {
    let (p, clock) = provider();
    let id = active_with(
        &p,
        &request(RetentionMode::EphemeralZdr),
        &[("/data/ro/in.txt", b"hello\nworld\n")],
    )
    .await;
    (p, clock, id)
}

#[tokio::test]
async fn the_probe_commands_behave_like_busybox() {
    let (p, _, id) = fixture().await;
    let cases: Vec<(Vec<&str>, u8, &str)> = vec![
        (vec!["true"], 0, ""),
        (vec!["false"], 1, ""),
        (vec!["/bin/true"], 0, ""),
        (vec!["cat", "/data/ro/in.txt"], 0, "hello\nworld\n"),
        (vec!["head", "-c", "3", "/data/ro/in.txt"], 0, "hel"),
        (vec!["head", "-n", "1", "/data/ro/in.txt"], 0, "hello\n"),
        (vec!["echo", "a", "b"], 0, "a b\n"),
        (vec!["echo", "-n", "a"], 0, "a"),
        (vec!["sh", "-c", "exit 3"], 3, ""),
        (vec!["sh", "-c", "exit 300"], 44, ""),
        (vec!["sh", "-c", "echo 'x y'; false"], 1, "x y\n"),
        (vec!["ls", "/data"], 0, "ro\nrw\n"),
        (vec!["ls", "/data/ro/in.txt"], 0, "/data/ro/in.txt\n"),
        (vec!["pwd"], 0, "/\n"),
        (vec!["busybox", "echo", "z"], 0, "z\n"),
        (
            vec!["sha256sum", "/data/ro/in.txt"],
            0,
            "(checked below: 64 hex digits, two spaces, the path)",
        ),
    ];
    for (argv, code, out) in cases {
        let r = run(&p, &id, &argv).await;
        assert_eq!(
            r.exit,
            ExitCause::ExitCode(code),
            "{argv:?}: {}",
            stderr(&r)
        );
        if argv[0] != "sha256sum" {
            assert_eq!(stdout(&r), out, "{argv:?}");
        } else {
            assert!(stdout(&r).ends_with("  /data/ro/in.txt\n"));
            assert_eq!(stdout(&r).len(), 64 + 2 + 16);
        }
    }
}

#[tokio::test]
async fn sha256sum_is_the_real_digest() {
    let (p, _, id) = fixture().await;
    let mut c = command(&["sha256sum"]);
    c.stdin_base64 = Some(Bytes(b"abc".to_vec()));
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(
        stdout(&r),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n"
    );
}

#[tokio::test]
async fn failures_have_posix_codes_and_messages() {
    let (p, _, id) = fixture().await;
    let r = run(&p, &id, &["frobnicate", "x"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(127));
    assert!(stderr(&r).contains("not found"));
    let r = run(&p, &id, &["cat", "/nope"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(1));
    assert!(stderr(&r).contains("No such file or directory"));
    let r = run(&p, &id, &["cat", "/data"]).await;
    assert!(stderr(&r).contains("Is a directory"));
    let r = run(&p, &id, &["sh", "-c", "cat x | wc"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(2));
}

#[tokio::test]
async fn stdin_feeds_cat_and_env_is_deterministic() {
    let (p, _, id) = fixture().await;
    let mut c = command(&["cat"]);
    c.stdin_base64 = Some(Bytes(b"from stdin".to_vec()));
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(stdout(&r), "from stdin");
    let mut c = command(&["env"]);
    c.environment.insert("ZED".into(), "1".into());
    c.environment.insert("HOME".into(), "/root".into());
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(
        stdout(&r),
        format!(
            "HOME=/root\nHOSTNAME={}\nPATH=/usr/local/bin:/usr/bin:/bin\nZED=1\n",
            checkfu_sandbox_memory::INSTANCE_HOSTNAME
        )
    );
    let r = run(&p, &id, &["env", "A=b", "sh", "-c", "env"]).await;
    assert!(stdout(&r).starts_with("A=b\n"));
}

#[tokio::test]
async fn files_and_links_can_be_planted_by_workloads() {
    let (p, _, id) = fixture().await;
    for argv in [
        vec!["mkdir", "-p", "/data/rw/a/b"],
        vec!["cp", "/data/ro/in.txt", "/data/rw/a/b/"],
        vec!["ln", "-s", "../../../ro/in.txt", "/data/rw/a/b/link"],
        vec!["mkfifo", "/data/rw/pipe"],
        vec!["touch", "/mnt/session/outputs/t"],
    ] {
        let r = run(&p, &id, &argv).await;
        assert_eq!(r.exit, ExitCause::ExitCode(0), "{argv:?}: {}", stderr(&r));
    }
    assert_eq!(
        p.node(&id, "/data/rw/a/b/in.txt"),
        Some(FsNode::File(b"hello\nworld\n".to_vec()))
    );
    let r = run(&p, &id, &["cat", "/data/rw/a/b/link"]).await;
    assert_eq!(stdout(&r), "hello\nworld\n");
    let r = run(&p, &id, &["rm", "/data/rw/a"]).await;
    assert!(stderr(&r).contains("Is a directory"));
    let r = run(&p, &id, &["rm", "-r", "/data/rw/a"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    assert!(p.node(&id, "/data/rw/a/b/in.txt").is_none());
    let r = run(&p, &id, &["ln", "-s", "x", "/data/rw/pipe"]).await;
    assert!(stderr(&r).contains("File exists"));
}

#[tokio::test]
async fn sleep_moves_the_clock_and_timeouts_settle_timed_out() {
    let (p, clock, id) = fixture().await;
    let before = clock.now();
    let r = run(&p, &id, &["sleep", "5"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    assert_eq!(r.started_at, before);
    assert_eq!(r.finished_at, before.add_seconds(5));
    let mut c = command(&["sleep", "100"]);
    c.timeout_seconds = 10;
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(r.exit, ExitCause::TimedOut);
    assert_eq!(r.finished_at, r.started_at.add_seconds(10));
    assert_eq!(clock.now(), before.add_seconds(15));
    // A read that blocks forever (a fifo) also runs into the timeout.
    run(&p, &id, &["mkfifo", "/tmp/f"]).await;
    let mut c = command(&["cat", "/tmp/f"]);
    c.timeout_seconds = 2;
    assert_eq!(
        exec_cmd(&p, &id, c).await.unwrap().exit,
        ExitCause::TimedOut
    );
}

#[tokio::test]
async fn large_output_and_the_limit() {
    let (p, _, id) = fixture().await;
    let mut c = command(&["head", "-c", "100000", "/dev/zero"]);
    c.output_limit_bytes = 100_000;
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(r.stdout_base64.len(), 100_000);
    assert!(r.stdout_base64.as_slice().iter().all(|b| *b == 0));
    let mut c = command(&["head", "-c", "100001", "/dev/zero"]);
    c.output_limit_bytes = 100_000;
    let e = exec_cmd(&p, &id, c).await.unwrap_err();
    assert_eq!(
        e,
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stdout,
            limit_bytes: 100_000
        }
    );
    let mut c = command(&["cat", "/dev/zero"]);
    c.output_limit_bytes = 1000;
    assert!(matches!(
        exec_cmd(&p, &id, c).await.unwrap_err(),
        SandboxError::SandboxOutputLimitExceeded { .. }
    ));
    let mut c = command(&["cat", "/nope"]);
    c.output_limit_bytes = 4;
    assert!(matches!(
        exec_cmd(&p, &id, c).await.unwrap_err(),
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stderr,
            ..
        }
    ));
}

#[tokio::test]
async fn execute_needs_a_running_instance() {
    let (p, _) = provider();
    let id = provision(&p, &request(RetentionMode::EphemeralZdr)).await;
    let e = exec_cmd(&p, &id, command(&["true"])).await.unwrap_err();
    assert_eq!(
        e,
        SandboxError::conflict(op::EXECUTE, "active", ConflictActual::Provisioning)
    );
}

#[tokio::test]
async fn relative_paths_use_the_working_directory() {
    let (p, _, id) = fixture().await;
    let mut c = command(&["cat", "in.txt"]);
    c.working_directory = "/data/ro".into();
    assert_eq!(
        stdout(&exec_cmd(&p, &id, c).await.unwrap()),
        "hello\nworld\n"
    );
}

/// Every link in `/bin` names a command the interpreter runs, as every
/// applet link of the fixture's busybox does: none is `not found`.
#[tokio::test]
async fn every_program_in_bin_runs_a_built_in() {
    let (p, _, id) = fixture().await;
    let listing = run(&p, &id, &["ls", "/bin"]).await;
    let names: Vec<String> = stdout(&listing).lines().map(str::to_owned).collect();
    assert!(names.len() > 10, "{names:?}");
    for name in names.iter().filter(|n| *n != "busybox") {
        let path = format!("/bin/{name}");
        let r = run(&p, &id, &[path.as_str()]).await;
        assert!(
            !stderr(&r).contains(&format!("{path}: not found")),
            "{path}: {}",
            stderr(&r)
        );
    }
    let r = run(&p, &id, &["/bin/no-such-applet"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(127), "{}", stderr(&r));
}
