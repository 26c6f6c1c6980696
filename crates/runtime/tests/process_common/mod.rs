//! openProcess end to end through [`Adapter::open_process`] (spec
//! "openProcess"; DESIGN D18): one scenario per requirement, written once
//! and run on each provider by `process_memory.rs` and `process_docker.rs`.

#![allow(dead_code)] // each provider file uses a different subset

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use checkfu_sandbox_contract::bounds::{MIB, OUTPUT_PATH};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::drivers::{
    acp_frames, one_shot, terminate_within, DriverError, ACP_FRAME_LIMIT_BYTES,
};
use checkfu_sandbox_runtime::{Adapter, Process};
use futures::{AsyncReadExt, AsyncWriteExt};
use sha2::{Digest as _, Sha256};

/// One active instance behind the runtime.
pub struct Env {
    pub adapter: Adapter,
    pub instance_id: String,
    pub working_directory: String,
}

impl Env {
    pub fn request(&self, argv: &[&str]) -> SandboxProcessRequest {
        SandboxProcessRequest {
            instance_id: self.instance_id.clone(),
            executable: argv[0].into(),
            arguments: argv[1..].iter().map(|s| s.to_string()).collect(),
            working_directory: self.working_directory.clone(),
            environment: BTreeMap::new(),
        }
    }

    pub async fn open(&self, argv: &[&str]) -> Process {
        self.adapter
            .open_process(self.request(argv))
            .await
            .unwrap_or_else(|e| panic!("open_process {argv:?}: {e}"))
    }
}

/// Deterministic non-repeating bytes (xorshift), so a lost, duplicated or
/// reordered chunk changes the digest.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Writes `bytes` in chunks cycling through `sizes`, then half-closes.
async fn write_chunked(process_input: &mut Process, bytes: &[u8], sizes: &[usize]) {
    let mut at = 0;
    let mut i = 0;
    while at < bytes.len() {
        let n = sizes[i % sizes.len()].min(bytes.len() - at);
        process_input
            .input
            .write_all(&bytes[at..at + n])
            .await
            .expect("write");
        at += n;
        i += 1;
    }
    process_input.input.close().await.expect("half-close");
}

