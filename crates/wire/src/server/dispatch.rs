//! Routing a request or notification to the served provider, its optional
//! members and the conformance hooks.

use super::*;

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

pub(super) async fn dispatch(
    session: &Arc<Session>,
    id: u64,
    m: &str,
    p: Value,
) -> Result<Done, RpcError> {
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
pub(super) fn resume(session: &Arc<Session>, id: u64, params: &Value) {
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

pub(super) fn notification(session: &Arc<Session>, m: &str, p: Value) {
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
