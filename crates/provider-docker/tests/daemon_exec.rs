//! Bounded exec against the real daemon: exit codes, stdin, limits,
//! timeouts, background children, process-tree kills.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use checkfu_sandbox_docker::daemon::{self, ExecOutcome, ExecRequest, OutputStream};

fn exited(report: &daemon::ExecReport) -> (i64, &[u8], &[u8]) {
    match &report.outcome {
        ExecOutcome::Exited {
            code,
            stdout,
            stderr,
        } => (*code, stdout, stderr),
        other => panic!("expected Exited, got {other:?}"),
    }
}

/// Processes in the container other than its init shell, the init's
/// `sleep 3600`, and the `ps` itself.
async fn stray_processes(docker: &bollard::Docker, id: &str) -> Vec<String> {
    let r = daemon::exec_bounded(docker, id, &ExecRequest::new(&["ps", "-o", "pid,args"]))
        .await
        .unwrap();
    let (_, out, _) = exited(&r);
    String::from_utf8_lossy(out)
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            // pid 1 (init), init's `sleep 3600`, and ps itself.
            !(f.first() == Some(&"1") || f[1..] == ["sleep", "3600"] || f.get(1) == Some(&"ps"))
        })
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_exec_behaviour() {
    let Some(docker) = common::docker_or_skip("bounded_exec_behaviour").await else {
        return;
    };
    let cleanup = common::Cleanup::new("bounded-exec");
    common::fixture_ref(&docker).await;
    let t = Instant::now();
    let id = common::start_container(&docker, &cleanup, Vec::new()).await;
    eprintln!("timing: container create+start {:?}", t.elapsed());

    // true / exit codes.
    for _ in 0..3 {
        let r = daemon::exec_bounded(&docker, &id, &ExecRequest::new(&["true"]))
            .await
            .unwrap();
        assert_eq!(exited(&r).0, 0);
        eprintln!("timing: exec true {:?}", r.ended_at - r.started_at);
    }
    let r = daemon::exec_bounded(&docker, &id, &ExecRequest::new(&["false"]))
        .await
        .unwrap();
    assert_eq!(exited(&r).0, 1);
    let r = daemon::exec_bounded(
        &docker,
        &id,
        &ExecRequest::new(&["sh", "-c", "echo out; echo err >&2; exit 7"]),
    )
    .await
    .unwrap();
    assert_eq!(exited(&r), (7, &b"out\n"[..], &b"err\n"[..]));
    // Missing binary: not an error, and not output. The daemon recorded an
    // exit (126 whatever the cause) but never a PID; the daemon's message
    // is the failure's, classified 127.
    let r = daemon::exec_bounded(&docker, &id, &ExecRequest::new(&["/no/such"]))
        .await
        .unwrap();
    match &r.outcome {
        ExecOutcome::StartFailed(f) => {
            assert_eq!(f.code, 127, "{f:?}");
            assert!(f.message.contains("\"/no/such\""), "{f:?}");
            assert!(f.message.starts_with("OCI runtime exec failed"), "{f:?}");
        }
        other => panic!("expected StartFailed, got {other:?}"),
    }
    let info = docker.inspect_exec(&r.exec_id).await.unwrap();
    assert_eq!(
        (info.pid.unwrap_or(0), info.running, info.exit_code),
        (0, Some(false), Some(126))
    );
    // Even a limit the daemon's own message passes does not turn it into
    // workload output.
    let mut req = ExecRequest::new(&["nosuch"]);
    req.output_limit_bytes = 8;
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert!(
        matches!(&r.outcome, ExecOutcome::StartFailed(f) if f.code == 127 && f.message.contains("executable file not found")),
        "{:?}",
        r.outcome
    );
    // Real processes that exit at once did start: the daemon keeps their
    // PID after the exit, so neither a fast exit nor a forged message
    // passes for a start failure.
    for argv in [
        &["true"][..],
        &["sh", "-c", "exit 126"],
        &[
            "sh",
            "-c",
            "echo 'OCI runtime exec failed: no such file'; exit 126",
        ],
    ] {
        for _ in 0..10 {
            let r = daemon::exec_bounded(&docker, &id, &ExecRequest::new(argv))
                .await
                .unwrap();
            let (code, _, _) = exited(&r);
            assert_eq!(code, if argv[0] == "true" { 0 } else { 126 }, "{argv:?}");
            let info = docker.inspect_exec(&r.exec_id).await.unwrap();
            assert!(info.pid.unwrap_or(0) > 0, "{argv:?}: {info:?}");
            assert_eq!(info.running, Some(false), "{argv:?}");
        }
    }
    // Env and working dir.
    let mut req = ExecRequest::new(&["sh", "-c", "echo $FOO; pwd"]);
    req.env = vec!["FOO=bar baz".into()];
    req.working_dir = Some("/tmp".into());
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(exited(&r).1, b"bar baz\n/tmp\n");
    // User.
    let mut req = ExecRequest::new(&["id", "-u"]);
    req.user = Some("1000:1000".into());
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(exited(&r).1, b"1000\n");

    // No stdin attached: cat sees EOF at once.
    let t = Instant::now();
    let r = daemon::exec_bounded(&docker, &id, &ExecRequest::new(&["cat"]))
        .await
        .unwrap();
    assert_eq!(exited(&r), (0, &b""[..], &b""[..]));
    assert!(t.elapsed() < Duration::from_secs(2));
    // Stdin given: written, half-closed, echoed.
    let mut req = ExecRequest::new(&["sha256sum"]);
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    req.stdin = Some(data.clone());
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    let want = checkfu_sandbox_docker::fixture::hex(&<sha2::Sha256 as sha2::Digest>::digest(&data));
    assert_eq!(
        String::from_utf8_lossy(exited(&r).1),
        format!("{want}  -\n")
    );
    let mut req = ExecRequest::new(&["cat"]);
    req.stdin = Some(b"hello\n".to_vec());
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(exited(&r).1, b"hello\n");

    // Exactly at the limit passes; one byte more ends it.
    let mut req = ExecRequest::new(&["head", "-c", "1000", "/dev/zero"]);
    req.output_limit_bytes = 1000;
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(exited(&r).1.len(), 1000);
    let mut req = ExecRequest::new(&["head", "-c", "1001", "/dev/zero"]);
    req.output_limit_bytes = 1000;
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(
        r.outcome,
        ExecOutcome::OutputLimit {
            stream: OutputStream::Stdout,
            limit_bytes: 1000
        }
    );
    // An endless writer with a child is killed as a tree, promptly.
    let t = Instant::now();
    let mut req = ExecRequest::new(&["sh", "-c", "sleep 1000 & cat /dev/zero >&2"]);
    req.output_limit_bytes = 4096;
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(
        r.outcome,
        ExecOutcome::OutputLimit {
            stream: OutputStream::Stderr,
            limit_bytes: 4096
        }
    );
    assert!(r.group_killed && !r.abandoned_stream);
    eprintln!("timing: overflow settled in {:?}", t.elapsed());
    assert!(stray_processes(&docker, &id).await.is_empty());

    // Timeout kills the whole tree.
    let t = Instant::now();
    let mut req = ExecRequest::new(&["sh", "-c", "sleep 1000 & sleep 1000 & echo started; wait"]);
    req.timeout = Duration::from_millis(1500);
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    match &r.outcome {
        ExecOutcome::TimedOut { stdout, .. } => assert_eq!(stdout, b"started\n"),
        other => panic!("{other:?}"),
    }
    let took = t.elapsed();
    eprintln!("timing: 1.5 s timeout settled in {took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(stray_processes(&docker, &id).await.is_empty());

    // A background child holding the pipes does not hold the call.
    let t = Instant::now();
    let r = daemon::exec_bounded(
        &docker,
        &id,
        &ExecRequest::new(&["sh", "-c", "sleep 100 & echo hi"]),
    )
    .await
    .unwrap();
    assert_eq!(exited(&r), (0, &b"hi\n"[..], &b""[..]));
    let took = t.elapsed();
    eprintln!("timing: background child holding pipes settled in {took:?}");
    // The leader is gone within a millisecond, usually before the daemon
    // reports its PID; then the daemon's own 2 s stream grace applies.
    assert!(took < Duration::from_secs(3), "{took:?} {:?}", r.process);
    assert!(stray_processes(&docker, &id).await.is_empty());
    // A leader that lives long enough to be located settles promptly.
    let t = Instant::now();
    let r = daemon::exec_bounded(
        &docker,
        &id,
        &ExecRequest::new(&["sh", "-c", "sleep 100 & echo hi; sleep 0.2"]),
    )
    .await
    .unwrap();
    assert_eq!(exited(&r), (0, &b"hi\n"[..], &b""[..]));
    let took = t.elapsed();
    eprintln!("timing: located leader, background child holding pipes: {took:?}");
    assert!(
        took < Duration::from_millis(1500),
        "{took:?} {:?}",
        r.process
    );
    assert!(stray_processes(&docker, &id).await.is_empty());
    // ...and a failing exit code is kept, not read early as 0.
    let r = daemon::exec_bounded(
        &docker,
        &id,
        &ExecRequest::new(&["sh", "-c", "sleep 100 & head -c 200000 /dev/zero; exit 3"]),
    )
    .await
    .unwrap();
    let (code, out, _) = exited(&r);
    assert_eq!((code, out.len()), (3, 200_000));
    // Reaping off: the detached child survives the call.
    let mut req = ExecRequest::new(&["sh", "-c", "sleep 100 >/dev/null 2>&1 &"]);
    req.reap_group_on_exit = false;
    let r = daemon::exec_bounded(&docker, &id, &req).await.unwrap();
    assert_eq!(exited(&r).0, 0);
    assert_eq!(stray_processes(&docker, &id).await.len(), 1);

    // A signal from inside shows as 128 + n.
    let r = daemon::exec_bounded(&docker, &id, &ExecRequest::new(&["sh", "-c", "kill -9 $$"]))
        .await
        .unwrap();
    assert_eq!(exited(&r).0, 137);

    daemon::remove_container(&docker, &id).await.unwrap();
    daemon::remove_container(&docker, &id).await.unwrap(); // idempotent
    assert!(daemon::inspect_container(&docker, &id)
        .await
        .unwrap()
        .is_none());
}
