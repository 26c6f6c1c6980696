//! The Docker test-environment sweep: what a test created on the daemon is
//! removed and checked gone, also when the test panics.
//!
//! Two shapes: a provider *scope* ([`scope_for`], swept by
//! [`sweep_scope`] through the provider's own `destroy_all`) and a test
//! *label* ([`Cleanup`], for objects a test creates on the daemon
//! directly).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;

use bollard::Docker;
use checkfu_sandbox_docker::{daemon, fixture, DockerProvider};
use sha2::Digest as _;

/// Label key carried by everything a [`Cleanup`] removes.
pub const TEST_LABEL: &str = "checkfu.sandbox.test";

/// The busybox the fixture image is built from: `$CHECKFU_BUSYBOX`, else
/// the fixture's default path.
pub fn busybox_path() -> PathBuf {
    std::env::var("CHECKFU_BUSYBOX")
        .unwrap_or_else(|_| fixture::DEFAULT_BUSYBOX_PATH.to_owned())
        .into()
}

/// The shared fixture image's pinned reference (built once, then kept;
/// never pulled). Panics when busybox is missing.
pub async fn fixture_ref(docker: &Docker) -> String {
    fixture::ensure_fixture(docker, &busybox_path(), &mut |line| {
        eprintln!("fixture: {line}")
    })
    .await
    .expect("fixture image (install Debian's busybox-static)")
}

/// A value unique to one run of test `test`: the name, the process id and
/// the wall clock in nanoseconds.
pub fn unique(test: &str) -> String {
    format!(
        "{test}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// A provider scope unique to test `test` (`t-` and 16 hex digits, within
/// the provider's scope grammar) and its state directory under the temp
/// directory (not created).
pub fn scope_for(test: &str) -> (String, PathBuf) {
    let hash = fixture::hex(&sha2::Sha256::digest(unique(test).as_bytes()));
    let scope = format!("t-{}", &hash[..16]);
    let state_dir = std::env::temp_dir().join(format!("checkfu-provider-{scope}"));
    (scope, state_dir)
}

/// Destroys everything of `provider`'s scope, removes `state_dir`, and
/// fails when a container or image of the scope, or the directory, is left.
pub async fn sweep_scope(
    provider: DockerProvider,
    scope: String,
    state_dir: PathBuf,
) -> Result<(), String> {
    let problems = provider.destroy_all().await;
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let (c, i) = provider
        .scope_leftovers()
        .await
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&state_dir);
    if !c.is_empty() || !i.is_empty() || state_dir.exists() {
        return Err(format!(
            "scope {scope} leaked {} containers, {} images, state dir left: {}",
            c.len(),
            i.len(),
            state_dir.exists()
        ));
    }
    Ok(())
}

/// Runs `sweep` to completion on a thread with its own current-thread
/// runtime: a `Drop` cannot await and may run inside the test's runtime.
pub fn block_on_thread<F>(sweep: F) -> Result<(), String>
where
    F: Future<Output = Result<(), String>> + Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("no runtime for the sweep: {e}"))?
            .block_on(sweep)
    })
    .join()
    .expect("sweep thread")
}

/// [`sweep_scope`] from a `Drop`: a leak fails the test, unless the test
/// is already panicking (then the leak is printed, not raised again).
pub fn sweep_scope_on_drop(provider: DockerProvider, scope: String, state_dir: PathBuf) {
    settle(
        "sweep",
        block_on_thread(sweep_scope(provider, scope, state_dir)),
    );
}

/// Panics with `res`'s error unless the thread is already panicking, in
/// which case the error is printed after `what`.
pub fn settle(what: &str, res: Result<(), String>) {
    if !std::thread::panicking() {
        res.unwrap_or_else(|e| panic!("{what}: {e}"));
    } else if let Err(e) = res {
        eprintln!("{what} after panic: {e}");
    }
}

/// Removes every container and image labelled `TEST_LABEL=<value>`, the
/// extra `images` and the scratch directories, then asserts that none
/// remain. Runs on drop.
pub struct Cleanup {
    /// The label value unique to this test.
    pub value: String,
    /// Scratch directories removed at cleanup.
    pub dirs: Vec<PathBuf>,
    /// Image ids or references removed at cleanup (unlabelled ones).
    pub images: Vec<String>,
}

impl Cleanup {
    /// A cleanup whose label value is [`unique`] to `test`.
    pub fn new(test: &str) -> Self {
        Cleanup {
            value: unique(test),
            dirs: Vec::new(),
            images: Vec::new(),
        }
    }

    /// The label every object of this test carries.
    pub fn labels(&self) -> HashMap<String, String> {
        HashMap::from([(TEST_LABEL.to_string(), self.value.clone())])
    }

    /// A fresh scratch directory removed at cleanup.
    pub fn dir(&mut self, name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("checkfu-test-{}-{name}", self.value));
        std::fs::create_dir_all(&p).expect("scratch dir");
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
        let res = block_on_thread(Cleanup::sweep(
            self.value.clone(),
            std::mem::take(&mut self.images),
        ));
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
            assert!(!d.exists(), "scratch dir {} left", d.display());
        }
        settle("cleanup", res);
    }
}

/// A started fixture container labelled for `cleanup`'s test, with the
/// given binds, 256 MiB of memory and 256 pids; returns its id.
pub async fn start_container(
    docker: &Docker,
    cleanup: &Cleanup,
    binds: Vec<daemon::BindMount>,
) -> String {
    let image = fixture_ref(docker).await;
    let id_hex = image.split_once("@sha256:").expect("a pinned reference").1;
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
