//! Calls on a live instance with a life of their own: openProcess and
//! beginActiveWrite.

use super::*;

impl Adapter {
    /// openProcess: a live process whose evidence has been checked.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{open_process, actual:
    /// open_process_unsupported}` when the member is absent; request bounds
    /// as for execute; network re-check; the provider's error;
    /// `open_process_identity` mismatches, after the process was destroyed
    /// under a 30 s bound (a destroy failure is appended as
    /// `open_process_destroy`).
    ///
    /// # Cancel safety
    /// Cancel-safe: the provider's openProcess runs in a task of the adapter's
    /// tracker, and a process whose caller is gone when it starts is destroyed
    /// there at once, under the rollback bound. Dropped while a refused
    /// process is being destroyed, that destroy still runs in its own task.
    pub async fn open_process(&self, request: SandboxProcessRequest) -> Res<Process> {
        let rec = self.admit(
            op::OPEN_PROCESS,
            &request.instance_id,
            &[RecordState::Active],
        )?;
        if self.provider().open_process().is_none() {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "open_process member",
                ConflictActual::OpenProcessUnsupported,
            )
            .into());
        }
        self.recheck_network(&rec.request.profile, rec.minimum_egress)?;
        checks::process_request(&request)?;
        let process = self.open_process_tracked(request.clone()).await?;
        let problems =
            check_process_evidence(&rec.instance, &request, self.envelope(), &process.evidence);
        if let Some(rejection) = mismatches(op::OPEN_PROCESS_IDENTITY, problems) {
            let control = process.control.clone();
            drop(process);
            let bound = self.shared.rollback_bound;
            let destroyed = tokio::time::timeout(
                bound,
                self.shared
                    .tasks
                    .spawn(async move { control.destroy().await }),
            )
            .await;
            let failure = match destroyed {
                Ok(Ok(Ok(()))) => rejection,
                Ok(Ok(Err(e))) => rejection.then(
                    self.shared
                        .verdicts
                        .admit(Operation::Process(ProcessStep::Destroy), e),
                ),
                Ok(Err(join)) => rejection.then(SandboxError::failed(
                    Operation::Process(ProcessStep::Destroy),
                    FailureReason::ProviderError,
                    join.to_string(),
                )),
                Err(_) => rejection.then(SandboxError::failed(
                    Operation::Process(ProcessStep::Destroy),
                    FailureReason::TimedOut,
                    format!("destroy did not settle within {} s", bound.as_secs()),
                )),
            };
            return Err(failure);
        }
        Ok(Process::new(process, self.shared.verdicts))
    }

    /// The provider's openProcess call, run as every allocating call is
    /// (decision 009): in a task of the adapter's tracker, so a caller
    /// cancelled mid-call does not cancel the start half-way; a process
    /// nobody is waiting for any more is destroyed at once, under the
    /// rollback bound, in the same tracked task.
    async fn open_process_tracked(&self, request: SandboxProcessRequest) -> Res<SandboxProcess> {
        let provider = self.provider_arc();
        let bound = self.shared.rollback_bound;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.shared.tasks.spawn(async move {
            let result = match provider.open_process() {
                Some(member) => member.open_process(request).await,
                None => Err(SandboxError::conflict(
                    op::OPEN_PROCESS,
                    "open_process member",
                    ConflictActual::OpenProcessUnsupported,
                )),
            };
            if let Err(Ok(process)) = tx.send(result) {
                tracing::debug!("caller gone before the process was handed over; destroying it");
                let control = process.control.clone();
                drop(process);
                if tokio::time::timeout(bound, control.destroy())
                    .await
                    .is_err()
                {
                    tracing::warn!("destroy of an unclaimed process did not settle in time");
                }
            }
        });
        match rx.await {
            Ok(result) => result.map_err(|e| self.admit_error(op::OPEN_PROCESS, e)),
            Err(_) => Err(SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                "the provider call ended without a result (it panicked)",
            )
            .into()),
        }
    }

    /// beginActiveWrite: stage and atomically publish a batch inside the
    /// deepest read-write mount owning every target, with a caller that
    /// never aborts (see [`Adapter::begin_active_write_with`]).
    ///
    /// # Errors
    /// As [`Adapter::begin_active_write_with`].
    ///
    /// # Cancel safety
    /// As [`Adapter::begin_active_write_with`].
    pub async fn begin_active_write(&self, request: ActiveWriteRequest) -> Res<ActiveWriteOutcome> {
        self.begin_active_write_with(request, Arc::new(ProceedMarker))
            .await
    }

    /// beginActiveWrite with the caller's dispatch marker: `marker` is asked
    /// immediately before the provider dispatches the transaction, and an
    /// `Err` from it aborts the still-open transaction (the outcome is then
    /// `rolled_back`). Checks (module `active_write`): bounds, paths,
    /// redelivery consistency and the outcome's shape. A provider error
    /// after the marker answers `indeterminate`.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{begin_active_write, actual:
    /// active_mount_write_unsupported}` without the capability or member;
    /// `invalid_request` / `path_not_admitted` / `read_only` for a path
    /// outside one read-write mount, an ancestor conflict, bounds, or a
    /// redelivered `transaction_id` with another batch; the provider's
    /// error before the marker; `SandboxProtocolInvalid{begin_active_write}`
    /// for an outcome naming another transaction, mount or path list, a
    /// dispatch without the marker, a commit after an abort, or a
    /// redelivery settling differently.
    ///
    /// # Cancel safety
    /// Cancel-safe: after admission the provider call and its checks run in
    /// a task of the adapter's tracker that holds the instance's in-flight
    /// marker, so a dropped caller leaves the transaction to settle and its
    /// outcome to be recorded; a redelivery of the same `transaction_id` and
    /// batch gets that outcome.
    pub async fn begin_active_write_with(
        &self,
        request: ActiveWriteRequest,
        marker: Arc<dyn DispatchMarker>,
    ) -> Res<ActiveWriteOutcome> {
        const OP: Operation = op::BEGIN_ACTIVE_WRITE;
        let (rec, mark) = self.claim(
            OP,
            Member::BeginActiveWrite,
            &request.instance_id,
            &[RecordState::Active],
        )?;
        let present =
            self.envelope().active_mount_write && self.provider().begin_active_write().is_some();
        crate::active_write::run(self, present, &rec.instance.mounts, request, marker, mark).await
    }

    pub(crate) fn active_writes(&self) -> Arc<crate::active_write::Ledger> {
        self.shared.active_writes.clone()
    }
}
