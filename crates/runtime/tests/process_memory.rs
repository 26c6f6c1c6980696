//! openProcess end to end on the memory oracle, through
//! [`SandboxRuntime`] and [`Adapter::open_process`] (spec "openProcess";
//! DESIGN D18). The scenarios live in `process_common`; the same ones run
//! on the real Docker daemon in `process_docker.rs`.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod process_common;

use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::SandboxRuntime;
use process_common::*;

const EPOCH: &str = "2030-01-01T00:00:00.000Z";

/// An active instance (no mounts) on a fresh oracle.
async fn env() -> Env {
    let clock = ManualClock::new(Timestamp::parse(EPOCH).unwrap());
    let provider = MemoryProvider::new(clock.clone());
    let mut runtime = SandboxRuntime::new(Arc::new(clock.clone()));
    runtime.register(Arc::new(provider));
    let adapter = runtime.adapter("memory").expect("adapter");
    let request = SandboxProvisionRequest {
        provider: "memory".into(),
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
            resources: Resources::default(),
            packages: Vec::new(),
        },
        platform: Platform {
            os: Os::Linux,
            architecture: Architecture::Amd64,
        },
        root_image: ImageReference::parse(&format!("checkfu-memory@sha256:{}", "0".repeat(64)))
            .unwrap(),
        mounts: Vec::new(),
        expires_at: clock.now().add_seconds(3600),
    };
    let instance = adapter.provision(request).await.expect("provision");
    let instance = adapter
        .activate(&instance.instance_id)
        .await
        .expect("activate");
    Env {
        adapter,
        instance_id: instance.instance_id,
        working_directory: "/".into(),
    }
}

async fn finish(env: Env) {
    env.adapter
        .destroy(&env.instance_id)
        .await
        .expect("destroy instance");
}

#[tokio::test]
async fn memory_cat_returns_the_prompt_after_half_close() {
    let env = env().await;
    cat_prompt_half_close(&env).await;
    one_shot_cat(&env).await;
    finish(env).await;
}

#[tokio::test]
async fn memory_64_mib_stdout_to_a_slow_reader_is_exact() {
    let env = env().await;
    let elapsed = stdout_64_mib_slow_reader(&env).await;
    eprintln!("memory: 64 MiB through stdout in {elapsed:?}");
    finish(env).await;
}

#[tokio::test]
async fn memory_10_mib_stdin_to_a_file_is_exact() {
    let env = env().await;
    stdin_10_mib_to_file(&env).await;
    finish(env).await;
}

#[tokio::test]
async fn memory_exit_42_every_time_and_sigkill_settles() {
    let env = env().await;
    exit_42_every_time(&env, 50).await;
    sigkill_settles(&env).await;
    finish(env).await;
}

/// The tokio clock is paused: an hour of idleness passes at once, and
/// nothing in the provider may end the process for it.
#[tokio::test(start_paused = true)]
async fn memory_a_process_idle_for_an_hour_still_streams() {
    let env = env().await;
    idle_then_echo(&env, Duration::from_secs(3600)).await;
    finish(env).await;
}

#[tokio::test]
async fn memory_stdin_backpressure_makes_writes_wait() {
    let env = env().await;
    backpressure(&env, Duration::from_secs(1), 1 << 20).await;
    finish(env).await;
}

#[tokio::test]
async fn memory_second_open_is_refused_while_one_is_live() {
    let env = env().await;
    second_open_refused(&env).await;
    finish(env).await;
}

#[tokio::test]
async fn memory_terminate_sends_sigterm_then_destroys_after_the_grace() {
    let env = env().await;
    terminate_honoured(&env, Duration::from_secs(5)).await;
    terminate_escalates(&env, Duration::from_millis(500), false).await;
    finish(env).await;
}

#[tokio::test]
async fn memory_acp_frames_decode_in_order_end_to_end() {
    let env = env().await;
    acp_frames_end_to_end(&env).await;
    acp_frame_over_one_mib_refused(&env).await;
    finish(env).await;
}
