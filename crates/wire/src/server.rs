//! The provider side: serve any [`SandboxProvider`] (and optionally the
//! conformance hooks) over stdio or a Unix socket.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;
use checkfu_sandbox_contract::wire::{decode_fields, decode_value, WIRE_REVISION};
use checkfu_sandbox_contract::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::line::{read_line, LineError};
use crate::process::{serve_process, ServerProcess};
use crate::protocol::*;

/// The `conformance/*` hooks a served target may answer (the
/// `ConformanceTarget` members beyond the provider).
#[async_trait]
pub trait ConformanceHooks: Send + Sync {
    /// `conformance/describe`.
    ///
    /// # Errors
    /// A message when the target cannot describe itself.
    async fn describe(&self) -> Result<DescribeResult, String>;
    /// `conformance/startListener`.
    ///
    /// # Errors
    /// A message when no listener could be started.
    async fn start_listener(&self) -> Result<ListenerWire, String>;
    /// `conformance/controlProbe`: what the listener sent.
    ///
    /// # Errors
    /// A message when the control could not dial it.
    async fn control_probe(&self, listener: ListenerWire) -> Result<Vec<u8>, String>;
    /// `conformance/stopListener` (idempotent).
    async fn stop_listener(&self, listener: ListenerWire);
    /// `conformance/liveObjects`.
    ///
    /// # Errors
    /// A message when the platform could not be asked.
    async fn live_objects(&self) -> Result<LiveObjectsWire, String>;
    /// `conformance/close`: removes everything of the target's scope
    /// (idempotent).
    ///
    /// # Errors
    /// A message naming what was left.
    async fn close(&self) -> Result<(), String>;
    /// `conformance/pauseWorkload` (optional): pause or unpause an
    /// instance's workload from outside the provider; `None` when the
    /// target cannot (the method is then answered as not found).
    async fn pause_workload(
        &self,
        _instance_id: &str,
        _paused: bool,
    ) -> Option<Result<(), String>> {
        None
    }
    /// `conformance/workloadPaused` (optional); `None` when the target
    /// cannot tell.
    async fn workload_paused(&self, _instance_id: &str) -> Option<Result<bool, String>> {
        None
    }
}

/// What a server serves.
#[derive(Clone)]
pub struct Served {
    /// The provider.
    pub provider: Arc<dyn SandboxProvider>,
    /// A human name for `initialize`.
    pub name: String,
    /// The conformance hooks, when served.
    pub hooks: Option<Arc<dyn ConformanceHooks>>,
    /// The bounds stated in `initialize` and enforced on incoming lines.
    pub limits: WireLimits,
    /// Processes of every connection, so that a new connection can resume
    /// one.
    registry: Arc<Registry>,
}

/// Open processes across connections.
#[derive(Default)]
struct Registry {
    processes: Mutex<HashMap<String, Arc<ServerProcess>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Registry {
    fn get(&self, id: &str) -> Option<Arc<ServerProcess>> {
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    fn remove(&self, id: &str) -> Option<Arc<ServerProcess>> {
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }

    fn insert(&self, id: String, p: Arc<ServerProcess>) {
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, p);
    }
}

impl Served {
    /// `provider` with no hooks and the default bounds.
    pub fn new(provider: Arc<dyn SandboxProvider>) -> Self {
        let name = provider.provider_id().to_owned();
        Served {
            provider,
            name,
            hooks: None,
            limits: WireLimits::default(),
            registry: Arc::new(Registry::default()),
        }
    }

    /// Adds the conformance hooks.
    pub fn with_hooks(mut self, hooks: Arc<dyn ConformanceHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }
}

/// Why a connection ended abnormally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// The runner sent a line over the bound, a truncated line or a line
    /// that is not a protocol message.
    #[error("the runner broke the protocol: {0}")]
    Protocol(String),
    /// The transport failed.
    #[error("transport error: {0}")]
    Io(String),
}

struct InFlight {
    abort: Option<tokio::task::AbortHandle>,
    cancelled: bool,
}

