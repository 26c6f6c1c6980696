//! Thin helpers over bollard for what the Docker provider asks of the
//! local daemon: containers, bounded and streaming execs, commits, label
//! sweeps, and snapshot archives of host directories.
//!
//! Nothing here knows the contract's types; the provider maps these
//! results onto them.
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
//! calls `setsid` escapes the group: that is the documented limit of this
//! approach. When the PID is not usable (remote or rootless daemon,
//! `/proc` not shared) the handle reports `killable() == false` and kill
//! requests fail with [`DaemonError::KillUnavailable`]; the provider then
//! has to stop the container.
//!
//! # Exit codes
//!
//! The exit code is read from `ExecInspect` only once `Running` is false,
//! after both output streams reached EOF (bounded execs). `ExitCode` is
//! nullable: no code means unknown, never success. The engine reports a
//! process killed by signal `n` as exit code `128 + n`; it cannot be told
//! apart from `exit(128 + n)`. [`ProcessExit::Signaled`] is therefore only
//! reported when this module itself delivered that signal.
//!
//! # Execs whose process never started
//!
//! When runc cannot start an exec's process (executable not found, not
//! executable, missing working directory), Docker 20.10 reports exit code
//! 126 whatever the cause and writes its own message (`OCI runtime exec
//! failed: ...`) on the exec's *stdout* stream, where a workload could
//! write the same text. What tells the two apart is daemon state:
//! `ExecInspect.Pid` is set (under the exec's lock) as soon as the process
//! exists, before any exit can be recorded, and stays set after the exit;
//! an exec that never started ends with `Pid == 0` and an exit code.
//! Verified on 20.10 with `true`, `sh -c 'exit 126'` and a shell echoing
//! the engine's message (all `Pid != 0` after exit) against a missing
//! executable, a non-executable file, a directory as executable and a
//! missing working directory (all `Pid == 0`, exit code 126). Such an exec
//! is reported as [`ExecOutcome::StartFailed`] (bounded) or with
//! [`ProcessControl::start_failure`] (streaming), with the daemon's message
//! taken out of the output; see [`StartFailure`] for the exit codes. A
//! script whose interpreter is missing *does* start (runc's init runs and
//! its `execve` fails): that is a started process, exit code 1, runc's
//! message on stderr.
//!
//! # Streams after the main process exits
//!
//! A background child that inherited stdout keeps the stream open after
//! the main process exited. The daemon itself closes the streams about two
//! seconds after the main process exits (observed on 20.10), and the
//! bounded exec does not wait for that: once inspect reports the main
//! process gone and EOF has not come within [`EXIT_EOF_GRACE`], it kills the
//! group, which closes the pipes. The main process's exit is seen through
//! `/proc/<pid>/stat` (checked against the start time recorded at
//! validation), because `ExecInspect` keeps saying `Running: true` until the
//! daemon has closed the streams.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::StartExecResults;
use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerInspectResponse, ContainerSummary, ExecConfig,
    HostConfig, ImageSummary, Mount, MountTypeEnum,
};
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListImagesOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use bollard::Docker;
use futures_util::{Stream, StreamExt};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Notify};

use crate::contained::{self, ContainedError, WalkEntry};

/// How long a bounded exec waits for EOF after the main process exited
/// before it kills the process group that holds the pipes open.
pub const EXIT_EOF_GRACE: Duration = Duration::from_millis(500);
/// How long a bounded exec keeps draining after it killed the group
/// (timeout or output limit) before it abandons the stream.
pub const KILL_DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long an `ExecInspect` may take before this module concludes that the
/// daemon is holding the exec while it settles an exit (see [`locate_exec`]).
pub const INSPECT_PROMPT: Duration = Duration::from_millis(250);
/// How long to wait for `Running == false` once the streams are closed.
pub const EXIT_SETTLE_BOUND: Duration = Duration::from_secs(5);
/// The long-running init command of sandbox containers: a busybox shell
/// that exits 0 on SIGTERM and otherwise sleeps forever.
pub const INIT_COMMAND: [&str; 3] = [
    "/bin/sh",
    "-c",
    "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done",
];

