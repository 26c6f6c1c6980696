//! The memory oracle served over a real Unix socket pair: rollback
//! handles, commit, cancellation of allocating calls, the initialize
//! refusal, writeFile's `kind` and `mode` and listDir's `mode` both ways,
//! and openProcess's credit window, offsets and exit frame.

mod common;

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_wire::protocol::{REPLAY_WINDOW_BYTES, STDIN_CREDIT_BYTES};
use checkfu_sandbox_wire::{serve_connection, ServeError, Served, WireClient, WireOptions};
use common::*;
use futures_util::{AsyncReadExt, AsyncWriteExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt as _, BufReader};

async fn served(provider: Arc<dyn SandboxProvider>, options: WireOptions) -> WireClient {
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    let (r, w) = b.into_split();
    tokio::spawn(serve_connection(Served::new(provider), r, w));
    let (r, w) = a.into_split();
    WireClient::over(r, w, options).await.unwrap()
}

#[tokio::test]
async fn a_rejected_handoff_is_rolled_back_by_the_providers_own_rollback() {
    let mem = memory();
    let client = served(Arc::new(mem.clone()), WireOptions::default()).await;
    let handoff = client.provision(request()).await.unwrap();
    assert_eq!(
        mem.live_instances(),
        vec![handoff.value.instance_id.clone()]
    );
    handoff.rollback.rollback().await.unwrap();
    assert!(mem.live_instances().is_empty());
    // Run again (a retry after a lost response): it settles the same way.
    handoff.rollback.rollback().await.unwrap();
    assert!(mem.live_instances().is_empty());
}

#[tokio::test]
async fn a_handoff_the_runner_keeps_is_committed_and_never_rolled_back() {
    let mem = memory();
    let client = served(Arc::new(mem.clone()), WireOptions::default()).await;
    let handoff = client.provision(request()).await.unwrap();
    let id = handoff.value.instance_id.clone();
    drop(handoff); // ownership taken: sandbox/commit
    client
        .destroy(DestroyRequest {
            instance_id: "nothing".into(),
        })
        .await
        .ok();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(mem.live_instances(), vec![id]);
}

#[tokio::test]
async fn an_allocating_call_the_runner_abandons_is_rolled_back_exactly_once_by_the_server() {
    let mem = memory();
    let mut slow = Wrap::new(mem.clone());
    slow.provision_delay = Duration::from_millis(400);
    let options = WireOptions {
        call_timeout: Duration::from_millis(100),
        ..WireOptions::default()
    };
    let client = served(Arc::new(slow), options).await;

    // Past its deadline: a typed timeout within the bound, then the
    // server rolls the late allocation back.
    let started = Instant::now();
    let err = client.provision(request()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(&err, SandboxError::SandboxOperationFailed { operation, reason: FailureReason::TimedOut, .. } if operation == "provision"),
        "{err:?}"
    );
    // A caller that simply stops observing (its future dropped).
    let dropped =
        tokio::time::timeout(Duration::from_millis(50), client.provision(request())).await;
    assert!(dropped.is_err());

    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(
        mem.live_instances().is_empty(),
        "{:?}",
        mem.live_instances()
    );
}

#[tokio::test]
async fn a_directory_write_and_listed_bits_cross_the_wire() {
    let mem = memory();
    let client = served(Arc::new(mem.clone()), WireOptions::default()).await;
    let handoff = client.provision(request()).await.unwrap();
    let id = handoff.value.instance_id.clone();
    drop(handoff);
    let write = |path: &str, kind, content: &[u8], mode| WriteFileRequest {
        instance_id: id.clone(),
        path: path.into(),
        content_base64: Bytes(content.to_vec()),
        mode,
        kind,
    };
    let out = |name: &str| format!("{}/{name}", bounds::OUTPUT_PATH);
    client
        .write_file(write(
            &out("d"),
            Some(WriteKind::Directory),
            b"",
            Some(0o700),
        ))
        .await
        .unwrap();
    client
        .write_file(write(&out("d/x.sh"), None, b"run", Some(0o755)))
        .await
        .unwrap();
    client
        .write_file(write(&out("plain"), None, b"p", None))
        .await
        .unwrap();
    // The provider's own refusal crosses back typed, naming both values.
    let e = client
        .write_file(write(&out("e"), Some(WriteKind::Directory), b"abc", None))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        SandboxError::invalid_request(
            checkfu_sandbox_contract::provider::op::WRITE_FILE,
            "content_base64",
            "empty content for kind directory",
            "3 bytes",
        )
    );
    client
        .activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap();
    let listing = SandboxProvider::list_dir(&client)
        .expect("memory lists")
        .list_dir(ListDirRequest {
            instance_id: id.clone(),
            root: bounds::OUTPUT_PATH.into(),
            max_entries: 10,
        })
        .await
        .unwrap();
    let modes: Vec<(String, Option<u32>)> = listing
        .entries
        .iter()
        .map(|e| (e.path.display(), e.mode))
        .collect();
    assert_eq!(
        modes,
        vec![(out("d/x.sh"), Some(0o755)), (out("plain"), None)]
    );
}

