//! execute's run of a prepared command: its output counted as it is read,
//! its whole PID namespace killed (by killing its outermost supervisor)
//! on timeout or overflow.

use std::time::Duration;

use checkfu_sandbox_contract::{
    Bytes, Clock, ExitCause, Operation, OutputStream, SandboxCommandResult, SandboxError, Timestamp,
};
use checkfu_sandbox_hostfs::argument_space::not_started;
use checkfu_sandbox_hostfs::errors::provider_error;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use crate::command::{spawn_failure, Prepared, SpawnFailure};

/// Reads `r` into `out` until end of file (`Ok(true)`) or until it would
/// pass `limit` (`Ok(false)`, the excess not kept). What was read stays in
/// `out` when the future is dropped (a timeout keeps it).
async fn drain_bounded<R: AsyncRead + Unpin>(
    mut r: R,
    limit: u64,
    out: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(true);
        }
        if out.len() as u64 + n as u64 > limit {
            return Ok(false);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// The exit code a finished command reports: its status, or 128 + the
/// signal that ended it (what a shell and `docker exec` report).
fn exit_code(status: std::process::ExitStatus) -> Option<u8> {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).ok(),
        (None, Some(s)) => u8::try_from(128 + s).ok(),
        _ => None,
    }
}

/// What one bounded command is given besides its `Command`.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Bytes written to stdin, then end of file; `None`: stdin is
    /// `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Per-stream bound in bytes; one byte more ends the command with
    /// `SandboxOutputLimitExceeded`.
    pub output_limit_bytes: u64,
    /// Wall-clock bound from the request (the start included); past it
    /// the command is killed and the result is `TimedOut` with the output
    /// read until then.
    pub timeout: Duration,
}

/// Runs a command from [`crate::command::prepare`] to completion within
/// `bounds`: stdout and stderr piped and counted, the first stream past
/// the limit or the timeout killing the command's outermost supervisor
/// (and with it the command's whole PID namespace: nothing it started
/// survives, `setsid` included). A launch failure (the program could not
/// be executed) is a result with exit code 126 or 127 and the reason on
/// stderr. `started_at` is the result's start; `finished_at` is read from
/// `clock`, never before it.
///
/// # Errors
///
/// `SandboxOutputLimitExceeded` naming the stream and the bound; the
/// provider's error when the workload could not be entered or its output
/// could not be read.
///
/// # Cancel safety
///
/// Dropping the future kills the command (`kill_on_drop`, or G''s
/// kill when the workload's init started it).
pub async fn run(
    operation: Operation,
    command: impl Into<Prepared>,
    executable: &str,
    bounds: Bounds,
    clock: &dyn Clock,
    started_at: Timestamp,
) -> Result<SandboxCommandResult, SandboxError> {
    // The bound counts from the request: a command whose start is held
    // up (a frozen or stopped instance) ends as timed out too. A start
    // given up goes on in its own task (the exchange with the workload's
    // init, or the host path's fork on the blocking pool), which kills
    // the command if it ever starts.
    let deadline = tokio::time::Instant::now() + bounds.timeout;
    let spawned = tokio::time::timeout_at(deadline, command.into().spawn(bounds.stdin.is_some()));
    let Ok(spawned) = spawned.await else {
        return Ok(SandboxCommandResult {
            exit: ExitCause::TimedOut,
            stdout_base64: Bytes(Vec::new()),
            stderr_base64: Bytes(Vec::new()),
            started_at,
            finished_at: clock.now().max(started_at),
        });
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return match spawn_failure(operation, executable, &e) {
                SpawnFailure::Launch { code, message } => {
                    Ok(not_started(code, message, started_at, clock.now()))
                }
                SpawnFailure::Provider(e) => Err(e),
            }
        }
    };
    let stdin_task = match (child.stdin.take(), bounds.stdin) {
        (Some(mut w), Some(bytes)) => Some(tokio::spawn(async move {
            // A command that exits without reading its input is fine.
            let _ = w.write_all(&bytes).await;
            let _ = w.shutdown().await;
        })),
        _ => None,
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        child.start_kill();
        return Err(provider_error(
            operation,
            "the command's output pipes are missing",
        ));
    };
    let limit = bounds.output_limit_bytes;
    let (mut stdout_bytes, mut stderr_bytes) = (Vec::new(), Vec::new());
    let run = async {
        let mut out = Box::pin(drain_bounded(stdout, limit, &mut stdout_bytes));
        let mut err = Box::pin(drain_bounded(stderr, limit, &mut stderr_bytes));
        let (mut out_done, mut err_done) = (false, false);
        // Stop as soon as either stream passes the limit.
        while !out_done || !err_done {
            tokio::select! {
                r = &mut out, if !out_done => {
                    if !r? {
                        return Ok::<_, std::io::Error>(Err(OutputStream::Stdout));
                    }
                    out_done = true;
                }
                r = &mut err, if !err_done => {
                    if !r? {
                        return Ok(Err(OutputStream::Stderr));
                    }
                    err_done = true;
                }
            }
        }
        Ok(Ok(child.wait().await?))
    };
    let outcome = tokio::time::timeout_at(deadline, run).await;
    if let Some(t) = stdin_task {
        t.abort();
    }
    let finished = || clock.now().max(started_at);
    match outcome {
        Ok(Ok(Ok(status))) => {
            let code = exit_code(status).ok_or_else(|| {
                provider_error(
                    operation,
                    format!("the command ended without an exit: {status}"),
                )
            })?;
            Ok(SandboxCommandResult {
                exit: ExitCause::ExitCode(code),
                stdout_base64: Bytes(stdout_bytes),
                stderr_base64: Bytes(stderr_bytes),
                started_at,
                finished_at: finished(),
            })
        }
        Ok(Ok(Err(stream))) => {
            // Killing the supervisor kills the command's namespace.
            child.kill_chain().await;
            Err(SandboxError::SandboxOutputLimitExceeded {
                stream,
                limit_bytes: limit,
            })
        }
        Ok(Err(e)) => {
            child.kill_chain().await;
            Err(provider_error(
                operation,
                format!("reading the command: {e}"),
            ))
        }
        Err(_elapsed) => {
            child.kill_chain().await;
            // What the command wrote before its timeout.
            Ok(SandboxCommandResult {
                exit: ExitCause::TimedOut,
                stdout_base64: Bytes(stdout_bytes),
                stderr_base64: Bytes(stderr_bytes),
                started_at,
                finished_at: finished(),
            })
        }
    }
}
