//! The warm pool: containers created and started ahead of provisions, per
//! shape, so that provision claims one and activation has nothing left to
//! start (decision 026).
//!
//! # Shape
//!
//! Everything Docker fixes when it creates a container: the image, the
//! resource limits, the network mode and the mount plan (each mount's path
//! and access: bind mounts cannot be added to a running container). Two
//! requests of one [`Shape`] get interchangeable containers. Only network
//! `none` is pooled: an allowlist instance's rules are loaded into its own
//! namespace when its container starts (`Shape::poolable`).
//!
//! # Life of a slot
//!
//! A slot is a host directory `instances/p-<hex>/` (mount and output host
//! directories prepared exactly as a provision prepares them, plus a
//! `pool-owner` file) and a started container `checkfu-p-<hex>` bound to
//! them, labelled `checkfu.sandbox.kind=pool` with the slot id, the shape
//! and the owning provider object. Provision claims a ready slot: it writes
//! the instance record into the slot directory and renames the directory to
//! `instances/<instance id>` (the container's binds follow the directory),
//! and the record names the container (`pool_container`). From then on the
//! container belongs to that instance alone and goes with it: a container
//! is never reused after a workload ran in it. Each claim starts a
//! background refill of its shape up to the configured size.
//!
//! # Sweeping
//!
//! [`DockerProvider::drain_pool`] removes every ready slot and waits for
//! refills in flight; `destroy_all` drains. Cleanup removes slots no live
//! provider owns: slots of another provider object whose process is gone
//! (its pid in the owner label no longer exists), never a slot an instance
//! record claimed (the instance's own sweep removes that container).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use sha2::{Digest as _, Sha256};
use tokio_util::task::TaskTracker;

use super::{
    errors::{blocking, chain, daemon_error},
    inner::{DockerProvider, Inner},
    labels::{container_name, LABEL_CREATED_AT, LABEL_KIND, LABEL_PROVIDER, LABEL_SCOPE},
};
use crate::daemon;
use crate::store;

/// Prefix of pool slot ids (`p-<24 hex>`).
pub(super) const SLOT_PREFIX: &str = "p";
/// File in a slot directory naming the provider object that created it.
pub(super) const OWNER_FILE: &str = "pool-owner";
/// `checkfu.sandbox.kind` of pooled containers.
pub const KIND_POOL: &str = "pool";
/// Label: the pool slot id of a pooled container.
pub const LABEL_POOL_SLOT: &str = "checkfu.sandbox.pool_slot";
/// Label: the shape digest of a pooled container: 16 hex digits of SHA-256
/// over its image, limits, network mode and mount plan.
pub const LABEL_POOL_SHAPE: &str = "checkfu.sandbox.pool_shape";
/// Label: the provider object that created a pooled container,
/// `<pid>.<nonce>`.
pub const LABEL_POOL_OWNER: &str = "checkfu.sandbox.pool_owner";
/// Ready containers kept per shape unless configured otherwise.
pub const DEFAULT_POOL_SIZE: usize = 2;
/// Largest pool size accepted per shape.
pub const MAX_POOL_SIZE: usize = 16;
/// How long draining waits for refills in flight (a container create and
/// start each).
const DRAIN_BOUND: std::time::Duration = std::time::Duration::from_secs(60);
/// Environment variable the CLI and the conformance target read the pool
/// size from (`0` disables the pool).
pub const POOL_ENV: &str = "CHECKFU_DOCKER_POOL";

/// What Docker fixes at container creation; requests of one shape share
/// pooled containers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub(super) struct Shape {
    /// The image the container runs (`sha256:<id>`).
    image: String,
    /// The profile's resource limits.
    resources: Resources,
    /// The network mode.
    network: NetworkMode,
    /// Each mount's path and access, in order.
    mounts: Vec<SandboxMount>,
}

