//! Streaming exec (the base of openProcess) against the real daemon.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use checkfu_sandbox_docker::daemon::{self, ProcessExit, ProcessSignal};
use tokio::io::AsyncWriteExt;

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

async fn collect(rx: &mut daemon::OutputReceiver) -> Vec<u8> {
    let mut all = Vec::new();
    while let Some(chunk) = rx.next_chunk().await {
        all.extend_from_slice(&chunk);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_exec_behaviour() {
    let Some(docker) = common::docker_or_skip("streaming_exec_behaviour").await else {
        return;
    };
    let cleanup = common::Cleanup::new("streaming-exec");
    let id = common::start_container(&docker, &cleanup, Vec::new()).await;

    // cat echoes, and exits 0 once stdin is half-closed; reads complete after.
    let mut p = daemon::exec_streaming(&docker, &id, &argv(&["cat"]), &[], None, None)
        .await
        .unwrap();
    p.stdin.write_all(b"one prompt\n").await.unwrap();
    p.stdin.shutdown().await.unwrap();
    assert_eq!(collect(&mut p.stdout).await, b"one prompt\n");
    assert_eq!(p.control.wait().await, ProcessExit::Code(0));
    assert_eq!(p.control.wait().await, ProcessExit::Code(0)); // re-readable

    // 64 MiB through stdout, byte-exact, with a slow reader.
    let t = Instant::now();
    let mut p = daemon::exec_streaming(
        &docker,
        &id,
        &argv(&["sh", "-c", "head -c 67108864 /dev/urandom > /tmp/big && sha256sum /tmp/big >&2 && cat /tmp/big && rm /tmp/big"]),
        &[],
        None,
        None,
    )
    .await
    .unwrap();
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    let mut n = 0usize;
    let mut chunks = 0usize;
    while let Some(chunk) = p.stdout.next_chunk().await {
        n += chunk.len();
        chunks += 1;
        sha2::Digest::update(&mut hasher, &chunk);
        if chunks % 64 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await; // slow reader
        }
    }
    let got = checkfu_sandbox_docker::fixture::hex(&sha2::Digest::finalize(hasher));
    let err = String::from_utf8(collect(&mut p.stderr).await).unwrap();
    assert_eq!(n, 64 << 20, "stderr: {err}");
    assert_eq!(err, format!("{got}  /tmp/big\n"));
    assert_eq!(p.control.wait().await, ProcessExit::Code(0));
    eprintln!(
        "timing: 64 MiB streamed in {:?} ({chunks} chunks)",
        t.elapsed()
    );

    // SIGKILL gives the signal, not a code; the process group goes too.
    let p = daemon::exec_streaming(
        &docker,
        &id,
        &argv(&["sh", "-c", "sleep 1000 & sleep 1000"]),
        &[],
        None,
        None,
    )
    .await
    .unwrap();
    assert!(p.control.process().killable(), "{:?}", p.control.process());
    assert_eq!(p.control.try_exit(), None);
    let t = Instant::now();
    p.control.signal(ProcessSignal::Kill).unwrap();
    assert_eq!(
        p.control.wait().await,
        ProcessExit::Signaled(ProcessSignal::Kill)
    );
    eprintln!("timing: SIGKILL to settled wait {:?}", t.elapsed());

    // SIGTERM on a process that traps it and exits 0: a code, not a signal.
    let mut p = daemon::exec_streaming(
        &docker,
        &id,
        &argv(&[
            "sh",
            "-c",
            "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 1; done",
        ]),
        &[],
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(p.stdout.next_chunk().await.unwrap(), b"ready\n");
    p.control.signal(ProcessSignal::Terminate).unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(5), p.control.wait())
        .await
        .unwrap();
    assert_eq!(exit, ProcessExit::Code(0));
    assert_eq!(collect(&mut p.stdout).await, b"bye\n");

    // SIGTERM on a process that does not trap it.
    let p = daemon::exec_streaming(&docker, &id, &argv(&["sleep", "1000"]), &[], None, None)
        .await
        .unwrap();
    p.control.signal(ProcessSignal::Terminate).unwrap();
    assert_eq!(
        p.control.wait().await,
        ProcessExit::Signaled(ProcessSignal::Terminate)
    );

    // A process that never started (daemon state: an exit, never a PID)
    // settles at once: 127 or 126, nothing on stdout, the daemon's message
    // on stderr.
    for (args, code, wd) in [
        (&["nosuch"][..], 127, None),
        (&["/etc"][..], 126, None),
        (&["true"][..], 126, Some("/no/such/dir")),
    ] {
        let mut p = daemon::exec_streaming(&docker, &id, &argv(args), &[], wd, None)
            .await
            .unwrap();
        assert_eq!(p.control.wait().await, ProcessExit::Code(code), "{args:?}");
        let failure = p.control.start_failure().expect("start failure").clone();
        assert_eq!(failure.code as i64, code);
        assert!(collect(&mut p.stdout).await.is_empty(), "{args:?}");
        let err = String::from_utf8(collect(&mut p.stderr).await).unwrap();
        assert_eq!(err, format!("{}\n", failure.message));
        assert!(err.starts_with("OCI runtime exec failed"), "{err}");
    }
    // A started process printing the same text and exiting 126 is just that.
    let mut p = daemon::exec_streaming(
        &docker,
        &id,
        &argv(&[
            "sh",
            "-c",
            "echo 'OCI runtime exec failed: no such file'; exit 126",
        ]),
        &[],
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(p.control.wait().await, ProcessExit::Code(126));
    assert!(p.control.start_failure().is_none());
    assert_eq!(
        collect(&mut p.stdout).await,
        b"OCI runtime exec failed: no such file\n"
    );

    // destroy is idempotent and bounded; wait settles even if nobody reads.
    let p = daemon::exec_streaming(
        &docker,
        &id,
        &argv(&["sh", "-c", "cat /dev/zero"]),
        &[],
        None,
        None,
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first = p.control.destroy(Duration::from_secs(5)).await;
    assert_eq!(first, Some(ProcessExit::Signaled(ProcessSignal::Kill)));
    assert_eq!(p.control.destroy(Duration::from_secs(5)).await, first);
    drop(p);

    daemon::remove_container(&docker, &id).await.unwrap();
}
