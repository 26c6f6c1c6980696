//! The offline fixture image and image-reference resolution, against the
//! real daemon.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use checkfu_sandbox_docker::fixture::{self, FixtureError};
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_is_idempotent_under_concurrency() {
    let Some(docker) = common::docker_or_skip("fixture_is_idempotent_under_concurrency").await
    else {
        return;
    };
    let t = Instant::now();
    let (a, b, c) = tokio::join!(
        common::fixture_ref(&docker),
        common::fixture_ref(&docker),
        common::fixture_ref(&docker)
    );
    eprintln!("ensure_fixture x3 concurrently: {:?}", t.elapsed());
    assert_eq!(a, b);
    assert_eq!(b, c);
    assert!(a.starts_with("checkfu-fixture@sha256:"), "{a}");
    let t = Instant::now();
    assert_eq!(common::fixture_ref(&docker).await, a);
    eprintln!("ensure_fixture (reuse): {:?}", t.elapsed());
    let img = docker
        .inspect_image(&a.replace("checkfu-fixture@", ""))
        .await
        .unwrap();
    let labels = img.config.unwrap().labels.unwrap();
    assert_eq!(labels[fixture::FIXTURE_LABEL], "true");
}

#[tokio::test]
async fn resolve_by_id_and_by_tag() {
    let Some(docker) = common::docker_or_skip("resolve_by_id_and_by_tag").await else {
        return;
    };
    let pinned = common::fixture_ref(&docker).await;
    // Pinned form resolves to itself.
    assert_eq!(
        fixture::resolve_image(&docker, &pinned).await.unwrap(),
        Some(pinned.clone())
    );
    // The tag resolves to the pinned form.
    // The same busybox `fixture_ref` built from (fetched when the default
    // path does not exist).
    let path = checkfu_sandbox_docker::locate_busybox(
        std::path::Path::new(
            &std::env::var("CHECKFU_BUSYBOX")
                .unwrap_or_else(|_| fixture::DEFAULT_BUSYBOX_PATH.into()),
        ),
        &mut |_| {},
    )
    .await
    .unwrap();
    let bb = fixture::load_busybox(&path).await.unwrap();
    assert_eq!(
        fixture::resolve_image(&docker, &fixture::fixture_tag(&bb))
            .await
            .unwrap(),
        Some(pinned.clone())
    );
    // Same ID under another name is a mismatch, not a match.
    let other = pinned.replace("checkfu-fixture@", "someone-else@");
    assert!(matches!(
        fixture::resolve_image(&docker, &other).await,
        Err(FixtureError::ReferenceMismatch { .. })
    ));
    // Unknown ID and unknown tag: nothing.
    let unknown = format!("checkfu-fixture@sha256:{}", "0".repeat(64));
    assert_eq!(
        fixture::resolve_image(&docker, &unknown).await.unwrap(),
        None
    );
    assert_eq!(
        fixture::resolve_image(&docker, "checkfu-fixture:no-such-tag")
            .await
            .unwrap(),
        None
    );
    // Malformed references.
    for bad in [
        "checkfu-fixture@sha256:abc",
        "checkfu-fixture@sha256:".to_string().as_str(),
        "@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "checkfu-fixture@md5:00",
    ] {
        assert!(
            matches!(
                fixture::resolve_image(&docker, bad).await,
                Err(FixtureError::InvalidReference { .. })
            ),
            "{bad}"
        );
    }
}
