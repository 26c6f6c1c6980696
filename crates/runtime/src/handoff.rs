//! Allocation handoff: take ownership of a value or unwind it exactly once
//! (spec "Allocation handoff"; DESIGN D5).

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use checkfu_sandbox_contract::{
    FailureReason, Handoff, Member, Operation, Rollback, SandboxError, SandboxFailure,
};
use tokio_util::task::TaskTracker;

use crate::checks::Verdicts;

/// Something a provider call keeps alive until it and any rollback of its
/// value settle: the runtime's in-flight marker of a lifecycle call, so a
/// cancelled caller never lets a second call reach the provider while the
/// first one (or its rollback) still runs.
pub(crate) type Hold = Arc<dyn std::any::Any + Send + Sync>;

/// Runs `rollback` at most once in its own task, bounded by `bound`.
///
/// The task is spawned before anything is awaited, so a caller that drops
/// this future still gets the rollback run; past `bound` the task is
/// detached and the failure is `SandboxOperationFailed{operation:
/// "<member>_rollback", reason: timed_out}`.
pub(crate) async fn run_rollback(
    tasks: &TaskTracker,
    member: Member,
    rollback: Arc<dyn Rollback>,
    bound: Duration,
    verdicts: Verdicts,
) -> Result<(), SandboxError> {
    let operation = Operation::Rollback(member);
    let task = tasks.spawn(async move { rollback.rollback().await });
    match tokio::time::timeout(bound, task).await {
        Ok(Ok(result)) => result.map_err(|e| verdicts.admit(operation, e)),
        Ok(Err(join)) => Err(SandboxError::failed(
            operation,
            FailureReason::ProviderError,
            format!("rollback task ended abnormally: {join}"),
        )),
        Err(_) => {
            tracing::warn!(%operation, "rollback exceeded its bound; detached");
            Err(SandboxError::failed(
                operation,
                FailureReason::TimedOut,
                format!(
                    "rollback did not settle within {} s; left to sweep and hard expiry",
                    bound.as_secs()
                ),
            ))
        }
    }
}

/// Holds a handoff's rollback until the runtime either takes ownership
/// ([`Guard::accept`]) or rejects ([`Guard::reject`]). Dropped without
/// either — the caller was cancelled — it spawns the rollback.
pub(crate) struct Guard {
    member: Member,
    rollback: Option<Arc<dyn Rollback>>,
    bound: Duration,
    verdicts: Verdicts,
    tasks: TaskTracker,
    hold: Option<Hold>,
}

impl Guard {
    pub(crate) fn new<T>(
        member: Member,
        handoff: Handoff<T>,
        bound: Duration,
        verdicts: Verdicts,
        tasks: TaskTracker,
        hold: Option<Hold>,
    ) -> (T, Guard) {
        (
            handoff.value,
            Guard {
                member,
                rollback: Some(handoff.rollback),
                bound,
                verdicts,
                tasks,
                hold,
            },
        )
    }

    /// Ownership transferred: the rollback is dropped unrun.
    pub(crate) fn accept(mut self) {
        self.rollback = None;
    }

    /// The value is refused on purpose (the rollback probe): run the
    /// rollback, then run it again to prove a repeat after a lost response
    /// settles the same way. Both results, in order.
    pub(crate) async fn unwind_twice(mut self) -> [Result<(), SandboxError>; 2] {
        let Some(rollback) = self.rollback.take() else {
            return [Ok(()), Ok(())];
        };
        let first = run_rollback(
            &self.tasks,
            self.member,
            rollback.clone(),
            self.bound,
            self.verdicts,
        )
        .await;
        let second = run_rollback(
            &self.tasks,
            self.member,
            rollback,
            self.bound,
            self.verdicts,
        )
        .await;
        [first, second]
    }

