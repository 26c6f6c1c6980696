//! [`Hooked`]: a test double made from any provider plus hooks.
//!
//! `Hooked<P>` delegates every member of the contract to an inner
//! [`SandboxProvider`] (in practice the memory oracle, which answers every
//! member correctly) and lets a test make it break exactly one rule:
//!
//! - **mutate** a returned value ([`Hooked::on`] and its named forms such
//!   as [`Hooked::on_instance`]): the oracle answers honestly, the hook
//!   makes the answer wrong, and the runtime must catch it;
//! - **fail** an operation with a given error ([`Hooked::fail`]), before
//!   the inner provider sees it;
//! - **hide** an optional member ([`Hooked::hide`]);
//! - **gate** an operation or a rollback ([`Hooked::gate`]): the call
//!   signals that it arrived and waits, so a test can drop the caller while
//!   the provider call is pending;
//! - choose how **rollbacks** and a process's **wait** and **destroy**
//!   behave ([`Behaviour`]: delegate, fail without delegating, never
//!   settle);
//! - break beginActiveWrite's **dispatch marker** handoff (skip it, ignore
//!   its abort, fail after it);
//! - **override the envelope** ([`Hooked::set_envelope`]) and the provider
//!   id.
//!
//! Every call is recorded by operation name (`provision`,
//! `provision_rollback`, `provision_rollback_done`, `process_destroy`,
//! `process_signal SIGTERM`, ...), and every request as the inner provider
//! received it ([`Hooked::requests`]), so a test can assert that the
//! provider was *not* called when the runtime refused first.
//!
//! The double never invents state of its own: ids, files, snapshots and
//! lifecycle states are the inner provider's ([`Hooked::inner`]).

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use tokio::sync::Notify;

mod members;
mod wrap;

/// How a rollback, a process wait or a process destroy behaves.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Delegate to the inner provider (the default).
    Delegate,
    /// Return this error without delegating (nothing is undone).
    Fail(SandboxError),
    /// Never settle (`std::future::pending`).
    Hang,
}

/// A gate: the gated call signals `entered`, then waits for `proceed`.
#[derive(Clone, Default)]
pub struct Gate {
    /// Notified (with a stored permit) when the call reaches the gate.
    pub entered: Arc<Notify>,
    /// Notify once to let the call continue.
    pub proceed: Arc<Notify>,
}

type AnyHook = Arc<dyn Any + Send + Sync>;
type Hook<T> = Arc<dyn Fn(&mut T) + Send + Sync>;

/// beginActiveWrite's deviations around the dispatch marker.
#[derive(Debug, Clone, Default)]
pub(crate) struct MarkerDeviation {
    /// Publish without invoking the caller's marker.
    pub(crate) skip: bool,
    /// Publish although the caller's marker aborted.
    pub(crate) ignore_abort: bool,
    /// After the caller's marker let the transaction proceed, abort it
    /// inside the provider and answer this error instead.
    pub(crate) error_after: Option<SandboxError>,
}

/// The state a [`Hooked`] shares with the rollbacks and process controls
/// it hands out.
#[derive(Default)]
pub(crate) struct Shared {
    envelope: Mutex<Option<SandboxProviderCapabilities>>,
    hooks: Mutex<HashMap<(String, TypeId), AnyHook>>,
    fail: Mutex<HashMap<String, SandboxError>>,
    hidden: Mutex<HashSet<String>>,
    gates: Mutex<HashMap<String, Gate>>,
    calls: Mutex<Vec<String>>,
    requests: Mutex<Vec<(String, Box<dyn Any + Send>)>>,
    behaviours: Mutex<HashMap<&'static str, Behaviour>>,
    pub(crate) marker: Mutex<MarkerDeviation>,
    rollbacks: AtomicUsize,
    rollbacks_done: AtomicUsize,
    process_destroys: AtomicUsize,
    process_waits: AtomicUsize,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The behaviour keys.
pub(crate) const ROLLBACK: &str = "rollback";
pub(crate) const PROCESS_WAIT: &str = "process_wait";
pub(crate) const PROCESS_DESTROY: &str = "process_destroy";

impl Shared {
    pub(crate) fn record(&self, call: impl Into<String>) {
        lock(&self.calls).push(call.into());
    }

    pub(crate) async fn pass_gate(&self, name: &str) {
        let gate = lock(&self.gates).get(name).cloned();
        if let Some(g) = gate {
            g.entered.notify_one();
            g.proceed.notified().await;
        }
    }

    /// Records the call, waits at its gate, then answers its injected
    /// failure, if any.
    pub(crate) async fn enter(&self, operation: Operation) -> Result<(), SandboxError> {
        let name = operation.to_string();
        self.record(name.clone());
        self.pass_gate(&name).await;
        match lock(&self.fail).get(&name) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    pub(crate) fn keep_request<T: Clone + Send + 'static>(&self, operation: Operation, r: &T) {
        lock(&self.requests).push((operation.to_string(), Box::new(r.clone())));
    }

