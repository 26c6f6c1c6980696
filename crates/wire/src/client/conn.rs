//! The connection's call path: sending requests, routing replies and
//! notifications, call deadlines and cancellation, closing.

use super::*;

impl Conn {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a notification (dropped silently once the connection ended).
    pub(crate) fn notify<P: Serialize>(&self, method: &str, params: &P) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send_line(notification_line(method, params));
    }

    pub(super) fn send_line(&self, line: Vec<u8>) {
        let _ = self
            .out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(line);
    }

    /// The error a call on a broken connection gets, if it is broken.
    pub(crate) fn broken(&self, operation: Operation) -> Option<SandboxError> {
        self.lock().broken.as_ref().map(|b| b.error(operation))
    }

    pub(crate) fn register_process(&self, id: String, p: Arc<ClientProcess>) {
        let mut st = self.lock();
        if let Some(b) = &st.broken {
            p.fail(b.error(op::OPEN_PROCESS));
        }
        st.processes.entry(id).or_insert(p);
    }

    pub(crate) fn process(&self, id: &str) -> Option<Arc<ClientProcess>> {
        self.lock().processes.get(id).cloned()
    }

    /// The transport `transport` ended with `why`. On a socket with open
    /// processes the pending calls fail and a reconnect starts; otherwise
    /// the connection ends.
    pub(super) fn transport_failed(self: &Arc<Self>, transport: u64, why: Broken) {
        let resumable = matches!(why, Broken::Closed(_))
            && self.reconnect.is_some()
            && !self.closing.load(Ordering::SeqCst);
        let (pending, start) = {
            let mut st = self.lock();
            if st.transport != transport || st.broken.is_some() {
                return;
            }
            if !resumable || st.processes.is_empty() {
                drop(st);
                return self.fail(why);
            }
            let start = !st.reconnecting;
            st.reconnecting = true;
            for p in st.processes.values() {
                p.suspend();
            }
            (std::mem::take(&mut st.pending), start)
        };
        for (_, p) in pending {
            let e = why.error(p.operation);
            let _ = p.reply.send(Err(RpcError::sandbox(&e)));
        }
        if start {
            tokio::spawn(reconnect(self.clone()));
        }
    }

    /// Ends the connection: every pending call, every process and every
    /// later call gets `why`. The first cause wins.
    pub(super) fn fail(&self, why: Broken) {
        let (pending, processes) = {
            let mut st = self.lock();
            if st.broken.is_some() {
                return;
            }
            st.reconnecting = false;
            tracing::debug!(?why, "wire connection ended");
            st.broken = Some(why.clone());
            (
                std::mem::take(&mut st.pending),
                std::mem::take(&mut st.processes),
            )
        };
        for (_, p) in pending {
            let e = why.error(p.operation);
            let _ = p.reply.send(Err(RpcError::sandbox(&e)));
        }
        for (_, p) in processes {
            p.fail(why.error(op::OPEN_PROCESS));
        }
        if let Some(child) = self
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            let _ = child.start_kill();
        }
        self.kill_group();
    }

    /// Kills every process left in the spawned provider's process group
    /// (a provider that forked helpers, a shell wrapper's children).
    pub(super) fn kill_group(&self) {
        kill_group(self.group.swap(0, Ordering::SeqCst));
    }

    /// Sends a request and waits for its outcome under `deadline`. A call
    /// whose future is dropped, or that outlives its deadline, sends
    /// `$/cancel`; a late reply to it is not a protocol error, and a late
    /// rollback handle is rolled back.
    pub(crate) async fn call<P: Serialize>(
        self: &Arc<Self>,
        operation: Operation,
        method: &str,
        params: &P,
        allocating: bool,
        deadline: Duration,
    ) -> Result<Value, SandboxError> {
        self.call_hooked(operation, method, params, allocating, deadline, None, false)
            .await
    }

    /// [`Conn::call`] with a hook the reader runs on a successful reply;
    /// `internal` calls go through while a reconnect is resuming.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call_hooked<P: Serialize>(
        self: &Arc<Self>,
        operation: Operation,
        method: &str,
        params: &P,
        allocating: bool,
        deadline: Duration,
        on_reply: Option<ReplyHook>,
        internal: bool,
    ) -> Result<Value, SandboxError> {
        self.call_raw(
            operation, method, params, allocating, deadline, on_reply, internal,
        )
        .await?
        .map_err(|e| map_rpc_error(operation, e))
    }

    /// [`Conn::call_hooked`] with the provider's JSON-RPC error as sent:
    /// the outer error is the connection's (closed, broken, timed out).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call_raw<P: Serialize>(
        self: &Arc<Self>,
        operation: Operation,
        method: &str,
        params: &P,
        allocating: bool,
        deadline: Duration,
        on_reply: Option<ReplyHook>,
        internal: bool,
    ) -> Result<Result<Value, RpcError>, SandboxError> {
        let params = serde_json::to_value(params).map_err(|e| {
            SandboxError::failed(operation, FailureReason::InvalidRequest, e.to_string())
        })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = request_line(id, method, params);
        if line.len() > self.options.max_line_bytes + 1 {
            return Err(SandboxError::invalid_request(
                operation,
                "params",
                format!("a message of at most {} bytes", self.options.max_line_bytes),
                format!("{} bytes", line.len() - 1),
            ));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.lock();
            if let Some(b) = &st.broken {
                return Err(b.error(operation));
            }
            if st.reconnecting && !internal {
                return Err(SandboxError::failed(
                    operation,
                    FailureReason::ProviderError,
                    "the connection to the provider was lost and is being re-established",
                ));
            }
            st.pending.insert(
                id,
                Pending {
                    operation,
                    allocating,
                    reply: tx,
                    on_reply,
                },
            );
        }
        let mut guard = CallGuard {
            conn: self,
            id,
            armed: true,
        };
        self.send_line(line);
        let outcome = tokio::time::timeout(deadline, rx).await;
        match outcome {
            Ok(Ok(reply)) => {
                guard.armed = false;
                Ok(reply)
            }
            Ok(Err(_)) => {
                guard.armed = false;
                Err(self
                    .broken(operation)
                    .unwrap_or_else(|| Broken::Closed("reply lost".into()).error(operation)))
            }
            Err(_) => Err(SandboxError::failed(
                operation,
                FailureReason::TimedOut,
                format!(
                    "no reply to {method} within {} ms; the call was cancelled",
                    deadline.as_millis()
                ),
            )),
        }
    }

    /// Handles one incoming line; a violation ends the connection.
    pub(super) fn incoming(self: &Arc<Self>, line: &[u8]) {
        let message = match decode_line(line) {
            Ok(m) => m,
            Err(v) => {
                return self.fail(Broken::Violation(
                    "line".into(),
                    "a JSON-RPC 2.0 message of this protocol".into(),
                    excerpt(&v.to_string()),
                ))
            }
        };
        match message {
            Incoming::Response { id, outcome } => {
                let pending = {
                    let mut st = self.lock();
                    match st.pending.remove(&id) {
                        Some(p) => Ok(p),
                        None => Err(st.cancelled.remove(&id)),
                    }
                };
                match pending {
                    Ok(mut p) => {
                        if let (Some(hook), Ok(v)) = (p.on_reply.take(), &outcome) {
                            hook(self, v);
                        }
                        if p.operation == op::OPEN_PROCESS {
                            // Register before any frame of it is read: the
                            // server streams right after its reply.
                            if let Ok(v) = &outcome {
                                crate::process::register(self, v);
                            }
                        }
                        let outcome = outcome.map_err(|e| refuse_forged_tag(p.operation, e));
                        let _ = p.reply.send(outcome);
                    }
                    Err(Some(allocating)) => {
                        // A reply to a call its caller stopped observing.
                        if allocating {
                            if let Some(handle) = outcome
                                .ok()
                                .and_then(|v| v.get("rollback_handle").cloned())
                                .and_then(|h| h.as_str().map(str::to_owned))
                            {
                                self.spawn_rollback(handle, Operation::CancelledCallRollback);
                            }
                        }
                    }
                    Err(None) => self.fail(Broken::Violation(
                        "id".into(),
                        "the id of a pending request".into(),
                        id.to_string(),
                    )),
                }
            }
            Incoming::Notification { method, params } => {
                if let Err(b) = crate::process::client_notification(self, &method, params) {
                    self.fail(b);
                }
            }
            Incoming::Request { id, method, params } => {
                let outcome = match method.as_str() {
                    method::ACTIVE_WRITE_DISPATCHED => {
                        // The dispatch marker: the caller's marker decides
                        // (null: dispatch; an error: the caller aborts the
                        // open transaction). Answered from its own task so
                        // the reader keeps reading.
                        let marker =
                            serde_json::from_value::<ActiveWriteDispatchedParams>(params.clone())
                                .map_err(|e| RpcError::plain(code::INVALID_PARAMS, e.to_string()))
                                .and_then(|p| {
                                    self.lock()
                                        .markers
                                        .get(&p.transaction_id)
                                        .cloned()
                                        .map(|m| (m, p.transaction_id.clone()))
                                        .ok_or_else(|| {
                                            RpcError::plain(
                                                code::INVALID_PARAMS,
                                                format!(
                                            "no beginActiveWrite of transaction {} is in flight",
                                            p.transaction_id
                                        ),
                                            )
                                        })
                                });
                        match marker {
                            Ok((marker, transaction_id)) => {
                                let conn = self.clone();
                                tokio::spawn(async move {
                                    let answer = marker
                                        .dispatch(&transaction_id)
                                        .await
                                        .map(|()| Value::Null)
                                        .map_err(|e| RpcError::sandbox(&e));
                                    conn.send_line(response_line(id, answer));
                                });
                                return;
                            }
                            Err(e) => Err(e),
                        }
                    }
                    other => Err(RpcError::plain(
                        code::METHOD_NOT_FOUND,
                        format!("the runner serves no method {other}"),
                    )),
                };
                self.send_line(response_line(id, outcome));
            }
        }
    }

    /// Runs the rollback behind `handle` under the operation `rollback`
    /// (`<member>_rollback`, or `cancelled_call_rollback`).
    pub(crate) fn spawn_rollback(self: &Arc<Self>, handle: String, rollback: Operation) {
        let conn = self.clone();
        tokio::spawn(async move {
            let bound = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS + 5);
            let params = HandleParams { handle };
            if let Err(e) = conn
                .call(rollback, method::ROLLBACK, &params, false, bound)
                .await
            {
                tracing::warn!(error = %e, "rollback of an unobserved handoff failed");
            }
            conn.notify(method::COMMIT, &params);
        });
    }
}

