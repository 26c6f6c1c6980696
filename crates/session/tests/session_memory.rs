//! The session library on the memory oracle, called directly: statuses,
//! staging and output copy, durable release, unwinding on failure and on
//! cancellation. Every test ends with the oracle holding no instance.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checkfu_sandbox_contract::provider::ResolveImageMember;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_session::{run, Event, MountPlan, MountSource, RunPlan, SessionError};
use tokio_util::sync::CancellationToken;

fn plan(command: &[&str]) -> RunPlan {
    RunPlan {
        image: "demo:1".into(),
        mounts: Vec::new(),
        command: SandboxCommand {
            executable: command[0].into(),
            arguments: command[1..].iter().map(|a| (*a).to_owned()).collect(),
            working_directory: "/workspace".into(),
            environment: BTreeMap::new(),
            stdin_base64: None,
            timeout_seconds: 60,
            output_limit_bytes: 1 << 20,
        },
        outputs: None,
        durable: false,
        prompt: None,
        resources: Resources::default(),
        enrollment: None,
        workspace_id: "cli".into(),
        snapshot_retention_seconds: checkfu_sandbox_session::SNAPSHOT_RETENTION_SECONDS,
        resume: None,
    }
}

/// Events as lines, for assertions.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl checkfu_sandbox_session::Observer for Log {
    fn event(&self, event: Event<'_>) {
        let line = match event {
            Event::Output { stdout, stderr } => format!(
                "output {:?} {:?}",
                String::from_utf8_lossy(stdout),
                String::from_utf8_lossy(stderr)
            ),
            Event::Cancelled { instance_id } => format!("cancelled {instance_id:?}"),
            Event::Image(i) => format!("image {}", i.as_str()),
            Event::Snapshot(s) => format!("snapshot {}", s.snapshot_id),
            other => format!("{other:?}"),
        };
        self.0.lock().unwrap().push(line);
    }
}

async fn session(
    memory: &MemoryProvider,
    plan: &RunPlan,
    log: &Log,
    cancel: CancellationToken,
) -> Result<checkfu_sandbox_session::RunOutcome, SessionError> {
    let provider: Arc<dyn SandboxProvider> = Arc::new(memory.clone());
    run(provider, Arc::new(SystemClock), plan, log, cancel).await
}

#[tokio::test]
async fn the_status_is_the_workloads_and_the_instance_is_gone() {
    let memory = MemoryProvider::with_system_clock();
    for (command, status) in [
        (&["sh", "-c", "exit 42"][..], 42),
        (&["true"][..], 0),
        (&["no-such-command"][..], 127),
    ] {
        let log = Log::default();
        let outcome = session(&memory, &plan(command), &log, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(outcome.status, status, "{command:?}");
        assert!(
            log.lines()[0].starts_with("image demo@sha256:"),
            "{:?}",
            log.lines()
        );
        assert!(memory.live_instances().is_empty());
    }
}

#[tokio::test]
async fn a_staged_mount_is_copied_out_through_the_output_tree() {
    let memory = MemoryProvider::with_system_clock();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("x"), b"payload").unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut p = plan(&["cp", "/data/x", "/mnt/session/outputs/y"]);
    p.mounts.push(MountPlan {
        input: "data".into(),
        source: MountSource::Folder(data.path().to_path_buf()),
        mount: SandboxMount {
            path: "/data".into(),
            access: MountAccess::ReadOnly,
        },
    });
    p.outputs = Some(out.path().join("copied"));
    p.check().unwrap();
    let log = Log::default();
    let outcome = session(&memory, &p, &log, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, 0);
    assert!(outcome.outputs_complete());
    assert_eq!(outcome.outputs.unwrap().copied, 1);
    assert_eq!(
        std::fs::read(out.path().join("copied/y")).unwrap(),
        b"payload"
    );
    assert!(memory.live_instances().is_empty());
}

#[tokio::test]
async fn a_durable_run_settles_a_snapshot() {
    let memory = MemoryProvider::with_system_clock();
    let mut p = plan(&["true"]);
    p.durable = true;
    let log = Log::default();
    let outcome = session(&memory, &p, &log, CancellationToken::new())
        .await
        .unwrap();
    let snapshot = outcome.snapshot.expect("a snapshot");
    assert_eq!(memory.live_snapshots(), vec![snapshot.snapshot_id.clone()]);
    assert!(log
        .lines()
        .contains(&format!("snapshot {}", snapshot.snapshot_id)));
    assert!(memory.live_instances().is_empty());
}

