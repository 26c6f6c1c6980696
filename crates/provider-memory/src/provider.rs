//! [`MemoryProvider`]: the eighteen members over per-instance in-memory
//! trees, a simulated network and a virtual clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::bounds::{
    CONTROL_ROOT, MAX_FILE_BYTES, MAX_OUTPUT_LIMIT_BYTES, OUTPUT_PATH,
};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use sha2::{Digest as _, Sha256};
use tokio_util::compat::TokioAsyncReadCompatExt;

use crate::fault::{Fault, IdentityField};

mod active_write;
use crate::fs::{is_within, split, Fs, FsNode, ReadRefusal, SpecialKind, WalkError};
use crate::probe::{base_environment, Abort, Exec, NetView, Sink};
use crate::process::{
    cat_redirect_target, ignored_signals, spawn_child, Appender, CatSource, ChildPipes, Control,
    Plan, ProcessShared, PIPE_CAPACITY_BYTES,
};

/// The provider id every instance and snapshot of the oracle carries.
pub const PROVIDER_ID: &str = "memory";

/// The oracle's `provider_revision`; instances echo it in `materialization`.
pub const PROVIDER_REVISION: &str = "memory-oracle/1";

/// The oracle's `materialization_revision`; instances echo it in
/// `materialization`.
pub const MATERIALIZATION_REVISION: &str = "memory-materialization/1";

/// Internal safety cap on one buffered execute stream, in bytes (64 MiB),
/// applied even if a caller passes an `output_limit_bytes` over the bound.
const SINK_SAFETY_CAP_BYTES: u64 = 4 * MAX_OUTPUT_LIMIT_BYTES;

/// Where simulated package materialization records each package:
/// `<root>/<manager>/<name>` holding the version.
pub const PACKAGE_RECORD_ROOT: &str = "/var/lib/checkfu/packages";

#[derive(Debug)]
struct InstanceRecord {
    request: SandboxProvisionRequest,
    state: InstanceState,
    created_at: Timestamp,
    fs: Fs,
    listeners: BTreeMap<u16, Vec<u8>>,
    processes: Vec<Arc<ProcessShared>>,
    /// beginActiveWrite journals, settled outcomes and the pause state.
    active_writes: active_write::ActiveWrites,
}

impl InstanceRecord {
    fn kill_processes(&self) {
        for p in &self.processes {
            p.kill(ControlSignal::Sigkill);
        }
    }
}

#[derive(Debug)]
struct SnapshotRecord {
    snapshot: SandboxSnapshot,
    fs: Fs,
}

#[derive(Debug, Default)]
struct State {
    next_instance: u64,
    next_snapshot: u64,
    instances: BTreeMap<String, InstanceRecord>,
    snapshots: BTreeMap<String, SnapshotRecord>,
    external: BTreeMap<(String, u16), Vec<u8>>,
}

impl State {
    fn instance_id(&mut self) -> String {
        self.next_instance += 1;
        format!("mem-inst-{:06}", self.next_instance)
    }

    fn snapshot_id(&mut self) -> String {
        self.next_snapshot += 1;
        format!("mem-snap-{:06}", self.next_snapshot)
    }

    fn destroy_instance(&mut self, id: &str) {
        if let Some(record) = self.instances.remove(id) {
            record.kill_processes();
        }
    }

    fn instance(&mut self, id: &str) -> Result<&mut InstanceRecord, SandboxError> {
        find(&mut self.instances, id)
    }
}

fn find<'a>(
    instances: &'a mut BTreeMap<String, InstanceRecord>,
    id: &str,
) -> Result<&'a mut InstanceRecord, SandboxError> {
    instances
        .get_mut(id)
        .ok_or_else(|| SandboxError::SandboxInstanceNotFound {
            instance_id: id.to_string(),
        })
}

#[derive(Debug)]
pub(crate) struct Inner {
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    faults: BTreeSet<Fault>,
    /// Simulates a beginActiveWrite journal on durable host storage.
    durable_journal: bool,
    /// Shared (weakly) with openProcess children that write into the tree.
    state: Arc<Mutex<State>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Moves virtual time: the manual clock when there is one, otherwise a
    /// real (tokio) sleep.
    async fn spend(&self, millis: u64) {
        if millis == 0 {
            return;
        }
        match &self.manual {
            Some(clock) => clock.advance_millis(millis),
            None => tokio::time::sleep(Duration::from_millis(millis)).await,
        }
    }
}

/// Builds a [`MemoryProvider`]: clock and faults.
///
/// # Examples
/// ```
/// use checkfu_sandbox_contract::{ManualClock, Timestamp};
/// use checkfu_sandbox_memory::{Fault, MemoryProvider};
///
/// let clock = ManualClock::new(Timestamp::parse("2030-01-01T00:00:00.000Z").unwrap());
/// let provider = MemoryProvider::builder()
///     .manual_clock(clock)
///     .fault(Fault::SealIgnored)
///     .build();
/// assert_eq!(provider.faults_configured(), vec![Fault::SealIgnored]);
/// ```
#[derive(Debug, Default)]
pub struct MemoryProviderBuilder {
    clock: Option<Arc<dyn Clock>>,
    manual: Option<ManualClock>,
    faults: BTreeSet<Fault>,
    durable_journal: bool,
}

impl MemoryProviderBuilder {
    /// Uses a manual clock: reads it for every timestamp and advances it for
    /// `sleep` and timeouts (deterministic, no real waiting).
    pub fn manual_clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(Arc::new(clock.clone()));
        self.manual = Some(clock);
        self
    }

    /// Uses any clock; `sleep` and timeouts then wait in (tokio) real time.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self.manual = None;
        self
    }

    /// Adds one fault.
    pub fn fault(mut self, fault: Fault) -> Self {
        self.faults.insert(fault);
        self
    }

    /// Adds faults.
    pub fn faults(mut self, faults: impl IntoIterator<Item = Fault>) -> Self {
        self.faults.extend(faults);
        self
    }

    /// Simulates a beginActiveWrite journal that keeps file bodies on
    /// durable host storage: `ephemeral_zdr` transactions are then refused
    /// `SandboxCapabilityUnavailable{active_mount_write}` before any body is
    /// staged. Default: the journal is in memory only.
    pub fn durable_journal(mut self, durable: bool) -> Self {
        self.durable_journal = durable;
        self
    }

    /// The provider. Without a clock it uses the system clock.
    pub fn build(self) -> MemoryProvider {
        MemoryProvider {
            inner: Arc::new(Inner {
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                manual: self.manual,
                faults: self.faults,
                durable_journal: self.durable_journal,
                state: Arc::new(Mutex::new(State::default())),
            }),
        }
    }
}

