//! The Docker provider as a conformance target: the real local daemon, the
//! offline busybox fixture image, a unique scope per target, a temporary
//! state directory, and token listeners on a private network the target
//! creates.
//!
//! Declares seven tokens (filesystem, process, snapshot, network-none,
//! network-allowlist, zdr, cleanup) where the host lets the provider
//! enforce an allowlist ([`crate::egress::EgressSupport`]); elsewhere
//! network-allowlist is left out and allowlist-egress is a recorded skip.
//!
//! Network traffic only goes to listeners this target started: each is a
//! fixture container on an `internal` bridge network the target created
//! (labelled with its scope), and the positive control dials it from
//! another short-lived container on that network. Instances of a `none`
//! profile run with network mode `none`; instances of an `allowlist`
//! profile join the same internal network (the provider's egress network
//! for this target), so even a broken rule set could reach nothing but
//! the target's own listeners.
//!
//! Compiled with the feature `conformance`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::query_parameters::{ListImagesOptionsBuilder, ListNetworksOptionsBuilder};
use checkfu_sandbox_conformance::context::fresh_token;
use checkfu_sandbox_conformance::{ConformanceTarget, Listener, LiveObjects, TargetError, Token};
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::conformance_target::{self as shared, suite};
use checkfu_sandbox_hostfs::errors::chain;

use crate::egress::{EgressConfig, EgressSupport};

mod scope;
use crate::labels::{LABEL_KIND, LABEL_PROVIDER, LABEL_SCOPE};
use crate::{daemon, fixture, testnet, DockerConfig, DockerProvider};
use crate::{host_platform, PROVIDER_ID};
pub use scope::{conformance_state_dirs, scope_support_objects};

/// The port every listener container listens on (each has its own address).
pub const LISTENER_PORT: u16 = 7000;
/// `checkfu.sandbox.kind` of the target's own listener and dialer containers.
pub const KIND_TEST_SUPPORT: &str = "conformance-support";

/// Sweep rounds [`DockerTarget::close_scope`] makes until nothing of the scope is
/// left (a daemon call dropped mid-flight may still create an object after
/// the first round listed the scope).
pub const CLOSE_ROUNDS: u32 = 3;

