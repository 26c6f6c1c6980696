//! execute: one bounded command in the instance, its output counted as it
//! is read, its whole PID namespace killed on timeout or overflow.

use std::process::Stdio;
use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::argument_space::{not_started, over_argument_space};
use checkfu_sandbox_hostfs::host::load_active;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use super::{
    command::{spawn_failure, SpawnFailure},
    errors::provider_error,
    inner::Inner,
};

/// How a bounded read of one stream ended.
enum Drained {
    /// End of file: everything the stream carried.
    Eof(Vec<u8>),
    /// The stream passed the limit.
    Over,
}

async fn drain_bounded<R: AsyncRead + Unpin>(mut r: R, limit: u64) -> std::io::Result<Drained> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(Drained::Eof(out));
        }
        if out.len() as u64 + n as u64 > limit {
            return Ok(Drained::Over);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// The exit code a finished command reports: its status, or 128 + the
/// signal that ended it (what a shell and the Docker provider report).
fn exit_code(status: std::process::ExitStatus) -> Option<u8> {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).ok(),
        (None, Some(s)) => u8::try_from(128 + s).ok(),
        _ => None,
    }
}

impl Inner {
    pub(super) async fn execute(
        &self,
        request: ExecuteRequest,
    ) -> Result<SandboxCommandResult, SandboxError> {
        const OP: Operation = op::EXECUTE;
        let rec = load_active(self, OP, &request.instance_id)?;
        let c = request.command;
        let started_at = self.clock.now();
        let launch_failure =
            |code: u8, message: String| not_started(code, message, started_at, self.clock.now());
        if let Some(reason) = over_argument_space(&c.executable, &c.arguments, &c.environment) {
            // The kernel would refuse the execve (E2BIG): reported as could
            // not be executed, without starting anything.
            return Ok(launch_failure(126, format!("{reason}\n")));
        }
        let mut prepared = self.command(
            OP,
            &rec,
            &c.executable,
            &c.arguments,
            &c.environment,
            &c.working_directory,
        )?;
        let cmd = &mut prepared.command;
        cmd.stdin(if c.stdin_base64.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                return match spawn_failure(OP, &c.executable, &e) {
                    SpawnFailure::Launch { code, message } => Ok(launch_failure(code, message)),
                    SpawnFailure::Provider(e) => Err(e),
                }
            }
        };
        let stdin_task = match (child.stdin.take(), c.stdin_base64) {
            (Some(mut w), Some(bytes)) => Some(tokio::spawn(async move {
                // A command that exits without reading its input is fine.
                let _ = w.write_all(&bytes.0).await;
                let _ = w.shutdown().await;
            })),
            _ => None,
        };
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            let _ = child.start_kill();
            return Err(provider_error(OP, "the command's output pipes are missing"));
        };
        let limit = c.output_limit_bytes;
        let timeout = Duration::from_secs(u64::from(c.timeout_seconds));
        let run = async {
            let mut out = Box::pin(drain_bounded(stdout, limit));
            let mut err = Box::pin(drain_bounded(stderr, limit));
            let (mut o, mut e) = (None, None);
            // Stop as soon as either stream passes the limit.
            while o.is_none() || e.is_none() {
                tokio::select! {
                    r = &mut out, if o.is_none() => {
                        let r = r?;
                        if matches!(r, Drained::Over) {
                            return Ok::<_, std::io::Error>(Err(OutputStream::Stdout));
                        }
                        o = Some(r);
                    }
                    r = &mut err, if e.is_none() => {
                        let r = r?;
                        if matches!(r, Drained::Over) {
                            return Ok(Err(OutputStream::Stderr));
                        }
                        e = Some(r);
                    }
                }
            }
            let status = child.wait().await?;
            let bytes = |d: Option<Drained>| match d {
                Some(Drained::Eof(b)) => b,
                _ => Vec::new(),
            };
            Ok(Ok((status, bytes(o), bytes(e))))
        };
        let outcome = tokio::time::timeout(timeout, run).await;
        if let Some(t) = stdin_task {
            t.abort();
        }
        match outcome {
            Ok(Ok(Ok((status, stdout, stderr)))) => {
                let code = exit_code(status).ok_or_else(|| {
                    provider_error(OP, format!("the command ended without an exit: {status}"))
                })?;
                Ok(SandboxCommandResult {
                    exit: ExitCause::ExitCode(code),
                    stdout_base64: Bytes(stdout),
                    stderr_base64: Bytes(stderr),
                    started_at,
                    finished_at: self.clock.now().max(started_at),
                })
            }
            Ok(Ok(Err(stream))) => {
                // Killing the supervisor kills the command's namespace.
                let _ = child.kill().await;
                Err(SandboxError::SandboxOutputLimitExceeded {
                    stream,
                    limit_bytes: limit,
                })
            }
            Ok(Err(e)) => {
                let _ = child.kill().await;
                Err(provider_error(OP, format!("reading the command: {e}")))
            }
            Err(_elapsed) => {
                let _ = child.kill().await;
                Ok(SandboxCommandResult {
                    exit: ExitCause::TimedOut,
                    stdout_base64: Bytes(Vec::new()),
                    stderr_base64: Bytes(Vec::new()),
                    started_at,
                    finished_at: self.clock.now().max(started_at),
                })
            }
        }
    }
}
