//! The host-side exec path (decision 045): where the
//! daemon is local and the provider runs as root, execute and openProcess
//! start a command by entering the running container from the host
//! ([`checkfu_sandbox_hostexec`], the Linux provider's code) instead of
//! the daemon's exec API, with exactly the confinement `docker exec` gives
//! that container: its namespaces (and its cgroup namespace when it has
//! its own), its cgroups, its user and groups, no capability,
//! `no_new_privs` and the container init's own seccomp filters, read with
//! `PTRACE_SECCOMP_GET_FILTER` and installed instruction for instruction.
//!
//! What a command enters is captured once per instance, when it is
//! activated (a fresh container, a claimed pooled one, a resumed one),
//! before any workload command ran: the init's pid and start time, its
//! credentials, capability sets, `no_new_privs`, filters, cgroups and
//! environment. Each command checks the init is still the same process
//! (pid and start time, after its descriptors are open). Anything the
//! host path cannot reproduce (capabilities left, no `no_new_privs`, a
//! user namespace, AppArmor, SELinux, rootless or user-namespaced
//! daemons, a cgroup hierarchy not mounted here, filters that cannot be
//! read) sends that instance's commands through the daemon, with the
//! reason recorded ([`ExecRoute::Daemon`]) and logged.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostexec::command::{
    self as hostexec, start_ticks, Credentials, Program, Target,
};
use checkfu_sandbox_hostexec::seccomp::{filters_of, SeccompFilter};

use super::errors::provider_error;
use super::inner::{DockerProviderError, Inner};
use crate::daemon;
use crate::store::InstanceRecord;

/// The environment variable that chooses the exec path: `host` (the
/// default: the host path where it is available) or `daemon` (always the
/// daemon's exec API).
pub const EXEC_PATH_ENV: &str = "CHECKFU_DOCKER_EXEC";

/// Which path execute and openProcess take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecPath {
    /// Enter the container from the host where the host allows it (local
    /// daemon, root, no AppArmor or SELinux confinement, the container's
    /// filters readable); the daemon otherwise.
    #[default]
    Host,
    /// Always the daemon's exec API (exec create, hijacked start,
    /// inspect).
    Daemon,
}

impl ExecPath {
    /// Parses `host` or `daemon`.
    ///
    /// # Errors
    ///
    /// [`DockerProviderError::ExecPath`] naming the value.
    pub fn parse(value: &str) -> Result<ExecPath, DockerProviderError> {
        match value.trim() {
            "host" => Ok(ExecPath::Host),
            "daemon" => Ok(ExecPath::Daemon),
            _ => Err(DockerProviderError::ExecPath(value.to_owned())),
        }
    }

    /// The path [`EXEC_PATH_ENV`] names, or [`ExecPath::Host`] when it is
    /// unset or empty.
    ///
    /// # Errors
    ///
    /// As [`ExecPath::parse`].
    pub fn from_env() -> Result<ExecPath, DockerProviderError> {
        match std::env::var(EXEC_PATH_ENV) {
            Ok(v) if !v.trim().is_empty() => ExecPath::parse(&v),
            _ => Ok(ExecPath::Host),
        }
    }
}

/// How an instance's commands are started, as decided at its activation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecRoute {
    /// Entered from the host.
    Host,
    /// Through the daemon's exec API, and why.
    Daemon {
        /// Why the host path is not taken for this instance.
        reason: String,
    },
}

/// What a command of one instance enters, captured at activation.
#[derive(Debug)]
pub(crate) struct HostTarget {
    /// Host pid of the container's init.
    pid: i32,
    /// Its start time in clock ticks since boot.
    start_ticks: u64,
    /// Namespaces to enter, in order (`mnt` last).
    namespaces: Vec<&'static str>,
    /// The join files of the init's cgroups ([`CgroupJoin`]).
    cgroups: CgroupJoin,
    credentials: Credentials,
    filters: Vec<SeccompFilter>,
    /// The init's environment: the container's, as `docker exec` starts
    /// from (`PATH`, `HOSTNAME`, the image's, `HOME`).
    env: BTreeMap<String, String>,
}