    /// The value was refused: run the rollback once and combine causes in
    /// order (the rejection first).
    pub(crate) async fn reject(mut self, rejection: SandboxFailure) -> SandboxFailure {
        let Some(rollback) = self.rollback.take() else {
            return rejection;
        };
        match run_rollback(
            &self.tasks,
            self.member,
            rollback,
            self.bound,
            self.verdicts,
        )
        .await
        {
            Ok(()) => rejection,
            Err(e) => rejection.then(e),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(rollback) = self.rollback.take() {
            let operation = self.member;
            let bound = self.bound;
            let verdicts = self.verdicts;
            let hold = self.hold.take();
            tracing::debug!(
                %operation,
                "handoff abandoned before ownership; rolling back"
            );
            if tokio::runtime::Handle::try_current().is_ok() {
                let tasks = self.tasks.clone();
                self.tasks.spawn(async move {
                    if let Err(e) = run_rollback(&tasks, operation, rollback, bound, verdicts).await {
                        tracing::warn!(%operation, error = %e, "rollback after cancellation failed");
                    }
                    drop(hold);
                });
            }
        }
    }
}

/// Runs an allocating provider call so that a cancelled caller never
/// interrupts it half-way, and hands its value to the caller behind a
/// [`Guard`] (decision 009).
///
/// A Rust future cannot clean up when it is dropped, so a caller cancelled
/// mid-call must not cancel the provider's acquisition half-way. The call is
/// polled once in place: a call that completes without waiting (an
/// in-memory provider) never gave the caller a point at which it could be
/// dropped, and costs no task. A call that has to wait is moved, before
/// this function yields, into a task of its own that runs it to
/// completion; a handoff that nobody is waiting for any more is rolled
/// back at once (bounded as every rollback is). Between the value's arrival
/// and the guard's creation there is no await point.
///
/// `hold` (the in-flight marker of a serialized lifecycle call) lives as
/// long as the call, its guard and any rollback of its value: the task
/// owns it while the provider call runs and hands it back with the result
/// (it then lives in the guard); when the caller is gone, the task keeps it
/// until the rollback of the unclaimed value settled. It is never dropped
/// by the task after the caller already has the result, so the caller's
/// next call cannot find it still set.
///
/// # Errors
/// The provider's error, or `SandboxOperationFailed{reason:
/// provider_error}` when the provider call panicked.
pub(crate) async fn acquire<T: Send + 'static>(
    tasks: &TaskTracker,
    member: Member,
    call: impl Future<Output = Result<Handoff<T>, SandboxError>> + Send + 'static,
    bound: Duration,
    verdicts: Verdicts,
    hold: Option<Hold>,
) -> Result<(T, Guard), SandboxError> {
    let panicked = || {
        SandboxError::failed(
            Operation::Member(member),
            FailureReason::ProviderError,
            "the provider call ended without a result (it panicked)",
        )
    };
    let mut call = Box::pin(call);
    // The first poll, in place. Nothing here yields: whatever it returns,
    // the call is either finished or handed to a task below before the
    // caller can be dropped.
    let first = std::future::poll_fn(|cx| {
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(cx)));
        Poll::Ready(polled)
    })
    .await;
    match first {
        Ok(Poll::Ready(result)) => {
            return result
                .map(|handoff| Guard::new(member, handoff, bound, verdicts, tasks.clone(), hold))
        }
        Err(_) => return Err(panicked()),
        Ok(Poll::Pending) => {}
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tracker = tasks.clone();
    tasks.spawn(async move {
        let result = call.await;
        if let Err((Ok(handoff), hold)) = tx.send((result, hold)) {
            tracing::debug!(%member, "caller gone before the handoff; rolling back");
            if let Err(e) = run_rollback(&tracker, member, handoff.rollback, bound, verdicts).await
            {
                tracing::warn!(%member, error = %e, "rollback of an unclaimed handoff failed");
            }
            drop(hold);
        }
    });
    match rx.await {
        Ok((result, hold)) => {
            result.map(|handoff| Guard::new(member, handoff, bound, verdicts, tasks.clone(), hold))
        }
        Err(_) => Err(panicked()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_sandbox_contract::Rollback;

    struct Nothing;

    #[async_trait::async_trait]
    impl Rollback for Nothing {
        async fn rollback(&self) -> Result<(), SandboxError> {
            Ok(())
        }
    }

    fn handoff(value: u32) -> Result<Handoff<u32>, SandboxError> {
        Ok(Handoff {
            value,
            rollback: Arc::new(Nothing),
        })
    }

    const BOUND: Duration = Duration::from_secs(30);

    /// The id of the task the future was polled in.
    async fn polled_in() -> Option<tokio::task::Id> {
        tokio::task::try_id()
    }

    #[tokio::test]
    async fn a_call_that_completes_without_waiting_runs_in_place() {
        let tasks = TaskTracker::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let caller = tokio::spawn({
            let tasks = tasks.clone();
            async move {
                let here = tokio::task::try_id();
                let (v, guard) = acquire(
                    &tasks,
                    Member::Provision,
                    async move {
                        let _ = tx.send(polled_in().await);
                        handoff(7)
                    },
                    BOUND,
                    Verdicts::ProviderOnly,
                    None,
                )
                .await
                .expect("acquired");
                guard.accept();
                (v, here)
            }
        });
        let (v, here) = caller.await.expect("caller");
        assert_eq!(v, 7);
        assert_eq!(rx.await.expect("ran"), here, "ran in a task of its own");
    }

    #[tokio::test]
    async fn a_call_that_waits_moves_to_a_task_of_its_own() {
        let tasks = TaskTracker::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let caller = tokio::spawn({
            let tasks = tasks.clone();
            async move {
                let here = tokio::task::try_id();
                let (v, guard) = acquire(
                    &tasks,
                    Member::Provision,
                    async move {
                        tokio::task::yield_now().await;
                        let _ = tx.send(polled_in().await);
                        handoff(8)
                    },
                    BOUND,
                    Verdicts::ProviderOnly,
                    None,
                )
                .await
                .expect("acquired");
                guard.accept();
                (v, here)
            }
        });
        let (v, here) = caller.await.expect("caller");
        assert_eq!(v, 8);
        assert_ne!(
            rx.await.expect("ran"),
            here,
            "finished in the caller's task"
        );
    }

    #[tokio::test]
    async fn a_call_that_panics_in_place_or_later_is_a_provider_error() {
        let tasks = TaskTracker::new();
        let at_once = acquire::<u32>(
            &tasks,
            Member::Provision,
            async { panic!("provider bug") },
            BOUND,
            Verdicts::ProviderOnly,
            None,
        )
        .await;
        let later = acquire::<u32>(
            &tasks,
            Member::Provision,
            async {
                tokio::task::yield_now().await;
                panic!("provider bug")
            },
            BOUND,
            Verdicts::ProviderOnly,
            None,
        )
        .await;
        for r in [at_once, later] {
            match r {
                Err(SandboxError::SandboxOperationFailed { reason, .. }) => {
                    assert_eq!(reason, FailureReason::ProviderError)
                }
                Err(other) => panic!("another error: {other:?}"),
                Ok(_) => panic!("a value from a panicking call"),
            }
        }
    }
}
