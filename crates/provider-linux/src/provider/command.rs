//! Building a command that enters an instance ([`crate::spawn::enter`]),
//! and mapping what `spawn` reports onto launch failures.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;

use checkfu_sandbox_contract::*;

use super::errors::provider_error;
use super::inner::Inner;
use crate::cgroup::InstanceCgroups;
use crate::exec::ProgramPlan;
use crate::spawn::{EnterPlan, ENTER_FAILURE_BASE};
use crate::store::InstanceRecord;

/// A command about to be spawned, or why it could not be prepared.
pub(super) struct Prepared {
    pub(super) command: tokio::process::Command,
}

/// How a spawn failed.
pub(super) enum SpawnFailure {
    /// The program could not be executed: a launch failure the command's
    /// result reports (exit code 126 or 127, the reason on stderr).
    Launch {
        /// 126 or 127.
        code: u8,
        /// The message for stderr.
        message: String,
    },
    /// The provider could not enter the instance.
    Provider(SandboxError),
}

fn open_ns(pid: i32, ns: &str) -> std::io::Result<OwnedFd> {
    let path = format!("/proc/{pid}/ns/{ns}");
    // The kernel's namespace files of the provider's own init.
    #[allow(clippy::disallowed_methods)]
    let f = std::fs::File::open(path)?;
    Ok(f.into())
}

fn chdir_message(dir: &str, what: &str) -> Vec<u8> {
    format!("chdir to {dir:?}: {what}\n").into_bytes()
}

impl Inner {
    /// A `Command` for `executable` with `arguments` in the instance of
    /// `rec`, with the image's environment, `HOME`, `HOSTNAME` (the
    /// instance's host name) and `environment` over them, in
    /// `working_directory`. stdio is left to the caller.
    pub(super) fn command(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        executable: &str,
        arguments: &[String],
        environment: &BTreeMap<String, String>,
        working_directory: &str,
    ) -> Result<Prepared, SandboxError> {
        let init = rec.init.ok_or_else(|| {
            provider_error(
                operation,
                format!("{} has no running init", rec.instance_id),
            )
        })?;
        if super::instances::start_ticks(init.pid) != Some(init.start_ticks) {
            return Err(provider_error(
                operation,
                format!(
                    "the init of {} (pid {}) is gone: the instance is no longer running",
                    rec.instance_id, init.pid
                ),
            ));
        }
        let io = |what: &str, e: std::io::Error| provider_error(operation, format!("{what}: {e}"));
        let namespaces = ["ipc", "uts", "net", "pid", "mnt"]
            .iter()
            .map(|ns| open_ns(init.pid, ns))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io("opening the instance's namespaces", e))?;
        // The init's root, as the kernel resolves it for that process.
        #[allow(clippy::disallowed_methods)]
        let root: OwnedFd = std::fs::File::open(format!("/proc/{}/root", init.pid))
            .map_err(|e| io("opening the instance's root", e))?
            .into();
        let cgroups = match self.cgroup_version {
            Some(v) => InstanceCgroups::new(v, &self.scope, &rec.instance_id)
                .open_join_files()
                .map_err(|e| io("opening the instance's cgroups", e))?,
            None => Vec::new(),
        };
        let working = CString::new(working_directory).map_err(|_| {
            SandboxError::invalid_request(
                operation,
                "working_directory",
                "no NUL byte",
                working_directory,
            )
        })?;
        let uid = self.workload_user.uid();
        // The command's environment, as `Command::env_clear` and `env`
        // would build it: later settings win, keys in byte order.
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for kv in &rec.image_env {
            if let Some((k, v)) = kv.split_once('=') {
                env.insert(k.to_owned(), v.to_owned());
            }
        }
        env.insert(
            "HOME".into(),
            if uid == 0 { "/root" } else { "/home/checkfu" }.into(),
        );
        // The instance's UTS name, as `docker exec` gives a container's.
        env.insert(
            "HOSTNAME".into(),
            super::instances::INSTANCE_HOSTNAME.into(),
        );
        env.extend(environment.iter().map(|(k, v)| (k.clone(), v.clone())));
        // The program is exec'd by `enter` itself, with the command's own
        // `execve` and `PATH` lookup (`crate::exec`: no `/bin/sh` fallback
        // on ENOEXEC). `Command` keeps the same program, arguments and
        // environment; a NUL byte is refused here, before anything forks.
        let program = ProgramPlan::new(executable, arguments, &env).ok_or_else(|| {
            SandboxError::invalid_request(operation, "command", "no NUL byte", executable)
        })?;
        let plan = EnterPlan {
            namespaces,
            root,
            cgroups,
            working_directory: working,
            chdir_messages: [
                chdir_message(working_directory, "no such file or directory"),
                chdir_message(working_directory, "not a directory"),
                chdir_message(working_directory, "permission denied"),
                chdir_message(working_directory, "cannot change into it"),
            ],
            uid,
            seccomp: self.seccomp.clone(),
            exec: Some(program),
        };
        let mut command = tokio::process::Command::new(executable);
        command.args(arguments).env_clear().envs(&env);
        command.kill_on_drop(true);
        // SAFETY: `enter` only makes system calls on its plan, which the
        // closure owns and which was fully built before the fork; the
        // program is exec'd by `crate::exec::exec_program` inside it.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || crate::spawn::enter(&plan));
        }
        Ok(Prepared { command })
    }
}

/// Maps a failed `spawn` onto a launch failure (the program could not be
/// executed) or a provider failure (the instance could not be entered).
pub(super) fn spawn_failure(
    operation: Operation,
    executable: &str,
    e: &std::io::Error,
) -> SpawnFailure {
    let Some(raw) = e.raw_os_error() else {
        return SpawnFailure::Provider(provider_error(operation, format!("spawn: {e}")));
    };
    if raw >= ENTER_FAILURE_BASE {
        let step = (raw - ENTER_FAILURE_BASE) / 1000;
        let errno = (raw - ENTER_FAILURE_BASE) % 1000;
        return SpawnFailure::Provider(provider_error(
            operation,
            format!(
                "entering the instance failed at {}: {}",
                crate::spawn::enter_step_name(step),
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
        _ => {
            return SpawnFailure::Provider(provider_error(
                operation,
                format!("exec {executable:?}: {e}"),
            ))
        }
    };
    SpawnFailure::Launch {
        code,
        message: format!("exec {executable:?}: {what}\n"),
    }
}
