//! One registered provider behind the runtime's checks: every member the
//! spec lists, admitted before the call and cross-checked after it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checkfu_sandbox_contract::bounds::*;
use checkfu_sandbox_contract::identity::{
    check_clone, check_instance, check_process_evidence, check_snapshot, Mismatch,
};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::results;
use checkfu_sandbox_contract::*;

use crate::admission::{home_of, PathHome};
use crate::ceiling::drift;
use crate::checks;
use crate::handoff::{acquire, Guard, Hold};
use crate::process::Process;
use crate::select::{check_mount_plan, check_network, unmet, Requirements};
use tokio_util::task::TaskTracker;

mod allocating;
mod io;
mod live;
mod teardown;

/// The runtime's own record of an instance's state (DESIGN D6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordState {
    /// Provisioned, not yet active.
    Provisioning,
    /// Active.
    Active,
    /// Released (durable or ZDR); no further operation but destroy.
    Released,
    /// Destroyed.
    Destroyed,
}

impl RecordState {
    /// The state as a lifecycle conflict reports it.
    fn seen(&self) -> ConflictActual {
        match self {
            RecordState::Provisioning => ConflictActual::Provisioning,
            RecordState::Active => ConflictActual::Active,
            RecordState::Released => ConflictActual::Released,
            RecordState::Destroyed => ConflictActual::Destroyed,
        }
    }
}

#[derive(Debug, Clone)]
struct Record {
    // Shared, so admitting a call clones two pointers, not the records.
    request: Arc<SandboxProvisionRequest>,
    instance: Arc<SandboxInstance>,
    state: RecordState,
    /// The least egress grade the Run needed when it selected this
    /// adapter; the network re-check holds the instance to it.
    minimum_egress: EgressCertification,
    /// The serialized lifecycle call in flight on this instance, if any.
    in_flight: Option<Member>,
}

/// How many ended (released or destroyed) instance ids the runtime keeps
/// to answer a late call with the lifecycle conflict it deserves; older
/// ones are forgotten and answer `SandboxInstanceNotFound`. Bounds the
/// records of a long-lived Runner.
pub const ENDED_RECORDS_KEPT: usize = 1024;

/// How many accepted snapshots' deadlines the runtime keeps for the
/// cleanup pin check; past it, an unexpired entry is not recorded and a
/// sweep of that snapshot cannot be judged.
pub const SNAPSHOT_DEADLINES_KEPT: usize = 65_536;

/// The runtime's records of one adapter's instances.
#[derive(Default)]
struct Book {
    /// Instances provisioning or active.
    live: HashMap<String, Record>,
    /// Ended instances, by id, the newest [`ENDED_RECORDS_KEPT`].
    ended: HashMap<String, RecordState>,
    /// `ended` ids, oldest first.
    ended_order: VecDeque<String>,
    /// Snapshots a resume is in flight from.
    resuming: HashSet<String>,
    /// `expires_at` of snapshots the runtime accepted (snapshot, release,
    /// cloneSnapshot), for the cleanup pin check.
    snapshot_deadlines: HashMap<String, Timestamp>,
}

impl Book {
    /// Moves `instance_id` to `state`; an ended state drops the record and
    /// keeps only a bounded tombstone.
    fn set_state(&mut self, instance_id: &str, state: RecordState) {
        if state < RecordState::Released {
            if let Some(r) = self.live.get_mut(instance_id) {
                r.state = state;
            }
            return;
        }
        let known = self.live.remove(instance_id).is_some();
        if let Some(s) = self.ended.get_mut(instance_id) {
            *s = state;
            return;
        }
        if !known {
            return;
        }
        self.ended.insert(instance_id.to_owned(), state);
        self.ended_order.push_back(instance_id.to_owned());
        while self.ended_order.len() > ENDED_RECORDS_KEPT {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }

    fn state_of(&self, instance_id: &str) -> Option<RecordState> {
        self.live
            .get(instance_id)
            .map(|r| r.state)
            .or_else(|| self.ended.get(instance_id).copied())
    }

    fn note_snapshot(&mut self, snapshot: &SandboxSnapshot, now: Timestamp) {
        let deadlines = &mut self.snapshot_deadlines;
        if deadlines.len() >= SNAPSHOT_DEADLINES_KEPT {
            deadlines.retain(|_, t| *t > now);
        }
        if deadlines.len() < SNAPSHOT_DEADLINES_KEPT {
            deadlines.insert(snapshot.snapshot_id.clone(), snapshot.expires_at);
        }
    }
}

/// What a serialized lifecycle call holds in flight.
enum Claim {
    /// An instance (activate, snapshot, release, destroy, beginActiveWrite).
    Instance(String),
    /// A snapshot being resumed.
    Resume(String),
}

/// The in-flight marker of one serialized lifecycle call. It is cleared
/// when the last holder drops: the caller, and the provider call's task
/// and rollback when the caller was cancelled first.
struct InFlight {
    shared: Arc<Shared>,
    claim: Claim,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut book = self
                .shared
                .records
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match &self.claim {
                Claim::Instance(id) => {
                    if let Some(r) = book.live.get_mut(id) {
                        r.in_flight = None;
                    }
                }
                Claim::Resume(id) => {
                    book.resuming.remove(id);
                }
            }
        }
        self.shared.idle.notify_waiters();
    }
}

