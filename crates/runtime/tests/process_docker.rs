//! openProcess end to end on the real Docker daemon (real processes),
//! through [`SandboxRuntime`] and [`Adapter::open_process`] (spec
//! "openProcess"; DESIGN D18). The scenarios live in `process_common`; the
//! same ones run on the memory oracle in `process_memory.rs`.
//!
//! Gate: without a daemon each test prints a `SKIP` line and returns,
//! except under `CI=true`, where it fails. Each test has its own provider
//! scope and state directory; at the end everything of that scope is
//! destroyed and checked gone (also when the test panics).

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod process_common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::host_platform;
use checkfu_sandbox_docker::{DockerConfig, DockerProvider};
use checkfu_sandbox_runtime::SandboxRuntime;
use process_common::*;

/// One provider scope with one active instance; swept and leak-checked on
/// drop.
struct DockerEnv {
    env: Env,
    provider: DockerProvider,
    scope: String,
    state_dir: PathBuf,
}

/// Connects (or skips), builds the fixture, provisions and activates one
/// instance in a scope unique to `test`.
async fn docker_env(test: &str) -> Option<DockerEnv> {
    let docker = checkfu_test_support::gate::docker_or_skip(test).await?;
    let pinned = checkfu_test_support::docker::fixture_ref(&docker).await;
    let (scope, state_dir) = checkfu_test_support::docker::scope_for(test);
    let provider = DockerProvider::with_docker(
        docker,
        DockerConfig {
            state_dir: state_dir.clone(),
            scope: scope.clone(),
            clock: Arc::new(SystemClock),
            pool_size: 0,
            exec_path: None,
        },
    )
    .expect("provider");
    let mut runtime = SandboxRuntime::new(Arc::new(SystemClock));
    runtime.register(Arc::new(provider.clone()));
    let adapter = runtime.adapter("docker").expect("adapter");
    // Built before provisioning so a failure below is still swept.
    let mut this = DockerEnv {
        env: Env {
            adapter: adapter.clone(),
            instance_id: String::new(),
            working_directory: "/".into(),
        },
        provider,
        scope,
        state_dir,
    };
    let request = SandboxProvisionRequest {
        provider: "docker".into(),
        placement: adapter.envelope().placement,
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        run_id: "run-1".into(),
        attempt_id: "attempt-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 1,
        target: Tier::Container,
        profile: SandboxProfile {
            profile_id: "profile-1".into(),
            profile_version: 1,
            profile_digest: Digest::from_sha256_bytes([7; 32]),
            retention: RetentionMode::EphemeralZdr,
            network_policy: NetworkPolicy::None,
            max_duration_seconds: 600,
            resources: Resources {
                cpu_millis: Some(1000),
                memory_bytes: Some(256 << 20),
                pids: Some(256),
                disk_bytes: None,
            },
            packages: Vec::new(),
        },
        platform: host_platform(),
        root_image: ImageReference::parse(&pinned).unwrap(),
        mounts: Vec::new(),
        expires_at: Timestamp::now().add_seconds(900),
    };
    let instance = adapter.provision(request).await.expect("provision");
    this.env.instance_id = instance.instance_id.clone();
    adapter
        .activate(&instance.instance_id)
        .await
        .expect("activate");
    Some(this)
}

impl DockerEnv {
    /// Destroys the instance through the runtime (the sweep on drop then
    /// finds nothing).
    async fn finish(self) {
        self.env
            .adapter
            .destroy(&self.env.instance_id)
            .await
            .expect("destroy instance");
    }
}

impl Drop for DockerEnv {
    fn drop(&mut self) {
        checkfu_test_support::docker::sweep_scope_on_drop(
            self.provider.clone(),
            self.scope.clone(),
            self.state_dir.clone(),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_cat_returns_the_prompt_after_half_close() {
    let Some(d) = docker_env("docker_cat_prompt").await else {
        return;
    };
    cat_prompt_half_close(&d.env).await;
    one_shot_cat(&d.env).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_64_mib_stdout_to_a_slow_reader_is_exact() {
    let Some(d) = docker_env("docker_64_mib").await else {
        return;
    };
    let elapsed = stdout_64_mib_slow_reader(&d.env).await;
    eprintln!("docker: 64 MiB through stdout in {elapsed:?}");
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_10_mib_stdin_to_a_file_is_exact() {
    let Some(d) = docker_env("docker_10_mib_in").await else {
        return;
    };
    stdin_10_mib_to_file(&d.env).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_exit_42_every_time_and_sigkill_settles() {
    let Some(d) = docker_env("docker_exit_42").await else {
        return;
    };
    exit_42_every_time(&d.env, 20).await;
    sigkill_settles(&d.env).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_a_process_idle_for_20_s_still_streams() {
    let Some(d) = docker_env("docker_idle").await else {
        return;
    };
    idle_then_echo(&d.env, Duration::from_secs(20)).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_stdin_backpressure_makes_writes_wait() {
    let Some(d) = docker_env("docker_backpressure").await else {
        return;
    };
    backpressure(&d.env, Duration::from_secs(3), 16 << 20).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_second_open_is_refused_while_one_is_live() {
    let Some(d) = docker_env("docker_second_open").await else {
        return;
    };
    second_open_refused(&d.env).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_terminate_sends_sigterm_then_destroys_after_the_grace() {
    let Some(d) = docker_env("docker_terminate").await else {
        return;
    };
    terminate_honoured(&d.env, Duration::from_secs(5)).await;
    terminate_escalates(&d.env, Duration::from_secs(1), true).await;
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_acp_frames_decode_in_order_end_to_end() {
    let Some(d) = docker_env("docker_acp").await else {
        return;
    };
    acp_frames_end_to_end(&d.env).await;
    acp_frame_over_one_mib_refused(&d.env).await;
    d.finish().await;
}
