//! The Linux provider as a conformance target: the real kernel, the
//! offline busybox fixture written into a fresh image store, a unique
//! scope and a temporary state directory per target, and token listeners
//! on the host's loopback.
//!
//! Declares six tokens (filesystem, process, snapshot, network-none, zdr,
//! cleanup), and network-allowlist where the host probe lets the provider
//! enforce allowlists ([`crate::EgressSupport`]); elsewhere
//! allowlist-egress is a recorded skip.
//!
//! Network traffic only goes to listeners this target started, on the
//! host: on the gateway address of the scope's bridge where allowlists are
//! enforced (the only host address an allowlist instance has a route to;
//! the bridge is the provider's, created for the scope and removed with
//! it), else on `127.0.0.1`. An instance of network `none` has no route to
//! either (its namespace holds loopback only), so a provider that left an
//! instance in the host's network namespace reaches the listener and fails
//! none-egress, while the positive control dials it from the host.
//!
//! Compiled with the feature `conformance`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_conformance::context::fresh_token;
use checkfu_sandbox_conformance::{ConformanceTarget, Listener, LiveObjects, TargetError, Token};
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::conformance_target::{self as shared, suite};
use checkfu_sandbox_hostfs::errors::chain;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::{host_platform, LinuxConfig, LinuxProvider, WorkloadUser};

pub use checkfu_sandbox_hostfs::conformance_target::CONFORMANCE_SCOPE_PREFIX;

/// The Linux provider under test.
pub struct LinuxTarget {
    provider: LinuxProvider,
    root_image: ImageReference,
    scope: String,
    state_path: PathBuf,
    state_dir: Mutex<Option<tempfile::TempDir>>,
    listeners: Mutex<HashMap<u16, tokio::task::JoinHandle<()>>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for LinuxTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinuxTarget")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl LinuxTarget {
    /// Checks the provider's availability, finds the busybox at `busybox`
    /// (fetching Debian's package when it is missing, reported through
    /// `progress`), and prepares a fresh scope `conf-<pid>-<n>`, a
    /// temporary state directory and the fixture in its image store.
    ///
    /// # Errors
    /// [`TargetError::Platform`] when the host cannot run the provider or
    /// the fixture cannot be written.
    pub async fn new(
        busybox: &Path,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<LinuxTarget, TargetError> {
        Self::with_user(busybox, WorkloadUser::Checkfu, progress).await
    }

    /// [`LinuxTarget::new`] with workload commands running as `user`.
    ///
    /// # Errors
    /// As [`LinuxTarget::new`].
    pub async fn with_user(
        busybox: &Path,
        user: WorkloadUser,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<LinuxTarget, TargetError> {
        crate::availability().map_err(|e| TargetError::platform("linux provider", chain(&e)))?;
        let path = checkfu_sandbox_hostfs::busybox::locate_busybox(busybox, progress)
            .await
            .map_err(|e| TargetError::platform("busybox", chain(&e)))?;
        let bb = checkfu_sandbox_hostfs::rootfs::load_busybox(&path)
            .await
            .map_err(|e| TargetError::platform("busybox", chain(&e)))?;
        let scope = shared::fresh_scope();
        let state_dir = suite::fresh_state_dir(&format!("checkfu-linux-{scope}-"))?;
        let provider = LinuxProvider::new(LinuxConfig {
            state_dir: state_dir.path().to_path_buf(),
            scope: scope.clone(),
            clock: Arc::new(SystemClock),
            workload_user: user,
        })
        .map_err(|e| TargetError::platform("provider", chain(&e)))?;
        let store = provider.images().clone();
        let pinned = tokio::task::spawn_blocking(move || store.write_fixture(&bb))
            .await
            .map_err(|e| TargetError::platform("fixture", e))?
            .map_err(|e| TargetError::platform("fixture", chain(&e)))?;
        let root_image = ImageReference::parse(&pinned)
            .map_err(|e| TargetError::platform(format!("fixture reference {pinned}"), e))?;
        Ok(LinuxTarget {
            provider,
            root_image,
            scope,
            state_path: state_dir.path().to_path_buf(),
            state_dir: Mutex::new(Some(state_dir)),
            listeners: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        })
    }

    /// The provider (also reachable through [`ConformanceTarget::provider`]).
    pub fn linux_provider(&self) -> &LinuxProvider {
        &self.provider
    }

    /// The scope of everything this target creates.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The target's state directory (removed by [`LinuxTarget::close_scope`]).
    pub fn state_dir(&self) -> &Path {
        &self.state_path
    }

    /// Removes everything of this target's scope: every instance and
    /// snapshot (the provider's cleanup with a far-future cutoff, then a
    /// destroy of whatever its inventory still lists), the listeners and
    /// the state directory, then checks that no instance, snapshot or
    /// cgroup of the scope is left. Idempotent and best effort.
    ///
    /// # Errors
    /// [`TargetError::Leftovers`] naming everything that could not be
    /// removed.
    pub async fn close_scope(&self) -> Result<(), TargetError> {
        self.closed.store(true, Ordering::SeqCst);
        if let Ok(mut map) = self.listeners.lock() {
            for (_, task) in map.drain() {
                task.abort();
            }
        }
        let problems = sweep_provider(&self.provider).await;
        suite::close_state_dir(&self.state_path, &self.state_dir, problems)
    }
}

/// Runs a freezer operation off the executor.
async fn freezer_call<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, TargetError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TargetError::platform(what, e))?
        .map_err(|e| TargetError::platform(what, e))
}

