//! A scripted test provider for the runtime's test suite.
//!
//! `Scripted` is an honest, minimal, in-memory implementation of every
//! member of the contract: it echoes each request exactly, keeps files in a
//! map, runs a handful of trivial commands, takes and clones snapshots, and
//! sweeps orphans. Per-operation hooks let a test make it break exactly one
//! rule (mutate a returned value, fail an operation, hide an optional
//! member, change its envelope after registration), and every call is
//! recorded so a test can assert the provider was *not* called when the
//! runtime refused first. Rollbacks are counted, and can fail, hang forever
//! or wait on a gate; any operation can wait on a gate too, so a test can
//! drop the caller's future while the provider call is pending.

// Each test file uses a different subset of this module.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Display;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::admission::is_within;
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};
use tokio::sync::Notify;

/// The provider id every scripted provider uses unless told otherwise.
pub const PROVIDER: &str = "scripted";
/// The instant the shared manual clock starts at.
pub const T0: &str = "2026-11-30T07:30:00.000Z";
/// The profile's derived image digest.
pub const PROFILE_DIGEST: &str =
    "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// The pinned root image.
pub const ROOT_IMAGE: &str =
    "fixture@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// A read-write project mount.
pub const PROJECT: &str = "/workspace/project";
/// A read-only data mount.
pub const DATA: &str = "/data";
/// A read-only mount nested inside the project mount.
pub const VENDOR: &str = "/workspace/project/vendor";
/// The fixed output tree.
pub const OUT: &str = "/mnt/session/outputs";

/// A timestamp from canonical text.
pub fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

/// The clock's start.
pub fn t0() -> Timestamp {
    ts(T0)
}

/// The every-token envelope: both network modes (enforced egress), both
/// retentions, snapshots and clones, every optional flag, 64 mounts, every
/// axis provider-enforced.
pub fn full_envelope() -> SandboxProviderCapabilities {
    let e = EnforcementLevel::ProviderEnforced;
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        }],
        image_mode: ImageMode::Profile,
        package_managers: vec![PackageManager::Apt],
        network_modes: vec![NetworkMode::None, NetworkMode::Allowlist],
        retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
        snapshots: true,
        snapshot_clone: true,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: true,
        physically_contained_file_read: true,
        active_mount_write: true,
        egress_certification: EgressCertification::Enforced,
        enforcement: Enforcement {
            filesystem: e,
            process: e,
            network: e,
            memory: e,
            cpu: e,
            pids: e,
            disk: e,
            duration: e,
            privilege: e,
        },
        max_mounts: 64,
        provider_revision: "scripted-rev-1".into(),
        materialization_revision: "scripted-mat-1".into(),
    }
}

/// A profile with network mode `none` and a 600 s command bound.
pub fn profile(retention: RetentionMode) -> SandboxProfile {
    SandboxProfile {
        profile_id: "profile-1".into(),
        profile_version: 3,
        profile_digest: Digest::parse(PROFILE_DIGEST).unwrap(),
        retention,
        network_policy: NetworkPolicy::None,
        max_duration_seconds: 600,
        resources: Resources::default(),
        packages: Vec::new(),
    }
}

/// The standard mount plan: a read-write project with a nested read-only
/// vendor directory, and a read-only data mount.
pub fn mounts() -> Vec<SandboxMount> {
    vec![
        SandboxMount {
            path: PROJECT.into(),
            access: MountAccess::ReadWrite,
        },
        SandboxMount {
            path: VENDOR.into(),
            access: MountAccess::ReadOnly,
        },
        SandboxMount {
            path: DATA.into(),
            access: MountAccess::ReadOnly,
        },
    ]
}

/// A provision request for `provider` with the standard plan, expiring an
/// hour after [`T0`].
pub fn request_for(provider: &str, retention: RetentionMode) -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: provider.into(),
        placement: Placement::Runner,
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        run_id: "run-1".into(),
        attempt_id: "attempt-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 7,
        target: Tier::Container,
        profile: profile(retention),
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: ImageReference::parse(ROOT_IMAGE).unwrap(),
        mounts: mounts(),
        expires_at: t0().add_seconds(3600),
    }
}

/// [`request_for`] the default provider id.
pub fn request(retention: RetentionMode) -> SandboxProvisionRequest {
    request_for(PROVIDER, retention)
}