/// The deterministic in-memory reference provider (DESIGN D17), provider id
/// [`PROVIDER_ID`].
///
/// Cloning is cheap and shares the provider. Every optional member is
/// present. Ids are counters (`mem-inst-000001`, `mem-snap-000001`), time is
/// the injected clock, and maps iterate in key order, so the same inputs
/// give the same bytes.
///
/// The provider does not validate identity, path admission or lifecycle
/// state for the runtime; it only refuses what its own safety needs
/// (unknown ids, a command on an instance that is not running, writes into
/// a sealed mount, snapshots of ZDR instances).
#[derive(Debug, Clone)]
pub struct MemoryProvider {
    inner: Arc<Inner>,
}

impl MemoryProvider {
    /// An honest provider on a manual clock.
    pub fn new(clock: ManualClock) -> Self {
        Self::builder().manual_clock(clock).build()
    }

    /// An honest provider on the system clock (the CLI's embedded default).
    pub fn with_system_clock() -> Self {
        Self::builder().build()
    }

    /// A builder.
    pub fn builder() -> MemoryProviderBuilder {
        MemoryProviderBuilder::default()
    }

    /// This provider with `faults` added. Call before sharing: clones made
    /// earlier keep the old set.
    pub fn with_faults(self, faults: impl IntoIterator<Item = Fault>) -> Self {
        let mut all = self.inner.faults.clone();
        all.extend(faults);
        MemoryProvider {
            inner: Arc::new(Inner {
                clock: self.inner.clock.clone(),
                manual: self.inner.manual.clone(),
                faults: all,
                durable_journal: self.inner.durable_journal,
                state: Arc::new(Mutex::new(std::mem::take(&mut *self.inner.lock()))),
            }),
        }
    }

    /// Whether beginActiveWrite's journal keeps file bodies on (simulated)
    /// durable host storage, so that `ephemeral_zdr` transactions must be
    /// refused.
    pub fn journal_on_durable_storage(&self) -> bool {
        self.inner.journal_durable()
    }

    /// Pauses an instance's workload from outside the provider (an
    /// operator's pause): beginActiveWrite must neither issue nor resume
    /// it. Unknown ids are ignored.
    pub fn pause_workload(&self, instance_id: &str) {
        if let Ok(r) = self.inner.lock().instance(instance_id) {
            r.active_writes.paused_externally = true;
        }
    }

    /// Ends a pause made by [`MemoryProvider::pause_workload`].
    pub fn unpause_workload(&self, instance_id: &str) {
        if let Ok(r) = self.inner.lock().instance(instance_id) {
            r.active_writes.paused_externally = false;
        }
    }

    /// Whether the instance's workload is paused (by anyone); `None` for an
    /// unknown id.
    pub fn workload_paused(&self, instance_id: &str) -> Option<bool> {
        self.inner
            .lock()
            .instance(instance_id)
            .ok()
            .map(|r| r.active_writes.paused())
    }

    /// Transactions whose journal is still open or dispatched on an
    /// instance (journals left by callers that stopped observing before the
    /// marker); `None` for an unknown id.
    pub fn open_journals(&self, instance_id: &str) -> Option<Vec<String>> {
        self.inner
            .lock()
            .instance(instance_id)
            .ok()
            .map(|r| r.active_writes.journals.keys().cloned().collect())
    }

    /// The configured faults, in order.
    pub fn faults_configured(&self) -> Vec<Fault> {
        self.inner.faults.iter().copied().collect()
    }

    /// The provider's current instant.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    // ---- network ------------------------------------------------------

    /// Registers an external listener at (`host`, `port`): `nc HOST PORT`
    /// from a workload prints `greeting` when the profile's policy is
    /// allowlist and lists that exact destination. Replaces any listener
    /// there.
    pub fn add_listener(&self, host: &str, port: u16, greeting: Vec<u8>) {
        self.inner
            .lock()
            .external
            .insert((host.to_string(), port), greeting);
    }

    /// Removes an external listener; true when one was there.
    pub fn remove_listener(&self, host: &str, port: u16) -> bool {
        self.inner
            .lock()
            .external
            .remove(&(host.to_string(), port))
            .is_some()
    }

    /// Dials an external listener from outside every sandbox (the
    /// conformance suite's positive control): its greeting, or `None` when
    /// nothing listens there.
    pub fn dial(&self, host: &str, port: u16) -> Option<Vec<u8>> {
        self.inner
            .lock()
            .external
            .get(&(host.to_string(), port))
            .cloned()
    }

    /// Registers a listener inside an instance, reachable from that
    /// instance only, at `127.0.0.1`/`localhost`/`::1`, under any policy.
    ///
    /// # Errors
    /// `SandboxInstanceNotFound` for an unknown instance.
    pub fn add_instance_listener(
        &self,
        instance_id: &str,
        port: u16,
        greeting: Vec<u8>,
    ) -> Result<(), SandboxError> {
        let mut st = self.inner.lock();
        st.instance(instance_id)?.listeners.insert(port, greeting);
        Ok(())
    }

    /// Removes an instance's loopback listener; true when one was there.
    pub fn remove_instance_listener(&self, instance_id: &str, port: u16) -> bool {
        let mut st = self.inner.lock();
        st.instances
            .get_mut(instance_id)
            .and_then(|r| r.listeners.remove(&port))
            .is_some()
    }

    // ---- inspection -----------------------------------------------------

    /// Ids of every instance the provider holds, in id order (leak checks).
    pub fn live_instances(&self) -> Vec<String> {
        self.inner.lock().instances.keys().cloned().collect()
    }

    /// Ids of every snapshot the provider holds, in id order (leak checks).
    pub fn live_snapshots(&self) -> Vec<String> {
        self.inner.lock().snapshots.keys().cloned().collect()
    }

    /// The provider's own record of an instance's state.
    pub fn instance_state(&self, instance_id: &str) -> Option<InstanceState> {
        self.inner
            .lock()
            .instances
            .get(instance_id)
            .map(|r| r.state)
    }

    /// Plants a node at a physical path of an instance's tree, creating
    /// missing parent directories and bypassing seals (test set-up: symlinks,
    /// special files, outside secrets).
    ///
    /// # Errors
    /// `SandboxInstanceNotFound` for an unknown instance.
    pub fn plant(&self, instance_id: &str, path: &str, node: FsNode) -> Result<(), SandboxError> {
        let mut st = self.inner.lock();
        let record = st.instance(instance_id)?;
        record.fs.mkdir_all(crate::fs::parent(path));
        record.fs.insert(path, node);
        Ok(())
    }

    /// The node at a physical path of an instance's tree (no link followed).
    pub fn node(&self, instance_id: &str, path: &str) -> Option<FsNode> {
        self.inner
            .lock()
            .instances
            .get(instance_id)
            .and_then(|r| r.fs.get(path).cloned())
    }

