//! The runner side: [`WireClient`] implements [`SandboxProvider`] and the
//! optional member traits over a connection to a served provider.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;
use checkfu_sandbox_contract::excerpt;
use checkfu_sandbox_contract::wire::{decode_value, WIRE_REVISION};
use checkfu_sandbox_contract::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::line::{read_line, LineError};
use crate::process::ClientProcess;
use crate::protocol::*;

/// How a client waits, and the line bound it enforces.
#[derive(Debug, Clone, Copy)]
pub struct WireOptions {
    /// Deadline of an ordinary call (default 120 s). execute waits its own
    /// `timeout_seconds` plus [`EXECUTE_GRACE_SECONDS`] if that is longer;
    /// `sandbox/rollback` waits 30 s plus 5 s.
    pub call_timeout: Duration,
    /// Deadline of `initialize` (default 10 s).
    pub initialize_timeout: Duration,
    /// The longest line accepted (default [`MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
}

impl Default for WireOptions {
    fn default() -> Self {
        WireOptions {
            call_timeout: Duration::from_secs(DEFAULT_CALL_TIMEOUT_SECONDS),
            initialize_timeout: Duration::from_secs(INITIALIZE_TIMEOUT_SECONDS),
            max_line_bytes: MAX_LINE_BYTES,
        }
    }
}

/// Why the connection ended, rendered per call into a closed error.
#[derive(Debug, Clone)]
pub(crate) enum Broken {
    /// The provider closed the connection or its process exited.
    Closed(String),
    /// The provider broke the protocol: field, expected, actual.
    Violation(String, String, String),
}

impl Broken {
    pub(crate) fn error(&self, operation: Operation) -> SandboxError {
        match self {
            Broken::Closed(message) => SandboxError::failed(
                operation,
                FailureReason::ProviderError,
                format!("provider connection closed: {message}"),
            ),
            Broken::Violation(field, expected, actual) => {
                SandboxError::protocol(operation, field.clone(), expected.clone(), actual.clone())
            }
        }
    }
}

/// How many cancelled request ids a client remembers so that a late reply
/// to one is not taken for a protocol violation.
const MAX_CANCELLED_REMEMBERED: usize = 4096;

struct Pending {
    operation: Operation,
    allocating: bool,
    reply: oneshot::Sender<Result<Value, RpcError>>,
    on_reply: Option<ReplyHook>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Pending>,
    /// Requests the caller stopped observing: id → allocating; at most
    /// [`MAX_CANCELLED_REMEMBERED`], oldest forgotten first.
    cancelled: BTreeMap<u64, bool>,
    processes: HashMap<String, Arc<ClientProcess>>,
    /// beginActiveWrite calls in flight: transaction id -> the caller's
    /// dispatch marker, asked when the provider sends
    /// `runner/activeWriteDispatched`.
    markers: HashMap<String, Arc<dyn DispatchMarker>>,
    broken: Option<Broken>,
    /// A socket connection was lost with processes open: calls are refused
    /// until the processes are resumed on a new connection.
    reconnecting: bool,
    /// Which transport the reader and writer tasks serve; a stale task's
    /// report is ignored.
    transport: u64,
}

/// Runs in the reader task on a successful reply, before the next line.
type ReplyHook = Box<dyn FnOnce(&Arc<Conn>, &Value) + Send>;