/// Cancels a call whose caller stopped observing it.
struct CallGuard<'a> {
    conn: &'a Arc<Conn>,
    id: u64,
    armed: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let was_pending = {
            let mut st = self.conn.lock();
            match st.pending.remove(&self.id) {
                Some(p) => {
                    st.cancelled.insert(self.id, p.allocating);
                    while st.cancelled.len() > MAX_CANCELLED_REMEMBERED {
                        st.cancelled.pop_first();
                    }
                    true
                }
                None => false,
            }
        };
        if was_pending {
            self.conn
                .notify(method::CANCEL, &CancelParams { id: self.id });
        }
    }
}

/// A provider's error answer, unless it carries a runtime-only tag: those
/// are never a provider's (spec "Errors"), and the runtime passes this
/// client's own verdicts (which travel the same reply channel) through,
/// so a forged one is refused here as PROTOCOL.md says, naming `error`
/// with the tag sent as `actual`. A `decode_*` verdict
/// is the served side's strict decoder refusing a request, and stays.
fn refuse_forged_tag(operation: Operation, e: RpcError) -> RpcError {
    if e.code != code::SANDBOX_ERROR {
        return e;
    }
    let forged = e
        .data
        .as_ref()
        .and_then(|d| decode_value::<SandboxError>(WireType::Error, d).ok())
        .filter(|err| {
            err.is_runtime_only()
                && !matches!(err, SandboxError::SandboxProtocolInvalid { operation, .. } if operation.is_decode())
        });
    match forged {
        Some(err) => RpcError::sandbox(&SandboxError::protocol(
            operation,
            "error",
            "error.data one of the eight tags a provider authors",
            err.tag(),
        )),
        None => e,
    }
}