    /// The node at a physical path of a snapshot's tree (no link followed).
    pub fn snapshot_node(&self, snapshot_id: &str, path: &str) -> Option<FsNode> {
        self.inner
            .lock()
            .snapshots
            .get(snapshot_id)
            .and_then(|r| r.fs.get(path).cloned())
    }

    // ---- wire -------------------------------------------------------------

    /// The wire form of a command result as this provider would send it.
    ///
    /// Honest: the contract's encoding. With [`Fault::ExitTwoCauses`] the
    /// `exit` object gains a second cause (`signal: SIGKILL`, or `exit_code:
    /// 0` next to a signal); with [`Fault::ExitNoCause`] it is `{}`. Decode it
    /// with `wire::decode_value::<SandboxCommandResult>` to see the
    /// rejection.
    pub fn command_result_wire(&self, result: &SandboxCommandResult) -> serde_json::Value {
        let mut value = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        if let Some(exit) = value.get_mut("exit").and_then(|e| e.as_object_mut()) {
            if self.inner.has(Fault::ExitTwoCauses) {
                if exit.contains_key("signal") {
                    exit.insert("exit_code".into(), serde_json::json!(0));
                } else {
                    exit.insert("signal".into(), serde_json::json!("SIGKILL"));
                }
            }
            if self.inner.has(Fault::ExitNoCause) {
                exit.clear();
            }
        }
        value
    }

    /// execute, returning the result's wire form (see
    /// [`MemoryProvider::command_result_wire`]).
    ///
    /// # Errors
    /// As execute.
    pub async fn execute_wire(
        &self,
        request: ExecuteRequest,
    ) -> Result<serde_json::Value, SandboxError> {
        let result = self.execute(request).await?;
        Ok(self.command_result_wire(&result))
    }

    // ---- helpers -------------------------------------------------------

    fn envelope() -> SandboxProviderCapabilities {
        let provider = EnforcementLevel::ProviderEnforced;
        SandboxProviderCapabilities {
            placement: Placement::Hosted,
            tiers: vec![Tier::Container],
            platforms: vec![
                Platform {
                    os: Os::Linux,
                    architecture: Architecture::Amd64,
                },
                Platform {
                    os: Os::Linux,
                    architecture: Architecture::Arm64,
                },
            ],
            image_mode: ImageMode::Profile,
            package_managers: vec![
                PackageManager::Apt,
                PackageManager::Apk,
                PackageManager::Pip,
                PackageManager::Npm,
            ],
            network_modes: vec![NetworkMode::None, NetworkMode::Allowlist],
            retention_modes: vec![RetentionMode::EphemeralZdr, RetentionMode::Durable],
            snapshots: true,
            snapshot_clone: true,
            snapshot_custody: SnapshotCustody::Provider,
            list_dir: true,
            physically_contained_file_read: true,
            active_mount_write: true,
            egress_certification: EgressCertification::Enforced,
            enforcement: Enforcement {
                filesystem: provider,
                process: provider,
                network: provider,
                memory: EnforcementLevel::NotEnforced,
                cpu: EnforcementLevel::NotEnforced,
                pids: EnforcementLevel::NotEnforced,
                disk: EnforcementLevel::NotEnforced,
                duration: provider,
                privilege: EnforcementLevel::NotEnforced,
            },
            max_mounts: checkfu_sandbox_contract::bounds::MAX_MOUNTS,
            provider_revision: PROVIDER_REVISION.to_string(),
            materialization_revision: MATERIALIZATION_REVISION.to_string(),
        }
    }

    /// The honest instance for `request`, then the configured identity fault.
    fn instance_value(
        &self,
        request: &SandboxProvisionRequest,
        instance_id: &str,
        state: InstanceState,
    ) -> SandboxInstance {
        let mut v = SandboxInstance {
            instance_id: instance_id.to_string(),
            provider: request.provider.clone(),
            placement: request.placement,
            state,
            workspace_id: request.workspace_id.clone(),
            session_id: request.session_id.clone(),
            run_id: request.run_id.clone(),
            attempt_id: request.attempt_id.clone(),
            lease_id: request.lease_id.clone(),
            lease_epoch: request.lease_epoch,
            target: request.target,
            profile: request.profile.clone(),
            platform: request.platform,
            root_image: request.root_image.clone(),
            mounts: request.mounts.clone(),
            output_path: OUTPUT_PATH.to_string(),
            expires_at: request.expires_at,
            materialization: Materialization {
                profile_digest: request.profile.profile_digest.clone(),
                image_reference: request.root_image.clone(),
                image_digest: request.root_image.digest(),
                provider_revision: PROVIDER_REVISION.to_string(),
                materialization_revision: MATERIALIZATION_REVISION.to_string(),
            },
        };
        for f in &self.inner.faults {
            if let Fault::Identity(field) = f {
                corrupt_instance(*field, &mut v);
            }
        }
        v
    }

    fn handoff<T: RollbackScope>(&self, op: Member, value: T, own: Target) -> Handoff<T> {
        let target = if self.inner.has(Fault::RollbackDerivesFromValue) {
            value.derived_target()
        } else {
            own
        };
        Handoff {
            value,
            rollback: Arc::new(MemoryRollback {
                inner: self.inner.clone(),
                op,
                target,
                calls: AtomicUsize::new(0),
            }),
        }
    }

    /// A fresh tree: the base layout, the output tree, the control root,
    /// every mount, and the profile's package records.
    fn fresh_fs(request: &SandboxProvisionRequest) -> Fs {
        let mut fs = Fs::new();
        for d in ["/dev", "/tmp", "/home/checkfu", CONTROL_ROOT, OUTPUT_PATH] {
            fs.mkdir_all(d);
        }
        fs.insert("/dev/null", FsNode::Special(SpecialKind::NullDevice));
        fs.insert("/dev/zero", FsNode::Special(SpecialKind::ZeroDevice));
        Self::prepare_mounts(&mut fs, request);
        for p in &request.profile.packages {
            let manager = match p.manager {
                PackageManager::Apt => "apt",
                PackageManager::Apk => "apk",
                PackageManager::Pip => "pip",
                PackageManager::Npm => "npm",
            };
            let dir = format!("{PACKAGE_RECORD_ROOT}/{manager}");
            fs.mkdir_all(&dir);
            fs.insert(
                format!("{dir}/{}", p.name.replace('/', "%2F")),
                FsNode::File(p.version.clone().into_bytes()),
            );
        }
        fs
    }

    fn prepare_mounts(fs: &mut Fs, request: &SandboxProvisionRequest) {
        fs.mkdir_all(CONTROL_ROOT);
        fs.mkdir_all(OUTPUT_PATH);
        for m in &request.mounts {
            fs.mkdir_all(&m.path);
        }
    }