/// The provider's host-path state: the choice, the host's answer (asked
/// once) and each instance's route.
#[derive(Debug, Default)]
pub(crate) struct HostExec {
    choice: ExecPath,
    host: tokio::sync::OnceCell<Result<(), String>>,
    routes: Mutex<HashMap<String, Result<Arc<HostTarget>, String>>>,
}

impl HostExec {
    pub(crate) fn new(choice: ExecPath) -> HostExec {
        HostExec {
            choice,
            ..HostExec::default()
        }
    }

    pub(crate) fn choice(&self) -> ExecPath {
        self.choice
    }

    fn routes(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Result<Arc<HostTarget>, String>>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets an instance's route (it was destroyed).
    pub(crate) fn forget(&self, instance_id: &str) {
        self.routes().remove(instance_id);
    }
}

/// Whether this host lets the provider enter containers itself: root,
/// and no confinement of the daemon's that the host path would not
/// reproduce (`docker info`'s security options).
async fn host_allows(docker: &bollard::Docker) -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Err("the provider does not run as root".into());
    }
    let info = docker
        .info()
        .await
        .map_err(|e| format!("docker info: {e}"))?;
    for option in info.security_options.unwrap_or_default() {
        let name = option
            .split(',')
            .find_map(|kv| kv.strip_prefix("name="))
            .unwrap_or(&option);
        if matches!(name, "apparmor" | "selinux" | "userns" | "rootless") {
            return Err(format!(
                "the daemon confines containers with {name} (security option {option:?}), which the host path does not reproduce"
            ));
        }
    }
    Ok(())
}

/// One `Key:\tvalue` field of `/proc/<pid>/status`.
fn field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

fn numbers(value: &str) -> Result<Vec<u32>, String> {
    value
        .split_whitespace()
        .map(|n| n.parse().map_err(|_| format!("not a number: {n:?}")))
        .collect()
}

/// The one id of a `Uid:` or `Gid:` line whose real, effective, saved and
/// file-system ids agree.
fn one_id(status: &str, key: &str) -> Result<u32, String> {
    let ids = numbers(field(status, key).ok_or(format!("no {key} in the init's status"))?)?;
    match ids.as_slice() {
        [a, rest @ ..] if !rest.is_empty() && rest.iter().all(|b| b == a) => Ok(*a),
        _ => Err(format!("the init's {key} ids differ: {ids:?}")),
    }
}

/// The credentials, `no_new_privs` and seccomp mode of a `/proc/<pid>/status`,
/// refused where the host path could not reproduce them.
fn confinement(status: &str) -> Result<(Credentials, usize), String> {
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let v = field(status, cap).ok_or(format!("no {cap} in the init's status"))?;
        if u64::from_str_radix(v, 16) != Ok(0) {
            return Err(format!(
                "the container keeps capabilities ({cap} {v}); the host path drops them all"
            ));
        }
    }
    if field(status, "NoNewPrivs") != Some("1") {
        return Err("the container runs without no_new_privs".into());
    }
    let filters = match field(status, "Seccomp") {
        Some("0") => 0,
        Some("2") => field(status, "Seccomp_filters")
            .and_then(|n| n.parse().ok())
            .ok_or("no Seccomp_filters in the init's status")?,
        other => return Err(format!("the init's seccomp mode is {other:?}")),
    };
    let credentials = Credentials {
        uid: one_id(status, "Uid")?,
        gid: one_id(status, "Gid")?,
        groups: numbers(field(status, "Groups").unwrap_or(""))?,
    };
    Ok((credentials, filters))
}

/// The join files (v1 `tasks`, v2 `cgroup.procs`) of a process's cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupJoin {
    /// Every hierarchy's but the memory and pids groups', joined by the
    /// command's host-side supervisor before it enters.
    supervisor: Vec<PathBuf>,
    /// The groups that hold the memory and pids limits (the v1
    /// hierarchies with the `memory` or `pids` controller, or else the v2
    /// group), which the command joins itself just before its `execve`
    /// (decision 049): the OOM killer then never weighs a supervisor,
    /// whose address space is a copy of the provider's, and the pids
    /// limit counts the container's own processes.
    command: Vec<PathBuf>,
}

