//! openProcess: live streams, half-close, exit, signals, the one-process
//! rule, backpressure and evidence.

mod common;

use std::time::Duration;

use checkfu_sandbox_contract::identity::check_process_evidence;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::compat::{FuturesAsyncReadCompatExt, FuturesAsyncWriteCompatExt};

fn proc_request(id: &str, argv: &[&str]) -> SandboxProcessRequest {
    SandboxProcessRequest {
        instance_id: id.into(),
        executable: argv[0].into(),
        arguments: argv[1..].iter().map(|s| s.to_string()).collect(),
        working_directory: "/".into(),
        environment: Default::default(),
    }
}

async fn open(p: &MemoryProvider, id: &str, argv: &[&str]) -> Result<SandboxProcess, SandboxError> {
    SandboxProvider::open_process(p)
        .unwrap()
        .open_process(proc_request(id, argv))
        .await
}

async fn read_all(process: SandboxProcess) -> (Vec<u8>, std::sync::Arc<dyn ProcessControl>) {
    let mut out = vec![];
    process.output.compat().read_to_end(&mut out).await.unwrap();
    (out, process.control)
}

#[tokio::test]
async fn cat_echoes_until_the_half_close() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let process = open(&p, &id, &["cat"]).await.unwrap();
    let mut input = process.input.compat_write();
    let mut output = process.output.compat();
    input.write_all(b"hello ").await.unwrap();
    input.write_all(b"world").await.unwrap();
    input.flush().await.unwrap();
    let mut first = [0u8; 11];
    output.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"hello world");
    // Still running: cat waits for end of file.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), process.control.wait())
            .await
            .is_err()
    );
    input.shutdown().await.unwrap();
    let mut rest = vec![];
    output.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    assert_eq!(
        process.control.wait().await.unwrap(),
        ProcessExit::ExitCode(0)
    );
    // wait is re-readable.
    assert_eq!(
        process.control.wait().await.unwrap(),
        ProcessExit::ExitCode(0)
    );
}

