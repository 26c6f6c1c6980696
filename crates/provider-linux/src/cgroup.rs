//! Per-instance cgroups: memory, pids and CPU limits on cgroup v1 (one
//! directory per controller hierarchy) or v2 (one directory in the unified
//! hierarchy), and the freezer that pauses an instance's workload for
//! beginActiveWrite where the host has one ([`FreezerSupport`]: v1's
//! `freezer` hierarchy, `freezer.state` `FROZEN`/`THAWED`; v2's
//! `cgroup.freeze`).
//!
//! Every instance gets `<hierarchy>/checkfu-linux/<scope>/<instance id>`.
//! Every command joins each of them before it runs anything of the
//! workload; the instance's init and the commands' supervisors, which
//! share an address space with the provider or a copy of it, join every
//! one but the groups that hold the memory and pids limits (decision
//! 049). The directories are removed when the instance is destroyed
//! (after its processes are gone: a cgroup with members cannot be removed).

// Everything here is a cgroup file of the host's kernel, never a workload
// tree: path-based calls are what the cgroup interface is.
#![allow(clippy::disallowed_methods)]

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::Resources;

/// The root directory of cgroup mounts.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The directory under each hierarchy holding this provider's groups.
pub const CGROUP_PARENT: &str = "checkfu-linux";
/// The CFS period used for CPU quotas, in microseconds.
pub const CPU_PERIOD_MICROS: u64 = 100_000;
/// The v1 controllers every instance joins (the freezer too where
/// [`FreezerSupport`] found it); `memory` and `pids` first, the groups an
/// instance's supervisors stay out of.
pub const V1_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];
/// The v1 freezer hierarchy's directory under [`CGROUP_ROOT`].
pub const V1_FREEZER: &str = "freezer";
/// How long [`InstanceCgroups::freeze`] and [`InstanceCgroups::thaw`] wait
/// for the kernel to report the new state.
pub const FREEZE_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Which cgroup version the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Separate hierarchies per controller (`/sys/fs/cgroup/memory`, ...).
    V1,
    /// The unified hierarchy (`/sys/fs/cgroup/cgroup.controllers` exists).
    V2,
}

/// The host's cgroup version, or `None` when neither is usable.
pub fn detect() -> Option<CgroupVersion> {
    let root = Path::new(CGROUP_ROOT);
    if root.join("cgroup.controllers").exists() {
        return Some(CgroupVersion::V2);
    }
    let v1 = V1_CONTROLLERS
        .iter()
        .all(|c| root.join(c).join("cgroup.procs").exists());
    v1.then_some(CgroupVersion::V1)
}

/// Whether this host can pause an instance's workload (the cgroup
/// freezer), which beginActiveWrite needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FreezerSupport {
    /// v1 with a `freezer` hierarchy, or v2 with `cgroup.freeze`.
    Available(CgroupVersion),
    /// No freezer; the reason names what is missing.
    Unavailable(String),
}

impl FreezerSupport {
    /// Looks for the freezer: v1's `/sys/fs/cgroup/freezer` hierarchy, or
    /// on v2 a `cgroup.freeze` file in this process's own cgroup or in a
    /// child of the root (the root has none). Nothing is changed.
    pub fn probe() -> FreezerSupport {
        let root = Path::new(CGROUP_ROOT);
        match detect() {
            None => FreezerSupport::Unavailable("no usable cgroup hierarchy".into()),
            Some(CgroupVersion::V1) => {
                if root.join(V1_FREEZER).join("cgroup.procs").exists() {
                    FreezerSupport::Available(CgroupVersion::V1)
                } else {
                    FreezerSupport::Unavailable(format!(
                        "cgroup v1 without a freezer hierarchy ({}/{V1_FREEZER})",
                        root.display()
                    ))
                }
            }
            Some(CgroupVersion::V2) => {
                let own = fs::read_to_string("/proc/self/cgroup")
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
                    })
                    .map(|p| root.join(p.trim_start_matches('/')));
                let children = fs::read_dir(root)
                    .into_iter()
                    .flatten()
                    .filter_map(Result::ok)
                    .map(|e| e.path());
                if own
                    .into_iter()
                    .chain(children)
                    .any(|d| d != root && d.join("cgroup.freeze").exists())
                {
                    FreezerSupport::Available(CgroupVersion::V2)
                } else {
                    FreezerSupport::Unavailable(
                        "cgroup v2 without cgroup.freeze (a kernel before 5.2)".into(),
                    )
                }
            }
        }
    }

    /// [`FreezerSupport::probe`], run once per process.
    pub fn probe_cached() -> FreezerSupport {
        static PROBED: std::sync::OnceLock<FreezerSupport> = std::sync::OnceLock::new();
        PROBED.get_or_init(FreezerSupport::probe).clone()
    }

    /// Whether workloads can be paused.
    pub fn is_available(&self) -> bool {
        matches!(self, FreezerSupport::Available(_))
    }
}

