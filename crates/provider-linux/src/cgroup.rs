//! Per-instance cgroups: memory, pids and CPU limits on cgroup v1 (one
//! directory per controller hierarchy) or v2 (one directory in the unified
//! hierarchy).
//!
//! Every instance gets `<hierarchy>/checkfu-linux/<scope>/<instance id>`;
//! its init and every command join it before they run anything of the
//! workload. The directories are removed when the instance is destroyed
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
    let v1 = ["memory", "pids", "cpu"]
        .iter()
        .all(|c| root.join(c).join("cgroup.procs").exists());
    v1.then_some(CgroupVersion::V1)
}

/// The cgroup directories of one instance.
#[derive(Debug, Clone)]
pub struct InstanceCgroups {
    version: CgroupVersion,
    dirs: Vec<PathBuf>,
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
        let dirs = match version {
            CgroupVersion::V1 => ["memory", "pids", "cpu"]
                .iter()
                .map(|c| leaf(root.join(c)))
                .collect(),
            CgroupVersion::V2 => vec![leaf(root.to_path_buf())],
        };
        InstanceCgroups { version, dirs }
    }

    /// The directories (one per v1 hierarchy, or one).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
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

    /// The `cgroup.procs` files, open for writing: writing `0` moves the
    /// writer into the group.
    ///
    /// # Errors
    ///
    /// The first file that cannot be opened.
    pub fn open_procs(&self) -> io::Result<Vec<std::os::fd::OwnedFd>> {
        self.dirs
            .iter()
            .map(|d| {
                let p = d.join("cgroup.procs");
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map(File::into)
                    .map_err(|e| io_at(&p, e))
            })
            .collect()
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

    /// Kills every member (SIGKILL), then removes the directories (and the
    /// scope's and the provider's parent directories when left empty). Missing directories are
    /// fine.
    ///
    /// # Errors
    ///
    /// A directory that still exists after the removal attempts.
    pub fn remove(&self) -> io::Result<()> {
        let mut last = Ok(());
        for attempt in 0..2000 {
            for pid in self.members() {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).expect("positive pid"),
                    rustix::process::Signal::KILL,
                );
            }
            last = Ok(());
            for dir in &self.dirs {
                match fs::remove_dir(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => last = Err(io_at(dir, e)),
                }
            }
            if last.is_ok() {
                break;
            }
            let _ = attempt;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The scope's directory and the provider's parent go when empty (a
        // concurrent scope keeps them: rmdir of a non-empty group fails).
        for dir in &self.dirs {
            if let Some(scope_dir) = dir.parent() {
                let _ = fs::remove_dir(scope_dir);
                if let Some(parent) = scope_dir.parent() {
                    let _ = fs::remove_dir(parent);
                }
            }
        }
        last
    }
}