/// `cat` given a prompt and a half-close returns the prompt and exits 0.
pub async fn cat_prompt_half_close(env: &Env) {
    let prompt = pattern(300_000);
    let Process {
        mut input,
        mut output,
        handle,
        ..
    } = env.open(&["cat"]).await;
    let sent = prompt.clone();
    let writer = tokio::spawn(async move {
        input.write_all(&sent).await.expect("write prompt");
        input.close().await.expect("half-close");
    });
    let mut got = Vec::new();
    output.read_to_end(&mut got).await.expect("read stdout");
    writer.await.expect("writer");
    assert_eq!(got.len(), prompt.len());
    assert!(got == prompt, "cat returned other bytes than the prompt");
    assert_eq!(handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
}

/// The same through the one-shot driver.
pub async fn one_shot_cat(env: &Env) {
    let prompt = pattern(1_000_003);
    let process = env.open(&["cat"]).await;
    let r = one_shot(process, &prompt).await.expect("one_shot");
    assert_eq!(r.exit, ProcessExit::ExitCode(0));
    assert_eq!(r.stdout.len(), prompt.len());
    assert!(
        r.stdout == prompt,
        "one_shot stdout differs from the prompt"
    );
}

/// 64 MiB through stdout to a deliberately slow reader: byte count and
/// SHA-256 exact. Returns the elapsed time.
pub async fn stdout_64_mib_slow_reader(env: &Env) -> Duration {
    const TOTAL: usize = 64 * MIB as usize;
    let started = Instant::now();
    let Process {
        mut output, handle, ..
    } = env
        .open(&["head", "-c", &TOTAL.to_string(), "/dev/zero"])
        .await;
    // Let the producer fill every buffer and block before reading at all.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut hasher = Sha256::new();
    let mut count = 0usize;
    let mut buf = vec![0u8; 4096];
    let mut reads = 0u64;
    loop {
        let n = output.read(&mut buf).await.expect("read stdout");
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        count += n;
        reads += 1;
        if reads % 128 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let digest: [u8; 32] = hasher.finalize().into();
    assert_eq!(count, TOTAL, "byte count");
    assert_eq!(
        digest,
        sha256(&vec![0u8; TOTAL]),
        "sha-256 of 64 MiB of zeros"
    );
    assert_eq!(handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
    started.elapsed()
}

/// 10 MiB written to a child that writes it to a file without printing:
/// the file read back through the adapter has the input's SHA-256.
pub async fn stdin_10_mib_to_file(env: &Env) {
    const TOTAL: usize = 10 * MIB as usize;
    let path = format!("{OUTPUT_PATH}/in.bin");
    let data = pattern(TOTAL);
    let mut process = env.open(&["sh", "-c", &format!("cat > {path}")]).await;
    let mut output = std::mem::replace(&mut process.output, Box::pin(futures::io::empty()));
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        output.read_to_end(&mut got).await.map(|_| got)
    });
    write_chunked(&mut process, &data, &[65_536, 1, 4093, 100_000, 7]).await;
    let printed = reader.await.expect("reader").expect("read stdout");
    assert!(
        printed.is_empty(),
        "the child printed {} bytes",
        printed.len()
    );
    assert_eq!(
        process.handle.wait().await.unwrap(),
        ProcessExit::ExitCode(0)
    );
    let back = env
        .adapter
        .read_file(&env.instance_id, &path, 16 * MIB)
        .await
        .expect("read_file");
    assert_eq!(back.len(), TOTAL);
    assert_eq!(sha256(&back), sha256(&data), "file sha-256");
}

/// `exit 42` reads as 42 on every one of `runs` runs, and a re-read of
/// `wait` agrees; each next open follows the previous exit at once.
pub async fn exit_42_every_time(env: &Env, runs: usize) {
    for run in 0..runs {
        let process = env.open(&["sh", "-c", "exit 42"]).await;
        let handle = process.handle.clone();
        assert_eq!(
            handle.wait().await.unwrap(),
            ProcessExit::ExitCode(42),
            "run {run}"
        );
        assert_eq!(
            handle.wait().await.unwrap(),
            ProcessExit::ExitCode(42),
            "re-read, run {run}"
        );
        drop(process);
        assert_eq!(
            handle.wait().await.unwrap(),
            ProcessExit::ExitCode(42),
            "re-read after the streams are gone, run {run}"
        );
    }
}

/// A SIGKILLed child settles with `Signal(SIGKILL)`, re-readably.
pub async fn sigkill_settles(env: &Env) {
    let process = env.open(&["sleep", "1000"]).await;
    let handle = process.handle.clone();
    handle.signal(ControlSignal::Sigkill).await.expect("signal");
    let exit = tokio::time::timeout(Duration::from_secs(30), handle.wait())
        .await
        .expect("settles")
        .unwrap();
    assert_eq!(exit, ProcessExit::Signal(SignalName::Sigkill));
    assert_eq!(handle.wait().await.unwrap(), exit);
    handle.destroy().await.expect("destroy after exit");
    handle.destroy().await.expect("destroy is idempotent");
    assert_eq!(handle.wait().await.unwrap(), exit);
}

/// A process idle for `idle` is still alive, and its streams still work.
pub async fn idle_then_echo(env: &Env, idle: Duration) {
    let Process {
        mut input,
        mut output,
        handle,
        ..
    } = env.open(&["cat"]).await;
    input.write_all(b"before\n").await.unwrap();
    input.flush().await.unwrap();
    let mut got = [0u8; 7];
    output.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"before\n");
    tokio::time::sleep(idle).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(200), handle.wait())
            .await
            .is_err(),
        "the process ended while idle"
    );
    input.write_all(b"after the idle period\n").await.unwrap();
    input.flush().await.unwrap();
    let mut got = [0u8; 22];
    output.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"after the idle period\n");
    input.close().await.unwrap();
    let mut rest = Vec::new();
    output.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    assert_eq!(handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
}