struct Shared {
    provider: Arc<dyn SandboxProvider>,
    envelope: SandboxProviderCapabilities,
    /// The envelope the provider advertised at registration (before any
    /// enrollment ceiling cut it): what `capabilities()` must keep saying.
    advertised: SandboxProviderCapabilities,
    clock: Arc<dyn Clock>,
    rollback_bound: Duration,
    /// Whose protocol verdicts the provider's errors may carry.
    verdicts: checks::Verdicts,
    records: Mutex<Book>,
    /// Notified whenever an in-flight marker clears (destroy waits on it).
    idle: tokio::sync::Notify,
    /// Provider calls and rollbacks that outlive their caller.
    tasks: TaskTracker,
    /// beginActiveWrite transactions per instance.
    active_writes: Arc<crate::active_write::Ledger>,
}

/// A selected adapter. Clones share one record of instances.
#[derive(Clone)]
pub struct Adapter {
    shared: Arc<Shared>,
    /// The least egress grade the selection that produced this handle
    /// required (`advisory_filter` unless [`Adapter::requiring_egress`]).
    minimum_egress: EgressCertification,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("provider", &self.provider_id())
            .finish_non_exhaustive()
    }
}

type Res<T> = Result<T, SandboxFailure>;

fn mismatches(operation: Operation, list: Vec<Mismatch>) -> Option<SandboxFailure> {
    let mut it = list.into_iter();
    let first = it.next()?;
    let mut failure = SandboxFailure::from(first.into_error(operation));
    for m in it {
        failure = failure.then(m.into_error(operation));
    }
    Some(failure)
}

impl Adapter {
    pub(crate) fn new(
        provider: Arc<dyn SandboxProvider>,
        envelope: SandboxProviderCapabilities,
        advertised: SandboxProviderCapabilities,
        clock: Arc<dyn Clock>,
        rollback_bound: Duration,
    ) -> Self {
        let verdicts = checks::Verdicts::of(provider.as_ref());
        Adapter {
            shared: Arc::new(Shared {
                provider,
                envelope,
                advertised,
                clock,
                rollback_bound,
                verdicts,
                records: Mutex::new(Book::default()),
                idle: tokio::sync::Notify::new(),
                tasks: TaskTracker::new(),
                active_writes: Default::default(),
            }),
            minimum_egress: EgressCertification::AdvisoryFilter,
        }
    }

    /// A provider error passes through if it is in the vocabulary the
    /// provider may return ([`checks::Verdicts`]); a runtime-only tag from
    /// a provider is itself a protocol failure naming `_tag`.
    fn admit_error(&self, operation: Operation, e: SandboxError) -> SandboxFailure {
        self.shared.verdicts.admit(operation, e).into()
    }

    /// This adapter, holding instances it provisions or resumes to at
    /// least `grade` of egress certification (an allowlist's minimum, from
    /// [`Requirements::minimum_egress`]); selection sets it. Provision and
    /// resume admission and every network re-check of such an instance
    /// use it. Grades below `advisory_filter` are raised to it.
    pub fn requiring_egress(mut self, grade: EgressCertification) -> Self {
        self.minimum_egress = grade.max(EgressCertification::AdvisoryFilter);
        self
    }

    /// The least egress grade this handle requires of an allowlist.
    pub fn minimum_egress(&self) -> EgressCertification {
        self.minimum_egress
    }

    /// The adapter's provider id.
    pub fn provider_id(&self) -> &str {
        self.shared.provider.provider_id()
    }

    /// The validated envelope, captured at registration.
    pub fn envelope(&self) -> &SandboxProviderCapabilities {
        &self.shared.envelope
    }

