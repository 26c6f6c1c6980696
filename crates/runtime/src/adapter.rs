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

/// A provider error passes through if it is in the adapter vocabulary; a
/// runtime-only tag from a provider is itself a protocol failure.
fn from_provider(operation: Operation, e: SandboxError) -> SandboxFailure {
    checks::from_provider(operation, e).into()
}

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
        Adapter {
            shared: Arc::new(Shared {
                provider,
                envelope,
                advertised,
                clock,
                rollback_bound,
                records: Mutex::new(Book::default()),
                idle: tokio::sync::Notify::new(),
                tasks: TaskTracker::new(),
                active_writes: Default::default(),
            }),
            minimum_egress: EgressCertification::AdvisoryFilter,
        }
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

    /// provision: allocate and return the instance in `provisioning`.
    ///
    /// # Errors
    /// Admission errors before the call (see [`Requirements`]); the
    /// provider's error; or `SandboxProtocolInvalid{operation:
    /// instance_identity}` for each of the 21 checks that fails, after the
    /// rollback has run once (a rollback failure is appended).
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's provision is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.
    pub async fn provision(&self, request: SandboxProvisionRequest) -> Res<SandboxInstance> {
        self.admit_request(op::PROVISION, &request)?;
        let (provider, req) = (self.shared.provider.clone(), request.clone());
        let (instance, guard) = acquire(
            &self.shared.tasks,
            Member::Provision,
            async move { provider.provision(req).await },
            self.shared.rollback_bound,
            None,
        )
        .await
        .map_err(|e| from_provider(op::PROVISION, e))?;
        self.take_new_instance(request, RecordState::Provisioning, instance, guard)
            .await
    }

    /// Checks a freshly allocated instance (provision, resume) against its
    /// request and takes ownership of it, or unwinds it through its
    /// rollback. The id check and the insertion happen under one lock.
    async fn take_new_instance(
        &self,
        request: SandboxProvisionRequest,
        state: RecordState,
        instance: SandboxInstance,
        guard: Guard,
    ) -> Res<SandboxInstance> {
        let expected = if state == RecordState::Active {
            InstanceState::Active
        } else {
            InstanceState::Provisioning
        };
        let mut problems = check_instance(&request, expected, self.envelope(), &instance);
        {
            let mut records = self.records();
            if records.state_of(&instance.instance_id).is_some() {
                problems.push(Mismatch::new(
                    "instance_id",
                    "an id not already held",
                    instance.instance_id.clone(),
                ));
            } else if problems.is_empty() {
                records.live.insert(
                    instance.instance_id.clone(),
                    Record {
                        request: Arc::new(request),
                        instance: Arc::new(instance.clone()),
                        state,
                        minimum_egress: self.minimum_egress,
                        in_flight: None,
                    },
                );
                drop(records);
                guard.accept();
                return Ok(instance);
            }
        }
        match mismatches(op::INSTANCE_IDENTITY, problems) {
            Some(rejection) => Err(guard.reject(rejection).await),
            None => unreachable!("a refused instance has at least one mismatch"),
        }
    }

    /// writeFile: bytes at an admitted path. While provisioning any declared
    /// mount or the output tree; once active only the output tree.
    ///
    /// # Errors
    /// `SandboxFileTooLarge` over 16 MiB; `invalid_request` /
    /// `path_not_admitted` for a bad path; `SandboxLifecycleConflict{
    /// write_file, expected: provisioning, actual: active}` for a mount path
    /// after activation; the provider's error.
    ///
    /// # Cancel safety
    /// Not cancel-safe: the provider's writeFile is dropped with this future,
    /// so the file may or may not have been written. The runtime records
    /// nothing for a write, so a repeat with the same bytes settles it.
    pub async fn write_file(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        content: Vec<u8>,
    ) -> Res<()> {
        self.write_file_mode(instance_id, path, content, None).await
    }

    /// writeFile with permission bits: as [`Adapter::write_file`], sending
    /// `mode` (`0o000..=0o777`) to the provider. `None` and `Some(0o644)`
    /// both send no `mode` member, so a request that needs no more than
    /// the default is byte-identical to one of a provider that predates
    /// the member (decision 016).
    ///
    /// # Errors
    /// As [`Adapter::write_file`]; `invalid_request{write_file, mode}` for
    /// bits over `0o777`.
    ///
    /// # Cancel safety
    /// As [`Adapter::write_file`].
    pub async fn write_file_mode(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        content: Vec<u8>,
        mode: Option<u32>,
    ) -> Res<()> {
        let path = &path.into();
        if let Some(m) = mode.filter(|m| *m > MAX_FILE_MODE) {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "mode",
                "permission bits of at most 0o777",
                format!("0o{m:o}"),
            )
            .into());
        }
        let mode = mode.filter(|m| *m != DEFAULT_FILE_MODE);
        let rec = self.admit(
            op::WRITE_FILE,
            instance_id,
            &[RecordState::Provisioning, RecordState::Active],
        )?;
        let home = home_of(op::WRITE_FILE, "path", path, &rec.instance.mounts)?;
        if path == home.allowed_root() {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "path",
                "a file path below its root",
                path,
            )
            .into());
        }
        if rec.state == RecordState::Active && home != PathHome::Output {
            return Err(SandboxError::conflict(
                op::WRITE_FILE,
                "provisioning",
                ConflictActual::Active,
            )
            .into());
        }
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(SandboxError::SandboxFileTooLarge {
                path: path.display(),
                limit_bytes: MAX_FILE_BYTES,
                actual_bytes: content.len() as u64,
            }
            .into());
        }
        let request = WriteFileRequest {
            instance_id: instance_id.to_owned(),
            path: path.to_owned(),
            content_base64: Bytes(content),
            mode,
        };
        checks::first_refusal(op::WRITE_FILE, validate::write_file_request(&request))?;
        self.provider()
            .write_file(request)
            .await
            .map_err(|e| from_provider(op::WRITE_FILE, e))
    }

    /// activate: seal mounts; the instance comes back `active`.
    ///
    /// # Errors
    /// Lifecycle and network admission; the provider's error;
    /// `instance_identity` mismatches (21 checks plus an unchanged
    /// `instance_id`) after the activation's rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's activate is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the instance's in-flight marker is held until that settles, so a
    /// repeat meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.; the
    /// record stays `provisioning` unless the value was taken.
    pub async fn activate(&self, instance_id: &str) -> Res<SandboxInstance> {
        let (rec, mark) = self.claim(
            op::ACTIVATE,
            Member::Activate,
            instance_id,
            &[RecordState::Provisioning],
        )?;
        self.recheck_network(&rec.request.profile, rec.minimum_egress)?;
        let (provider, req) = (
            self.shared.provider.clone(),
            ActivateRequest {
                instance_id: instance_id.to_owned(),
            },
        );
        let (instance, guard) = acquire(
            &self.shared.tasks,
            Member::Activate,
            async move { provider.activate(req).await },
            self.shared.rollback_bound,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| from_provider(op::ACTIVATE, e))?;
        let mut problems = check_instance(
            &rec.request,
            InstanceState::Active,
            self.envelope(),
            &instance,
        );
        if instance.instance_id != instance_id {
            problems.push(Mismatch::new(
                "instance_id",
                instance_id,
                instance.instance_id.clone(),
            ));
        }
        if let Some(rejection) = mismatches(op::INSTANCE_IDENTITY, problems) {
            return Err(guard.reject(rejection).await);
        }
        if let Some(r) = self.records().live.get_mut(instance_id) {
            r.state = RecordState::Active;
            r.instance = Arc::new(instance.clone());
        }
        guard.accept();
        Ok(instance)
    }

    /// execute: one bounded command.
    ///
    /// # Errors
    /// `invalid_request` naming the field for arguments over 256 or 65,536
    /// bytes or with NUL, bad environment keys, `timeout_seconds` outside
    /// 1..=max_duration_seconds, `output_limit_bytes` over 16 MiB, stdin
    /// over 16 MiB; lifecycle and network admission; the provider's error
    /// (`SandboxOutputLimitExceeded` included); `SandboxProtocolInvalid{
    /// execute}` for a stream over the limit or `finished_at` before
    /// `started_at`.
    ///
    /// # Cancel safety
    /// Not cancel-safe: the provider's execute is dropped with this future
    /// (over the wire, a `$/cancel` aborts it on the server). What happens to
    /// the running command is the provider's; the runtime records nothing for
    /// it, and destroying the instance ends it.
    pub async fn execute(
        &self,
        instance_id: &str,
        command: SandboxCommand,
    ) -> Res<SandboxCommandResult> {
        let rec = self.admit(op::EXECUTE, instance_id, &[RecordState::Active])?;
        self.recheck_network(&rec.request.profile, rec.minimum_egress)?;
        checks::command(&command, rec.request.profile.max_duration_seconds)?;
        let limit = command.output_limit_bytes;
        let result = self
            .provider()
            .execute(ExecuteRequest {
                instance_id: instance_id.to_owned(),
                command,
            })
            .await
            .map_err(|e| from_provider(op::EXECUTE, e))?;
        checks::protocol(op::EXECUTE, results::command_result(limit, &result))?;
        Ok(result)
    }

    fn contained_reads(&self) -> Res<()> {
        if self.envelope().physically_contained_file_read {
            Ok(())
        } else {
            Err(SandboxError::unavailable(
                Requirement::PhysicallyContainedFileRead,
                format!(
                    "provider {} does not bind resolution to the read; reads fail closed",
                    self.provider_id()
                ),
            )
            .into())
        }
    }

    /// readFile: one file, contained under the root the runtime derives
    /// from the instance's own mounts (or the output tree).
    ///
    /// # Errors
    /// `SandboxCapabilityUnavailable{physically_contained_file_read}` when
    /// the envelope does not claim contained reads (fail closed);
    /// `invalid_request` for `maximum_bytes` over 16 MiB or a bad path;
    /// `path_not_admitted`; the provider's error (`outside_root`,
    /// `not_found`, `SandboxFileTooLarge`, ...); `SandboxProtocolInvalid{
    /// read_file}` for content over `maximum_bytes` or a different path.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing; the provider's call is dropped
    /// with the future.
    pub async fn read_file(
        &self,
        instance_id: &str,
        path: impl Into<SandboxPath>,
        maximum_bytes: u64,
    ) -> Res<Vec<u8>> {
        let path = &path.into();
        let rec = self.admit(op::READ_FILE, instance_id, &[RecordState::Active])?;
        if maximum_bytes > MAX_READ_FILE_BYTES {
            return Err(SandboxError::invalid_request(
                op::READ_FILE,
                "maximum_bytes",
                format!("at most {MAX_READ_FILE_BYTES}"),
                maximum_bytes.to_string(),
            )
            .into());
        }
        let home = home_of(op::READ_FILE, "path", path, &rec.instance.mounts)?;
        self.contained_reads()?;
        let request = ReadFileRequest {
            instance_id: instance_id.to_owned(),
            path: path.to_owned(),
            allowed_root: home.allowed_root().to_owned(),
            maximum_bytes,
        };
        checks::first_refusal(op::READ_FILE, validate::read_file_request(&request))?;
        let content = self
            .provider()
            .read_file(request)
            .await
            .map_err(|e| from_provider(op::READ_FILE, e))?;
        if content.path != *path {
            return Err(SandboxError::protocol(op::READ_FILE, "path", path, &content.path).into());
        }
        let len = content.content_base64.len() as u64;
        if len > maximum_bytes {
            return Err(SandboxError::protocol(
                op::READ_FILE,
                "content_base64",
                format!("at most {maximum_bytes} bytes"),
                format!("{len} bytes"),
            )
            .into());
        }
        Ok(content.content_base64.0)
    }

    /// readFiles: members grouped by their allowed root, one provider call
    /// per group with that group's own aggregate budget (or sequential
    /// readFile when the member is absent). Outcomes come back in request
    /// order.
    ///
    /// # Errors
    /// `invalid_request` for more than 1,024 files, a member over 16 MiB or
    /// an aggregate over 128 MiB; path admission; the provider's error;
    /// `SandboxProtocolInvalid{read_files}` for a result that is short,
    /// long, out of order, over a member's or the group's budget.
    ///
    /// # Cancel safety
    /// Cancel-safe: reads only (the native member or sequential readFile
    /// calls); the provider's call in progress is dropped with the future.
    pub async fn read_files(
        &self,
        instance_id: &str,
        files: Vec<ReadFilesEntry>,
    ) -> Res<Vec<ReadFileOutcome>> {
        let rec = self.admit(op::READ_FILES, instance_id, &[RecordState::Active])?;
        if files.len() > MAX_READ_FILES_COUNT {
            return Err(SandboxError::invalid_request(
                op::READ_FILES,
                "files",
                format!("at most {MAX_READ_FILES_COUNT} files"),
                format!("{} files", files.len()),
            )
            .into());
        }
        let mut total: u64 = 0;
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            if f.maximum_bytes > MAX_READ_FILE_BYTES {
                return Err(SandboxError::invalid_request(
                    op::READ_FILES,
                    format!("files[{i}].maximum_bytes"),
                    format!("at most {MAX_READ_FILE_BYTES}"),
                    f.maximum_bytes.to_string(),
                )
                .into());
            }
            total = total
                .checked_add(f.maximum_bytes)
                .filter(|t| *t <= MAX_READ_FILES_AGGREGATE_BYTES)
                .ok_or_else(|| {
                    SandboxError::invalid_request(
                        op::READ_FILES,
                        "files",
                        format!("an aggregate of at most {MAX_READ_FILES_AGGREGATE_BYTES} bytes"),
                        "more",
                    )
                })?;
            let root = home_of(
                op::READ_FILES,
                &format!("files[{i}].path"),
                &f.path,
                &rec.instance.mounts,
            )?
            .allowed_root()
            .to_owned();
            match groups.iter_mut().find(|(r, _)| *r == root) {
                Some((_, members)) => members.push(i),
                None => groups.push((root, vec![i])),
            }
        }
        self.contained_reads()?;
        let mut outcomes: Vec<Option<ReadFileOutcome>> = vec![None; files.len()];
        for (root, members) in groups {
            let group: Vec<ReadFilesEntry> = members.iter().map(|i| files[*i].clone()).collect();
            let got = match self.provider().read_files() {
                Some(member) => {
                    let aggregate: u64 = group.iter().map(|f| f.maximum_bytes).sum();
                    let request = ReadFilesRequest {
                        instance_id: instance_id.to_owned(),
                        allowed_root: root.clone(),
                        files: group.clone(),
                        aggregate_maximum_bytes: aggregate,
                    };
                    checks::first_refusal(op::READ_FILES, validate::read_files_request(&request))?;
                    let result = member
                        .read_files(request)
                        .await
                        .map_err(|e| from_provider(op::READ_FILES, e))?;
                    checks::read_files_result(&group, aggregate, &result.files)?;
                    result.files
                }
                None => self.read_files_sequentially(instance_id, &group).await?,
            };
            for (slot, outcome) in members.into_iter().zip(got) {
                outcomes[slot] = Some(outcome);
            }
        }
        Ok(outcomes.into_iter().flatten().collect())
    }

    async fn read_files_sequentially(
        &self,
        instance_id: &str,
        group: &[ReadFilesEntry],
    ) -> Res<Vec<ReadFileOutcome>> {
        let mut out = Vec::with_capacity(group.len());
        for f in group {
            let path = f.path.clone();
            let outcome = match self.read_file(instance_id, &f.path, f.maximum_bytes).await {
                Ok(content) => ReadFileOutcome::Read {
                    path,
                    content_base64: Bytes(content),
                },
                Err(failure) => match failure.error() {
                    SandboxError::SandboxFileTooLarge { actual_bytes, .. } => {
                        ReadFileOutcome::TooLarge {
                            path,
                            size_bytes: *actual_bytes,
                        }
                    }
                    SandboxError::SandboxOperationFailed { reason, .. } => match reason {
                        FailureReason::NotFound => ReadFileOutcome::NotFound { path },
                        FailureReason::OutsideRoot => ReadFileOutcome::OutsideRoot { path },
                        FailureReason::NotRegularFile => ReadFileOutcome::NotRegularFile { path },
                        _ => return Err(failure),
                    },
                    _ => return Err(failure),
                },
            };
            out.push(outcome);
        }
        Ok(out)
    }

    fn listing_root(
        &self,
        operation: Operation,
        rec: &Record,
        root: &str,
        max_entries: u32,
    ) -> Res<()> {
        checks::first_refusal(operation, validate::list_request(root, max_entries))?;
        let home = home_of(operation, "root", root, &rec.instance.mounts)?;
        if home.allowed_root() != root {
            return Err(SandboxError::invalid_request(
                operation,
                "root",
                "a mount root or the output tree",
                root,
            )
            .into());
        }
        Ok(())
    }

    /// listDir: regular files under a mount root with size and SHA-256.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{list_dir, actual: list_dir_unsupported}`
    /// when the envelope says `list_dir: false` or the member is absent;
    /// `invalid_request` for `max_entries` over 100,000 or a root that is
    /// not a mount root; `SandboxProtocolInvalid{list_dir}` for more
    /// entries than `max_entries` or an entry outside the root.
    ///
    /// # Cancel safety
    /// Cancel-safe: a listing changes nothing; the provider's call is dropped
    /// with the future.
    pub async fn list_dir(
        &self,
        instance_id: &str,
        root: &str,
        max_entries: u32,
    ) -> Res<ListDirResult> {
        let rec = self.admit(op::LIST_DIR, instance_id, &[RecordState::Active])?;
        let member = match (self.envelope().list_dir, self.provider().list_dir()) {
            (true, Some(m)) => m,
            _ => {
                return Err(SandboxError::conflict(
                    op::LIST_DIR,
                    "list_dir: true",
                    ConflictActual::ListDirUnsupported,
                )
                .into())
            }
        };
        self.listing_root(op::LIST_DIR, &rec, root, max_entries)?;
        let result = member
            .list_dir(ListDirRequest {
                instance_id: instance_id.to_owned(),
                root: root.to_owned(),
                max_entries,
            })
            .await
            .map_err(|e| from_provider(op::LIST_DIR, e))?;
        checks::protocol(
            op::LIST_DIR,
            results::list_dir_result(root, max_entries, &result),
        )?;
        Ok(result)
    }

    /// listProjectDir: complete leaf enumeration, special files named.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{list_project_dir, actual:
    /// list_project_dir_unsupported}` when the member is absent;
    /// `SandboxProtocolInvalid{list_project_dir}` for `complete: false`,
    /// more entries than `max_entries` or an entry outside the root.
    ///
    /// # Cancel safety
    /// Cancel-safe: a listing changes nothing; the provider's call is dropped
    /// with the future.
    pub async fn list_project_dir(
        &self,
        instance_id: &str,
        root: &str,
        max_entries: u32,
    ) -> Res<ListProjectDirResult> {
        let rec = self.admit(op::LIST_PROJECT_DIR, instance_id, &[RecordState::Active])?;
        let Some(member) = self.provider().list_project_dir() else {
            return Err(SandboxError::conflict(
                op::LIST_PROJECT_DIR,
                "list_project_dir member",
                ConflictActual::ListProjectDirUnsupported,
            )
            .into());
        };
        self.listing_root(op::LIST_PROJECT_DIR, &rec, root, max_entries)?;
        let result = member
            .list_project_dir(ListProjectDirRequest {
                instance_id: instance_id.to_owned(),
                root: root.to_owned(),
                max_entries,
            })
            .await
            .map_err(|e| from_provider(op::LIST_PROJECT_DIR, e))?;
        checks::protocol(
            op::LIST_PROJECT_DIR,
            results::list_project_dir_result(root, max_entries, &result),
        )?;
        Ok(result)
    }

    /// snapshot: capture a durable active instance.
    ///
    /// # Errors
    /// `SandboxSnapshotForbidden` for a ZDR profile (before the call);
    /// `SandboxCapabilityUnavailable{snapshots}` when the envelope has none;
    /// `invalid_request` for an `expires_at` not after now;
    /// `snapshot_identity` mismatches after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's snapshot is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the instance's in-flight marker is held until that settles, so a
    /// repeat meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back..
    pub async fn snapshot(&self, instance_id: &str, expires_at: Timestamp) -> Res<SandboxSnapshot> {
        let (rec, mark) = self.claim(
            op::SNAPSHOT,
            Member::Snapshot,
            instance_id,
            &[RecordState::Active],
        )?;
        self.admit_snapshot(op::SNAPSHOT, &rec, &expires_at)?;
        let (provider, req) = (
            self.shared.provider.clone(),
            SnapshotRequest {
                instance_id: instance_id.to_owned(),
                expires_at,
            },
        );
        let (snapshot, guard) = acquire(
            &self.shared.tasks,
            Member::Snapshot,
            async move { provider.snapshot(req).await },
            self.shared.rollback_bound,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| from_provider(op::SNAPSHOT, e))?;
        if let Some(rejection) = mismatches(
            op::SNAPSHOT_IDENTITY,
            check_snapshot(&rec.instance, &expires_at, &snapshot),
        ) {
            return Err(guard.reject(rejection).await);
        }
        self.records()
            .note_snapshot(&snapshot, self.shared.clock.now());
        guard.accept();
        Ok(snapshot)
    }

    fn admit_snapshot(
        &self,
        operation: Operation,
        rec: &Record,
        expires_at: &Timestamp,
    ) -> Res<()> {
        if rec.request.profile.retention == RetentionMode::EphemeralZdr {
            return Err(SandboxError::SandboxSnapshotForbidden {
                instance_id: rec.instance.instance_id.clone(),
                retention: RetentionMode::EphemeralZdr,
            }
            .into());
        }
        if !self.envelope().snapshots {
            return Err(SandboxError::unavailable(
                Requirement::Snapshots,
                "the provider does not capture snapshots",
            )
            .into());
        }
        let now = self.shared.clock.now();
        if *expires_at <= now {
            return Err(SandboxError::invalid_request(
                operation,
                "expires_at",
                format!("an instant after now ({now})"),
                expires_at.to_string(),
            )
            .into());
        }
        Ok(())
    }

    /// cloneSnapshot: an independent snapshot bound to `target_session_id`.
    ///
    /// # Errors
    /// `SandboxCapabilityUnavailable{snapshots | snapshot_clone}`;
    /// `clone_identity` mismatches (reused id, moved expiry, predating the
    /// source, wrong Session, ...) after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's cloneSnapshot is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.
    pub async fn clone_snapshot(
        &self,
        source: &SandboxSnapshot,
        target_session_id: &str,
    ) -> Res<SandboxSnapshot> {
        if !self.envelope().snapshots {
            return Err(SandboxError::unavailable(
                Requirement::Snapshots,
                "the provider does not capture snapshots",
            )
            .into());
        }
        if !self.envelope().snapshot_clone {
            return Err(SandboxError::unavailable(
                Requirement::SnapshotClone,
                "the provider does not clone snapshots",
            )
            .into());
        }
        if source.provider != self.provider_id() {
            return Err(SandboxError::invalid_request(
                op::CLONE_SNAPSHOT,
                "source.provider",
                self.provider_id(),
                &source.provider,
            )
            .into());
        }
        if target_session_id.is_empty() {
            return Err(SandboxError::invalid_request(
                op::CLONE_SNAPSHOT,
                "target_session_id",
                "a non-empty Session id",
                "\"\"",
            )
            .into());
        }
        let (provider, req) = (
            self.shared.provider.clone(),
            CloneSnapshotRequest {
                source: source.clone(),
                target_session_id: target_session_id.to_owned(),
            },
        );
        let (clone, guard) = acquire(
            &self.shared.tasks,
            Member::CloneSnapshot,
            async move { provider.clone_snapshot(req).await },
            self.shared.rollback_bound,
            None,
        )
        .await
        .map_err(|e| from_provider(op::CLONE_SNAPSHOT, e))?;
        if let Some(rejection) = mismatches(
            op::CLONE_IDENTITY,
            check_clone(source, target_session_id, &clone),
        ) {
            return Err(guard.reject(rejection).await);
        }
        self.records()
            .note_snapshot(&clone, self.shared.clock.now());
        guard.accept();
        Ok(clone)
    }

    /// release: durable settles a snapshot carrying `snapshot_expires_at`;
    /// ZDR destroys every trace.
    ///
    /// # Errors
    /// `invalid_request` when a durable release has no
    /// `snapshot_expires_at` or a ZDR release has one;
    /// `SandboxProtocolInvalid{release, field: disposition}` for `released`
    /// on ZDR or `destroyed` on durable, and `snapshot_identity`
    /// mismatches for the settled snapshot, each after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's release is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the instance's in-flight marker is held until that settles, so a
    /// repeat meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.; the
    /// record stays `active` unless the disposition was taken.
    pub async fn release(
        &self,
        instance_id: &str,
        snapshot_expires_at: Option<Timestamp>,
    ) -> Res<ReleaseDisposition> {
        let (rec, mark) = self.claim(
            op::RELEASE,
            Member::Release,
            instance_id,
            &[RecordState::Active],
        )?;
        let durable = rec.request.profile.retention == RetentionMode::Durable;
        match (&snapshot_expires_at, durable) {
            (None, true) => {
                return Err(SandboxError::invalid_request(
                    op::RELEASE,
                    "snapshot_expires_at",
                    "a retention deadline for a durable release",
                    "absent",
                )
                .into())
            }
            (Some(t), false) => {
                return Err(SandboxError::invalid_request(
                    op::RELEASE,
                    "snapshot_expires_at",
                    "absent for an ephemeral_zdr release",
                    t.to_string(),
                )
                .into())
            }
            (Some(t), true) => self.admit_snapshot(op::RELEASE, &rec, t)?,
            (None, false) => {}
        }
        let (provider, req) = (
            self.shared.provider.clone(),
            ReleaseRequest {
                instance_id: instance_id.to_owned(),
                snapshot_expires_at,
            },
        );
        let (disposition, guard) = acquire(
            &self.shared.tasks,
            Member::Release,
            async move { provider.release(req).await },
            self.shared.rollback_bound,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| from_provider(op::RELEASE, e))?;
        let problem = match results::release_disposition(snapshot_expires_at.as_ref(), &disposition)
        {
            Some(m) => Some(SandboxFailure::from(m.into_error(op::RELEASE))),
            None => match (&disposition, snapshot_expires_at) {
                (ReleaseDisposition::Released { snapshot }, Some(t)) => mismatches(
                    op::SNAPSHOT_IDENTITY,
                    check_snapshot(&rec.instance, &t, snapshot),
                ),
                _ => None,
            },
        };
        if let Some(rejection) = problem {
            return Err(guard.reject(rejection).await);
        }
        {
            let now = self.shared.clock.now();
            let mut book = self.records();
            if let ReleaseDisposition::Released { snapshot } = &disposition {
                book.note_snapshot(snapshot, now);
            }
            book.set_state(instance_id, RecordState::Released);
        }
        guard.accept();
        Ok(disposition)
    }

    /// resume: a fresh active instance from a snapshot.
    ///
    /// # Errors
    /// Request admission as for provision; `invalid_request` when the
    /// snapshot disagrees with the request on provider, placement,
    /// workspace_id, session_id, profile_id, profile_version or
    /// profile_digest, or has expired; `instance_identity` mismatches
    /// (state `active`) after the rollback ran once.
    ///
    /// # Cancel safety
    /// Cancel-safe (decision 009): dropped while the provider's resume is
    /// pending, the call runs on in a task of the adapter's tracker and a
    /// value nobody takes any more is rolled back there, once, under the
    /// rollback bound;
    /// the snapshot's resume marker is held until that settles, so a second
    /// resume of it meanwhile is refused as a lifecycle conflict. Dropped while a refused value's rollback runs,
    /// that rollback still completes in its own task. Between the value's
    /// arrival and the record's update nothing is awaited, so the record
    /// never holds a value the provider was told to roll back.
    pub async fn resume(
        &self,
        request: SandboxProvisionRequest,
        snapshot: SandboxSnapshot,
    ) -> Res<SandboxInstance> {
        self.admit_request(op::RESUME, &request)?;
        self.recheck_network(&request.profile, self.minimum_egress)?;
        if !self.envelope().snapshots {
            return Err(SandboxError::unavailable(
                Requirement::Snapshots,
                "the provider does not capture snapshots",
            )
            .into());
        }
        let pairs: [(&str, String, String); 7] = [
            (
                "snapshot.provider",
                request.provider.clone(),
                snapshot.provider.clone(),
            ),
            (
                "snapshot.placement",
                format!("{:?}", request.placement),
                format!("{:?}", snapshot.placement),
            ),
            (
                "snapshot.workspace_id",
                request.workspace_id.clone(),
                snapshot.workspace_id.clone(),
            ),
            (
                "snapshot.session_id",
                request.session_id.clone(),
                snapshot.session_id.clone(),
            ),
            (
                "snapshot.profile_id",
                request.profile.profile_id.clone(),
                snapshot.profile_id.clone(),
            ),
            (
                "snapshot.profile_version",
                request.profile.profile_version.to_string(),
                snapshot.profile_version.to_string(),
            ),
            (
                "snapshot.profile_digest",
                request.profile.profile_digest.to_string(),
                snapshot.profile_digest.to_string(),
            ),
        ];
        for (field, expected, actual) in pairs {
            if expected != actual {
                return Err(
                    SandboxError::invalid_request(op::RESUME, field, expected, actual).into(),
                );
            }
        }
        let now = self.shared.clock.now();
        if snapshot.expires_at <= now {
            return Err(SandboxError::invalid_request(
                op::RESUME,
                "snapshot.expires_at",
                format!("an instant after now ({now})"),
                snapshot.expires_at.to_string(),
            )
            .into());
        }
        let mark = {
            let mut book = self.records();
            if !book.resuming.insert(snapshot.snapshot_id.clone()) {
                return Err(in_flight_conflict(op::RESUME, Member::Resume).into());
            }
            drop(book);
            Arc::new(InFlight {
                shared: self.shared.clone(),
                claim: Claim::Resume(snapshot.snapshot_id.clone()),
            })
        };
        let (provider, req) = (
            self.shared.provider.clone(),
            ResumeRequest {
                request: request.clone(),
                snapshot,
            },
        );
        let (instance, guard) = acquire(
            &self.shared.tasks,
            Member::Resume,
            async move { provider.resume(req).await },
            self.shared.rollback_bound,
            Some(mark as Hold),
        )
        .await
        .map_err(|e| from_provider(op::RESUME, e))?;
        self.take_new_instance(request, RecordState::Active, instance, guard)
            .await
    }

    /// destroy: idempotent teardown, in any state, passed through even for
    /// an id the runtime does not hold (a lost response).
    ///
    /// Serialized with the other lifecycle calls on a held instance: a
    /// destroy waits for an activate, snapshot, release or
    /// beginActiveWrite in flight (and its rollback) to settle, then holds
    /// the instance itself, so those calls are refused while it runs. It
    /// waits rather than refuses because teardown must always be possible;
    /// a caller bounds the wait as it bounds the destroy.
    ///
    /// # Errors
    /// The provider's error.
    ///
    /// # Cancel safety
    /// Not cancel-safe, and safe to repeat: dropped while waiting for a call
    /// in flight, nothing was claimed; dropped during the provider's destroy,
    /// that call is dropped half-way, the in-flight marker is released and the
    /// record keeps its state. destroy is idempotent, so a repeat finishes the
    /// teardown.
    pub async fn destroy(&self, instance_id: &str) -> Res<()> {
        let _mark = self.claim_for_destroy(instance_id).await;
        self.provider()
            .destroy(DestroyRequest {
                instance_id: instance_id.to_owned(),
            })
            .await
            .map_err(|e| from_provider(op::DESTROY, e))?;
        self.set_state(instance_id, RecordState::Destroyed);
        Ok(())
    }

    /// Waits until no serialized call is in flight on a held instance,
    /// then marks the destroy in flight; `None` for an instance the
    /// runtime does not hold live (passed through unserialized).
    async fn claim_for_destroy(&self, instance_id: &str) -> Option<Arc<InFlight>> {
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let mut book = self.records();
                let rec = book.live.get_mut(instance_id)?;
                if rec.in_flight.is_none() {
                    rec.in_flight = Some(Member::Destroy);
                    drop(book);
                    return Some(Arc::new(InFlight {
                        shared: self.shared.clone(),
                        claim: Claim::Instance(instance_id.to_owned()),
                    }));
                }
            }
            idle.await;
        }
    }

    /// destroySnapshot: idempotent teardown of one snapshot.
    ///
    /// # Errors
    /// The provider's error.
    ///
    /// # Cancel safety
    /// Not cancel-safe, and safe to repeat: the provider's destroySnapshot is
    /// dropped with the future and may stop half-way; it is idempotent, so a
    /// repeat finishes it.
    pub async fn destroy_snapshot(&self, snapshot_id: &str) -> Res<()> {
        self.provider()
            .destroy_snapshot(DestroySnapshotRequest {
                snapshot_id: snapshot_id.to_owned(),
            })
            .await
            .map_err(|e| from_provider(op::DESTROY_SNAPSHOT, e))?;
        self.records().snapshot_deadlines.remove(snapshot_id);
        Ok(())
    }

    /// cleanup: sweep orphans before `orphaned_before`; pinned snapshots are
    /// exempt from the cutoff but never from their own expiry.
    ///
    /// # Errors
    /// `invalid_request` for `orphaned_before` after `now` or more than
    /// 1,024 pins; the provider's error; `SandboxProtocolInvalid{cleanup}`
    /// for a repeated id.
    ///
    /// # Cancel safety
    /// Not cancel-safe, and safe to repeat: the provider's sweep is dropped
    /// with the future and may have removed some orphans and not others; the
    /// next cleanup removes the rest.
    pub async fn cleanup(
        &self,
        now: Timestamp,
        orphaned_before: Timestamp,
        pinned_snapshots: Vec<String>,
    ) -> Res<CleanupResult> {
        let request = admit_cleanup(now, orphaned_before, pinned_snapshots)?;
        let pins: HashSet<String> = request.pinned_snapshots.iter().cloned().collect();
        let result = self
            .provider()
            .cleanup(request)
            .await
            .map_err(|e| from_provider(op::CLEANUP, e))?;
        for (field, ids) in [
            ("instances", &result.instances),
            ("snapshots", &result.snapshots),
        ] {
            if let Some(dup) = first_repeat(ids.iter().map(String::as_str)) {
                return Err(SandboxError::protocol(
                    op::CLEANUP,
                    field,
                    "each id once",
                    format!("{dup} repeated"),
                )
                .into());
            }
        }
        let mut book = self.records();
        for id in result.snapshots.iter().filter(|id| pins.contains(*id)) {
            if let Some(expires_at) = book.snapshot_deadlines.get(id).filter(|t| **t > now) {
                return Err(SandboxError::protocol(
                    op::CLEANUP,
                    "snapshots",
                    format!("the pinned snapshot {id} kept until its expires_at {expires_at}"),
                    format!("{id} swept at {now}"),
                )
                .into());
            }
        }
        for id in &result.snapshots {
            book.snapshot_deadlines.remove(id);
        }
        book.snapshot_deadlines.retain(|_, t| *t > now);
        for id in &result.instances {
            book.set_state(id, RecordState::Destroyed);
        }
        drop(book);
        Ok(result)
    }

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
                Ok(Ok(Err(e))) => rejection.then(checks::from_provider(
                    Operation::Process(ProcessStep::Destroy),
                    e,
                )),
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
        Ok(Process::new(process))
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
            Ok(result) => result.map_err(|e| from_provider(op::OPEN_PROCESS, e)),
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