/// A child that does not read stdin makes writes wait: 64 MiB is not
/// accepted within `window`, and what was accepted stays under
/// `accepted_bound` bytes. Then the process is destroyed.
pub async fn backpressure(env: &Env, window: Duration, accepted_bound: usize) {
    const TOTAL: usize = 64 * MIB as usize;
    let Process {
        mut input, handle, ..
    } = env.open(&["sleep", "1000"]).await;
    let chunk = vec![0x5au8; 64 * 1024];
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    let write_all = async move {
        let mut sent = 0;
        while sent < TOTAL {
            input.write_all(&chunk).await?;
            sent += chunk.len();
            counter.store(sent, std::sync::atomic::Ordering::SeqCst);
        }
        input.flush().await
    };
    let finished = tokio::time::timeout(window, write_all).await;
    let accepted = accepted.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!(
        "backpressure on {}: {accepted} bytes accepted in {window:?}",
        env.adapter.provider_id()
    );
    assert!(
        finished.is_err(),
        "64 MiB was accepted by a child that reads nothing"
    );
    assert!(
        accepted < accepted_bound,
        "{accepted} bytes accepted (bound {accepted_bound})"
    );
    handle.destroy().await.expect("destroy");
    assert_eq!(
        handle.wait().await.unwrap(),
        ProcessExit::Signal(SignalName::Sigkill)
    );
}

#[track_caller]
fn assert_already_open(f: &SandboxFailure) {
    assert_eq!(f.cause_count(), 1, "{f}");
    match f.error() {
        SandboxError::SandboxLifecycleConflict {
            operation, actual, ..
        } => {
            assert_eq!(*operation, op::OPEN_PROCESS);
            assert_eq!(*actual, ConflictActual::ProcessAlreadyOpen);
        }
        other => panic!("expected SandboxLifecycleConflict, got {other:?}"),
    }
}

/// A second open while one is live is refused; after the first is
/// destroyed, or exits, a new one opens.
pub async fn second_open_refused(env: &Env) {
    let first = env.open(&["sleep", "1000"]).await;
    let refused = env.adapter.open_process(env.request(&["cat"])).await;
    assert_already_open(&refused.expect_err("a second live process"));
    first.handle.destroy().await.expect("destroy");
    drop(first);

    let second = env.open(&["cat"]).await;
    let refused = env.adapter.open_process(env.request(&["cat"])).await;
    assert_already_open(&refused.expect_err("a second live process"));
    let Process {
        mut input, handle, ..
    } = second;
    input.close().await.unwrap();
    assert_eq!(handle.wait().await.unwrap(), ProcessExit::ExitCode(0));

    let third = env.open(&["sh", "-c", "exit 3"]).await;
    assert_eq!(third.handle.wait().await.unwrap(), ProcessExit::ExitCode(3));
}

/// `terminate_within`: a child honouring SIGTERM ends by it within the
/// grace, without SIGKILL.
pub async fn terminate_honoured(env: &Env, grace: Duration) {
    let process = env.open(&["sleep", "1000"]).await;
    let started = Instant::now();
    let exit = terminate_within(&process.handle, grace)
        .await
        .expect("terminate");
    assert_eq!(exit, ProcessExit::Signal(SignalName::Sigterm));
    assert!(started.elapsed() < grace, "{:?}", started.elapsed());
    assert_eq!(process.handle.wait().await.unwrap(), exit);
}