impl Shape {
    /// Whether a request may be served from the pool: only network
    /// `none`. An allowlist instance's rule set is resolved and loaded
    /// into its own namespace when its container starts
    /// ([`crate::egress`]), which a container started ahead of time
    /// would skip.
    pub(super) fn poolable(request: &SandboxProvisionRequest) -> bool {
        request.profile.network_policy.mode() == NetworkMode::None
    }

    pub(super) fn of(request: &SandboxProvisionRequest, image: &str) -> Shape {
        Shape {
            image: image.to_owned(),
            resources: request.profile.resources.clone(),
            network: request.profile.network_policy.mode(),
            mounts: request.mounts.clone(),
        }
    }

    /// 16 hex digits of SHA-256 over the shape's JSON: the label value.
    fn digest(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        crate::fixture::hex(&Sha256::digest(&json))[..16].to_owned()
    }
}

/// A ready pooled container and its host directory.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    /// `p-<hex>`: the directory `instances/<id>` and the container name.
    pub(super) id: String,
    /// The container id.
    pub(super) container: String,
}

struct ShapeEntry {
    digest: String,
    /// A request of this shape: what refills prepare directories and
    /// containers from.
    template: SandboxProvisionRequest,
    ready: VecDeque<Slot>,
    filling: usize,
    hits: u64,
    misses: u64,
}

#[derive(Default)]
struct PoolState {
    closed: bool,
    shapes: HashMap<Shape, ShapeEntry>,
    /// Slots of this pool that are being filled, ready or being claimed:
    /// never an orphan to this provider's cleanup.
    live: HashSet<String>,
}

/// The pool of one provider object.
pub(crate) struct Pool {
    size: usize,
    owner: String,
    state: Mutex<PoolState>,
    refills: TaskTracker,
}

/// The pool's counts for one shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PoolShapeStatus {
    /// 16 hex digits naming the shape (label `checkfu.sandbox.pool_shape`).
    pub shape: String,
    /// The image of the shape (`sha256:<id>`).
    pub image: String,
    /// Number of mounts in the shape's mount plan.
    pub mounts: usize,
    /// Started containers waiting to be claimed.
    pub ready: usize,
    /// Containers being created and started now.
    pub filling: usize,
    /// Provisions that claimed a ready container.
    pub hits: u64,
    /// Provisions of this shape that found none ready.
    pub misses: u64,
}

/// The pool's configured size and counts (`checkfu sandbox capabilities`
/// prints them beside the envelope).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PoolStatus {
    /// Ready containers kept per shape; 0: the pool is off.
    pub size: usize,
    /// Whether the pool was drained (no refills any more).
    pub closed: bool,
    /// One entry per shape seen, in shape order.
    pub shapes: Vec<PoolShapeStatus>,
}

