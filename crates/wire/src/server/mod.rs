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

mod dispatch;
mod session;

use self::dispatch::{dispatch, notification, resume};
use self::session::{end, handle_line, params, to_value};

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