#[tokio::test]
async fn initialize_with_another_revision_is_refused_naming_both_values() {
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    let (r, w) = b.into_split();
    tokio::spawn(serve_connection(Served::new(Arc::new(memory())), r, w));
    let (r, mut w) = a.into_split();
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"contract_revision\":\"checkfu.sandbox/v0\",\"wire_revision\":\"checkfu.sandbox.wire/v1\"}}\n")
        .await
        .unwrap();
    let mut line = String::new();
    BufReader::new(r).read_line(&mut line).await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["error"]["code"], -32001);
    assert_eq!(v["error"]["data"]["field"], "contract_revision");
    assert_eq!(v["error"]["data"]["expected"], "checkfu.sandbox/v1");
    assert_eq!(v["error"]["data"]["actual"], "checkfu.sandbox/v0");
}

#[tokio::test]
async fn the_server_refuses_a_runner_line_over_its_bound() {
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    let (r, w) = b.into_split();
    let mut served = Served::new(Arc::new(memory()));
    served.limits.max_line_bytes = 1024;
    let server = tokio::spawn(serve_connection(served, r, w));
    let (_r, mut w) = a.into_split();
    w.write_all(&vec![b'x'; 4096]).await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        result,
        Err(ServeError::Protocol("a line longer than 1024 bytes".into()))
    );
}

// ---- openProcess ------------------------------------------------------

#[derive(Default)]
struct Gate {
    open: bool,
    data: Vec<u8>,
    closed: bool,
    waker: Option<Waker>,
}

/// A stdin sink that accepts nothing until opened: a workload that does
/// not read.
struct GateSink(Arc<Mutex<Gate>>);

impl futures_io::AsyncWrite for GateSink {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut g = self.0.lock().unwrap();
        if !g.open {
            g.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        g.data.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.lock().unwrap().closed = true;
        Poll::Ready(Ok(()))
    }
}

struct Exits(u8);