impl Pool {
    pub(crate) fn new(size: usize) -> Pool {
        let nonce = store::fresh_id("o", "pool");
        Pool {
            size: size.min(MAX_POOL_SIZE),
            owner: format!("{}.{}", std::process::id(), &nonce[2..14]),
            state: Mutex::new(PoolState::default()),
            refills: TaskTracker::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn status(&self) -> PoolStatus {
        let st = self.lock();
        let mut shapes: Vec<PoolShapeStatus> = st
            .shapes
            .iter()
            .map(|(shape, e)| PoolShapeStatus {
                shape: e.digest.clone(),
                image: shape.image.clone(),
                mounts: shape.mounts.len(),
                ready: e.ready.len(),
                filling: e.filling,
                hits: e.hits,
                misses: e.misses,
            })
            .collect();
        shapes.sort_by(|a, b| a.shape.cmp(&b.shape));
        PoolStatus {
            size: self.size,
            closed: st.closed,
            shapes,
        }
    }
}

/// Whether the process named by an owner value `<pid>.<nonce>` is alive on
/// this host (signal 0: anything but "no such process" counts as alive).
/// An owner that does not parse counts as gone.
fn owner_alive(owner: &str) -> bool {
    owner
        .split('.')
        .next()
        .and_then(|p| p.parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|pid| {
            !matches!(
                rustix::process::test_kill_process(pid),
                Err(rustix::io::Errno::SRCH)
            )
        })
}

impl Inner {
    /// Takes a ready slot of the request's shape, if any, and starts the
    /// refills that bring the shape back to the pool size.
    pub(super) fn pool_take(
        self: &Arc<Inner>,
        request: &SandboxProvisionRequest,
        image: &str,
    ) -> Option<Slot> {
        if self.pool.size == 0 || !Shape::poolable(request) {
            return None;
        }
        let shape = Shape::of(request, image);
        let (slot, refills) = {
            let mut st = self.pool.lock();
            if st.closed {
                return None;
            }
            let entry = st
                .shapes
                .entry(shape.clone())
                .or_insert_with(|| ShapeEntry {
                    digest: shape.digest(),
                    template: request.clone(),
                    ready: VecDeque::new(),
                    filling: 0,
                    hits: 0,
                    misses: 0,
                });
            let slot = entry.ready.pop_front();
            if slot.is_some() {
                entry.hits += 1;
            } else {
                entry.misses += 1;
            }
            let deficit = self
                .pool
                .size
                .saturating_sub(entry.ready.len() + entry.filling);
            entry.filling += deficit;
            (slot, deficit)
        };
        for _ in 0..refills {
            let inner = self.clone();
            let shape = shape.clone();
            self.pool
                .refills
                .spawn(async move { inner.pool_fill_one(shape).await });
        }
        slot
    }

    /// Fills the pool of the request's shape up to its size and waits until
    /// it is full (or a fill failed). Returns how many slots are ready.
    pub(super) async fn pool_prewarm(
        self: &Arc<Inner>,
        request: &SandboxProvisionRequest,
        image: &str,
    ) -> usize {
        if self.pool.size == 0 || !Shape::poolable(request) {
            return 0;
        }
        let shape = Shape::of(request, image);
        let mut missing = 0;
        {
            let mut st = self.pool.lock();
            if st.closed {
                return 0;
            }
            let entry = st
                .shapes
                .entry(shape.clone())
                .or_insert_with(|| ShapeEntry {
                    digest: shape.digest(),
                    template: request.clone(),
                    ready: VecDeque::new(),
                    filling: 0,
                    hits: 0,
                    misses: 0,
                });
            if entry.ready.len() + entry.filling < self.pool.size {
                missing = self.pool.size - entry.ready.len() - entry.filling;
                entry.filling += missing;
            }
        }
        let fills: Vec<_> = (0..missing)
            .map(|_| {
                let inner = self.clone();
                let shape = shape.clone();
                self.pool
                    .refills
                    .spawn(async move { inner.pool_fill_one(shape).await })
            })
            .collect();
        for f in fills {
            let _ = f.await;
        }
        // Refills started earlier by claims may still be running.
        loop {
            let (ready, filling) = {
                let st = self.pool.lock();
                st.shapes
                    .get(&shape)
                    .map_or((0, 0), |e| (e.ready.len(), e.filling))
            };
            if filling == 0 || ready >= self.pool.size {
                return ready;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Creates one slot of `shape` (host directories, then the started
    /// container) and makes it ready; removes it again when the pool was
    /// drained meanwhile. A failure is logged and leaves nothing behind.
    async fn pool_fill_one(self: Arc<Inner>, shape: Shape) {
        let Some(template) = ({
            let st = self.pool.lock();
            st.shapes.get(&shape).map(|e| e.template.clone())
        }) else {
            return;
        };
        let slot_id = store::fresh_id(SLOT_PREFIX, &self.scope);
        self.pool.lock().live.insert(slot_id.clone());
        let made = self.pool_make_slot(&slot_id, &shape, &template).await;
        // What to undo, decided under the lock and done after it.
        let discard: Option<Option<String>> = {
            let mut st = self.pool.lock();
            if let Some(e) = st.shapes.get_mut(&shape) {
                e.filling = e.filling.saturating_sub(1);
            }
            match made {
                Ok(container) if !st.closed => {
                    if let Some(e) = st.shapes.get_mut(&shape) {
                        e.ready.push_back(Slot {
                            id: slot_id.clone(),
                            container,
                        });
                    }
                    None
                }
                Ok(container) => {
                    st.live.remove(&slot_id);
                    Some(Some(container))
                }
                Err(why) => {
                    st.live.remove(&slot_id);
                    tracing::warn!(slot = %slot_id, %why, "pool refill failed");
                    Some(None)
                }
            }
        };
        if let Some(container) = discard {
            self.pool_discard(&slot_id, container.as_deref()).await;
        }
    }

    async fn pool_make_slot(
        &self,
        slot_id: &str,
        shape: &Shape,
        template: &SandboxProvisionRequest,
    ) -> Result<String, String> {
        let dir = self.layout.instance_dir(slot_id);
        std::fs::create_dir(&dir).map_err(|e| format!("creating the slot directory: {e}"))?;
        std::fs::write(dir.join(OWNER_FILE), &self.pool.owner)
            .map_err(|e| format!("writing the slot owner: {e}"))?;
        self.prepare_dirs(slot_id, template)?;
        let mut labels = self.base_labels(KIND_POOL);
        for (k, v) in [
            (LABEL_POOL_SLOT, slot_id.to_owned()),
            (LABEL_POOL_SHAPE, shape.digest()),
            (LABEL_POOL_OWNER, self.pool.owner.clone()),
            (LABEL_CREATED_AT, self.clock.now().to_string()),
        ] {
            labels.insert(k.to_owned(), v);
        }
        let spec = self.container_spec(slot_id, template, &shape.image, labels);
        daemon::create_and_start(&self.docker, &spec)
            .await
            .map_err(|e| chain(&e))
    }

    /// Removes a slot's container (by id when known, else by name) and its
    /// directory; failures are logged.
    async fn pool_discard(&self, slot_id: &str, container: Option<&str>) {
        let name = container_name(slot_id);
        if let Err(e) =
            daemon::remove_container(&self.docker, container.unwrap_or(name.as_str())).await
        {
            tracing::warn!(slot = %slot_id, error = %chain(&e), "removing a pool container failed");
        }
        let dir = self.layout.instance_dir(slot_id);
        let removed = blocking(op::CLEANUP, move || match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .await;
        if let Ok(Err(e)) = removed {
            tracing::warn!(slot = %slot_id, error = %e, "removing a pool slot directory failed");
        }
    }

    /// A claimed slot that could not become an instance: removed, and no
    /// longer live.
    pub(super) async fn pool_release_unclaimed(&self, slot: &Slot) {
        self.pool_discard(&slot.id, Some(&slot.container)).await;
        self.pool.lock().live.remove(&slot.id);
    }

    /// The claim finished (the slot directory is an instance directory).
    pub(super) fn pool_claimed(&self, slot: &Slot) {
        self.pool.lock().live.remove(&slot.id);
    }

    /// Stops refilling, waits for refills in flight and removes every ready
    /// slot. Returns one line per slot that could not be removed.
    pub(super) async fn pool_drain(&self) -> Vec<String> {
        let slots: Vec<Slot> = {
            let mut st = self.pool.lock();
            st.closed = true;
            st.shapes
                .values_mut()
                .flat_map(|e| e.ready.drain(..))
                .collect()
        };
        self.pool.refills.close();
        let mut problems = Vec::new();
        if tokio::time::timeout(DRAIN_BOUND, self.pool.refills.wait())
            .await
            .is_err()
        {
            problems.push(format!(
                "pool refills still running after {} s (left to cleanup)",
                DRAIN_BOUND.as_secs()
            ));
        }
        for slot in &slots {
            if let Err(e) = daemon::remove_container(&self.docker, &slot.container).await {
                problems.push(format!("pool container {}: {}", slot.container, chain(&e)));
            }
            match std::fs::remove_dir_all(self.layout.instance_dir(&slot.id)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    problems.push(format!("pool slot {}: {e}", slot.id));
                }
                _ => {}
            }
            self.pool.lock().live.remove(&slot.id);
        }
        problems
    }

    /// Removes pool slots of this scope that no live provider owns and no
    /// instance claimed: containers whose owner process is gone, and slot
    /// directories without a container whose owner is gone or is this
    /// provider object without holding them. `claimed` are the containers
    /// instance records name.
    pub(super) async fn pool_sweep_orphans(
        &self,
        claimed: &BTreeSet<String>,
    ) -> Result<usize, SandboxError> {
        const OP: Operation = op::CLEANUP;
        let labels = [
            (LABEL_PROVIDER, super::inner::PROVIDER_ID),
            (LABEL_SCOPE, self.scope.as_str()),
            (LABEL_KIND, KIND_POOL),
        ];
        let containers = daemon::list_containers_by_labels(&self.docker, &labels)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        let live = self.pool.lock().live.clone();
        let mut swept = 0;
        let mut with_container = HashSet::new();
        for c in containers {
            let (Some(cid), Some(l)) = (c.id, c.labels) else {
                continue;
            };
            let slot = l.get(LABEL_POOL_SLOT).cloned().unwrap_or_default();
            with_container.insert(slot.clone());
            let owner = l.get(LABEL_POOL_OWNER).map_or("", String::as_str);
            let ours = owner == self.pool.owner;
            if claimed.contains(&cid) || live.contains(&slot) || (!ours && owner_alive(owner)) {
                continue;
            }
            daemon::remove_container(&self.docker, &cid)
                .await
                .map_err(|e| daemon_error(OP, &e))?;
            if store::is_id(SLOT_PREFIX, &slot) {
                let _ = std::fs::remove_dir_all(self.layout.instance_dir(&slot));
            }
            swept += 1;
        }
        // Slot directories whose container never came (a crash between the
        // directory and the container).
        #[allow(clippy::disallowed_methods)]
        let listed = std::fs::read_dir(self.layout.instances());
        for e in listed.into_iter().flatten().filter_map(Result::ok) {
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !store::is_id(SLOT_PREFIX, &name)
                || live.contains(&name)
                || with_container.contains(&name)
            {
                continue;
            }
            // The owner file sits beside the bound directories, out of the
            // workload's reach (and no workload ever ran in an unclaimed slot).
            #[allow(clippy::disallowed_methods)]
            let owner = std::fs::read_to_string(e.path().join(OWNER_FILE)).unwrap_or_default();
            if owner == self.pool.owner || !owner_alive(&owner) {
                let _ = std::fs::remove_dir_all(e.path());
                swept += 1;
            }
        }
        Ok(swept)
    }
}

impl DockerProvider {
    /// The pool's size and counts per shape.
    pub fn pool_status(&self) -> PoolStatus {
        self.inner.pool.status()
    }

    /// Fills the warm pool for `request`'s shape up to the configured size
    /// and waits until it is full; returns how many containers are ready
    /// (0 when the pool is off or drained). A later provision of the same
    /// shape claims one of them.
    ///
    /// # Errors
    ///
    /// As provision's admission and image resolution: the request is one
    /// this provider would refuse.
    pub async fn prewarm(&self, request: &SandboxProvisionRequest) -> Result<usize, SandboxError> {
        self.inner.admit(op::PROVISION, request)?;
        let image = self.inner.resolve_root(request).await?;
        Ok(self.inner.pool_prewarm(request, &image).await)
    }

    /// Stops refilling the pool and removes every container in it (waiting
    /// for refills in flight). Containers already claimed by instances are
    /// theirs and stay. Afterwards provisions start containers at
    /// activation, as with a pool of size 0. Returns one line per slot that
    /// could not be removed.
    pub async fn drain_pool(&self) -> Vec<String> {
        self.inner.pool_drain().await
    }
}
