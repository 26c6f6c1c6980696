//! Transports: attaching a reader and writer, losing one, and reconnecting
//! a Unix socket within the resume window.

use super::*;

impl Conn {
    /// Starts the reader and writer tasks of a new transport and makes it
    /// the one calls use.
    pub(super) fn attach<R, W>(self: &Arc<Self>, reader: R, mut writer: W)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (out, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let transport = {
            let mut st = self.lock();
            st.transport += 1;
            st.transport
        };
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = out;
        let max_line = self.options.max_line_bytes;
        let weak = Arc::downgrade(self);
        let writer_task = tokio::spawn(async move {
            while let Some(line) = out_rx.recv().await {
                if let Err(e) = async {
                    writer.write_all(&line).await?;
                    writer.flush().await
                }
                .await
                {
                    if let Some(conn) = weak.upgrade() {
                        // A write fails when the provider is gone: name its
                        // exit when it has one (bounded), not the pipe.
                        let why = conn
                            .exited()
                            .await
                            .unwrap_or_else(|| format!("write failed: {e}"));
                        conn.transport_failed(transport, Broken::Closed(why));
                    }
                    return;
                }
            }
            let _ = writer.shutdown().await;
        });
        let weak = Arc::downgrade(self);
        let reader_task = tokio::spawn(async move {
            let mut reader = BufReader::with_capacity(64 * 1024, reader);
            let mut buf = Vec::new();
            loop {
                let result = read_line(&mut reader, max_line, &mut buf).await;
                let Some(conn) = weak.upgrade() else { return };
                match result {
                    Ok(true) => conn.incoming(&buf),
                    Ok(false) => {
                        let status = conn.exit_status().await;
                        return conn.transport_failed(transport, Broken::Closed(status));
                    }
                    Err(LineError::TooLong { limit }) => {
                        return conn.fail(Broken::Violation(
                            "line".into(),
                            format!("a line of at most {limit} bytes"),
                            format!("more than {limit} bytes before a newline"),
                        ))
                    }
                    Err(LineError::Truncated { bytes }) => {
                        return conn.transport_failed(
                            transport,
                            Broken::Closed(format!(
                                "the stream ended inside a line after {bytes} bytes"
                            )),
                        )
                    }
                    Err(LineError::Io(e)) => {
                        return conn.transport_failed(transport, Broken::Closed(e))
                    }
                }
                if conn.lock().broken.is_some() {
                    return;
                }
            }
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.extend([writer_task, reader_task]);
    }

    /// Initializes a new transport and resumes every open process on it.
    pub(super) async fn resume_all(
        self: &Arc<Self>,
        provider_id: &str,
    ) -> Result<(), SandboxError> {
        let params = InitializeParams {
            contract_revision: WIRE_REVISION.into(),
            wire_revision: WIRE_PROTOCOL_REVISION.into(),
        };
        let init = self
            .call_hooked(
                Operation::Initialize,
                method::INITIALIZE,
                &params,
                false,
                self.options.initialize_timeout,
                None,
                true,
            )
            .await?;
        let init: InitializeResult = decode_value(WireType::InitializeResult, &init)?;
        if init.provider_id != provider_id {
            return Err(SandboxError::protocol(
                Operation::Initialize,
                "provider_id",
                provider_id,
                init.provider_id,
            ));
        }
        let processes: Vec<(String, Arc<ClientProcess>)> = self
            .lock()
            .processes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (id, p) in processes {
            let (stdout_offset, stderr_offset) = p.resume_offsets();
            let params = ResumeProcessParams {
                process: id.clone(),
                stdout_offset,
                stderr_offset,
            };
            let hooked = p.clone();
            let hook: ReplyHook = Box::new(move |conn, v| {
                if let Ok(r) = decode_value::<ResumeProcessResult>(WireType::ResumeProcessResult, v)
                {
                    hooked.resume_stdin(conn, &r);
                }
            });
            let resumed = self
                .call_hooked(
                    Operation::Process(ProcessStep::Resume),
                    method::PROCESS_RESUME,
                    &params,
                    false,
                    self.options.initialize_timeout,
                    Some(hook),
                    true,
                )
                .await;
            match resumed {
                Ok(_) => {}
                Err(e @ SandboxError::SandboxOperationFailed { .. })
                    if self.lock().transport_alive() =>
                {
                    // The provider no longer has it: that process failed.
                    p.fail(e);
                    self.lock().processes.remove(&id);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl State {
    pub(super) fn transport_alive(&self) -> bool {
        self.broken.is_none()
    }
}

/// Re-establishes a lost socket connection within the server's resume
/// window and resumes every open process; past the window the processes
/// fail with an error naming it.
pub(super) async fn reconnect(conn: Arc<Conn>) {
    let Some(path) = conn.reconnect.clone() else {
        return;
    };
    let window = *conn.resume_window.lock().unwrap_or_else(|e| e.into_inner());
    let provider_id = conn
        .provider_id
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let deadline = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < deadline {
        if conn.closing.load(Ordering::SeqCst) || conn.lock().broken.is_some() {
            return;
        }
        if let Ok(stream) = tokio::net::UnixStream::connect(&path).await {
            let (r, w) = stream.into_split();
            conn.attach(r, w);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, conn.resume_all(&provider_id)).await {
                Ok(Ok(())) => {
                    conn.lock().reconnecting = false;
                    tracing::debug!("wire connection resumed");
                    return;
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "resume failed; retrying"),
                Err(_) => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    conn.fail(Broken::Closed(format!(
        "the connection was lost and not re-established within the {} ms resume window",
        window.as_millis()
    )));
}
