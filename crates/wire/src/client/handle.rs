//! [`WireClient`] itself: spawning, connecting, the initialize handshake,
//! typed calls and the allocation handoff.

use super::*;

/// A provider served in another process or behind a socket.
///
/// Cloning shares the connection. Every call has a deadline
/// ([`WireOptions`]); a provider that never answers, exits, writes a
/// malformed line, a line over the bound, or answers an unknown id yields a
/// closed error naming what was wrong, and the connection is then closed
/// for every call (the child process is killed).
#[derive(Clone)]
pub struct WireClient {
    pub(super) conn: Arc<Conn>,
    pub(super) init: Arc<InitializeResult>,
    /// The envelope the provider last answered: at `initialize`, then
    /// `sandbox/capabilities` after every member call (shared by clones).
    pub(super) capabilities: Arc<Mutex<SandboxProviderCapabilities>>,
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

    pub(super) async fn start<R, W>(
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

    pub(super) fn accept(conn: &Arc<Conn>, result: Value) -> Result<Self, SandboxError> {
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
            capabilities: Arc::new(Mutex::new(capabilities)),
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

    pub(super) async fn call<P: Serialize, T: DeserializeOwned>(
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
            .await;
        self.refresh_capabilities(method, v.as_ref().err()).await;
        decode_value(wire_type, &v?)
    }

    /// The envelope the runtime reads through `capabilities()`.
    pub(super) fn envelope(&self) -> SandboxProviderCapabilities {
        self.capabilities
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks the provider for its envelope again (`sandbox/capabilities`,
    /// which may be asked at any time), after a lifecycle member call
    /// ([`refreshes_envelope`]), so that
    /// `capabilities()` answers what the provider says now, as an
    /// in-process provider does, and a drifting envelope is caught by the
    /// runtime's re-check. An answer that is not an envelope ends the
    /// connection as a protocol violation (field `capabilities`); nothing
    /// is asked on a broken or reconnecting connection, nor after a call
    /// that timed out (`failed`: the member call's error, if any). The
    /// answer is awaited for at most the `initialize` deadline.
    pub(super) async fn refresh_capabilities(&self, method: &str, failed: Option<&SandboxError>) {
        if !refreshes_envelope(method) {
            return;
        }
        if matches!(
            failed,
            Some(SandboxError::SandboxOperationFailed {
                reason: FailureReason::TimedOut,
                ..
            })
        ) {
            return;
        }
        let idle = |conn: &Conn| {
            let st = conn.lock();
            st.broken.is_some() || st.reconnecting
        };
        if idle(&self.conn) {
            return;
        }
        let asked = self
            .conn
            .call(
                op::CAPABILITIES,
                method::CAPABILITIES,
                &(),
                false,
                self.conn
                    .options
                    .initialize_timeout
                    .min(self.conn.options.call_timeout),
            )
            .await
            .and_then(|v| decode_value::<SandboxProviderCapabilities>(WireType::Capabilities, &v));
        match asked {
            Ok(envelope) => {
                *self.capabilities.lock().unwrap_or_else(|e| e.into_inner()) = envelope;
            }
            Err(e) if !idle(&self.conn) => self.conn.fail(Broken::Violation(
                "capabilities".into(),
                "a SandboxProviderCapabilities answer to sandbox/capabilities".into(),
                excerpt(&e.to_string()),
            )),
            Err(_) => {}
        }
    }

    pub(super) async fn call_unit<P: Serialize>(
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
            .await;
        self.refresh_capabilities(method, v.as_ref().err()).await;
        let v = v?;
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

    pub(super) async fn handoff<P: Serialize, T: DeserializeOwned>(
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
            .await;
        let v = match v {
            Ok(v) => v,
            Err(e) => {
                self.refresh_capabilities(method, Some(&e)).await;
                return Err(e);
            }
        };
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
            Ok(value) => {
                // Until the handoff reaches the caller, a caller that stops
                // observing it gets the allocation rolled back.
                let mut unclaimed = Unclaimed {
                    conn: &self.conn,
                    handle: Some(handle),
                };
                self.refresh_capabilities(method, None).await;
                let handle = unclaimed.handle.take().unwrap_or_default();
                let rollback = Arc::new(WireRollback {
                    conn: self.conn.clone(),
                    handle,
                    member,
                });
                Ok(Handoff { value, rollback })
            }
            Err(e) => {
                let rollback = WireRollback {
                    conn: self.conn.clone(),
                    handle,
                    member,
                };
                // Nobody else can unwind an allocation whose value did not
                // decode: roll it back here, once, under the usual bound.
                if let Err(r) = rollback.rollback().await {
                    tracing::warn!(error = %r, "rollback of an undecodable handoff failed");
                }
                drop(rollback);
                self.refresh_capabilities(method, None).await;
                Err(e)
            }
        }
    }

    /// Calls a `conformance/*` hook.
    ///
    /// # Errors
    /// What went wrong, not naming the hook (the caller does): a failed
    /// hook's `HookFailure` message whole (error code -32010, as
    /// `PROTOCOL.md` documents); any other error as a closed
    /// `SandboxError`; a result that does not decode.
    pub async fn hook<P: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<T, String> {
        let operation = Operation::ConformanceHook;
        let v = self
            .conn
            .call_raw(
                operation,
                method,
                params,
                false,
                self.conn.options.call_timeout,
                None,
                false,
            )
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| hook_error(operation, e))?;
        serde_json::from_value(v).map_err(|e| format!("result does not decode: {e}"))
    }
}

/// A handoff's rollback handle between the reply and the caller: dropped
/// while still held (the caller stopped observing), the allocation is
/// rolled back and released.
struct Unclaimed<'a> {
    conn: &'a Arc<Conn>,
    handle: Option<String>,
}

impl Drop for Unclaimed<'_> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.conn
                .spawn_rollback(handle, Operation::CancelledCallRollback);
        }
    }
}

/// A hook's error as text: a documented `HookFailure` (-32010) is the
/// provider's message; anything else is the closed error it maps to.
fn hook_error(operation: Operation, e: RpcError) -> String {
    if e.code == code::HOOK_FAILED {
        if let Some(failure) = e
            .data
            .as_ref()
            .and_then(|d| serde_json::from_value::<HookFailure>(d.clone()).ok())
        {
            return failure.message;
        }
    }
    super::conn::map_rpc_error(operation, e).to_string()
}

/// Whether a call of `method` is followed by asking the envelope again:
/// the lifecycle members (provision, activate, snapshot, cloneSnapshot,
/// release, resume, destroy, destroySnapshot, cleanup, openProcess), after
/// which the runtime re-checks the envelope before the next activate,
/// resume, execute or openProcess. The data-plane members (execute, the
/// reads and listings, writeFile, beginActiveWrite, resolveImage) are not
/// followed by one, so the hot path pays no extra round trip: an envelope
/// that drifts between two of them is seen after the next lifecycle call
/// (in process it is seen at the next re-check).
pub(crate) fn refreshes_envelope(method: &str) -> bool {
    !matches!(
        method,
        method::EXECUTE
            | method::READ_FILE
            | method::READ_FILES
            | method::LIST_DIR
            | method::LIST_PROJECT_DIR
            | method::WRITE_FILE
            | method::BEGIN_ACTIVE_WRITE
            | method::RESOLVE_IMAGE
    )
}