    pub(crate) fn mutate<T: 'static>(&self, operation: Operation, value: &mut T) {
        let key = (operation.to_string(), TypeId::of::<T>());
        let hook = lock(&self.hooks).get(&key).cloned();
        if let Some(h) = hook.as_ref().and_then(|h| h.downcast_ref::<Hook<T>>()) {
            h(value);
        }
    }

    pub(crate) fn hidden(&self, member: Operation) -> bool {
        lock(&self.hidden).contains(&member.to_string())
    }

    pub(crate) fn behaviour(&self, key: &'static str) -> Behaviour {
        lock(&self.behaviours)
            .get(key)
            .cloned()
            .unwrap_or(Behaviour::Delegate)
    }

    pub(crate) fn count_rollback(&self, done: bool) {
        let c = if done {
            &self.rollbacks_done
        } else {
            &self.rollbacks
        };
        c.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn count_process(&self, destroy: bool) {
        let c = if destroy {
            &self.process_destroys
        } else {
            &self.process_waits
        };
        c.fetch_add(1, Ordering::SeqCst);
    }
}

/// A provider `P` with hooks; see the [module documentation](self).
///
/// Hold it as `Arc<Hooked<P>>`; it registers as `Arc<dyn SandboxProvider>`.
pub struct Hooked<P> {
    inner: P,
    id: String,
    shared: Arc<Shared>,
}

impl<P: SandboxProvider + 'static> Hooked<P> {
    /// `inner` with no hook, under its own provider id and envelope.
    pub fn new(inner: P) -> Self {
        let id = inner.provider_id().to_string();
        Hooked {
            inner,
            id,
            shared: Arc::default(),
        }
    }

    /// This double under the provider id `id` (the inner provider echoes
    /// each request's `provider`, so instances carry the id the runtime
    /// registered).
    pub fn with_id(mut self, id: &str) -> Self {
        self.id = id.to_string();
        self
    }

    /// This double reporting `envelope` instead of the inner provider's.
    pub fn with_envelope(self, envelope: SandboxProviderCapabilities) -> Self {
        *lock(&self.shared.envelope) = Some(envelope);
        self
    }

    /// The inner provider (its own inspection surface).
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Changes the envelope `capabilities()` reports from now on (starting
    /// from the current one).
    pub fn set_envelope(&self, f: impl FnOnce(&mut SandboxProviderCapabilities)) {
        let mut envelope = self.capabilities();
        f(&mut envelope);
        *lock(&self.shared.envelope) = Some(envelope);
    }
}

impl<P> Hooked<P> {
    /// Mutates every `T` that `operation` returns: the member's result, or
    /// for an allocating member the handoff's value. For `release`, a
    /// `SandboxSnapshot` hook acts on a released snapshot and a
    /// `ReleaseDisposition` hook on the disposition (after it); for
    /// `open_process` a `SandboxProcessEvidence` hook acts on the evidence.
    /// A hook of a type `operation` never returns never runs. One hook per
    /// operation and type: a second replaces the first.
    pub fn on<T: 'static>(
        &self,
        operation: impl Display,
        f: impl Fn(&mut T) + Send + Sync + 'static,
    ) {
        let hook: Hook<T> = Arc::new(f);
        let key = (operation.to_string(), TypeId::of::<T>());
        lock(&self.shared.hooks).insert(key, Arc::new(hook));
    }

    /// Mutates every instance `operation` (provision / activate / resume)
    /// returns.
    pub fn on_instance(
        &self,
        operation: impl Display,
        f: impl Fn(&mut SandboxInstance) + Send + Sync + 'static,
    ) {
        self.on(operation, f);
    }

    /// Mutates every snapshot `operation` (snapshot / clone_snapshot /
    /// release) returns.
    pub fn on_snapshot(
        &self,
        operation: impl Display,
        f: impl Fn(&mut SandboxSnapshot) + Send + Sync + 'static,
    ) {
        self.on(operation, f);
    }

    /// Mutates every release disposition.
    pub fn on_release(&self, f: impl Fn(&mut ReleaseDisposition) + Send + Sync + 'static) {
        self.on(op::RELEASE, f);
    }

    /// Mutates every command result.
    pub fn on_command_result(&self, f: impl Fn(&mut SandboxCommandResult) + Send + Sync + 'static) {
        self.on(op::EXECUTE, f);
    }

    /// Mutates every readFile result.
    pub fn on_read_file(&self, f: impl Fn(&mut SandboxFileContent) + Send + Sync + 'static) {
        self.on(op::READ_FILE, f);
    }

    /// Mutates every readFiles result.
    pub fn on_read_files(&self, f: impl Fn(&mut ReadFilesResult) + Send + Sync + 'static) {
        self.on(op::READ_FILES, f);
    }

    /// Mutates every listDir result.
    pub fn on_list_dir(&self, f: impl Fn(&mut ListDirResult) + Send + Sync + 'static) {
        self.on(op::LIST_DIR, f);
    }