#[tokio::test]
async fn exit_codes_and_streamed_output() {
    let (p, _) = provider();
    let id = active_with(
        &p,
        &request(RetentionMode::EphemeralZdr),
        &[("/data/ro/f.txt", b"file")],
    )
    .await;
    let cases: Vec<(Vec<&str>, ProcessExit, usize)> = vec![
        (vec!["sh", "-c", "exit 7"], ProcessExit::ExitCode(7), 0),
        (vec!["true"], ProcessExit::ExitCode(0), 0),
        (vec!["false"], ProcessExit::ExitCode(1), 0),
        (
            vec!["head", "-c", "300000", "/dev/zero"],
            ProcessExit::ExitCode(0),
            300_000,
        ),
        (vec!["cat", "/data/ro/f.txt"], ProcessExit::ExitCode(0), 4),
        (vec!["ls", "/data"], ProcessExit::ExitCode(0), 6),
        (vec!["nope"], ProcessExit::ExitCode(127), 0),
    ];
    for (argv, exit, len) in cases {
        let process = open(&p, &id, &argv).await.unwrap();
        let (out, control) = read_all(process).await;
        assert_eq!(out.len(), len, "{argv:?}");
        assert_eq!(control.wait().await.unwrap(), exit, "{argv:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn signals_end_the_process_with_that_signal() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    for signal in [
        ControlSignal::Sigint,
        ControlSignal::Sigterm,
        ControlSignal::Sigkill,
    ] {
        let process = open(&p, &id, &["sleep", "100000"]).await.unwrap();
        process.control.signal(signal).await.unwrap();
        let exit = process.control.wait().await.unwrap();
        assert_eq!(exit, ProcessExit::Signal(signal.name()));
        // The output ends with a real end of file.
        let (out, _) = read_all(process).await;
        assert!(out.is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn sleep_exits_after_its_time() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let process = open(&p, &id, &["sleep", "5"]).await.unwrap();
    let start = tokio::time::Instant::now();
    assert_eq!(
        process.control.wait().await.unwrap(),
        ProcessExit::ExitCode(0)
    );
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[tokio::test]
async fn one_live_process_per_instance() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let first = open(&p, &id, &["cat"]).await.unwrap();
    let e = open(&p, &id, &["cat"]).await.unwrap_err();
    assert_eq!(
        e,
        SandboxError::conflict(
            op::OPEN_PROCESS,
            "no live process",
            ConflictActual::ProcessAlreadyOpen
        )
    );
    // Another instance is independent.
    let other = active(&p, RetentionMode::EphemeralZdr).await;
    open(&p, &other, &["true"]).await.unwrap();
    // destroy is idempotent and frees the reservation.
    first.control.destroy().await.unwrap();
    first.control.destroy().await.unwrap();
    assert_eq!(
        first.control.wait().await.unwrap(),
        ProcessExit::Signal(SignalName::Sigkill)
    );
    let again = open(&p, &id, &["cat"]).await.unwrap();
    // Destroying the instance ends its process.
    p.destroy(DestroyRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();
    assert_eq!(
        again.control.wait().await.unwrap(),
        ProcessExit::Signal(SignalName::Sigkill)
    );
}

#[tokio::test(start_paused = true)]
async fn a_child_that_does_not_read_makes_writes_pend() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let process = open(&p, &id, &["sleep", "100000"]).await.unwrap();
    let mut input = process.input.compat_write();
    let big = vec![7u8; 4 * checkfu_sandbox_memory::PIPE_CAPACITY_BYTES];
    let pending = tokio::time::timeout(Duration::from_secs(1), input.write_all(&big)).await;
    assert!(pending.is_err(), "the write should pend on a full pipe");
    // A reading child drains the pipe: the same write completes.
    process.control.destroy().await.unwrap();
    let process = open(&p, &id, &["cat"]).await.unwrap();
    let mut input = process.input.compat_write();
    let mut output = process.output.compat();
    let reader = tokio::spawn(async move {
        let mut out = vec![];
        output.read_to_end(&mut out).await.unwrap();
        out.len()
    });
    input.write_all(&big).await.unwrap();
    input.shutdown().await.unwrap();
    assert_eq!(reader.await.unwrap(), big.len());
}

#[tokio::test]
async fn evidence_comes_from_the_providers_record() {
    let (p, _) = provider();
    let req = request_with(
        "session-9",
        RetentionMode::Durable,
        NetworkPolicy::Allowlist {
            destinations: vec![],
        },
    );
    let instance = p.provision(req).await.unwrap().value;
    let instance = p
        .activate(ActivateRequest {
            instance_id: instance.instance_id,
        })
        .await
        .unwrap()
        .value;
    let preq = proc_request(&instance.instance_id, &["cat"]);
    let process = SandboxProvider::open_process(&p)
        .unwrap()
        .open_process(preq.clone())
        .await
        .unwrap();
    assert!(
        check_process_evidence(&instance, &preq, &p.capabilities(), &process.evidence).is_empty()
    );
    assert_eq!(process.evidence.network_mode, NetworkMode::Allowlist);
    assert_eq!(process.evidence.started_at, ts(START));
    process.control.destroy().await.unwrap();
}

#[tokio::test]
async fn open_process_needs_a_running_instance() {
    let (p, _) = provider();
    let id = provision(&p, &request(RetentionMode::EphemeralZdr)).await;
    let e = open(&p, &id, &["cat"]).await.unwrap_err();
    assert_eq!(
        e,
        SandboxError::conflict(op::OPEN_PROCESS, "active", ConflictActual::Provisioning)
    );
}

#[tokio::test]
async fn cat_redirect_appends_stdin_to_the_file_as_it_arrives() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let path = "/mnt/session/outputs/in.bin";
    let process = open(&p, &id, &["sh", "-c", &format!("cat > {path}")])
        .await
        .unwrap();
    // The shell created the file before any input.
    let empty = read(&p, &id, "/mnt/session/outputs", path).await.unwrap();
    assert!(empty.content_base64.as_slice().is_empty());
    let SandboxProcess {
        input,
        output,
        control,
        ..
    } = process;
    let mut input = input.compat_write();
    input.write_all(b"first ").await.unwrap();
    input.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let partial = read(&p, &id, "/mnt/session/outputs", path).await.unwrap();
    assert_eq!(partial.content_base64.as_slice(), b"first ");
    input.write_all(b"second").await.unwrap();
    input.shutdown().await.unwrap();
    let mut out = vec![];
    output.compat().read_to_end(&mut out).await.unwrap();
    assert!(out.is_empty(), "nothing is printed");
    assert_eq!(control.wait().await.unwrap(), ProcessExit::ExitCode(0));
    let full = read(&p, &id, "/mnt/session/outputs", path).await.unwrap();
    assert_eq!(full.content_base64.as_slice(), b"first second");
}

#[tokio::test]
async fn cat_redirect_into_a_sealed_mount_is_refused_by_the_shell() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let process = open(&p, &id, &["sh", "-c", &format!("cat > {RO}/new")])
        .await
        .unwrap();
    let SandboxProcess { error, control, .. } = process;
    let mut err = vec![];
    error.compat().read_to_end(&mut err).await.unwrap();
    assert_eq!(control.wait().await.unwrap(), ProcessExit::ExitCode(2));
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains("can't create") && err.contains("Read-only"),
        "{err}"
    );
    assert!(read(&p, &id, RO, &format!("{RO}/new")).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_trapped_sigterm_is_ignored_until_sigkill() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let process = open(&p, &id, &["sh", "-c", "trap '' TERM; sleep 100000"])
        .await
        .unwrap();
    process
        .control
        .signal(ControlSignal::Sigterm)
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(60), process.control.wait())
            .await
            .is_err(),
        "SIGTERM is ignored"
    );
    process
        .control
        .signal(ControlSignal::Sigkill)
        .await
        .unwrap();
    assert_eq!(
        process.control.wait().await.unwrap(),
        ProcessExit::Signal(SignalName::Sigkill)
    );
}

