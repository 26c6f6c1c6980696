//! Figure 11: the daemonless Linux provider (`linux`) through the runtime,
//! against `docker run --rm`, `unshare`, `docker exec` and the Docker
//! provider, all measured in the same run on the same busybox fixture.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use checkfu_sandbox_contract::*;
use checkfu_sandbox_linux::{LinuxConfig, LinuxProvider, WorkloadUser};

use super::{docker_bench, docker_cli, f, fail, stat, time, true_cmd, Row};
use crate::catalogue::PHASES;
use crate::common::{sixteen, Subject};

/// A row name of figure 11.
pub(crate) const LINUX_COLD: &str =
    "11 linux cold start: provision+activate+execute(`true`)+release";
/// A row name of figure 11.
pub(crate) const LINUX_COLD_SAME: &str = "11 linux cold start (same)";
/// A row name of figure 11.
pub(crate) const LINUX_READY: &str = "11 linux ready-to-execute (provision+activate)";
/// A row name of figure 11.
pub(crate) const LINUX_WARM: &str = "11 linux warm execute `true`";
/// A row name of figure 11.
pub(crate) const LINUX_SIXTEEN: &str =
    "11 linux 16 concurrent lifecycles (wall time; ratio ≤ 0.20 is ≥ 5× throughput)";
/// A row name of figure 11.
pub(crate) const LINUX_DURABLE: &str =
    "11 linux durable round trip (release with snapshot, resume, read one file)";

/// A row name of figure 11: the same cold start with the provider's whole
/// state directory on a tmpfs the bench mounts, against `unshare` again:
/// the host file system's share of the cold start, measured. Not a
/// supported layout (decision 050: an instance's bytes would count as
/// memory).
pub(crate) const LINUX_COLD_TMPFS: &str =
    "11 linux cold start, state directory on a tmpfs (not the default; decision 050)";
/// A row name of figure 11: what the file system alone costs per
/// lifecycle (see [`instance_tree`]).
pub(crate) const LINUX_FLOOR_TREE: &str =
    "11 linux floor · an instance's directories and record made and removed";
/// A row name of figure 11: what the cgroup file system alone costs per
/// lifecycle.
pub(crate) const LINUX_FLOOR_CGROUPS: &str =
    "11 linux floor · an instance's cgroups made and removed";

/// The row name of one phase of the cold start (`phase` from
/// [`PHASES`]).
pub(crate) fn phase_row(phase: &str) -> String {
    format!("11 linux · phase {phase}")
}

/// Every row name figure 11 produces, in table order.
pub(crate) fn rows() -> Vec<String> {
    let mut rows: Vec<String> = [LINUX_COLD, LINUX_COLD_SAME].map(String::from).to_vec();
    rows.extend(PHASES.iter().map(|p| phase_row(p)));
    rows.push(LINUX_COLD_TMPFS.into());
    rows.extend([LINUX_FLOOR_TREE, LINUX_FLOOR_CGROUPS].map(String::from));
    rows.extend([LINUX_READY, LINUX_WARM, LINUX_SIXTEEN, LINUX_DURABLE].map(String::from));
    rows
}

/// Each phase's durations of the lifecycles timed so far.
type Phases = Mutex<BTreeMap<&'static str, Vec<Duration>>>;

/// The Linux provider as a subject, over the fixture written into its own
/// image store.
///
/// The state directory is a fresh temporary directory beneath `parent`
/// (the system's temporary directory when `None`).
async fn linux_bench(parent: Option<&std::path::Path>) -> Result<Subject, String> {
    let state = match parent {
        Some(p) => tempfile::tempdir_in(p),
        None => tempfile::tempdir(),
    }
    .map_err(fail("state dir"))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = LinuxProvider::new(LinuxConfig {
        state_dir: state.path().to_path_buf(),
        scope: format!("bench-{}", std::process::id()),
        clock: clock.clone(),
        workload_user: WorkloadUser::Checkfu,
    })
    .map_err(fail("linux provider"))?;
    let path = checkfu_sandbox_hostfs::busybox::locate_busybox(
        std::path::Path::new(checkfu_sandbox_hostfs::rootfs::DEFAULT_BUSYBOX_PATH),
        &mut |line: &str| eprintln!("fixture: {line}"),
    )
    .await
    .map_err(fail("busybox"))?;
    let busybox = checkfu_sandbox_hostfs::rootfs::load_busybox(&path)
        .await
        .map_err(fail("busybox"))?;
    let pinned = provider
        .images()
        .write_fixture(&busybox)
        .map_err(fail("fixture"))?;
    let image = ImageReference::parse(&pinned).map_err(fail("fixture reference"))?;
    Subject::new(Arc::new(provider), "linux", image, clock, state)
}

