//! execute: a bounded command in the instance's container, mapped onto
//! the contract's command result: entered from the host where the
//! instance's route is the host path ([`super::host_exec`]), else a
//! bounded exec through the daemon.

use std::time::Duration;

use checkfu_sandbox_contract::bounds::{self, exec_argument_space};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostexec::bounded::{self, Bounds};
use checkfu_sandbox_hostexec::command::Program;
use checkfu_sandbox_hostfs::argument_space::{not_started, over_argument_space};
use checkfu_sandbox_hostfs::host::load_active;

use super::{
    errors::{daemon_error, provider_error},
    inner::Inner,
};
use crate::daemon;

impl Inner {
    pub(super) async fn execute(
        &self,
        request: ExecuteRequest,
    ) -> Result<SandboxCommandResult, SandboxError> {
        const OP: Operation = op::EXECUTE;
        let inner = self;
        let rec = load_active(inner, OP, &request.instance_id)?;
        let c = request.command;
        let started_at = inner.clock.now();
        if let Some(reason) = over_argument_space(&c.executable, &c.arguments, &c.environment) {
            // The kernel would refuse the execve (E2BIG): reported as could
            // not be executed, without starting anything.
            let message = format!("{reason}\n");
            return Ok(not_started(126, message, started_at, inner.clock.now()));
        }
        if let Some(command) = self.host_command(OP, &rec, Program::of_command(&c))? {
            let bounds = Bounds {
                stdin: c.stdin_base64.map(|b| b.0),
                output_limit_bytes: c.output_limit_bytes,
                timeout: Duration::from_secs(u64::from(c.timeout_seconds)),
            };
            return bounded::run(
                OP,
                command,
                &c.executable,
                bounds,
                &*inner.clock,
                started_at,
            )
            .await;
        }
        let space = exec_argument_space(
            std::iter::once(c.executable.as_str()).chain(c.arguments.iter().map(String::as_str)),
            c.environment.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let mut argv = Vec::with_capacity(c.arguments.len() + 1);
        argv.push(c.executable);
        argv.extend(c.arguments);
        let exec = daemon::ExecRequest {
            argv,
            env: c
                .environment
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            working_dir: Some(c.working_directory),
            user: None,
            stdin: c.stdin_base64.map(|b| b.0),
            output_limit_bytes: c.output_limit_bytes,
            timeout: Duration::from_secs(u64::from(c.timeout_seconds)),
            reap_group_on_exit: true,
        };
        let report = daemon::exec_bounded(&inner.docker, &Inner::container_of(&rec), &exec)
            .await
            .map_err(|e| daemon_error(OP, &e))?;
        let finished_at = inner.clock.now().max(started_at);
        let (exit, stdout, stderr) = match report.outcome {
            daemon::ExecOutcome::Exited {
                code,
                stdout,
                stderr,
            } => {
                let code = u8::try_from(code)
                    .map_err(|_| provider_error(OP, format!("exit code {code} out of range")))?;
                if code == 1 && stdout.is_empty() && runtime_e2big(&stderr, space) {
                    // runc's own report of a refused execve (the argument
                    // space of the image's environment added): 126.
                    (ExitCause::ExitCode(126), stdout, stderr)
                } else if let Some(failure) = daemon::RuntimeExecFailure::recognise(
                    &exec.argv[0],
                    code.into(),
                    &stdout,
                    &stderr,
                ) {
                    // runc's report of an execve that failed in the
                    // started process (decision 017): 127 for a missing
                    // interpreter (named), 126 otherwise.
                    let stderr = self
                        .runtime_exec_message(&rec, &exec.working_dir, &failure)
                        .await;
                    (ExitCause::ExitCode(failure.code), stdout, stderr)
                } else {
                    (ExitCause::ExitCode(code), stdout, stderr)
                }
            }
            daemon::ExecOutcome::TimedOut { stdout, stderr } => {
                (ExitCause::TimedOut, stdout, stderr)
            }
            // Decided from daemon state (no PID ever), so the daemon's
            // message is trusted: it is not workload output, and goes to
            // stderr. A started workload's 126/127 is `Exited` above.
            daemon::ExecOutcome::StartFailed(failure) => (
                ExitCause::ExitCode(failure.code),
                Vec::new(),
                format!("{}\n", failure.message).into_bytes(),
            ),
            daemon::ExecOutcome::OutputLimit {
                stream,
                limit_bytes,
            } => {
                return Err(SandboxError::SandboxOutputLimitExceeded {
                    stream: match stream {
                        daemon::OutputStream::Stdout => OutputStream::Stdout,
                        daemon::OutputStream::Stderr => OutputStream::Stderr,
                    },
                    limit_bytes,
                })
            }
            daemon::ExecOutcome::ExitUnknown { .. } => {
                return Err(provider_error(
                    OP,
                    format!(
                        "the daemon reported no exit code for exec {}",
                        report.exec_id
                    ),
                ))
            }
        };
        Ok(SandboxCommandResult {
            exit,
            stdout_base64: Bytes(stdout),
            stderr_base64: Bytes(stderr),
            started_at,
            finished_at,
        })
    }
}

impl Inner {
    /// The stderr of a recognised [`daemon::RuntimeExecFailure`]: runc's
    /// line, and for a missing interpreter the interpreter the script
    /// names (`exec PATH: interpreter INTERP: not found`).
    async fn runtime_exec_message(
        &self,
        rec: &crate::store::InstanceRecord,
        working_dir: &Option<String>,
        failure: &daemon::RuntimeExecFailure,
    ) -> Vec<u8> {
        let path = &failure.path;
        if failure.code != 127 {
            return format!("exec {path}: {}\n", failure.reason).into_bytes();
        }
        let absolute = if path.starts_with('/') {
            path.clone()
        } else {
            let dir = working_dir.as_deref().unwrap_or("/");
            format!("{}/{path}", dir.trim_end_matches('/'))
        };
        match daemon::script_interpreter(&self.docker, &Inner::container_of(rec), &absolute).await {
            Some(interp) => format!("exec {path}: interpreter {interp}: not found\n"),
            None => format!("exec {path}: its interpreter was not found\n"),
        }
        .into_bytes()
    }
}

/// Least argument space (bytes) at which a refused execve is believed
/// from the runtime's message: far above any ordinary command, so a
/// workload printing the same line with a short argv is never reclassified.
const E2BIG_PLAUSIBLE_BYTES: u64 = bounds::EXEC_ARGUMENT_SPACE_BYTES / 2;

/// Whether `stderr` is exactly runc's one-line report of an execve that
/// failed with E2BIG (`exec PATH: argument list too long`), for a command
/// whose argument space makes that plausible.
fn runtime_e2big(stderr: &[u8], space: u64) -> bool {
    if space < E2BIG_PLAUSIBLE_BYTES {
        return false;
    }
    let Ok(text) = std::str::from_utf8(stderr) else {
        return false;
    };
    let line = text.strip_suffix('\n').unwrap_or(text);
    !line.contains('\n') && line.starts_with("exec ") && line.ends_with(": argument list too long")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_execve_is_recognised_only_with_a_plausible_argument_space() {
        let line = b"exec /bin/true: argument list too long\n";
        assert!(runtime_e2big(line, bounds::EXEC_ARGUMENT_SPACE_BYTES));
        assert!(!runtime_e2big(line, 1_000));
        assert!(!runtime_e2big(
            b"x\nexec /bin/true: argument list too long\n",
            bounds::EXEC_ARGUMENT_SPACE_BYTES
        ));
    }
}