/// A command that echoes its arguments.
pub fn echo(args: &[&str]) -> SandboxCommand {
    SandboxCommand {
        executable: "echo".into(),
        arguments: args.iter().map(|s| s.to_string()).collect(),
        working_directory: PROJECT.into(),
        environment: BTreeMap::new(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1024,
    }
}

/// A process request for `cat`.
pub fn process_request(instance_id: &str) -> SandboxProcessRequest {
    SandboxProcessRequest {
        instance_id: instance_id.into(),
        executable: "cat".into(),
        arguments: Vec::new(),
        working_directory: PROJECT.into(),
        environment: BTreeMap::new(),
    }
}

/// How a rollback (or a process destroy) behaves.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Undo and return `Ok`.
    Succeed,
    /// Return this error without undoing.
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

type Hook<T> = Box<dyn Fn(&mut T) + Send + Sync>;

#[derive(Default)]
struct Hooks {
    instance: HashMap<String, Hook<SandboxInstance>>,
    snapshot: HashMap<String, Hook<SandboxSnapshot>>,
    release: Option<Hook<ReleaseDisposition>>,
    command_result: Option<Hook<SandboxCommandResult>>,
    read_file: Option<Hook<SandboxFileContent>>,
    read_files: Option<Hook<ReadFilesResult>>,
    list_dir: Option<Hook<ListDirResult>>,
    list_project_dir: Option<Hook<ListProjectDirResult>>,
    evidence: Option<Hook<SandboxProcessEvidence>>,
    cleanup: Option<Hook<CleanupResult>>,
    active_write: Option<Hook<ActiveWriteOutcome>>,
    /// beginActiveWrite publishes without invoking the dispatch marker.
    active_write_skips_marker: bool,
    /// beginActiveWrite publishes although the marker aborted.
    active_write_ignores_abort: bool,
    /// beginActiveWrite fails with this error after the marker.
    active_write_error_after_marker: Option<SandboxError>,
}

#[derive(Default)]
struct Store {
    next: u64,
    instances: HashMap<String, (SandboxInstance, Timestamp)>,
    files: BTreeMap<(String, String), Vec<u8>>,
    snapshots: HashMap<String, (SandboxSnapshot, BTreeMap<String, Vec<u8>>)>,
}

/// The shared state of a scripted provider (rollbacks and process controls
/// hold it too).
pub struct Inner {
    id: String,
    clock: ManualClock,
    envelope: Mutex<SandboxProviderCapabilities>,
    store: Mutex<Store>,
    hooks: Mutex<Hooks>,
    fail: Mutex<HashMap<String, SandboxError>>,
    hidden: Mutex<HashSet<String>>,
    gates: Mutex<HashMap<String, Gate>>,
    calls: Mutex<Vec<String>>,
    read_file_requests: Mutex<Vec<ReadFileRequest>>,
    write_file_requests: Mutex<Vec<WriteFileRequest>>,
    read_files_requests: Mutex<Vec<ReadFilesRequest>>,
    cleanup_requests: Mutex<Vec<CleanupRequest>>,
    rollback: Mutex<Behaviour>,
    process_destroy: Mutex<Behaviour>,
    process_wait: Mutex<Behaviour>,
    /// Rollbacks started, over all operations.
    pub rollbacks: Arc<AtomicUsize>,
    /// Rollbacks that ran to completion (undid their allocation).
    pub rollbacks_done: Arc<AtomicUsize>,
    /// Process destroys started.
    pub process_destroys: Arc<AtomicUsize>,
    /// Process waits that reached the provider.
    pub process_waits: Arc<AtomicUsize>,
}

/// The scripted provider. Hold it as `Arc<Scripted>`; it registers as
/// `Arc<dyn SandboxProvider>`.
pub struct Scripted(Arc<Inner>);

impl std::ops::Deref for Scripted {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Scripted {
    /// A provider with the full envelope on `clock`.
    pub fn new(clock: ManualClock) -> Arc<Self> {
        Self::with(PROVIDER, clock, full_envelope())
    }

    /// A provider with this id, clock and envelope.
    pub fn with(id: &str, clock: ManualClock, envelope: SandboxProviderCapabilities) -> Arc<Self> {
        Arc::new(Scripted(Arc::new(Inner {
            id: id.into(),
            clock,
            envelope: Mutex::new(envelope),
            store: Mutex::default(),
            hooks: Mutex::default(),
            fail: Mutex::default(),
            hidden: Mutex::default(),
            gates: Mutex::default(),
            calls: Mutex::default(),
            read_file_requests: Mutex::default(),
            write_file_requests: Mutex::default(),
            read_files_requests: Mutex::default(),
            cleanup_requests: Mutex::default(),
            rollback: Mutex::new(Behaviour::Succeed),
            process_destroy: Mutex::new(Behaviour::Succeed),
            process_wait: Mutex::new(Behaviour::Succeed),
            rollbacks: Arc::default(),
            rollbacks_done: Arc::default(),
            process_destroys: Arc::default(),
            process_waits: Arc::default(),
        })))
    }
}

impl Inner {
    /// Changes the envelope `capabilities()` reports from now on.
    pub fn set_envelope(&self, f: impl FnOnce(&mut SandboxProviderCapabilities)) {
        f(&mut lock(&self.envelope));
    }

    /// Mutates every instance `operation` (provision / activate / resume)
    /// returns.
    pub fn on_instance(
        &self,
        operation: impl Display,
        f: impl Fn(&mut SandboxInstance) + Send + Sync + 'static,
    ) {
        lock(&self.hooks)
            .instance
            .insert(operation.to_string(), Box::new(f));
    }

    /// Mutates every snapshot `operation` (snapshot / clone_snapshot /
    /// release) returns.
    pub fn on_snapshot(
        &self,
        operation: impl Display,
        f: impl Fn(&mut SandboxSnapshot) + Send + Sync + 'static,
    ) {
        lock(&self.hooks)
            .snapshot
            .insert(operation.to_string(), Box::new(f));
    }

    /// Mutates every release disposition.
    pub fn on_release(&self, f: impl Fn(&mut ReleaseDisposition) + Send + Sync + 'static) {
        lock(&self.hooks).release = Some(Box::new(f));
    }

    /// Mutates every command result.
    pub fn on_command_result(&self, f: impl Fn(&mut SandboxCommandResult) + Send + Sync + 'static) {
        lock(&self.hooks).command_result = Some(Box::new(f));
    }

    /// Mutates every readFile result.
    pub fn on_read_file(&self, f: impl Fn(&mut SandboxFileContent) + Send + Sync + 'static) {
        lock(&self.hooks).read_file = Some(Box::new(f));
    }

    /// Mutates every readFiles result.
    pub fn on_read_files(&self, f: impl Fn(&mut ReadFilesResult) + Send + Sync + 'static) {
        lock(&self.hooks).read_files = Some(Box::new(f));
    }

    /// Mutates every listDir result.
    pub fn on_list_dir(&self, f: impl Fn(&mut ListDirResult) + Send + Sync + 'static) {
        lock(&self.hooks).list_dir = Some(Box::new(f));
    }

    /// Mutates every listProjectDir result.
    pub fn on_list_project_dir(
        &self,
        f: impl Fn(&mut ListProjectDirResult) + Send + Sync + 'static,
    ) {
        lock(&self.hooks).list_project_dir = Some(Box::new(f));
    }

    /// Mutates every process's evidence.
    pub fn on_evidence(&self, f: impl Fn(&mut SandboxProcessEvidence) + Send + Sync + 'static) {
        lock(&self.hooks).evidence = Some(Box::new(f));
    }

    /// Mutates every cleanup result.
    pub fn on_cleanup(&self, f: impl Fn(&mut CleanupResult) + Send + Sync + 'static) {
        lock(&self.hooks).cleanup = Some(Box::new(f));
    }

    /// beginActiveWrite publishes without invoking the dispatch marker.
    pub fn active_write_skips_marker(&self) {
        lock(&self.hooks).active_write_skips_marker = true;
    }

    /// beginActiveWrite publishes although the dispatch marker aborted.
    pub fn active_write_ignores_abort(&self) {
        lock(&self.hooks).active_write_ignores_abort = true;
    }

    /// beginActiveWrite fails with `error` after invoking the marker.
    pub fn active_write_fails_after_marker(&self, error: SandboxError) {
        lock(&self.hooks).active_write_error_after_marker = Some(error);
    }

    /// Mutates every beginActiveWrite outcome.
    pub fn on_active_write(&self, f: impl Fn(&mut ActiveWriteOutcome) + Send + Sync + 'static) {
        lock(&self.hooks).active_write = Some(Box::new(f));
    }

    /// Makes `operation` fail with `error` (after recording the call).
    pub fn fail(&self, operation: impl Display, error: SandboxError) {
        lock(&self.fail).insert(operation.to_string(), error);
    }

    /// Hides an optional member (`read_files`, `list_dir`,
    /// `list_project_dir`, `open_process`, `begin_active_write`).
    pub fn hide(&self, member: Operation) {
        lock(&self.hidden).insert(member.to_string());
    }

    /// Gates `operation` (or `<op>_rollback`): the call waits on the gate.
    pub fn gate(&self, operation: impl Display) -> Gate {
        lock(&self.gates)
            .entry(operation.to_string())
            .or_default()
            .clone()
    }

    /// How rollbacks behave from now on.
    pub fn set_rollback(&self, b: Behaviour) {
        *lock(&self.rollback) = b;
    }

    /// How process waits behave from now on.
    pub fn set_process_wait(&self, b: Behaviour) {
        *lock(&self.process_wait) = b;
    }

    /// How process destroys behave from now on.
    pub fn set_process_destroy(&self, b: Behaviour) {
        *lock(&self.process_destroy) = b;
    }

    /// Every call, in order (`provision`, `provision_rollback`, ...).
    pub fn calls(&self) -> Vec<String> {
        lock(&self.calls).clone()
    }

    /// How often `name` was called.
    pub fn count(&self, name: impl Display) -> usize {
        let name = name.to_string();
        lock(&self.calls).iter().filter(|c| **c == name).count()
    }

    /// Forgets the call log.
    pub fn clear_calls(&self) {
        lock(&self.calls).clear();
    }

    /// Every writeFile request seen, as the provider received it.
    pub fn write_file_requests(&self) -> Vec<WriteFileRequest> {
        lock(&self.write_file_requests).clone()
    }

    /// Every readFile request seen.
    pub fn read_file_requests(&self) -> Vec<ReadFileRequest> {
        lock(&self.read_file_requests).clone()
    }

    /// Every readFiles request seen.
    pub fn read_files_requests(&self) -> Vec<ReadFilesRequest> {
        lock(&self.read_files_requests).clone()
    }

    /// Every cleanup request seen.
    pub fn cleanup_requests(&self) -> Vec<CleanupRequest> {
        lock(&self.cleanup_requests).clone()
    }

    /// Instance ids the provider holds.
    pub fn instance_ids(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.store).instances.keys().cloned().collect();
        v.sort();
        v
    }

    /// Snapshot ids the provider holds.
    pub fn snapshot_ids(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.store).snapshots.keys().cloned().collect();
        v.sort();
        v
    }

    /// The state the provider holds for `instance_id`.
    pub fn state_of(&self, instance_id: &str) -> Option<InstanceState> {
        lock(&self.store)
            .instances
            .get(instance_id)
            .map(|(i, _)| i.state)
    }

    /// Puts a file straight into the provider's store (workload output).
    pub fn put_file(&self, instance_id: &str, path: &str, content: &[u8]) {
        lock(&self.store)
            .files
            .insert((instance_id.into(), path.into()), content.to_vec());
    }

    /// A file from the provider's store.
    pub fn file(&self, instance_id: &str, path: &str) -> Option<Vec<u8>> {
        lock(&self.store)
            .files
            .get(&(instance_id.to_owned(), path.to_owned()))
            .cloned()
    }

    async fn enter(&self, operation: Operation) -> Result<(), SandboxError> {
        let operation = operation.to_string();
        lock(&self.calls).push(operation.clone());
        let gate = lock(&self.gates).get(&operation).cloned();
        if let Some(g) = gate {
            g.entered.notify_one();
            g.proceed.notified().await;
        }
        match lock(&self.fail).get(&operation) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn next_id(&self, prefix: &str) -> String {
        let mut s = lock(&self.store);
        s.next += 1;
        format!("{prefix}-{}", s.next)
    }

    fn instance_from(
        &self,
        id: &str,
        r: &SandboxProvisionRequest,
        state: InstanceState,
    ) -> SandboxInstance {
        let env = lock(&self.envelope).clone();
        SandboxInstance {
            instance_id: id.into(),
            provider: r.provider.clone(),
            placement: r.placement,
            state,
            workspace_id: r.workspace_id.clone(),
            session_id: r.session_id.clone(),
            run_id: r.run_id.clone(),
            attempt_id: r.attempt_id.clone(),
            lease_id: r.lease_id.clone(),
            lease_epoch: r.lease_epoch,
            target: r.target,
            profile: r.profile.clone(),
            platform: r.platform,
            root_image: r.root_image.clone(),
            mounts: r.mounts.clone(),
            output_path: OUT.into(),
            expires_at: r.expires_at,
            materialization: Materialization {
                profile_digest: r.profile.profile_digest.clone(),
                image_reference: r.root_image.clone(),
                image_digest: r.root_image.digest(),
                provider_revision: env.provider_revision,
                materialization_revision: env.materialization_revision,
            },
        }
    }

    fn hook_instance(&self, operation: Operation, i: &mut SandboxInstance) {
        if let Some(h) = lock(&self.hooks).instance.get(&operation.to_string()) {
            h(i);
        }
    }

    fn hook_snapshot(&self, operation: Operation, s: &mut SandboxSnapshot) {
        if let Some(h) = lock(&self.hooks).snapshot.get(&operation.to_string()) {
            h(s);
        }
    }

    fn require(
        &self,
        operation: Operation,
        instance_id: &str,
        state: InstanceState,
    ) -> Result<SandboxInstance, SandboxError> {
        let store = lock(&self.store);
        let Some((i, _)) = store.instances.get(instance_id) else {
            return Err(SandboxError::SandboxInstanceNotFound {
                instance_id: instance_id.into(),
            });
        };
        if i.state != state {
            return Err(SandboxError::conflict(operation, state.as_str(), i.state));
        }
        Ok(i.clone())
    }

    fn handoff<T>(self: &Arc<Self>, operation: Operation, value: T, undo: Undo) -> Handoff<T> {
        Handoff {
            value,
            rollback: Arc::new(ScriptedRollback {
                inner: self.clone(),
                operation,
                undo,
            }),
        }
    }

    fn files_under(&self, instance_id: &str, root: &str) -> Vec<(String, Vec<u8>)> {
        lock(&self.store)
            .files
            .iter()
            .filter(|((i, p), _)| i == instance_id && is_within(p, root) && p != root)
            .map(|((_, p), c)| (p.clone(), c.clone()))
            .collect()
    }

    fn read_one(&self, instance_id: &str, path: &str, root: &str, max: u64) -> ReadFileOutcome {
        if !is_within(path, root) {
            return ReadFileOutcome::OutsideRoot { path: path.into() };
        }
        match self.file(instance_id, path) {
            None => ReadFileOutcome::NotFound { path: path.into() },
            Some(c) if c.len() as u64 > max => ReadFileOutcome::TooLarge {
                path: path.into(),
                size_bytes: c.len() as u64,
            },
            Some(c) => ReadFileOutcome::Read {
                path: path.into(),
                content_base64: Bytes(c),
            },
        }
    }
}

/// What a rollback undoes, from the provider's own record (never from the
/// returned value).
#[derive(Debug, Clone)]
enum Undo {
    RemoveInstance(String),
    Deactivate(String),
    RemoveSnapshot(String),
    Nothing,
}

struct ScriptedRollback {
    inner: Arc<Inner>,
    operation: Operation,
    undo: Undo,
}

#[async_trait]
impl Rollback for ScriptedRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        let name = format!("{}_rollback", self.operation);
        self.inner.rollbacks.fetch_add(1, Ordering::SeqCst);
        lock(&self.inner.calls).push(name.clone());
        let gate = lock(&self.inner.gates).get(&name).cloned();
        if let Some(g) = gate {
            g.entered.notify_one();
            g.proceed.notified().await;
        }
        let behaviour = lock(&self.inner.rollback).clone();
        match behaviour {
            Behaviour::Hang => std::future::pending::<()>().await,
            Behaviour::Fail(e) => return Err(e),
            Behaviour::Succeed => {}
        }
        {
            let mut s = lock(&self.inner.store);
            match &self.undo {
                Undo::RemoveInstance(id) => {
                    s.instances.remove(id);
                    s.files.retain(|(i, _), _| i != id);
                }
                Undo::Deactivate(id) => {
                    if let Some((i, _)) = s.instances.get_mut(id) {
                        i.state = InstanceState::Provisioning;
                    }
                }
                Undo::RemoveSnapshot(id) => {
                    s.snapshots.remove(id);
                }
                Undo::Nothing => {}
            }
        }
        self.inner.rollbacks_done.fetch_add(1, Ordering::SeqCst);
        lock(&self.inner.calls).push(format!("{name}_done"));
        Ok(())
    }
}

