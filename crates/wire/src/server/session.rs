//! One served session: reading lines, settling replies, the initialize
//! handshake, and ending (cancelling what is in flight).

use super::*;

pub(super) async fn end(session: &Arc<Session>) {
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

pub(super) fn handle_line(session: &Arc<Session>, line: &[u8]) -> Result<(), ServeError> {
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

pub(super) fn to_value<T: Serialize>(v: &T) -> Value {
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
pub(super) fn params<T: DeserializeOwned>(method: &str, v: &Value) -> Result<T, RpcError> {
    decode_fields::<T>(v).map_err(|m| RpcError {
        code: code::INVALID_PARAMS,
        message: format!("protocol invalid: decode_{method}: {m}"),
        data: None,
    })
}