    fn snapshot_of(
        st: &mut State,
        instance_id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<SandboxSnapshot, SandboxError> {
        let record = st.instance(instance_id)?;
        let req = &record.request;
        let mut snapshot = SandboxSnapshot {
            snapshot_id: String::new(),
            provider: req.provider.clone(),
            placement: req.placement,
            source_instance_id: instance_id.to_string(),
            workspace_id: req.workspace_id.clone(),
            session_id: req.session_id.clone(),
            profile_id: req.profile.profile_id.clone(),
            profile_version: req.profile.profile_version,
            profile_digest: req.profile.profile_digest.clone(),
            created_at: now,
            expires_at,
        };
        let fs = record.fs.clone();
        snapshot.snapshot_id = st.snapshot_id();
        st.snapshots.insert(
            snapshot.snapshot_id.clone(),
            SnapshotRecord {
                snapshot: snapshot.clone(),
                fs,
            },
        );
        Ok(snapshot)
    }
}

fn read_refusal(
    operation: Operation,
    refusal: ReadRefusal,
    path: impl std::fmt::Display,
) -> SandboxError {
    let (reason, what) = match refusal {
        ReadRefusal::OutsideRoot => (FailureReason::OutsideRoot, "resolves outside the root"),
        ReadRefusal::NotFound => (FailureReason::NotFound, "does not exist"),
        ReadRefusal::NotRegular => (FailureReason::NotRegularFile, "is not a regular file"),
    };
    SandboxError::failed(operation, reason, format!("{path} {what}"))
}

impl Inner {
    /// Appends to the regular file at `physical` in `instance_id`'s tree,
    /// while both exist.
    fn appender(&self, instance_id: &str, physical: crate::fs::Name) -> Appender {
        let state = Arc::downgrade(&self.state);
        let instance_id = instance_id.to_string();
        Appender(Box::new(move |chunk: &[u8]| {
            let Some(state) = state.upgrade() else {
                return;
            };
            // A poisoned lock only means a panic elsewhere; the tree is sound.
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(record) = st.instances.get_mut(&instance_id) {
                if let Some(FsNode::File(bytes)) = record.fs.get_mut(&physical) {
                    bytes.extend_from_slice(chunk);
                }
            }
        }))
    }

