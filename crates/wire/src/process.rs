//! openProcess across the hop: stdin under a credit window, stdout and
//! stderr as offset-numbered chunks acknowledged by the runner within a
//! replay window, the exit as its own frame.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::wire::decode_value;
use checkfu_sandbox_contract::*;
use futures_util::{AsyncReadExt, AsyncWriteExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, watch, Notify};

use crate::client::{Broken, Conn};
use crate::protocol::*;

// ---- runner side ------------------------------------------------------

#[derive(Default)]
struct StdinState {
    credit: u64,
    offset: u64,
    closed: bool,
    error: Option<String>,
    waker: Option<Waker>,
}

#[derive(Default)]
struct OutState {
    buf: VecDeque<u8>,
    received: u64,
    consumed: u64,
    acked: u64,
    eof: bool,
    error: Option<String>,
    waker: Option<Waker>,
}

type ExitSlot = Option<Result<ProcessExit, SandboxError>>;

/// The runner's view of one served process.
pub(crate) struct ClientProcess {
    id: String,
    window: u64,
    stdin: Mutex<StdinState>,
    out: [Mutex<OutState>; 2],
    exit: watch::Sender<ExitSlot>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn index(s: StreamName) -> usize {
    match s {
        StreamName::Stdout => 0,
        StreamName::Stderr => 1,
    }
}

impl ClientProcess {
    /// The process can no longer make progress: streams error, `wait`
    /// returns `e` (unless the exit already settled).
    pub(crate) fn fail(&self, e: SandboxError) {
        let text = e.to_string();
        {
            let mut s = lock(&self.stdin);
            s.error.get_or_insert(text.clone());
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
        for o in &self.out {
            let mut o = lock(o);
            if !o.eof {
                o.error.get_or_insert(text.clone());
            }
            if let Some(w) = o.waker.take() {
                w.wake();
            }
        }
        self.exit.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(Err(e));
                true
            } else {
                false
            }
        });
    }
}

/// Registers the process an openProcess reply names, from the reader
/// task, before any of its frames is read.
pub(crate) fn register(conn: &Arc<Conn>, reply: &Value) {
    let Ok(opened) = decode_value::<OpenProcessResult>("open_process_result", reply) else {
        return;
    };
    let (exit, _) = watch::channel(None);
    let p = Arc::new(ClientProcess {
        id: opened.process.clone(),
        window: opened.replay_window_bytes,
        stdin: Mutex::new(StdinState {
            credit: opened.stdin_credit_bytes,
            ..StdinState::default()
        }),
        out: [
            Mutex::new(OutState::default()),
            Mutex::new(OutState::default()),
        ],
        exit,
    });
    conn.register_process(opened.process, p);
}

/// Builds the runner's [`SandboxProcess`] for an opened (and registered)
/// process.
///
/// # Errors
/// `SandboxOperationFailed{open_process}` when the connection ended before
/// the process was registered.
pub(crate) fn client_process(
    conn: &Arc<Conn>,
    opened: OpenProcessResult,
) -> Result<SandboxProcess, SandboxError> {
    let Some(p) = conn.process(&opened.process) else {
        return Err(conn.broken(op::OPEN_PROCESS).unwrap_or_else(|| {
            SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                "the opened process was not registered",
            )
        }));
    };
    Ok(SandboxProcess {
        input: Box::pin(ClientStdin {
            conn: conn.clone(),
            p: p.clone(),
        }),
        output: Box::pin(ClientOutput {
            conn: conn.clone(),
            p: p.clone(),
            stream: StreamName::Stdout,
        }),
        error: Box::pin(ClientOutput {
            conn: conn.clone(),
            p: p.clone(),
            stream: StreamName::Stderr,
        }),
        control: Arc::new(ClientControl {
            conn: conn.clone(),
            p,
        }),
        evidence: opened.evidence,
    })
}

fn frame<T: DeserializeOwned>(method: &str, params: &Value) -> Result<T, Broken> {
    decode_value::<T>(method, params).map_err(|e| match e {
        SandboxError::SandboxProtocolInvalid {
            field,
            expected,
            actual,
            ..
        } => Broken::Violation(format!("{method}.{field}"), expected, actual),
        other => Broken::Violation(method.into(), "a valid frame".into(), other.to_string()),
    })
}