/// The file-system work of one lifecycle and nothing else, as the
/// provider lays an instance out (`docs/ARCHITECTURE.md`): its directory
/// made under a temporary name with its record and renamed into place,
/// `outputs`, `upper` and `work` (and the `work/work` overlayfs makes at
/// mount), the record replaced once (activation), then all of it removed.
fn instance_tree(dir: &std::path::Path) -> std::io::Result<()> {
    let record = vec![b'x'; 1500];
    let tmp = dir.with_extension("tmp");
    std::fs::create_dir(&tmp)?;
    std::fs::write(tmp.join("instance.json"), &record)?;
    std::fs::rename(&tmp, dir)?;
    for sub in ["outputs", "upper", "work", "work/work"] {
        std::fs::create_dir(dir.join(sub))?;
    }
    std::fs::write(dir.join("instance.json.tmp"), &record)?;
    std::fs::rename(dir.join("instance.json.tmp"), dir.join("instance.json"))?;
    std::fs::remove_dir_all(dir)
}

/// `unshare --fork --pid --mount --net true`, the floor a cold start is
/// compared with.
async fn unshare_true() -> Result<(), String> {
    let out = tokio::process::Command::new("unshare")
        .args(["--fork", "--pid", "--mount", "--net", "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(fail("unshare"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("unshare: {}", out.status))
    }
}

/// `sync(1)`: every file system's dirty data and journal written out.
fn sync_disks() -> Result<(), String> {
    let status = std::process::Command::new("sync")
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(fail("sync"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("sync: {status}"))
    }
}

/// Moves this process into a mount namespace of its own whose mounts
/// follow the host's but never reach it (`MS_SLAVE`), so that the tmpfs of
/// [`Tmpfs`] goes with the process however it ends, a `SIGKILL` included.
/// Root only; without root, nothing (figure 11 then fails on its own).
/// Call before any thread starts.
///
/// # Errors
///
/// The refused `unshare` or `mount`.
pub(crate) fn private_mounts() -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    // SAFETY: only the mount namespace (and with it this thread's file
    // system context) is unshared, before any other thread exists; no
    // file descriptor table or memory is affected.
    #[allow(unsafe_code)]
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }
        .map_err(|e| format!("a mount namespace of the bench's own: {e}"))?;
    rustix::mount::mount_change(
        "/",
        rustix::mount::MountPropagationFlags::DOWNSTREAM
            | rustix::mount::MountPropagationFlags::REC,
    )
    .map_err(|e| format!("the bench's mounts made slaves of the host's: {e}"))
}

/// A tmpfs mounted on a fresh temporary directory in the bench's own mount
/// namespace ([`private_mounts`]), unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of at most 1 GiB, mode 0700.
    fn mount() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(fail("tmpfs mount point"))?;
        rustix::mount::mount(
            "checkfu-bench",
            dir.path(),
            "tmpfs",
            rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
            Some(c"mode=0700,size=1g"),
        )
        .map_err(|e| format!("mount -t tmpfs {}: {e}", dir.path().display()))?;
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Err(e) = rustix::mount::unmount(self.dir.path(), rustix::mount::UnmountFlags::DETACH)
        {
            eprintln!("figure 11: umount {}: {e}", self.dir.path().display());
        }
    }
}

