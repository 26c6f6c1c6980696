//! openProcess across a lost socket connection: a reconnect inside the
//! resume window resumes stdout and stdin with no byte lost or
//! duplicated; past it the process fails naming the window.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_wire::{serve_unix, Served, WireClient, WireOptions};
use common::*;
use futures_util::{AsyncReadExt, AsyncWriteExt};

/// A proxy between the client and the server's socket whose connections
/// the test can cut, and which can refuse new ones.
struct Proxy {
    path: PathBuf,
    live: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    refuse: Arc<AtomicBool>,
}

impl Proxy {
    fn start(dir: &Path, upstream: PathBuf) -> Proxy {
        let path = dir.join("proxy.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let live = Arc::new(Mutex::new(Vec::new()));
        let refuse = Arc::new(AtomicBool::new(false));
        let (l, r) = (live.clone(), refuse.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut down, _)) = listener.accept().await else {
                    return;
                };
                if r.load(Ordering::SeqCst) {
                    continue;
                }
                let upstream = upstream.clone();
                l.lock().unwrap().push(tokio::spawn(async move {
                    let mut up = tokio::net::UnixStream::connect(&upstream).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }));
            }
        });
        Proxy { path, live, refuse }
    }

    /// Drops every live connection (both directions, bytes in flight lost).
    fn cut(&self) {
        for t in self.live.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// Exits 0 at once, or (`false`) never.
struct Exits(bool);

#[async_trait]
impl ProcessControl for Exits {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        if !self.0 {
            std::future::pending::<()>().await;
        }
        Ok(ProcessExit::ExitCode(0))
    }
    async fn signal(&self, _: ControlSignal) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn destroy(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// A stdin sink that records what it receives.
struct Collect(Arc<Mutex<Vec<u8>>>);

impl futures_io::AsyncWrite for Collect {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.lock().unwrap().extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

async fn setup(
    dir: &Path,
    size: usize,
    resume_window_ms: u64,
    exits: bool,
) -> (Proxy, WireClient, SandboxProcess, Arc<Mutex<Vec<u8>>>) {
    let upstream = dir.join("server.sock");
    let stdin = Arc::new(Mutex::new(Vec::new()));
    let s = stdin.clone();
    let mut provider = Wrap::new(memory());
    provider.process = Some(Arc::new(move || SandboxProcess {
        input: Box::pin(Collect(s.clone())),
        output: Box::pin(futures_util::io::Cursor::new(pattern(size))),
        error: Box::pin(futures_util::io::Cursor::new(Vec::new())),
        control: Arc::new(Exits(exits)),
        evidence: evidence(),
    }));
    let mut served = Served::new(Arc::new(provider));
    served.limits.replay_window_bytes = 256 * 1024;
    served.limits.resume_window_ms = resume_window_ms;
    let up = upstream.clone();
    tokio::spawn(async move { serve_unix(served, &up).await });
    while !upstream.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let proxy = Proxy::start(dir, upstream);
    let client = WireClient::connect_unix(&proxy.path, WireOptions::default())
        .await
        .unwrap();
    let process = SandboxProvider::open_process(&client)
        .unwrap()
        .open_process(process_request())
        .await
        .unwrap();
    (proxy, client, process, stdin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_inside_the_window_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let size = 3 * 1024 * 1024;
    let (proxy, client, mut process, stdin) = setup(dir.path(), size, 10_000, true).await;

    let mut out = vec![0u8; 100_000];
    process.output.read_exact(&mut out).await.unwrap();
    process.input.write_all(&pattern(50_000)).await.unwrap();
    proxy.cut();
    // Written while the connection is down: kept and resent.
    process.input.write_all(&pattern(70_000)).await.unwrap();
    process.input.close().await.unwrap();

    let mut rest = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        process.output.read_to_end(&mut rest),
    )
    .await
    .unwrap()
    .unwrap();
    out.extend_from_slice(&rest);
    assert_eq!(out.len(), size);
    assert!(out == pattern(size), "stdout differs after the reconnect");

    let mut want = pattern(50_000);
    want.extend_from_slice(&pattern(70_000));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while stdin.lock().unwrap().len() < want.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stdin bytes missing"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        *stdin.lock().unwrap() == want,
        "stdin differs after the reconnect"
    );
    assert_eq!(process.control.wait().await, Ok(ProcessExit::ExitCode(0)));
    // Calls work again on the new connection.
    client
        .destroy(DestroyRequest {
            instance_id: "nothing".into(),
        })
        .await
        .ok();
    process.control.destroy().await.unwrap();
    client.close().await;
}

/// A reconnect while the runner holds received bytes it has not read yet:
/// the provider restarts its replay window at the resume offsets, and the
/// runner's account restarts there too, so a provider that fills its
/// window right after the resume is not taken for one overrunning it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_while_bytes_wait_unread_keeps_the_window_and_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let size = 3 * 1024 * 1024;
    let (proxy, client, mut process, _) = setup(dir.path(), size, 10_000, true).await;
    let mut out = vec![0u8; 1000];
    process.output.read_exact(&mut out).await.unwrap();
    // Let the provider fill its window while nothing is read.
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.cut();
    process.input.close().await.unwrap();
    // The provider refills a whole window past the resume offset before
    // anything more is read.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut rest = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        process.output.read_to_end(&mut rest),
    )
    .await
    .unwrap()
    .unwrap();
    out.extend_from_slice(&rest);
    assert_eq!(out.len(), size);
    assert!(out == pattern(size), "stdout differs after the reconnect");
    process.control.destroy().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_resume_window_the_process_fails_naming_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, client, mut process, _) = setup(dir.path(), 3 * 1024 * 1024, 300, false).await;
    let mut out = vec![0u8; 10_000];
    process.output.read_exact(&mut out).await.unwrap();
    proxy.refuse.store(true, Ordering::SeqCst);
    proxy.cut();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        process.output.read_to_end(&mut rest),
    )
    .await
    .unwrap();
    let e = read.unwrap_err();
    assert!(e.to_string().contains("300 ms resume window"), "{e}");
    let waited = process.control.wait().await;
    assert!(
        matches!(&waited, Err(SandboxError::SandboxOperationFailed { operation, message, .. })
            if operation == "open_process" && message.contains("300 ms resume window")),
        "{waited:?}"
    );
    client.close().await;
}