    /// The instance ids the runtime currently holds for this adapter, with
    /// their states.
    /// Ended instances (released, destroyed) are kept as the newest
    /// [`ENDED_RECORDS_KEPT`] ids only.
    pub fn instances(&self) -> Vec<(String, RecordState)> {
        let book = self.records();
        let mut out: Vec<_> = book
            .live
            .iter()
            .map(|(k, r)| (k.clone(), r.state))
            .chain(book.ended.iter().map(|(k, s)| (k.clone(), *s)))
            .collect();
        out.sort();
        out
    }

    /// The accepted instance record for `instance_id`, as last validated,
    /// while it is provisioning or active.
    pub fn instance(&self, instance_id: &str) -> Option<SandboxInstance> {
        self.records()
            .live
            .get(instance_id)
            .map(|r| (*r.instance).clone())
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Book> {
        // A poisoned lock only means a panic elsewhere; the map is still sound.
        self.shared
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn provider(&self) -> &dyn SandboxProvider {
        self.shared.provider.as_ref()
    }

    pub(crate) fn provider_arc(&self) -> Arc<dyn SandboxProvider> {
        self.shared.provider.clone()
    }

    pub(crate) fn rollback_bound(&self) -> Duration {
        self.shared.rollback_bound
    }

    pub(crate) fn verdicts(&self) -> checks::Verdicts {
        self.shared.verdicts
    }

    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.shared.tasks
    }

    /// Waits, at most `bound`, for provider calls and rollbacks that
    /// outlive their callers (a cancelled caller's acquisition and its
    /// rollback) to settle; true when they all did. A process about to exit
    /// after an interruption calls this so that nothing is stranded.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping it stops only the waiting. The tracker is then
    /// left closed, which only lets a later wait end as soon as it is empty;
    /// tracked tasks still run and new ones are still spawned.
    pub async fn settle(&self, bound: Duration) -> bool {
        let tasks = &self.shared.tasks;
        tasks.close();
        let settled = tokio::time::timeout(bound, tasks.wait()).await.is_ok();
        tasks.reopen();
        settled
    }

    pub(crate) fn admit_provision(&self, request: &SandboxProvisionRequest) -> Res<()> {
        self.admit_request(op::PROVISION, request)
    }

    /// The record for `instance_id` if its state is one of `accepted`.
    fn admit(
        &self,
        operation: Operation,
        instance_id: &str,
        accepted: &[RecordState],
    ) -> Res<Record> {
        let mut book = self.records();
        Self::admit_in(&mut book, operation, instance_id, accepted).map(|r| r.clone())
    }

    fn admit_in<'b>(
        book: &'b mut Book,
        operation: Operation,
        instance_id: &str,
        accepted: &[RecordState],
    ) -> Res<&'b mut Record> {
        let state =
            book.state_of(instance_id)
                .ok_or_else(|| SandboxError::SandboxInstanceNotFound {
                    instance_id: instance_id.to_owned(),
                })?;
        match book.live.get_mut(instance_id) {
            Some(rec) if accepted.contains(&state) => Ok(rec),
            _ => {
                let expected: Vec<&str> = accepted.iter().map(|s| s.seen().as_str()).collect();
                Err(SandboxError::conflict(operation, expected.join("|"), state.seen()).into())
            }
        }
    }

    /// Admits a serialized lifecycle call (activate, snapshot, release,
    /// beginActiveWrite): the state check of [`Adapter::admit`], then the
    /// instance's in-flight marker, set under the same lock. A call already
    /// in flight refuses this one before the provider is called.
    ///
    /// # Errors
    /// As [`Adapter::admit`]; `SandboxLifecycleConflict{operation,
    /// expected: "no lifecycle call in flight", actual: <member>_in_flight}`.
    fn claim(
        &self,
        operation: Operation,
        member: Member,
        instance_id: &str,
        accepted: &[RecordState],
    ) -> Res<(Record, Arc<InFlight>)> {
        let mut book = self.records();
        let rec = Self::admit_in(&mut book, operation, instance_id, accepted)?;
        if let Some(busy) = rec.in_flight {
            return Err(in_flight_conflict(operation, busy).into());
        }
        rec.in_flight = Some(member);
        let rec = rec.clone();
        drop(book);
        let mark = Arc::new(InFlight {
            shared: self.shared.clone(),
            claim: Claim::Instance(instance_id.to_owned()),
        });
        Ok((rec, mark))
    }

    fn set_state(&self, instance_id: &str, state: RecordState) {
        if matches!(state, RecordState::Released | RecordState::Destroyed) {
            self.shared.active_writes.forget(instance_id);
        }
        self.records().set_state(instance_id, state);
    }

    /// Network policy re-check (activate, execute, resume, openProcess):
    /// the retained profile's policy must still have a valid shape and fit
    /// both the envelope captured at registration and the envelope the
    /// provider advertises now. The envelope is meant to be unchanging; a
    /// provider whose network modes or egress grade drifted since
    /// registration is refused here rather than trusted.
    ///
    /// The least egress grade is the one the Run's selection required
    /// (kept in the record), not a constant. Past the network fields, an
    /// envelope that differs from the one advertised at registration in
    /// any field is refused as `SandboxProtocolInvalid{operation:
    /// capabilities, field}` naming every drifted field (the spec calls
    /// the envelope unchanging for the revision).
    fn recheck_network(&self, profile: &SandboxProfile, minimum: EgressCertification) -> Res<()> {
        check_network(self.envelope(), &profile.network_policy, minimum)?;
        let live = self.provider().capabilities();
        if live != self.shared.advertised {
            check_network(&live, &profile.network_policy, minimum)?;
            let drifted = drift(&self.shared.advertised, &live);
            if let Some((_, expected, actual)) = drifted.first() {
                let fields: Vec<&str> = drifted.iter().map(|(f, _, _)| f.as_str()).collect();
                return Err(SandboxError::protocol(
                    op::CAPABILITIES,
                    fields.join(", "),
                    expected.clone(),
                    actual.clone(),
                )
                .into());
            }
        }
        Ok(())
    }

    fn requirements_of(&self, request: &SandboxProvisionRequest) -> Requirements {
        let mut needs = Requirements::for_profile(
            &request.profile,
            request.target,
            request.platform,
            request.mounts.clone(),
        );
        needs.minimum_egress = self.minimum_egress;
        needs
    }

    /// Admits a provision or resume request: identity fields this adapter
    /// must own, the mount plan, the envelope fit and the hard expiry.
    fn admit_request(&self, operation: Operation, request: &SandboxProvisionRequest) -> Res<()> {
        if request.provider != self.provider_id() {
            return Err(SandboxError::invalid_request(
                operation,
                "provider",
                self.provider_id(),
                &request.provider,
            )
            .into());
        }
        if request.placement != self.envelope().placement {
            return Err(SandboxError::invalid_request(
                operation,
                "placement",
                format!("{:?}", self.envelope().placement),
                format!("{:?}", request.placement),
            )
            .into());
        }
        check_mount_plan(&request.mounts)?;
        if let Some(first) = unmet(self.envelope(), &self.requirements_of(request)).first() {
            return Err(SandboxError::unavailable(
                *first,
                format!("provider {} does not offer it", self.provider_id()),
            )
            .into());
        }
        let now = self.shared.clock.now();
        if request.expires_at <= now {
            return Err(SandboxError::invalid_request(
                operation,
                "expires_at",
                format!("an instant after now ({now})"),
                request.expires_at.to_string(),
            )
            .into());
        }
        checks::profile(operation, &request.profile)?;
        Ok(())
    }
}