impl LinuxTarget {
    /// The instance's cgroups where the host has a freezer.
    fn cgroups(&self, instance_id: &str) -> Option<crate::cgroup::InstanceCgroups> {
        let version = match self.provider.freezer_support() {
            crate::cgroup::FreezerSupport::Available(v) => v,
            crate::cgroup::FreezerSupport::Unavailable(_) => return None,
        };
        Some(crate::cgroup::InstanceCgroups::new(
            version,
            &self.scope,
            instance_id,
        ))
    }
}

/// Sweeps everything of `provider`'s scope and returns what is still left
/// (instances, snapshots, links of the scope's allowlist plumbing), one
/// line each.
pub async fn sweep_provider(provider: &LinuxProvider) -> Vec<String> {
    let mut problems: Vec<String> = shared::cleanup_everything(provider)
        .await
        .into_iter()
        .collect();
    problems.extend(provider.destroy_all().await);
    match provider.inventory().await {
        Ok(inv) => {
            problems.extend(inv.instances.keys().map(|id| format!("instance {id} left")));
            problems.extend(inv.snapshots.keys().map(|id| format!("snapshot {id} left")));
        }
        Err(e) => problems.push(format!("inventory: {e}")),
    }
    match provider.egress_links().await {
        Ok(links) => problems.extend(links.into_iter().map(|l| format!("link {l} left"))),
        Err(e) => problems.push(format!("links: {e}")),
    }
    problems
}

/// Removes everything a conformance target of `provider`'s scope created
/// whatever its age (what a target's close does, for a target whose
/// process died before it could), including its state directory
/// `checkfu-linux-<scope>-*` in the temporary directory. Returns one line
/// per object that could not be removed.
pub async fn sweep_conformance_scope(provider: &LinuxProvider) -> Vec<String> {
    let mut problems = sweep_provider(provider).await;
    problems.extend(shared::remove_state_dirs(&format!(
        "checkfu-linux-{}-",
        provider.scope()
    )));
    problems
}

/// The support objects of `provider`'s conformance scope that exist now,
/// one line each, sorted: `link <name>` (the scope's allowlist bridge and
/// host-end veths) and `state directory <path>` (a target's
/// `checkfu-linux-<scope>-*`). Instances and snapshots are not listed:
/// they are the provider's inventory, which the runtime's cleanup counts.
///
/// # Errors
/// A line when the host's links cannot be listed.
pub async fn scope_support_objects(provider: &LinuxProvider) -> Result<Vec<String>, String> {
    let mut objects: Vec<String> = provider
        .egress_links()
        .await?
        .into_iter()
        .map(|l| format!("link {l}"))
        .collect();
    objects.extend(
        conformance_state_dirs()
            .into_iter()
            .filter(|(scope, _)| scope == provider.scope())
            .map(|(_, dir)| format!("state directory {}", dir.display())),
    );
    objects.sort();
    Ok(objects)
}

