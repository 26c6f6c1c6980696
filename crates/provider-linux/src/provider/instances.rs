//! Instances: admission, host directories, the writable root layer, the
//! init process, destruction.

use std::ffi::CString;
use std::os::fd::AsFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use checkfu_sandbox_contained::{self as contained};
use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::instance::{self, HostProviderIdentity};
use checkfu_sandbox_hostfs::instance_dirs::{self, DestroyTarget};
use checkfu_sandbox_hostfs::snapshot_files;

use super::{
    envelope::host_platform,
    errors::{blocking, chain, provider_error},
    inner::{Inner, INSTANCE_PREFIX, MATERIALIZATION_REVISION, PROVIDER_ID, PROVIDER_REVISION},
};
use crate::cgroup::InstanceCgroups;
use crate::image::ImageError;
use crate::image::ImageStore;
use crate::image::{DEV_LINKS, DEV_NODES};
use crate::spawn::{self, Bind, InitPlan, RootMount};
use crate::store::RootLayout as _;
use crate::store::{InitRecord, InstanceRecord, Layout, RootMode, RECORD_REVISION};

/// How long a killed init may take to disappear before destroy fails.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// The host name every instance reports.
pub const INSTANCE_HOSTNAME: &str = "checkfu";

/// What this provider is, for the shared instance and admission code.
pub(super) const IDENTITY: HostProviderIdentity = HostProviderIdentity {
    provider_id: PROVIDER_ID,
    provider_revision: PROVIDER_REVISION,
    materialization_revision: MATERIALIZATION_REVISION,
};

/// The instance `id` of `request` in `state`.
pub(super) fn instance_of(
    request: &SandboxProvisionRequest,
    id: &str,
    state: InstanceState,
) -> SandboxInstance {
    instance::instance_of(&IDENTITY, request, id, state)
}

fn cstring(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} holds a NUL", p.display()))
}

/// `root` joined with an absolute sandbox path.
fn inside(root: &Path, sandbox_path: &str) -> PathBuf {
    root.join(sandbox_path.trim_start_matches('/'))
}

pub(crate) use checkfu_sandbox_hostexec::command::start_ticks;