/// `terminate_within`: a child ignoring SIGTERM is torn down by destroy
/// after the grace (no other signal is sent); its exit settles and stays
/// re-readable.
///
/// `announces_trap`: the provider streams stdout while the command runs,
/// so SIGTERM is sent only after the shell printed that its trap is set
/// (a real shell could otherwise die of SIGTERM before `trap` ran). The
/// memory oracle sets the trap before the process is handed out.
pub async fn terminate_escalates(env: &Env, grace: Duration, announces_trap: bool) {
    let script = if announces_trap {
        "trap '' TERM; echo armed; sleep 1000"
    } else {
        "trap '' TERM; sleep 1000"
    };
    let mut process = env.open(&["sh", "-c", script]).await;
    if announces_trap {
        let mut armed = [0u8; 6];
        process.output.read_exact(&mut armed).await.unwrap();
        assert_eq!(&armed, b"armed\n");
    }
    let started = Instant::now();
    let exit = terminate_within(&process.handle, grace)
        .await
        .expect("terminate");
    assert_ne!(exit, ProcessExit::Signal(SignalName::Sigterm));
    assert!(started.elapsed() >= grace, "{:?}", started.elapsed());
    assert_eq!(process.handle.wait().await.unwrap(), exit);
}

fn frames(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"session/update","params":{{"pad":"{}"}}}}"#,
                "p".repeat(i * 37 % 5000)
            )
            .into_bytes()
        })
        .collect()
}

/// NDJSON frames written to `cat` in odd chunk sizes (frames split across
/// many chunks) and then many frames in one chunk decode in order through
/// the ACP driver.
pub async fn acp_frames_end_to_end(env: &Env) {
    let split = frames(300);
    let bundled = frames(200);
    let mut first = Vec::new();
    for f in &split {
        first.extend_from_slice(f);
        first.push(b'\n');
    }
    let mut second = Vec::new();
    for f in &bundled {
        second.extend_from_slice(f);
        second.push(b'\n');
    }
    let Process {
        mut input,
        output,
        handle,
        ..
    } = env.open(&["cat"]).await;
    let writer = tokio::spawn(async move {
        let sizes = [1usize, 7, 13, 3, 4099, 2];
        let mut at = 0;
        let mut i = 0;
        while at < first.len() {
            let n = sizes[i % sizes.len()].min(first.len() - at);
            input.write_all(&first[at..at + n]).await?;
            input.flush().await?;
            at += n;
            i += 1;
        }
        input.write_all(&second).await?;
        input.close().await
    });
    let mut reader = acp_frames(output);
    let mut got = Vec::new();
    while let Some(frame) = reader.next_frame().await.expect("frame") {
        got.push(frame);
    }
    writer.await.expect("writer").expect("write frames");
    let want: Vec<Vec<u8>> = split.into_iter().chain(bundled).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "frames differ or are out of order");
    assert_eq!(handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
}

/// A frame of 1 MiB + 1 byte is refused with `FrameTooLarge` naming its
/// size.
pub async fn acp_frame_over_one_mib_refused(env: &Env) {
    let Process {
        mut input,
        output,
        handle,
        ..
    } = env.open(&["cat"]).await;
    let writer = tokio::spawn(async move {
        input.write_all(b"{\"ok\":1}\n").await?;
        let mut big = vec![b'x'; ACP_FRAME_LIMIT_BYTES + 1];
        big.push(b'\n');
        input.write_all(&big).await?;
        input.flush().await?;
        // Stdin stays open: the child is still live when it is destroyed.
        std::future::pending::<std::io::Result<()>>().await
    });
    let mut reader = acp_frames(output);
    assert_eq!(
        reader.next_frame().await.expect("first frame"),
        Some(b"{\"ok\":1}".to_vec())
    );
    let err = reader.next_frame().await.expect_err("a frame over 1 MiB");
    let message = err.to_string();
    match err {
        DriverError::FrameTooLarge {
            limit_bytes,
            frame_bytes,
        } => {
            assert_eq!(limit_bytes, MIB as usize);
            assert!(frame_bytes > limit_bytes, "{frame_bytes}");
            assert!(message.contains(&frame_bytes.to_string()), "{message}");
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
    handle.destroy().await.expect("destroy");
    writer.abort();
    let _ = writer.await;
    assert_eq!(
        handle.wait().await.unwrap(),
        ProcessExit::Signal(SignalName::Sigkill)
    );
}
