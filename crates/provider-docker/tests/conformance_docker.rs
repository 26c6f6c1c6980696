//! The suite against the real Docker daemon, once with the provider's
//! default warm pool and once without a pool: nine passes where the host
//! can enforce an allowlist (nft and nsenter, run as root: this machine
//! kind), otherwise eight and allowlist-egress recorded as a skip; and
//! nothing of the target's scope left afterwards.
//!
//! Gate: without a daemon the test prints a `SKIP` line and returns, except
//! under `CI=true`, where it fails.

// The test checks, by path and from outside, that the state directory
// the target created is gone.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::sync::Arc;

use checkfu_sandbox_conformance::*;
use checkfu_sandbox_docker::conformance::DockerTarget;
use checkfu_sandbox_docker::labels::LABEL_SCOPE;
use checkfu_sandbox_docker::{daemon, fixture};

fn busybox() -> PathBuf {
    std::env::var("CHECKFU_BUSYBOX")
        .unwrap_or_else(|_| fixture::DEFAULT_BUSYBOX_PATH.to_owned())
        .into()
}

async fn daemon_or_skip(test: &str) -> bool {
    checkfu_test_support::gate::docker_or_skip(test)
        .await
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_passes_nine_and_leaves_nothing() {
    if !daemon_or_skip("docker_passes_nine_and_leaves_nothing").await {
        return;
    }
    suite_passes_and_leaves_nothing(checkfu_sandbox_docker::DEFAULT_POOL_SIZE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_without_a_pool_passes_nine_and_leaves_nothing() {
    if !daemon_or_skip("docker_without_a_pool_passes_nine_and_leaves_nothing").await {
        return;
    }
    suite_passes_and_leaves_nothing(0).await;
}

async fn suite_passes_and_leaves_nothing(pool_size: usize) {
    let target = Arc::new(
        DockerTarget::with_pool_size(
            &busybox(),
            &mut |line| eprintln!("fixture: {line}"),
            pool_size,
        )
        .await
        .expect("docker target"),
    );
    let pool = target.docker_provider().pool_status();
    assert_eq!(pool.size, pool_size);
    let scope = target.scope().to_owned();
    let state_dir = target.docker_provider().state_dir().to_path_buf();
    let progress = |p: Progress<'_>| {
        if let Progress::Finished { record, .. } = p {
            eprintln!(
                "{:<20} {:?} {} ms {:?}",
                record.id, record.outcome, record.duration_ms, record.failure
            );
        }
    };
    let evidence = run_suite(target.clone(), &SuiteOptions::default(), &progress).await;
    let pool = target.docker_provider().pool_status();
    let closed = target.close().await;
    let evidence = evidence.expect("suite starts");
    eprintln!("{}", evidence.table());
    closed.expect("target closes cleanly");

    // Where the host cannot enforce an allowlist the provider does not
    // offer it and allowlist-egress is a recorded skip; this machine kind
    // (CI) can, so there it is a failure.
    let egress = target.docker_provider().egress_support().clone();
    let in_ci = checkfu_test_support::gate::in_ci();
    assert!(
        egress.is_enforced() || !in_ci,
        "CI=true and allowlist egress unavailable: {egress:?}"
    );
    let (passed, skipped) = if egress.is_enforced() { (9, 0) } else { (8, 1) };
    assert_eq!(evidence.summary.passed, passed, "{}", evidence.table());
    assert_eq!(evidence.summary.skipped, skipped, "{}", evidence.table());
    assert_eq!(
        evidence.summary.failed + evidence.summary.timed_out,
        0,
        "{}",
        evidence.table()
    );
    if let Some(skip) = evidence
        .cases
        .iter()
        .find(|c| c.outcome == Outcome::Skipped)
    {
        assert_eq!(skip.id, "allowlist-egress");
        assert_eq!(skip.missing_tokens, vec![Token::NetworkAllowlist]);
    }
    // With a pool, the cases' provisions did claim pooled containers.
    let hits: u64 = pool.shapes.iter().map(|s| s.hits).sum();
    if pool_size > 0 {
        assert!(
            hits > 0,
            "no provision claimed a pooled container: {pool:?}"
        );
    } else {
        assert!(
            pool.shapes.is_empty(),
            "a pool of size 0 held shapes: {pool:?}"
        );
    }

    // Nothing of this scope is left at the daemon or on disk.
    let docker = daemon::connect().await.expect("daemon");
    let label = [(LABEL_SCOPE, scope.as_str())];
    let containers = daemon::list_containers_by_labels(&docker, &label)
        .await
        .expect("list containers");
    let images = daemon::list_images_by_labels(&docker, &label)
        .await
        .expect("list images");
    assert!(containers.is_empty(), "leaked containers: {containers:?}");
    assert!(images.is_empty(), "leaked images: {images:?}");
    let all_images = docker
        .list_images(Some(bollard_list_all_with_label(&scope)))
        .await
        .expect("list all images");
    assert!(
        all_images.is_empty(),
        "leaked intermediate images: {all_images:?}"
    );
    assert!(
        !state_dir.exists(),
        "state directory {} left",
        state_dir.display()
    );
    let networks = docker
        .list_networks(
            None::<checkfu_sandbox_docker::bollard::query_parameters::ListNetworksOptions>,
        )
        .await
        .expect("list networks");
    assert!(
        !networks
            .iter()
            .any(|n| n.name.as_deref() == Some(&format!("checkfu-{scope}"))),
        "network left"
    );
}

fn bollard_list_all_with_label(
    scope: &str,
) -> checkfu_sandbox_docker::bollard::query_parameters::ListImagesOptions {
    let filters = std::collections::HashMap::from([(
        "label".to_owned(),
        vec![format!("{LABEL_SCOPE}={scope}")],
    )]);
    checkfu_sandbox_docker::bollard::query_parameters::ListImagesOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build()
}

/// `close` removes everything carrying the target's scope label, also what
/// the provider's inventory does not know: an image committed from a
/// listener (as a dropped snapshot call can leave one), a second network,
/// the listener itself; then the state directory. A second `close` is a
/// no-op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_close_removes_everything_of_the_scope() {
    if !daemon_or_skip("docker_close_removes_everything_of_the_scope").await {
        return;
    }
    let target = DockerTarget::new(&busybox(), &mut |line| eprintln!("fixture: {line}"))
        .await
        .expect("docker target");
    let scope = target.scope().to_owned();
    let state_dir = target.docker_provider().state_dir().to_path_buf();
    let docker = target.docker_provider().docker().clone();
    target.start_listener().await.expect("listener");
    let label = [(LABEL_SCOPE, scope.as_str())];
    let listeners = daemon::list_containers_by_labels(&docker, &label)
        .await
        .expect("list containers");
    assert_eq!(listeners.len(), 1, "{listeners:?}");
    let labels = std::collections::HashMap::from([
        (LABEL_SCOPE.to_owned(), scope.clone()),
        (
            checkfu_sandbox_docker::labels::LABEL_KIND.to_owned(),
            "conformance-support".to_owned(),
        ),
    ]);
    daemon::commit_container(
        &docker,
        listeners[0].id.as_deref().expect("an id"),
        None,
        &labels,
    )
    .await
    .expect("commit");
    let extra = format!("checkfu-{scope}-extra");
    checkfu_sandbox_docker::testnet::create_network(&docker, &extra, &labels)
        .await
        .expect("extra network");
    assert!(state_dir.exists());

    target.close().await.expect("close");

    let containers = daemon::list_containers_by_labels(&docker, &label)
        .await
        .expect("list containers");
    assert!(containers.is_empty(), "containers left: {containers:?}");
    let images = docker
        .list_images(Some(bollard_list_all_with_label(&scope)))
        .await
        .expect("list images");
    assert!(images.is_empty(), "images left: {images:?}");
    let networks = docker
        .list_networks(
            None::<checkfu_sandbox_docker::bollard::query_parameters::ListNetworksOptions>,
        )
        .await
        .expect("list networks");
    let left: Vec<_> = networks
        .iter()
        .filter_map(|n| n.name.as_deref())
        .filter(|n| n.contains(&scope))
        .collect();
    assert!(left.is_empty(), "networks left: {left:?}");
    assert!(!state_dir.exists(), "state directory left");
    target.close().await.expect("a second close");
}
