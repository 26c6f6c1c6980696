//! The per-case context: request builders, tracked allocations, LIFO
//! teardown and the leak check.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use checkfu_sandbox_contract::{
    Bytes, Clock, Digest, ExitCause, NetworkPolicy, Resources, RetentionMode, SandboxCommand,
    SandboxCommandResult, SandboxFailure, SandboxInstance, SandboxMount, SandboxProfile,
    SandboxProvisionRequest, SandboxSnapshot, Timestamp,
};
use checkfu_sandbox_runtime::Adapter;
use sha2::{Digest as _, Sha256};

use crate::evidence::CaseFailure;
use crate::target::{ConformanceTarget, Listener};

/// A case step's result.
pub type Step<T> = Result<T, CaseFailure>;

/// A failure of `step` with a message and no closed error.
pub fn fail(step: &str, message: impl Into<String>) -> CaseFailure {
    CaseFailure {
        step: step.to_owned(),
        message: message.into(),
        errors: Vec::new(),
    }
}

/// Fails `step` unless `ok`.
pub fn ensure(ok: bool, step: &str, message: impl FnOnce() -> String) -> Step<()> {
    if ok {
        Ok(())
    } else {
        Err(fail(step, message()))
    }
}

/// A failure of `step` carrying the operation's closed errors.
pub fn op_failed(step: &str, failure: SandboxFailure) -> CaseFailure {
    CaseFailure {
        step: step.to_owned(),
        message: failure.to_string(),
        errors: failure.into_causes(),
    }
}

/// Awaits an operation and names the step when it fails.
pub async fn step<T>(name: &str, fut: impl Future<Output = Result<T, SandboxFailure>>) -> Step<T> {
    fut.await.map_err(|f| op_failed(name, f))
}

/// A fresh token no workload can predict: 32 hex digits (16 bytes) from
/// the operating system's CSPRNG. `label` only names the caller.
///
/// # Panics
/// When the operating system has no random source (getrandom fails); no
/// honest token can be made then.
pub fn fresh_token(label: &str) -> String {
    let mut bytes = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut bytes) {
        panic!("{label}: the operating system's random source failed: {e}");
    }
    hex::encode(bytes)
}

/// Everything a case needs.
pub struct Ctx {
    /// The adapter under test, behind the runtime.
    pub adapter: Adapter,
    /// The target.
    pub target: Arc<dyn ConformanceTarget>,
    /// The runtime's clock.
    pub clock: Arc<dyn Clock>,
    /// The case id.
    pub case_id: &'static str,
    /// When the case started, on the runtime's clock.
    pub started: Timestamp,
    instances: Mutex<Vec<String>>,
    snapshots: Mutex<Vec<String>>,
    listeners: Mutex<Vec<Listener>>,
}