#[derive(Default)]
struct SessionState {
    initialized: bool,
    inflight: HashMap<u64, InFlight>,
    handles: HashMap<String, Arc<dyn Rollback>>,
    /// Processes attached to this connection.
    processes: std::collections::BTreeSet<String>,
    next: u64,
    ended: bool,
    /// Requests this side sent the runner (`runner/activeWriteDispatched`),
    /// by id, awaiting the runner's answer.
    asked: HashMap<u64, tokio::sync::oneshot::Sender<Result<Value, RpcError>>>,
}

struct Session {
    /// Unique among the server's connections.
    sid: u64,
    served: Served,
    out: mpsc::UnboundedSender<Vec<u8>>,
    state: Mutex<SessionState>,
}

enum Done {
    Value(Value),
    Handoff(Value, Arc<dyn Rollback>),
    Process(SandboxProcess),
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, line: Vec<u8>) {
        let _ = self.out.send(line);
    }
}

/// Serves one connection until the runner closes it. Rollback handles
/// still held at the end are dropped unrun (the runner may own the
/// values); live processes are destroyed; an allocating call still running
/// is rolled back when it settles.
///
/// # Errors
/// [`ServeError`] when the runner broke the protocol or the transport
/// failed.
pub async fn serve_connection<R, W>(
    served: Served,
    reader: R,
    mut writer: W,
) -> Result<(), ServeError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (out, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer_task = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    let limit = usize::try_from(served.limits.max_line_bytes).unwrap_or(MAX_LINE_BYTES);
    let sid = served
        .registry
        .next
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let session = Arc::new(Session {
        sid,
        served,
        out,
        state: Mutex::new(SessionState::default()),
    });
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut buf = Vec::new();
    let result = loop {
        match read_line(&mut reader, limit, &mut buf).await {
            Ok(true) => {
                if let Err(e) = handle_line(&session, &buf) {
                    break Err(e);
                }
            }
            Ok(false) => break Ok(()),
            Err(LineError::Io(e)) => break Err(ServeError::Io(e)),
            Err(e) => break Err(ServeError::Protocol(e.to_string())),
        }
    };
    end(&session).await;
    drop(session);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer_task).await;
    result
}

async fn end(session: &Arc<Session>) {
    let processes: Vec<String> = {
        let mut st = session.lock();
        st.ended = true;
        st.handles.clear();
        for f in st.inflight.values_mut() {
            f.cancelled = true;
            if let Some(a) = f.abort.take() {
                a.abort();
            }
        }
        std::mem::take(&mut st.processes).into_iter().collect()
    };
    let registry = session.served.registry.clone();
    let window = Duration::from_millis(session.served.limits.resume_window_ms);
    for id in processes {
        let Some(p) = registry.get(&id) else { continue };
        if !p.owned_by(session.sid) {
            continue; // resumed on another connection meanwhile
        }
        let generation = p.detach();
        let registry = registry.clone();
        // Kept for a resume until the window passes, then destroyed.
        tokio::spawn(async move {
            tokio::time::sleep(window).await;
            if p.detached_since(generation) {
                registry.remove(&id);
                p.shut().await;
            }
        });
    }
}