    /// Prepares the openProcess child's behaviour on the instance's tree.
    fn plan(
        &self,
        record: &mut InstanceRecord,
        external: &BTreeMap<(String, u16), Vec<u8>>,
        request: &SandboxProcessRequest,
    ) -> Plan {
        let name = request
            .executable
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let args = &request.arguments;
        let cwd = request.working_directory.clone();
        match name.as_str() {
            "cat" => {
                let mut files: Vec<&String> = args
                    .iter()
                    .filter(|a| *a == "-" || !a.starts_with('-'))
                    .collect();
                let dash = "-".to_string();
                if files.is_empty() {
                    files.push(&dash);
                }
                let sources = files
                    .into_iter()
                    .map(|f| {
                        if f == "-" {
                            return CatSource::Stdin;
                        }
                        match record.fs.resolve(&cwd, f, true) {
                            Ok((_, Some(FsNode::File(b)))) => CatSource::Bytes(b.clone()),
                            Ok((_, Some(FsNode::Special(SpecialKind::ZeroDevice)))) => {
                                CatSource::Zero
                            }
                            Ok((_, Some(FsNode::Special(SpecialKind::Fifo)))) => CatSource::Blocks,
                            Ok((_, Some(FsNode::Special(SpecialKind::NullDevice)))) => {
                                CatSource::Bytes(vec![])
                            }
                            Ok((_, Some(FsNode::Directory))) => {
                                CatSource::Error(format!("cat: {f}: Is a directory\n"))
                            }
                            Ok((_, Some(_))) => {
                                CatSource::Error(format!("cat: {f}: Permission denied\n"))
                            }
                            Ok((_, None)) | Err(WalkError::NotFound) => {
                                CatSource::Error(format!("cat: {f}: No such file or directory\n"))
                            }
                            Err(_) => CatSource::Error(format!("cat: {f}: cannot open\n")),
                        }
                    })
                    .collect();
                return Plan::Cat(sources);
            }
            "sleep" => {
                if let Some(s) = args.first().and_then(|a| a.parse::<f64>().ok()) {
                    if s.is_finite() && s >= 0.0 {
                        return Plan::Sleep(Duration::from_millis((s * 1000.0).round() as u64));
                    }
                }
            }
            "head" if args.len() >= 2 && args[0] == "-c" => {
                if let Ok(n) = args[1].parse::<u64>() {
                    match args.get(2).map(String::as_str) {
                        None | Some("-") => return Plan::HeadStdin(n),
                        Some(f) => {
                            if let Ok((_, Some(FsNode::Special(SpecialKind::ZeroDevice)))) =
                                record.fs.resolve(&cwd, f, true)
                            {
                                return Plan::HeadZero(n);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        // Everything else runs to completion now, with stdin closed.
        let mut env = base_environment();
        env.extend(request.environment.clone());
        let mut argv = vec![request.executable.clone()];
        argv.extend(args.iter().cloned());
        let sealed = record.state == InstanceState::Active && !self.has(Fault::SealIgnored);
        let mut exec = Exec {
            fs: &mut record.fs,
            mounts: &record.request.mounts,
            sealed,
            cwd,
            env,
            stdin: None,
            stdout: Sink::new(SINK_SAFETY_CAP_BYTES, OutputStream::Stdout),
            stderr: Sink::new(SINK_SAFETY_CAP_BYTES, OutputStream::Stderr),
            elapsed_millis: 0,
            timeout_millis: u64::MAX,
            net: NetView {
                policy: &record.request.profile.network_policy,
                loopback: &record.listeners,
                external,
                none_leaks: self.has(Fault::NetworkNoneReachesListener),
                allowlist_ignored: self.has(Fault::AllowlistIgnored),
            },
        };
        if let Some(target) = cat_redirect_target(request) {
            // The shell creates or truncates the file before `cat` runs.
            let created = exec.write_file(&target, Vec::new());
            drop(exec);
            let physical = created.and_then(|()| {
                record
                    .fs
                    .resolve(&request.working_directory, &target, true)
                    .map(|(physical, _)| physical)
                    .map_err(|_| "No such file or directory")
            });
            return match physical {
                Ok(physical) => Plan::CatToFile(self.appender(&request.instance_id, physical)),
                Err(msg) => Plan::Finished {
                    stdout: Vec::new(),
                    stderr: format!("sh: can't create {target}: {msg}\n").into_bytes(),
                    code: 2,
                    delay: Duration::ZERO,
                },
            };
        }
        let outcome = exec.launch(&argv, &request.environment);
        let delay = Duration::from_millis(exec.elapsed_millis);
        match outcome {
            Ok(code) => Plan::Finished {
                stdout: std::mem::take(&mut exec.stdout.buf),
                stderr: std::mem::take(&mut exec.stderr.buf),
                code,
                delay,
            },
            Err(Abort::TimedOut) => Plan::Blocks,
            Err(Abort::Signalled(n)) => Plan::Finished {
                stdout: std::mem::take(&mut exec.stdout.buf),
                stderr: std::mem::take(&mut exec.stderr.buf),
                code: 128 + n,
                delay,
            },
            Err(Abort::Overflow(_)) => Plan::Finished {
                stdout: std::mem::take(&mut exec.stdout.buf),
                stderr: std::mem::take(&mut exec.stderr.buf),
                code: 1,
                delay,
            },
        }
    }
}

/// A different, well-formed digest.
fn other_digest(d: &Digest) -> Digest {
    let raw: [u8; 32] = Sha256::digest(format!("memory-fault:{d}").as_bytes()).into();
    Digest::from_sha256_bytes(raw)
}

/// A different, well-formed image reference with the same digest.
fn other_image(r: &ImageReference) -> ImageReference {
    let name = r.name();
    let changed = if let Some(stem) = name.strip_suffix('x') {
        format!("{stem}y")
    } else if name.len() < 255 {
        format!("{name}x")
    } else {
        format!("{}x", &name[..name.len() - 1])
    };
    ImageReference::parse(&format!("{changed}@{}", r.digest())).unwrap_or_else(|_| r.clone())
}

/// Misreports one identity field of an instance.
fn corrupt_instance(field: IdentityField, v: &mut SandboxInstance) {
    match field {
        IdentityField::Provider => v.provider.push_str("-impostor"),
        IdentityField::Placement => {
            v.placement = match v.placement {
                Placement::Hosted => Placement::Runner,
                Placement::Runner => Placement::Hosted,
            }
        }
        IdentityField::State => {
            v.state = match v.state {
                InstanceState::Provisioning => InstanceState::Active,
                InstanceState::Active => InstanceState::Provisioning,
            }
        }
        IdentityField::WorkspaceId => v.workspace_id.push_str("-x"),
        IdentityField::SessionId => v.session_id.push_str("-x"),
        IdentityField::RunId => v.run_id.push_str("-x"),
        IdentityField::AttemptId => v.attempt_id.push_str("-x"),
        IdentityField::LeaseId => v.lease_id.push_str("-x"),
        IdentityField::LeaseEpoch => v.lease_epoch = v.lease_epoch.wrapping_add(1),
        IdentityField::Target => {
            v.target = match v.target {
                Tier::Container => Tier::Microvm,
                Tier::Microvm => Tier::Container,
            }
        }
        IdentityField::Profile => {
            v.profile.profile_version = v.profile.profile_version.wrapping_add(1)
        }
        IdentityField::Platform => {
            v.platform.architecture = match v.platform.architecture {
                Architecture::Amd64 => Architecture::Arm64,
                Architecture::Arm64 => Architecture::Amd64,
            }
        }
        IdentityField::RootImage => v.root_image = other_image(&v.root_image),
        IdentityField::Mounts => v.mounts.push(SandboxMount {
            path: "/mnt/memory-fault".to_string(),
            access: MountAccess::ReadOnly,
        }),
        IdentityField::OutputPath => v.output_path = "/mnt/session/output".to_string(),
        IdentityField::ExpiresAt => v.expires_at = v.expires_at.add_seconds(3600),
        IdentityField::MaterializationProfileDigest => {
            v.materialization.profile_digest = other_digest(&v.materialization.profile_digest)
        }
        IdentityField::MaterializationImageReference => {
            v.materialization.image_reference = other_image(&v.materialization.image_reference)
        }
        IdentityField::MaterializationImageDigest => {
            v.materialization.image_digest = other_digest(&v.materialization.image_digest)
        }
        IdentityField::MaterializationProviderRevision => {
            v.materialization.provider_revision.push_str("-stale")
        }
        IdentityField::MaterializationMaterializationRevision => v
            .materialization
            .materialization_revision
            .push_str("-stale"),
    }
}

// ---- rollback -------------------------------------------------------------

/// What a rollback undoes, captured at allocation time.
#[derive(Debug, Clone)]
enum Target {
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
trait RollbackScope {
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

struct MemoryRollback {
    inner: Arc<Inner>,
    op: Member,
    target: Target,
    calls: AtomicUsize,
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

#[async_trait]
impl SandboxProvider for MemoryProvider {
    fn provider_id(&self) -> &str {
        PROVIDER_ID
    }

    fn capabilities(&self) -> SandboxProviderCapabilities {
        let mut envelope = Self::envelope();
        if self.inner.has(Fault::EnvelopeDrifts)
            && self
                .inner
                .lock()
                .instances
                .values()
                .any(|r| r.state == InstanceState::Active)
        {
            envelope.enforcement.cpu = EnforcementLevel::ProviderEnforced;
        }
        envelope
    }

    async fn provision(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let id = st.instance_id();
        st.instances.insert(
            id.clone(),
            InstanceRecord {
                fs: Self::fresh_fs(&request),
                request: request.clone(),
                state: InstanceState::Provisioning,
                created_at: now,
                listeners: BTreeMap::new(),
                processes: vec![],
                active_writes: Default::default(),
            },
        );
        drop(st);
        let value = self.instance_value(&request, &id, InstanceState::Provisioning);
        Ok(self.handoff(Member::Provision, value, Target::DestroyInstance(id)))
    }

    async fn write_file(&self, request: WriteFileRequest) -> Result<(), SandboxError> {
        let size = request.content_base64.len() as u64;
        if size > MAX_FILE_BYTES {
            return Err(SandboxError::SandboxFileTooLarge {
                path: request.path.display(),
                limit_bytes: MAX_FILE_BYTES,
                actual_bytes: size,
            });
        }
        let seal_ignored = self.inner.has(Fault::SealIgnored);
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        // The owning root: the deepest declared mount or the output tree.
        let output = SandboxMount {
            path: OUTPUT_PATH.to_string(),
            access: MountAccess::ReadWrite,
        };
        let owner = record
            .request
            .mounts
            .iter()
            .chain(std::iter::once(&output))
            .filter(|m| is_within(&request.path, &m.path))
            .max_by_key(|m| split(&m.path).len())
            .cloned();
        let Some(owner) = owner else {
            return Err(SandboxError::failed(
                op::WRITE_FILE,
                FailureReason::PathNotAdmitted,
                format!(
                    "{} is under no mount and not in the output tree",
                    request.path
                ),
            ));
        };
        let sealed = record.state == InstanceState::Active && !seal_ignored;
        // Write scope narrows at activation (spec "Paths, mounts"): a mount
        // path is provisioning-only, the answer the runtime gives (decision
        // 005) and every provider gives (launch parity table).
        if sealed && owner.path != OUTPUT_PATH {
            return Err(SandboxError::conflict(
                op::WRITE_FILE,
                "provisioning",
                ConflictActual::Active,
            ));
        }
        let fail = |reason, what: &str| {
            SandboxError::failed(op::WRITE_FILE, reason, format!("{}: {what}", request.path))
        };
        let root = record.fs.physical_root(&owner.path).map_err(|_| {
            fail(
                FailureReason::OutsideRoot,
                "its mount root is not a directory",
            )
        })?;
        let depth = root.len();
        let rel = split(&request.path)[depth..].to_vec();
        if rel.is_empty() {
            // A root itself is no file path: the runtime's answer.
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "path",
                "a normalized file path below its root",
                &request.path,
            ));
        }
        // Create missing parents, contained under the owning root.
        let mut parent = root.clone();
        for i in 1..rel.len() {
            match record
                .fs
                .walk(root.clone(), rel[..i].to_vec(), true, Some(depth))
            {
                Ok((p, None)) => {
                    record.fs.insert(crate::fs::join(&p), FsNode::Directory);
                    parent = p;
                }
                Ok((p, Some(FsNode::Directory))) => parent = p,
                Ok((_, Some(_))) | Err(WalkError::NotDirectory) => {
                    return Err(fail(FailureReason::NotFound, "a parent is not a directory"))
                }
                Err(WalkError::NotFound) => {
                    return Err(fail(FailureReason::NotFound, "a parent does not exist"))
                }
                Err(WalkError::Escape) | Err(WalkError::Loop) => {
                    return Err(fail(
                        FailureReason::OutsideRoot,
                        "resolves outside its mount",
                    ))
                }
            }
        }
        let mut target = parent;
        target.push(rel[rel.len() - 1].clone());
        let target = crate::fs::join(&target);
        // A seal applies to where the bytes physically land.
        let landing_access = record
            .request
            .mounts
            .iter()
            .chain(std::iter::once(&output))
            .filter(|m| is_within(&target, &m.path))
            .max_by_key(|m| split(&m.path).len())
            .map(|m| m.access);
        if sealed && landing_access == Some(MountAccess::ReadOnly) {
            return Err(fail(FailureReason::ReadOnly, "read-only file system"));
        }
        if let Some(FsNode::Directory) = record.fs.get(&target) {
            return Err(fail(FailureReason::NotRegularFile, "is a directory"));
        }
        let mode = request.effective_mode();
        if mode > MAX_FILE_MODE {
            return Err(SandboxError::invalid_request(
                op::WRITE_FILE,
                "mode",
                "permission bits of at most 0o777",
                format!("0o{mode:o}"),
            ));
        }
        // Replaces a link or special file there (rename semantics).
        record
            .fs
            .insert(&target, FsNode::File(request.content_base64.0));
        record.fs.set_mode(&target, mode);
        Ok(())
    }

    async fn activate(
        &self,
        request: ActivateRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        record.state = InstanceState::Active;
        let req = record.request.clone();
        drop(st);
        let value = self.instance_value(&req, &request.instance_id, InstanceState::Active);
        Ok(self.handoff(
            Member::Activate,
            value,
            Target::Deactivate(request.instance_id),
        ))
    }

    async fn execute(&self, request: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        let started_at = self.inner.clock.now();
        let command = request.command;
        let limit = command.output_limit_bytes;
        let (outcome, stdout, stderr, elapsed) = {
            let mut guard = self.inner.lock();
            let st = &mut *guard;
            let record = find(&mut st.instances, &request.instance_id)?;
            if record.state != InstanceState::Active {
                return Err(SandboxError::conflict(op::EXECUTE, "active", record.state));
            }
            let mut env = base_environment();
            env.extend(command.environment.clone());
            let mut argv = vec![command.executable.clone()];
            argv.extend(command.arguments.iter().cloned());
            let cap = limit.min(SINK_SAFETY_CAP_BYTES);
            let mut exec = Exec {
                fs: &mut record.fs,
                mounts: &record.request.mounts,
                sealed: !self.inner.has(Fault::SealIgnored),
                cwd: command.working_directory.clone(),
                env,
                stdin: command.stdin_base64.map(|b| b.0),
                stdout: Sink::new(cap, OutputStream::Stdout),
                stderr: Sink::new(cap, OutputStream::Stderr),
                elapsed_millis: 0,
                timeout_millis: u64::from(command.timeout_seconds) * 1000,
                net: NetView {
                    policy: &record.request.profile.network_policy,
                    loopback: &record.listeners,
                    external: &st.external,
                    none_leaks: self.inner.has(Fault::NetworkNoneReachesListener),
                    allowlist_ignored: self.inner.has(Fault::AllowlistIgnored),
                },
            };
            let outcome = exec.launch(&argv, &command.environment);
            (
                outcome,
                std::mem::take(&mut exec.stdout.buf),
                std::mem::take(&mut exec.stderr.buf),
                exec.elapsed_millis,
            )
        };
        self.inner.spend(elapsed).await;
        let mut finished_at = self.inner.clock.now();
        if self.inner.has(Fault::NonMonotonicInterval) {
            finished_at = started_at.add_millis(-1);
        }
        let exit = match outcome {
            Ok(code) => ExitCause::ExitCode(code),
            Err(Abort::TimedOut) => ExitCause::TimedOut,
            Err(Abort::Signalled(n)) => ExitCause::ExitCode(128 + n),
            Err(Abort::Overflow(_)) if self.inner.has(Fault::OutputOverLimit) => {
                ExitCause::ExitCode(0)
            }
            Err(Abort::Overflow(stream)) => {
                return Err(SandboxError::SandboxOutputLimitExceeded {
                    stream,
                    limit_bytes: limit,
                })
            }
        };
        Ok(SandboxCommandResult {
            exit,
            stdout_base64: Bytes(stdout),
            stderr_base64: Bytes(stderr),
            started_at,
            finished_at,
        })
    }

    async fn read_file(
        &self,
        request: ReadFileRequest,
    ) -> Result<SandboxFileContent, SandboxError> {
        let textual = self.inner.has(Fault::TextualContainment);
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        let bytes = record
            .fs
            .read_contained(&request.allowed_root, &request.path, textual)
            .map_err(|r| read_refusal(op::READ_FILE, r, &request.path))?;
        let size = bytes.len() as u64;
        if size > request.maximum_bytes {
            return Err(SandboxError::SandboxFileTooLarge {
                path: request.path.display(),
                limit_bytes: request.maximum_bytes,
                actual_bytes: size,
            });
        }
        Ok(SandboxFileContent {
            content_base64: Bytes(bytes.clone()),
            path: request.path,
        })
    }

    async fn snapshot(
        &self,
        request: SnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        let retention = record.request.profile.retention;
        if retention == RetentionMode::EphemeralZdr {
            return Err(SandboxError::SandboxSnapshotForbidden {
                instance_id: request.instance_id,
                retention,
            });
        }
        let mut expires_at = request.expires_at;
        if self.inner.has(Fault::SnapshotExpiryReplaced) {
            // "The platform's own deadline": a day later than asked.
            expires_at = expires_at.add_seconds(86_400);
        }
        let mut snapshot = Self::snapshot_of(&mut st, &request.instance_id, expires_at, now)?;
        drop(st);
        let own = Target::DestroySnapshot(snapshot.snapshot_id.clone());
        if self.inner.has(Fault::SnapshotSourceMismatch) {
            snapshot.source_instance_id = "mem-inst-000000".to_string();
        }
        Ok(self.handoff(Member::Snapshot, snapshot, own))
    }

    async fn clone_snapshot(
        &self,
        request: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let source_id = request.source.snapshot_id.clone();
        let Some(source) = st.snapshots.get(&source_id) else {
            return Err(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: source_id,
            });
        };
        let fs = source.fs.clone();
        let mut clone = source.snapshot.clone();
        clone.session_id = request.target_session_id.clone();
        clone.created_at = now.max(source.snapshot.created_at);
        if self.inner.has(Fault::CloneMovesExpiry) {
            clone.expires_at = clone.expires_at.add_seconds(3600);
        }
        if self.inner.has(Fault::ClonePredatesSource) {
            clone.created_at = source.snapshot.created_at.add_millis(-1);
        }
        clone.snapshot_id = st.snapshot_id();
        st.snapshots.insert(
            clone.snapshot_id.clone(),
            SnapshotRecord {
                snapshot: clone.clone(),
                fs,
            },
        );
        drop(st);
        let own = Target::DestroySnapshot(clone.snapshot_id.clone());
        if self.inner.has(Fault::CloneReusesSourceId) {
            clone.snapshot_id = source_id;
        }
        Ok(self.handoff(Member::CloneSnapshot, clone, own))
    }

    async fn release(
        &self,
        request: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let record = st.instance(&request.instance_id)?;
        let durable = record.request.profile.retention == RetentionMode::Durable;
        let instance_expiry = record.request.expires_at;
        let settle = if durable {
            !self.inner.has(Fault::DestroyedOnDurable)
        } else {
            self.inner.has(Fault::ReleasedOnZdr)
        };
        if !settle {
            st.destroy_instance(&request.instance_id);
            drop(st);
            return Ok(self.handoff(
                Member::Release,
                ReleaseDisposition::Destroyed,
                Target::Nothing,
            ));
        }
        let expires_at = match request.snapshot_expires_at {
            Some(t) => t,
            None if durable => {
                return Err(SandboxError::invalid_request(
                    op::RELEASE,
                    "snapshot_expires_at",
                    "a retention deadline for a durable release",
                    "absent",
                ))
            }
            None => instance_expiry,
        };
        let snapshot = Self::snapshot_of(&mut st, &request.instance_id, expires_at, now)?;
        st.destroy_instance(&request.instance_id);
        drop(st);
        let own = Target::DestroySnapshot(snapshot.snapshot_id.clone());
        Ok(self.handoff(
            Member::Release,
            ReleaseDisposition::Released { snapshot },
            own,
        ))
    }

    async fn resume(
        &self,
        request: ResumeRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let snapshot_id = &request.snapshot.snapshot_id;
        let Some(snap) = st.snapshots.get(snapshot_id) else {
            return Err(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: snapshot_id.clone(),
            });
        };
        let mut fs = snap.fs.clone();
        Self::prepare_mounts(&mut fs, &request.request);
        let id = st.instance_id();
        st.instances.insert(
            id.clone(),
            InstanceRecord {
                fs,
                request: request.request.clone(),
                state: InstanceState::Active,
                created_at: now,
                listeners: BTreeMap::new(),
                processes: vec![],
                active_writes: Default::default(),
            },
        );
        drop(st);
        let value = self.instance_value(&request.request, &id, InstanceState::Active);
        Ok(self.handoff(Member::Resume, value, Target::DestroyInstance(id)))
    }

    async fn destroy(&self, request: DestroyRequest) -> Result<(), SandboxError> {
        self.inner.lock().destroy_instance(&request.instance_id);
        Ok(())
    }

    async fn destroy_snapshot(&self, request: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.inner.lock().snapshots.remove(&request.snapshot_id);
        Ok(())
    }

    async fn cleanup(&self, request: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        // The contract's rule, with the two cleanup faults bending the pin.
        let ignore_pin = self.inner.has(Fault::CleanupIgnoresPin);
        let pin_beats_expiry = self.inner.has(Fault::CleanupKeepsExpiredPin);
        let mut st = self.inner.lock();
        let instances: Vec<String> = st
            .instances
            .iter()
            .filter(|(_, r)| {
                request.sweeps_instance(Some(r.created_at), Some(r.request.expires_at))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &instances {
            st.destroy_instance(id);
        }
        let unpinned = CleanupRequest {
            pinned_snapshots: Vec::new(),
            ..request.clone()
        };
        let rule = if ignore_pin { &unpinned } else { &request };
        let snapshots: Vec<String> = st
            .snapshots
            .iter()
            .filter(|(id, r)| {
                if pin_beats_expiry && rule.is_pinned(id) {
                    false
                } else {
                    let s = &r.snapshot;
                    rule.sweeps_snapshot(id, Some(s.created_at), Some(s.expires_at))
                }
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &snapshots {
            st.snapshots.remove(id);
        }
        Ok(CleanupResult {
            instances,
            snapshots,
        })
    }

    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        Some(&*self.inner)
    }

    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        if self.inner.has(Fault::ListDirMemberAbsent) {
            None
        } else {
            Some(&*self.inner)
        }
    }

    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        Some(&*self.inner)
    }

    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        Some(&*self.inner)
    }

    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        Some(&*self.inner)
    }

    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        Some(&*self.inner)
    }

    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        Some(&*self.inner)
    }
}

/// The oracle has no image store: a pinned reference is taken as is, and
/// `name[:tag]` is pinned to the SHA-256 of its whole text, so the same
/// tag always gives the same reference.
#[async_trait]
impl ResolveImageMember for Inner {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        if reference.is_empty() || reference.chars().any(char::is_whitespace) {
            return Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("image {reference:?} is not a reference"),
            ));
        }
        if reference.contains('@') {
            return Ok(reference.to_owned());
        }
        let name = match reference.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => name,
            _ => reference,
        };
        let hex: String = Sha256::digest(reference.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(format!("{name}@sha256:{hex}"))
    }
}