/// The Docker provider under test.
pub struct DockerTarget {
    provider: DockerProvider,
    root_image: ImageReference,
    fixture_id: String,
    scope: String,
    network: String,
    state_path: PathBuf,
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
    /// temporary state directory and a private network. The provider keeps
    /// a warm pool of `CHECKFU_DOCKER_POOL` containers per shape
    /// ([`crate::DEFAULT_POOL_SIZE`] when unset; `0` turns it off), drained
    /// by [`DockerTarget::close_scope`].
    ///
    /// # Errors
    /// [`TargetError::Platform`] when the daemon, the fixture or the
    /// network is unusable.
    pub async fn new(
        busybox: &Path,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<DockerTarget, TargetError> {
        let pool_size = DockerConfig::pool_size_from_env(crate::DEFAULT_POOL_SIZE)
            .map_err(|e| TargetError::platform(crate::POOL_ENV, chain(&e)))?;
        Self::with_pool_size(busybox, progress, pool_size).await
    }

    /// As [`DockerTarget::new`], with a warm pool of `pool_size` containers
    /// per shape (`0`: none) whatever the environment says.
    ///
    /// # Errors
    /// As [`DockerTarget::new`]; a `pool_size` over
    /// [`crate::MAX_POOL_SIZE`] too.
    pub async fn with_pool_size(
        busybox: &Path,
        progress: &mut (dyn FnMut(&str) + Send),
        pool_size: usize,
    ) -> Result<DockerTarget, TargetError> {
        let docker = daemon::connect()
            .await
            .map_err(|e| TargetError::platform("docker daemon", chain(&e)))?;
        docker
            .ping()
            .await
            .map_err(|e| TargetError::platform("docker daemon ping", chain(&e)))?;
        let pinned = fixture::ensure_fixture(&docker, busybox, progress)
            .await
            .map_err(|e| {
                TargetError::platform(
                    format!("fixture image from {}", busybox.display()),
                    chain(&e),
                )
            })?;
        let root_image = ImageReference::parse(&pinned)
            .map_err(|e| TargetError::platform(format!("fixture reference {pinned}"), e))?;
        let fixture_id = format!("sha256:{}", root_image.digest().hex());
        let scope = shared::fresh_scope();
        let state_dir = suite::fresh_state_dir(&format!("checkfu-{scope}-"))?;
        let network = format!("checkfu-{scope}");
        let provider = DockerProvider::with_egress(
            docker.clone(),
            DockerConfig {
                pool_size,
                ..DockerConfig::new(
                    state_dir.path().to_path_buf(),
                    scope.clone(),
                    Arc::new(SystemClock),
                )
            },
            EgressConfig {
                network: network.clone(),
                static_hosts: Default::default(),
            },
            EgressSupport::probe_cached(),
        )
        .map_err(|e| TargetError::platform("provider", chain(&e)))?;
        // The target exists before its network does: if this future is
        // dropped while the network is being created, or creation fails,
        // dropping the target sweeps the scope and its state directory.
        let target = DockerTarget {
            provider,
            root_image,
            fixture_id,
            scope,
            network,
            state_path: state_dir.path().to_path_buf(),
            state_dir: Mutex::new(Some(state_dir)),
            listeners: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        };
        testnet::create_network(&docker, &target.network, &target.support_labels())
            .await
            .map_err(|e| TargetError::platform(format!("network {}", target.network), chain(&e)))?;
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

    /// The target's state directory (removed by [`DockerTarget::close_scope`]).
    pub fn state_dir(&self) -> &Path {
        &self.state_path
    }

    /// The name of the target's private network.
    pub fn network(&self) -> &str {
        &self.network
    }

    /// Removes everything of this target's scope, whatever state a dropped
    /// suite left it in: every instance and snapshot the provider holds
    /// (its cleanup with a far-future cutoff, then a destroy of whatever
    /// its inventory still lists), every container and image carrying the
    /// scope label (instances, clones, snapshot images, listeners and
    /// dialers), the network and the state directory. Repeats the sweep up
    /// to [`CLOSE_ROUNDS`] times while anything is left.
    ///
    /// Idempotent and best effort: every step runs even when an earlier
    /// one failed.
    ///
    /// # Errors
    /// [`TargetError::Leftovers`] naming everything that could not be
    /// removed.
    pub async fn close_scope(&self) -> Result<(), TargetError> {
        self.closed.store(true, Ordering::SeqCst);
        if let Ok(mut map) = self.listeners.lock() {
            map.clear();
        }
        let mut problems = Vec::new();
        for round in 1..=CLOSE_ROUNDS {
            let failed = sweep(&self.provider, &self.scope, &self.network).await;
            match leftovers(&self.provider, &self.scope, &self.network).await {
                // Nothing is left: a step that failed on the way (say, an
                // object a concurrent removal took first) did no harm.
                Ok(left) if left.is_empty() => {
                    problems.clear();
                    break;
                }
                Ok(left) => {
                    problems = failed;
                    problems.push(format!("left after {round} sweep(s): {}", left.join(", ")));
                }
                Err(e) => {
                    problems = failed;
                    problems.push(e);
                }
            }
            if round < CLOSE_ROUNDS {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        suite::close_state_dir(&self.state_path, &self.state_dir, problems)
    }
}

pub use checkfu_sandbox_hostfs::conformance_target::CONFORMANCE_SCOPE_PREFIX;

/// Removes everything a conformance target of `provider`'s scope created
/// (instances, snapshots, listener containers, images, the private network
/// `checkfu-<scope>`, its state directory `checkfu-<scope>-*` in the
/// temporary directory), whatever their age: what a target's `close` does,
/// for a target whose process died before it could (a SIGKILLed
/// `checkfu sandbox test`). Returns one line per object that could not be
/// removed, or what is still left.
///
/// # Errors
/// None: failures are the returned lines.
pub async fn sweep_conformance_scope(provider: &DockerProvider) -> Vec<String> {
    let scope = provider.scope().to_owned();
    let network = format!("checkfu-{scope}");
    let mut problems = sweep(provider, &scope, &network).await;
    match leftovers(provider, &scope, &network).await {
        Ok(left) if left.is_empty() => problems.clear(),
        Ok(left) => problems.push(format!("left: {}", left.join(", "))),
        Err(e) => problems.push(e),
    }
    // The target's state directory: `checkfu-<scope>-*` in the temporary
    // directory (the target's own; nothing else carries the scope's name).
    problems.extend(shared::remove_state_dirs(&format!("checkfu-{scope}-")));
    problems
}

/// Every scope a `checkfu.sandbox.scope` label names on a container, an
/// image or a network of the daemon, sorted.
///
/// # Errors
/// The daemon's failure, as a line.
pub async fn labelled_scopes(docker: &crate::Docker) -> Result<BTreeSet<String>, String> {
    let filters = HashMap::from([("label".to_owned(), vec![LABEL_SCOPE.to_owned()])]);
    let mut scopes = BTreeSet::new();
    let containers = daemon::list_containers_by_label_key(docker, LABEL_SCOPE)
        .await
        .map_err(|e| format!("listing containers: {}", chain(&e)))?;
    scopes.extend(
        containers
            .into_iter()
            .filter_map(|c| c.labels?.get(LABEL_SCOPE).cloned()),
    );
    let opts = ListImagesOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let images = docker
        .list_images(Some(opts))
        .await
        .map_err(|e| format!("listing images: {}", chain(&e)))?;
    scopes.extend(
        images
            .into_iter()
            .filter_map(|i| i.labels.get(LABEL_SCOPE).cloned()),
    );
    let opts = ListNetworksOptionsBuilder::new().filters(&filters).build();
    let networks = docker
        .list_networks(Some(opts))
        .await
        .map_err(|e| format!("listing networks: {}", chain(&e)))?;
    scopes.extend(
        networks
            .into_iter()
            .filter_map(|n| n.labels?.get(LABEL_SCOPE).cloned()),
    );
    Ok(scopes)
}

/// One sweep of `scope`: the provider's cleanup with a far-future cutoff,
/// a destroy of whatever its inventory still lists, then every container,
/// image and network carrying the scope label, and the network by name.
/// Returns what failed; every step runs.
async fn sweep(provider: &DockerProvider, scope: &str, network: &str) -> Vec<String> {
    let mut problems: Vec<String> = shared::cleanup_everything(provider)
        .await
        .into_iter()
        .collect();
    problems.extend(provider.destroy_all().await);
    let docker = provider.docker();
    let labels = [(LABEL_SCOPE, scope)];
    match daemon::list_containers_by_labels(docker, &labels).await {
        Ok(list) => {
            for c in list {
                let id = c.id.unwrap_or_default();
                if let Err(e) = daemon::remove_container(docker, &id).await {
                    problems.push(format!("container {id}: {}", chain(&e)));
                }
            }
        }
        Err(e) => problems.push(format!("listing containers: {}", chain(&e))),
    }
    match scope_images(docker, scope).await {
        Ok(ids) => {
            for id in ids {
                if let Err(e) = daemon::remove_image(docker, &id, true).await {
                    problems.push(format!("image {id}: {}", chain(&e)));
                }
            }
        }
        Err(e) => problems.push(e),
    }
    let mut networks = vec![network.to_owned()];
    match scope_networks(docker, scope).await {
        Ok(names) => networks.extend(names.into_iter().filter(|n| n != network)),
        Err(e) => problems.push(e),
    }
    for name in networks {
        if let Err(e) = testnet::remove_network(docker, &name).await {
            problems.push(format!("network {name}: {}", chain(&e)));
        }
    }
    problems
}

/// Ids of every image (intermediate ones too) labelled with `scope`.
async fn scope_images(docker: &crate::Docker, scope: &str) -> Result<Vec<String>, String> {
    let filters = HashMap::from([("label".to_owned(), vec![format!("{LABEL_SCOPE}={scope}")])]);
    let opts = ListImagesOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_images(Some(opts))
        .await
        .map(|list| list.into_iter().map(|i| i.id).collect())
        .map_err(|e| format!("listing images: {}", chain(&e)))
}

/// Names of every network labelled with `scope`.
async fn scope_networks(docker: &crate::Docker, scope: &str) -> Result<Vec<String>, String> {
    let filters = HashMap::from([("label".to_owned(), vec![format!("{LABEL_SCOPE}={scope}")])]);
    let opts = ListNetworksOptionsBuilder::new().filters(&filters).build();
    docker
        .list_networks(Some(opts))
        .await
        .map(|list| list.into_iter().filter_map(|n| n.name).collect())
        .map_err(|e| format!("listing networks: {}", chain(&e)))
}

/// What of `scope` is still at the daemon or in the provider's inventory,
/// each named (`container <id>`, `image <id>`, `network <name>`,
/// `instance <id>`, `snapshot <id>`).
async fn leftovers(
    provider: &DockerProvider,
    scope: &str,
    network: &str,
) -> Result<Vec<String>, String> {
    let docker = provider.docker();
    let mut left = Vec::new();
    let inv = provider
        .inventory()
        .await
        .map_err(|e| format!("inventory: {e}"))?;
    left.extend(inv.instances.keys().map(|id| format!("instance {id}")));
    left.extend(inv.snapshots.keys().map(|id| format!("snapshot {id}")));
    let containers = daemon::list_containers_by_labels(docker, &[(LABEL_SCOPE, scope)])
        .await
        .map_err(|e| format!("listing containers: {}", chain(&e)))?;
    left.extend(
        containers
            .into_iter()
            .map(|c| format!("container {}", c.id.unwrap_or_default())),
    );
    left.extend(
        scope_images(docker, scope)
            .await?
            .into_iter()
            .map(|id| format!("image {id}")),
    );
    let mut networks = scope_networks(docker, scope).await?;
    let named = docker
        .inspect_network(
            network,
            None::<bollard::query_parameters::InspectNetworkOptions>,
        )
        .await;
    match named {
        Ok(_) => networks.push(network.to_owned()),
        Err(e) if daemon::is_not_found(&e) => {}
        Err(e) => return Err(format!("inspecting network {network}: {}", chain(&e))),
    }
    networks.sort();
    networks.dedup();
    left.extend(networks.into_iter().map(|n| format!("network {n}")));
    Ok(left)
}

impl Drop for DockerTarget {
    fn drop(&mut self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        // Drop cannot await and may run inside a runtime: best effort.
        let provider = self.provider.clone();
        let scope = self.scope.clone();
        let network = self.network.clone();
        shared::run_to_end(async move { sweep(&provider, &scope, &network).await });
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
        suite::declared_tokens(self.provider.egress_support().is_enforced())
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

    async fn start_listener(&self) -> Result<Listener, TargetError> {
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
        .map_err(|e| TargetError::platform("listener", e))?;
        if let Ok(mut map) = self.listeners.lock() {
            map.insert((l.ip.clone(), l.port), l.container_id);
        }
        Ok(Listener {
            host: l.ip,
            port: l.port,
            token,
        })
    }

    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, TargetError> {
        testnet::dial(
            self.provider.docker(),
            &self.fixture_id,
            &self.network,
            &self.support_labels(),
            &listener.host,
            listener.port,
        )
        .await
        .map_err(|e| {
            TargetError::platform(
                format!("control dial of {}:{}", listener.host, listener.port),
                e,
            )
        })
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

    /// The journal keeps bodies in the state directory (durable host
    /// storage): `ephemeral_zdr` transactions must be refused.
    fn active_write_journal_durable(&self) -> bool {
        true
    }

    /// `docker pause` of the instance's container, as an operator would.
    async fn pause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        let name = self
            .provider
            .container_of(instance_id)
            .unwrap_or_else(|| crate::provider::container_name(instance_id));
        Some(
            self.provider
                .docker()
                .pause_container(&name)
                .await
                .map_err(|e| TargetError::platform("pause_workload", e)),
        )
    }

    /// `docker unpause` of the instance's container.
    async fn unpause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        let name = self
            .provider
            .container_of(instance_id)
            .unwrap_or_else(|| crate::provider::container_name(instance_id));
        Some(
            self.provider
                .docker()
                .unpause_container(&name)
                .await
                .map_err(|e| TargetError::platform("unpause_workload", e)),
        )
    }

    /// The container's `State.Paused` as the daemon reports it.
    async fn workload_paused(&self, instance_id: &str) -> Option<Result<bool, TargetError>> {
        let name = self
            .provider
            .container_of(instance_id)
            .unwrap_or_else(|| crate::provider::container_name(instance_id));
        Some(
            crate::daemon::inspect_container(self.provider.docker(), &name)
                .await
                .map_err(|e| TargetError::platform("workload_paused", e))
                .and_then(|c| {
                    c.map(|c| c.state.and_then(|s| s.paused).unwrap_or(false))
                        .ok_or_else(|| {
                            TargetError::platform("workload_paused", format!("no container {name}"))
                        })
                }),
        )
    }

    async fn live_objects(&self) -> Result<LiveObjects, TargetError> {
        let inv = self
            .provider
            .inventory()
            .await
            .map_err(|e| TargetError::platform("inventory", e))?;
        Ok(suite::live_objects(inv.instances, inv.snapshots))
    }

    /// The scope teardown: [`DockerTarget::close_scope`].
    async fn close(&self) -> Result<(), TargetError> {
        self.close_scope().await
    }
}
