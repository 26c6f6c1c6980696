//! Locating an exec's process group on the host and signalling it.
//!
//! # Killing an exec
//!
//! The Engine API has no call to kill an exec. What this module relies on,
//! verified against Docker 20.10 with runc:
//!
//! * a non-TTY exec process is started by runc as the leader of a new
//!   session and process group (`pid == pgid == sid` inside the container),
//!   so everything it forks without `setsid`/`setpgid` stays in its group;
//! * `ExecInspect.Pid` is the exec's PID in the daemon's PID namespace, and
//!   with a local rootful daemon that is the host's, so the caller can read
//!   `/proc/<pid>` and signal the group with `kill(-pid, sig)`.
//!
//! Before signalling, [`locate_exec`] checks that `/proc/<pid>` is in the
//! container's PID namespace (the namespace link of the container's init
//! process) and leads its own group there. Once validated, the group ID
//! cannot be recycled while any member lives, so a later `kill(-pgid)`
//! reaches only that command's processes (or nothing). A process that
//! calls `setsid` escapes the group; on a timeout
//! [`kill_namespace_except_init`] therefore kills every process of the
//! container's PID namespace but its init. When the PID is not usable (remote or rootless daemon,
//! `/proc` not shared) the handle reports `killable() == false` and kill
//! requests fail with [`DaemonError::KillUnavailable`]; the provider then
//! has to stop the container.

// This module reads the kernel's own /proc entries of the exec's process,
// never a workload tree.
#![allow(clippy::disallowed_methods)]

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use bollard::Docker;

use super::containers::inspect_container;
use super::DaemonError;

/// How long an `ExecInspect` may take before this module concludes that the
/// daemon is holding the exec while it settles an exit (see [`locate_exec`]).
pub const INSPECT_PROMPT: Duration = Duration::from_millis(250);

/// Signals this module delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessSignal {
    /// SIGINT (2).
    Interrupt,
    /// SIGTERM (15).
    Terminate,
    /// SIGKILL (9).
    Kill,
}

impl ProcessSignal {
    /// The Linux signal number.
    pub fn number(self) -> i32 {
        match self {
            ProcessSignal::Interrupt => 2,
            ProcessSignal::Terminate => 15,
            ProcessSignal::Kill => 9,
        }
    }

    /// The conventional name (`SIGINT`, `SIGTERM`, `SIGKILL`).
    pub fn name(self) -> &'static str {
        match self {
            ProcessSignal::Interrupt => "SIGINT",
            ProcessSignal::Terminate => "SIGTERM",
            ProcessSignal::Kill => "SIGKILL",
        }
    }

    fn rustix(self) -> rustix::process::Signal {
        match self {
            ProcessSignal::Interrupt => rustix::process::Signal::INT,
            ProcessSignal::Terminate => rustix::process::Signal::TERM,
            ProcessSignal::Kill => rustix::process::Signal::KILL,
        }
    }
}

/// Where an exec's process group can be signalled from this host.
#[derive(Debug, Clone)]
pub struct ExecProcess {
    pub(super) exec_id: String,
    /// Host PID (== host PGID) of the exec's leader, when validated.
    pub(super) host_pgid: Option<i32>,
    /// Why it is not usable, when it is not.
    pub(super) unusable: Option<String>,
    /// The leader's start time (field 22 of `/proc/<pid>/stat`), to tell
    /// it apart from a later process reusing the PID.
    pub(super) start_time: u64,
    /// The PID the daemon reported for the exec, 0 when it reported none
    /// (yet).
    pub(super) daemon_pid: i64,
}

impl ExecProcess {
    /// Why the group cannot be signalled, when it cannot.
    pub fn unusable_reason(&self) -> Option<&str> {
        self.unusable.as_deref()
    }

    /// Whether the group can be signalled.
    pub fn killable(&self) -> bool {
        self.host_pgid.is_some()
    }

    /// Host process group ID, when validated.
    pub fn host_pgid(&self) -> Option<i32> {
        self.host_pgid
    }

    /// The PID the daemon reported while locating, when it reported one:
    /// proof that the process started (see the module documentation).
    pub fn daemon_pid(&self) -> Option<i64> {
        (self.daemon_pid > 0).then_some(self.daemon_pid)
    }

    /// Whether the group's leader (the exec's main process) still runs,
    /// per `/proc` (a zombie counts as exited). `None` when not located.
    ///
    /// The daemon keeps reporting `Running: true` until the streams close
    /// (up to two seconds after the exit when a child holds them), so this
    /// is the prompt way to see the main process exit.
    pub fn leader_alive(&self) -> Option<bool> {
        let pid = self.host_pgid?;
        Some(match proc_stat(i64::from(pid)) {
            Some((state, start)) => start == self.start_time && !matches!(state, 'Z' | 'X' | 'x'),
            None => false,
        })
    }