/// The cgroup directories of one instance.
#[derive(Debug, Clone)]
pub struct InstanceCgroups {
    version: CgroupVersion,
    dirs: Vec<PathBuf>,
    /// The directory whose freezer pauses the instance (v1: the `freezer`
    /// hierarchy's, also in `dirs`; v2: the one directory), when the host
    /// has a freezer.
    freezer: Option<PathBuf>,
}

/// What a freezer reports.
fn freezer_state(version: CgroupVersion, dir: &Path) -> io::Result<bool> {
    match version {
        CgroupVersion::V1 => {
            let p = dir.join("freezer.state");
            let s = fs::read_to_string(&p).map_err(|e| io_at(&p, e))?;
            // FREEZING counts: a freeze was asked for and holds the tasks it reached.
            Ok(s.trim() != "THAWED")
        }
        CgroupVersion::V2 => {
            let p = dir.join("cgroup.freeze");
            let asked = fs::read_to_string(&p).map_err(|e| io_at(&p, e))?;
            Ok(asked.trim() == "1" || v2_frozen(dir)?)
        }
    }
}

/// `frozen 1` in a v2 group's `cgroup.events`.
fn v2_frozen(dir: &Path) -> io::Result<bool> {
    let p = dir.join("cgroup.events");
    let events = fs::read_to_string(&p).map_err(|e| io_at(&p, e))?;
    Ok(events.lines().any(|l| l.trim() == "frozen 1"))
}

fn io_at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| io_at(path, e))
}

impl InstanceCgroups {
    /// The directories of `instance_id` in `scope` (nothing is created).
    pub fn new(version: CgroupVersion, scope: &str, instance_id: &str) -> Self {
        let root = Path::new(CGROUP_ROOT);
        let leaf = |base: PathBuf| base.join(CGROUP_PARENT).join(scope).join(instance_id);
        let has_freezer = FreezerSupport::probe_cached().is_available();
        let (dirs, freezer) = match version {
            CgroupVersion::V1 => {
                let mut dirs: Vec<PathBuf> =
                    V1_CONTROLLERS.iter().map(|c| leaf(root.join(c))).collect();
                let freezer = has_freezer.then(|| leaf(root.join(V1_FREEZER)));
                dirs.extend(freezer.clone());
                (dirs, freezer)
            }
            CgroupVersion::V2 => {
                let dir = leaf(root.to_path_buf());
                (vec![dir.clone()], has_freezer.then_some(dir))
            }
        };
        InstanceCgroups {
            version,
            dirs,
            freezer,
        }
    }

    /// The directories (one per v1 hierarchy, or one).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Whether the instance's workload is paused (frozen or freezing, by
    /// anyone); `None` when the host has no freezer or the group does not
    /// exist.
    ///
    /// # Errors
    ///
    /// A freezer file that exists but cannot be read.
    pub fn frozen(&self) -> io::Result<Option<bool>> {
        let Some(dir) = &self.freezer else {
            return Ok(None);
        };
        if !dir.exists() {
            return Ok(None);
        }
        freezer_state(self.version, dir).map(Some)
    }