/// Applies a provider-to-runner notification.
///
/// # Errors
/// A violation ends the connection: an unknown method, a frame that does
/// not decode, a gap in a stream's offsets, or output past the window.
pub(crate) fn client_notification(
    conn: &Arc<Conn>,
    method: &str,
    params: Value,
) -> Result<(), Broken> {
    let find = |id: &str| conn.process(id);
    match method {
        method::PROCESS_CREDIT => {
            let f: CreditFrame = frame(method, &params)?;
            if let Some(p) = find(&f.process) {
                let mut s = lock(&p.stdin);
                s.credit = s.credit.saturating_add(f.bytes);
                if let Some(w) = s.waker.take() {
                    w.wake();
                }
            }
        }
        method::PROCESS_OUTPUT => {
            let f: OutputFrame = frame(method, &params)?;
            if let Some(p) = find(&f.process) {
                let mut o = lock(&p.out[index(f.stream)]);
                let data = f.data_base64.0;
                if f.offset > o.received {
                    return Err(Broken::Violation(
                        format!("{method}.offset"),
                        format!("at most {} (no gap)", o.received),
                        f.offset.to_string(),
                    ));
                }
                // A chunk resent after a reconnect may overlap: keep only
                // the bytes not yet received.
                let skip = usize::try_from(o.received - f.offset).unwrap_or(usize::MAX);
                let fresh = data.get(skip..).unwrap_or(&[]);
                let unacked = o.received + fresh.len() as u64 - o.acked;
                if unacked > p.window {
                    return Err(Broken::Violation(
                        format!("{method}.data_base64"),
                        format!(
                            "at most {} unacknowledged bytes (the replay window)",
                            p.window
                        ),
                        format!("{unacked} bytes"),
                    ));
                }
                o.buf.extend(fresh);
                o.received += fresh.len() as u64;
                if let Some(w) = o.waker.take() {
                    w.wake();
                }
            }
        }
        method::PROCESS_EOF => {
            let f: EofFrame = frame(method, &params)?;
            if let Some(p) = find(&f.process) {
                let mut o = lock(&p.out[index(f.stream)]);
                if f.offset != o.received {
                    return Err(Broken::Violation(
                        format!("{method}.offset"),
                        o.received.to_string(),
                        f.offset.to_string(),
                    ));
                }
                o.eof = true;
                if let Some(w) = o.waker.take() {
                    w.wake();
                }
            }
        }
        method::PROCESS_EXIT => {
            let f: ExitFrame = frame(method, &params)?;
            if let Some(p) = find(&f.process) {
                p.exit.send_if_modified(|slot| {
                    if slot.is_none() {
                        *slot = Some(Ok(f.exit));
                        true
                    } else {
                        false
                    }
                });
            }
        }
        method::PROCESS_FAILED => {
            let f: ProcessFailedFrame = frame(method, &params)?;
            if let Some(p) = find(&f.process) {
                p.fail(f.error);
            }
        }
        other => {
            return Err(Broken::Violation(
                "method".into(),
                "a process/* notification".into(),
                other.to_owned(),
            ))
        }
    }
    Ok(())
}

struct ClientStdin {
    conn: Arc<Conn>,
    p: Arc<ClientProcess>,
}

impl futures_io::AsyncWrite for ClientStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = lock(&self.p.stdin);
        if let Some(e) = &s.error {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, e.clone())));
        }
        if s.closed {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "stdin already closed",
            )));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if s.credit == 0 {
            s.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf
            .len()
            .min(STREAM_CHUNK_BYTES)
            .min(usize::try_from(s.credit).unwrap_or(usize::MAX));
        let offset = s.offset;
        s.credit -= n as u64;
        s.offset += n as u64;
        drop(s);
        self.conn.notify(
            method::PROCESS_STDIN,
            &StdinFrame {
                process: self.p.id.clone(),
                offset,
                data_base64: buf[..n].to_vec().into(),
            },
        );
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = lock(&self.p.stdin);
        if !s.closed {
            s.closed = true;
            let offset = s.offset;
            drop(s);
            self.conn.notify(
                method::PROCESS_STDIN_CLOSE,
                &StdinCloseFrame {
                    process: self.p.id.clone(),
                    offset,
                },
            );
        }
        Poll::Ready(Ok(()))
    }
}

struct ClientOutput {
    conn: Arc<Conn>,
    p: Arc<ClientProcess>,
    stream: StreamName,
}

