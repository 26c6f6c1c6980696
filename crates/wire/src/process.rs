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
use checkfu_sandbox_contract::wire::{decode_fields, decode_value};
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
    /// The credit granted at open.
    initial: u64,
    offset: u64,
    /// Bytes sent but not yet credited back, kept to resend after a
    /// reconnect: `[confirmed, offset)`.
    unconfirmed: VecDeque<u8>,
    confirmed: u64,
    /// The connection is being re-established: bytes are kept, not sent,
    /// until the resume reply says where the provider stands.
    resuming: bool,
    closed: bool,
    error: Option<String>,
    waker: Option<Waker>,
}

#[derive(Default)]
struct OutState {
    buf: VecDeque<u8>,
    /// Received and acknowledged bytes, under the protocol's rules.
    account: OutputAccount,
    consumed: u64,
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
    /// Stops sending stdin until the process is resumed.
    pub(crate) fn suspend(&self) {
        lock(&self.stdin).resuming = true;
    }

    /// Bytes received of stdout and stderr.
    pub(crate) fn received(&self) -> (u64, u64) {
        (
            lock(&self.out[0]).account.received,
            lock(&self.out[1]).account.received,
        )
    }

    /// Applies a `process/resume` reply (from the reader task, before any
    /// later frame): forget what was credited, resend what the provider
    /// did not receive, recompute the credit.
    pub(crate) fn resume_stdin(&self, conn: &Conn, r: &ResumeProcessResult) {
        let mut s = lock(&self.stdin);
        let credited = r.stdin_granted.clamp(s.confirmed, s.offset);
        let drop_n = usize::try_from(credited - s.confirmed).unwrap_or(usize::MAX);
        let drop_n = drop_n.min(s.unconfirmed.len());
        s.unconfirmed.drain(..drop_n);
        s.confirmed = credited;
        let from = r.stdin_offset.clamp(s.confirmed, s.offset);
        let skip = usize::try_from(from - s.confirmed).unwrap_or(usize::MAX);
        let resend: Vec<u8> = s.unconfirmed.iter().skip(skip).copied().collect();
        let mut offset = from;
        for chunk in resend.chunks(STREAM_CHUNK_BYTES) {
            conn.notify(
                method::PROCESS_STDIN,
                &StdinFrame {
                    process: self.id.clone(),
                    offset,
                    data_base64: chunk.to_vec().into(),
                },
            );
            offset += chunk.len() as u64;
        }
        if s.closed {
            conn.notify(
                method::PROCESS_STDIN_CLOSE,
                &StdinCloseFrame {
                    process: self.id.clone(),
                    offset: s.offset,
                },
            );
        }
        s.credit = (s.initial + s.confirmed).saturating_sub(s.offset);
        s.resuming = false;
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }

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
    let Ok(opened) = decode_value::<OpenProcessResult>(WireType::OpenProcessResult, reply) else {
        return;
    };
    let (exit, _) = watch::channel(None);
    let p = Arc::new(ClientProcess {
        id: opened.process.clone(),
        window: opened.replay_window_bytes,
        stdin: Mutex::new(StdinState {
            credit: opened.stdin_credit_bytes,
            initial: opened.stdin_credit_bytes,
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

fn violation(m: Mismatch) -> Broken {
    Broken::Violation(m.field, m.expected, m.actual)
}

fn frame<T: DeserializeOwned>(method: &str, params: &Value) -> Result<T, Broken> {
    decode_fields::<T>(params)
        .map_err(|m| Broken::Violation(format!("{method}.{}", m.field), m.expected, m.actual))
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
                let n = usize::try_from(f.bytes).unwrap_or(usize::MAX);
                let n = n.min(s.unconfirmed.len());
                s.unconfirmed.drain(..n);
                s.confirmed += n as u64;
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
                // A chunk resent after a reconnect may overlap: keep only
                // the bytes not yet received.
                let skip = o
                    .account
                    .output(f.offset, data.len(), p.window)
                    .map_err(violation)?;
                let fresh = data.get(skip..).unwrap_or(&[]);
                o.buf.extend(fresh);
                if let Some(w) = o.waker.take() {
                    w.wake();
                }
            }
        }
        method::PROCESS_EOF => {
            let f: EofFrame = frame(method, &params)?;
            if let Some(p) = find(&f.process) {
                let mut o = lock(&p.out[index(f.stream)]);
                o.account.eof(f.offset).map_err(violation)?;
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
        s.unconfirmed.extend(&buf[..n]);
        if !s.resuming {
            // Queued under the stdin lock, so a reconnect's suspension
            // orders it: before it on the old connection (then resent),
            // or not at all.
            self.conn.notify(
                method::PROCESS_STDIN,
                &StdinFrame {
                    process: self.p.id.clone(),
                    offset,
                    data_base64: buf[..n].to_vec().into(),
                },
            );
        }
        drop(s);
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
            if !s.resuming {
                self.conn.notify(
                    method::PROCESS_STDIN_CLOSE,
                    &StdinCloseFrame {
                        process: self.p.id.clone(),
                        offset,
                    },
                );
            }
            drop(s);
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
        if o.consumed - o.account.acked >= STREAM_CHUNK_BYTES as u64 || o.buf.is_empty() {
            let consumed = o.consumed;
            o.account.ack(consumed);
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
                Operation::Process(ProcessStep::Signal),
                method::PROCESS_SIGNAL,
                &params,
                false,
                Duration::from_secs(DEFAULT_CALL_TIMEOUT_SECONDS),
            )
            .await?;
        null_result(Operation::Process(ProcessStep::Signal), v)
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        let params = ProcessParams {
            process: self.p.id.clone(),
        };
        let result = self
            .conn
            .call(
                Operation::Process(ProcessStep::Destroy),
                method::PROCESS_DESTROY,
                &params,
                false,
                Duration::from_secs(ROLLBACK_BOUND_SECONDS),
            )
            .await;
        // A connection that already ended took the process with it.
        match result {
            Ok(v) => null_result(Operation::Process(ProcessStep::Destroy), v),
            Err(e)
                if self
                    .conn
                    .broken(Operation::Process(ProcessStep::Destroy))
                    .is_some() =>
            {
                tracing::debug!(error = %e, "destroy after the connection ended");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

const ROLLBACK_BOUND_SECONDS: u64 = checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;

fn null_result(operation: Operation, v: Value) -> Result<(), SandboxError> {
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

#[derive(Default)]
struct StreamInner {
    /// Every byte before this offset is acknowledged.
    acked: u64,
    /// Bytes sent so far.
    sent: u64,
    /// The replay window: bytes `[acked, sent)`.
    replay: VecDeque<u8>,
    eof: bool,
}

#[derive(Default)]
struct StreamState {
    inner: Mutex<StreamInner>,
    changed: Notify,
}

#[derive(Default)]
struct StdinAccount {
    received: u64,
    credit_left: u64,
    granted: u64,
}

/// What the process's tasks share: where frames go (none while detached),
/// the stream windows, the stdin account and the exit frame.
struct Shared {
    id: String,
    sink: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    streams: [StreamState; 2],
    account: Mutex<StdinAccount>,
    final_frame: Mutex<Option<Vec<u8>>>,
    chunk: usize,
}

impl Shared {
    fn send(&self, line: Vec<u8>) {
        if let Some(out) = lock(&self.sink).as_ref() {
            let _ = out.send(line);
        }
    }

    fn output_frame(&self, stream: StreamName, offset: u64, data: &[u8]) -> Vec<u8> {
        notify_line(
            method::PROCESS_OUTPUT,
            &OutputFrame {
                process: self.id.clone(),
                stream,
                offset,
                data_base64: data.to_vec().into(),
            },
        )
    }

    fn eof_frame(&self, stream: StreamName, offset: u64) -> Vec<u8> {
        notify_line(
            method::PROCESS_EOF,
            &EofFrame {
                process: self.id.clone(),
                stream,
                offset,
            },
        )
    }
}

/// The served side of one process. It outlives a connection: detached,
/// it keeps its replay windows (and stops reading a full one) until a new
/// connection resumes it or the resume window passes.
pub(crate) struct ServerProcess {
    pub(crate) control: Arc<dyn ProcessControl>,
    shared: Arc<Shared>,
    stdin: mpsc::UnboundedSender<StdinMsg>,
    generation: std::sync::atomic::AtomicU64,
    /// The connection whose frames the process accepts; after a resume,
    /// lines still buffered from the old connection are ignored.
    owner: std::sync::atomic::AtomicU64,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Starts serving `process` as `id`: stdin, both output streams and the
/// exit, each in its own task writing frames to `out`.
pub(crate) fn serve_process(
    id: String,
    process: SandboxProcess,
    out: mpsc::UnboundedSender<Vec<u8>>,
    limits: WireLimits,
    owner: u64,
) -> Arc<ServerProcess> {
    let SandboxProcess {
        mut input,
        output,
        error,
        control,
        ..
    } = process;
    let shared = Arc::new(Shared {
        id,
        sink: Mutex::new(Some(out)),
        streams: [StreamState::default(), StreamState::default()],
        account: Mutex::new(StdinAccount {
            credit_left: limits.stdin_credit_bytes,
            ..StdinAccount::default()
        }),
        final_frame: Mutex::new(None),
        chunk: usize::try_from(limits.stream_chunk_bytes).unwrap_or(STREAM_CHUNK_BYTES),
    });
    let (tx, mut rx) = mpsc::unbounded_channel::<StdinMsg>();
    let mut tasks = Vec::new();
    {
        let shared = shared.clone();
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
                        let mut acct = lock(&shared.account);
                        acct.credit_left = acct.credit_left.saturating_add(n);
                        acct.granted += n;
                        shared.send(notify_line(
                            method::PROCESS_CREDIT,
                            &CreditFrame {
                                process: shared.id.clone(),
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
    let streams: [(Pin<Box<dyn futures_io::AsyncRead + Send>>, StreamName); 2] =
        [(output, StreamName::Stdout), (error, StreamName::Stderr)];
    for (mut reader, stream) in streams {
        let shared = shared.clone();
        let window = limits.replay_window_bytes;
        tasks.push(tokio::spawn(async move {
            let state = &shared.streams[index(stream)];
            let mut buf = vec![0u8; shared.chunk];
            loop {
                // Wait for room in the replay window.
                let room = loop {
                    let notified = state.changed.notified();
                    let room = {
                        let s = lock(&state.inner);
                        window.saturating_sub(s.sent - s.acked)
                    };
                    if room > 0 {
                        break room;
                    }
                    notified.await;
                };
                let want = shared
                    .chunk
                    .min(usize::try_from(room).unwrap_or(shared.chunk));
                let n = match reader.read(&mut buf[..want]).await {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::debug!(error = %e, ?stream, "stream read failed; ending it");
                        0
                    }
                };
                let mut s = lock(&state.inner);
                if n == 0 {
                    s.eof = true;
                    shared.send(shared.eof_frame(stream, s.sent));
                    return;
                }
                shared.send(shared.output_frame(stream, s.sent, &buf[..n]));
                s.replay.extend(&buf[..n]);
                s.sent += n as u64;
            }
        }));
    }
    {
        let shared = shared.clone();
        let control = control.clone();
        tasks.push(tokio::spawn(async move {
            let line = match control.wait().await {
                Ok(exit) => notify_line(
                    method::PROCESS_EXIT,
                    &ExitFrame {
                        process: shared.id.clone(),
                        exit,
                    },
                ),
                Err(error) => notify_line(
                    method::PROCESS_FAILED,
                    &ProcessFailedFrame {
                        process: shared.id.clone(),
                        error,
                    },
                ),
            };
            let mut last = lock(&shared.final_frame);
            shared.send(line.clone());
            *last = Some(line);
        }));
    }
    Arc::new(ServerProcess {
        control,
        shared,
        stdin: tx,
        generation: std::sync::atomic::AtomicU64::new(0),
        owner: std::sync::atomic::AtomicU64::new(owner),
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
        let mut acct = lock(&self.shared.account);
        if offset != acct.received {
            return Err(SandboxError::invalid_request(
                op::OPEN_PROCESS,
                "process/stdin.offset",
                acct.received.to_string(),
                offset.to_string(),
            ));
        }
        let n = data.len() as u64;
        if n > acct.credit_left {
            return Err(SandboxError::invalid_request(
                op::OPEN_PROCESS,
                "process/stdin.data_base64",
                format!("at most {} bytes (the credit left)", acct.credit_left),
                format!("{n} bytes"),
            ));
        }
        acct.received += n;
        acct.credit_left -= n;
        drop(acct);
        let _ = self.stdin.send(StdinMsg::Data(data));
        Ok(())
    }

    /// Half-closes stdin.
    pub(crate) fn close_stdin(&self) {
        let _ = self.stdin.send(StdinMsg::Close);
    }

    /// The runner holds `stream` up to `offset`: drop those bytes from the
    /// replay window.
    pub(crate) fn ack(&self, stream: StreamName, offset: u64) {
        let state = &self.shared.streams[index(stream)];
        {
            let mut s = lock(&state.inner);
            if offset > s.acked && offset <= s.sent {
                let n = usize::try_from(offset - s.acked).unwrap_or(usize::MAX);
                let n = n.min(s.replay.len());
                s.replay.drain(..n);
                s.acked = offset;
            }
        }
        state.changed.notify_waiters();
    }

    /// Whether connection `session` owns the process.
    pub(crate) fn owned_by(&self, session: u64) -> bool {
        self.owner.load(std::sync::atomic::Ordering::SeqCst) == session
    }

    /// The connection ended: frames stop; windows keep their bytes.
    /// Returns the generation a later expiry must still see.
    pub(crate) fn detach(&self) -> u64 {
        *lock(&self.shared.sink) = None;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1
    }

    /// Whether the process is still detached since `generation`.
    pub(crate) fn detached_since(&self, generation: u64) -> bool {
        self.generation.load(std::sync::atomic::Ordering::SeqCst) == generation
            && lock(&self.shared.sink).is_none()
    }

    /// Attaches the process to a new connection: sends the reply to
    /// `process/resume` request `id`, then every unacknowledged byte from
    /// the runner's offsets, the ends of ended streams and the exit frame,
    /// before any new frame.
    ///
    /// # Errors
    /// `SandboxOperationFailed{operation: open_process, invalid_request}`
    /// naming the offset when it lies outside the replay window.
    pub(crate) fn resume(
        &self,
        id: u64,
        params: &ResumeProcessParams,
        out: mpsc::UnboundedSender<Vec<u8>>,
        window: u64,
        session: u64,
    ) -> Result<(), SandboxError> {
        let shared = &self.shared;
        let acct = lock(&shared.account);
        let mut s0 = lock(&shared.streams[0].inner);
        let mut s1 = lock(&shared.streams[1].inner);
        for (name, s, from) in [
            ("stdout_offset", &*s0, params.stdout_offset),
            ("stderr_offset", &*s1, params.stderr_offset),
        ] {
            if from < s.acked || from > s.sent {
                return Err(SandboxError::invalid_request(
                    op::OPEN_PROCESS,
                    name,
                    format!(
                        "an offset inside the {window}-byte replay window [{}, {}]",
                        s.acked, s.sent
                    ),
                    from.to_string(),
                ));
            }
        }
        let result = ResumeProcessResult {
            stdin_offset: acct.received,
            stdin_granted: acct.granted,
        };
        let _ = out.send(response_line(
            id,
            Ok(serde_json::to_value(&result).unwrap_or(Value::Null)),
        ));
        for (stream, s, from) in [
            (StreamName::Stdout, &mut *s0, params.stdout_offset),
            (StreamName::Stderr, &mut *s1, params.stderr_offset),
        ] {
            let n = usize::try_from(from - s.acked).unwrap_or(usize::MAX);
            let n = n.min(s.replay.len());
            s.replay.drain(..n);
            s.acked = from;
            let bytes: Vec<u8> = s.replay.iter().copied().collect();
            let mut offset = from;
            for chunk in bytes.chunks(shared.chunk) {
                let _ = out.send(shared.output_frame(stream, offset, chunk));
                offset += chunk.len() as u64;
            }
            if s.eof {
                let _ = out.send(shared.eof_frame(stream, s.sent));
            }
        }
        if let Some(line) = lock(&shared.final_frame).clone() {
            let _ = out.send(line);
        }
        *lock(&shared.sink) = Some(out);
        self.owner
            .store(session, std::sync::atomic::Ordering::SeqCst);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop((s0, s1, acct));
        shared.streams[0].changed.notify_waiters();
        shared.streams[1].changed.notify_waiters();
        Ok(())
    }

    /// Destroys the process and stops its tasks.
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