    /// Freezes every process of the instance and returns once the kernel
    /// reports the group frozen (no task of it runs), within
    /// [`FREEZE_BOUND`]; on timeout the group is thawed again.
    ///
    /// # Errors
    ///
    /// No freezer, a freezer file that cannot be written, or the timeout.
    pub fn freeze(&self) -> io::Result<()> {
        let dir = self.freezer_dir()?;
        let deadline = std::time::Instant::now() + FREEZE_BOUND;
        loop {
            let done = match self.version {
                CgroupVersion::V1 => {
                    // Each write retries the tasks a previous one missed.
                    write_file(&dir.join("freezer.state"), "FROZEN")?;
                    let p = dir.join("freezer.state");
                    fs::read_to_string(&p).map_err(|e| io_at(&p, e))?.trim() == "FROZEN"
                }
                CgroupVersion::V2 => {
                    write_file(&dir.join("cgroup.freeze"), "1")?;
                    v2_frozen(dir)?
                }
            };
            if done {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                let _ = self.thaw();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{}: not frozen within {} s",
                        dir.display(),
                        FREEZE_BOUND.as_secs()
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Thaws the instance's processes and returns once the kernel reports
    /// the group thawed, within [`FREEZE_BOUND`]. A group that does not
    /// exist is thawed.
    ///
    /// # Errors
    ///
    /// No freezer, a freezer file that cannot be written, or the timeout.
    pub fn thaw(&self) -> io::Result<()> {
        let dir = self.freezer_dir()?;
        // Read first: a group that is not frozen (the usual case) needs no
        // write, and one that does not exist is thawed.
        match freezer_state(self.version, dir) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        let deadline = std::time::Instant::now() + FREEZE_BOUND;
        loop {
            match self.version {
                CgroupVersion::V1 => write_file(&dir.join("freezer.state"), "THAWED")?,
                CgroupVersion::V2 => write_file(&dir.join("cgroup.freeze"), "0")?,
            }
            if !freezer_state(self.version, dir)? {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{}: not thawed within {} s",
                        dir.display(),
                        FREEZE_BOUND.as_secs()
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn freezer_dir(&self) -> io::Result<&PathBuf> {
        self.freezer.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "this host has no cgroup freezer",
            )
        })
    }

    /// Creates the directories and writes the limits of `resources`.
    ///
    /// # Errors
    ///
    /// The first failing directory or limit file, with its path.
    pub fn create(&self, resources: &Resources) -> io::Result<()> {
        for dir in &self.dirs {
            if self.version == CgroupVersion::V2 {
                // Controllers must be enabled in every ancestor below the root.
                let mut ancestors: Vec<&Path> = dir
                    .ancestors()
                    .skip(1)
                    .take_while(|a| a.starts_with(CGROUP_ROOT) && *a != Path::new(CGROUP_ROOT))
                    .collect();
                ancestors.reverse();
                let mut parent = PathBuf::from(CGROUP_ROOT);
                for a in ancestors {
                    let _ =
                        write_file(&parent.join("cgroup.subtree_control"), "+memory +pids +cpu");
                    fs::create_dir_all(a).map_err(|e| io_at(a, e))?;
                    parent = a.to_path_buf();
                }
                let _ = write_file(&parent.join("cgroup.subtree_control"), "+memory +pids +cpu");
            }
            fs::create_dir_all(dir).map_err(|e| io_at(dir, e))?;
        }
        let quota = resources
            .cpu_millis
            .map(|m| (u64::from(m) * CPU_PERIOD_MICROS / 1000).max(1000));
        match self.version {
            CgroupVersion::V1 => {
                let [mem, pids, cpu] = [&self.dirs[0], &self.dirs[1], &self.dirs[2]];
                if let Some(bytes) = resources.memory_bytes {
                    write_file(&mem.join("memory.limit_in_bytes"), &bytes.to_string())?;
                }
                if let Some(n) = resources.pids {
                    write_file(&pids.join("pids.max"), &n.to_string())?;
                }
                if let Some(q) = quota {
                    write_file(
                        &cpu.join("cpu.cfs_period_us"),
                        &CPU_PERIOD_MICROS.to_string(),
                    )?;
                    write_file(&cpu.join("cpu.cfs_quota_us"), &q.to_string())?;
                }
            }
            CgroupVersion::V2 => {
                let dir = &self.dirs[0];
                if let Some(bytes) = resources.memory_bytes {
                    write_file(&dir.join("memory.max"), &bytes.to_string())?;
                    let _ = write_file(&dir.join("memory.swap.max"), "0");
                }
                if let Some(n) = resources.pids {
                    write_file(&dir.join("pids.max"), &n.to_string())?;
                }
                if let Some(q) = quota {
                    write_file(&dir.join("cpu.max"), &format!("{q} {CPU_PERIOD_MICROS}"))?;
                }
            }
        }
        Ok(())
    }

    /// The files through which the instance's supervisors (its init, and
    /// each command's host-side supervisor) join the groups, open for
    /// writing: every group but those that hold the memory and pids
    /// limits (on cgroup v2, where one group holds every limit, none).
    /// Writing `0`
    /// moves the writing thread into the group; the writer must be
    /// single-threaded (a freshly forked child is), so that moving its
    /// thread moves the whole process.
    ///
    /// The supervisors stay out of the memory group because the kernel's
    /// memory-cgroup OOM killer weighs each member by the resident memory
    /// of its address space and, when it picks one, kills every process
    /// that shares that address space. The init shares the provider's
    /// (decision 043): as a member, a workload over its memory limit had
    /// the provider killed. They stay out of the pids group so that the
    /// limit counts the workload's processes alone. Each command joins
    /// those groups itself ([`InstanceCgroups::open_command_join_files`],
    /// decision 049).
    ///
    /// On cgroup v1 these are the `tasks` files: the kernel moves the one
    /// thread under `cgroup_mutex` alone, where a write to `cgroup.procs`
    /// takes the global thread-group lock and waits out an RCU grace
    /// period (measured here: 5 to 14 ms per join, against 0.4 ms through
    /// `tasks`; decision 043). On cgroup v2, `cgroup.procs` (v2 has no
    /// per-thread file outside threaded subtrees).
    ///
    /// # Errors
    ///
    /// The first file that cannot be opened, with its path.
    pub fn open_join_files(&self) -> io::Result<Vec<std::os::fd::OwnedFd>> {
        match self.version {
            // `memory` and `pids` come first in `V1_CONTROLLERS`.
            CgroupVersion::V1 => self.dirs[2..]
                .iter()
                .map(|d| self.open_join_file(d))
                .collect(),
            CgroupVersion::V2 => Ok(Vec::new()),
        }
    }

    /// The join files of the groups that hold the memory and pids limits
    /// (v1 `memory/.../tasks` and `pids/.../tasks`, v2 the instance's
    /// `cgroup.procs`), which each command writes itself into just before
    /// its `execve`, while it is still a `vfork` child that the OOM
    /// killer passes over (decision 049).
    ///
    /// # Errors
    ///
    /// The first file that cannot be opened, with its path.
    pub fn open_command_join_files(&self) -> io::Result<Vec<std::os::fd::OwnedFd>> {
        let n = match self.version {
            CgroupVersion::V1 => 2,
            CgroupVersion::V2 => 1,
        };
        self.dirs[..n]
            .iter()
            .map(|d| self.open_join_file(d))
            .collect()
    }

    fn open_join_file(&self, dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
        let file = match self.version {
            CgroupVersion::V1 => "tasks",
            CgroupVersion::V2 => "cgroup.procs",
        };
        let p = dir.join(file);
        OpenOptions::new()
            .write(true)
            .open(&p)
            .map(File::into)
            .map_err(|e| io_at(&p, e))
    }

    /// Host pids still in the groups (empty when none or gone).
    pub fn members(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Removes the instance's directories; where members are left, thaws
    /// the group, kills every member (SIGKILL) and removes them again,
    /// 2,000 attempts 1 ms apart. The scope's directories stay for the next
    /// instance (creating and removing them costs a dozen `mkdir` and
    /// `rmdir` per lifecycle); [`remove_scope_dirs`] removes them when
    /// empty. Missing directories are fine.
    ///
    /// # Errors
    ///
    /// A directory that still exists after the removal attempts.
    pub fn remove(&self) -> io::Result<()> {
        // Usually nothing is left in the groups (the init's death ended
        // every process of the instance): each `rmdir` succeeds at once,
        // with no thaw and no listing. The kernel refuses to remove a group
        // that still has members.
        if self.remove_dirs().is_ok() {
            return Ok(());
        }
        // A frozen task does not act on SIGKILL until it is thawed.
        if self.freezer.is_some() {
            let _ = self.thaw();
        }
        let mut last = Ok(());
        for attempt in 0..2000 {
            for pid in self.members() {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).expect("positive pid"),
                    rustix::process::Signal::KILL,
                );
            }
            last = self.remove_dirs();
            if last.is_ok() {
                break;
            }
            let _ = attempt;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        last
    }

    /// Removes each of the instance's directories (a missing one is
    /// removed); the last failure.
    fn remove_dirs(&self) -> io::Result<()> {
        let mut last = Ok(());
        for dir in &self.dirs {
            match fs::remove_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => last = Err(io_at(dir, e)),
            }
        }
        last
    }
}

/// Removes the scope's cgroup directories, and the provider's parent
/// directory, in every hierarchy where they are empty (another scope's or
/// a live instance's directory keeps them: `rmdir` of a non-empty group
/// fails and is ignored). Called when a provider is dropped and after a
/// cleanup.
pub fn remove_scope_dirs(version: CgroupVersion, scope: &str) {
    let probe = InstanceCgroups::new(version, scope, "x");
    for dir in probe.dirs() {
        if let Some(scope_dir) = dir.parent() {
            let _ = fs::remove_dir(scope_dir);
            if let Some(parent) = scope_dir.parent() {
                let _ = fs::remove_dir(parent);
            }
        }
    }
}
