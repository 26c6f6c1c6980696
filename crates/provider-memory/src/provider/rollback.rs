//! Rollbacks: what each handoff undoes, bounded to the one allocation it
//! was built for.

use super::*;

/// What a rollback undoes, captured at allocation time.
#[derive(Debug, Clone)]
pub(super) enum Target {
    /// Remove the instance (provision, resume).
    DestroyInstance(String),
    /// Return the instance to `provisioning`, unsealed, its processes ended
    /// (activate).
    Deactivate(String),
    /// Remove the snapshot (snapshot, cloneSnapshot, durable release).
    DestroySnapshot(String),
    /// Nothing was allocated (ZDR release).
    Nothing,
    /// Fault: every instance whose session is the value's.
    InstancesOfSession(String),
    /// Fault: every snapshot whose session is the value's.
    SnapshotsOfSession(String),
}

/// A handoff value from which the faulty rollback derives its target.
pub(super) trait RollbackScope {
    fn derived_target(&self) -> Target;
}

impl RollbackScope for SandboxInstance {
    fn derived_target(&self) -> Target {
        Target::InstancesOfSession(self.session_id.clone())
    }
}

impl RollbackScope for SandboxSnapshot {
    fn derived_target(&self) -> Target {
        Target::SnapshotsOfSession(self.session_id.clone())
    }
}

impl RollbackScope for ReleaseDisposition {
    fn derived_target(&self) -> Target {
        match self {
            ReleaseDisposition::Released { snapshot } => snapshot.derived_target(),
            ReleaseDisposition::Destroyed => Target::Nothing,
        }
    }
}

pub(super) struct MemoryRollback {
    pub(super) inner: Arc<Inner>,
    pub(super) op: Member,
    pub(super) target: Target,
    pub(super) calls: AtomicUsize,
}

#[async_trait]
impl Rollback for MemoryRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        if self.inner.has(Fault::RollbackHangs) {
            std::future::pending::<()>().await;
        }
        let previous = self.calls.fetch_add(1, Ordering::SeqCst);
        if previous > 0 && self.inner.has(Fault::RollbackNotIdempotent) {
            return Err(SandboxError::failed(
                Operation::Rollback(self.op),
                FailureReason::ProviderError,
                "already rolled back",
            ));
        }
        let mut st = self.inner.lock();
        match &self.target {
            Target::DestroyInstance(id) => st.destroy_instance(id),
            Target::Deactivate(id) => {
                if let Some(r) = st.instances.get_mut(id) {
                    r.kill_processes();
                    r.state = InstanceState::Provisioning;
                }
            }
            Target::DestroySnapshot(id) => {
                st.snapshots.remove(id);
            }
            Target::Nothing => {}
            Target::InstancesOfSession(session) => {
                let ids: Vec<String> = st
                    .instances
                    .iter()
                    .filter(|(_, r)| r.request.session_id == *session)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in ids {
                    st.destroy_instance(&id);
                }
            }
            Target::SnapshotsOfSession(session) => {
                st.snapshots
                    .retain(|_, r| r.snapshot.session_id != *session);
            }
        }
        Ok(())
    }
}

// ---- the members ------------------------------------------------------------
