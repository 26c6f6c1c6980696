//! What every figure shares: requests, the `true` command, the docker CLI
//! and error mapping.

use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::Adapter;

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