#[async_trait]
impl ProcessControl for Exits {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        Ok(ProcessExit::ExitCode(self.0))
    }
    async fn signal(&self, _: ControlSignal) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn destroy(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn with_process(mem: MemoryProvider, make: MakeProcess) -> Arc<dyn SandboxProvider> {
    let mut w = Wrap::new(mem);
    w.process = Some(make);
    Arc::new(w)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_workloads_backpressure_reaches_the_writer_through_the_credit_window() {
    let gate = Arc::new(Mutex::new(Gate::default()));
    let g = gate.clone();
    let provider = with_process(
        memory(),
        Arc::new(move || SandboxProcess {
            input: Box::pin(GateSink(g.clone())),
            output: Box::pin(futures_util::io::Cursor::new(Vec::new())),
            error: Box::pin(futures_util::io::Cursor::new(Vec::new())),
            control: Arc::new(Exits(0)),
            evidence: evidence(),
        }),
    );
    let client = served(provider, WireOptions::default()).await;
    let process = SandboxProvider::open_process(&client)
        .unwrap()
        .open_process(process_request())
        .await
        .unwrap();
    let mut input = process.input;
    let total = 2 * 1024 * 1024;
    let data = pattern(total);
    let accepted = Arc::new(AtomicU64::new(0));
    let counter = accepted.clone();
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        for chunk in sent.chunks(8 * 1024) {
            input.write_all(chunk).await.unwrap();
            counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        input.close().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = accepted.load(Ordering::SeqCst);
    assert!(held > 0, "nothing was accepted");
    assert!(
        held <= STDIN_CREDIT_BYTES,
        "the writer got {held} bytes past a workload that reads nothing (credit {STDIN_CREDIT_BYTES})"
    );
    assert!(!writer.is_finished());
    {
        let mut g = gate.lock().unwrap();
        g.open = true;
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }
    tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gate.lock().unwrap().closed {
        assert!(Instant::now() < deadline, "stdin never closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gate.lock().unwrap().data == data, "stdin bytes differ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_past_the_replay_window_arrives_whole_in_order_and_the_exit_settles_once() {
    let size = 2 * REPLAY_WINDOW_BYTES as usize + 12_345;
    let provider = with_process(
        memory(),
        Arc::new(move || SandboxProcess {
            input: Box::pin(futures_util::io::sink()),
            output: Box::pin(futures_util::io::Cursor::new(pattern(size))),
            error: Box::pin(futures_util::io::Cursor::new(b"diagnostic".to_vec())),
            control: Arc::new(Exits(7)),
            evidence: evidence(),
        }),
    );
    let client = served(provider, WireOptions::default()).await;
    let mut process = SandboxProvider::open_process(&client)
        .unwrap()
        .open_process(process_request())
        .await
        .unwrap();
    assert_eq!(process.evidence, evidence());
    // A slow consumer: small reads with pauses.
    let mut out = Vec::new();
    let mut buf = vec![0u8; 7_000];
    loop {
        let n = process.output.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() % 10 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(out.len(), size);
    assert!(out == pattern(size), "stdout bytes differ");
    let mut err = Vec::new();
    process.error.read_to_end(&mut err).await.unwrap();
    assert_eq!(err, b"diagnostic");
    assert_eq!(process.control.wait().await, Ok(ProcessExit::ExitCode(7)));
    assert_eq!(process.control.wait().await, Ok(ProcessExit::ExitCode(7)));
    process.control.destroy().await.unwrap();
    process.control.destroy().await.unwrap();
}

/// Records each dispatch marker and answers it (or aborts).
struct Marker {
    seen: Mutex<Vec<String>>,
    abort: bool,
}

#[async_trait]
impl DispatchMarker for Marker {
    async fn dispatch(&self, transaction_id: &str) -> Result<(), SandboxError> {
        self.seen.lock().unwrap().push(transaction_id.to_owned());
        if self.abort {
            Err(SandboxError::failed(
                Operation::Member(Member::BeginActiveWrite),
                FailureReason::InvalidRequest,
                "the caller aborts",
            ))
        } else {
            Ok(())
        }
    }
}

/// beginActiveWrite over the wire: the served provider's dispatch marker
/// travels as `runner/activeWriteDispatched` to the caller's marker, whose
/// answer decides (null: dispatched and committed; an error: aborted and
/// rolled back, nothing published).
#[tokio::test]
async fn the_dispatch_marker_crosses_the_wire_both_ways() {
    let mem = memory();
    let client = served(Arc::new(mem.clone()), WireOptions::default()).await;
    let mut req = request();
    req.mounts = vec![SandboxMount {
        path: "/work".into(),
        access: MountAccess::ReadWrite,
    }];
    let id = client.provision(req).await.unwrap().value.instance_id;
    let _ = client
        .activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap();
    let member = SandboxProvider::begin_active_write(&client).unwrap();
    let batch = |tx: &str, body: &[u8]| ActiveWriteRequest {
        instance_id: id.clone(),
        transaction_id: tx.into(),
        files: vec![ActiveWriteFile {
            path: "/work/a".into(),
            content_base64: body.to_vec().into(),
        }],
    };
    let abort = Arc::new(Marker {
        seen: Mutex::new(vec![]),
        abort: true,
    });
    let out = member
        .begin_active_write(ActiveWriteTransaction::new(
            batch("t-abort", b"no"),
            abort.clone(),
        ))
        .await
        .unwrap();
    assert!(
        matches!(out, ActiveWriteOutcome::RolledBack { .. }),
        "{out:?}"
    );
    assert_eq!(*abort.seen.lock().unwrap(), vec!["t-abort".to_string()]);
    assert_eq!(mem.node(&id, "/work/a"), None);

    let proceed = Arc::new(Marker {
        seen: Mutex::new(vec![]),
        abort: false,
    });
    let out = member
        .begin_active_write(ActiveWriteTransaction::new(
            batch("t-go", b"yes"),
            proceed.clone(),
        ))
        .await
        .unwrap();
    assert!(
        matches!(out, ActiveWriteOutcome::Committed { .. }),
        "{out:?}"
    );
    assert_eq!(*proceed.seen.lock().unwrap(), vec!["t-go".to_string()]);
    assert_eq!(
        mem.node(&id, "/work/a"),
        Some(checkfu_sandbox_memory::FsNode::File(b"yes".to_vec()))
    );
    client.close().await;
}
