//! The runner's end of an opened process: stdin under the server's credit,
//! output accounted and acknowledged, the exit, and resumption after a
//! lost connection.

use super::*;

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

impl ClientProcess {
    /// Stops sending stdin until the process is resumed.
    pub(crate) fn suspend(&self) {
        lock(&self.stdin).resuming = true;
    }

    /// The offsets a `process/resume` names: the bytes received of stdout
    /// and stderr. The provider takes every byte before them as
    /// acknowledged (PROTOCOL.md: a resume names "the bytes it holds"),
    /// so its replay window restarts there; the account's window restarts
    /// there too, or a provider honouring its window right after the
    /// resume would look like one overrunning it. What the runner still
    /// buffers unread stays bounded: at most one window from before the
    /// resume plus one after.
    pub(crate) fn resume_offsets(&self) -> (u64, u64) {
        let mut offsets = [0u64; 2];
        for (slot, out) in offsets.iter_mut().zip(&self.out) {
            let mut o = lock(out);
            let received = o.account.received;
            o.account.ack(received);
            *slot = received;
        }
        (offsets[0], offsets[1])
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
        if o.consumed.saturating_sub(o.account.acked) >= STREAM_CHUNK_BYTES as u64
            || o.buf.is_empty()
        {
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

pub(super) const ROLLBACK_BOUND_SECONDS: u64 =
    checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;

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
