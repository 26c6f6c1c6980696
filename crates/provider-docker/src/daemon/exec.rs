//! Bounded execs: a command run to completion with a timeout and a
//! per-stream output bound.
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

use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::StartExecResults;
use bollard::models::ExecConfig;
use bollard::Docker;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::DaemonError;
use super::{
    containers::inspect_container,
    proctree::{
        container_host_pid, kill_namespace_except_init, locate_exec_in, validate_host_pid,
        ExecProcess, ProcessSignal, INSPECT_PROMPT,
    },
    start_failure::{StartFailure, START_MESSAGE_MAX},
};

/// How long a bounded exec waits for EOF after the main process exited
/// before it kills the process group that holds the pipes open.
pub const EXIT_EOF_GRACE: Duration = Duration::from_millis(500);
/// How long a bounded exec keeps draining after it killed the group
/// (timeout or output limit) before it abandons the stream.
pub const KILL_DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for `Running == false` once the streams are closed.
pub const EXIT_SETTLE_BOUND: Duration = Duration::from_secs(5);

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

pub(super) fn exec_config(
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

/// SIGKILL to every process of the container but its init
/// ([`kill_namespace_except_init`]); a failure is logged (the group kill
/// already ran, and the instance's destroy ends the rest).
async fn kill_instance_tree(docker: &Docker, container_id: &str) {
    let pid = match inspect_container(docker, container_id).await {
        Ok(c) => c.and_then(|c| c.state).and_then(|s| s.pid).unwrap_or(0),
        Err(e) => {
            tracing::warn!(container_id, error = %e, "cannot inspect the container to kill its process tree");
            return;
        }
    };
    if pid <= 0 {
        return;
    }
    match tokio::task::spawn_blocking(move || kill_namespace_except_init(pid)).await {
        Ok(Ok(n)) => tracing::debug!(container_id, killed = n, "process tree killed"),
        Ok(Err(e)) => tracing::warn!(
            container_id,
            error = %e,
            cause = %e.source,
            "process tree not killed"
        ),
        Err(e) => tracing::warn!(container_id, error = %e, "process tree kill task failed"),
    }
}

/// Runs `request` in a running container with bounded output and time.
///
/// Output is counted here (bollard's buffer is no limit). A stream that
/// passes `output_limit_bytes`, or the timeout, kills the command's whole
/// process group; past the timeout every other process of the container
/// but its init dies too ([`kill_namespace_except_init`]: what left the
/// group with `setsid`); the stream keeps being drained (and discarded) while the
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
    // The container's init PID (to validate the exec's) is asked for while
    // the exec is created and started: one daemon round trip off the path.
    let container_pid = container_host_pid(docker, container_id);
    let create_and_start = async {
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
        let started = docker.start_exec(&created.id, None).await?;
        Ok::<_, DaemonError>((created.id, started))
    };
    let (container_pid, created) = tokio::join!(container_pid, create_and_start);
    let (exec_id, started) = created?;
    let container_pid = container_pid?;
    let StartExecResults::Attached { mut output, input } = started else {
        return Err(DaemonError::Unexpected("exec started detached".into()));
    };
    let stdin_task = request.stdin.clone().map(|bytes| {
        let mut input = input;
        tokio::spawn(async move {
            let _ = input.write_all(&bytes).await;
            let _ = input.shutdown().await;
        })
    });
    let located = locate_exec_in(docker, container_pid, &exec_id, Duration::from_secs(5)).await?;

    let limit = request.output_limit_bytes;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let (mut out_n, mut err_n) = (0u64, 0u64);
    // The first bytes of both streams whatever happens, for the daemon's
    // message should the process turn out never to have started.
    let mut head: Vec<u8> = Vec::new();
    let mut overflow: Option<OutputStream> = None;
    let mut timed_out = false;
    let mut group_killed = false;
    let mut tree_killed = false;
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
        if timed_out && !tree_killed {
            // Past its timeout the instance's whole process tree dies, also
            // what left the exec's group with `setsid`.
            tree_killed = true;
            kill_instance_tree(docker, container_id).await;
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
        // The container's init PID was read when the exec started.
        if container_pid > 0 {
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

pub(super) fn keep_head(head: &mut Vec<u8>, chunk: &[u8]) {
    let room = START_MESSAGE_MAX.saturating_sub(head.len());
    head.extend_from_slice(&chunk[..chunk.len().min(room)]);
}

/// After `locate_exec` saw no PID: waits (at most `bound`) until the daemon
/// either reports a PID (started: `None`) or records an exit without one
/// (never started: `Some(exit code)`). Running out of time counts as
/// started, the conservative answer.
pub(super) async fn never_started_code(
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