    /// Sends `signal` to the whole process group. A group that no longer
    /// exists (`ESRCH`) is success.
    ///
    /// # Errors
    ///
    /// [`DaemonError::KillUnavailable`] when the PID was not validated,
    /// [`DaemonError::Signal`] when `kill` fails otherwise.
    pub fn signal_group(&self, signal: ProcessSignal) -> Result<(), DaemonError> {
        let pgid = self.host_pgid.ok_or_else(|| DaemonError::KillUnavailable {
            exec_id: self.exec_id.clone(),
            reason: self
                .unusable
                .clone()
                .unwrap_or_else(|| "not located".into()),
        })?;
        let pid = rustix::process::Pid::from_raw(pgid)
            .ok_or_else(|| DaemonError::Unexpected(format!("pgid {pgid}")))?;
        match rustix::process::kill_process_group(pid, signal.rustix()) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(DaemonError::Signal {
                pgid,
                source: io::Error::from(e),
            }),
        }
    }
}

/// State letter and start time of `/proc/<pid>/stat`.
fn proc_stat(pid: i64) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: field 3 is the state, field 22 the start time.
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

fn ns_pid_fields(status: &str, key: &str) -> Vec<i64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether some process in the PID namespace `ns` belongs to host process
/// group `pgid` (field 5 of `/proc/<pid>/stat`).
fn group_has_member_in(pgid: i64, ns: &Path) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok).any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let pgrp = rest
            .split_whitespace()
            .nth(2)
            .and_then(|f| f.parse::<i64>().ok());
        pgrp == Some(pgid)
            && std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|l| l == ns)
    })
}

/// The PID namespace of a container's init could not be read from this
/// host's `/proc`, so its processes cannot be told from the host's
/// ([`kill_namespace_except_init`]).
#[derive(Debug, thiserror::Error)]
#[error("pid namespace of container init {container_pid} unreadable")]
pub struct NamespaceUnreadable {
    /// The init's host PID.
    pub container_pid: i64,
    /// Why `/proc/<container_pid>/ns/pid` could not be read.
    #[source]
    pub source: std::io::Error,
}

/// Most rounds [`kill_namespace_except_init`] makes: each round kills
/// what it finds; a process forked meanwhile is found by the next.
const NAMESPACE_KILL_ROUNDS: usize = 8;

/// Sends SIGKILL to every process of the PID namespace of the container
/// whose init has host PID `container_pid`, except that init: the whole
/// process tree of the instance, including what escaped an exec's group
/// with `setsid`. Rounds repeat (at most eight) until one finds nothing.
/// Each process is matched by its `/proc/<pid>/ns/pid` link just before it
/// is signalled. Returns how many processes were signalled.
///
/// # Errors
///
/// [`NamespaceUnreadable`] when the init's namespace cannot be read
/// (remote or rootless daemon, `/proc` not shared, init gone).
pub fn kill_namespace_except_init(container_pid: i64) -> Result<usize, NamespaceUnreadable> {
    let ns = std::fs::read_link(format!("/proc/{container_pid}/ns/pid")).map_err(|source| {
        NamespaceUnreadable {
            container_pid,
            source,
        }
    })?;
    let mut killed = 0;
    for _ in 0..NAMESPACE_KILL_ROUNDS {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            break;
        };
        let mut found = 0;
        for e in dir.filter_map(Result::ok) {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if i64::from(pid) == container_pid
                || !std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|l| l == ns)
            {
                continue;
            }
            // A zombie needs no signal; its parent (the init) reaps it.
            if proc_stat(i64::from(pid)).is_some_and(|(state, _)| state == 'Z') {
                continue;
            }
            if let Some(p) = rustix::process::Pid::from_raw(pid) {
                if rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok() {
                    found += 1;
                }
            }
        }
        killed += found;
        if found == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(killed)
}

/// Validates host PID `pid` as the group leader of an exec inside the
/// container whose init has host PID `container_pid`. When the leader has
/// already been reaped, the group is still accepted if a member lives in
/// the container's PID namespace (a group ID is not reused while it has
/// members); the start time is then 0 and the leader counts as exited.
pub(super) fn validate_host_pid(pid: i64, container_pid: i64) -> Result<(i32, u64), String> {
    let pid32 = i32::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    let theirs = std::fs::read_link(format!("/proc/{container_pid}/ns/pid"))
        .map_err(|e| format!("pid namespace of container init {container_pid} unreadable: {e}"))?;
    match validate_leader(pid, &theirs) {
        Ok(start) => Ok((pid32, start)),
        // Reaped or zombie leader: accept the group through a live member.
        Err(_) if group_has_member_in(pid, &theirs) => Ok((pid32, 0)),
        Err(reason) => Err(reason),
    }
}