/// Prepares the writable root layer: `upper/` and `work/` (overlay, mounted
/// on the provider's one `overlay-root/`), or a private copy of the image
/// in `root/`; then the mount points of every mount, the output tree,
/// `/proc` and `/dev` the image lacks in it, created beneath the layer
/// without following links. Blocking. A resumed instance (`fresh` false)
/// already has its layer.
pub(super) fn prepare_root(
    layout: &Layout,
    images: &ImageStore,
    rec: &InstanceRecord,
    fresh: bool,
) -> Result<(), String> {
    let id = &rec.instance_id;
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let lower = images.rootfs_dir(&rec.image);
    let layer = match rec.root_mode {
        RootMode::Overlay => {
            for d in [layout.upper_dir(id), layout.work_dir(id)] {
                std::fs::create_dir_all(&d).map_err(|e| io("creating the root layer", e))?;
            }
            layout.upper_dir(id)
        }
        RootMode::Copy if !fresh => layout.root_dir(id),
        RootMode::Copy => {
            let root = layout.root_dir(id);
            let out = std::process::Command::new("cp")
                .arg("-a")
                .arg(&lower)
                .arg(&root)
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| io("copying the image", e))?;
            if !out.status.success() {
                return Err(format!(
                    "copying the image: cp exited with {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            root
        }
    };
    // Opened only when a mount point is missing from the image.
    let mut layer_fd = None;
    // A mount point the image's shared tree already holds as a directory
    // (the standard ones are added when an image is unpacked) needs nothing
    // in the writable layer: fewer directories to make and to remove. The
    // tree never changes once published, so a point found there is not
    // looked for again (decision 051); the tree is opened only to look.
    let mut lower_fd = None;
    let mut points: Vec<&str> = rec.request.mounts.iter().map(|m| m.path.as_str()).collect();
    points.extend(crate::image::STANDARD_MOUNT_POINTS);
    for p in points {
        let rel = Path::new(p.trim_start_matches('/'));
        let in_image = rec.root_mode == RootMode::Overlay
            && crate::image::directory_seen(&lower, rel, || {
                lower_fd
                    .get_or_insert_with(|| contained::open_root(&lower).ok())
                    .as_ref()
                    .is_some_and(|fd| contained::open_dir_beneath_nofollow(fd.as_fd(), rel).is_ok())
            });
        if in_image {
            continue;
        }
        if layer_fd.is_none() {
            layer_fd = Some(contained::open_root(&layer).map_err(|e| chain(&e))?);
        }
        let fd = layer_fd.as_ref().expect("opened above");
        contained::create_dirs_beneath(fd.as_fd(), rel, None)
            .map(drop)
            .map_err(|e| format!("mount point {p}: {}", chain(&e)))?;
    }
    Ok(())
}

/// This provider's claim to start instance `id`'s init, given up when
/// dropped (after the start, its failure's clean-up included).
struct Starting<'a> {
    inner: &'a Inner,
    id: String,
}

impl<'a> Starting<'a> {
    /// Claims `id`, or `ActivateInFlight` when this provider is starting
    /// it already or has started its init (a second activation that read
    /// the record before the first one saved it).
    fn claim(inner: &'a Inner, operation: Operation, id: &str) -> Result<Self, SandboxError> {
        let mut starting = inner.starting.lock().unwrap_or_else(|p| p.into_inner());
        let running = inner
            .inits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id);
        if running || !starting.insert(id.to_owned()) {
            return Err(SandboxError::conflict(
                operation,
                "provisioning",
                ConflictActual::ActivateInFlight,
            ));
        }
        Ok(Starting {
            inner,
            id: id.to_owned(),
        })
    }
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.inner
            .starting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

/// Why an init could not be started, and whether it had mounted the
/// instance's root layer before it went (so that only its own mount's
/// `volatile` mark is ever cleared, never that of a concurrent
/// activation's live init).
struct StartFailure {
    message: String,
    mounted: bool,
}

/// Makes `cgroups` (with the limits of `resources`), opens their join
/// files into `plan` and starts the instance's init from it: its record
/// and how many command join files it holds. On failure the init is gone
/// (reaped). Blocking.
fn start_blocking(
    mut plan: spawn::InitPlan,
    cgroups: Option<&InstanceCgroups>,
    resources: &Resources,
) -> Result<(InitRecord, usize), StartFailure> {
    let early = |message: String| StartFailure {
        message,
        mounted: false,
    };
    if let Some(cg) = cgroups {
        cg.create(resources)
            .map_err(|e| early(format!("creating the cgroups: {e}")))?;
        plan.cgroups = cg
            .open_join_files()
            .map_err(|e| early(format!("joining the cgroups: {e}")))?;
        plan.command_cgroups = cg
            .open_command_join_files()
            .map_err(|e| early(format!("joining the cgroups: {e}")))?;
    }
    let joins = plan.command_cgroups.len();
    let s = spawn::start_init(&plan).map_err(|e| StartFailure {
        // An init that died without a report: not known, so not cleared.
        mounted: matches!(&e, spawn::InitError::Setup(f) if f.root_was_mounted()),
        message: format!("starting the instance: {e}"),
    })?;
    // Read while the init is surely alive: nothing else kills it before
    // the record holds it.
    match start_ticks(s.pid) {
        Some(start_ticks) => Ok((
            InitRecord {
                pid: s.pid,
                start_ticks,
            },
            joins,
        )),
        None => {
            // Gone, or its /proc entry unreadable: it reported readiness,
            // so it mounted the layer. Still this process's unreaped
            // child, so the pid is its own: stopped and collected.
            if let Some(p) = rustix::process::Pid::from_raw(s.pid) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
            spawn::reap(s.pid, true);
            Err(StartFailure {
                message: format!("the instance's init (pid {}) exited at once", s.pid),
                mounted: true,
            })
        }
    }
}

/// Removes overlayfs's own work tree (`<work>/work`, which holds the
/// `volatile` mark) once the init that mounted the layer is gone (it
/// failed, or the activation was rolled back), so that the layer can be
/// mounted again: overlayfs refuses a layer marked `volatile` because it
/// cannot know whether the host crashed since, and here the host did
/// not. The directory is the provider's, never the workload's. Blocking.
fn clear_overlay_work(work: &Path) {
    let tree = work.join("work");
    match std::fs::remove_dir_all(&tree) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(
            "removing {} once the init that mounted it went: {e}; the layer cannot be mounted again",
            tree.display()
        ),
    }
}