#[tokio::test]
async fn a_prompt_runs_through_open_process() {
    let memory = MemoryProvider::with_system_clock();
    let mut p = plan(&["cat"]);
    p.prompt = Some(b"hello prompt".to_vec());
    let log = Log::default();
    let outcome = session(&memory, &p, &log, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, 0);
    assert!(
        log.lines()
            .contains(&"output \"hello prompt\" \"\"".to_owned()),
        "{:?}",
        log.lines()
    );
    assert!(memory.live_instances().is_empty());
}

#[tokio::test]
async fn a_failure_after_provision_destroys_the_instance() {
    let memory = MemoryProvider::with_system_clock();
    let file = tempfile::NamedTempFile::new().unwrap();
    let mut p = plan(&["true"]);
    // Not refused by a check (none is made here): the copy fails on the host.
    p.outputs = Some(file.path().to_path_buf());
    let err = session(&memory, &p, &Log::default(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SessionError::Host(_)), "{err:?}");
    assert!(memory.live_instances().is_empty());
    assert!(p.check().is_err(), "check refuses the same plan up front");
}

#[tokio::test]
async fn an_unknown_mount_source_is_refused_before_provisioning() {
    let mut p = plan(&["true"]);
    p.mounts.push(MountPlan {
        input: "--mount /no/such/dir:/data".into(),
        source: MountSource::Folder("/no/such/dir".into()),
        mount: SandboxMount {
            path: "/data".into(),
            access: MountAccess::ReadOnly,
        },
    });
    match p.check() {
        Err(SessionError::Input { input, .. }) => assert_eq!(input, "--mount /no/such/dir:/data"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn cancellation_destroys_the_instance_and_reports_it() {
    let memory = MemoryProvider::with_system_clock();
    let cancel = CancellationToken::new();
    let log = Log::default();
    let p = plan(&["sleep", "30"]);
    let fire = {
        let cancel = cancel.clone();
        let memory = memory.clone();
        async move {
            // Cancel once the workload is running.
            while memory.live_instances().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        }
    };
    let (result, ()) = tokio::join!(session(&memory, &p, &log, cancel.clone()), fire);
    assert_eq!(result.unwrap_err(), SessionError::Cancelled);
    let cancelled: Vec<String> = log
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("cancelled"))
        .collect();
    assert_eq!(cancelled.len(), 1);
    assert!(cancelled[0].contains("mem-inst-"), "{cancelled:?}");
    assert!(memory.live_instances().is_empty());
}

#[tokio::test]
async fn a_resumed_checkpoint_keeps_the_files_of_the_durable_run() {
    let memory = MemoryProvider::with_system_clock();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("x"), b"kept across resume").unwrap();
    let mut first = plan(&["cp", "/data/x", "/mnt/session/outputs/y"]);
    first.durable = true;
    first.mounts.push(MountPlan {
        input: "data".into(),
        source: MountSource::Folder(data.path().to_path_buf()),
        mount: SandboxMount {
            path: "/data".into(),
            access: MountAccess::ReadOnly,
        },
    });
    let log = Log::default();
    let outcome = session(&memory, &first, &log, CancellationToken::new())
        .await
        .unwrap();
    let checkpoint = outcome.checkpoint.expect("a checkpoint");
    assert_eq!(Some(&checkpoint.snapshot), outcome.snapshot.as_ref());
    assert_eq!(checkpoint.mounts, first.declared_mounts());

    // The resumed instance has the output file the first run wrote, and
    // the mount it declared.
    let out = tempfile::tempdir().unwrap();
    let mut second = plan(&["cp", "/data/x", "/mnt/session/outputs/z"]);
    second.resume = Some(checkpoint.clone());
    second.outputs = Some(out.path().join("copied"));
    second.check().unwrap();
    let outcome = session(&memory, &second, &log, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, 0);
    assert_eq!(
        std::fs::read(out.path().join("copied/y")).unwrap(),
        b"kept across resume"
    );
    assert_eq!(
        std::fs::read(out.path().join("copied/z")).unwrap(),
        b"kept across resume"
    );
    assert!(memory.live_instances().is_empty());

    // Another workspace is refused by the runtime, naming both values.
    let mut other = plan(&["true"]);
    other.workspace_id = "elsewhere".into();
    other.resume = Some(checkpoint.clone());
    match session(&memory, &other, &log, CancellationToken::new()).await {
        Err(SessionError::Sandbox(f)) => {
            let text = f.to_string();
            assert!(text.contains("snapshot.workspace_id"), "{text}");
            assert!(text.contains("elsewhere") && text.contains("cli"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // Mounts given with a resume are refused before anything runs.
    let mut mounted = first.clone();
    mounted.resume = Some(checkpoint);
    assert!(matches!(mounted.check(), Err(SessionError::Sandbox(_))));
    assert!(memory.live_instances().is_empty());
    for id in memory.live_snapshots() {
        let _ = memory
            .destroy_snapshot(checkfu_sandbox_contract::DestroySnapshotRequest { snapshot_id: id })
            .await;
    }
}

/// The oracle, except that release takes `delay` before it starts.
struct SlowRelease {
    inner: MemoryProvider,
    delay: Duration,
}

#[async_trait::async_trait]
impl SandboxProvider for SlowRelease {
    fn provider_id(&self) -> &str {
        self.inner.provider_id()
    }
    fn capabilities(&self) -> SandboxProviderCapabilities {
        self.inner.capabilities()
    }
    async fn provision(
        &self,
        r: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.inner.provision(r).await
    }
    async fn write_file(&self, r: WriteFileRequest) -> Result<(), SandboxError> {
        self.inner.write_file(r).await
    }
    async fn activate(&self, r: ActivateRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.inner.activate(r).await
    }
    async fn execute(&self, r: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        self.inner.execute(r).await
    }
    async fn read_file(&self, r: ReadFileRequest) -> Result<SandboxFileContent, SandboxError> {
        self.inner.read_file(r).await
    }
    async fn snapshot(&self, r: SnapshotRequest) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.inner.snapshot(r).await
    }
    async fn clone_snapshot(
        &self,
        r: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.inner.clone_snapshot(r).await
    }
    async fn release(
        &self,
        r: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        tokio::time::sleep(self.delay).await;
        self.inner.release(r).await
    }
    async fn resume(&self, r: ResumeRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.inner.resume(r).await
    }
    async fn destroy(&self, r: DestroyRequest) -> Result<(), SandboxError> {
        self.inner.destroy(r).await
    }
    async fn destroy_snapshot(&self, r: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.inner.destroy_snapshot(r).await
    }
    async fn cleanup(&self, r: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.inner.cleanup(r).await
    }
    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        self.inner.resolve_image()
    }
}

/// The durable snapshot at the end of a run is bounded by the run's
/// deadline (at least `SNAPSHOT_MIN_SECONDS` after the workload): past it
/// the run fails with a typed timeout, the late snapshot is rolled back
/// and the instance destroyed.
#[tokio::test(start_paused = true)]
async fn a_snapshot_past_the_runs_deadline_is_a_typed_timeout() {
    use checkfu_sandbox_contract::{provider::op, FailureReason, SandboxFailure};
    use checkfu_sandbox_session::SNAPSHOT_MIN_SECONDS;
    let memory = MemoryProvider::with_system_clock();
    let slow = SlowRelease {
        inner: memory.clone(),
        delay: Duration::from_secs(SNAPSHOT_MIN_SECONDS + 10),
    };
    let mut p = plan(&["true"]);
    p.durable = true;
    p.command.timeout_seconds = 1;
    let started = tokio::time::Instant::now();
    let err = run(
        Arc::new(slow),
        Arc::new(SystemClock),
        &p,
        &Log::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let SessionError::Sandbox(failure) = &err else {
        panic!("{err:?}");
    };
    let first: Vec<_> = SandboxFailure::causes(failure).cloned().collect();
    assert!(
        matches!(
            &first[0],
            SandboxError::SandboxOperationFailed { operation, reason: FailureReason::TimedOut, .. }
                if *operation == op::RELEASE
        ),
        "{err:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(SNAPSHOT_MIN_SECONDS)
            && waited < Duration::from_secs(SNAPSHOT_MIN_SECONDS + 31),
        "{waited:?}"
    );
    assert!(memory.live_instances().is_empty());
    assert!(
        memory.live_snapshots().is_empty(),
        "the late snapshot is rolled back"
    );
}

#[tokio::test]
async fn the_workloads_status_is_reported_before_the_release() {
    let memory = MemoryProvider::with_system_clock();
    let mut p = plan(&["sh", "-c", "exit 42"]);
    p.durable = true;
    let log = Log::default();
    let outcome = session(&memory, &p, &log, CancellationToken::new())
        .await
        .unwrap();
    let snapshot = outcome.snapshot.expect("a snapshot");
    let lines = log.lines();
    let at = |want: &str| {
        lines
            .iter()
            .position(|l| l == want)
            .unwrap_or_else(|| panic!("no {want:?} in {lines:?}"))
    };
    // A failure of the release would be the session's; the status came
    // before it.
    assert!(
        at("Exited { status: 42 }") < at(&format!("snapshot {}", snapshot.snapshot_id)),
        "{lines:?}"
    );
    assert!(memory.live_instances().is_empty());
}