fn handle_line(session: &Arc<Session>, line: &[u8]) -> Result<(), ServeError> {
    let message = decode_line(line).map_err(|e| ServeError::Protocol(e.to_string()))?;
    match message {
        Incoming::Request { id, method, params } => {
            if method == method::INITIALIZE {
                let outcome = initialize(session, &params);
                session.send(response_line(id, outcome));
                return Ok(());
            }
            if method == method::PROCESS_RESUME && session.lock().initialized {
                resume(session, id, &params);
                return Ok(());
            }
            if !session.lock().initialized {
                session.send(response_line(
                    id,
                    Err(RpcError::plain(
                        code::NOT_INITIALIZED,
                        format!("{method} before initialize"),
                    )),
                ));
                return Ok(());
            }
            let abortable = !matches!(
                method.as_str(),
                method::PROVISION
                    | method::ACTIVATE
                    | method::SNAPSHOT
                    | method::CLONE_SNAPSHOT
                    | method::RELEASE
                    | method::RESUME
                    | method::OPEN_PROCESS
                    | method::BEGIN_ACTIVE_WRITE
                    | method::ROLLBACK
                    | method::PROCESS_DESTROY
            );
            session.lock().inflight.insert(
                id,
                InFlight {
                    abort: None,
                    cancelled: false,
                },
            );
            let s = session.clone();
            let task = tokio::spawn(async move {
                let outcome = dispatch(&s, id, &method, params).await;
                settle(&s, id, outcome).await;
            });
            if abortable {
                if let Some(f) = session.lock().inflight.get_mut(&id) {
                    f.abort = Some(task.abort_handle());
                }
            }
        }
        Incoming::Notification { method, params } => notification(session, &method, params),
        Incoming::Response { id, outcome } => {
            // The runner's answer to runner/activeWriteDispatched.
            match session.lock().asked.remove(&id) {
                Some(waiting) => {
                    let _ = waiting.send(outcome);
                }
                None => tracing::debug!(id, "an answer to nothing this side asked"),
            }
        }
    }
    Ok(())
}

/// Sends the outcome of request `id`, unless the runner cancelled it: then
/// an allocation is rolled back here, exactly once, and nothing is sent.
async fn settle(session: &Arc<Session>, id: u64, outcome: Result<Done, RpcError>) {
    let cancelled = {
        let mut st = session.lock();
        let cancelled = st.inflight.remove(&id).map(|f| f.cancelled).unwrap_or(true);
        if !cancelled {
            match outcome {
                Ok(Done::Value(v)) => {
                    drop(st);
                    session.send(response_line(id, Ok(v)));
                }
                Ok(Done::Handoff(value, rollback)) => {
                    st.next += 1;
                    let handle = format!("rb-{}", st.next);
                    st.handles.insert(handle.clone(), rollback);
                    drop(st);
                    let result = HandoffResult {
                        value,
                        rollback_handle: handle,
                    };
                    session.send(response_line(id, Ok(to_value(&result))));
                }
                Ok(Done::Process(process)) => {
                    let n = session
                        .served
                        .registry
                        .next
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let pid = format!("proc-{}", n + 1);
                    let result = OpenProcessResult {
                        process: pid.clone(),
                        evidence: process.evidence.clone(),
                        stdin_credit_bytes: session.served.limits.stdin_credit_bytes,
                        replay_window_bytes: session.served.limits.replay_window_bytes,
                    };
                    // The reply goes out before any frame of the process,
                    // and the process is known before the runner can
                    // send a frame of its own (both under this lock).
                    session.send(response_line(id, Ok(to_value(&result))));
                    let served = serve_process(
                        pid.clone(),
                        process,
                        session.out.clone(),
                        session.served.limits,
                        session.sid,
                    );
                    session.served.registry.insert(pid.clone(), served);
                    st.processes.insert(pid);
                    drop(st);
                }
                Err(e) => {
                    drop(st);
                    session.send(response_line(id, Err(e)));
                }
            }
            return;
        }
        outcome
    };
    match cancelled {
        Ok(Done::Handoff(_, rollback)) => {
            let bound = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS);
            match tokio::time::timeout(bound, rollback.rollback()).await {
                Ok(Ok(())) => tracing::debug!(id, "cancelled allocation rolled back"),
                Ok(Err(e)) => {
                    tracing::warn!(id, error = %e, "rollback of a cancelled allocation failed")
                }
                Err(_) => tracing::warn!(id, "rollback of a cancelled allocation timed out"),
            }
        }
        Ok(Done::Process(process)) => {
            let _ = tokio::time::timeout(
                Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS),
                process.control.destroy(),
            )
            .await;
        }
        _ => {}
    }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn initialize(session: &Session, params: &Value) -> Result<Value, RpcError> {
    let p: InitializeParams = serde_json::from_value(params.clone())
        .map_err(|e| RpcError::plain(code::INVALID_PARAMS, e.to_string()))?;
    for (field, expected, actual) in [
        ("contract_revision", WIRE_REVISION, &p.contract_revision),
        ("wire_revision", WIRE_PROTOCOL_REVISION, &p.wire_revision),
    ] {
        if actual != expected {
            let m = RevisionMismatch {
                field: field.into(),
                expected: expected.into(),
                actual: actual.clone(),
            };
            return Err(RpcError {
                code: code::REVISION_MISMATCH,
                message: format!(
                    "{field}: this server speaks {expected}, the runner sent {actual}"
                ),
                data: Some(to_value(&m)),
            });
        }
    }
    session.lock().initialized = true;
    let provider = &session.served.provider;
    let mut members = Vec::new();
    if provider.read_files().is_some() {
        members.push(OptionalMember::ReadFiles);
    }
    if provider.list_dir().is_some() {
        members.push(OptionalMember::ListDir);
    }
    if provider.list_project_dir().is_some() {
        members.push(OptionalMember::ListProjectDir);
    }
    if provider.open_process().is_some() {
        members.push(OptionalMember::OpenProcess);
    }
    if provider.begin_active_write().is_some() {
        members.push(OptionalMember::BeginActiveWrite);
    }
    if provider.resolve_image().is_some() {
        members.push(OptionalMember::ResolveImage);
    }
    Ok(to_value(&InitializeResult {
        contract_revision: WIRE_REVISION.into(),
        wire_revision: WIRE_PROTOCOL_REVISION.into(),
        provider_id: provider.provider_id().into(),
        provider_name: session.served.name.clone(),
        capabilities: to_value(&provider.capabilities()),
        members,
        conformance: session.served.hooks.is_some(),
        limits: session.served.limits,
    }))
}