/// A JSON-RPC error as a closed sandbox error: `-32000` with a decodable
/// `SandboxError` in `data` is that error; anything else is a protocol
/// violation naming the message.
pub(super) fn map_rpc_error(operation: Operation, e: RpcError) -> SandboxError {
    if e.code == code::REVISION_MISMATCH {
        if let Some(m) = e
            .data
            .as_ref()
            .and_then(|d| serde_json::from_value::<RevisionMismatch>(d.clone()).ok())
        {
            return SandboxError::protocol(operation, m.field, m.expected, m.actual);
        }
    }
    if e.code == code::SANDBOX_ERROR {
        if let Some(data) = &e.data {
            if let Ok(err) = decode_value::<SandboxError>(WireType::Error, data) {
                return err;
            }
        }
    }
    SandboxError::protocol(
        operation,
        "error",
        "error.code -32000 with error.data a closed SandboxError",
        excerpt(&format!(
            "code {} message {:?} data {}",
            e.code,
            e.message,
            e.data
                .map(|d| d.to_string())
                .unwrap_or_else(|| "absent".into())
        )),
    )
}

impl Conn {
    /// Why the stream from the provider ended: the spawned provider's exit
    /// status when it exits within 1 s, else "end of stream".
    pub(super) async fn exit_status(&self) -> String {
        match self.exited().await {
            Some(text) => text,
            None if self.has_child() => "end of stream from the provider process".into(),
            None => "end of stream".into(),
        }
    }

    pub(super) fn has_child(&self) -> bool {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The spawned provider's exit, if it exits within 1 s: "the provider
    /// process exited (<status>)". Polled without taking the child, so
    /// the reader and the writer can both ask and both learn the status.
    pub(super) async fn exited(&self) -> Option<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            let status = {
                let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
                match child.as_mut() {
                    None => return None,
                    Some(c) => c.try_wait(),
                }
            };
            match status {
                Ok(Some(s)) => return Some(format!("the provider process exited ({s})")),
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => return None,
            }
        }
    }

    pub(super) async fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        // A spawned provider first gets EOF on its stdin and a grace period
        // to tear down what it holds (a served target's scope); then it and
        // everything in its process group are killed.
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        let group = self.group.swap(0, Ordering::SeqCst);
        {
            let (closed, _) = mpsc::unbounded_channel::<Vec<u8>>();
            *self.out.lock().unwrap_or_else(|e| e.into_inner()) = closed;
        }
        self.fail(Broken::Closed("closed by the runner".into()));
        if let Some(mut child) = child {
            let exited = tokio::time::timeout(CLOSE_GRACE, child.wait()).await;
            if exited.is_err() {
                let _ = child.start_kill();
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            }
        }
        kill_group(group);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            t.abort();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.kill_group();
        for t in self
            .tasks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}