#[async_trait]
impl CleanupInventoryMember for Inner {
    async fn cleanup_inventory(&self) -> Result<CleanupInventory, SandboxError> {
        let st = self.lock();
        Ok(CleanupInventory {
            instances: st
                .instances
                .iter()
                .map(|(id, r)| SweepCandidate {
                    id: id.clone(),
                    created_at: Some(r.created_at),
                    expires_at: Some(r.request.expires_at),
                })
                .collect(),
            snapshots: st
                .snapshots
                .iter()
                .map(|(id, r)| SweepCandidate {
                    id: id.clone(),
                    created_at: Some(r.snapshot.created_at),
                    expires_at: Some(r.snapshot.expires_at),
                })
                .collect(),
        })
    }
}

#[async_trait]
impl ReadFilesMember for Inner {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        let textual = self.has(Fault::TextualContainment);
        let over_budget = self.has(Fault::ReadFilesOverBudget);
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        let mut remaining = request.aggregate_maximum_bytes;
        let mut files = Vec::with_capacity(request.files.len());
        for entry in &request.files {
            let path = entry.path.clone();
            let outcome =
                match record
                    .fs
                    .read_contained(&request.allowed_root, &entry.path, textual)
                {
                    Ok(bytes) => {
                        let size = bytes.len() as u64;
                        let limit = entry.maximum_bytes.min(remaining);
                        if size > limit && !over_budget {
                            ReadFileOutcome::TooLarge {
                                path,
                                size_bytes: size,
                            }
                        } else {
                            remaining = remaining.saturating_sub(size);
                            ReadFileOutcome::Read {
                                path,
                                content_base64: Bytes(bytes.clone()),
                            }
                        }
                    }
                    Err(ReadRefusal::OutsideRoot) => ReadFileOutcome::OutsideRoot { path },
                    Err(ReadRefusal::NotFound) => ReadFileOutcome::NotFound { path },
                    Err(ReadRefusal::NotRegular) => ReadFileOutcome::NotRegularFile { path },
                };
            files.push(outcome);
        }
        if self.has(Fault::ReadFilesOutOfOrder) {
            files.reverse();
        }
        Ok(ReadFilesResult { files })
    }
}

