//! execute: a bounded exec in the instance's container, mapped onto the
//! contract's command result.

use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    errors::{daemon_error, provider_error},
    inner::Inner,
    labels::container_name,
};
use crate::daemon;

impl Inner {
    pub(super) async fn execute(
        &self,
        request: ExecuteRequest,
    ) -> Result<SandboxCommandResult, SandboxError> {
        const OP: Operation = op::EXECUTE;
        let inner = self;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state));
        }
        let c = request.command;
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
        let started_at = inner.clock.now();
        let report = daemon::exec_bounded(&inner.docker, &container_name(&rec.instance_id), &exec)
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
                (ExitCause::ExitCode(code), stdout, stderr)
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
