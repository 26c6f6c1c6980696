//! Streaming execs: stdin, stdout and stderr as streams with
//! backpressure, and a control handle to signal and wait (openProcess).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::StartExecResults;
use bollard::Docker;
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, watch, Notify};

use super::{
    exec::{exec_config, keep_head, never_started_code, EXIT_SETTLE_BOUND},
    proctree::{locate_exec, ExecProcess, ProcessSignal},
    start_failure::StartFailure,
};
use super::{is_not_found, DaemonError};

/// How a streaming process ended. Settles once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    /// Exit code (0-255).
    Code(i64),
    /// Killed by a signal this module delivered (exit code `128 + n`).
    Signaled(ProcessSignal),
    /// The daemon reported no exit code.
    Unknown,
}

/// A byte stream of one output of a streaming exec. Chunk boundaries carry
/// no meaning. Ends (`None`) at the real EOF of the exec's output.
#[derive(Debug)]
pub struct OutputReceiver {
    rx: mpsc::Receiver<Vec<u8>>,
}

impl OutputReceiver {
    /// The next chunk, or `None` at EOF.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a chunk is never lost when the future is dropped.
    pub async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await
    }
}

impl Stream for OutputReceiver {
    type Item = Vec<u8>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        self.rx.poll_recv(cx)
    }
}

/// The stdin of a streaming exec: ordered bytes, and a real half-close
/// with [`tokio::io::AsyncWriteExt::shutdown`] (it shuts down the write side of the
/// hijacked connection; the daemon then closes the process's stdin).
pub struct ProcessInput {
    inner: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for ProcessInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProcessInput")
    }
}

impl AsyncWrite for ProcessInput {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.inner.as_mut().poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.as_mut().poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.as_mut().poll_shutdown(cx)
    }
}

/// Control over a streaming exec: exit, signals, teardown. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ProcessControl {
    exec_id: String,
    process: ExecProcess,
    exit: watch::Receiver<Option<ProcessExit>>,
    sent: Arc<Mutex<Vec<ProcessSignal>>>,
    nudge: Arc<Notify>,
    stderr_dropped_bytes: Arc<std::sync::atomic::AtomicU64>,
    start_failure: Option<StartFailure>,
}

impl ProcessControl {
    /// The daemon's exec ID.
    pub fn exec_id(&self) -> &str {
        &self.exec_id
    }

    /// Where the process group can be signalled.
    pub fn process(&self) -> &ExecProcess {
        &self.process
    }