    /// Mutates every listProjectDir result.
    pub fn on_list_project_dir(
        &self,
        f: impl Fn(&mut ListProjectDirResult) + Send + Sync + 'static,
    ) {
        self.on(op::LIST_PROJECT_DIR, f);
    }

    /// Mutates every process's evidence.
    pub fn on_evidence(&self, f: impl Fn(&mut SandboxProcessEvidence) + Send + Sync + 'static) {
        self.on(op::OPEN_PROCESS, f);
    }

    /// Mutates every cleanup result.
    pub fn on_cleanup(&self, f: impl Fn(&mut CleanupResult) + Send + Sync + 'static) {
        self.on(op::CLEANUP, f);
    }

    /// Mutates every beginActiveWrite outcome.
    pub fn on_active_write(&self, f: impl Fn(&mut ActiveWriteOutcome) + Send + Sync + 'static) {
        self.on(op::BEGIN_ACTIVE_WRITE, f);
    }

    /// beginActiveWrite publishes without invoking the caller's dispatch
    /// marker (the inner provider gets a marker that always proceeds).
    pub fn active_write_skips_marker(&self) {
        lock(&self.shared.marker).skip = true;
    }

    /// beginActiveWrite publishes although the caller's dispatch marker
    /// aborted (the inner provider is told to proceed).
    pub fn active_write_ignores_abort(&self) {
        lock(&self.shared.marker).ignore_abort = true;
    }

    /// beginActiveWrite invokes the caller's marker, then fails with
    /// `error` (the inner provider's transaction is aborted, so nothing is
    /// published).
    pub fn active_write_fails_after_marker(&self, error: SandboxError) {
        lock(&self.shared.marker).error_after = Some(error);
    }

    /// Makes `operation` fail with `error` (after recording the call and
    /// passing its gate), without calling the inner provider.
    pub fn fail(&self, operation: impl Display, error: SandboxError) {
        lock(&self.shared.fail).insert(operation.to_string(), error);
    }

    /// Hides an optional member (`read_files`, `list_dir`,
    /// `list_project_dir`, `open_process`, `begin_active_write`,
    /// `resolve_image`, `cleanup_inventory`).
    pub fn hide(&self, member: Operation) {
        lock(&self.shared.hidden).insert(member.to_string());
    }

    /// Gates `operation` (or `<operation>_rollback`): the call waits on the
    /// gate.
    pub fn gate(&self, operation: impl Display) -> Gate {
        lock(&self.shared.gates)
            .entry(operation.to_string())
            .or_default()
            .clone()
    }

    /// How rollbacks behave from now on.
    pub fn set_rollback(&self, b: Behaviour) {
        lock(&self.shared.behaviours).insert(ROLLBACK, b);
    }

    /// How process waits behave from now on.
    pub fn set_process_wait(&self, b: Behaviour) {
        lock(&self.shared.behaviours).insert(PROCESS_WAIT, b);
    }

    /// How process destroys behave from now on.
    pub fn set_process_destroy(&self, b: Behaviour) {
        lock(&self.shared.behaviours).insert(PROCESS_DESTROY, b);
    }

    /// Every call, in order (`provision`, `provision_rollback`, ...).
    pub fn calls(&self) -> Vec<String> {
        lock(&self.shared.calls).clone()
    }

    /// How often `name` was called.
    pub fn count(&self, name: impl Display) -> usize {
        let name = name.to_string();
        lock(&self.shared.calls)
            .iter()
            .filter(|c| **c == name)
            .count()
    }

    /// Forgets the call log and the request log.
    pub fn clear_calls(&self) {
        lock(&self.shared.calls).clear();
        lock(&self.shared.requests).clear();
    }

    /// Every request of type `T` that reached `operation`, in order, as
    /// the inner provider received it (a call failed by [`Hooked::fail`]
    /// is not kept; beginActiveWrite keeps its `ActiveWriteRequest`).
    pub fn requests<T: Clone + 'static>(&self, operation: impl Display) -> Vec<T> {
        let operation = operation.to_string();
        lock(&self.shared.requests)
            .iter()
            .filter(|(o, _)| *o == operation)
            .filter_map(|(_, r)| r.downcast_ref::<T>().cloned())
            .collect()
    }

    /// Rollbacks started, over all operations.
    pub fn rollbacks(&self) -> usize {
        self.shared.rollbacks.load(Ordering::SeqCst)
    }

    /// Rollbacks that ran to completion (the inner provider's rollback
    /// answered `Ok`).
    pub fn rollbacks_done(&self) -> usize {
        self.shared.rollbacks_done.load(Ordering::SeqCst)
    }

    /// Process destroys started.
    pub fn process_destroys(&self) -> usize {
        self.shared.process_destroys.load(Ordering::SeqCst)
    }

    /// Process waits that reached the double.
    pub fn process_waits(&self) -> usize {
        self.shared.process_waits.load(Ordering::SeqCst)
    }
}