/// The parameters of `method`, strictly decoded; the message names the
/// method as `decode_<method>` and the first offending field.
fn params<T: DeserializeOwned>(method: &str, v: &Value) -> Result<T, RpcError> {
    decode_fields::<T>(v).map_err(|m| RpcError {
        code: code::INVALID_PARAMS,
        message: format!("protocol invalid: decode_{method}: {m}"),
        data: None,
    })
}

/// The dispatch marker of a served beginActiveWrite: asks the runner with
/// `runner/activeWriteDispatched` and waits for its answer. A runner that
/// answers with an error, or is gone before answering, aborts the still
/// open transaction.
struct WireMarker {
    session: Arc<Session>,
    request_id: u64,
}

#[async_trait::async_trait]
impl DispatchMarker for WireMarker {
    async fn dispatch(&self, transaction_id: &str) -> Result<(), SandboxError> {
        const OP: Operation = Operation::Member(checkfu_sandbox_contract::Member::BeginActiveWrite);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = {
            let mut st = self.session.lock();
            st.next += 1;
            let id = st.next;
            st.asked.insert(id, tx);
            id
        };
        let params = ActiveWriteDispatchedParams {
            request_id: self.request_id,
            transaction_id: transaction_id.to_owned(),
        };
        self.session.send(request_line(
            id,
            method::ACTIVE_WRITE_DISPATCHED,
            to_value(&params),
        ));
        match rx.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(SandboxError::failed(
                OP,
                FailureReason::ProviderError,
                format!(
                    "the runner aborted the transaction at its dispatch marker: {}",
                    e.message
                ),
            )),
            Err(_) => Err(SandboxError::failed(
                OP,
                FailureReason::ProviderError,
                "the runner was gone before it answered the dispatch marker",
            )),
        }
    }
}

fn sandbox(e: SandboxError) -> RpcError {
    RpcError::sandbox(&e)
}

fn absent(method: &str) -> RpcError {
    RpcError::plain(
        code::METHOD_NOT_FOUND,
        format!("{method} is not served by this provider"),
    )
}

fn unit(r: Result<(), SandboxError>) -> Result<Done, RpcError> {
    r.map(|()| Done::Value(Value::Null)).map_err(sandbox)
}

