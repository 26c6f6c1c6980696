//! [`MemoryProvider`]'s own surface: construction, faults, test listeners
//! and inspection; and the constructors of its envelope, instances,
//! snapshots and handoffs.

use super::*;

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

    pub(super) fn envelope() -> SandboxProviderCapabilities {
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
    pub(super) fn instance_value(
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

    pub(super) fn handoff<T: RollbackScope>(
        &self,
        op: Member,
        value: T,
        own: Target,
    ) -> Handoff<T> {
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

    /// A fresh tree: the fixture image's layout ([`crate::image`]), the
    /// output tree, the control root, every mount, and the profile's
    /// package records.
    pub(super) fn fresh_fs(request: &SandboxProvisionRequest) -> Fs {
        let mut fs = crate::image::base_tree();
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

    pub(super) fn prepare_mounts(fs: &mut Fs, request: &SandboxProvisionRequest) {
        fs.mkdir_all(CONTROL_ROOT);
        fs.mkdir_all(OUTPUT_PATH);
        for m in &request.mounts {
            fs.mkdir_all(&m.path);
        }
    }

    pub(super) fn snapshot_of(
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
        let fs = record.fs.without_jobs();
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