    /// Waits for the exit; settles once, and every later call returns the
    /// same value.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn wait(&self) -> ProcessExit {
        let mut rx = self.exit.clone();
        loop {
            if let Some(exit) = *rx.borrow_and_update() {
                return exit;
            }
            if rx.changed().await.is_err() {
                return (*rx.borrow()).unwrap_or(ProcessExit::Unknown);
            }
        }
    }

    /// The exit if it has settled.
    pub fn try_exit(&self) -> Option<ProcessExit> {
        *self.exit.borrow()
    }

    /// Why the process never started, when it did not (daemon state, see
    /// [`StartFailure`]). Such a process has settled already with
    /// [`ProcessExit::Code`] of [`StartFailure::code`]; its stdout is empty
    /// and its stderr holds the daemon's message.
    pub fn start_failure(&self) -> Option<&StartFailure> {
        self.start_failure.as_ref()
    }

    /// Sends `signal` to the process group.
    ///
    /// # Errors
    ///
    /// As [`ExecProcess::signal_group`].
    pub fn signal(&self, signal: ProcessSignal) -> Result<(), DaemonError> {
        if self.try_exit().is_some() {
            return Ok(());
        }
        self.sent.lock().map(|mut s| s.push(signal)).ok();
        let res = self.process.signal_group(signal);
        self.nudge.notify_one();
        res
    }

    /// Kills the group (idempotent) and waits for the exit, at most
    /// `bound`. Returns the exit if it settled.
    pub async fn destroy(&self, bound: Duration) -> Option<ProcessExit> {
        if self.try_exit().is_none() {
            let _ = self.signal(ProcessSignal::Kill);
        }
        tokio::time::timeout(bound, self.wait()).await.ok()
    }

    /// Bytes of stderr dropped because its consumer was not keeping up
    /// (stderr is diagnostic and bounded; stdout is never dropped).
    pub fn stderr_dropped_bytes(&self) -> u64 {
        self.stderr_dropped_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A live process: stdin, stdout, stderr and control.
#[derive(Debug)]
pub struct StreamingExec {
    /// Standard input with half-close.
    pub stdin: ProcessInput,
    /// Standard output, lossless, with backpressure (the process blocks
    /// when it is not read).
    pub stdout: OutputReceiver,
    /// Standard error, bounded: chunks are dropped (and counted) when the
    /// consumer lags by more than [`STDERR_QUEUE_CHUNKS`] chunks.
    pub stderr: OutputReceiver,
    /// Exit, signals, teardown.
    pub control: ProcessControl,
}

/// Chunks of stdout buffered between the daemon and the consumer.
pub const STDOUT_QUEUE_CHUNKS: usize = 16;
/// Chunks of stderr buffered before further stderr is dropped.
pub const STDERR_QUEUE_CHUNKS: usize = 64;

/// Starts a long-lived process with stdin, stdout and stderr attached.
///
/// No timeout and no output cap are imposed: the consumer bounds what it
/// reads. The exit is found by polling `ExecInspect` (every 20 ms at
/// first, backing off to 500 ms, and at once after EOF or a signal), so
/// `wait` settles even when nobody reads the output.
///
/// A process that never started (daemon state, see [`StartFailure`]) is
/// returned settled: `wait` gives [`ProcessExit::Code`] 127 or 126, stdout
/// ends at once with nothing, stderr carries the daemon's message (never
/// stdout), and [`ProcessControl::start_failure`] says why.
///
/// # Errors
///
/// [`DaemonError::Docker`] when the exec cannot be created or started.
pub async fn exec_streaming(
    docker: &Docker,
    container_id: &str,
    argv: &[String],
    env: &[String],
    working_dir: Option<&str>,
    user: Option<&str>,
) -> Result<StreamingExec, DaemonError> {
    let created = docker
        .create_exec(
            container_id,
            exec_config(argv, env, working_dir, user, true),
        )
        .await?;
    let exec_id = created.id;
    let StartExecResults::Attached { mut output, input } =
        docker.start_exec(&exec_id, None).await?
    else {
        return Err(DaemonError::Unexpected("exec started detached".into()));
    };
    let process = locate_exec(docker, container_id, &exec_id, Duration::from_secs(5)).await?;
    if process.daemon_pid().is_none() {
        if let Some(code) = never_started_code(docker, &exec_id, EXIT_SETTLE_BOUND).await? {
            // Only the daemon wrote on these streams; it closes them at once.
            let mut head = Vec::new();
            let _ = tokio::time::timeout(EXIT_SETTLE_BOUND, async {
                while let Some(Ok(item)) = output.next().await {
                    if let LogOutput::StdOut { message } | LogOutput::StdErr { message } = item {
                        keep_head(&mut head, &message);
                    }
                }
            })
            .await;
            drop(output);
            let argv0 = argv.first().map_or("", String::as_str);
            let failure = StartFailure::classify(argv0, code, &head);
            return Ok(settled_start_failure(exec_id, process, input, failure));
        }
    }
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(STDOUT_QUEUE_CHUNKS);
    let (err_tx, err_rx) = mpsc::channel::<Vec<u8>>(STDERR_QUEUE_CHUNKS);
    let (exit_tx, exit_rx) = watch::channel(None);
    let nudge = Arc::new(Notify::new());
    let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sent = Arc::new(Mutex::new(Vec::<ProcessSignal>::new()));

    // Demultiplexer: stdout with backpressure, stderr best effort.
    {
        let nudge = nudge.clone();
        let dropped = dropped.clone();
        tokio::spawn(async move {
            let mut out_tx = Some(out_tx);
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) => {
                        if let Some(tx) = &out_tx {
                            if tx.send(message.to_vec()).await.is_err() {
                                out_tx = None; // consumer gone: discard
                            }
                        }
                    }
                    Ok(LogOutput::StdErr { message }) => {
                        let n = message.len() as u64;
                        if err_tx.try_send(message.to_vec()).is_err() {
                            dropped.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            drop(out_tx);
            drop(err_tx);
            nudge.notify_one();
        });
    }

    // Exit watcher.
    {
        let docker = docker.clone();
        let exec_id = exec_id.clone();
        let nudge = nudge.clone();
        let sent = sent.clone();
        tokio::spawn(async move {
            let mut interval = Duration::from_millis(20);
            let mut unknown_since: Option<Instant> = None;
            loop {
                match docker.inspect_exec(&exec_id).await {
                    Ok(info) if info.running == Some(false) => match info.exit_code {
                        Some(code) => {
                            let signaled = sent.lock().ok().and_then(|s| {
                                s.iter()
                                    .copied()
                                    .find(|sig| code == 128 + i64::from(sig.number()))
                            });
                            let exit = match signaled {
                                Some(sig) => ProcessExit::Signaled(sig),
                                None => ProcessExit::Code(code),
                            };
                            let _ = exit_tx.send(Some(exit));
                            return;
                        }
                        None => {
                            let since = *unknown_since.get_or_insert_with(Instant::now);
                            if since.elapsed() > EXIT_SETTLE_BOUND {
                                let _ = exit_tx.send(Some(ProcessExit::Unknown));
                                return;
                            }
                        }
                    },
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {
                        // Container removed: the exec is gone with it.
                        let _ = exit_tx.send(Some(ProcessExit::Unknown));
                        return;
                    }
                    Err(e) => tracing::debug!(exec_id, error = %e, "exec inspect failed"),
                }
                tokio::select! {
                    _ = nudge.notified() => interval = Duration::from_millis(20),
                    _ = tokio::time::sleep(interval) => {
                        interval = (interval * 2).min(Duration::from_millis(500));
                    }
                }
            }
        });
    }

    Ok(StreamingExec {
        stdin: ProcessInput { inner: input },
        stdout: OutputReceiver { rx: out_rx },
        stderr: OutputReceiver { rx: err_rx },
        control: ProcessControl {
            exec_id,
            process,
            exit: exit_rx,
            sent,
            nudge,
            stderr_dropped_bytes: dropped,
            start_failure: None,
        },
    })
}

fn settled_start_failure(
    exec_id: String,
    process: ExecProcess,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    failure: StartFailure,
) -> StreamingExec {
    let (_, out_rx) = mpsc::channel::<Vec<u8>>(1);
    let (err_tx, err_rx) = mpsc::channel::<Vec<u8>>(1);
    let _ = err_tx.try_send(format!("{}\n", failure.message).into_bytes());
    let (_, exit_rx) = watch::channel(Some(ProcessExit::Code(i64::from(failure.code))));
    StreamingExec {
        stdin: ProcessInput { inner: input },
        stdout: OutputReceiver { rx: out_rx },
        stderr: OutputReceiver { rx: err_rx },
        control: ProcessControl {
            exec_id,
            process,
            exit: exit_rx,
            sent: Arc::new(Mutex::new(Vec::new())),
            nudge: Arc::new(Notify::new()),
            stderr_dropped_bytes: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            start_failure: Some(failure),
        },
    }
}
