//! Building a command that enters a running workload (the private module `enter`),
//! and mapping what `spawn` reports onto launch failures.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;

use checkfu_sandbox_contract::{Operation, SandboxCommand, SandboxError, SandboxProcessRequest};
use checkfu_sandbox_hostfs::errors::provider_error;

use crate::enter::{Confinement, EnterPlan, ENTER_FAILURE_BASE};
use crate::program::ProgramPlan;
use crate::running::Running;
use crate::seccomp::SeccompFilter;

/// The user a command runs as: uid, gid and supplementary groups (set
/// with `setgroups`, `setresgid`, `setresuid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Real, effective, saved and file-system uid.
    pub uid: u32,
    /// Real, effective, saved and file-system gid.
    pub gid: u32,
    /// Supplementary groups (empty: none).
    pub groups: Vec<u32>,
}

/// Where a command enters and what confines it, opened for one command.
/// Every descriptor is `O_CLOEXEC`.
#[derive(Debug)]
pub struct Target {
    /// Namespace files of the workload's pid 1 (`/proc/<pid>/ns/<name>`),
    /// entered in this order; put `mnt` last.
    pub namespaces: Vec<OwnedFd>,
    /// `/proc/<pid 1>/root`, where the command is `chroot`ed.
    pub root: OwnedFd,
    /// `cgroup.procs` (or v1 `tasks`) files, open for writing, joined
    /// by the command's supervisor before any namespace is entered; never
    /// the groups that hold the memory and pids limits.
    pub cgroups: Vec<OwnedFd>,
    /// The join files of the groups that hold the memory and pids limits
    /// (v1 `memory` and `pids`, v2 the one group; at most two), which the
    /// command joins itself just before its `execve`, while the OOM killer
    /// still passes it over. No supervisor is ever in them: the OOM killer
    /// weighs only the workload's own memory there, and the pids limit
    /// counts only the workload's processes (decision 049).
    pub command_cgroups: Vec<OwnedFd>,
    /// The user the command runs as.
    pub credentials: Credentials,
    /// Seccomp filters, oldest first, installed after `no_new_privs`.
    pub filters: Vec<SeccompFilter>,
}

/// What a command runs: the program, its arguments, the environment the
/// request adds and the working directory inside the workload.
#[derive(Debug, Clone, Copy)]
pub struct Program<'a> {
    /// The executable, a bare name (looked up along `PATH`) or a path.
    pub executable: &'a str,
    /// The arguments after argv\[0\].
    pub arguments: &'a [String],
    /// The request's environment (over the workload's).
    pub environment: &'a BTreeMap<String, String>,
    /// The working directory, absolute.
    pub working_directory: &'a str,
}