impl Ctx {
    /// A context for `case_id`.
    pub fn new(
        adapter: Adapter,
        target: Arc<dyn ConformanceTarget>,
        case_id: &'static str,
    ) -> Self {
        let clock = target.clock();
        let started = clock.now();
        Ctx {
            adapter,
            target,
            clock,
            case_id,
            started,
            instances: Mutex::new(Vec::new()),
            snapshots: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// The instant `seconds` after the case started.
    pub fn at(&self, seconds: i64) -> Timestamp {
        self.started.add_seconds(seconds)
    }

    /// A profile for this case.
    pub fn profile(
        &self,
        retention: RetentionMode,
        network_policy: NetworkPolicy,
    ) -> SandboxProfile {
        SandboxProfile {
            profile_id: format!("conformance-{}", self.case_id),
            profile_version: 1,
            profile_digest: Digest::from_sha256_bytes(
                Sha256::digest(self.case_id.as_bytes()).into(),
            ),
            retention,
            network_policy,
            max_duration_seconds: 120,
            resources: Resources::default(),
            packages: Vec::new(),
        }
    }

    /// A provision request in `session_id` expiring `expires_in_seconds`
    /// after the case started.
    pub fn request(
        &self,
        session_id: &str,
        profile: SandboxProfile,
        mounts: Vec<SandboxMount>,
        expires_in_seconds: i64,
    ) -> SandboxProvisionRequest {
        let (tier, platform) = self.target.tier_platform();
        SandboxProvisionRequest {
            provider: self.adapter.provider_id().to_owned(),
            placement: self.adapter.envelope().placement,
            workspace_id: "workspace-conformance".into(),
            session_id: session_id.to_owned(),
            run_id: format!("run-{}", self.case_id),
            attempt_id: "attempt-1".into(),
            lease_id: format!("lease-{}", self.case_id),
            lease_epoch: 1,
            target: tier,
            profile,
            platform,
            root_image: self.target.root_image(),
            mounts,
            expires_at: self.at(expires_in_seconds),
        }
    }

    /// Records an instance for teardown.
    pub fn track_instance(&self, id: &str) {
        lock(&self.instances).push(id.to_owned());
    }

    /// Records a snapshot for teardown.
    pub fn track_snapshot(&self, id: &str) {
        lock(&self.snapshots).push(id.to_owned());
    }

    /// Provisions and tracks.
    pub async fn provision(
        &self,
        name: &str,
        request: SandboxProvisionRequest,
    ) -> Step<SandboxInstance> {
        let instance = step(name, self.adapter.provision(request)).await?;
        self.track_instance(&instance.instance_id);
        Ok(instance)
    }

    /// Snapshots and tracks.
    pub async fn snapshot(
        &self,
        name: &str,
        instance_id: &str,
        expires_at: Timestamp,
    ) -> Step<SandboxSnapshot> {
        let snapshot = step(name, self.adapter.snapshot(instance_id, expires_at)).await?;
        self.track_snapshot(&snapshot.snapshot_id);
        Ok(snapshot)
    }

    /// Starts a listener, tracked for stopping.
    pub async fn listener(&self, name: &str) -> Step<Listener> {
        let l = self
            .target
            .start_listener()
            .await
            .map_err(|m| fail(name, m.to_string()))?;
        lock(&self.listeners).push(l.clone());
        Ok(l)
    }

    /// Executes a probe command and returns its settlement.
    pub async fn run(
        &self,
        name: &str,
        instance_id: &str,
        command: SandboxCommand,
    ) -> Step<SandboxCommandResult> {
        step(name, self.adapter.execute(instance_id, command)).await
    }

    /// Executes and requires exit code 0.
    pub async fn run_ok(
        &self,
        name: &str,
        instance_id: &str,
        command: SandboxCommand,
    ) -> Step<SandboxCommandResult> {
        let r = self.run(name, instance_id, command).await?;
        ensure(r.exit == ExitCause::ExitCode(0), name, || {
            format!(
                "expected exit code 0, actual {:?}; stderr {:?}",
                r.exit,
                String::from_utf8_lossy(r.stderr_base64.as_slice())
            )
        })?;
        Ok(r)
    }

    /// Destroys every tracked snapshot and instance, last created first,
    /// stops listeners, then checks that none of them is left at the
    /// provider. Teardown errors and leaks are reported; nothing the case
    /// did not create is touched.
    pub async fn teardown(&self) -> Step<()> {
        let mut problems = Vec::new();
        let snapshots: Vec<String> = lock(&self.snapshots).iter().rev().cloned().collect();
        let instances: Vec<String> = lock(&self.instances).iter().rev().cloned().collect();
        for id in &snapshots {
            if let Err(f) = self.adapter.destroy_snapshot(id).await {
                problems.push(format!("destroy_snapshot {id}: {f}"));
            }
        }
        for id in &instances {
            if let Err(f) = self.adapter.destroy(id).await {
                problems.push(format!("destroy {id}: {f}"));
            }
        }
        let listeners: Vec<Listener> = std::mem::take(&mut *lock(&self.listeners));
        for l in &listeners {
            self.target.stop_listener(l).await;
        }
        match self.target.live_objects().await {
            Ok(live) => {
                for id in &instances {
                    if live.instances.contains(id) {
                        problems.push(format!("instance {id} still exists after teardown"));
                    }
                }
                for id in &snapshots {
                    if live.snapshots.contains(id) {
                        problems.push(format!("snapshot {id} still exists after teardown"));
                    }
                }
            }
            Err(m) => problems.push(format!("could not list live objects: {m}")),
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(fail("teardown and leak check", problems.join("; ")))
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A probe command from argv, working directory `/`, no environment, no
/// stdin, 60 s, 1 MiB per stream.
pub fn cmd(argv: &[&str]) -> SandboxCommand {
    SandboxCommand {
        executable: argv[0].to_owned(),
        arguments: argv[1..].iter().map(|s| (*s).to_owned()).collect(),
        working_directory: "/".into(),
        environment: BTreeMap::new(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1024 * 1024,
    }
}

/// [`cmd`] with stdin bytes.
pub fn cmd_stdin(argv: &[&str], stdin: &[u8]) -> SandboxCommand {
    SandboxCommand {
        stdin_base64: Some(Bytes(stdin.to_vec())),
        ..cmd(argv)
    }
}