/// Kills every process in the process group `group` leads (0: none).
fn kill_group(group: i32) {
    use rustix::process::{kill_process_group, Pid, Signal};
    if let Some(pid) = Pid::from_raw(group) {
        // ESRCH: the group is already empty.
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

/// How long a spawned provider may take to exit after EOF on its stdin
/// when the runner closes the connection, before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// One connection: a writer queue, the reader task's state.
pub(crate) struct Conn {
    out: Mutex<mpsc::UnboundedSender<Vec<u8>>>,
    state: Mutex<State>,
    next_id: AtomicU64,
    options: WireOptions,
    child: Mutex<Option<tokio::process::Child>>,
    /// The process group a spawned provider leads (its pid; 0 for none
    /// or once killed): every process it started is killed with it, once,
    /// so a recycled group id is never signalled.
    group: std::sync::atomic::AtomicI32,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The socket to reconnect to.
    reconnect: Option<std::path::PathBuf>,
    /// The server's resume window.
    resume_window: Mutex<Duration>,
    closing: std::sync::atomic::AtomicBool,
    /// The provider id of the first initialize (a resumed connection must
    /// name the same).
    provider_id: Mutex<String>,
}

impl Conn {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a notification (dropped silently once the connection ended).
    pub(crate) fn notify<P: Serialize>(&self, method: &str, params: &P) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send_line(notification_line(method, params));
    }

    fn send_line(&self, line: Vec<u8>) {
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
    fn transport_failed(self: &Arc<Self>, transport: u64, why: Broken) {
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
    fn fail(&self, why: Broken) {
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
    fn kill_group(&self) {
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
    async fn call_hooked<P: Serialize>(
        self: &Arc<Self>,
        operation: Operation,
        method: &str,
        params: &P,
        allocating: bool,
        deadline: Duration,
        on_reply: Option<ReplyHook>,
        internal: bool,
    ) -> Result<Value, SandboxError> {
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
                reply.map_err(|e| map_rpc_error(operation, e))
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
    fn incoming(self: &Arc<Self>, line: &[u8]) {
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

/// A JSON-RPC error as a closed sandbox error: `-32000` with a decodable
/// `SandboxError` in `data` is that error; anything else is a protocol
/// violation naming the message.
fn map_rpc_error(operation: Operation, e: RpcError) -> SandboxError {
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

/// A provider served in another process or behind a socket.
///
/// Cloning shares the connection. Every call has a deadline
/// ([`WireOptions`]); a provider that never answers, exits, writes a
/// malformed line, a line over the bound, or answers an unknown id yields a
/// closed error naming what was wrong, and the connection is then closed
/// for every call (the child process is killed).
#[derive(Clone)]
pub struct WireClient {
    conn: Arc<Conn>,
    init: Arc<InitializeResult>,
    capabilities: SandboxProviderCapabilities,
}

impl std::fmt::Debug for WireClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireClient")
            .field("provider_id", &self.init.provider_id)
            .finish_non_exhaustive()
    }
}

impl WireClient {
    /// Spawns `command` with piped stdin and stdout (stderr inherited) and
    /// initializes over them. The child is killed when the connection ends
    /// and when the last clone is dropped.
    ///
    /// # Errors
    /// `SandboxOperationFailed{operation: initialize}` when the command
    /// cannot start; otherwise as [`WireClient::over`].
    pub async fn spawn(
        mut command: tokio::process::Command,
        options: WireOptions,
    ) -> Result<Self, SandboxError> {
        // The provider leads its own process group, so that closing the
        // connection kills everything it started and a terminal's signals
        // reach only checkfu.
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| {
            SandboxError::failed(
                Operation::Initialize,
                FailureReason::ProviderError,
                format!("could not start the provider process: {e}"),
            )
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(SandboxError::failed(
                Operation::Initialize,
                FailureReason::ProviderError,
                "the provider process has no piped stdio",
            ));
        };
        Self::start(stdout, stdin, Some(child), None, options).await
    }

    /// Connects to a provider served on the Unix socket at `path`. If the
    /// connection is lost while processes are open, the client reconnects
    /// to `path` within the server's resume window and resumes them;
    /// calls made meanwhile fail at once.
    ///
    /// # Errors
    /// `SandboxOperationFailed{operation: initialize}` when the socket
    /// cannot be reached; otherwise as [`WireClient::over`].
    pub async fn connect_unix(path: &Path, options: WireOptions) -> Result<Self, SandboxError> {
        let stream = tokio::net::UnixStream::connect(path).await.map_err(|e| {
            SandboxError::failed(
                Operation::Initialize,
                FailureReason::ProviderError,
                format!("could not connect to {}: {e}", path.display()),
            )
        })?;
        let (r, w) = stream.into_split();
        Self::start(r, w, None, Some(path.to_owned()), options).await
    }

    /// Initializes over an already open byte transport.
    ///
    /// # Errors
    /// `SandboxProtocolInvalid{operation: initialize, field, expected,
    /// actual}` for a revision mismatch (either side's refusal names both
    /// values) or an envelope that does not decode; the connection errors
    /// of any call.
    pub async fn over<R, W>(
        reader: R,
        writer: W,
        options: WireOptions,
    ) -> Result<Self, SandboxError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self::start(reader, writer, None, None, options).await
    }

    async fn start<R, W>(
        reader: R,
        writer: W,
        child: Option<tokio::process::Child>,
        reconnect: Option<std::path::PathBuf>,
        options: WireOptions,
    ) -> Result<Self, SandboxError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (out, _) = mpsc::unbounded_channel::<Vec<u8>>();
        let group = child
            .as_ref()
            .and_then(tokio::process::Child::id)
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or(0);
        let conn = Arc::new(Conn {
            out: Mutex::new(out),
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            options,
            child: Mutex::new(child),
            group: std::sync::atomic::AtomicI32::new(group),
            tasks: Mutex::new(Vec::new()),
            reconnect,
            resume_window: Mutex::new(Duration::from_millis(RESUME_WINDOW_MS)),
            closing: std::sync::atomic::AtomicBool::new(false),
            provider_id: Mutex::new(String::new()),
        });
        conn.attach(reader, writer);

        let params = InitializeParams {
            contract_revision: WIRE_REVISION.into(),
            wire_revision: WIRE_PROTOCOL_REVISION.into(),
        };
        let init = conn
            .call(
                Operation::Initialize,
                method::INITIALIZE,
                &params,
                false,
                options.initialize_timeout,
            )
            .await;
        let result = match init {
            Ok(v) => v,
            Err(e) => {
                conn.close().await;
                return Err(e);
            }
        };
        match Self::accept(&conn, result) {
            Ok(client) => Ok(client),
            Err(e) => {
                conn.close().await;
                Err(e)
            }
        }
    }

    fn accept(conn: &Arc<Conn>, result: Value) -> Result<Self, SandboxError> {
        let init: InitializeResult = decode_value(WireType::InitializeResult, &result)?;
        for (field, expected, actual) in [
            ("contract_revision", WIRE_REVISION, &init.contract_revision),
            ("wire_revision", WIRE_PROTOCOL_REVISION, &init.wire_revision),
        ] {
            if actual != expected {
                return Err(SandboxError::protocol(
                    Operation::Initialize,
                    field,
                    expected,
                    actual.clone(),
                ));
            }
        }
        let capabilities = decode_value(WireType::Capabilities, &init.capabilities)?;
        *conn.provider_id.lock().unwrap_or_else(|e| e.into_inner()) = init.provider_id.clone();
        *conn.resume_window.lock().unwrap_or_else(|e| e.into_inner()) =
            Duration::from_millis(init.limits.resume_window_ms);
        Ok(WireClient {
            conn: conn.clone(),
            init: Arc::new(init),
            capabilities,
        })
    }

    /// The served provider's `initialize` answer.
    pub fn initialize_result(&self) -> &InitializeResult {
        &self.init
    }

    /// Whether the served side offers the `conformance/*` hooks.
    pub fn serves_conformance(&self) -> bool {
        self.init.conformance
    }

    /// The provider process's id, when this client spawned it.
    pub fn child_pid(&self) -> Option<u32> {
        self.conn
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|c| c.id())
    }

    /// Ends the connection: pending calls fail, the child (if any) is
    /// killed and reaped, the connection's tasks end.
    pub async fn close(&self) {
        self.conn.close().await;
    }

    async fn call<P: Serialize, T: DeserializeOwned>(
        &self,
        operation: Operation,
        method: &str,
        wire_type: WireType,
        params: &P,
    ) -> Result<T, SandboxError> {
        let v = self
            .conn
            .call(
                operation,
                method,
                params,
                false,
                self.conn.options.call_timeout,
            )
            .await?;
        decode_value(wire_type, &v)
    }

    async fn call_unit<P: Serialize>(
        &self,
        operation: Operation,
        method: &str,
        result: WireType,
        params: &P,
    ) -> Result<(), SandboxError> {
        let v = self
            .conn
            .call(
                operation,
                method,
                params,
                false,
                self.conn.options.call_timeout,
            )
            .await?;
        if v.is_null() {
            Ok(())
        } else {
            Err(SandboxError::protocol(
                Operation::Decode(result),
                ".",
                "null",
                excerpt(&v.to_string()),
            ))
        }
    }

    async fn handoff<P: Serialize, T: DeserializeOwned>(
        &self,
        member: Member,
        method: &str,
        wire_type: WireType,
        params: &P,
    ) -> Result<Handoff<T>, SandboxError> {
        let operation = Operation::Member(member);
        let v = self
            .conn
            .call(
                operation,
                method,
                params,
                true,
                self.conn.options.call_timeout,
            )
            .await?;
        let handle = v
            .get("rollback_handle")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let Some(handle) = handle else {
            return Err(SandboxError::protocol(
                Operation::DecodeHandoff(wire_type),
                "rollback_handle",
                "a string naming the allocation's rollback",
                v.get("rollback_handle")
                    .map(|h| excerpt(&h.to_string()))
                    .unwrap_or_else(|| "absent".into()),
            ));
        };
        let rollback = Arc::new(WireRollback {
            conn: self.conn.clone(),
            handle,
            member,
        });
        let shape = v
            .as_object()
            .map(|o| o.len() == 2 && o.contains_key("value"));
        let value = if shape == Some(true) {
            decode_value::<T>(wire_type, &v["value"])
        } else {
            Err(SandboxError::protocol(
                Operation::DecodeHandoff(wire_type),
                ".",
                "an object with exactly value and rollback_handle",
                excerpt(&v.to_string()),
            ))
        };
        match value {
            Ok(value) => Ok(Handoff { value, rollback }),
            Err(e) => {
                // Nobody else can unwind an allocation whose value did not
                // decode: roll it back here, once, under the usual bound.
                if let Err(r) = rollback.rollback().await {
                    tracing::warn!(error = %r, "rollback of an undecodable handoff failed");
                }
                Err(e)
            }
        }
    }

    /// Calls a `conformance/*` hook.
    ///
    /// # Errors
    /// A message naming the hook and what went wrong.
    pub async fn hook<P: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<T, String> {
        let v = self
            .conn
            .call(
                Operation::ConformanceHook,
                method,
                params,
                false,
                self.conn.options.call_timeout,
            )
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        serde_json::from_value(v).map_err(|e| format!("{method}: result does not decode: {e}"))
    }
}

impl Conn {
    async fn exit_status(&self) -> String {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(mut child) = child else {
            return "end of stream".into();
        };
        let status = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
        let text = match status {
            Ok(Ok(s)) => format!("the provider process exited ({s})"),
            _ => "end of stream from the provider process".into(),
        };
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        text
    }

    async fn close(&self) {
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

/// A handoff's rollback over the wire: `sandbox/rollback {handle}` each
/// time it is run; `sandbox/commit {handle}` when the runner drops it
/// (it took ownership of the value, or it is done rolling back).
struct WireRollback {
    conn: Arc<Conn>,
    handle: String,
    member: Member,
}

#[async_trait]
impl Rollback for WireRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let op = Operation::Rollback(self.member);
        let v = self
            .conn
            .call(
                op,
                method::ROLLBACK,
                &HandleParams {
                    handle: self.handle.clone(),
                },
                false,
                Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS + 5),
            )
            .await?;
        if v.is_null() {
            Ok(())
        } else {
            Err(SandboxError::protocol(
                op,
                ".",
                "null",
                excerpt(&v.to_string()),
            ))
        }
    }
}

impl Drop for WireRollback {
    fn drop(&mut self) {
        // Run or not, the runner is done with this handle: release it.
        self.conn.notify(
            method::COMMIT,
            &HandleParams {
                handle: self.handle.clone(),
            },
        );
    }
}

#[async_trait]
impl SandboxProvider for WireClient {
    fn provider_id(&self) -> &str {
        &self.init.provider_id
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        self.capabilities.clone()
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.handoff(
            Member::Provision,
            method::PROVISION,
            WireType::Instance,
            &request,
        )
        .await
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        self.call_unit(
            op::WRITE_FILE,
            method::WRITE_FILE,
            WireType::WriteFileResult,
            &request,
        )
        .await
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.handoff(
            Member::Activate,
            method::ACTIVATE,
            WireType::Instance,
            &request,
        )
        .await
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        let own =
            Duration::from_secs(u64::from(request.command.timeout_seconds) + EXECUTE_GRACE_SECONDS);
        let deadline = own.max(self.conn.options.call_timeout);
        let v = self
            .conn
            .call(op::EXECUTE, method::EXECUTE, &request, false, deadline)
            .await?;
        decode_value(WireType::CommandResult, &v)
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        self.call(
            op::READ_FILE,
            method::READ_FILE,
            WireType::FileContent,
            &request,
        )
        .await
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.handoff(
            Member::Snapshot,
            method::SNAPSHOT,
            WireType::Snapshot,
            &request,
        )
        .await
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.handoff(
            Member::CloneSnapshot,
            method::CLONE_SNAPSHOT,
            WireType::Snapshot,
            &request,
        )
        .await
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.handoff(
            Member::Release,
            method::RELEASE,
            WireType::ReleaseDisposition,
            &request,
        )
        .await
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.handoff(Member::Resume, method::RESUME, WireType::Instance, &request)
            .await
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.call_unit(
            op::DESTROY,
            method::DESTROY,
            WireType::DestroyResult,
            &request,
        )
        .await
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.call_unit(
            op::DESTROY_SNAPSHOT,
            method::DESTROY_SNAPSHOT,
            WireType::DestroySnapshotResult,
            &request,
        )
        .await
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.call(
            op::CLEANUP,
            method::CLEANUP,
            WireType::CleanupResult,
            &request,
        )
        .await
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        self.has(OptionalMember::ReadFiles).then_some(self as _)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        self.has(OptionalMember::ListDir).then_some(self as _)
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        self.has(OptionalMember::ListProjectDir)
            .then_some(self as _)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        self.has(OptionalMember::OpenProcess).then_some(self as _)
    }

    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        self.has(OptionalMember::BeginActiveWrite)
            .then_some(self as _)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        self.has(OptionalMember::ResolveImage).then_some(self as _)
    }
}

#[async_trait]
impl ResolveImageMember for WireClient {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        let pinned: ImageReferenceParams = self
            .call(
                op::RESOLVE_IMAGE,
                method::RESOLVE_IMAGE,
                WireType::ImageReference,
                &ImageReferenceParams {
                    reference: reference.to_owned(),
                },
            )
            .await?;
        Ok(pinned.reference)
    }
}

impl WireClient {
    fn has(&self, m: OptionalMember) -> bool {
        self.init.members.contains(&m)
    }
}

#[async_trait]
impl ReadFilesMember for WireClient {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        self.call(
            op::READ_FILES,
            method::READ_FILES,
            WireType::ReadFilesResult,
            &request,
        )
        .await
    }
}