/// Kills `init` if it is still the process the record names and waits
/// until it is gone, within [`STOP_BOUND`]; whether it is gone. Blocking.
fn kill_init(init: InitRecord) -> bool {
    let pid = init.pid;
    let deadline = std::time::Instant::now() + STOP_BOUND;
    loop {
        spawn::reap(pid, false);
        match start_ticks(pid) {
            Some(t) if t == init.start_ticks => {
                if let Some(p) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                // Our own child (the usual case): wait for it at once and
                // look again without sleeping; another's: poll below.
                spawn::reap(pid, true);
                if start_ticks(pid) != Some(init.start_ticks) {
                    return true;
                }
            }
            // Gone, a zombie, or a reused pid: not ours any more.
            _ => return true,
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// How far a failed provision got.
pub(super) enum ProvisionFailure {
    /// Nothing of the instance was made (its image was not resolved).
    Nothing(SandboxError),
    /// The instance's directory may exist: the rollback removes it.
    Partly(SandboxError),
}

impl Inner {
    /// The record of a fresh instance `id` (state `provisioning`, no init
    /// yet) of `request` over `image` (manifest digest, environment),
    /// resumed from snapshot `resumed_from` when given.
    pub(super) fn provisioning_record(
        &self,
        id: &str,
        request: &SandboxProvisionRequest,
        (image, image_env): (String, Vec<String>),
        resumed_from: Option<String>,
    ) -> InstanceRecord {
        InstanceRecord {
            record_revision: RECORD_REVISION,
            scope: self.scope.clone(),
            instance_id: id.to_owned(),
            created_at: self.clock.now(),
            state: InstanceState::Provisioning,
            request: request.clone(),
            image,
            image_env,
            root_mode: self.root_mode,
            init: None,
            resumed_from,
        }
    }

    /// The provider-side admission of a request (the runtime checks first;
    /// this refuses what this provider cannot do even if called directly).
    pub(super) fn admit(
        &self,
        operation: Operation,
        request: &SandboxProvisionRequest,
    ) -> Result<(), SandboxError> {
        instance::admit(&IDENTITY, host_platform(), operation, request, |policy| {
            if policy.mode() == NetworkMode::Allowlist
                && !crate::network::EgressSupport::probe_cached().is_enforced()
            {
                return Err(SandboxError::unavailable(
                    Requirement::NetworkPolicy,
                    "network mode allowlist is not offered on this host",
                ));
            }
            Ok(())
        })
    }

    /// The root image in the store (its manifest digest, manifest and
    /// configuration's environment). Blocking.
    fn resolve_root(
        &self,
        request: &SandboxProvisionRequest,
    ) -> Result<crate::image::StoredImage, SandboxError> {
        match self.images.resolve(request.root_image.as_str()) {
            Ok(image) => Ok(image),
            Err(e @ ImageError::NotFound { .. }) | Err(e @ ImageError::InvalidReference { .. }) => {
                Err(SandboxError::unavailable(
                    Requirement::BaseImage,
                    format!("{e} {}", crate::image::STORE_HINT),
                ))
            }
            Err(e) => Err(provider_error(
                op::PROVISION,
                format!("resolving {}: {}", request.root_image.as_str(), chain(&e)),
            )),
        }
    }

    /// Provision's work for instance `id`, in one blocking task (each hop
    /// to the blocking pool waits for a thread to be scheduled): the root
    /// image resolved, the record published, the host directories made,
    /// the image unpacked on its first use and the root layer prepared.
    /// Blocking.
    pub(super) fn provision_blocking(
        &self,
        request: &SandboxProvisionRequest,
        id: &str,
    ) -> Result<(), ProvisionFailure> {
        const OP: Operation = op::PROVISION;
        let stored = self
            .resolve_root(request)
            .map_err(ProvisionFailure::Nothing)?;
        let rec = self.provisioning_record(
            id,
            request,
            (stored.manifest_hex.clone(), stored.env.clone()),
            None,
        );
        let partly = ProvisionFailure::Partly;
        snapshot_files::publish_instance(OP, &self.layout, id, &rec).map_err(partly)?;
        self.prepare_dirs(id, request)
            .and_then(|()| self.images.unpacked(&stored).map_err(|e| e.to_string()))
            .and_then(|_| prepare_root(&self.layout, &self.images, &rec, true))
            .map_err(|m| partly(provider_error(OP, m)))
    }

    /// Creates the host directories of a fresh instance (mounts and output
    /// tree), with owners, and the mount points of nested mounts.
    pub(super) fn prepare_dirs(
        &self,
        id: &str,
        request: &SandboxProvisionRequest,
    ) -> Result<(), String> {
        instance_dirs::prepare_dirs(&self.layout, id, request)
    }

    /// The init's plan for an instance whose root layer is prepared, but
    /// for the cgroups it joins (opened once they exist).
    fn init_plan(&self, rec: &InstanceRecord) -> Result<InitPlan, String> {
        let id = &rec.instance_id;
        let lower = self.images.rootfs_dir(&rec.image);
        // Every overlay root is mounted on the same empty directory, each in
        // its own instance's mount namespace (the init makes its mount tree
        // private first): no mount point per instance to make and remove.
        let root = match rec.root_mode {
            RootMode::Overlay => self.layout.overlay_root(),
            RootMode::Copy => self.layout.root_dir(id),
        };
        let root_c = cstring(&root)?;
        let root_mount = match rec.root_mode {
            RootMode::Overlay => RootMount::Overlay {
                target: root_c.clone(),
                data: CString::new(format!(
                    "lowerdir={},upperdir={},workdir={}{}",
                    lower.display(),
                    self.layout.upper_dir(id).display(),
                    self.layout.work_dir(id).display(),
                    self.overlay.extra_options()
                ))
                .map_err(|_| "overlay options hold a NUL".to_owned())?,
            },
            RootMode::Copy => RootMount::Copy {
                target: root_c.clone(),
            },
        };
        let r = &rec.request;
        let mut binds: Vec<(usize, Bind)> = Vec::new();
        for (i, m) in r.mounts.iter().enumerate() {
            binds.push((
                m.path.len(),
                Bind {
                    source: cstring(&self.layout.mount_dir(id, i))?,
                    target: cstring(&inside(&root, &m.path))?,
                    read_only: m.access == MountAccess::ReadOnly,
                },
            ));
        }
        binds.push((
            OUTPUT_PATH.len(),
            Bind {
                source: cstring(&self.layout.outputs_dir(id))?,
                target: cstring(&inside(&root, OUTPUT_PATH))?,
                read_only: false,
            },
        ));
        // Parents before the mounts nested in them.
        binds.sort_by_key(|(len, _)| *len);
        let proc_dir = root.join("proc");
        // Only the entries this kernel has (asked once per process).
        let proc = crate::procfs::present();
        // An overlay whose shared tree holds /dev shows it as is; else a
        // tmpfs with the host's nodes bound in (a copy's nodes would sit on
        // the state directory's file system, which may be `nodev`).
        let dev_dir = root.join("dev");
        let dev_in_root =
            rec.root_mode == RootMode::Overlay && crate::image::dev_ready_seen(&lower);
        let (dev_nodes, dev_links): (&[_], &[_]) = if dev_in_root {
            (&[], &[])
        } else {
            (&DEV_NODES, &DEV_LINKS)
        };
        Ok(InitPlan {
            root: root_mount,
            root_path: root_c,
            binds: binds.into_iter().map(|(_, b)| b).collect(),
            proc_dir: cstring(&proc_dir)?,
            proc_read_only: proc
                .read_only
                .iter()
                .map(|p| cstring(&proc_dir.join(p)))
                .collect::<Result<_, _>>()?,
            proc_masked: proc
                .masked
                .iter()
                .map(|p| cstring(&proc_dir.join(p)))
                .collect::<Result<_, _>>()?,
            proc_check_each: !proc.probed,
            dev_dir: (!dev_in_root).then(|| cstring(&dev_dir)).transpose()?,
            dev_nodes: dev_nodes
                .iter()
                .map(|(n, _, _)| {
                    Ok((
                        cstring(&Path::new("/dev").join(n))?,
                        cstring(&dev_dir.join(n))?,
                    ))
                })
                .collect::<Result<_, String>>()?,
            dev_links: dev_links
                .iter()
                .map(|(l, t)| Ok((cstring(Path::new(t))?, cstring(&dev_dir.join(l))?)))
                .collect::<Result<_, String>>()?,
            dev_null: c"/dev/null".to_owned(),
            hostname: CString::new(INSTANCE_HOSTNAME).expect("no NUL"),
            cgroups: Vec::new(),
            command_cgroups: Vec::new(),
            requests: None,
            filters: self.seccomp,
        })
    }

    /// Creates the instance's cgroups and starts its init: the instance is
    /// runnable when this returns. On failure nothing of the init is left.
    ///
    /// The cgroups and the init are made in one blocking task: every hop
    /// to the blocking pool waits for a thread to be scheduled, which a
    /// loaded host delays by milliseconds.
    pub(super) async fn start_init(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<InitRecord, SandboxError> {
        let _starting = Starting::claim(self, operation, &rec.instance_id)?;
        let egress = self.egress_prepare(operation, rec).await?;
        let mut plan = self
            .init_plan(rec)
            .map_err(|m| provider_error(operation, m))?;
        let cgroups = self
            .cgroup_version
            .map(|v| InstanceCgroups::new(v, &self.scope, &rec.instance_id));
        if cgroups.is_some() {
            self.made_cgroups
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let resources = rec.request.profile.resources.clone();
        let (provider_end, init_end) = checkfu_sandbox_hostexec::zygote::socket_pair()
            .map_err(|e| provider_error(operation, format!("the init's request socket: {e}")))?;
        plan.requests = Some(init_end);
        // An overlay mounted `volatile` refuses its upper and work
        // directories ever after (decision 050) unless overlayfs's own
        // work tree goes: an init that failed after its own mount leaves
        // the layer as it found it (nothing of the workload ran), so the
        // instance can be activated again. One that failed before it (a
        // concurrent activation's init may hold the mark) clears nothing.
        let overlay_work =
            (rec.root_mode == RootMode::Overlay).then(|| self.layout.work_dir(&rec.instance_id));
        let started = blocking(operation, move || {
            start_blocking(plan, cgroups.as_ref(), &resources).map_err(|f| {
                if let (true, Some(work)) = (f.mounted, overlay_work) {
                    clear_overlay_work(&work);
                }
                f.message
            })
        })
        .await?
        .map_err(|m| provider_error(operation, m));
        let (init, command_cgroups) = match started {
            Ok(started) => started,
            Err(e) => {
                self.remove_cgroups(&rec.instance_id).await;
                return Err(e);
            }
        };
        // Without a channel, commands enter from the host: slower, same
        // confinement.
        match checkfu_sandbox_hostexec::zygote::Channel::new(provider_end, command_cgroups) {
            Ok(channel) => {
                self.inits.lock().unwrap_or_else(|p| p.into_inner()).insert(
                    rec.instance_id.clone(),
                    (init, std::sync::Arc::new(channel)),
                );
            }
            Err(e) => tracing::warn!(
                "the request channel of {}'s init: {e}; its commands enter from the host",
                rec.instance_id
            ),
        }
        if let Some(egress) = egress {
            if let Err(e) = self.egress_attach(operation, rec, init.pid, egress).await {
                let mut started = rec.clone();
                started.init = Some(init);
                let _ = self.stop_init(operation, &started).await;
                return Err(e);
            }
        }
        Ok(init)
    }

    async fn remove_cgroups(&self, id: &str) -> Option<String> {
        let v = self.cgroup_version?;
        let cg = InstanceCgroups::new(v, &self.scope, id);
        blocking(op::DESTROY, move || cg.remove())
            .await
            .ok()?
            .err()
            .map(|e| e.to_string())
    }

    /// Kills an instance's init (every process of the instance and its
    /// mount namespace go with it), waits until it is gone and removes the
    /// cgroups, in one blocking task; the instance stays, so its overlay
    /// layer is made mountable again (`clear_overlay_work`, decision 051).
    /// Idempotent.
    pub(super) async fn stop_init(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        self.stop_instance(operation, rec, false).await
    }

    /// [`Inner::stop_init`], then, when `remove_dir` and everything else
    /// went, the instance's directory in the same blocking task (one hop
    /// to the blocking pool for destroy).
    async fn stop_instance(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        remove_dir: bool,
    ) -> Result<(), SandboxError> {
        // The host end first: deleting it takes the instance end with it at
        // once, where the namespace's own teardown after the kill is
        // asynchronous.
        self.inits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&rec.instance_id);
        let detached = self.egress_detach(operation, rec).await;
        let cgroups = self
            .cgroup_version
            .map(|v| InstanceCgroups::new(v, &self.scope, &rec.instance_id));
        let init = rec.init;
        let remove_cgroups = detached.is_ok();
        let dir = remove_dir.then(|| (self.layout.clone(), rec.instance_id.clone()));
        // An instance that stays (rolled back to `provisioning`) mounts the
        // same `volatile` layer at its next activation.
        let overlay_work = (!remove_dir && rec.root_mode == RootMode::Overlay)
            .then(|| self.layout.work_dir(&rec.instance_id));
        let (gone, cgroup_problem, dir_removed) = blocking(operation, move || {
            // A frozen task (a workload paused for beginActiveWrite, or by
            // an operator) does not act on SIGKILL until it is thawed.
            if let Some(cg) = &cgroups {
                let _ = cg.thaw();
            }
            let gone = init.is_none_or(kill_init);
            let problem = match (&cgroups, gone && remove_cgroups) {
                (Some(cg), true) => cg.remove().err().map(|e| e.to_string()),
                _ => None,
            };
            if let (true, Some(work)) = (gone && remove_cgroups, overlay_work) {
                clear_overlay_work(&work);
            }
            let removed = match dir {
                Some((layout, id)) if gone && remove_cgroups && problem.is_none() => Some(
                    instance_dirs::remove_instance_dir_blocking(&layout, operation, &id),
                ),
                _ => None,
            };
            (gone, problem, removed)
        })
        .await?;
        if !gone {
            let pid = init.map_or(0, |i| i.pid);
            return Err(provider_error(
                operation,
                format!(
                    "the init of {} (pid {pid}) did not exit within {} s of SIGKILL",
                    rec.instance_id,
                    STOP_BOUND.as_secs()
                ),
            ));
        }
        detached?;
        if let Some(problem) = cgroup_problem {
            return Err(provider_error(
                operation,
                format!("removing the cgroups: {problem}"),
            ));
        }
        dir_removed.unwrap_or(Ok(()))
    }

    /// Removes every trace of an instance: its open process, init,
    /// cgroups and directory. Idempotent; unknown ids succeed.
    pub(super) async fn destroy_instance(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<(), SandboxError> {
        let target = instance_dirs::destroy_target(
            &self.layout,
            INSTANCE_PREFIX,
            &self.processes,
            id,
            |r: &InstanceRecord| r.scope == self.scope,
        );
        match target {
            DestroyTarget::NotOurs => Ok(()),
            DestroyTarget::Ours(Some(rec)) => self.stop_instance(operation, &rec, true).await,
            DestroyTarget::Ours(None) => {
                let cgroups = self
                    .cgroup_version
                    .map(|v| InstanceCgroups::new(v, &self.scope, id));
                let (layout, id) = (self.layout.clone(), id.to_owned());
                blocking(operation, move || {
                    if let Some(cg) = &cgroups {
                        cg.remove().map_err(|e| {
                            provider_error(operation, format!("removing the cgroups: {e}"))
                        })?;
                    }
                    instance_dirs::remove_instance_dir_blocking(&layout, operation, &id)
                })
                .await?
            }
        }
    }
}