struct Control {
    inner: Arc<Inner>,
}

#[async_trait]
impl ProcessControl for Control {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        self.inner.process_waits.fetch_add(1, Ordering::SeqCst);
        let behaviour = lock(&self.inner.process_wait).clone();
        match behaviour {
            Behaviour::Hang => std::future::pending::<()>().await,
            Behaviour::Fail(e) => return Err(e),
            Behaviour::Succeed => {}
        }
        Ok(ProcessExit::ExitCode(0))
    }
    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        let name = serde_json::to_value(signal).unwrap();
        lock(&self.inner.calls).push(format!("process_signal {}", name.as_str().unwrap()));
        Ok(())
    }
    async fn destroy(&self) -> Result<(), SandboxError> {
        self.inner.process_destroys.fetch_add(1, Ordering::SeqCst);
        lock(&self.inner.calls).push("process_destroy".into());
        let behaviour = lock(&self.inner.process_destroy).clone();
        match behaviour {
            Behaviour::Hang => std::future::pending::<()>().await,
            Behaviour::Fail(e) => return Err(e),
            Behaviour::Succeed => {}
        }
        Ok(())
    }
}

fn hidden(inner: &Inner, member: Operation) -> bool {
    let member = member.to_string();
    lock(&inner.hidden).contains(&member)
}