impl<'a> Program<'a> {
    /// The program of an execute request.
    pub fn of_command(c: &'a SandboxCommand) -> Program<'a> {
        Program {
            executable: &c.executable,
            arguments: &c.arguments,
            environment: &c.environment,
            working_directory: &c.working_directory,
        }
    }

    /// The program of an openProcess request.
    pub fn of_process(r: &'a SandboxProcessRequest) -> Program<'a> {
        Program {
            executable: &r.executable,
            arguments: &r.arguments,
            environment: &r.environment,
            working_directory: &r.working_directory,
        }
    }
}

/// Opens `/proc/<pid>/ns/<ns>` (the kernel's namespace file of `pid`).
///
/// # Errors
///
/// The open's error (`ENOENT` when `pid` is gone).
pub fn open_namespace(pid: i32, ns: &str) -> std::io::Result<OwnedFd> {
    // The kernel's namespace file, not a workload-controlled path.
    #[allow(clippy::disallowed_methods)]
    let f = std::fs::File::open(format!("/proc/{pid}/ns/{ns}"))?;
    Ok(f.into())
}

/// Opens `/proc/<pid>/root`: the root directory of `pid` as the kernel
/// resolves it for that process.
///
/// # Errors
///
/// The open's error.
pub fn open_root(pid: i32) -> std::io::Result<OwnedFd> {
    // The kernel's link to the process's root, not a workload path.
    #[allow(clippy::disallowed_methods)]
    let f = std::fs::File::open(format!("/proc/{pid}/root"))?;
    Ok(f.into())
}

/// The start time of `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), or `None` when it is gone or a zombie: with the
/// pid, what names one process for its whole life.
pub fn start_ticks(pid: i32) -> Option<u64> {
    // The kernel's view of a process, not a workload-controlled path.
    #[allow(clippy::disallowed_methods)]
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow
    // the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// A `Command` for `program`'s executable and arguments with exactly
/// `environment` (the workload's with the request's over it), run in its
/// working directory inside `target`: the command
/// joins its cgroups, enters its namespaces and root, runs in a PID
/// namespace of its own nested in the workload's, as its credentials with
/// no capability, `no_new_privs` and its seccomp filters, and is exec'd
/// with its own `execve` and `PATH` lookup (the private module `program`). stdio is
/// left to the caller; the command is killed when dropped.
///
/// # Errors
///
/// `invalid_request` when the working directory, the executable, an
/// argument or the environment holds a NUL byte (before anything forks).
pub fn prepare(
    operation: Operation,
    target: Target,
    program: Program<'_>,
    environment: &BTreeMap<String, String>,
) -> Result<tokio::process::Command, SandboxError> {
    let Program {
        executable,
        arguments,
        working_directory,
        ..
    } = program;
    let working = CString::new(working_directory).map_err(|_| {
        SandboxError::invalid_request(
            operation,
            "working_directory",
            "no NUL byte",
            working_directory,
        )
    })?;
    let program = ProgramPlan::new(executable, arguments, environment).ok_or_else(|| {
        SandboxError::invalid_request(operation, "command", "no NUL byte", executable)
    })?;
    let Target {
        namespaces,
        root,
        cgroups,
        command_cgroups,
        credentials,
        filters,
    } = target;
    if command_cgroups.len() > 2 {
        return Err(provider_error(
            operation,
            format!(
                "{} cgroups for the command to join itself: at most two (memory and pids)",
                command_cgroups.len()
            ),
        ));
    }
    let plan = EnterPlan {
        namespaces,
        root,
        cgroups,
        command_cgroups,
        confine: Confinement::new(working, working_directory, credentials, filters, false),
        exec: Some(program),
    };
    // `Command` keeps the same program, arguments and environment (for
    // its own bookkeeping); the program is exec'd by the plan.
    let mut command = tokio::process::Command::new(executable);
    command
        .args(arguments)
        .env_clear()
        .envs(environment)
        .kill_on_drop(true);
    // SAFETY: `enter` only makes system calls on its plan, which the
    // closure owns and which was fully built before the fork; the
    // program is exec'd by `crate::program::exec_program` inside it.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || crate::enter::enter(&plan));
    }
    Ok(command)
}

/// A command ready to start, either way: a `Command` whose `pre_exec`
/// enters the workload from the host ([`prepare`]), or a request to the
/// workload's own pid 1 ([`prepare_in_init`]).
#[derive(Debug)]
pub enum Prepared {
    /// Forks the provider (C'), which enters the workload.
    Entered(tokio::process::Command),
    /// Started by the workload's init ([`crate::zygote`]).
    InInit(crate::zygote::Request),
}

impl From<tokio::process::Command> for Prepared {
    fn from(command: tokio::process::Command) -> Prepared {
        Prepared::Entered(command)
    }
}

impl Prepared {
    /// Starts the command with stdout and stderr piped and stdin piped
    /// (`stdin_piped`) or the null device; returns once its program runs.
    ///
    /// # Errors
    ///
    /// As `Command::spawn` reports a failed `pre_exec`: see
    /// [`spawn_failure`] for the mapping.
    pub async fn spawn(self, stdin_piped: bool) -> std::io::Result<Running> {
        use std::process::Stdio;
        match self {
            Prepared::Entered(mut command) => {
                command
                    .stdin(if stdin_piped {
                        Stdio::piped()
                    } else {
                        Stdio::null()
                    })
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                // The fork and the entry run on the blocking pool: C' can
                // be held up (it joins the workload's freezer group, which
                // freezes it while the workload is paused), and a caller's
                // deadline must still hold. A child started after its
                // caller gave up is killed when dropped (`kill_on_drop`).
                let child = tokio::task::spawn_blocking(move || command.spawn())
                    .await
                    .map_err(std::io::Error::other)??;
                Ok(Running::forked(child))
            }
            Prepared::InInit(request) => request.channel.start(request.launch, stdin_piped).await,
        }
    }
}

/// What a command started by a workload's own pid 1 runs: the
/// [`Program`] with exactly `environment`, as `credentials` under
/// `filters`. The init already stands in the workload's namespaces, root
/// and cgroups, but for the memory and pids groups, which the command
/// joins itself (decision 049).
///
/// # Errors
///
/// `invalid_request` as [`prepare`]; the provider's error when the
/// stacks cannot be mapped.
pub fn prepare_in_init(
    operation: Operation,
    channel: std::sync::Arc<crate::zygote::Channel>,
    credentials: Credentials,
    filters: Vec<SeccompFilter>,
    program: Program<'_>,
    environment: &BTreeMap<String, String>,
) -> Result<Prepared, SandboxError> {
    let working = CString::new(program.working_directory).map_err(|_| {
        SandboxError::invalid_request(
            operation,
            "working_directory",
            "no NUL byte",
            program.working_directory,
        )
    })?;
    let exec =
        ProgramPlan::new(program.executable, program.arguments, environment).ok_or_else(|| {
            SandboxError::invalid_request(operation, "command", "no NUL byte", program.executable)
        })?;
    crate::zygote::Request::new(
        channel,
        working,
        program.working_directory,
        credentials,
        filters,
        exec,
    )
    .map(Prepared::InInit)
    .map_err(|e| provider_error(operation, format!("mapping the command's stacks: {e}")))
}

/// How a spawn failed.
#[derive(Debug)]
pub enum SpawnFailure {
    /// The program could not be executed: a launch failure the command's
    /// result reports (exit code 126 or 127, the reason on stderr).
    Launch {
        /// 126 or 127.
        code: u8,
        /// The message for stderr.
        message: String,
    },
    /// The provider could not enter the workload.
    Provider(SandboxError),
}

/// Maps a failed `spawn` onto a launch failure (the program could not be
/// executed) or a provider failure (the workload could not be entered).
pub fn spawn_failure(operation: Operation, executable: &str, e: &std::io::Error) -> SpawnFailure {
    let Some(raw) = e.raw_os_error() else {
        return SpawnFailure::Provider(provider_error(operation, format!("spawn: {e}")));
    };
    if raw >= ENTER_FAILURE_BASE {
        let step = (raw - ENTER_FAILURE_BASE) / 1000;
        let errno = (raw - ENTER_FAILURE_BASE) % 1000;
        // The supervisors stand outside the workload's pids limit
        // (decision 049): a refused fork is the host's.
        return SpawnFailure::Provider(provider_error(
            operation,
            format!(
                "starting the command in the instance failed at {}: {}",
                crate::enter::enter_step_name(step),
                std::io::Error::from_raw_os_error(errno)
            ),
        ));
    }
    let (code, what) = match raw {
        libc::ENOENT => (127, "no such file or directory"),
        libc::EACCES => (126, "permission denied"),
        libc::EISDIR => (126, "is a directory"),
        libc::ENOTDIR => (126, "not a directory"),
        libc::E2BIG => (126, "argument list too long"),
        libc::ENOEXEC => (126, "exec format error"),
        libc::ELOOP => (126, "too many levels of symbolic links"),
        libc::ETXTBSY => (126, "text file busy"),
        // The program's `execve` charged to a memory limit too small for
        // it (decision 049).
        libc::ENOMEM => (126, "cannot allocate memory"),
        _ => {
            return SpawnFailure::Provider(provider_error(
                operation,
                format!("exec {executable:?}: {e}"),
            ))
        }
    };
    let message = if raw == libc::ENOENT && !executable.contains('/') {
        // A bare name found nowhere along `PATH`: runc's words, as
        // `docker exec` reports it.
        format!("exec: {executable:?}: executable file not found in $PATH\n")
    } else {
        format!("exec {executable:?}: {what}\n")
    };
    SpawnFailure::Launch { code, message }
}

/// A process spawned for openProcess, or the launch failure that kept
/// its program from running.
#[derive(Debug)]
pub enum Opened {
    /// The program runs.
    Running(Running),
    /// The program could not be executed.
    Launch {
        /// 126 or 127.
        code: u8,
        /// The reason, for the error stream.
        message: String,
    },
}

/// Spawns `command` with piped stdin, stdout and stderr for openProcess.
///
/// # Errors
///
/// The provider's error when the workload could not be entered.
pub async fn spawn_opened(
    operation: Operation,
    command: Prepared,
    executable: &str,
) -> Result<Opened, SandboxError> {
    match command.spawn(true).await {
        Ok(running) => Ok(Opened::Running(running)),
        Err(e) => match spawn_failure(operation, executable, &e) {
            SpawnFailure::Provider(e) => Err(e),
            SpawnFailure::Launch { code, message } => Ok(Opened::Launch { code, message }),
        },
    }
}

/// As [`spawn_opened`], with a launch failure as the provider's error
/// naming it.
///
/// # Errors
///
/// As [`spawn_failure`], both kinds as `provider_error`.
pub async fn spawn_piped(
    operation: Operation,
    command: Prepared,
    executable: &str,
) -> Result<Running, SandboxError> {
    match spawn_opened(operation, command, executable).await? {
        Opened::Running(running) => Ok(running),
        Opened::Launch { message, .. } => {
            Err(provider_error(operation, message.trim_end().to_owned()))
        }
    }
}

/// How long a command's supervisor may take to end its chain after
/// [`kill_chain`] asks, before it is killed itself.
pub const KILL_CHAIN_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// Kills a command started through [`prepare`] and everything it started:
/// asks its supervisor to kill the chain beneath it with `SIGKILL` and to
/// end as its child did, then waits for it; `SIGKILL`s the supervisor
/// itself when it has not ended within [`KILL_CHAIN_BOUND`]. Every
/// supervisor is then collected by its own parent, so the workload's PID
/// namespace never waits on the host's orphan reaper.
pub async fn kill_chain(child: &mut tokio::process::Child) {
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::POWER);
        if tokio::time::timeout(KILL_CHAIN_BOUND, child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.kill().await;
}

#[cfg(test)]
mod kill_chain_tests {
    #[test]
    fn kill_chain_sends_the_signal_the_supervisors_act_on() {
        assert_eq!(
            rustix::process::Signal::POWER.as_raw(),
            crate::enter::KILL_CHAIN
        );
    }
}
