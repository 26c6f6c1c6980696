//! The Docker provider as a conformance target: the real local daemon, the
//! offline busybox fixture image, a unique scope per target, a temporary
//! state directory, and token listeners on a private network the target
//! creates.
//!
//! Declares six tokens (filesystem, process, snapshot, network-none, zdr,
//! cleanup); allowlist-egress is a recorded skip because the provider does
//! not offer `allowlist`.
//!
//! Network traffic only goes to listeners this target started: each is a
//! fixture container on an `internal` bridge network the target created
//! (labelled with its scope), and the positive control dials it from
//! another short-lived container on that network. Sandbox instances run
//! with network mode `none`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::provider::{
    host_platform, LABEL_KIND, LABEL_PROVIDER, LABEL_SCOPE, PROVIDER_ID,
};
use checkfu_sandbox_docker::{daemon, fixture, testnet, DockerConfig, DockerProvider};

use crate::context::fresh_token;
use crate::target::{ConformanceTarget, Listener, LiveObjects};
use crate::token::Token;

/// The port every listener container listens on (each has its own address).
pub const LISTENER_PORT: u16 = 7000;
/// `checkfu.sandbox.kind` of the target's own listener and dialer containers.
pub const KIND_TEST_SUPPORT: &str = "conformance-support";

static TARGET_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The Docker provider under test.
pub struct DockerTarget {
    provider: DockerProvider,
    root_image: ImageReference,
    fixture_id: String,
    scope: String,
    network: String,
    state_dir: Mutex<Option<tempfile::TempDir>>,
    listeners: Mutex<HashMap<(String, u16), String>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for DockerTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerTarget")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl DockerTarget {
    /// Connects to the local daemon, ensures the fixture image built from
    /// the busybox binary at `busybox` (reporting build lines through
    /// `progress`), and prepares a fresh scope `conf-<pid>-<n>`, a
    /// temporary state directory and a private network.
    ///
    /// # Errors
    /// A message when the daemon, the fixture or the network is unusable.
    pub async fn new(
        busybox: &Path,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<DockerTarget, String> {
        let docker = daemon::connect()
            .await
            .map_err(|e| format!("docker daemon: {e}"))?;
        docker
            .ping()
            .await
            .map_err(|e| format!("docker daemon ping: {e}"))?;
        let pinned = fixture::ensure_fixture(&docker, busybox, progress)
            .await
            .map_err(|e| format!("fixture image from {}: {e}", busybox.display()))?;
        let root_image = ImageReference::parse(&pinned)
            .map_err(|e| format!("fixture reference {pinned}: {e}"))?;
        let fixture_id = format!("sha256:{}", root_image.digest().hex());
        let scope = format!(
            "conf-{}-{}",
            std::process::id(),
            TARGET_COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let state_dir = tempfile::Builder::new()
            .prefix(&format!("checkfu-{scope}-"))
            .tempdir()
            .map_err(|e| format!("state directory: {e}"))?;
        let provider = DockerProvider::with_docker(
            docker.clone(),
            DockerConfig {
                state_dir: state_dir.path().to_path_buf(),
                scope: scope.clone(),
                clock: Arc::new(SystemClock),
            },
        )
        .map_err(|e| format!("provider: {e}"))?;
        let network = format!("checkfu-{scope}");
        let target = DockerTarget {
            provider,
            root_image,
            fixture_id,
            scope,
            network,
            state_dir: Mutex::new(Some(state_dir)),
            listeners: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        };
        testnet::create_network(&docker, &target.network, &target.support_labels())
            .await
            .map_err(|e| format!("network {}: {e}", target.network))?;
        Ok(target)
    }

    /// The provider (also reachable through [`ConformanceTarget::provider`]).
    pub fn docker_provider(&self) -> &DockerProvider {
        &self.provider
    }

    /// The scope label value of everything this target creates.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The pinned fixture reference instances start from.
    pub fn fixture_reference(&self) -> &ImageReference {
        &self.root_image
    }

    fn support_labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_PROVIDER.to_owned(), PROVIDER_ID.to_owned()),
            (LABEL_SCOPE.to_owned(), self.scope.clone()),
            (LABEL_KIND.to_owned(), KIND_TEST_SUPPORT.to_owned()),
        ])
    }

    /// Removes everything of this target's scope: listeners and dialers,
    /// every instance and snapshot the provider still holds, the network
    /// and the state directory. Idempotent.
    ///
    /// # Errors
    /// A message naming what could not be removed.
    pub async fn close(&self) -> Result<(), String> {
        self.closed.store(true, Ordering::SeqCst);
        sweep(&self.provider, &self.scope, &self.network).await?;
        let dir = self
            .state_dir
            .lock()
            .map_err(|_| "state dir lock poisoned".to_owned())?
            .take();
        if let Some(dir) = dir {
            dir.close()
                .map_err(|e| format!("removing the state directory: {e}"))?;
        }
        Ok(())
    }
}