#[async_trait]
impl SandboxProvider for Scripted {
    fn provider_id(&self) -> &str {
        &self.id
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        lock(&self.envelope).clone()
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.enter(op::PROVISION).await?;
        let id = self.next_id("inst");
        let honest = self.instance_from(&id, &request, InstanceState::Provisioning);
        lock(&self.store)
            .instances
            .insert(id.clone(), (honest.clone(), self.clock.now()));
        let mut returned = honest;
        self.hook_instance(op::PROVISION, &mut returned);
        Ok(self
            .0
            .handoff(op::PROVISION, returned, Undo::RemoveInstance(id)))
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        self.enter(op::WRITE_FILE).await?;
        lock(&self.write_file_requests).push(request.clone());
        if !lock(&self.store)
            .instances
            .contains_key(&request.instance_id)
        {
            return Err(SandboxError::SandboxInstanceNotFound {
                instance_id: request.instance_id,
            });
        }
        self.put_file(
            &request.instance_id,
            &request.path.display(),
            request.content_base64.as_slice(),
        );
        Ok(())
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.enter(op::ACTIVATE).await?;
        self.require(
            op::ACTIVATE,
            &request.instance_id,
            InstanceState::Provisioning,
        )?;
        let honest = {
            let mut s = lock(&self.store);
            let (i, _) = s.instances.get_mut(&request.instance_id).unwrap();
            i.state = InstanceState::Active;
            i.clone()
        };
        let mut returned = honest;
        self.hook_instance(op::ACTIVATE, &mut returned);
        Ok(self.0.handoff(
            op::ACTIVATE,
            returned,
            Undo::Deactivate(request.instance_id),
        ))
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        self.enter(op::EXECUTE).await?;
        self.require(op::EXECUTE, &request.instance_id, InstanceState::Active)?;
        let c = &request.command;
        let (exit, stdout) = match c.executable.as_str() {
            "echo" => (
                ExitCause::ExitCode(0),
                format!("{}\n", c.arguments.join(" ")).into_bytes(),
            ),
            "true" => (ExitCause::ExitCode(0), Vec::new()),
            "false" => (ExitCause::ExitCode(1), Vec::new()),
            "cat" => match c
                .arguments
                .first()
                .and_then(|p| self.file(&request.instance_id, p))
            {
                Some(content) => (ExitCause::ExitCode(0), content),
                None => (ExitCause::ExitCode(1), Vec::new()),
            },
            _ => (ExitCause::ExitCode(127), Vec::new()),
        };
        if stdout.len() as u64 > c.output_limit_bytes {
            return Err(SandboxError::SandboxOutputLimitExceeded {
                stream: OutputStream::Stdout,
                limit_bytes: c.output_limit_bytes,
            });
        }
        let now = self.clock.now();
        let mut result = SandboxCommandResult {
            exit,
            stdout_base64: Bytes(stdout),
            stderr_base64: Bytes::default(),
            started_at: now,
            finished_at: now,
        };
        if let Some(h) = &lock(&self.hooks).command_result {
            h(&mut result);
        }
        Ok(result)
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        self.enter(op::READ_FILE).await?;
        lock(&self.read_file_requests).push(request.clone());
        self.require(op::READ_FILE, &request.instance_id, InstanceState::Active)?;
        let outcome = self.read_one(
            &request.instance_id,
            &request.path.display(),
            &request.allowed_root,
            request.maximum_bytes,
        );
        let mut content = match outcome {
            ReadFileOutcome::Read {
                path,
                content_base64,
            } => SandboxFileContent {
                path,
                content_base64,
            },
            ReadFileOutcome::NotFound { .. } => {
                return Err(SandboxError::failed(
                    op::READ_FILE,
                    FailureReason::NotFound,
                    request.path,
                ))
            }
            ReadFileOutcome::OutsideRoot { .. } => {
                return Err(SandboxError::failed(
                    op::READ_FILE,
                    FailureReason::OutsideRoot,
                    request.path,
                ))
            }
            ReadFileOutcome::NotRegularFile { .. } => {
                return Err(SandboxError::failed(
                    op::READ_FILE,
                    FailureReason::NotRegularFile,
                    request.path,
                ))
            }
            ReadFileOutcome::TooLarge { path, size_bytes } => {
                return Err(SandboxError::SandboxFileTooLarge {
                    path: path.display(),
                    limit_bytes: request.maximum_bytes,
                    actual_bytes: size_bytes,
                })
            }
        };
        if let Some(h) = &lock(&self.hooks).read_file {
            h(&mut content);
        }
        Ok(content)
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.enter(op::SNAPSHOT).await?;
        let source = self.require(op::SNAPSHOT, &request.instance_id, InstanceState::Active)?;
        let id = self.next_id("snap");
        let honest = SandboxSnapshot {
            snapshot_id: id.clone(),
            provider: source.provider.clone(),
            placement: source.placement,
            source_instance_id: source.instance_id.clone(),
            workspace_id: source.workspace_id.clone(),
            session_id: source.session_id.clone(),
            profile_id: source.profile.profile_id.clone(),
            profile_version: source.profile.profile_version,
            profile_digest: source.profile.profile_digest.clone(),
            created_at: self.clock.now(),
            expires_at: request.expires_at,
        };
        let files = self
            .files_under(&source.instance_id, "/")
            .into_iter()
            .collect();
        lock(&self.store)
            .snapshots
            .insert(id.clone(), (honest.clone(), files));
        let mut returned = honest;
        self.hook_snapshot(op::SNAPSHOT, &mut returned);
        Ok(self
            .0
            .handoff(op::SNAPSHOT, returned, Undo::RemoveSnapshot(id)))
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.enter(op::CLONE_SNAPSHOT).await?;
        let Some((_, files)) = lock(&self.store)
            .snapshots
            .get(&request.source.snapshot_id)
            .cloned()
        else {
            return Err(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: request.source.snapshot_id,
            });
        };
        let id = self.next_id("snap");
        let honest = SandboxSnapshot {
            snapshot_id: id.clone(),
            session_id: request.target_session_id.clone(),
            created_at: self.clock.now().max(request.source.created_at),
            ..request.source.clone()
        };
        lock(&self.store)
            .snapshots
            .insert(id.clone(), (honest.clone(), files));
        let mut returned = honest;
        self.hook_snapshot(op::CLONE_SNAPSHOT, &mut returned);
        Ok(self
            .0
            .handoff(op::CLONE_SNAPSHOT, returned, Undo::RemoveSnapshot(id)))
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.enter(op::RELEASE).await?;
        let source = self.require(op::RELEASE, &request.instance_id, InstanceState::Active)?;
        let (mut disposition, undo) = match (source.profile.retention, request.snapshot_expires_at)
        {
            (RetentionMode::Durable, Some(expires_at)) => {
                let id = self.next_id("snap");
                let mut snapshot = SandboxSnapshot {
                    snapshot_id: id.clone(),
                    provider: source.provider.clone(),
                    placement: source.placement,
                    source_instance_id: source.instance_id.clone(),
                    workspace_id: source.workspace_id.clone(),
                    session_id: source.session_id.clone(),
                    profile_id: source.profile.profile_id.clone(),
                    profile_version: source.profile.profile_version,
                    profile_digest: source.profile.profile_digest.clone(),
                    created_at: self.clock.now(),
                    expires_at,
                };
                let files = self
                    .files_under(&source.instance_id, "/")
                    .into_iter()
                    .collect();
                lock(&self.store)
                    .snapshots
                    .insert(id.clone(), (snapshot.clone(), files));
                self.hook_snapshot(op::RELEASE, &mut snapshot);
                (
                    ReleaseDisposition::Released { snapshot },
                    Undo::RemoveSnapshot(id),
                )
            }
            _ => (ReleaseDisposition::Destroyed, Undo::Nothing),
        };
        {
            let mut s = lock(&self.store);
            s.instances.remove(&source.instance_id);
            s.files.retain(|(i, _), _| *i != source.instance_id);
        }
        if let Some(h) = &lock(&self.hooks).release {
            h(&mut disposition);
        }
        Ok(self.0.handoff(op::RELEASE, disposition, undo))
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.enter(op::RESUME).await?;
        let Some((_, files)) = lock(&self.store)
            .snapshots
            .get(&request.snapshot.snapshot_id)
            .cloned()
        else {
            return Err(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: request.snapshot.snapshot_id,
            });
        };
        let id = self.next_id("inst");
        let honest = self.instance_from(&id, &request.request, InstanceState::Active);
        {
            let mut s = lock(&self.store);
            s.instances
                .insert(id.clone(), (honest.clone(), self.clock.now()));
            for (p, c) in files {
                s.files.insert((id.clone(), p), c);
            }
        }
        let mut returned = honest;
        self.hook_instance(op::RESUME, &mut returned);
        Ok(self
            .0
            .handoff(op::RESUME, returned, Undo::RemoveInstance(id)))
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.enter(op::DESTROY).await?;
        let mut s = lock(&self.store);
        s.instances.remove(&request.instance_id);
        s.files.retain(|(i, _), _| *i != request.instance_id);
        Ok(())
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.enter(op::DESTROY_SNAPSHOT).await?;
        lock(&self.store).snapshots.remove(&request.snapshot_id);
        Ok(())
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.enter(op::CLEANUP).await?;
        lock(&self.cleanup_requests).push(request.clone());
        let mut result = CleanupResult::default();
        {
            let mut s = lock(&self.store);
            let mut gone: Vec<String> = s
                .instances
                .iter()
                .filter(|(_, (i, created))| {
                    request.sweeps_instance(Some(*created), Some(i.expires_at))
                })
                .map(|(id, _)| id.clone())
                .collect();
            gone.sort();
            for id in &gone {
                s.instances.remove(id);
                s.files.retain(|(i, _), _| i != id);
            }
            result.instances = gone;
            let mut swept: Vec<String> = s
                .snapshots
                .iter()
                .filter(|(id, (snap, _))| {
                    request.sweeps_snapshot(id, Some(snap.created_at), Some(snap.expires_at))
                })
                .map(|(id, _)| id.clone())
                .collect();
            swept.sort();
            for id in &swept {
                s.snapshots.remove(id);
            }
            result.snapshots = swept;
        }
        if let Some(h) = &lock(&self.hooks).cleanup {
            h(&mut result);
        }
        Ok(result)
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        (!hidden(self, op::READ_FILES)).then_some(self as &dyn ReadFilesMember)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        (!hidden(self, op::LIST_DIR)).then_some(self as &dyn ListDirMember)
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        (!hidden(self, op::LIST_PROJECT_DIR)).then_some(self as &dyn ListProjectDirMember)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        (!hidden(self, op::OPEN_PROCESS)).then_some(self as &dyn OpenProcessMember)
    }

    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        (!hidden(self, op::BEGIN_ACTIVE_WRITE)).then_some(self as &dyn ActiveWriteMember)
    }
}

