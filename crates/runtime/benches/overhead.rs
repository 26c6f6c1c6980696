//! The runtime's per-call overhead: a validated call through an
//! [`Adapter`] against the same call made directly on a trivial provider
//! (execute, readFile, provision + activate).
//!
//! Run briefly with
//! `cargo bench -p checkfu-sandbox-runtime -- --warm-up-time 1 --measurement-time 3`.

// A bench crate: its items are not a public API.
#![allow(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};
use criterion::{criterion_group, criterion_main, Criterion};

const T0: &str = "2026-11-30T07:30:00.000Z";
const OUT: &str = "/mnt/session/outputs";

fn envelope() -> SandboxProviderCapabilities {
    SandboxProviderCapabilities {
        placement: Placement::Runner,
        tiers: vec![Tier::Container],
        platforms: vec![Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        }],
        image_mode: ImageMode::Profile,
        package_managers: vec![],
        network_modes: vec![NetworkMode::None],
        retention_modes: vec![RetentionMode::EphemeralZdr],
        snapshots: false,
        snapshot_clone: false,
        snapshot_custody: SnapshotCustody::Runner,
        list_dir: false,
        physically_contained_file_read: true,
        active_mount_write: false,
        egress_certification: EgressCertification::Unsupported,
        enforcement: Enforcement::default(),
        max_mounts: 4,
        provider_revision: "bench-rev".into(),
        materialization_revision: "bench-mat".into(),
    }
}

fn request() -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: "trivial".into(),
        placement: Placement::Runner,
        workspace_id: "ws".into(),
        session_id: "session".into(),
        run_id: "run".into(),
        attempt_id: "attempt".into(),
        lease_id: "lease".into(),
        lease_epoch: 1,
        target: Tier::Container,
        profile: SandboxProfile {
            profile_id: "profile".into(),
            profile_version: 1,
            profile_digest: Digest::parse(
                "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            )
            .unwrap(),
            retention: RetentionMode::EphemeralZdr,
            network_policy: NetworkPolicy::None,
            max_duration_seconds: 600,
            resources: Resources::default(),
            packages: vec![],
        },
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: ImageReference::parse(
            "fixture@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        )
        .unwrap(),
        mounts: vec![SandboxMount {
            path: "/workspace/project".into(),
            access: MountAccess::ReadWrite,
        }],
        expires_at: Timestamp::parse(T0).unwrap().add_seconds(3600),
    }
}

fn command() -> SandboxCommand {
    SandboxCommand {
        executable: "true".into(),
        arguments: vec!["a".into(), "b".into()],
        working_directory: "/workspace/project".into(),
        environment: BTreeMap::from([("PATH".into(), "/bin".into())]),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1024,
    }
}

struct NoRollback;

#[async_trait]
impl Rollback for NoRollback {
    async fn rollback(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// A provider that does as little as an honest one can.
struct Trivial {
    next: AtomicU64,
    envelope: SandboxProviderCapabilities,
    pending: Mutex<HashMap<String, SandboxInstance>>,
    content: Vec<u8>,
}

fn unsupported(operation: Operation) -> SandboxError {
    SandboxError::failed(operation, FailureReason::ProviderError, "not in the bench")
}

#[async_trait]
impl SandboxProvider for Trivial {
    fn provider_id(&self) -> &str {
        "trivial"
    }
    fn capabilities(&self) -> SandboxProviderCapabilities {
        self.envelope.clone()
    }
    async fn provision(
        &self,
        r: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let id = format!("i{}", self.next.fetch_add(1, Ordering::Relaxed));
        let instance = SandboxInstance {
            instance_id: id.clone(),
            provider: r.provider,
            placement: r.placement,
            state: InstanceState::Provisioning,
            workspace_id: r.workspace_id,
            session_id: r.session_id,
            run_id: r.run_id,
            attempt_id: r.attempt_id,
            lease_id: r.lease_id,
            lease_epoch: r.lease_epoch,
            target: r.target,
            materialization: Materialization {
                profile_digest: r.profile.profile_digest.clone(),
                image_reference: r.root_image.clone(),
                image_digest: r.root_image.digest(),
                provider_revision: self.envelope.provider_revision.clone(),
                materialization_revision: self.envelope.materialization_revision.clone(),
            },
            profile: r.profile,
            platform: r.platform,
            root_image: r.root_image,
            mounts: r.mounts,
            output_path: OUT.into(),
            expires_at: r.expires_at,
        };
        self.pending.lock().unwrap().insert(id, instance.clone());
        Ok(Handoff {
            value: instance,
            rollback: Arc::new(NoRollback),
        })
    }
    async fn write_file(&self, _: WriteFileRequest) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn activate(&self, r: ActivateRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        let mut instance = self.pending.lock().unwrap().remove(&r.instance_id).ok_or(
            SandboxError::SandboxInstanceNotFound {
                instance_id: r.instance_id,
            },
        )?;
        instance.state = InstanceState::Active;
        Ok(Handoff {
            value: instance,
            rollback: Arc::new(NoRollback),
        })
    }
    async fn execute(&self, _: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        let now = Timestamp::parse(T0).unwrap();
        Ok(SandboxCommandResult {
            exit: ExitCause::ExitCode(0),
            stdout_base64: Bytes::from("ok\n"),
            stderr_base64: Bytes::default(),
            started_at: now,
            finished_at: now,
        })
    }
    async fn read_file(&self, r: ReadFileRequest) -> Result<SandboxFileContent, SandboxError> {
        Ok(SandboxFileContent {
            path: r.path,
            content_base64: Bytes(self.content.clone()),
        })
    }
    async fn snapshot(&self, _: SnapshotRequest) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        Err(unsupported(op::SNAPSHOT))
    }
    async fn clone_snapshot(
        &self,
        _: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        Err(unsupported(op::CLONE_SNAPSHOT))
    }
    async fn release(
        &self,
        _: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        Ok(Handoff {
            value: ReleaseDisposition::Destroyed,
            rollback: Arc::new(NoRollback),
        })
    }
    async fn resume(&self, _: ResumeRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        Err(unsupported(op::RESUME))
    }
    async fn destroy(&self, _: DestroyRequest) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn destroy_snapshot(&self, _: DestroySnapshotRequest) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn cleanup(&self, _: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        Ok(CleanupResult::default())
    }
}

fn setup() -> (Arc<Trivial>, Adapter) {
    let provider = Arc::new(Trivial {
        next: AtomicU64::new(0),
        envelope: envelope(),
        pending: Mutex::default(),
        content: vec![b'x'; 1024],
    });
    let clock = ManualClock::new(Timestamp::parse(T0).unwrap());
    let mut runtime = SandboxRuntime::new(Arc::new(clock));
    runtime.register(provider.clone());
    let adapter = runtime.adapter("trivial").unwrap();
    (provider, adapter)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Times `iters` sequential calls of `f` inside one `block_on`.
fn timed<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            f().await;
        }
        start.elapsed()
    })
}