fn value<T: Serialize>(r: Result<T, SandboxError>) -> Result<Done, RpcError> {
    r.map(|v| Done::Value(to_value(&v))).map_err(sandbox)
}

fn handoff<T: Serialize>(r: Result<Handoff<T>, SandboxError>) -> Result<Done, RpcError> {
    r.map(|h| Done::Handoff(to_value(&h.value), h.rollback))
        .map_err(sandbox)
}

fn hook_error(message: String) -> RpcError {
    RpcError {
        code: code::HOOK_FAILED,
        message: message.clone(),
        data: Some(to_value(&HookFailure { message })),
    }
}

async fn dispatch(session: &Arc<Session>, id: u64, m: &str, p: Value) -> Result<Done, RpcError> {
    let provider = session.served.provider.clone();
    match m {
        method::CAPABILITIES => Ok(Done::Value(to_value(&provider.capabilities()))),
        method::PROVISION => handoff(provider.provision(params(m, &p)?).await),
        method::WRITE_FILE => unit(provider.write_file(params(m, &p)?).await),
        method::ACTIVATE => handoff(provider.activate(params(m, &p)?).await),
        method::EXECUTE => value(provider.execute(params(m, &p)?).await),
        method::READ_FILE => value(provider.read_file(params(m, &p)?).await),
        method::SNAPSHOT => handoff(provider.snapshot(params(m, &p)?).await),
        method::CLONE_SNAPSHOT => handoff(provider.clone_snapshot(params(m, &p)?).await),
        method::RELEASE => handoff(provider.release(params(m, &p)?).await),
        method::RESUME => handoff(provider.resume(params(m, &p)?).await),
        method::DESTROY => unit(provider.destroy(params(m, &p)?).await),
        method::DESTROY_SNAPSHOT => unit(provider.destroy_snapshot(params(m, &p)?).await),
        method::CLEANUP => value(provider.cleanup(params(m, &p)?).await),
        method::READ_FILES => match provider.read_files() {
            Some(member) => value(member.read_files(params(m, &p)?).await),
            None => Err(absent(m)),
        },
        method::LIST_DIR => match provider.list_dir() {
            Some(member) => value(member.list_dir(params(m, &p)?).await),
            None => Err(absent(m)),
        },
        method::LIST_PROJECT_DIR => match provider.list_project_dir() {
            Some(member) => value(member.list_project_dir(params(m, &p)?).await),
            None => Err(absent(m)),
        },
        method::BEGIN_ACTIVE_WRITE => match provider.begin_active_write() {
            Some(member) => {
                let marker = Arc::new(WireMarker {
                    session: session.clone(),
                    request_id: id,
                });
                value(
                    member
                        .begin_active_write(ActiveWriteTransaction::new(params(m, &p)?, marker))
                        .await,
                )
            }
            None => Err(absent(m)),
        },
        method::RESOLVE_IMAGE => match provider.resolve_image() {
            Some(member) => {
                let ImageReferenceParams { reference } = params(m, &p)?;
                value(
                    member
                        .resolve_image(&reference)
                        .await
                        .map(|reference| ImageReferenceParams { reference }),
                )
            }
            None => Err(absent(m)),
        },
        method::OPEN_PROCESS => match provider.open_process() {
            Some(member) => member
                .open_process(params(m, &p)?)
                .await
                .map(Done::Process)
                .map_err(sandbox),
            None => Err(absent(m)),
        },
        method::ROLLBACK => {
            let h: HandleParams = params(m, &p)?;
            // Kept until sandbox/commit or the connection's end: a rollback
            // may be run again and must settle the same way.
            let rollback = session.lock().handles.get(&h.handle).cloned();
            match rollback {
                Some(r) => unit(r.rollback().await),
                None => Err(sandbox(SandboxError::invalid_request(
                    Operation::RollbackHandle,
                    "handle",
                    "an outstanding rollback handle",
                    h.handle,
                ))),
            }
        }
        method::PROCESS_SIGNAL => {
            let s: SignalParams = params(m, &p)?;
            let process = session.served.registry.get(&s.process);
            match process {
                Some(pr) => unit(pr.control.signal(s.signal).await),
                None => Err(sandbox(unknown_process(&s.process))),
            }
        }
        method::PROCESS_DESTROY => {
            let s: ProcessParams = params(m, &p)?;
            let process = session.served.registry.get(&s.process);
            match process {
                Some(pr) => unit(pr.control.destroy().await),
                // Idempotent: an unknown or already torn-down process is gone.
                None => Ok(Done::Value(Value::Null)),
            }
        }
        method::CONFORMANCE_DESCRIBE
        | method::CONFORMANCE_START_LISTENER
        | method::CONFORMANCE_CONTROL_PROBE
        | method::CONFORMANCE_STOP_LISTENER
        | method::CONFORMANCE_LIVE_OBJECTS
        | method::CONFORMANCE_CLOSE
        | method::CONFORMANCE_PAUSE_WORKLOAD
        | method::CONFORMANCE_WORKLOAD_PAUSED => {
            let Some(hooks) = session.served.hooks.clone() else {
                return Err(absent(m));
            };
            hook(hooks.as_ref(), m, p).await
        }
        other => Err(RpcError::plain(
            code::METHOD_NOT_FOUND,
            format!("no method {other}"),
        )),
    }
}