/// The refusal of a serialized lifecycle call while `busy` is in flight.
fn in_flight_conflict(operation: Operation, busy: Member) -> SandboxError {
    let actual = ConflictActual::in_flight(busy)
        .unwrap_or_else(|| unreachable!("only serialized members are marked in flight"));
    SandboxError::conflict(operation, "no lifecycle call in flight", actual)
}

/// Admits a cleanup (or its dry run): the cutoff not after `now`, at most
/// 1,024 pins.
///
/// # Errors
/// `invalid_request` naming `orphaned_before` or `pinned_snapshots`.
pub(crate) fn admit_cleanup(
    now: Timestamp,
    orphaned_before: Timestamp,
    pinned_snapshots: Vec<String>,
) -> Res<CleanupRequest> {
    if orphaned_before > now {
        return Err(SandboxError::invalid_request(
            op::CLEANUP,
            "orphaned_before",
            format!("at or before now ({now})"),
            orphaned_before.to_string(),
        )
        .into());
    }
    if pinned_snapshots.len() > MAX_PINNED_SNAPSHOTS {
        return Err(SandboxError::invalid_request(
            op::CLEANUP,
            "pinned_snapshots",
            format!("at most {MAX_PINNED_SNAPSHOTS}"),
            pinned_snapshots.len().to_string(),
        )
        .into());
    }
    let request = CleanupRequest {
        now,
        orphaned_before,
        pinned_snapshots,
    };
    checks::first_refusal(op::CLEANUP, validate::cleanup_request(&request))?;
    Ok(request)
}

/// The first id that occurs twice, if any.
pub(crate) fn first_repeat<'a>(ids: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::BTreeSet::new();
    ids.into_iter().find(|id| !seen.insert(*id))
}