#[async_trait]
impl ReadFilesMember for Scripted {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        self.enter(op::READ_FILES).await?;
        lock(&self.read_files_requests).push(request.clone());
        self.require(op::READ_FILES, &request.instance_id, InstanceState::Active)?;
        let mut result = ReadFilesResult {
            files: request
                .files
                .iter()
                .map(|f| {
                    self.read_one(
                        &request.instance_id,
                        &f.path.display(),
                        &request.allowed_root,
                        f.maximum_bytes,
                    )
                })
                .collect(),
        };
        if let Some(h) = &lock(&self.hooks).read_files {
            h(&mut result);
        }
        Ok(result)
    }
}

fn sha256(bytes: &[u8]) -> Digest {
    use sha2::Digest as _;
    Digest::from_sha256_bytes(sha2::Sha256::digest(bytes).into())
}

#[async_trait]
impl ListDirMember for Scripted {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        self.enter(op::LIST_DIR).await?;
        self.require(op::LIST_DIR, &request.instance_id, InstanceState::Active)?;
        let mut result = ListDirResult {
            entries: self
                .files_under(&request.instance_id, &request.root)
                .into_iter()
                .take(request.max_entries as usize)
                .map(|(path, c)| DirEntry {
                    path: path.into(),
                    size_bytes: c.len() as u64,
                    sha256: Some(sha256(&c)),
                    mode: None,
                })
                .collect(),
        };
        if let Some(h) = &lock(&self.hooks).list_dir {
            h(&mut result);
        }
        Ok(result)
    }
}