/// provision + activate + execute `true` + release (ZDR), each phase's
/// duration added to `phases` when given.
async fn lifecycle(l: &Subject, phases: Option<&Phases>) -> Result<(), String> {
    let mut t = Instant::now();
    let mut lap = |phase: &'static str| {
        let now = Instant::now();
        if let Some(p) = phases {
            p.lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(phase)
                .or_default()
                .push(now - t);
        }
        t = now;
    };
    let i = l
        .adapter
        .provision(l.request(RetentionMode::EphemeralZdr, vec![], 3600))
        .await
        .map_err(f)?;
    lap(PHASES[0]);
    l.adapter.activate(&i.instance_id).await.map_err(f)?;
    lap(PHASES[1]);
    l.adapter
        .execute(&i.instance_id, true_cmd())
        .await
        .map_err(f)?;
    lap(PHASES[2]);
    l.adapter.release(&i.instance_id, None).await.map_err(f)?;
    lap(PHASES[3]);
    Ok(())
}

/// Figure 11 (see the module documentation). Needs root (the provider,
/// `unshare`, the tmpfs) and a Docker daemon (the baselines).
pub(crate) async fn figure11(quick: bool, rows: &mut Vec<Row>) -> Result<(), String> {
    let reps = |full: usize| if quick { (full / 4).max(3) } else { full };
    let l = Arc::new(linux_bench(None).await?);
    let d = docker_bench("linux-baseline", 0).await?;
    let image_id = format!("sha256:{}", d.image.digest().hex());

    eprintln!("figure 11: linux cold start, alternating with unshare and the tmpfs variant");
    let tmpfs = Tmpfs::mount()?;
    let in_memory = linux_bench(Some(tmpfs.path())).await?;
    // One untimed round first (each image is unpacked on its first use),
    // then what that and the setup wrote is flushed, so that no sample
    // pays for those journal commits; the three subjects then take turns,
    // so that drift in the machine's state (the file system's journal
    // above all) falls on each alike.
    lifecycle(&l, None).await?;
    unshare_true().await?;
    lifecycle(&in_memory, None).await?;
    sync_disks()?;
    let phases = Phases::default();
    let (mut ours, mut base, mut mem) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps(40) {
        let start = Instant::now();
        lifecycle(&l, Some(&phases)).await?;
        ours.push(start.elapsed());
        let start = Instant::now();
        unshare_true().await?;
        base.push(start.elapsed());
        let start = Instant::now();
        lifecycle(&in_memory, None).await?;
        mem.push(start.elapsed());
    }
    drop(in_memory);
    drop(tmpfs);
    let (ours, unshare, in_memory) = (stat(ours), stat(base), stat(mem));
    let docker = time(reps(12), || async {
        docker_cli(&["run", "--rm", "--network", "none", &image_id, "true"]).await
    })
    .await?;
    rows.push(Row {
        figure: LINUX_COLD.into(),
        ours,
        baseline: Some(("`docker run --rm <fixture> true`".into(), docker)),
    });
    rows.push(Row {
        figure: LINUX_COLD_SAME.into(),
        ours,
        baseline: Some(("`unshare --fork --pid --mount --net true`".into(), unshare)),
    });
    let mut phases = phases.into_inner().unwrap_or_else(|p| p.into_inner());
    for phase in PHASES {
        rows.push(Row {
            figure: phase_row(phase),
            ours: stat(phases.remove(phase).unwrap_or_default()),
            baseline: None,
        });
    }

    rows.push(Row {
        figure: LINUX_COLD_TMPFS.into(),
        ours: in_memory,
        baseline: Some(("`unshare --fork --pid --mount --net true`".into(), unshare)),
    });

    eprintln!("figure 11: linux floors (file system, cgroups)");
    let floors = tempfile::tempdir().map_err(fail("floor dir"))?;
    let mut n = 0;
    let tree = time(reps(40), || {
        n += 1;
        let dir = floors.path().join(format!("i-{n}"));
        async move { instance_tree(&dir).map_err(fail("instance tree")) }
    })
    .await?;
    rows.push(Row {
        figure: LINUX_FLOOR_TREE.into(),
        ours: tree,
        baseline: None,
    });
    if let Some(version) = checkfu_sandbox_linux::cgroup::detect() {
        let scope = format!("bench-floor-{}", std::process::id());
        let mut n = 0;
        let groups = time(reps(40), || {
            n += 1;
            let g = checkfu_sandbox_linux::cgroup::InstanceCgroups::new(
                version,
                &scope,
                &format!("i-{n}"),
            );
            async move {
                g.create(&Resources::default())
                    .and_then(|()| g.remove())
                    .map_err(fail("cgroups"))
            }
        })
        .await;
        checkfu_sandbox_linux::cgroup::remove_scope_dirs(version, &scope);
        rows.push(Row {
            figure: LINUX_FLOOR_CGROUPS.into(),
            ours: groups?,
            baseline: None,
        });
    }

    eprintln!("figure 11: linux ready-to-execute");
    let mut ready = Vec::new();
    for _ in 0..reps(40) {
        let start = Instant::now();
        let i = l
            .adapter
            .provision(l.request(RetentionMode::EphemeralZdr, vec![], 3600))
            .await
            .map_err(f)?;
        l.adapter.activate(&i.instance_id).await.map_err(f)?;
        ready.push(start.elapsed());
        l.adapter.release(&i.instance_id, None).await.map_err(f)?;
    }
    rows.push(Row {
        figure: LINUX_READY.into(),
        ours: stat(ready),
        baseline: None,
    });

    eprintln!("figure 11: linux warm execute");
    let i = l
        .adapter
        .provision(l.request(RetentionMode::EphemeralZdr, vec![], 3600))
        .await
        .map_err(f)?;
    l.adapter.activate(&i.instance_id).await.map_err(f)?;
    let id = i.instance_id.clone();
    let ours = time(reps(80), || async {
        l.adapter.execute(&id, true_cmd()).await.map_err(f)
    })
    .await?;
    l.adapter.release(&id, None).await.map_err(f)?;
    let container = String::from_utf8_lossy(
        &docker_cli(&["run", "-d", "--network", "none", &image_id, "sleep", "3600"]).await?,
    )
    .trim()
    .to_owned();
    let base = time(reps(40), || async {
        docker_cli(&["exec", &container, "true"]).await
    })
    .await;
    docker_cli(&["rm", "-f", &container]).await?;
    rows.push(Row {
        figure: LINUX_WARM.into(),
        ours,
        baseline: Some(("`docker exec <container> true`".into(), base?)),
    });

    eprintln!("figure 11: linux 16 concurrent lifecycles");
    let ours = time(reps(4), || {
        let l = l.clone();
        sixteen(move || {
            let l = l.clone();
            async move { lifecycle(&l, None).await }
        })
    })
    .await?;
    let base = time(reps(4), || {
        let id = image_id.clone();
        sixteen(move || {
            let id = id.clone();
            async move {
                docker_cli(&["run", "--rm", "--network", "none", &id, "true"])
                    .await
                    .map(drop)
            }
        })
    })
    .await?;
    rows.push(Row {
        figure: LINUX_SIXTEEN.into(),
        ours,
        baseline: Some(("16 concurrent `docker run --rm`".into(), base)),
    });

    eprintln!("figure 11: linux durable round trip");
    let mounts = vec![SandboxMount {
        path: "/work".into(),
        access: MountAccess::ReadWrite,
    }];
    let ours = time(reps(10), || l.round_trip(&mounts)).await?;
    let base = time(reps(6), || d.round_trip(&mounts)).await?;
    rows.push(Row {
        figure: LINUX_DURABLE.into(),
        ours,
        baseline: Some(("the Docker provider's round trip".into(), base)),
    });
    d.sweep().await?;
    let cutoff = l.clock.now().add_seconds(10 * 365 * 86400);
    l.adapter.cleanup(cutoff, cutoff, vec![]).await.map_err(f)?;
    Ok(())
}