/// `process/resume`: reattach a detached process to this connection; the
/// reply and the replay go out before any new frame.
fn resume(session: &Arc<Session>, id: u64, params: &Value) {
    let p: ResumeProcessParams = match decode_value(WireType::ResumeProcessParams, params) {
        Ok(p) => p,
        Err(e) => {
            session.send(response_line(
                id,
                Err(RpcError::plain(code::INVALID_PARAMS, e.to_string())),
            ));
            return;
        }
    };
    let limits = session.served.limits;
    let Some(process) = session.served.registry.get(&p.process) else {
        let e = SandboxError::failed(
            op::OPEN_PROCESS,
            FailureReason::TimedOut,
            format!(
                "process {} is gone: it was not resumed within the {} ms resume window",
                p.process, limits.resume_window_ms
            ),
        );
        session.send(response_line(id, Err(sandbox(e))));
        return;
    };
    let mut st = session.lock();
    match process.resume(
        id,
        &p,
        session.out.clone(),
        limits.replay_window_bytes,
        session.sid,
    ) {
        Ok(()) => {
            st.processes.insert(p.process);
        }
        Err(e) => session.send(response_line(id, Err(sandbox(e)))),
    }
}

fn unknown_process(id: &str) -> SandboxError {
    SandboxError::invalid_request(op::OPEN_PROCESS, "process", "an open process handle", id)
}

async fn hook(hooks: &dyn ConformanceHooks, m: &str, p: Value) -> Result<Done, RpcError> {
    let listener = |p: &Value| {
        serde_json::from_value::<ListenerWire>(p.clone())
            .map_err(|e| RpcError::plain(code::INVALID_PARAMS, e.to_string()))
    };
    let done = match m {
        method::CONFORMANCE_DESCRIBE => to_value(&hooks.describe().await.map_err(hook_error)?),
        method::CONFORMANCE_START_LISTENER => {
            to_value(&hooks.start_listener().await.map_err(hook_error)?)
        }
        method::CONFORMANCE_CONTROL_PROBE => {
            let data = hooks
                .control_probe(listener(&p)?)
                .await
                .map_err(hook_error)?;
            to_value(&ProbeResult {
                data_base64: data.into(),
            })
        }
        method::CONFORMANCE_STOP_LISTENER => {
            hooks.stop_listener(listener(&p)?).await;
            Value::Null
        }
        method::CONFORMANCE_CLOSE => {
            hooks.close().await.map_err(hook_error)?;
            Value::Null
        }
        method::CONFORMANCE_PAUSE_WORKLOAD => {
            let q: PauseWorkloadParams = serde_json::from_value(p)
                .map_err(|e| RpcError::plain(code::INVALID_PARAMS, e.to_string()))?;
            match hooks.pause_workload(&q.instance_id, q.paused).await {
                None => return Err(absent(m)),
                Some(r) => {
                    r.map_err(hook_error)?;
                    Value::Null
                }
            }
        }
        method::CONFORMANCE_WORKLOAD_PAUSED => {
            let q: WorkloadPausedParams = serde_json::from_value(p)
                .map_err(|e| RpcError::plain(code::INVALID_PARAMS, e.to_string()))?;
            match hooks.workload_paused(&q.instance_id).await {
                None => return Err(absent(m)),
                Some(r) => to_value(&WorkloadPausedResult {
                    paused: r.map_err(hook_error)?,
                }),
            }
        }
        _ => to_value(&hooks.live_objects().await.map_err(hook_error)?),
    };
    Ok(Done::Value(done))
}