#[async_trait]
impl ListProjectDirMember for Scripted {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        self.enter(op::LIST_PROJECT_DIR).await?;
        self.require(
            op::LIST_PROJECT_DIR,
            &request.instance_id,
            InstanceState::Active,
        )?;
        let mut result = ListProjectDirResult {
            entries: self
                .files_under(&request.instance_id, &request.root)
                .into_iter()
                .take(request.max_entries as usize)
                .map(|(path, c)| ProjectEntry {
                    path: path.into(),
                    kind: ProjectEntryKind::Regular {
                        size_bytes: c.len() as u64,
                        sha256: sha256(&c),
                    },
                })
                .collect(),
            complete: true,
        };
        if let Some(h) = &lock(&self.hooks).list_project_dir {
            h(&mut result);
        }
        Ok(result)
    }
}

#[async_trait]
impl OpenProcessMember for Scripted {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        self.enter(op::OPEN_PROCESS).await?;
        let instance = self.require(
            op::OPEN_PROCESS,
            &request.instance_id,
            InstanceState::Active,
        )?;
        let mut evidence = SandboxProcessEvidence {
            provider: instance.provider.clone(),
            instance_id: instance.instance_id.clone(),
            session_id: instance.session_id.clone(),
            placement: instance.placement,
            tier: instance.target,
            network_mode: instance.profile.network_policy.mode(),
            executable: request.executable.clone(),
            started_at: self.clock.now(),
        };
        if let Some(h) = &lock(&self.hooks).evidence {
            h(&mut evidence);
        }
        Ok(SandboxProcess {
            input: Box::pin(futures::io::sink()),
            output: Box::pin(futures::io::Cursor::new(b"hello\n".to_vec())),
            error: Box::pin(futures::io::empty()),
            control: Arc::new(Control {
                inner: self.0.clone(),
            }),
            evidence,
        })
    }
}