fn sha256_digest(bytes: &[u8]) -> Digest {
    Digest::from_sha256_bytes(Sha256::digest(bytes).into())
}

fn too_many(operation: Operation, found: usize, max: u32) -> SandboxError {
    SandboxError::invalid_request(
        operation,
        "max_entries",
        format!("at least {found} (the listing's size)"),
        max.to_string(),
    )
}

#[async_trait]
impl ListDirMember for Inner {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        record
            .fs
            .physical_root(&request.root)
            .map_err(|r| read_refusal(op::LIST_DIR, r, &request.root))?;
        let entries: Vec<DirEntry> = record
            .fs
            .subtree(&request.root)
            .into_iter()
            .filter_map(|(path, node)| match node {
                FsNode::File(b) => Some(DirEntry {
                    path: path.clone().into(),
                    size_bytes: b.len() as u64,
                    // A body no member can return is not hashed.
                    sha256: (b.len() as u64 <= MAX_FILE_BYTES).then(|| sha256_digest(b)),
                }),
                _ => None,
            })
            .collect();
        if entries.len() > request.max_entries as usize {
            return Err(too_many(op::LIST_DIR, entries.len(), request.max_entries));
        }
        Ok(ListDirResult { entries })
    }
}

#[async_trait]
impl ListProjectDirMember for Inner {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        let drop_special = self.has(Fault::ListProjectDirDropsSpecial);
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        record
            .fs
            .physical_root(&request.root)
            .map_err(|r| read_refusal(op::LIST_PROJECT_DIR, r, &request.root))?;
        let entries: Vec<ProjectEntry> = record
            .fs
            .subtree(&request.root)
            .into_iter()
            .filter_map(|(path, node)| {
                let kind = match node {
                    FsNode::Directory => return None,
                    FsNode::File(b) => ProjectEntryKind::Regular {
                        size_bytes: b.len() as u64,
                        sha256: sha256_digest(b),
                    },
                    FsNode::Symlink(t) => ProjectEntryKind::Symlink {
                        target: t.clone().into(),
                    },
                    FsNode::Special(_) if drop_special => return None,
                    FsNode::Special(kind) => match kind {
                        SpecialKind::NullDevice | SpecialKind::ZeroDevice | SpecialKind::Device => {
                            ProjectEntryKind::Device
                        }
                        SpecialKind::Socket => ProjectEntryKind::Socket,
                        SpecialKind::Fifo => ProjectEntryKind::Fifo,
                        SpecialKind::Submodule => ProjectEntryKind::Submodule,
                        SpecialKind::Other => ProjectEntryKind::Other,
                    },
                };
                Some(ProjectEntry {
                    path: path.clone().into(),
                    kind,
                })
            })
            .collect();
        if entries.len() > request.max_entries as usize {
            return Err(too_many(
                op::LIST_PROJECT_DIR,
                entries.len(),
                request.max_entries,
            ));
        }
        Ok(ListProjectDirResult {
            entries,
            complete: !self.has(Fault::ListProjectDirIncomplete),
        })
    }
}