fn notification(session: &Arc<Session>, m: &str, p: Value) {
    match m {
        method::CANCEL => {
            let Ok(c) = serde_json::from_value::<CancelParams>(p) else {
                return;
            };
            let mut st = session.lock();
            if let Some(f) = st.inflight.get_mut(&c.id) {
                match f.abort.take() {
                    // A plain call: stop it; no reply follows.
                    Some(a) => {
                        a.abort();
                        st.inflight.remove(&c.id);
                    }
                    // An allocation: let it settle, then roll it back.
                    None => f.cancelled = true,
                }
            }
        }
        method::COMMIT => {
            if let Ok(h) = serde_json::from_value::<HandleParams>(p) {
                session.lock().handles.remove(&h.handle);
            }
        }
        method::PROCESS_STDIN => {
            let Ok(f) = decode_fields::<StdinFrame>(&p) else {
                return;
            };
            let process = session
                .served
                .registry
                .get(&f.process)
                .filter(|p| p.owned_by(session.sid));
            if let Some(pr) = process {
                if let Err(e) = pr.stdin(f.offset, f.data_base64.0) {
                    tracing::warn!(error = %e, "stdin frame refused; destroying the process");
                    session.send(notification_line(
                        method::PROCESS_FAILED,
                        to_value(&ProcessFailedFrame {
                            process: f.process.clone(),
                            error: e,
                        }),
                    ));
                    let pr = pr.clone();
                    tokio::spawn(async move { pr.shut().await });
                }
            }
        }
        method::PROCESS_STDIN_CLOSE => {
            if let Ok(f) = decode_fields::<StdinCloseFrame>(&p) {
                if let Some(pr) = session
                    .served
                    .registry
                    .get(&f.process)
                    .filter(|p| p.owned_by(session.sid))
                {
                    pr.close_stdin();
                }
            }
        }
        method::PROCESS_ACK => {
            if let Ok(f) = decode_fields::<AckFrame>(&p) {
                if let Some(pr) = session
                    .served
                    .registry
                    .get(&f.process)
                    .filter(|p| p.owned_by(session.sid))
                {
                    pr.ack(f.stream, f.offset);
                }
            }
        }
        other => tracing::debug!(method = other, "unknown notification ignored"),
    }
}

/// Serves on this process's stdin and stdout until stdin closes.
///
/// # Errors
/// As [`serve_connection`].
pub async fn serve_stdio(served: Served) -> Result<(), ServeError> {
    serve_connection(served, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves every connection accepted on a new Unix socket at `path`
/// (refused if the path exists), each as its own session over the same
/// provider, until accepting fails.
///
/// # Errors
/// [`ServeError::Io`] when the socket cannot be bound or accept fails.
pub async fn serve_unix(served: Served, path: &Path) -> Result<(), ServeError> {
    let listener =
        tokio::net::UnixListener::bind(path).map_err(|e| ServeError::Io(e.to_string()))?;
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| ServeError::Io(e.to_string()))?;
        let served = served.clone();
        tokio::spawn(async move {
            let (r, w) = stream.into_split();
            if let Err(e) = serve_connection(served, r, w).await {
                tracing::warn!(error = %e, "connection ended");
            }
        });
    }
}