#[async_trait]
impl ActiveWriteMember for Scripted {
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        self.enter(op::BEGIN_ACTIVE_WRITE).await?;
        let (skips, ignores) = {
            let h = lock(&self.hooks);
            (h.active_write_skips_marker, h.active_write_ignores_abort)
        };
        if !skips {
            if let Err(e) = transaction.mark_dispatched().await {
                if !ignores {
                    return Ok(ActiveWriteOutcome::RolledBack {
                        transaction_id: transaction.request().transaction_id.clone(),
                        reason: format!("aborted at the dispatch marker: {e}"),
                    });
                }
            }
        }
        if let Some(e) = lock(&self.hooks).active_write_error_after_marker.clone() {
            return Err(e);
        }
        let request = transaction.into_request();
        let instance = self.require(
            op::BEGIN_ACTIVE_WRITE,
            &request.instance_id,
            InstanceState::Active,
        )?;
        let first = request
            .files
            .first()
            .map(|f| f.path.clone())
            .unwrap_or_default();
        let mount_path = instance
            .mounts
            .iter()
            .filter(|m| is_within(&first, &m.path))
            .max_by_key(|m| m.path.len())
            .map(|m| m.path.clone())
            .unwrap_or_default();
        for f in &request.files {
            self.put_file(&request.instance_id, &f.path, f.content_base64.as_slice());
        }
        let mut outcome = ActiveWriteOutcome::Committed {
            transaction_id: request.transaction_id.clone(),
            mount_path,
            published: request.files.iter().map(|f| f.path.clone()).collect(),
        };
        if let Some(h) = &lock(&self.hooks).active_write {
            h(&mut outcome);
        }
        Ok(outcome)
    }
}

