//! What [`Hooked`](super::Hooked) wraps around the inner provider's
//! handoffs: rollbacks, process controls and beginActiveWrite's dispatch
//! marker.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use checkfu_sandbox_contract::*;

use super::{lock, Behaviour, MarkerDeviation, Shared, PROCESS_DESTROY, PROCESS_WAIT, ROLLBACK};

/// A rollback that records `<operation>_rollback`, passes its gate, then
/// behaves as told; `<operation>_rollback_done` once the inner rollback
/// answered `Ok`.
pub(crate) struct HookedRollback {
    pub(crate) shared: Arc<Shared>,
    pub(crate) name: String,
    pub(crate) inner: Arc<dyn Rollback>,
}

#[async_trait]
impl Rollback for HookedRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        self.shared.count_rollback(false);
        self.shared.record(self.name.clone());
        self.shared.pass_gate(&self.name).await;
        act(self.shared.behaviour(ROLLBACK)).await?;
        self.inner.rollback().await?;
        self.shared.count_rollback(true);
        self.shared.record(format!("{}_done", self.name));
        Ok(())
    }
}

/// Settles a [`Behaviour`]: `Delegate` returns `Ok` so the caller
/// delegates.
async fn act(behaviour: Behaviour) -> Result<(), SandboxError> {
    match behaviour {
        Behaviour::Delegate => Ok(()),
        Behaviour::Fail(e) => Err(e),
        Behaviour::Hang => std::future::pending().await,
    }
}

/// A process control that counts waits and destroys, records signals and
/// destroys, and behaves as told.
pub(crate) struct HookedControl {
    pub(crate) shared: Arc<Shared>,
    pub(crate) inner: Arc<dyn ProcessControl>,
}

#[async_trait]
impl ProcessControl for HookedControl {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        self.shared.count_process(false);
        act(self.shared.behaviour(PROCESS_WAIT)).await?;
        self.inner.wait().await
    }

    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        let name = serde_json::to_value(signal)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.shared.record(format!("process_signal {name}"));
        self.inner.signal(signal).await
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        self.shared.count_process(true);
        self.shared.record("process_destroy");
        act(self.shared.behaviour(PROCESS_DESTROY)).await?;
        self.inner.destroy().await
    }
}

/// The marker the inner provider receives: the caller's, unless the
/// double skips it, ignores its abort, or aborts after it.
pub(crate) struct HookedMarker {
    caller: Arc<dyn DispatchMarker>,
    deviation: MarkerDeviation,
    /// Set when the caller's marker let the transaction proceed and the
    /// double then aborted it to answer `error_after`.
    failed_after: Mutex<Option<SandboxError>>,
}

impl HookedMarker {
    pub(crate) fn new(caller: Arc<dyn DispatchMarker>, deviation: MarkerDeviation) -> Self {
        HookedMarker {
            caller,
            deviation,
            failed_after: Mutex::new(None),
        }
    }

    /// The error to answer instead of the inner provider's outcome.
    pub(crate) fn failure_after(&self) -> Option<SandboxError> {
        lock(&self.failed_after).clone()
    }
}

#[async_trait]
impl DispatchMarker for HookedMarker {
    async fn dispatch(&self, transaction_id: &str) -> Result<(), SandboxError> {
        if self.deviation.skip {
            return Ok(());
        }
        let answer = self.caller.dispatch(transaction_id).await;
        if answer.is_err() && self.deviation.ignore_abort {
            return Ok(());
        }
        answer.as_ref().map_err(Clone::clone)?;
        if let Some(error) = &self.deviation.error_after {
            *lock(&self.failed_after) = Some(error.clone());
            return Err(error.clone());
        }
        Ok(())
    }
}