fn validate_leader(pid: i64, container_ns: &Path) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status unreadable: {e}"))?;
    let nspid = ns_pid_fields(&status, "NSpid:");
    let nspgid = ns_pid_fields(&status, "NSpgid:");
    if nspid.first() != Some(&pid) {
        return Err(format!(
            "/proc/{pid} is not that process in our namespace (NSpid {nspid:?})"
        ));
    }
    if nspid.len() < 2 {
        return Err(format!("pid {pid} is not in a nested PID namespace"));
    }
    if nspgid != nspid {
        return Err(format!(
            "pid {pid} does not lead its process group (NSpid {nspid:?}, NSpgid {nspgid:?})"
        ));
    }
    let ours = std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .map_err(|e| format!("pid namespace of {pid} unreadable: {e}"))?;
    if ours != container_ns {
        return Err(format!("pid {pid} is not in the container's PID namespace"));
    }
    let (_, start) = proc_stat(pid).ok_or_else(|| format!("/proc/{pid}/stat unreadable"))?;
    Ok(start)
}

/// Finds the host PID of a started exec and validates it (see the module
/// documentation). Polls `ExecInspect` until the daemon reports a PID or an
/// exit, at most `bound`.
///
/// Returns the located process (possibly not killable, with the reason)
/// and whether the exec had already exited.
///
/// # Errors
///
/// [`DaemonError::Docker`] when inspect fails.
pub async fn locate_exec(
    docker: &Docker,
    container_id: &str,
    exec_id: &str,
    bound: Duration,
) -> Result<ExecProcess, DaemonError> {
    let container_pid = container_host_pid(docker, container_id).await?;
    locate_exec_in(docker, container_pid, exec_id, bound).await
}

/// The host PID of a container's init, 0 when it has none (not running or
/// gone).
///
/// # Errors
///
/// [`DaemonError::Docker`] when inspect fails.
pub async fn container_host_pid(docker: &Docker, container_id: &str) -> Result<i64, DaemonError> {
    Ok(inspect_container(docker, container_id)
        .await?
        .and_then(|c| c.state)
        .and_then(|s| s.pid)
        .unwrap_or(0))
}

/// As [`locate_exec`], with the container's init PID already known
/// ([`container_host_pid`]), so that its inspect can run beside the exec's
/// creation.
///
/// # Errors
///
/// [`DaemonError::Docker`] when inspect fails.
pub async fn locate_exec_in(
    docker: &Docker,
    container_pid: i64,
    exec_id: &str,
    bound: Duration,
) -> Result<ExecProcess, DaemonError> {
    let started = Instant::now();
    loop {
        // The daemon holds the exec's lock while it waits (up to 2 s) for
        // the streams of an exited exec to close, so an inspect that does
        // not answer promptly means the main process has exited.
        let Ok(info) = tokio::time::timeout(INSPECT_PROMPT, docker.inspect_exec(exec_id)).await
        else {
            return Ok(ExecProcess {
                exec_id: exec_id.to_string(),
                host_pgid: None,
                start_time: 0,
                unusable: Some("exited before it could be located (daemon settling)".into()),
                daemon_pid: 0,
            });
        };
        let info = info?;
        let pid = info.pid.unwrap_or(0);
        let exited = info.running == Some(false) && info.exit_code.is_some();
        if pid > 0 && !exited {
            let located = if container_pid <= 0 {
                Err("container has no host pid".to_string())
            } else {
                validate_host_pid(pid, container_pid)
            };
            return Ok(match located {
                Ok((pgid, start_time)) => ExecProcess {
                    exec_id: exec_id.to_string(),
                    host_pgid: Some(pgid),
                    unusable: None,
                    start_time,
                    daemon_pid: pid,
                },
                Err(reason) => ExecProcess {
                    exec_id: exec_id.to_string(),
                    host_pgid: None,
                    unusable: Some(reason),
                    start_time: 0,
                    daemon_pid: pid,
                },
            });
        }
        if exited || started.elapsed() >= bound {
            return Ok(ExecProcess {
                exec_id: exec_id.to_string(),
                host_pgid: None,
                start_time: 0,
                unusable: Some(if exited {
                    "exited before it could be located".into()
                } else {
                    "no pid reported in time".into()
                }),
                daemon_pid: pid.max(0),
            });
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
