//! What every figure shares: requests, the `true` command, the docker CLI,
//! a provider under measurement ([`Subject`]), sixteen tasks at once and
//! error mapping.

use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};

pub(crate) fn fail<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub(crate) async fn docker_cli(args: &[&str]) -> Result<Vec<u8>, String> {
    let out = tokio::process::Command::new("docker")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(fail("docker"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub(crate) fn profile(retention: RetentionMode) -> SandboxProfile {
    SandboxProfile {
        profile_id: "bench".into(),
        profile_version: 1,
        profile_digest: Digest::parse(&format!("sha256:{}", "b".repeat(64)))
            .expect("literal digest"),
        retention,
        network_policy: NetworkPolicy::None,
        max_duration_seconds: 600,
        resources: Resources::default(),
        packages: Vec::new(),
    }
}

pub(crate) fn request(
    adapter: &Adapter,
    image: &ImageReference,
    retention: RetentionMode,
    mounts: Vec<SandboxMount>,
    expires_in: i64,
    clock: &dyn Clock,
) -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: adapter.provider_id().into(),
        placement: adapter.envelope().placement,
        workspace_id: "bench".into(),
        session_id: "bench".into(),
        run_id: "bench".into(),
        attempt_id: "1".into(),
        lease_id: "bench".into(),
        lease_epoch: 1,
        target: Tier::Container,
        profile: profile(retention),
        platform: adapter.envelope().platforms[0],
        root_image: image.clone(),
        mounts,
        expires_at: clock.now().add_seconds(expires_in),
    }
}

pub(crate) fn true_cmd() -> SandboxCommand {
    SandboxCommand {
        executable: "true".into(),
        arguments: vec![],
        working_directory: "/".into(),
        environment: Default::default(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1 << 20,
    }
}

pub(crate) fn f(e: SandboxFailure) -> String {
    e.to_string()
}

/// A provider under measurement: its adapter in a runtime of its own, the
/// image its instances start from, the clock, and the state directory it
/// keeps (removed when the subject is dropped).
pub(crate) struct Subject {
    pub(crate) adapter: Adapter,
    pub(crate) image: ImageReference,
    pub(crate) clock: Arc<dyn Clock>,
    _state: tempfile::TempDir,
}

impl Subject {
    /// `provider` (answering to `provider_id`) registered in a fresh
    /// runtime on `clock`.
    pub(crate) fn new(
        provider: Arc<dyn SandboxProvider>,
        provider_id: &str,
        image: ImageReference,
        clock: Arc<dyn Clock>,
        state: tempfile::TempDir,
    ) -> Result<Subject, String> {
        let mut rt = SandboxRuntime::new(clock.clone());
        rt.register(provider);
        let adapter = rt.adapter(provider_id).map_err(f)?;
        Ok(Subject {
            adapter,
            image,
            clock,
            _state: state,
        })
    }

    /// A provision request of this subject, expiring `expires_in` seconds
    /// from now.
    pub(crate) fn request(
        &self,
        retention: RetentionMode,
        mounts: Vec<SandboxMount>,
        expires_in: i64,
    ) -> SandboxProvisionRequest {
        request(
            &self.adapter,
            &self.image,
            retention,
            mounts,
            expires_in,
            self.clock.as_ref(),
        )
    }

    /// A durable round trip with `mounts`: provision, activate, write a
    /// file in the output tree, release with a snapshot, resume, read the
    /// file back, destroy both.
    pub(crate) async fn round_trip(&self, mounts: &[SandboxMount]) -> Result<(), String> {
        let make = || self.request(RetentionMode::Durable, mounts.to_vec(), 3600);
        let adapter = &self.adapter;
        let i = adapter.provision(make()).await.map_err(f)?;
        adapter.activate(&i.instance_id).await.map_err(f)?;
        adapter
            .write_file(
                &i.instance_id,
                "/mnt/session/outputs/state",
                b"state".to_vec(),
            )
            .await
            .map_err(f)?;
        let disposition = adapter
            .release(&i.instance_id, Some(self.clock.now().add_seconds(3600)))
            .await
            .map_err(f)?;
        let ReleaseDisposition::Released { snapshot: snap } = disposition else {
            return Err("a durable release settled no snapshot".to_string());
        };
        let j = adapter.resume(make(), snap.clone()).await.map_err(f)?;
        let got = adapter
            .read_file(&j.instance_id, "/mnt/session/outputs/state", 1024)
            .await
            .map_err(f)?;
        adapter.destroy(&j.instance_id).await.map_err(f)?;
        adapter
            .destroy_snapshot(&snap.snapshot_id)
            .await
            .map_err(f)?;
        if got == b"state" {
            Ok(())
        } else {
            Err("state lost".to_string())
        }
    }
}

/// Runs sixteen tasks made by `one` at once and waits for all of them.
pub(crate) async fn sixteen<F, Fut>(mut one: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..16 {
        set.spawn(one());
    }
    while let Some(r) = set.join_next().await {
        r.map_err(fail("join"))??;
    }
    Ok(())
}