/// The state directories conformance targets left in the temporary
/// directory (`checkfu-linux-<scope>-<suffix>`), with their scopes: what a
/// `checkfu sandbox test` killed before it could close its target leaves.
pub fn conformance_state_dirs() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    // The host's temporary directory, never a workload tree.
    #[allow(clippy::disallowed_methods)]
    let listed = std::fs::read_dir(std::env::temp_dir());
    for e in listed.into_iter().flatten().filter_map(Result::ok) {
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some(rest) = name.strip_prefix("checkfu-linux-") else {
            continue;
        };
        let Some((scope, _suffix)) = rest.rsplit_once('-') else {
            continue;
        };
        if scope.starts_with(CONFORMANCE_SCOPE_PREFIX) && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push((scope.to_owned(), e.path()));
        }
    }
    out.sort();
    out
}

impl Drop for LinuxTarget {
    fn drop(&mut self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut map) = self.listeners.lock() {
            for (_, task) in map.drain() {
                task.abort();
            }
        }
        // Drop cannot await and may run inside a runtime: best effort.
        let provider = self.provider.clone();
        shared::run_to_end(async move { sweep_provider(&provider).await });
    }
}

#[async_trait]
impl ConformanceTarget for LinuxTarget {
    fn name(&self) -> &str {
        "linux"
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
        let token = fresh_token("linux-listener");
        let host = if self.provider.egress_support().is_enforced() {
            self.provider
                .egress_gateway()
                .await
                .map_err(|e| TargetError::platform("listener bridge", e))?
        } else {
            std::net::Ipv4Addr::LOCALHOST
        };
        let socket = tokio::net::TcpListener::bind((host, 0))
            .await
            .map_err(|e| TargetError::platform("listener", e))?;
        let port = socket
            .local_addr()
            .map_err(|e| TargetError::platform("listener", e))?
            .port();
        let sent = token.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = socket.accept().await {
                let sent = sent.clone();
                tokio::spawn(async move {
                    let _ = conn.write_all(sent.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        if let Ok(mut map) = self.listeners.lock() {
            map.insert(port, task);
        }
        Ok(Listener {
            host: host.to_string(),
            port,
            token,
        })
    }

    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, TargetError> {
        let dial = async {
            let mut conn = tokio::net::TcpStream::connect((listener.host.as_str(), listener.port))
                .await
                .map_err(|_| TargetError::NotListening {
                    host: listener.host.clone(),
                    port: listener.port,
                })?;
            let mut got = Vec::new();
            conn.read_to_end(&mut got)
                .await
                .map_err(|e| TargetError::platform("control dial", e))?;
            Ok(got)
        };
        tokio::time::timeout(Duration::from_secs(10), dial)
            .await
            .map_err(|_| TargetError::platform("control dial", "timed out after 10 s"))?
    }

    async fn stop_listener(&self, listener: &Listener) {
        let task = self
            .listeners
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&listener.port));
        if let Some(task) = task {
            task.abort();
        }
    }

    /// The journal keeps bodies in the state directory (durable host
    /// storage): `ephemeral_zdr` transactions must be refused.
    fn active_write_journal_durable(&self) -> bool {
        true
    }

    /// Freezes the instance's cgroup, as an operator would (`None` without
    /// a freezer).
    async fn pause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        let cg = self.cgroups(instance_id)?;
        Some(freezer_call("pause_workload", move || cg.freeze()).await)
    }

    /// Thaws the instance's cgroup.
    async fn unpause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        let cg = self.cgroups(instance_id)?;
        Some(freezer_call("unpause_workload", move || cg.thaw()).await)
    }

    /// The freezer's state as the kernel reports it.
    async fn workload_paused(&self, instance_id: &str) -> Option<Result<bool, TargetError>> {
        let cg = self.cgroups(instance_id)?;
        let id = instance_id.to_owned();
        Some(
            freezer_call("workload_paused", move || cg.frozen())
                .await
                .and_then(|f| {
                    f.ok_or_else(|| {
                        TargetError::platform("workload_paused", format!("no cgroup of {id}"))
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

    /// The scope teardown: [`LinuxTarget::close_scope`].
    async fn close(&self) -> Result<(), TargetError> {
        self.close_scope().await
    }
}