/// A runtime with one scripted provider registered, on a shared clock.
pub struct Harness {
    /// The provider.
    pub provider: Arc<Scripted>,
    /// The runtime.
    pub runtime: SandboxRuntime,
    /// The provider's adapter.
    pub adapter: Adapter,
    /// The shared clock, standing at [`T0`].
    pub clock: ManualClock,
}

impl Harness {
    /// A harness over the full envelope.
    pub fn new() -> Self {
        Self::with_envelope(full_envelope())
    }

    /// A harness over `envelope`.
    pub fn with_envelope(envelope: SandboxProviderCapabilities) -> Self {
        let clock = ManualClock::new(t0());
        let provider = Scripted::with(PROVIDER, clock.clone(), envelope);
        let mut runtime = SandboxRuntime::new(Arc::new(clock.clone()));
        runtime.register(provider.clone());
        let adapter = runtime.adapter(PROVIDER).unwrap();
        Harness {
            provider,
            runtime,
            adapter,
            clock,
        }
    }

    /// A provisioned instance (standard request).
    pub async fn provisioned(&self, retention: RetentionMode) -> SandboxInstance {
        self.adapter.provision(request(retention)).await.unwrap()
    }

    /// An active instance (standard request), with the call log cleared.
    pub async fn active(&self, retention: RetentionMode) -> SandboxInstance {
        let i = self.provisioned(retention).await;
        let a = self.adapter.activate(&i.instance_id).await.unwrap();
        self.provider.clear_calls();
        a
    }

    /// A snapshot of a fresh durable active instance, with the call log
    /// cleared.
    pub async fn snapshot(&self) -> (SandboxInstance, SandboxSnapshot) {
        let i = self.active(RetentionMode::Durable).await;
        let s = self
            .adapter
            .snapshot(&i.instance_id, t0().add_seconds(86_400))
            .await
            .unwrap();
        self.provider.clear_calls();
        (i, s)
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

/// The only cause of `f`.
#[track_caller]
pub fn only(f: &SandboxFailure) -> &SandboxError {
    assert_eq!(f.cause_count(), 1, "expected exactly one cause: {f}");
    f.error()
}

/// Asserts `e` is `SandboxProtocolInvalid{operation, field, expected, actual}`.
#[track_caller]
pub fn assert_protocol(
    e: &SandboxError,
    operation: Operation,
    field: &str,
    expected: &str,
    actual: &str,
) {
    assert_eq!(
        e,
        &SandboxError::protocol(operation, field, expected, actual),
        "{e}"
    );
}

/// Asserts `e` is `SandboxOperationFailed{operation, invalid_request, field,
/// expected, actual}`.
#[track_caller]
pub fn assert_invalid(
    e: &SandboxError,
    operation: Operation,
    field: &str,
    expected: &str,
    actual: &str,
) {
    assert_eq!(
        e,
        &SandboxError::invalid_request(operation, field, expected, actual),
        "{e}"
    );
}

/// Asserts `e` is `SandboxLifecycleConflict{operation, expected, actual}`.
#[track_caller]
pub fn assert_conflict(
    e: &SandboxError,
    operation: Operation,
    expected: &str,
    actual: ConflictActual,
) {
    assert_eq!(
        e,
        &SandboxError::conflict(operation, expected, actual),
        "{e}"
    );
}

/// Asserts `e` is `SandboxCapabilityUnavailable{requirement}`.
#[track_caller]
pub fn assert_unavailable(e: &SandboxError, requirement: Requirement) {
    match e {
        SandboxError::SandboxCapabilityUnavailable { requirement: r, .. } => {
            assert_eq!(*r, requirement, "{e}")
        }
        other => panic!("expected SandboxCapabilityUnavailable{{{requirement}}}, got {other}"),
    }
}

/// Asserts `e` is `SandboxOperationFailed{operation, reason}`.
#[track_caller]
pub fn assert_failed(e: &SandboxError, operation: Operation, reason: FailureReason) {
    match e {
        SandboxError::SandboxOperationFailed {
            operation: o,
            reason: r,
            ..
        } => {
            assert_eq!(*o, operation, "{e}");
            assert_eq!(*r, reason, "{e}");
        }
        other => panic!("expected SandboxOperationFailed{{{operation}, {reason:?}}}, got {other}"),
    }
}