/// The files through which a command joins the cgroups of
/// `/proc/<pid>/cgroup` (`cgroup`), found through the cgroup mounts of
/// `mountinfo`; every hierarchy must be mounted here, and one path must
/// name `container_id` (the pid is that container's, on this machine).
fn cgroup_procs(cgroup: &str, mountinfo: &str, container_id: &str) -> Result<CgroupJoin, String> {
    // (fstype, super options, mount root, mount point)
    let mounts: Vec<(&str, Vec<&str>, &str, &str)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let _source = post.next()?;
            let opts = post.next()?.split(',').collect();
            Some((fstype, opts, *pre.get(3)?, *pre.get(4)?))
        })
        .filter(|(t, ..)| *t == "cgroup" || *t == "cgroup2")
        .collect();
    let mut files = Vec::new();
    let (mut v1_limits, mut v2) = (Vec::new(), None);
    let mut named = false;
    for line in cgroup.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = match (parts.next(), parts.next(), parts.next()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => return Err(format!("malformed cgroup line {line:?}")),
        };
        named |= path.contains(container_id);
        let mount = mounts.iter().find(|(t, opts, ..)| {
            if controllers.is_empty() {
                *t == "cgroup2"
            } else {
                *t == "cgroup" && controllers.split(',').all(|c| opts.contains(&c))
            }
        });
        let Some((fstype, _, root, point)) = mount else {
            return Err(format!(
                "the cgroup hierarchy {controllers:?} is not mounted here"
            ));
        };
        let relative = path
            .strip_prefix(root.trim_end_matches('/'))
            .ok_or(format!(
                "cgroup {path:?} is outside its mount's root {root:?}"
            ))?;
        // A v1 hierarchy is joined through `tasks`: a single-threaded
        // writer moves under `cgroup_mutex` alone, without the global
        // thread-group lock and its RCU grace period (decision 043).
        let join_file = if *fstype == "cgroup2" {
            "cgroup.procs"
        } else {
            "tasks"
        };
        if controllers.split(',').any(|c| c == "memory" || c == "pids") {
            v1_limits.push(files.len());
        } else if controllers.is_empty() {
            v2 = Some(files.len());
        }
        files.push(
            PathBuf::from(point)
                .join(relative.trim_start_matches('/'))
                .join(join_file),
        );
    }
    if !named {
        return Err(format!(
            "the init's cgroups do not name container {container_id}: not a container of this machine"
        ));
    }
    // On a hybrid host (v1 controllers beside an empty v2 tree) the
    // limits are the v1 hierarchies'; on a v2 host, the one group's.
    let limits: Vec<usize> = if v1_limits.is_empty() {
        v2.into_iter().collect()
    } else {
        v1_limits
    };
    let (mut command, mut supervisor) = (Vec::new(), Vec::new());
    for (i, file) in files.into_iter().enumerate() {
        if limits.contains(&i) {
            command.push(file);
        } else {
            supervisor.push(file);
        }
    }
    Ok(CgroupJoin {
        supervisor,
        command,
    })
}