impl futures_io::AsyncRead for ClientOutput {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut o = lock(&self.p.out[index(self.stream)]);
        if o.buf.is_empty() {
            if o.eof {
                return Poll::Ready(Ok(0));
            }
            if let Some(e) = &o.error {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    e.clone(),
                )));
            }
            o.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(o.buf.len());
        for (slot, byte) in buf.iter_mut().zip(o.buf.drain(..n)) {
            *slot = byte;
        }
        o.consumed += n as u64;
        if o.consumed - o.acked >= STREAM_CHUNK_BYTES as u64 || o.buf.is_empty() {
            o.acked = o.consumed;
            let offset = o.consumed;
            drop(o);
            self.conn.notify(
                method::PROCESS_ACK,
                &AckFrame {
                    process: self.p.id.clone(),
                    stream: self.stream,
                    offset,
                },
            );
        }
        Poll::Ready(Ok(n))
    }
}

struct ClientControl {
    conn: Arc<Conn>,
    p: Arc<ClientProcess>,
}

#[async_trait]
impl ProcessControl for ClientControl {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        let mut rx = self.p.exit.subscribe();
        let settled = rx.wait_for(Option::is_some).await;
        match settled.as_deref() {
            Ok(Some(result)) => result.clone(),
            _ => Err(SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                "the process record ended without an exit",
            )),
        }
    }

    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        let params = SignalParams {
            process: self.p.id.clone(),
            signal,
        };
        let v = self
            .conn
            .call(
                "open_process_signal",
                method::PROCESS_SIGNAL,
                &params,
                false,
                Duration::from_secs(DEFAULT_CALL_TIMEOUT_SECONDS),
            )
            .await?;
        null_result("open_process_signal", v)
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        let params = ProcessParams {
            process: self.p.id.clone(),
        };
        let result = self
            .conn
            .call(
                "open_process_destroy",
                method::PROCESS_DESTROY,
                &params,
                false,
                Duration::from_secs(ROLLBACK_BOUND_SECONDS),
            )
            .await;
        // A connection that already ended took the process with it.
        match result {
            Ok(v) => null_result("open_process_destroy", v),
            Err(e) if self.conn.broken("open_process_destroy").is_some() => {
                tracing::debug!(error = %e, "destroy after the connection ended");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

const ROLLBACK_BOUND_SECONDS: u64 = checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;

fn null_result(operation: &str, v: Value) -> Result<(), SandboxError> {
    if v.is_null() {
        Ok(())
    } else {
        Err(SandboxError::protocol(
            operation,
            ".",
            "null",
            v.to_string(),
        ))
    }
}

// ---- provider side ----------------------------------------------------

enum StdinMsg {
    Data(Vec<u8>),
    Close,
}

struct Acked {
    offset: Mutex<u64>,
    changed: Notify,
}

/// The served side of one process.
pub(crate) struct ServerProcess {
    pub(crate) control: Arc<dyn ProcessControl>,
    stdin: mpsc::UnboundedSender<StdinMsg>,
    /// (next expected offset, credit the runner still holds)
    stdin_account: Arc<Mutex<(u64, u64)>>,
    acked: [Arc<Acked>; 2],
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Starts serving `process` as `id`: stdin, both output streams and the
/// exit, each in its own task writing lines to `out`.
pub(crate) fn serve_process(
    id: String,
    process: SandboxProcess,
    out: mpsc::UnboundedSender<Vec<u8>>,
    limits: WireLimits,
) -> Arc<ServerProcess> {
    let SandboxProcess {
        mut input,
        output,
        error,
        control,
        ..
    } = process;
    let (tx, mut rx) = mpsc::unbounded_channel::<StdinMsg>();
    let account = Arc::new(Mutex::new((0u64, limits.stdin_credit_bytes)));
    let mut tasks = Vec::new();
    {
        let account = account.clone();
        let out = out.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                match msg {
                    StdinMsg::Data(bytes) => {
                        let n = bytes.len() as u64;
                        let written = async {
                            input.write_all(&bytes).await?;
                            input.flush().await
                        }
                        .await;
                        if let Err(e) = written {
                            tracing::debug!(error = %e, "stdin bytes discarded");
                        }
                        {
                            let mut acct = lock(&account);
                            acct.1 = acct.1.saturating_add(n);
                        }
                        let _ = out.send(notify_line(
                            method::PROCESS_CREDIT,
                            &CreditFrame {
                                process: id.clone(),
                                bytes: n,
                            },
                        ));
                    }
                    StdinMsg::Close => {
                        let _ = input.close().await;
                        break;
                    }
                }
            }
        }));
    }
    let acked = [
        Arc::new(Acked {
            offset: Mutex::new(0),
            changed: Notify::new(),
        }),
        Arc::new(Acked {
            offset: Mutex::new(0),
            changed: Notify::new(),
        }),
    ];
    let streams: [(Pin<Box<dyn futures_io::AsyncRead + Send>>, StreamName); 2] =
        [(output, StreamName::Stdout), (error, StreamName::Stderr)];
    for (mut reader, stream) in streams {
        let out = out.clone();
        let id = id.clone();
        let acked = acked[index(stream)].clone();
        let window = limits.replay_window_bytes;
        let chunk = usize::try_from(limits.stream_chunk_bytes).unwrap_or(STREAM_CHUNK_BYTES);
        tasks.push(tokio::spawn(async move {
            let mut sent: u64 = 0;
            let mut buf = vec![0u8; chunk];
            loop {
                // Wait for room in the replay window.
                let room = loop {
                    let notified = acked.changed.notified();
                    let a = *lock(&acked.offset);
                    let room = window.saturating_sub(sent - a.min(sent));
                    if room > 0 {
                        break room;
                    }
                    notified.await;
                };
                let want = chunk.min(usize::try_from(room).unwrap_or(chunk));
                let n = match reader.read(&mut buf[..want]).await {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::debug!(error = %e, ?stream, "stream read failed; ending it");
                        0
                    }
                };
                if n == 0 {
                    let _ = out.send(notify_line(
                        method::PROCESS_EOF,
                        &EofFrame {
                            process: id.clone(),
                            stream,
                            offset: sent,
                        },
                    ));
                    return;
                }
                let _ = out.send(notify_line(
                    method::PROCESS_OUTPUT,
                    &OutputFrame {
                        process: id.clone(),
                        stream,
                        offset: sent,
                        data_base64: buf[..n].to_vec().into(),
                    },
                ));
                sent += n as u64;
            }
        }));
    }
    {
        let out = out.clone();
        let id = id.clone();
        let control = control.clone();
        tasks.push(tokio::spawn(async move {
            let line = match control.wait().await {
                Ok(exit) => notify_line(
                    method::PROCESS_EXIT,
                    &ExitFrame {
                        process: id.clone(),
                        exit,
                    },
                ),
                Err(error) => notify_line(
                    method::PROCESS_FAILED,
                    &ProcessFailedFrame {
                        process: id.clone(),
                        error,
                    },
                ),
            };
            let _ = out.send(line);
        }));
    }
    Arc::new(ServerProcess {
        control,
        stdin: tx,
        stdin_account: account,
        acked,
        tasks: Mutex::new(tasks),
    })
}

