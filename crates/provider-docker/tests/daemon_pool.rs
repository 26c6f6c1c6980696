//! The warm pool against the real daemon: a provision claims a started
//! container and activation starts none; a container is never reused after
//! a workload ran in it; draining and cleanup leave nothing of the pool,
//! and cleanup keeps what a live pool holds or an instance claimed.
//!
//! Gate: without a daemon each test prints a `SKIP` line and returns,
//! except under `CI=true`, where it fails. Every test drains the pool and
//! checks that nothing of its scope is left (the environment's drop).

// The tests look at the provider's state directory from outside, by path.
#![allow(clippy::disallowed_methods)]

mod common;

use std::collections::{BTreeSet, HashMap};

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::labels::{
    KIND_POOL, LABEL_KIND, LABEL_POOL_OWNER, LABEL_POOL_SLOT, LABEL_PROVIDER, LABEL_SCOPE,
};
use checkfu_sandbox_docker::{daemon, DockerProvider};
use common::provider_env::ProviderEnv;

const MOUNTS: &[(&str, MountAccess)] = &[("/work", MountAccess::ReadWrite)];

/// Ids of the containers of the scope labelled as pool containers.
async fn pool_containers(provider: &DockerProvider) -> BTreeSet<String> {
    let labels = [(LABEL_SCOPE, provider.scope()), (LABEL_KIND, KIND_POOL)];
    daemon::list_containers_by_labels(provider.docker(), &labels)
        .await
        .expect("list")
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

async fn exists(provider: &DockerProvider, container: &str) -> bool {
    daemon::inspect_container(provider.docker(), container)
        .await
        .expect("inspect")
        .is_some()
}

/// Names of the pool slot directories (`p-*`) in the state directory.
fn slot_dirs(env: &ProviderEnv) -> Vec<String> {
    std::fs::read_dir(env.state_dir.join("instances"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with("p-"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provision_claims_a_started_pool_container_and_activation_starts_none() {
    let Some(env) = ProviderEnv::with_pool("pool_claim", 2).await else {
        return;
    };
    let request = env.request("s-pool", RetentionMode::EphemeralZdr, MOUNTS, 3600);
    assert_eq!(env.provider.prewarm(&request).await.expect("prewarm"), 2);
    let warm = pool_containers(&env.provider).await;
    assert_eq!(warm.len(), 2, "{warm:?}");

    let inst = env
        .adapter
        .provision(request.clone())
        .await
        .expect("provision");
    let container = env
        .provider
        .container_of(&inst.instance_id)
        .expect("container");
    assert!(warm.contains(&container), "{container} is not a pooled one");
    // Running already, while the instance is still provisioning.
    let state = daemon::inspect_container(env.provider.docker(), &container)
        .await
        .expect("inspect")
        .and_then(|c| c.state)
        .and_then(|s| s.running);
    assert_eq!(state, Some(true));
    // Staging into a mount while provisioning, then activation.
    env.adapter
        .write_file(&inst.instance_id, "/work/staged", b"staged".to_vec())
        .await
        .expect("write_file");
    let active = env
        .adapter
        .activate(&inst.instance_id)
        .await
        .expect("activate");
    assert_eq!(active.state, InstanceState::Active);
    assert_eq!(
        env.provider.container_of(&inst.instance_id).as_deref(),
        Some(container.as_str()),
        "activation started another container"
    );
    let out = env.run(&inst.instance_id, &["cat", "/work/staged"]).await;
    assert_eq!(out.exit, ExitCause::ExitCode(0));
    assert_eq!(out.stdout_base64.0, b"staged");
    let uid = env.run(&inst.instance_id, &["id", "-u"]).await;
    assert_eq!(uid.stdout_base64.0, b"1000\n");
    // The workload's file reaches the host through the claimed directory.
    let wrote = env
        .run(
            &inst.instance_id,
            &["sh", "-c", "echo out > /mnt/session/outputs/o"],
        )
        .await;
    assert_eq!(wrote.exit, ExitCause::ExitCode(0));
    let read = env
        .adapter
        .read_file(&inst.instance_id, "/mnt/session/outputs/o", 1024)
        .await
        .expect("read_file");
    assert_eq!(read, b"out\n");

    let status = env.provider.pool_status();
    assert_eq!(status.size, 2);
    assert_eq!(status.shapes.len(), 1, "{status:?}");
    assert_eq!(status.shapes[0].hits, 1);
    assert_eq!(status.shapes[0].mounts, 1);

    env.adapter
        .release(&inst.instance_id, None)
        .await
        .expect("release");
    assert!(
        !exists(&env.provider, &container).await,
        "the claimed container outlived its instance"
    );
    assert!(env.provider.drain_pool().await.is_empty());
    assert!(pool_containers(&env.provider).await.is_empty());
    assert!(slot_dirs(&env).is_empty(), "{:?}", slot_dirs(&env));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_container_is_never_reused_after_a_workload_ran_in_it() {
    let Some(env) = ProviderEnv::with_pool("pool_reuse", 1).await else {
        return;
    };
    let request = env.request("s-reuse", RetentionMode::EphemeralZdr, &[], 3600);
    let mut seen = BTreeSet::new();
    for round in 0..3 {
        env.provider.prewarm(&request).await.expect("prewarm");
        let inst = env.active(request.clone(), &[]).await;
        let container = env
            .provider
            .container_of(&inst.instance_id)
            .expect("container");
        assert!(
            seen.insert(container.clone()),
            "round {round}: container {container} was handed out before"
        );
        // Nothing a previous workload left in its container's file system.
        let fresh = env
            .run(&inst.instance_id, &["test", "-e", "/tmp/mark"])
            .await;
        assert_eq!(fresh.exit, ExitCause::ExitCode(1), "round {round}");
        let marked = env.run(&inst.instance_id, &["touch", "/tmp/mark"]).await;
        assert_eq!(marked.exit, ExitCause::ExitCode(0));
        env.adapter
            .release(&inst.instance_id, None)
            .await
            .expect("release");
        assert!(!exists(&env.provider, &container).await);
    }
    let hits = env.provider.pool_status().shapes[0].hits;
    assert_eq!(hits, 3, "every round claimed a pooled container");
    assert!(env.provider.drain_pool().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_pool_the_container_is_started_by_activation() {
    let Some(env) = ProviderEnv::new("pool_off").await else {
        return;
    };
    let request = env.request("s-off", RetentionMode::EphemeralZdr, MOUNTS, 3600);
    assert_eq!(env.provider.prewarm(&request).await.expect("prewarm"), 0);
    let inst = env.adapter.provision(request).await.expect("provision");
    let name = env
        .provider
        .container_of(&inst.instance_id)
        .expect("container");
    assert_eq!(name, format!("checkfu-{}", inst.instance_id));
    assert!(
        !exists(&env.provider, &name).await,
        "a container before activation"
    );
    env.adapter
        .activate(&inst.instance_id)
        .await
        .expect("activate");
    assert!(exists(&env.provider, &name).await);
    let status = env.provider.pool_status();
    assert_eq!((status.size, status.shapes.len()), (0, 0));
    assert!(pool_containers(&env.provider).await.is_empty());
    env.adapter
        .release(&inst.instance_id, None)
        .await
        .expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_pool_is_gone_and_provisions_start_their_own_container() {
    let Some(env) = ProviderEnv::with_pool("pool_drain", 2).await else {
        return;
    };
    let request = env.request("s-drain", RetentionMode::EphemeralZdr, MOUNTS, 3600);
    env.provider.prewarm(&request).await.expect("prewarm");
    assert_eq!(pool_containers(&env.provider).await.len(), 2);
    assert_eq!(slot_dirs(&env).len(), 2);
    assert!(env.provider.drain_pool().await.is_empty());
    assert!(pool_containers(&env.provider).await.is_empty());
    assert!(slot_dirs(&env).is_empty());
    assert!(env.provider.pool_status().closed);
    let inst = env.active(request, &[]).await;
    assert_eq!(
        env.provider.container_of(&inst.instance_id),
        Some(format!("checkfu-{}", inst.instance_id))
    );
    assert!(pool_containers(&env.provider).await.is_empty());
    env.adapter
        .release(&inst.instance_id, None)
        .await
        .expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_sweeps_pool_slots_of_a_gone_owner_and_keeps_live_and_claimed_ones() {
    let Some(env) = ProviderEnv::with_pool("pool_sweep", 1).await else {
        return;
    };
    let request = env.request("s-sweep", RetentionMode::EphemeralZdr, &[], 3600);
    env.provider.prewarm(&request).await.expect("prewarm");
    let claimed_inst = env.active(request.clone(), &[]).await;
    let claimed = env
        .provider
        .container_of(&claimed_inst.instance_id)
        .expect("claimed");
    env.provider.prewarm(&request).await.expect("refill");
    let live: BTreeSet<String> = pool_containers(&env.provider)
        .await
        .into_iter()
        .filter(|c| *c != claimed)
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");

    // A slot left by a provider whose process is gone: a pid one above the
    // largest pid_max Linux allows (2^22), which no process can have.
    let gone_owner = "4194305.deadbeef0000";
    let slot = "p-0123456789abcdef01234567";
    let slot_dir = env.state_dir.join("instances").join(slot);
    std::fs::create_dir_all(&slot_dir).expect("slot dir");
    std::fs::write(slot_dir.join("pool-owner"), gone_owner).expect("owner file");
    let labels: HashMap<String, String> = [
        (LABEL_PROVIDER, "docker"),
        (LABEL_SCOPE, env.scope.as_str()),
        (LABEL_KIND, KIND_POOL),
        (LABEL_POOL_SLOT, slot),
        (LABEL_POOL_OWNER, gone_owner),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let orphan = daemon::create_and_start(
        env.provider.docker(),
        &daemon::ContainerSpec {
            image: format!("sha256:{}", env.root_image.digest().hex()),
            labels,
            ..Default::default()
        },
    )
    .await
    .expect("orphan container");
    // A slot directory whose container never came, of a gone owner too.
    let bare = env.state_dir.join("instances/p-fedcba9876543210fedcba98");
    std::fs::create_dir_all(&bare).expect("bare slot");
    std::fs::write(bare.join("pool-owner"), gone_owner).expect("owner file");

    // Instances are neither expired nor orphaned by this request.
    let now = Timestamp::now();
    let swept = env
        .adapter
        .cleanup(now, now.add_seconds(-86_400), vec![])
        .await
        .expect("cleanup");
    assert!(swept.instances.is_empty(), "{swept:?}");
    assert!(
        !exists(&env.provider, &orphan).await,
        "orphan pool container kept"
    );
    assert!(
        !slot_dir.exists() && !bare.exists(),
        "orphan slot directories kept"
    );
    for c in &live {
        assert!(
            exists(&env.provider, c).await,
            "a live pool container was swept"
        );
    }
    assert!(
        exists(&env.provider, &claimed).await,
        "a claimed container was swept"
    );
    let still = env.run(&claimed_inst.instance_id, &["true"]).await;
    assert_eq!(still.exit, ExitCause::ExitCode(0));

    env.adapter
        .release(&claimed_inst.instance_id, None)
        .await
        .expect("release");
    assert!(env.provider.drain_pool().await.is_empty());
    assert!(pool_containers(&env.provider).await.is_empty());
}