#[async_trait]
impl ListDirMember for WireClient {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        self.call(
            op::LIST_DIR,
            method::LIST_DIR,
            WireType::ListDirResult,
            &request,
        )
        .await
    }
}

#[async_trait]
impl ListProjectDirMember for WireClient {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        self.call(
            op::LIST_PROJECT_DIR,
            method::LIST_PROJECT_DIR,
            WireType::ListProjectDirResult,
            &request,
        )
        .await
    }
}

#[async_trait]
impl ActiveWriteMember for WireClient {
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        /// Unregisters the marker however the call ends.
        struct Registered<'a>(&'a Conn, String);
        impl Drop for Registered<'_> {
            fn drop(&mut self) {
                self.0.lock().markers.remove(&self.1);
            }
        }
        let request = transaction.request();
        self.conn
            .lock()
            .markers
            .insert(request.transaction_id.clone(), transaction.marker());
        let _registered = Registered(&self.conn, request.transaction_id.clone());
        self.call(
            op::BEGIN_ACTIVE_WRITE,
            method::BEGIN_ACTIVE_WRITE,
            WireType::ActiveWriteOutcome,
            request,
        )
        .await
    }
}

#[async_trait]
impl OpenProcessMember for WireClient {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        let v = self
            .conn
            .call(
                op::OPEN_PROCESS,
                method::OPEN_PROCESS,
                &request,
                false,
                self.conn.options.call_timeout,
            )
            .await?;
        let opened: OpenProcessResult = decode_value(WireType::OpenProcessResult, &v)?;
        crate::process::client_process(&self.conn, opened)
    }
}

impl Conn {
    /// Starts the reader and writer tasks of a new transport and makes it
    /// the one calls use.
    fn attach<R, W>(self: &Arc<Self>, reader: R, mut writer: W)
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
                        conn.transport_failed(
                            transport,
                            Broken::Closed(format!("write failed: {e}")),
                        );
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
    async fn resume_all(self: &Arc<Self>, provider_id: &str) -> Result<(), SandboxError> {
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
            let (stdout_offset, stderr_offset) = p.received();
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
    fn transport_alive(&self) -> bool {
        self.broken.is_none()
    }
}

/// Re-establishes a lost socket connection within the server's resume
/// window and resumes every open process; past the window the processes
/// fail with an error naming it.
async fn reconnect(conn: Arc<Conn>) {
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