fn execute(c: &mut Criterion) {
    let rt = rt();
    let (provider, adapter) = setup();
    let id = rt.block_on(async {
        let i = adapter.provision(request()).await.unwrap();
        adapter.activate(&i.instance_id).await.unwrap().instance_id
    });
    let mut g = c.benchmark_group("execute");
    g.bench_function("direct", |b| {
        b.iter_custom(|n| {
            timed(&rt, n, || async {
                let r = provider
                    .execute(ExecuteRequest {
                        instance_id: id.clone(),
                        command: command(),
                    })
                    .await
                    .unwrap();
                std::hint::black_box(r);
            })
        })
    });
    g.bench_function("validated", |b| {
        b.iter_custom(|n| {
            timed(&rt, n, || async {
                let r = adapter.execute(&id, command()).await.unwrap();
                std::hint::black_box(r);
            })
        })
    });
    g.finish();
}

fn read_file(c: &mut Criterion) {
    let rt = rt();
    let (provider, adapter) = setup();
    let id = rt.block_on(async {
        let i = adapter.provision(request()).await.unwrap();
        adapter.activate(&i.instance_id).await.unwrap().instance_id
    });
    let path = "/workspace/project/src/main.rs";
    let mut g = c.benchmark_group("read_file");
    g.bench_function("direct", |b| {
        b.iter_custom(|n| {
            timed(&rt, n, || async {
                let r = provider
                    .read_file(ReadFileRequest {
                        instance_id: id.clone(),
                        path: path.into(),
                        allowed_root: "/workspace/project".into(),
                        maximum_bytes: 4096,
                    })
                    .await
                    .unwrap();
                std::hint::black_box(r);
            })
        })
    });
    g.bench_function("validated", |b| {
        b.iter_custom(|n| {
            timed(&rt, n, || async {
                let r = adapter.read_file(&id, path, 4096).await.unwrap();
                std::hint::black_box(r);
            })
        })
    });
    g.finish();
}

fn provision_activate(c: &mut Criterion) {
    let rt = rt();
    let mut g = c.benchmark_group("provision_activate");
    g.bench_function("direct", |b| {
        b.iter_custom(|n| {
            let (provider, _) = setup();
            timed(&rt, n, || async {
                let p = provider.provision(request()).await.unwrap();
                let a = provider
                    .activate(ActivateRequest {
                        instance_id: p.value.instance_id,
                    })
                    .await
                    .unwrap();
                std::hint::black_box(a.value);
            })
        })
    });
    g.bench_function("validated", |b| {
        b.iter_custom(|n| {
            // A fresh adapter per sample: the runtime keeps a record of
            // every instance it has accepted.
            let (_, adapter) = setup();
            timed(&rt, n, || async {
                let p = adapter.provision(request()).await.unwrap();
                let a = adapter.activate(&p.instance_id).await.unwrap();
                std::hint::black_box(a);
            })
        })
    });
    g.finish();
}

criterion_group!(benches, execute, read_file, provision_activate);
criterion_main!(benches);