fn notify_line<P: serde::Serialize>(method: &str, params: &P) -> Vec<u8> {
    notification_line(method, serde_json::to_value(params).unwrap_or(Value::Null))
}

impl ServerProcess {
    /// Accepts a stdin chunk at `offset`.
    ///
    /// # Errors
    /// `SandboxOperationFailed{invalid_request}` naming the field when the
    /// offset leaves a gap or the chunk exceeds the credit.
    pub(crate) fn stdin(&self, offset: u64, data: Vec<u8>) -> Result<(), SandboxError> {
        let mut acct = lock(&self.stdin_account);
        if offset != acct.0 {
            return Err(SandboxError::invalid_request(
                op::OPEN_PROCESS,
                "process/stdin.offset",
                acct.0.to_string(),
                offset.to_string(),
            ));
        }
        let n = data.len() as u64;
        if n > acct.1 {
            return Err(SandboxError::invalid_request(
                op::OPEN_PROCESS,
                "process/stdin.data_base64",
                format!("at most {} bytes (the credit left)", acct.1),
                format!("{n} bytes"),
            ));
        }
        acct.0 += n;
        acct.1 -= n;
        drop(acct);
        let _ = self.stdin.send(StdinMsg::Data(data));
        Ok(())
    }

    /// Half-closes stdin.
    pub(crate) fn close_stdin(&self) {
        let _ = self.stdin.send(StdinMsg::Close);
    }

    /// The runner holds `stream` up to `offset`.
    pub(crate) fn ack(&self, stream: StreamName, offset: u64) {
        let a = &self.acked[index(stream)];
        {
            let mut cur = lock(&a.offset);
            if offset > *cur {
                *cur = offset;
            }
        }
        a.changed.notify_waiters();
    }

    /// Destroys the process and stops its tasks (connection end).
    pub(crate) async fn shut(&self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(ROLLBACK_BOUND_SECONDS),
            self.control.destroy(),
        )
        .await;
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}
