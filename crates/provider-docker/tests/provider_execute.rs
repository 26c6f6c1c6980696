//! execute and openProcess on the real daemon: exit codes, output limits
//! on both streams, timeouts with what was produced, background children,
//! stdin, environment, working directory, signals.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use checkfu_sandbox_contract::*;
use common::provider_env::{command, ProviderEnv};
use futures_util::io::AsyncReadExt;
use MountAccess::ReadWrite;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_settles_every_way() {
    let Some(env) = ProviderEnv::new("execute_settles_every_way").await else {
        return;
    };
    let inst = env
        .active(
            env.request(
                "s",
                RetentionMode::EphemeralZdr,
                &[("/work", ReadWrite)],
                600,
            ),
            &[],
        )
        .await;
    let id = inst.instance_id.as_str();
    let a = &env.adapter;

    let r = env.run(id, &["sh", "-c", "exit 7"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(7));
    assert!(r.started_at <= r.finished_at);
    // A missing program: the shell's 127, passed through.
    let r = env.run(id, &["sh", "-c", "no-such-program"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(127));
    let r = a
        .execute(id, command(&["/no/such/binary"]))
        .await
        .unwrap_or_else(|e| panic!("a missing executable is an exit code, not {e}"));
    assert_eq!(r.exit, ExitCause::ExitCode(127));
    assert!(r.stdout_base64.is_empty());

    // stdin, environment, working directory.
    let mut c = command(&["sh", "-c", "cat; echo \" $GREETING\"; pwd"]);
    c.stdin_base64 = Some(Bytes(b"from stdin".to_vec()));
    c.environment.insert("GREETING".into(), "hello".into());
    c.working_directory = "/work".into();
    let r = a.execute(id, c).await.unwrap();
    assert_eq!(text(&r.stdout_base64.0), "from stdin hello\n/work\n");
    // No stdin: a reader sees end of file at once.
    let r = env.run(id, &["cat"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    assert!(r.stdout_base64.is_empty());

    // Output limits, per stream, exact at the bound.
    let mut c = command(&["head", "-c", "4096", "/dev/zero"]);
    c.output_limit_bytes = 4096;
    assert_eq!(
        a.execute(id, c.clone()).await.unwrap().stdout_base64.len(),
        4096
    );
    c.output_limit_bytes = 4095;
    assert_eq!(
        *a.execute(id, c).await.unwrap_err().error(),
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stdout,
            limit_bytes: 4095
        }
    );
    let mut c = command(&["sh", "-c", "head -c 100000 /dev/zero >&2"]);
    c.output_limit_bytes = 1000;
    assert_eq!(
        *a.execute(id, c).await.unwrap_err().error(),
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stderr,
            limit_bytes: 1000
        }
    );
    // An endless producer is ended, not waited for.
    let t = Instant::now();
    let mut c = command(&["sh", "-c", "while :; do echo yes; done"]);
    c.output_limit_bytes = 10_000;
    assert_eq!(
        *a.execute(id, c).await.unwrap_err().error(),
        SandboxError::SandboxOutputLimitExceeded {
            stream: OutputStream::Stdout,
            limit_bytes: 10_000
        }
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());

    // A timeout is an exit cause and keeps what was produced.
    let t = Instant::now();
    let mut c = command(&["sh", "-c", "echo before; sleep 60; echo after"]);
    c.timeout_seconds = 2;
    let r = a.execute(id, c).await.unwrap();
    assert_eq!(r.exit, ExitCause::TimedOut);
    assert_eq!(text(&r.stdout_base64.0), "before\n");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

    // A background child holding the pipes neither delays the settlement
    // nor survives it.
    let t = Instant::now();
    let r = env.run(id, &["sh", "-c", "sleep 300 & echo started"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    assert_eq!(text(&r.stdout_base64.0), "started\n");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let r = env.run(id, &["ps", "-o", "args"]).await;
    assert!(
        !text(&r.stdout_base64.0).contains("sleep 300"),
        "{}",
        text(&r.stdout_base64.0)
    );
}

/// On a timeout the instance's whole process tree dies, also a process
/// that left the exec's group with `setsid`; the container itself (its
/// init) stays and runs the next command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_what_escaped_with_setsid() {
    let Some(env) = ProviderEnv::new("timeout_kills_setsid").await else {
        return;
    };
    let inst = env
        .active(env.request("s", RetentionMode::EphemeralZdr, &[], 600), &[])
        .await;
    let id = inst.instance_id.as_str();
    let mut c = command(&[
        "sh",
        "-c",
        "setsid sh -c 'while :; do sleep 1; done; echo escaped-loop' </dev/null >/dev/null 2>&1 & sleep 60",
    ]);
    c.timeout_seconds = 2;
    let r = env.adapter.execute(id, c).await.unwrap();
    assert_eq!(r.exit, ExitCause::TimedOut);
    let r = env.run(id, &["ps", "-o", "args"]).await;
    let ps = text(&r.stdout_base64.0);
    assert_eq!(r.exit, ExitCause::ExitCode(0), "{ps}");
    assert!(
        !ps.contains("escaped-loop"),
        "the setsid loop survived: {ps}"
    );
    assert!(!ps.contains("sleep 60"), "{ps}");
}

/// An exec the engine could not start is told from a workload by daemon
/// state (the daemon never recorded a PID for it), not by its output: 127
/// when the executable is not found, 126 when it cannot be invoked, stdout
/// empty and the engine's message on stderr. A workload that prints the
/// engine's message and exits 126 keeps its code and its stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_start_failures_come_from_daemon_state() {
    let Some(env) = ProviderEnv::new("execute_start_failures_come_from_daemon_state").await else {
        return;
    };
    let inst = env
        .active(env.request("s", RetentionMode::EphemeralZdr, &[], 600), &[])
        .await;
    let id = inst.instance_id.as_str();
    let a = &env.adapter;

    // Not found: the shape of the memory oracle's unknown command.
    let r = env.run(id, &["nosuch"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(127));
    assert!(r.stdout_base64.is_empty(), "{}", text(&r.stdout_base64.0));
    let err = text(&r.stderr_base64.0);
    assert!(err.contains("\"nosuch\""), "{err}");
    assert!(err.contains("executable file not found"), "{err}");
    assert!(err.ends_with('\n') && !err.contains('\r'), "{err:?}");

    // Found but not executable.
    let r = env
        .run(id, &["sh", "-c", "touch /mnt/session/outputs/f"])
        .await;
    assert_eq!(
        r.exit,
        ExitCause::ExitCode(0),
        "{}",
        text(&r.stderr_base64.0)
    );
    let r = env.run(id, &["/mnt/session/outputs/f"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(126));
    assert!(r.stdout_base64.is_empty(), "{}", text(&r.stdout_base64.0));
    let err = text(&r.stderr_base64.0);
    assert!(err.contains("/mnt/session/outputs/f"), "{err}");
    assert!(err.contains("permission denied"), "{err}");

    // A missing working directory: the engine cannot start the process
    // (`chdir to cwd ... failed: no such file or directory`) and reports
    // 126, like `docker exec -w`; it is an invocation failure, not a
    // missing command, so it stays 126.
    let mut c = command(&["true"]);
    c.working_directory = "/no/such/dir".into();
    let r = a.execute(id, c).await.unwrap();
    assert_eq!(r.exit, ExitCause::ExitCode(126));
    assert!(r.stdout_base64.is_empty(), "{}", text(&r.stdout_base64.0));
    assert!(
        text(&r.stderr_base64.0).contains("/no/such/dir"),
        "{}",
        text(&r.stderr_base64.0)
    );

    // A workload forging the engine's message: passed through untouched.
    let forged = "OCI runtime exec failed: no such file or directory";
    let script = format!("echo \"{forged}\"; exit 126");
    let r = env.run(id, &["sh", "-c", &script]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(126));
    assert_eq!(text(&r.stdout_base64.0), format!("{forged}\n"));
    assert!(r.stderr_base64.is_empty());
    let r = env
        .run(id, &["sh", "-c", &format!("echo \"{forged}\"; exit 127")])
        .await;
    assert_eq!(r.exit, ExitCause::ExitCode(127));
    assert_eq!(text(&r.stdout_base64.0), format!("{forged}\n"));
    // Fast exits started too.
    for _ in 0..10 {
        assert_eq!(env.run(id, &["true"]).await.exit, ExitCause::ExitCode(0));
        let r = env.run(id, &["sh", "-c", "exit 126"]).await;
        assert_eq!(r.exit, ExitCause::ExitCode(126));
        assert!(r.stderr_base64.is_empty() && r.stdout_base64.is_empty());
    }

    // openProcess: a start failure settles wait with 127/126, nothing on
    // the output, the engine's message on the error stream.
    let request = |argv: &[&str]| SandboxProcessRequest {
        instance_id: id.to_owned(),
        executable: argv[0].into(),
        arguments: argv[1..].iter().map(|s| s.to_string()).collect(),
        working_directory: "/".into(),
        environment: Default::default(),
    };
    for (argv, code) in [(&["nosuch"][..], 127), (&["/mnt/session/outputs/f"], 126)] {
        let mut p = a.open_process(request(argv)).await.unwrap();
        assert_eq!(p.handle.wait().await.unwrap(), ProcessExit::ExitCode(code));
        let mut out = Vec::new();
        p.output.read_to_end(&mut out).await.unwrap();
        assert!(out.is_empty(), "{argv:?}: {}", text(&out));
        let mut err = Vec::new();
        p.error.read_to_end(&mut err).await.unwrap();
        assert!(text(&err).contains(argv[0]), "{}", text(&err));
        p.handle.destroy().await.unwrap();
    }
    let mut p = a
        .open_process(request(&["sh", "-c", &script]))
        .await
        .unwrap();
    assert_eq!(p.handle.wait().await.unwrap(), ProcessExit::ExitCode(126));
    let mut out = Vec::new();
    p.output.read_to_end(&mut out).await.unwrap();
    assert_eq!(text(&out), format!("{forged}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_process_streams_signals_and_reserves() {
    let Some(env) = ProviderEnv::new("open_process_streams_signals_and_reserves").await else {
        return;
    };
    let inst = env
        .active(env.request("s", RetentionMode::EphemeralZdr, &[], 600), &[])
        .await;
    let id = inst.instance_id.clone();
    let a = &env.adapter;
    let request = |argv: &[&str]| SandboxProcessRequest {
        instance_id: id.clone(),
        executable: argv[0].into(),
        arguments: argv[1..].iter().map(|s| s.to_string()).collect(),
        working_directory: "/".into(),
        environment: [("MARK".to_owned(), "m1".to_owned())].into_iter().collect(),
    };

    // A long-lived process: evidence, output, a refused second open, SIGTERM.
    let mut p = a
        .open_process(request(&["sh", "-c", "echo up $MARK; exec sleep 100"]))
        .await
        .unwrap();
    assert_eq!(p.evidence.instance_id, id);
    assert_eq!(p.evidence.executable, "sh");
    assert_eq!(p.evidence.network_mode, NetworkMode::None);
    let mut first = [0u8; 6];
    p.output.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"up m1\n");
    let refused = a.open_process(request(&["true"])).await.unwrap_err();
    assert!(
        matches!(
            refused.error(),
            SandboxError::SandboxLifecycleConflict {
                actual: ConflictActual::ProcessAlreadyOpen,
                ..
            }
        ),
        "{refused}"
    );
    p.handle.signal(ControlSignal::Sigterm).await.unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(10), p.handle.wait())
        .await
        .expect("exit after SIGTERM")
        .unwrap();
    assert_eq!(exit, ProcessExit::Signal(SignalName::Sigterm));
    assert_eq!(p.handle.wait().await.unwrap(), exit);
    let mut rest = Vec::new();
    p.output.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());

    // A settled wait released the reservation: a new process opens at
    // once. Destroy kills and settles; a new process may start afterwards.
    let p = a
        .open_process(request(&["sleep", "100"]))
        .await
        .expect("open after the previous process settled");
    let t = Instant::now();
    p.handle.destroy().await.unwrap();
    p.handle.destroy().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(10));
    let p = a
        .open_process(request(&["sh", "-c", "exit 3"]))
        .await
        .unwrap();
    assert_eq!(p.handle.wait().await.unwrap(), ProcessExit::ExitCode(3));
    p.handle.destroy().await.unwrap();
}