/// Reads a file of the kernel's `/proc` (never a workload path).
fn proc_read(path: &str) -> Result<String, String> {
    #[allow(clippy::disallowed_methods)]
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

fn same_namespace(pid: i32, ns: &str) -> Result<bool, String> {
    let link = |p: String| {
        #[allow(clippy::disallowed_methods)]
        std::fs::read_link(&p).map_err(|e| format!("{p}: {e}"))
    };
    Ok(link(format!("/proc/{pid}/ns/{ns}"))? == link(format!("/proc/self/ns/{ns}"))?)
}

/// Captures what a command of the container whose init is `pid` enters.
/// Blocking (ptrace stays on the calling thread).
fn capture(pid: i32, container_id: &str) -> Result<HostTarget, String> {
    let ticks = start_ticks(pid).ok_or(format!("the init (pid {pid}) is gone"))?;
    let cgroup = proc_read(&format!("/proc/{pid}/cgroup"))?;
    let mountinfo = proc_read("/proc/self/mountinfo")?;
    let cgroups = cgroup_procs(&cgroup, &mountinfo, container_id)?;
    let (credentials, filter_count) = confinement(&proc_read(&format!("/proc/{pid}/status"))?)?;
    for ns in ["user", "time"] {
        if !same_namespace(pid, ns)? {
            return Err(format!("the container has its own {ns} namespace"));
        }
    }
    let mut namespaces = vec!["ipc", "uts", "net"];
    if !same_namespace(pid, "cgroup")? {
        namespaces.push("cgroup");
    }
    namespaces.extend(["pid", "mnt"]);
    let filters = if filter_count == 0 {
        Vec::new()
    } else {
        filters_of(pid).map_err(|e| format!("reading the init's seccomp filters: {e}"))?
    };
    if filters.len() != filter_count {
        return Err(format!(
            "read {} seccomp filters, the init's status counts {filter_count}",
            filters.len()
        ));
    }
    #[allow(clippy::disallowed_methods)]
    let environ =
        std::fs::read(format!("/proc/{pid}/environ")).map_err(|e| format!("environ: {e}"))?;
    let env = environ
        .split(|&b| b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    if start_ticks(pid) != Some(ticks) {
        return Err(format!("the init (pid {pid}) changed while it was read"));
    }
    Ok(HostTarget {
        pid,
        start_ticks: ticks,
        namespaces,
        cgroups,
        credentials,
        filters,
        env,
    })
}

impl Inner {
    /// Decides and records how the commands of `rec`'s instance start: on
    /// the host path, what they enter is captured now (the container is
    /// running and no workload command ran yet). Never fails the caller:
    /// a reason to use the daemon is recorded instead.
    pub(super) async fn capture_exec_route(&self, rec: &InstanceRecord) {
        let route = self.host_route(rec).await;
        if let Err(reason) = &route {
            tracing::info!(instance_id = %rec.instance_id, %reason, "commands go through the daemon's exec API");
        }
        self.host_exec
            .routes()
            .insert(rec.instance_id.clone(), route.map(Arc::new));
    }

    async fn host_route(&self, rec: &InstanceRecord) -> Result<HostTarget, String> {
        if self.host_exec.choice == ExecPath::Daemon {
            return Err(format!("{EXEC_PATH_ENV}=daemon"));
        }
        self.host_exec
            .host
            .get_or_init(|| host_allows(&self.docker))
            .await
            .clone()?;
        let container = daemon::inspect_container(&self.docker, &Inner::container_of(rec))
            .await
            .map_err(|e| format!("inspecting the container: {e}"))?
            .ok_or("the container is gone")?;
        let pid = container
            .state
            .and_then(|s| s.pid)
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or("the container has no running init")?;
        let id = container.id.ok_or("the container has no id")?;
        tokio::task::spawn_blocking(move || capture(pid, &id))
            .await
            .map_err(|e| format!("the capture task failed: {e}"))?
    }

    /// The route recorded for an instance (`Daemon` with a reason when
    /// none was: an instance activated by another provider object).
    pub(super) fn exec_route(&self, instance_id: &str) -> ExecRoute {
        match self.host_exec.routes().get(instance_id) {
            Some(Ok(_)) => ExecRoute::Host,
            Some(Err(reason)) => ExecRoute::Daemon {
                reason: reason.clone(),
            },
            None => ExecRoute::Daemon {
                reason: "no route was captured for this instance by this provider object".into(),
            },
        }
    }

    /// The host-path command for `program` in `rec`'s container, or
    /// `None` when its commands go through the daemon. The environment is
    /// the container's with the program's over it.
    ///
    /// # Errors
    ///
    /// The provider's error when the container's init is no longer the
    /// captured process or cannot be entered; `invalid_request` for a NUL
    /// byte ([`hostexec::prepare`]).
    pub(super) fn host_command(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        program: Program<'_>,
    ) -> Result<Option<tokio::process::Command>, SandboxError> {
        let target = match self.host_exec.routes().get(&rec.instance_id) {
            Some(Ok(t)) => t.clone(),
            _ => return Ok(None),
        };
        let gone = || {
            provider_error(
                operation,
                format!(
                    "the init of {}'s container (pid {}) is gone: the instance is no longer running",
                    rec.instance_id, target.pid
                ),
            )
        };
        if start_ticks(target.pid) != Some(target.start_ticks) {
            return Err(gone());
        }
        let io = |what: &str, e: std::io::Error| provider_error(operation, format!("{what}: {e}"));
        let namespaces = target
            .namespaces
            .iter()
            .map(|ns| hostexec::open_namespace(target.pid, ns))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io("opening the container's namespaces", e))?;
        let root =
            hostexec::open_root(target.pid).map_err(|e| io("opening the container's root", e))?;
        let open = |p: &PathBuf| -> std::io::Result<std::os::fd::OwnedFd> {
            // The kernel's cgroup file system, never a workload path.
            #[allow(clippy::disallowed_methods)]
            let f = std::fs::OpenOptions::new().write(true).open(p)?;
            Ok(f.into())
        };
        let cgroups = target
            .cgroups
            .supervisor
            .iter()
            .map(open)
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| io("opening the container's cgroups", e))?;
        let command_cgroups = target
            .cgroups
            .command
            .iter()
            .map(open)
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| io("opening the container's cgroups", e))?;
        // Opened while the pid named the captured process: these are its.
        if start_ticks(target.pid) != Some(target.start_ticks) {
            return Err(gone());
        }
        let mut env = target.env.clone();
        env.extend(
            program
                .environment
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let command = hostexec::prepare(
            operation,
            Target {
                namespaces,
                root,
                cgroups,
                command_cgroups,
                credentials: target.credentials.clone(),
                filters: target.filters.clone(),
            },
            program,
            &env,
        )?;
        Ok(Some(command))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n\
Groups:\t1000 10 \nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n\
CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n\
NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";

    #[test]
    fn the_status_gives_credentials_and_the_filter_count() {
        let (c, n) = confinement(STATUS).unwrap();
        assert_eq!(
            c,
            Credentials {
                uid: 1000,
                gid: 1000,
                groups: vec![1000, 10]
            }
        );
        assert_eq!(n, 1);
    }

    #[test]
    fn what_the_host_path_cannot_reproduce_is_refused_by_name() {
        let caps = STATUS.replace("CapBnd:\t0000000000000000", "CapBnd:\t00000000a80425fb");
        assert!(confinement(&caps).unwrap_err().contains("CapBnd"));
        let nnp = STATUS.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0");
        assert!(confinement(&nnp).unwrap_err().contains("no_new_privs"));
        let uid = STATUS.replace("Uid:\t1000\t1000\t1000\t1000", "Uid:\t1000\t0\t1000\t1000");
        assert!(confinement(&uid).unwrap_err().contains("Uid"));
    }

    #[test]
    fn cgroups_map_onto_their_mounts_and_must_name_the_container() {
        let mountinfo =
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
36 31 0:33 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
37 31 0:34 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let cgroup = "4:memory:/docker/abc\n5:pids:/docker/abc\n6:cpu:/docker/abc\n\
1:name=systemd:/docker/abc\n0::/docker/abc\n";
        let files = cgroup_procs(cgroup, mountinfo, "abc").unwrap();
        assert_eq!(
            files,
            CgroupJoin {
                supervisor: vec![
                    PathBuf::from("/sys/fs/cgroup/cpu/docker/abc/tasks"),
                    PathBuf::from("/sys/fs/cgroup/systemd/docker/abc/tasks"),
                    PathBuf::from("/sys/fs/cgroup/unified/docker/abc/cgroup.procs"),
                ],
                command: vec![
                    PathBuf::from("/sys/fs/cgroup/memory/docker/abc/tasks"),
                    PathBuf::from("/sys/fs/cgroup/pids/docker/abc/tasks"),
                ],
            }
        );
        // Unified only: the one group holds the memory limit.
        let v2 = "50 31 0:40 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup_procs("0::/system.slice/docker-abc.scope\n", v2, "abc").unwrap(),
            CgroupJoin {
                supervisor: vec![],
                command: vec![PathBuf::from(
                    "/sys/fs/cgroup/system.slice/docker-abc.scope/cgroup.procs"
                )],
            }
        );
        assert!(cgroup_procs(cgroup, mountinfo, "other")
            .unwrap_err()
            .contains("not a container of this machine"));
        assert!(cgroup_procs("7:blkio:/docker/abc\n", mountinfo, "abc")
            .unwrap_err()
            .contains("not mounted"));
    }
}