/// Failure of a daemon helper.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A daemon call failed.
    #[error("daemon call failed")]
    Docker(#[from] bollard::errors::Error),
    /// The daemon answered something this module cannot use.
    #[error("daemon answered unexpectedly: {0}")]
    Unexpected(String),
    /// The exec's process cannot be signalled from here (see the module
    /// documentation).
    #[error("cannot signal exec {exec_id}: {reason}")]
    KillUnavailable {
        /// The exec.
        exec_id: String,
        /// Why the host PID is unusable.
        reason: String,
    },
    /// Signalling the process group failed.
    #[error("cannot signal process group {pgid}")]
    Signal {
        /// Host process group ID.
        pgid: i32,
        /// Underlying failure.
        #[source]
        source: io::Error,
    },
    /// A contained host-directory operation failed.
    #[error(transparent)]
    Contained(#[from] ContainedError),
    /// An archive entry was refused during extraction.
    #[error("archive entry {path:?} refused: {reason}")]
    ArchiveRefused {
        /// Entry path as stored.
        path: PathBuf,
        /// Which rule it broke.
        reason: String,
    },
    /// A local i/o operation failed.
    #[error("i/o failure: {context}")]
    Io {
        /// What was being done.
        context: String,
        /// Underlying failure.
        #[source]
        source: io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}

fn errno_err(context: impl Into<String>) -> impl FnOnce(rustix::io::Errno) -> DaemonError {
    let context = context.into();
    move |e| DaemonError::Io {
        context,
        source: io::Error::from(e),
    }
}

/// Whether a bollard error is the daemon's 404.
pub fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// Connects to the local daemon (`DOCKER_HOST` when it names a
/// `unix://` socket, else the default socket) and negotiates the API version
/// down to what the server speaks (bollard 0.19 defaults to 1.49; Docker
/// 20.10 speaks 1.41).
///
/// The provider bind-mounts host directories and reads them directly, so
/// it only works with a daemon on this machine: a `DOCKER_HOST` naming any
/// other transport, or a `DOCKER_CONTEXT` other than `default`, is refused
/// rather than silently replaced by the local socket.
///
/// # Errors
///
/// [`DaemonError::Unexpected`] for a non-local `DOCKER_HOST` or a
/// `DOCKER_CONTEXT`; [`DaemonError::Docker`] when no daemon answers.
pub async fn connect() -> Result<Docker, DaemonError> {
    check_local_daemon_env(
        std::env::var("DOCKER_HOST").ok().as_deref(),
        std::env::var("DOCKER_CONTEXT").ok().as_deref(),
    )?;
    let docker = Docker::connect_with_local_defaults()?;
    Ok(docker.negotiate_version().await?)
}

// ---------------------------------------------------------------------------
// Containers
// ---------------------------------------------------------------------------

/// A host directory bind-mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// Absolute host path; must exist.
    pub host_path: PathBuf,
    /// Absolute path inside the container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// What [`create_and_start`] creates.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    /// Image reference (a tag or an image ID `sha256:<hex>`).
    pub image: String,
    /// Optional container name.
    pub name: Option<String>,
    /// Labels set on the container.
    pub labels: HashMap<String, String>,
    /// Bind mounts (mount API, so paths with `:` or `,` are safe).
    pub binds: Vec<BindMount>,
    /// User for the init process, `uid[:gid]` or a name.
    pub user: Option<String>,
    /// Working directory of the init process.
    pub working_dir: Option<String>,
    /// Environment as `KEY=value`.
    pub env: Vec<String>,
    /// Memory limit in bytes (swap set equal, so no extra swap).
    pub memory_bytes: Option<i64>,
    /// Maximum number of processes.
    pub pids_limit: Option<i64>,
    /// CPU limit in billionths of a CPU.
    pub nano_cpus: Option<i64>,
    /// Init command; [`INIT_COMMAND`] when `None`.
    pub command: Option<Vec<String>>,
    /// Network mode; `none` when `None`. Sandbox containers always use
    /// `none`; only test-support containers ([`crate::testnet`]) join a
    /// network, one the test created.
    pub network_mode: Option<String>,
}

/// Creates a container from `spec` with network mode `none` (unless
/// `spec.network_mode` names another),
/// `no-new-privileges`, every capability dropped and the given limits, and
/// starts it. On a start failure the container is removed again.
///
/// Returns the container ID.
///
/// # Errors
///
/// [`DaemonError::Docker`] for any daemon failure (a missing image is a 404).
pub async fn create_and_start(
    docker: &Docker,
    spec: &ContainerSpec,
) -> Result<String, DaemonError> {
    let mounts = spec
        .binds
        .iter()
        .map(|b| Mount {
            target: Some(b.container_path.clone()),
            source: Some(b.host_path.to_string_lossy().into_owned()),
            typ: Some(MountTypeEnum::BIND),
            read_only: Some(b.read_only),
            ..Default::default()
        })
        .collect();
    let command = spec
        .command
        .clone()
        .unwrap_or_else(|| INIT_COMMAND.iter().map(|s| s.to_string()).collect());
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(command),
        entrypoint: Some(Vec::new()),
        labels: Some(spec.labels.clone()),
        user: spec.user.clone(),
        working_dir: spec.working_dir.clone(),
        env: Some(spec.env.clone()),
        network_disabled: Some(false),
        stop_signal: Some("SIGTERM".into()),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            network_mode: Some(spec.network_mode.clone().unwrap_or_else(|| "none".into())),
            security_opt: Some(vec!["no-new-privileges".into()]),
            cap_drop: Some(vec!["ALL".into()]),
            memory: spec.memory_bytes,
            memory_swap: spec.memory_bytes,
            pids_limit: spec.pids_limit,
            nano_cpus: spec.nano_cpus,
            init: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut opts = CreateContainerOptionsBuilder::new();
    if let Some(name) = &spec.name {
        opts = opts.name(name);
    }
    let created = docker.create_container(Some(opts.build()), body).await?;
    if let Err(e) = docker
        .start_container(
            &created.id,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
    {
        let _ = remove_container(docker, &created.id).await;
        return Err(e.into());
    }
    Ok(created.id)
}

/// Inspects a container; `Ok(None)` when it does not exist.
///
/// # Errors
///
/// [`DaemonError::Docker`] for failures other than 404.
pub async fn inspect_container(
    docker: &Docker,
    id: &str,
) -> Result<Option<ContainerInspectResponse>, DaemonError> {
    match docker
        .inspect_container(
            id,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
    {
        Ok(c) => Ok(Some(c)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes a container with force (killing it) and its anonymous volumes.
/// Idempotent: a missing container is success, and a removal already in
/// progress is waited for (bounded).
///
/// # Errors
///
/// [`DaemonError::Docker`] for other failures.
pub async fn remove_container(docker: &Docker, id: &str) -> Result<(), DaemonError> {
    let opts = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    for attempt in 0..50 {
        match docker.remove_container(id, Some(opts.clone())).await {
            Ok(()) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            // 409: "removal of container ... is already in progress".
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) if attempt < 49 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Commits a container's file system (not its memory, not its bind
/// mounts) to a new image with `labels`, pausing it while committing.
/// When `repo_tag` is `Some(("repo", "tag"))` the image is tagged.
///
/// Returns the new image ID (`sha256:<hex>`).
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn commit_container(
    docker: &Docker,
    container_id: &str,
    repo_tag: Option<(&str, &str)>,
    labels: &HashMap<String, String>,
) -> Result<String, DaemonError> {
    let mut opts = CommitContainerOptionsBuilder::new()
        .container(container_id)
        .pause(true);
    if let Some((repo, tag)) = repo_tag {
        opts = opts.repo(repo).tag(tag);
    }
    let config = ContainerConfig {
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let res = docker.commit_container(opts.build(), config).await?;
    if res.id.is_empty() {
        return Err(DaemonError::Unexpected(
            "commit returned no image id".into(),
        ));
    }
    Ok(res.id)
}

/// Removes an image (by ID or reference) and its untagged parents.
/// Idempotent: a missing image is success. Without `force`, an image in
/// use by a container is refused by the daemon (409).
///
/// # Errors
///
/// [`DaemonError::Docker`] for other failures.
pub async fn remove_image(docker: &Docker, image: &str, force: bool) -> Result<(), DaemonError> {
    let opts = RemoveImageOptionsBuilder::new().force(force).build();
    match docker
        .remove_image(image, Some(opts), None::<bollard::auth::DockerCredentials>)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn label_filters(labels: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    )])
}

/// Lists every container (running or not) carrying all of `labels`.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_containers_by_labels(
    docker: &Docker,
    labels: &[(&str, &str)],
) -> Result<Vec<ContainerSummary>, DaemonError> {
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&label_filters(labels))
        .build();
    Ok(docker.list_containers(Some(opts)).await?)
}

/// Lists every container (running or not) carrying all of `labels` and
/// created from `image` (a tag or id).
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_containers_from_image(
    docker: &Docker,
    image: &str,
    labels: &[(&str, &str)],
) -> Result<Vec<ContainerSummary>, DaemonError> {
    let mut filters = label_filters(labels);
    filters.insert("ancestor".to_string(), vec![image.to_string()]);
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    Ok(docker.list_containers(Some(opts)).await?)
}

/// Lists every image carrying all of `labels`.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_images_by_labels(
    docker: &Docker,
    labels: &[(&str, &str)],
) -> Result<Vec<ImageSummary>, DaemonError> {
    let opts = ListImagesOptionsBuilder::new()
        .all(false)
        .filters(&label_filters(labels))
        .build();
    Ok(docker.list_images(Some(opts)).await?)
}

/// Refuses daemon settings that [`connect`] could not honour.
fn check_local_daemon_env(host: Option<&str>, context: Option<&str>) -> Result<(), DaemonError> {
    if let Some(host) = host.filter(|h| !h.is_empty() && !h.starts_with("unix://")) {
        return Err(DaemonError::Unexpected(format!(
            "DOCKER_HOST={host:?} is not a local unix:// socket; the Docker provider needs the \
             daemon on this machine (it bind-mounts and reads host directories)"
        )));
    }
    if let Some(context) = context.filter(|c| !c.is_empty() && *c != "default") {
        return Err(DaemonError::Unexpected(format!(
            "DOCKER_CONTEXT={context:?} is not supported; unset it, or set DOCKER_HOST=unix:///path/to/docker.sock"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod env_tests {
    use super::check_local_daemon_env;

    #[test]
    fn only_local_unix_sockets_are_accepted() {
        assert!(check_local_daemon_env(None, None).is_ok());
        assert!(check_local_daemon_env(Some("unix:///var/run/docker.sock"), None).is_ok());
        assert!(check_local_daemon_env(Some(""), Some("default")).is_ok());
        for host in [
            "tcp://127.0.0.1:1",
            "ssh://nobody@127.0.0.1",
            "garbage",
            "npipe:////./pipe/docker",
        ] {
            let e = check_local_daemon_env(Some(host), None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(host), "{e}");
        }
        let e = check_local_daemon_env(None, Some("nosuch"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nosuch"), "{e}");
    }
}

// ---------------------------------------------------------------------------
// Exec process location and signalling
// ---------------------------------------------------------------------------

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
    exec_id: String,
    /// Host PID (== host PGID) of the exec's leader, when validated.
    host_pgid: Option<i32>,
    /// Why it is not usable, when it is not.
    unusable: Option<String>,
    /// The leader's start time (field 22 of `/proc/<pid>/stat`), to tell
    /// it apart from a later process reusing the PID.
    start_time: u64,
    /// The PID the daemon reported for the exec, 0 when it reported none
    /// (yet).
    daemon_pid: i64,
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

/// Validates host PID `pid` as the group leader of an exec inside the
/// container whose init has host PID `container_pid`. When the leader has
/// already been reaped, the group is still accepted if a member lives in
/// the container's PID namespace (a group ID is not reused while it has
/// members); the start time is then 0 and the leader counts as exited.
fn validate_host_pid(pid: i64, container_pid: i64) -> Result<(i32, u64), String> {
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
    let container_pid = inspect_container(docker, container_id)
        .await?
        .and_then(|c| c.state)
        .and_then(|s| s.pid)
        .unwrap_or(0);
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

// ---------------------------------------------------------------------------
// Bounded exec
// ---------------------------------------------------------------------------

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A command for [`exec_bounded`].
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// argv; `argv[0]` is looked up in the container's `PATH`.
    pub argv: Vec<String>,
    /// Environment as `KEY=value`, added to the container's.
    pub env: Vec<String>,
    /// Working directory, absolute.
    pub working_dir: Option<String>,
    /// User, `uid[:gid]` or a name; the container's when `None`.
    pub user: Option<String>,
    /// Bytes for stdin, then EOF. `None`: stdin is not attached (reads see
    /// EOF at once).
    pub stdin: Option<Vec<u8>>,
    /// Per-stream bound in bytes; one byte more ends the command.
    pub output_limit_bytes: u64,
    /// Wall-clock bound from start.
    pub timeout: Duration,
    /// Kill what is left of the process group once the main process has
    /// exited and the streams closed (background children). Default true:
    /// a command leaves nothing running in its group.
    pub reap_group_on_exit: bool,
}

impl ExecRequest {
    /// A request with no stdin, no env, 1 MiB per stream, 60 s, reaping on.
    pub fn new(argv: &[&str]) -> Self {
        ExecRequest {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            working_dir: None,
            user: None,
            stdin: None,
            output_limit_bytes: 1 << 20,
            timeout: Duration::from_secs(60),
            reap_group_on_exit: true,
        }
    }
}

/// Most bytes of the daemon's message kept for a [`StartFailure`].
pub const START_MESSAGE_MAX: usize = 4096;

/// An exec whose process never started, established from daemon state
/// (`ExecInspect.Pid` never set, an exit code recorded; see the module
/// documentation), never from output text alone.
///
/// Since no workload process ran, everything on the exec's streams came
/// from the daemon, so its message can be trusted and classified. The
/// engine itself reports 126 for every cause; this maps, as shells do:
///
/// * `127` when the executable was not found (`executable file not
///   found`, `no such file or directory` about the executable), or when
///   the engine itself reported 127;
/// * `126` otherwise: permission denied, not executable, a directory, and
///   a missing or unusable working directory (`chdir to cwd ... failed`),
///   which is an invocation failure, not a missing command (the engine's
///   and `docker exec`'s 126).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// 127 (not found) or 126 (could not be invoked).
    pub code: u8,
    /// The daemon's message, trimmed (at most [`START_MESSAGE_MAX`] bytes
    /// of it), or a description when the daemon wrote none.
    pub message: String,
}

impl StartFailure {
    /// Classifies what the daemon wrote for the never-started `argv0`,
    /// whose exit code it reported as `daemon_code`.
    pub fn classify(argv0: &str, daemon_code: i64, daemon_output: &[u8]) -> StartFailure {
        let raw = &daemon_output[..daemon_output.len().min(START_MESSAGE_MAX)];
        let message = String::from_utf8_lossy(raw).trim().to_owned();
        let message = if message.is_empty() {
            format!(
                "the process of {argv0:?} never started (the daemon reported exit code \
                 {daemon_code} and no message)"
            )
        } else {
            message
        };
        // The executable's own name must not decide the class (think of a
        // program called `not-found` or `chdir`).
        let text = if argv0.is_empty() {
            message.to_ascii_lowercase()
        } else {
            message.replace(argv0, "").to_ascii_lowercase()
        };
        let working_dir = text.contains("chdir") || text.contains("cwd");
        let not_found = text.contains("executable file not found")
            || text.contains("no such file or directory")
            || text.contains("not found");
        let code = if !working_dir && (not_found || daemon_code == 127) {
            127
        } else {
            126
        };
        StartFailure { code, message }
    }
}

/// How a bounded exec ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    /// The main process exited with `code` (a signal `n` shows as `128+n`).
    Exited {
        /// Exit code per `ExecInspect`.
        code: i64,
        /// Everything written to stdout.
        stdout: Vec<u8>,
        /// Everything written to stderr.
        stderr: Vec<u8>,
    },
    /// The timeout passed; the group was killed. Output up to the kill.
    TimedOut {
        /// Stdout collected before the kill.
        stdout: Vec<u8>,
        /// Stderr collected before the kill.
        stderr: Vec<u8>,
    },
    /// A stream passed `limit_bytes`; the group was killed.
    OutputLimit {
        /// The stream that passed first.
        stream: OutputStream,
        /// The bound it passed.
        limit_bytes: u64,
    },
    /// The streams closed but the daemon reported no exit code.
    ExitUnknown {
        /// Stdout collected.
        stdout: Vec<u8>,
        /// Stderr collected.
        stderr: Vec<u8>,
    },
    /// The process never started (daemon state, see [`StartFailure`]).
    /// There is no workload output: what the daemon wrote on the streams
    /// is the failure's message.
    StartFailed(StartFailure),
}

/// The outcome plus what the caller may want to record.
#[derive(Debug, Clone)]
pub struct ExecReport {
    /// How it ended.
    pub outcome: ExecOutcome,
    /// Just before the exec was created.
    pub started_at: Instant,
    /// When the outcome was settled.
    pub ended_at: Instant,
    /// The daemon's exec ID.
    pub exec_id: String,
    /// Whether the process group was signalled (timeout, limit, reaping).
    pub group_killed: bool,
    /// Whether the stream had to be abandoned without EOF.
    pub abandoned_stream: bool,
    /// Where the group was (or could not be) located.
    pub process: ExecProcess,
}

fn exec_config(
    argv: &[String],
    env: &[String],
    working_dir: Option<&str>,
    user: Option<&str>,
    attach_stdin: bool,
) -> ExecConfig {
    ExecConfig {
        attach_stdin: Some(attach_stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(env.to_vec()),
        cmd: Some(argv.to_vec()),
        privileged: Some(false),
        user: user.map(str::to_string),
        working_dir: working_dir.map(str::to_string),
        ..Default::default()
    }
}

/// Runs `request` in a running container with bounded output and time.
///
/// Output is counted here (bollard's buffer is no limit). A stream that
/// passes `output_limit_bytes`, or the timeout, kills the command's whole
/// process group; the stream keeps being drained (and discarded) while the
/// kill takes effect, for at most [`KILL_DRAIN_GRACE`]. The exit code is
/// read after both streams reached EOF, once `ExecInspect` says the process
/// is no longer running. See the module documentation for background
/// children and signals.
///
/// An exec whose process never started (missing executable, ...) is not
/// an error but [`ExecOutcome::StartFailed`], decided from daemon state.
///
/// # Errors
///
/// [`DaemonError::Docker`] when the exec cannot be created or started at
/// the API level.
///
/// # Cancel safety
///
/// Dropping the future drops the attached stream; the command keeps
/// running in the container until it ends or the container is removed.
pub async fn exec_bounded(
    docker: &Docker,
    container_id: &str,
    request: &ExecRequest,
) -> Result<ExecReport, DaemonError> {
    let started_at = Instant::now();
    let deadline = tokio::time::Instant::from_std(started_at + request.timeout);
    let created = docker
        .create_exec(
            container_id,
            exec_config(
                &request.argv,
                &request.env,
                request.working_dir.as_deref(),
                request.user.as_deref(),
                request.stdin.is_some(),
            ),
        )
        .await?;
    let exec_id = created.id;
    let StartExecResults::Attached { mut output, input } =
        docker.start_exec(&exec_id, None).await?
    else {
        return Err(DaemonError::Unexpected("exec started detached".into()));
    };
    let stdin_task = request.stdin.clone().map(|bytes| {
        let mut input = input;
        tokio::spawn(async move {
            let _ = input.write_all(&bytes).await;
            let _ = input.shutdown().await;
        })
    });
    let located = locate_exec(docker, container_id, &exec_id, Duration::from_secs(5)).await?;

    let limit = request.output_limit_bytes;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let (mut out_n, mut err_n) = (0u64, 0u64);
    // The first bytes of both streams whatever happens, for the daemon's
    // message should the process turn out never to have started.
    let mut head: Vec<u8> = Vec::new();
    let mut overflow: Option<OutputStream> = None;
    let mut timed_out = false;
    let mut group_killed = false;
    let mut abandoned_stream = false;
    let mut drain_until: Option<tokio::time::Instant> = None;
    let mut main_exited_at: Option<tokio::time::Instant> = None;
    let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let kill = |group_killed: &mut bool| {
        *group_killed = true;
        let _ = located.signal_group(ProcessSignal::Kill);
    };

    loop {
        let eof_grace_at = main_exited_at.map_or(far, |t| t + EXIT_EOF_GRACE);
        tokio::select! {
            item = output.next() => match item {
                Some(Ok(LogOutput::StdOut { message })) => {
                    keep_head(&mut head, &message);
                    out_n += message.len() as u64;
                    if overflow.is_none() && !timed_out {
                        if out_n > limit {
                            overflow = Some(OutputStream::Stdout);
                        } else {
                            stdout.extend_from_slice(&message);
                        }
                    }
                }
                Some(Ok(LogOutput::StdErr { message })) => {
                    keep_head(&mut head, &message);
                    err_n += message.len() as u64;
                    if overflow.is_none() && !timed_out {
                        if err_n > limit {
                            overflow = Some(OutputStream::Stderr);
                        } else {
                            stderr.extend_from_slice(&message);
                        }
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(exec_id, error = %e, "exec stream failed; treating as EOF");
                    break;
                }
                None => break,
            },
            _ = tokio::time::sleep_until(deadline), if !timed_out && overflow.is_none() => {
                timed_out = true;
                kill(&mut group_killed);
                drain_until = Some(tokio::time::Instant::now() + KILL_DRAIN_GRACE);
            }
            _ = tokio::time::sleep_until(eof_grace_at), if main_exited_at.is_some() && !group_killed => {
                // The main process is gone but someone holds the pipes.
                kill(&mut group_killed);
                drain_until = Some(tokio::time::Instant::now() + KILL_DRAIN_GRACE);
            }
            _ = tokio::time::sleep_until(drain_until.unwrap_or(far)), if drain_until.is_some() => {
                abandoned_stream = true;
                break;
            }
            _ = poll.tick(), if main_exited_at.is_none() => {
                let gone = match located.leader_alive() {
                    Some(alive) => !alive,
                    None => match tokio::time::timeout(INSPECT_PROMPT, docker.inspect_exec(&exec_id)).await {
                        Ok(info) => {
                            let info = info?;
                            info.running == Some(false) && info.exit_code.is_some()
                        }
                        // The daemon is settling an exit (see locate_exec).
                        Err(_) => true,
                    },
                };
                if gone {
                    main_exited_at = Some(tokio::time::Instant::now());
                }
            }
        }
        if overflow.is_some() && drain_until.is_none() {
            kill(&mut group_killed);
            drain_until = Some(tokio::time::Instant::now() + KILL_DRAIN_GRACE);
        }
    }
    drop(output);
    if let Some(task) = stdin_task {
        task.abort();
    }

    // Both streams are at EOF (or abandoned): now the exit code.
    let settle_by = Instant::now() + EXIT_SETTLE_BOUND;
    let mut exit_code = None;
    let mut late_pid = 0;
    loop {
        let info = docker.inspect_exec(&exec_id).await?;
        late_pid = late_pid.max(info.pid.unwrap_or(0));
        if info.running == Some(false) {
            exit_code = info.exit_code;
            if exit_code.is_some() || Instant::now() >= settle_by {
                break;
            }
        }
        if Instant::now() >= settle_by {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Never started: the daemon recorded an exit but no PID, now or while
    // locating (a started exec's PID is recorded before its exit, and kept).
    if let (Some(code), 0, None) = (exit_code, late_pid, located.daemon_pid()) {
        let argv0 = request.argv.first().map_or("", String::as_str);
        return Ok(ExecReport {
            outcome: ExecOutcome::StartFailed(StartFailure::classify(argv0, code, &head)),
            started_at,
            ended_at: Instant::now(),
            exec_id,
            group_killed,
            abandoned_stream,
            process: located,
        });
    }
    let mut located = located;
    if !located.killable()
        && late_pid > 0
        && (request.reap_group_on_exit || overflow.is_some() || timed_out)
    {
        // The leader exited before it could be located; the daemon still
        // knows its PID, and the group is accepted through a live member.
        if let Some(container_pid) = inspect_container(docker, container_id)
            .await?
            .and_then(|c| c.state)
            .and_then(|s| s.pid)
        {
            if let Ok((pgid, start_time)) = validate_host_pid(late_pid, container_pid) {
                located.host_pgid = Some(pgid);
                located.start_time = start_time;
                located.unusable = None;
            }
        }
    }
    if request.reap_group_on_exit && located.killable() {
        // Background children that closed their pipes may still run.
        group_killed = true;
        let _ = located.signal_group(ProcessSignal::Kill);
    }
    let outcome = if let Some(stream) = overflow {
        ExecOutcome::OutputLimit {
            stream,
            limit_bytes: limit,
        }
    } else if timed_out {
        ExecOutcome::TimedOut { stdout, stderr }
    } else if let Some(code) = exit_code {
        ExecOutcome::Exited {
            code,
            stdout,
            stderr,
        }
    } else {
        ExecOutcome::ExitUnknown { stdout, stderr }
    };
    Ok(ExecReport {
        outcome,
        started_at,
        ended_at: Instant::now(),
        exec_id,
        group_killed,
        abandoned_stream,
        process: located,
    })
}

fn keep_head(head: &mut Vec<u8>, chunk: &[u8]) {
    let room = START_MESSAGE_MAX.saturating_sub(head.len());
    head.extend_from_slice(&chunk[..chunk.len().min(room)]);
}

/// After `locate_exec` saw no PID: waits (at most `bound`) until the daemon
/// either reports a PID (started: `None`) or records an exit without one
/// (never started: `Some(exit code)`). Running out of time counts as
/// started, the conservative answer.
async fn never_started_code(
    docker: &Docker,
    exec_id: &str,
    bound: Duration,
) -> Result<Option<i64>, DaemonError> {
    let until = Instant::now() + bound;
    loop {
        let info = docker.inspect_exec(exec_id).await?;
        if info.pid.unwrap_or(0) > 0 {
            return Ok(None);
        }
        if info.running == Some(false) {
            if let Some(code) = info.exit_code {
                return Ok(Some(code));
            }
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------
// Streaming exec
// ---------------------------------------------------------------------------

/// How a streaming process ended. Settles once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    /// Exit code (0-255).
    Code(i64),
    /// Killed by a signal this module delivered (exit code `128 + n`).
    Signaled(ProcessSignal),
    /// The daemon reported no exit code.
    Unknown,
}

/// A byte stream of one output of a streaming exec. Chunk boundaries carry
/// no meaning. Ends (`None`) at the real EOF of the exec's output.
#[derive(Debug)]
pub struct OutputReceiver {
    rx: mpsc::Receiver<Vec<u8>>,
}

impl OutputReceiver {
    /// The next chunk, or `None` at EOF.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a chunk is never lost when the future is dropped.
    pub async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await
    }
}

impl Stream for OutputReceiver {
    type Item = Vec<u8>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        self.rx.poll_recv(cx)
    }
}

/// The stdin of a streaming exec: ordered bytes, and a real half-close
/// with [`AsyncWriteExt::shutdown`] (it shuts down the write side of the
/// hijacked connection; the daemon then closes the process's stdin).
pub struct ProcessInput {
    inner: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for ProcessInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProcessInput")
    }
}

impl AsyncWrite for ProcessInput {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.inner.as_mut().poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.as_mut().poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.as_mut().poll_shutdown(cx)
    }
}

/// Control over a streaming exec: exit, signals, teardown. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ProcessControl {
    exec_id: String,
    process: ExecProcess,
    exit: watch::Receiver<Option<ProcessExit>>,
    sent: Arc<Mutex<Vec<ProcessSignal>>>,
    nudge: Arc<Notify>,
    stderr_dropped_bytes: Arc<std::sync::atomic::AtomicU64>,
    start_failure: Option<StartFailure>,
}

impl ProcessControl {
    /// The daemon's exec ID.
    pub fn exec_id(&self) -> &str {
        &self.exec_id
    }

    /// Where the process group can be signalled.
    pub fn process(&self) -> &ExecProcess {
        &self.process
    }

    /// Waits for the exit; settles once, and every later call returns the
    /// same value.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn wait(&self) -> ProcessExit {
        let mut rx = self.exit.clone();
        loop {
            if let Some(exit) = *rx.borrow_and_update() {
                return exit;
            }
            if rx.changed().await.is_err() {
                return (*rx.borrow()).unwrap_or(ProcessExit::Unknown);
            }
        }
    }

    /// The exit if it has settled.
    pub fn try_exit(&self) -> Option<ProcessExit> {
        *self.exit.borrow()
    }

    /// Why the process never started, when it did not (daemon state, see
    /// [`StartFailure`]). Such a process has settled already with
    /// [`ProcessExit::Code`] of [`StartFailure::code`]; its stdout is empty
    /// and its stderr holds the daemon's message.
    pub fn start_failure(&self) -> Option<&StartFailure> {
        self.start_failure.as_ref()
    }

    /// Sends `signal` to the process group.
    ///
    /// # Errors
    ///
    /// As [`ExecProcess::signal_group`].
    pub fn signal(&self, signal: ProcessSignal) -> Result<(), DaemonError> {
        if self.try_exit().is_some() {
            return Ok(());
        }
        self.sent.lock().map(|mut s| s.push(signal)).ok();
        let res = self.process.signal_group(signal);
        self.nudge.notify_one();
        res
    }

    /// Kills the group (idempotent) and waits for the exit, at most
    /// `bound`. Returns the exit if it settled.
    pub async fn destroy(&self, bound: Duration) -> Option<ProcessExit> {
        if self.try_exit().is_none() {
            let _ = self.signal(ProcessSignal::Kill);
        }
        tokio::time::timeout(bound, self.wait()).await.ok()
    }

    /// Bytes of stderr dropped because its consumer was not keeping up
    /// (stderr is diagnostic and bounded; stdout is never dropped).
    pub fn stderr_dropped_bytes(&self) -> u64 {
        self.stderr_dropped_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A live process: stdin, stdout, stderr and control.
#[derive(Debug)]
pub struct StreamingExec {
    /// Standard input with half-close.
    pub stdin: ProcessInput,
    /// Standard output, lossless, with backpressure (the process blocks
    /// when it is not read).
    pub stdout: OutputReceiver,
    /// Standard error, bounded: chunks are dropped (and counted) when the
    /// consumer lags by more than [`STDERR_QUEUE_CHUNKS`] chunks.
    pub stderr: OutputReceiver,
    /// Exit, signals, teardown.
    pub control: ProcessControl,
}

/// Chunks of stdout buffered between the daemon and the consumer.
pub const STDOUT_QUEUE_CHUNKS: usize = 16;
/// Chunks of stderr buffered before further stderr is dropped.
pub const STDERR_QUEUE_CHUNKS: usize = 64;

/// Starts a long-lived process with stdin, stdout and stderr attached.
///
/// No timeout and no output cap are imposed: the consumer bounds what it
/// reads. The exit is found by polling `ExecInspect` (every 20 ms at
/// first, backing off to 500 ms, and at once after EOF or a signal), so
/// `wait` settles even when nobody reads the output.
///
/// A process that never started (daemon state, see [`StartFailure`]) is
/// returned settled: `wait` gives [`ProcessExit::Code`] 127 or 126, stdout
/// ends at once with nothing, stderr carries the daemon's message (never
/// stdout), and [`ProcessControl::start_failure`] says why.
///
/// # Errors
///
/// [`DaemonError::Docker`] when the exec cannot be created or started.
pub async fn exec_streaming(
    docker: &Docker,
    container_id: &str,
    argv: &[String],
    env: &[String],
    working_dir: Option<&str>,
    user: Option<&str>,
) -> Result<StreamingExec, DaemonError> {
    let created = docker
        .create_exec(
            container_id,
            exec_config(argv, env, working_dir, user, true),
        )
        .await?;
    let exec_id = created.id;
    let StartExecResults::Attached { mut output, input } =
        docker.start_exec(&exec_id, None).await?
    else {
        return Err(DaemonError::Unexpected("exec started detached".into()));
    };
    let process = locate_exec(docker, container_id, &exec_id, Duration::from_secs(5)).await?;
    if process.daemon_pid().is_none() {
        if let Some(code) = never_started_code(docker, &exec_id, EXIT_SETTLE_BOUND).await? {
            // Only the daemon wrote on these streams; it closes them at once.
            let mut head = Vec::new();
            let _ = tokio::time::timeout(EXIT_SETTLE_BOUND, async {
                while let Some(Ok(item)) = output.next().await {
                    if let LogOutput::StdOut { message } | LogOutput::StdErr { message } = item {
                        keep_head(&mut head, &message);
                    }
                }
            })
            .await;
            drop(output);
            let argv0 = argv.first().map_or("", String::as_str);
            let failure = StartFailure::classify(argv0, code, &head);
            return Ok(settled_start_failure(exec_id, process, input, failure));
        }
    }
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(STDOUT_QUEUE_CHUNKS);
    let (err_tx, err_rx) = mpsc::channel::<Vec<u8>>(STDERR_QUEUE_CHUNKS);
    let (exit_tx, exit_rx) = watch::channel(None);
    let nudge = Arc::new(Notify::new());
    let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sent = Arc::new(Mutex::new(Vec::<ProcessSignal>::new()));

    // Demultiplexer: stdout with backpressure, stderr best effort.
    {
        let nudge = nudge.clone();
        let dropped = dropped.clone();
        tokio::spawn(async move {
            let mut out_tx = Some(out_tx);
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) => {
                        if let Some(tx) = &out_tx {
                            if tx.send(message.to_vec()).await.is_err() {
                                out_tx = None; // consumer gone: discard
                            }
                        }
                    }
                    Ok(LogOutput::StdErr { message }) => {
                        let n = message.len() as u64;
                        if err_tx.try_send(message.to_vec()).is_err() {
                            dropped.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            drop(out_tx);
            drop(err_tx);
            nudge.notify_one();
        });
    }

    // Exit watcher.
    {
        let docker = docker.clone();
        let exec_id = exec_id.clone();
        let nudge = nudge.clone();
        let sent = sent.clone();
        tokio::spawn(async move {
            let mut interval = Duration::from_millis(20);
            let mut unknown_since: Option<Instant> = None;
            loop {
                match docker.inspect_exec(&exec_id).await {
                    Ok(info) if info.running == Some(false) => match info.exit_code {
                        Some(code) => {
                            let signaled = sent.lock().ok().and_then(|s| {
                                s.iter()
                                    .copied()
                                    .find(|sig| code == 128 + i64::from(sig.number()))
                            });
                            let exit = match signaled {
                                Some(sig) => ProcessExit::Signaled(sig),
                                None => ProcessExit::Code(code),
                            };
                            let _ = exit_tx.send(Some(exit));
                            return;
                        }
                        None => {
                            let since = *unknown_since.get_or_insert_with(Instant::now);
                            if since.elapsed() > EXIT_SETTLE_BOUND {
                                let _ = exit_tx.send(Some(ProcessExit::Unknown));
                                return;
                            }
                        }
                    },
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {
                        // Container removed: the exec is gone with it.
                        let _ = exit_tx.send(Some(ProcessExit::Unknown));
                        return;
                    }
                    Err(e) => tracing::debug!(exec_id, error = %e, "exec inspect failed"),
                }
                tokio::select! {
                    _ = nudge.notified() => interval = Duration::from_millis(20),
                    _ = tokio::time::sleep(interval) => {
                        interval = (interval * 2).min(Duration::from_millis(500));
                    }
                }
            }
        });
    }

    Ok(StreamingExec {
        stdin: ProcessInput { inner: input },
        stdout: OutputReceiver { rx: out_rx },
        stderr: OutputReceiver { rx: err_rx },
        control: ProcessControl {
            exec_id,
            process,
            exit: exit_rx,
            sent,
            nudge,
            stderr_dropped_bytes: dropped,
            start_failure: None,
        },
    })
}

fn settled_start_failure(
    exec_id: String,
    process: ExecProcess,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    failure: StartFailure,
) -> StreamingExec {
    let (_, out_rx) = mpsc::channel::<Vec<u8>>(1);
    let (err_tx, err_rx) = mpsc::channel::<Vec<u8>>(1);
    let _ = err_tx.try_send(format!("{}\n", failure.message).into_bytes());
    let (_, exit_rx) = watch::channel(Some(ProcessExit::Code(i64::from(failure.code))));
    StreamingExec {
        stdin: ProcessInput { inner: input },
        stdout: OutputReceiver { rx: out_rx },
        stderr: OutputReceiver { rx: err_rx },
        control: ProcessControl {
            exec_id,
            process,
            exit: exit_rx,
            sent: Arc::new(Mutex::new(Vec::new())),
            nudge: Arc::new(Notify::new()),
            stderr_dropped_bytes: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            start_failure: Some(failure),
        },
    }
}

// ---------------------------------------------------------------------------
// Snapshot archives of host directories
// ---------------------------------------------------------------------------

/// What [`archive_dir`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveSummary {
    /// Entries written (directories, files, symlinks).
    pub entries: usize,
    /// FIFOs, sockets and device nodes left out.
    pub skipped: Vec<PathBuf>,
}

/// Writes an uncompressed tar of everything under the directory `root` to
/// `out`, walking by file descriptor ([`contained::walk`]): symlinks are
/// stored as symlinks and never followed, special files are skipped.
/// Entries carry mode bits, mtime 0 and owner 0:0 (ownership is not part
/// of a snapshot).
///
/// # Errors
///
/// [`DaemonError::Contained`] from the walk (including more than
/// `max_entries` entries, or a file that changed size while archived),
/// [`DaemonError::Io`] for write failures.
pub fn archive_dir<W: Write>(
    root: &Path,
    max_entries: usize,
    out: W,
) -> Result<(W, ArchiveSummary), DaemonError> {
    let root_fd = contained::open_root(root)?;
    let mut builder = tar::Builder::new(out);
    builder.mode(tar::HeaderMode::Deterministic);
    let mut summary = ArchiveSummary::default();
    let mut write_err: Option<io::Error> = None;
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h
    };
    let res = contained::walk(root_fd.as_fd(), max_entries, &mut |entry| {
        let r = match entry {
            WalkEntry::Directory { path, mode, .. } => {
                let mut h = header(tar::EntryType::Directory, mode, 0);
                builder.append_data(&mut h, path, io::empty())
            }
            WalkEntry::RegularFile {
                path,
                mode,
                size_bytes,
                file,
            } => {
                let mut h = header(tar::EntryType::Regular, mode, size_bytes);
                let mut counted = CountingReader {
                    inner: file.take(size_bytes),
                    n: 0,
                };
                let r = builder.append_data(&mut h, path, &mut counted);
                if r.is_ok() && counted.n != size_bytes {
                    return Err(ContainedError::Io {
                        path: path.to_path_buf(),
                        source: io::Error::other("file shrank while being archived"),
                    });
                }
                r
            }
            WalkEntry::Symlink { path, target } => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                builder.append_link(&mut h, path, target)
            }
            WalkEntry::Special { path, .. } => {
                summary.skipped.push(path.to_path_buf());
                return Ok(());
            }
        };
        match r {
            Ok(()) => {
                summary.entries += 1;
                Ok(())
            }
            Err(e) => {
                write_err = Some(e);
                Err(ContainedError::Io {
                    path: PathBuf::from("<archive>"),
                    source: io::Error::other("archive write failed"),
                })
            }
        }
    });
    if let Some(e) = write_err {
        return Err(DaemonError::Io {
            context: "writing archive".into(),
            source: e,
        });
    }
    res?;
    let out = builder.into_inner().map_err(io_err("finishing archive"))?;
    Ok((out, summary))
}

struct CountingReader<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

/// What [`extract_archive`] created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractSummary {
    /// Directories created.
    pub directories: usize,
    /// Regular files created.
    pub files: usize,
    /// Symlinks created.
    pub symlinks: usize,
}

fn safe_components(path: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(PathBuf::from(n)),
            Component::CurDir => {}
            Component::ParentDir => return Err("path holds `..`".into()),
            Component::RootDir | Component::Prefix(_) => return Err("absolute path".into()),
        }
    }
    Ok(out)
}

/// Whether a relative symlink target, read from the directory at `depth`
/// components below the root, stays under the root lexically.
fn link_stays_inside(depth: usize, target: &Path) -> bool {
    let mut d = depth as i64;
    for c in target.components() {
        match c {
            Component::Normal(_) => d += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                d -= 1;
                if d < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

fn open_parent(dest: BorrowedFd<'_>, parent: &Path) -> Result<OwnedFd, rustix::io::Errno> {
    let p: &Path = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    rustix::fs::openat2(
        dest,
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
}

/// Extracts the uncompressed tar `archive` into `dest`, which must not
/// exist yet (it is created, mode 0755).
///
/// Refused (and the partial `dest` removed): absolute entry paths, `..`
/// components, absolute symlink targets, relative targets that climb above
/// the root (lexically, then checked physically after extraction with
/// `openat2(RESOLVE_BENEATH)`), hard links, device nodes, FIFOs. Nothing is
/// written through a symlink: every parent is opened with
/// `RESOLVE_NO_SYMLINKS`, files with `O_CREAT | O_EXCL | O_NOFOLLOW`. Mode
/// bits are restored without set-uid/set-gid; owners are the caller's.
///
/// # Errors
///
/// [`DaemonError::ArchiveRefused`] for a refused entry, `Io` otherwise.
pub fn extract_archive<R: Read>(archive: R, dest: &Path) -> Result<ExtractSummary, DaemonError> {
    extract_with(archive, dest, false)
}

/// Like [`extract_archive`], except that symlinks are restored verbatim,
/// absolute targets and targets climbing above the root included.
///
/// For restoring a workload's own tree (a snapshot of a mount), where a
/// link such as `venv/bin/python -> /usr/bin/python3` is meaningful inside
/// the sandbox. Extraction itself still never writes through a link
/// (parents are opened with `RESOLVE_NO_SYMLINKS`, files with `O_EXCL |
/// O_NOFOLLOW`), so the restored links are inert on the host as long as the
/// host only ever reads the tree through [`crate::contained`].
///
/// # Errors
///
/// As [`extract_archive`], except for the symlink-target rules.
pub fn extract_archive_keeping_links<R: Read>(
    archive: R,
    dest: &Path,
) -> Result<ExtractSummary, DaemonError> {
    extract_with(archive, dest, true)
}

fn extract_with<R: Read>(
    archive: R,
    dest: &Path,
    keep_escaping_links: bool,
) -> Result<ExtractSummary, DaemonError> {
    std::fs::create_dir(dest).map_err(io_err(format!("creating {}", dest.display())))?;
    let res = extract_into(archive, dest, keep_escaping_links);
    if res.is_err() {
        let _ = std::fs::remove_dir_all(dest);
    }
    res
}

fn extract_into<R: Read>(
    archive: R,
    dest: &Path,
    keep_escaping_links: bool,
) -> Result<ExtractSummary, DaemonError> {
    let dest_fd = contained::open_root(dest)?;
    let mut summary = ExtractSummary::default();
    let mut links: Vec<PathBuf> = Vec::new();
    let mut ar = tar::Archive::new(archive);
    for entry in ar.entries().map_err(io_err("reading archive"))? {
        let mut entry = entry.map_err(io_err("reading archive entry"))?;
        let raw_path = entry
            .path()
            .map_err(io_err("reading entry path"))?
            .into_owned();
        let refuse = |reason: &str| DaemonError::ArchiveRefused {
            path: raw_path.clone(),
            reason: reason.to_string(),
        };
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XHeader | tar::EntryType::XGlobalHeader
        ) {
            continue;
        }
        let comps = safe_components(&raw_path).map_err(|r| refuse(&r))?;
        let Some((name, parents)) = comps.split_last() else {
            continue; // the root itself ("./")
        };
        let parent: PathBuf = parents.iter().collect();
        let rel: PathBuf = comps.iter().collect();
        let parent_fd = open_parent(dest_fd.as_fd(), &parent)
            .map_err(|e| refuse(&format!("parent not a plain directory under the root: {e}")))?;
        let mode = entry.header().mode().map_err(io_err("reading mode"))? & 0o1777;
        match kind {
            tar::EntryType::Directory => {
                match rustix::fs::mkdirat(&parent_fd, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(errno_err(format!("mkdir {}", rel.display()))(e)),
                }
                let fd = rustix::fs::openat(
                    &parent_fd,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|_| refuse("existing entry is not a directory"))?;
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
                    .map_err(errno_err(format!("chmod {}", rel.display())))?;
                summary.directories += 1;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let fd = rustix::fs::openat(
                    &parent_fd,
                    name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(|e| refuse(&format!("cannot create file: {e}")))?;
                let mut file = std::fs::File::from(fd);
                io::copy(&mut entry, &mut file)
                    .map_err(io_err(format!("writing {}", rel.display())))?;
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))
                    .map_err(errno_err(format!("chmod {}", rel.display())))?;
                summary.files += 1;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(io_err("reading link target"))?
                    .ok_or_else(|| refuse("symlink without target"))?
                    .into_owned();
                if keep_escaping_links {
                    rustix::fs::symlinkat(&target, &parent_fd, name)
                        .map_err(|e| refuse(&format!("cannot create symlink: {e}")))?;
                    summary.symlinks += 1;
                    continue;
                }
                if target.is_absolute() {
                    return Err(refuse("absolute symlink target"));
                }
                if !link_stays_inside(parents.len(), &target) {
                    return Err(refuse("symlink target climbs above the root"));
                }
                rustix::fs::symlinkat(&target, &parent_fd, name)
                    .map_err(|e| refuse(&format!("cannot create symlink: {e}")))?;
                links.push(rel);
                summary.symlinks += 1;
            }
            tar::EntryType::Link => return Err(refuse("hard links are not extracted")),
            _ => return Err(refuse("special file")),
        }
    }
    // Physical check: no link, followed from its own place, leaves the
    // root (chains of in-root links can combine into an escape that the
    // lexical check cannot see).
    for link in links {
        match rustix::fs::openat2(
            &dest_fd,
            &link,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(_) | Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => {}
            Err(e) => {
                return Err(DaemonError::ArchiveRefused {
                    path: link,
                    reason: format!("symlink resolves outside the root: {e}"),
                })
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "checkfu-archive-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn tar_with(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data_or_target) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            match kind {
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    h.set_size(0);
                    // Bypass the builder's own path checks with raw names.
                    h.set_link_name_literal(data_or_target).unwrap();
                    let name = h.as_old_mut().name.as_mut();
                    name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_cksum();
                    b.append(&h, io::empty()).unwrap();
                }
                _ => {
                    h.set_size(data_or_target.len() as u64);
                    let name = h.as_old_mut().name.as_mut();
                    name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_cksum();
                    b.append(&h, data_or_target.as_bytes()).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn start_failures_are_classified_from_the_daemon_message() {
        let oci = "OCI runtime exec failed: exec failed: unable to start container process: ";
        let cases: &[(&str, i64, String, u8)] = &[
            (
                "nosuch",
                126,
                format!("{oci}exec: \"nosuch\": executable file not found in $PATH: unknown\r\n"),
                127,
            ),
            (
                "/no/bin",
                126,
                format!("{oci}exec: \"/no/bin\": stat /no/bin: no such file or directory: unknown"),
                127,
            ),
            (
                "/tmp/f",
                126,
                format!("{oci}exec: \"/tmp/f\": permission denied: unknown"),
                126,
            ),
            (
                "true",
                126,
                format!(
                    "{oci}chdir to cwd (\"/nope\") set in config.json failed: no such file or \
                     directory: unknown"
                ),
                126,
            ),
            // The executable's name does not decide the class.
            (
                "chdir",
                126,
                format!("{oci}exec: \"chdir\": executable file not found in $PATH: unknown"),
                127,
            ),
            (
                "/bin/not-found",
                126,
                format!("{oci}exec: \"/bin/not-found\": permission denied: unknown"),
                126,
            ),
            // An engine that reports 127 itself is believed.
            ("x", 127, String::new(), 127),
            ("x", 126, String::new(), 126),
        ];
        for (argv0, daemon_code, raw, want) in cases {
            let f = StartFailure::classify(argv0, *daemon_code, raw.as_bytes());
            assert_eq!(f.code, *want, "{argv0}: {raw}");
            assert!(!f.message.is_empty() && !f.message.ends_with('\n'));
        }
        let long = vec![b'x'; START_MESSAGE_MAX * 2];
        let f = StartFailure::classify("x", 126, &long);
        assert_eq!(f.message.len(), START_MESSAGE_MAX);
    }

    #[test]
    fn round_trip_keeps_files_links_modes() {
        let base = scratch("rt");
        let src = base.join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("a/b/f.txt"), b"content").unwrap();
        std::fs::write(src.join("x.sh"), b"#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("a/b/f.txt", src.join("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("abs-link")).unwrap();
        std::fs::create_dir(src.join("empty")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(src.join("x.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (bytes, summary) = archive_dir(&src, 1000, Vec::new()).unwrap();
        assert_eq!(summary.entries, 7);
        // The archive has the absolute link; extraction refuses it.
        let err = extract_archive(bytes.as_slice(), &base.join("dst1")).unwrap_err();
        assert!(matches!(err, DaemonError::ArchiveRefused { .. }), "{err}");
        assert!(!base.join("dst1").exists());
        std::fs::remove_file(src.join("abs-link")).unwrap();
        let (bytes, _) = archive_dir(&src, 1000, Vec::new()).unwrap();
        let s = extract_archive(bytes.as_slice(), &base.join("dst")).unwrap();
        assert_eq!((s.directories, s.files, s.symlinks), (3, 2, 1));
        let dst = base.join("dst");
        assert_eq!(std::fs::read(dst.join("link")).unwrap(), b"content");
        let m = std::fs::metadata(dst.join("x.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o755);
        assert!(dst.join("empty").is_dir());
        // Deterministic bytes for the same tree.
        let (again, _) = archive_dir(&src, 1000, Vec::new()).unwrap();
        assert_eq!(bytes, again);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn keeping_links_restores_escaping_links_without_following_them() {
        let base = scratch("keep");
        let outside = base.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let bytes = tar_with(&[
            ("abs", tar::EntryType::Symlink, "/etc/passwd"),
            ("up", tar::EntryType::Symlink, "../outside"),
            ("d", tar::EntryType::Directory, ""),
            ("d/f", tar::EntryType::Regular, "data"),
        ]);
        let dst = base.join("dst");
        let s = extract_archive_keeping_links(bytes.as_slice(), &dst).unwrap();
        assert_eq!((s.directories, s.files, s.symlinks), (1, 1, 2));
        assert_eq!(
            std::fs::read_link(dst.join("abs")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            std::fs::read_link(dst.join("up")).unwrap(),
            Path::new("../outside")
        );
        // Still never written through.
        let through = tar_with(&[
            ("up", tar::EntryType::Symlink, "../outside"),
            ("up/evil", tar::EntryType::Regular, "x"),
        ]);
        let err =
            extract_archive_keeping_links(through.as_slice(), &base.join("dst2")).unwrap_err();
        assert!(matches!(err, DaemonError::ArchiveRefused { .. }), "{err}");
        assert!(!outside.join("evil").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn extraction_refuses_escapes() {
        let base = scratch("esc");
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "dotdot",
                tar_with(&[("../evil", tar::EntryType::Regular, "x")]),
            ),
            (
                "abs",
                tar_with(&[("/tmp/evil", tar::EntryType::Regular, "x")]),
            ),
            (
                "link-abs",
                tar_with(&[("l", tar::EntryType::Symlink, "/etc")]),
            ),
            (
                "link-up",
                tar_with(&[("l", tar::EntryType::Symlink, "../x")]),
            ),
            (
                "write-through-link",
                tar_with(&[
                    ("d", tar::EntryType::Directory, ""),
                    ("l", tar::EntryType::Symlink, "d"),
                    ("l/f", tar::EntryType::Regular, "x"),
                ]),
            ),
            (
                "chain",
                tar_with(&[
                    ("sub", tar::EntryType::Directory, ""),
                    ("sub/b", tar::EntryType::Symlink, ".."),
                    ("sub/c", tar::EntryType::Symlink, "b/../x"),
                ]),
            ),
            (
                "hardlink",
                tar_with(&[("h", tar::EntryType::Link, "/etc/passwd")]),
            ),
            ("fifo", tar_with(&[("p", tar::EntryType::Fifo, "")])),
        ];
        for (name, bytes) in cases {
            let dst = base.join(name);
            let res = extract_archive(bytes.as_slice(), &dst);
            assert!(
                matches!(res, Err(DaemonError::ArchiveRefused { .. })),
                "{name}: {res:?}"
            );
            assert!(!dst.exists(), "{name}: partial tree left");
        }
        assert!(!base.parent().unwrap().join("evil").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