#[async_trait]
impl OpenProcessMember for Inner {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        let now = self.clock.now();
        let mut guard = self.lock();
        let st = &mut *guard;
        let record = find(&mut st.instances, &request.instance_id)?;
        if record.state != InstanceState::Active {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "active",
                record.state,
            ));
        }
        record.processes.retain(|p| p.is_live());
        if !record.processes.is_empty() && !self.has(Fault::SecondOpenProcessAllowed) {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "no live process",
                ConflictActual::ProcessAlreadyOpen,
            ));
        }
        let plan = self.plan(record, &st.external, &request);
        let shared = ProcessShared::new(ignored_signals(&request));
        record.processes.push(shared.clone());
        let req = &record.request;
        let evidence = SandboxProcessEvidence {
            provider: req.provider.clone(),
            instance_id: if self.has(Fault::ProcessEvidenceMismatch) {
                "mem-inst-000000".to_string()
            } else {
                request.instance_id.clone()
            },
            session_id: req.session_id.clone(),
            placement: req.placement,
            tier: req.target,
            network_mode: req.profile.network_policy.mode(),
            executable: request.executable.clone(),
            started_at: if self.has(Fault::ProcessStartsAtExpiry) {
                req.expires_at
            } else {
                now
            },
        };
        drop(guard);
        let (caller_in, child_in) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        let (child_out, caller_out) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        let (child_err, caller_err) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        spawn_child(
            shared.clone(),
            plan,
            ChildPipes {
                stdin: child_in,
                stdout: child_out,
                stderr: child_err,
            },
            self.has(Fault::StdinEofNeverDelivered),
        );
        Ok(SandboxProcess {
            input: Box::pin(caller_in.compat()),
            output: Box::pin(caller_out.compat()),
            error: Box::pin(caller_err.compat()),
            control: Arc::new(Control { shared }),
            evidence,
        })
    }
}