/// The streaming commands (`cat`, `sleep`, `head -c`) start only where a
/// launch would: a missing working directory or a path that is not in
/// the tree gives the launch's answer, as every other command does.
#[tokio::test]
async fn streaming_commands_fail_to_launch_like_any_other() {
    let (p, _) = provider();
    let id = active_with(&p, &request(RetentionMode::EphemeralZdr), &[]).await;
    let cases: Vec<(Vec<&str>, &str, ProcessExit)> = vec![
        (vec!["cat"], "/no/such", ProcessExit::ExitCode(126)),
        (
            vec!["sleep", "1"],
            "/etc/passwd",
            ProcessExit::ExitCode(126),
        ),
        (vec!["/tmp/cat"], "/", ProcessExit::ExitCode(127)),
        (
            vec!["/tmp/head", "-c", "1"],
            "/",
            ProcessExit::ExitCode(127),
        ),
    ];
    for (argv, workdir, exit) in cases {
        let mut request = proc_request(&id, &argv);
        request.working_directory = workdir.into();
        let process = SandboxProvider::open_process(&p)
            .unwrap()
            .open_process(request)
            .await
            .unwrap();
        let (mut err, mut out) = (vec![], vec![]);
        process.error.compat().read_to_end(&mut err).await.unwrap();
        process.output.compat().read_to_end(&mut out).await.unwrap();
        let control = process.control;
        assert_eq!(control.wait().await.unwrap(), exit, "{argv:?} in {workdir}");
        assert!(
            !err.is_empty(),
            "{argv:?} in {workdir}: no reason on stderr"
        );
    }
    // By its path in /bin, `cat` still streams until the half-close.
    let process = open(&p, &id, &["/bin/cat"]).await.unwrap();
    let mut input = process.input.compat_write();
    input.write_all(b"piped").await.unwrap();
    input.shutdown().await.unwrap();
    drop(input);
    let mut out = vec![];
    process.output.compat().read_to_end(&mut out).await.unwrap();
    assert_eq!(out, b"piped");
}
