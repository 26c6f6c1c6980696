//! The provider's end of an opened process: pumping the provider's
//! streams into frames within the replay window, stdin credit, detaching
//! and resuming.

use super::*;

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
    pub(super) fn send(&self, line: Vec<u8>) {
        if let Some(out) = lock(&self.sink).as_ref() {
            let _ = out.send(line);
        }
    }

    pub(super) fn output_frame(&self, stream: StreamName, offset: u64, data: &[u8]) -> Vec<u8> {
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

    pub(super) fn eof_frame(&self, stream: StreamName, offset: u64) -> Vec<u8> {
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
