//! Shared helpers for the tests that need the real Docker daemon.
//!
//! Gate: when no daemon answers, a test prints a `SKIP` line and returns,
//! except under `CI=true`, where it fails. Every test labels what it
//! creates with a label unique to the test, and [`Cleanup`] removes and then
//! checks that nothing with that label remains (also when the test panics).

#![allow(dead_code)] // each test file uses a different subset

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::Docker;
use checkfu_sandbox_docker::{daemon, fixture};

/// Label key carried by everything a test creates.
pub const TEST_LABEL: &str = "checkfu.sandbox.test";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Connects, or returns `None` after printing why the test is skipped.
/// Under `CI=true` an unreachable daemon is a failure.
pub async fn docker_or_skip(test: &str) -> Option<Docker> {
    match daemon::connect().await {
        Ok(d) => match d.ping().await {
            Ok(_) => Some(d),
            Err(e) => skip_or_fail(test, &format!("daemon ping failed: {e}")),
        },
        Err(e) => skip_or_fail(test, &format!("no daemon: {e}")),
    }
}

pub fn skip_or_fail(test: &str, why: &str) -> Option<Docker> {
    if in_ci() {
        panic!("{test}: CI=true and {why}");
    }
    // Written to the real stderr, not through the test harness's capture,
    // so the skip shows in a normal `cargo test` run.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: {why} (set CI=true to make this a failure)"
    );
    None
}

/// The shared fixture image's pinned reference (built once, kept).
pub async fn fixture_ref(docker: &Docker) -> String {
    let path = std::env::var("CHECKFU_BUSYBOX")
        .unwrap_or_else(|_| fixture::DEFAULT_BUSYBOX_PATH.to_string());
    fixture::ensure_fixture(docker, Path::new(&path), &mut |line| {
        eprintln!("fixture: {line}")
    })
    .await
    .expect("fixture image (install Debian's busybox-static)")
}

/// A unique label value for one test.
pub fn unique(test: &str) -> String {
    format!(
        "{test}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Removes every container and image labelled `TEST_LABEL=<value>` and the
/// scratch directories, then asserts that none remain. Runs on drop.
pub struct Cleanup {
    pub value: String,
    pub dirs: Vec<PathBuf>,
    pub images: Vec<String>,
}

impl Cleanup {
    pub fn new(test: &str) -> Self {
        Cleanup {
            value: unique(test),
            dirs: Vec::new(),
            images: Vec::new(),
        }
    }

    pub fn labels(&self) -> HashMap<String, String> {
        HashMap::from([(TEST_LABEL.to_string(), self.value.clone())])
    }

    /// A fresh scratch directory removed at cleanup.
    pub fn dir(&mut self, name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("checkfu-test-{}-{name}", self.value));
        std::fs::create_dir_all(&p).unwrap();
        self.dirs.push(p.clone());
        p
    }

    async fn sweep(value: String, images: Vec<String>) -> Result<(), String> {
        let docker = daemon::connect().await.map_err(|e| e.to_string())?;
        let label = [(TEST_LABEL, value.as_str())];
        for c in daemon::list_containers_by_labels(&docker, &label)
            .await
            .map_err(|e| e.to_string())?
        {
            daemon::remove_container(&docker, c.id.as_deref().unwrap_or_default())
                .await
                .map_err(|e| e.to_string())?;
        }
        for i in daemon::list_images_by_labels(&docker, &label)
            .await
            .map_err(|e| e.to_string())?
        {
            daemon::remove_image(&docker, &i.id, true)
                .await
                .map_err(|e| e.to_string())?;
        }
        for i in images {
            daemon::remove_image(&docker, &i, true)
                .await
                .map_err(|e| e.to_string())?;
        }
        let left_c = daemon::list_containers_by_labels(&docker, &label)
            .await
            .map_err(|e| e.to_string())?;
        let left_i = daemon::list_images_by_labels(&docker, &label)
            .await
            .map_err(|e| e.to_string())?;
        if !left_c.is_empty() || !left_i.is_empty() {
            return Err(format!(
                "leaked {} containers, {} images with {TEST_LABEL}={value}",
                left_c.len(),
                left_i.len()
            ));
        }
        Ok(())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let value = self.value.clone();
        let images = std::mem::take(&mut self.images);
        // Drop cannot await and may run inside a runtime: sweep on a
        // thread with its own runtime.
        let res = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(Cleanup::sweep(value, images))
        })
        .join()
        .expect("cleanup thread");
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
            assert!(!d.exists(), "scratch dir {} left", d.display());
        }
        if !std::thread::panicking() {
            res.expect("cleanup");
        } else if let Err(e) = res {
            eprintln!("cleanup after panic: {e}");
        }
    }
}

/// A started fixture container labelled for this test.
pub async fn start_container(
    docker: &Docker,
    cleanup: &Cleanup,
    binds: Vec<daemon::BindMount>,
) -> String {
    let image = fixture_ref(docker).await;
    let id_hex = image.split_once("@sha256:").unwrap().1;
    let spec = daemon::ContainerSpec {
        image: format!("sha256:{id_hex}"),
        labels: cleanup.labels(),
        binds,
        memory_bytes: Some(256 << 20),
        pids_limit: Some(256),
        ..Default::default()
    };
    daemon::create_and_start(docker, &spec)
        .await
        .expect("container")
}

pub mod egress_lab;
pub mod provider_env;