/// Removes every container and image of `scope`, instances and snapshots
/// through the provider first, then the network.
async fn sweep(provider: &DockerProvider, scope: &str, network: &str) -> Result<(), String> {
    let mut problems = Vec::new();
    match provider.inventory().await {
        Ok(inv) => {
            for id in inv.snapshots.keys() {
                if let Err(e) = provider
                    .destroy_snapshot(DestroySnapshotRequest {
                        snapshot_id: id.clone(),
                    })
                    .await
                {
                    problems.push(format!("snapshot {id}: {e}"));
                }
            }
            for id in inv.instances.keys() {
                if let Err(e) = provider
                    .destroy(DestroyRequest {
                        instance_id: id.clone(),
                    })
                    .await
                {
                    problems.push(format!("instance {id}: {e}"));
                }
            }
        }
        Err(e) => problems.push(format!("inventory: {e}")),
    }
    let docker = provider.docker();
    let labels = [(LABEL_SCOPE, scope)];
    match daemon::list_containers_by_labels(docker, &labels).await {
        Ok(list) => {
            for c in list {
                if let Err(e) =
                    daemon::remove_container(docker, c.id.as_deref().unwrap_or_default()).await
                {
                    problems.push(format!("container: {e}"));
                }
            }
        }
        Err(e) => problems.push(format!("listing containers: {e}")),
    }
    if let Err(e) = testnet::remove_network(docker, network).await {
        problems.push(format!("network {network}: {e}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

impl Drop for DockerTarget {
    fn drop(&mut self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        // Drop cannot await and may run inside a runtime: sweep on a thread
        // with its own runtime, best effort.
        let provider = self.provider.clone();
        let scope = self.scope.clone();
        let network = self.network.clone();
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|rt| rt.block_on(sweep(&provider, &scope, &network)))
        })
        .join();
    }
}

#[async_trait]
impl ConformanceTarget for DockerTarget {
    fn name(&self) -> &str {
        "docker"
    }

    fn provider(&self) -> Arc<dyn SandboxProvider> {
        Arc::new(self.provider.clone())
    }

    fn reopen(&self) -> Arc<dyn SandboxProvider> {
        Arc::new(self.provider.reopen())
    }

    fn declared_tokens(&self) -> BTreeSet<Token> {
        [
            Token::Filesystem,
            Token::Process,
            Token::Snapshot,
            Token::NetworkNone,
            Token::Zdr,
            Token::Cleanup,
        ]
        .into_iter()
        .collect()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(SystemClock)
    }

    fn root_image(&self) -> ImageReference {
        self.root_image.clone()
    }

    fn tier_platform(&self) -> (Tier, Platform) {
        (Tier::Container, host_platform())
    }

    async fn start_listener(&self) -> Result<Listener, String> {
        let token = fresh_token("docker-listener");
        let l = testnet::start_listener(
            self.provider.docker(),
            &self.fixture_id,
            &self.network,
            &self.support_labels(),
            LISTENER_PORT,
            &token,
        )
        .await
        .map_err(|e| format!("listener: {e}"))?;
        if let Ok(mut map) = self.listeners.lock() {
            map.insert((l.ip.clone(), l.port), l.container_id);
        }
        Ok(Listener {
            host: l.ip,
            port: l.port,
            token,
        })
    }

    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, String> {
        testnet::dial(
            self.provider.docker(),
            &self.fixture_id,
            &self.network,
            &self.support_labels(),
            &listener.host,
            listener.port,
        )
        .await
        .map_err(|e| format!("control dial of {}:{}: {e}", listener.host, listener.port))
    }

    async fn stop_listener(&self, listener: &Listener) {
        let id = self
            .listeners
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&(listener.host.clone(), listener.port)));
        if let Some(id) = id {
            let _ = daemon::remove_container(self.provider.docker(), &id).await;
        }
    }

    async fn live_objects(&self) -> Result<LiveObjects, String> {
        let inv = self.provider.inventory().await.map_err(|e| e.to_string())?;
        Ok(LiveObjects {
            instances: inv.instances.into_keys().collect(),
            snapshots: inv.snapshots.into_keys().collect(),
        })
    }
}
