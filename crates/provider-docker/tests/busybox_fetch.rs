//! The fixture's busybox comes from Debian's busybox-static package when
//! the given path does not exist.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

use checkfu_sandbox_docker::fixture::check_static_elf;
use checkfu_sandbox_docker::locate_busybox;

#[tokio::test]
async fn a_missing_busybox_is_fetched_from_the_debian_package() {
    if which("apt-get").is_none() || which("dpkg-deb").is_none() {
        // CI machines have apt-get and dpkg-deb.
        checkfu_test_support::gate::skip_or_fail(
            "a_missing_busybox_is_fetched_from_the_debian_package",
            "no apt-get/dpkg-deb here",
        );
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    // SAFETY of the environment: this test binary has one test, so no other
    // thread reads the variable concurrently.
    std::env::set_var("CHECKFU_CACHE_DIR", cache.path());
    let missing = cache.path().join("no-such-busybox");
    let mut lines = Vec::new();
    let found = locate_busybox(&missing, &mut |l: &str| lines.push(l.to_owned()))
        .await
        .unwrap();
    assert!(found.starts_with(cache.path()), "{found:?}");
    let bytes = std::fs::read(&found).unwrap();
    check_static_elf(&bytes).unwrap();
    assert!(
        lines.iter().any(|l| l.contains("busybox-static")),
        "{lines:?}"
    );
    // A second call reuses the unpacked copy without fetching.
    let mut again = Vec::new();
    assert_eq!(
        locate_busybox(&missing, &mut |l: &str| again.push(l.to_owned()))
            .await
            .unwrap(),
        found
    );
    assert!(again.is_empty(), "{again:?}");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.exists())
    })
}
