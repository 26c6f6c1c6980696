//! openProcess over a command in a workload ([`crate::command::prepare`]).
//!
//! The provider keeps at most one live process per instance: the
//! reservation is taken before the exec starts and released when the
//! process settles its exit or is destroyed. No idle timeout and no output
//! ceiling are imposed; stdout is lossless with backpressure, stderr is
//! bounded and best effort (diagnostic).

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    ControlSignal, FailureReason, ProcessControl, ProcessExit, SandboxError, SandboxProcess,
    SandboxProcessEvidence, SignalName,
};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Bound on a process teardown (kill, then wait for the exit).
const DESTROY_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

use checkfu_sandbox_hostfs::process::Reservation;

use crate::running::{Running, Signaller};

/// The settled exit of a process, shared by every waiter.
type ExitCell = tokio::sync::watch::Receiver<Option<std::process::ExitStatus>>;

struct Control {
    reservation: Reservation,
    /// The command's outermost supervisor (C' or G'); killing its chain
    /// kills the command's namespace.
    target: Signaller,
    exit: ExitCell,
}

fn exit_of(status: std::process::ExitStatus) -> Result<ProcessExit, SandboxError> {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).map(ProcessExit::ExitCode).map_err(|_| {
            SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                format!("exit code {code} out of range"),
            )
        }),
        (None, Some(sig)) => Ok(ProcessExit::Signal(SignalName::from_number(sig))),
        _ => Err(SandboxError::failed(
            op::OPEN_PROCESS,
            FailureReason::ProviderError,
            format!("the process ended without an exit: {status}"),
        )),
    }
}

impl Control {
    async fn settled(&self) -> std::process::ExitStatus {
        let mut rx = self.exit.clone();
        loop {
            if let Some(status) = *rx.borrow_and_update() {
                return status;
            }
            if rx.changed().await.is_err() {
                // The watcher ended without a status: report a kill.
                use std::os::unix::process::ExitStatusExt as _;
                return std::process::ExitStatus::from_raw(libc::SIGKILL);
            }
        }
    }

    fn exited(&self) -> bool {
        self.exit.borrow().is_some()
    }
}

#[async_trait]
impl ProcessControl for Control {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        let status = self.settled().await;
        // Released here as well as by the watcher task in `wrap`, so an
        // open that follows a settled wait is never refused as
        // `process_already_open` because that task has not run yet.
        self.reservation.release();
        exit_of(status)
    }

    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        if self.exited() {
            return Ok(());
        }
        let sent = match signal {
            ControlSignal::Sigint => self.target.send(rustix::process::Signal::INT),
            ControlSignal::Sigterm => self.target.send(rustix::process::Signal::TERM),
            // The chain ends with SIGKILL and reports it
            // (`Signaller::kill_chain`).
            ControlSignal::Sigkill => self.target.kill_chain(),
        };
        sent.map_err(|e| {
            SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                format!("signal: {e}"),
            )
        })
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        if !self.exited() {
            // The chain first (every supervisor collected by its parent),
            // the supervisor itself if that does not end it.
            let _ = self.target.kill_chain();
            let bound = crate::command::KILL_CHAIN_BOUND;
            if tokio::time::timeout(bound, self.settled()).await.is_err() {
                let _ = self.target.send(rustix::process::Signal::KILL);
            }
        }
        let settled = tokio::time::timeout(DESTROY_BOUND, self.settled()).await;
        self.reservation.release();
        match settled {
            Ok(_) => Ok(()),
            Err(_) => Err(SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::TimedOut,
                format!(
                    "the process did not exit within {} s of SIGKILL",
                    DESTROY_BOUND.as_secs()
                ),
            )),
        }
    }
}

/// The command's stdin as the contract's input: closing it closes the
/// pipe, which the command observes as end of file (tokio's own shutdown
/// of a pipe writer only flushes).
struct Input {
    pipe: Option<tokio_util::compat::Compat<crate::running::Input>>,
}

impl futures_util::io::AsyncWrite for Input {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.pipe.as_mut() {
            Some(p) => std::pin::Pin::new(p).poll_write(cx, buf),
            None => std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.pipe.as_mut() {
            Some(p) => std::pin::Pin::new(p).poll_flush(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(p) = self.pipe.as_mut() {
            if let std::task::Poll::Ready(Err(e)) = std::pin::Pin::new(p).poll_flush(cx) {
                self.pipe = None;
                return std::task::Poll::Ready(Err(e));
            }
        }
        // Dropping the writer closes the pipe: the half-close.
        self.pipe = None;
        std::task::Poll::Ready(Ok(()))
    }
}

/// Turns a spawned command into the contract's live process and arranges
/// for the reservation to be released when it exits.
///
/// # Errors
///
/// The provider's error when one of the child's pipes is missing (it
/// was not spawned with [`crate::command::spawn_piped`]).
pub fn wrap(
    reservation: Reservation,
    mut child: Running,
    evidence: SandboxProcessEvidence,
) -> Result<SandboxProcess, SandboxError> {
    let missing = || {
        SandboxError::failed(
            op::OPEN_PROCESS,
            FailureReason::ProviderError,
            "the process's pipes are missing",
        )
    };
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    let target = child.signaller();
    let (tx, rx) = tokio::sync::watch::channel(None);
    {
        let reservation = reservation.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            use std::os::unix::process::ExitStatusExt as _;
            let _ =
                tx.send(Some(status.unwrap_or_else(|_| {
                    std::process::ExitStatus::from_raw(libc::SIGKILL)
                })));
            reservation.release();
        });
    }
    Ok(SandboxProcess {
        input: Box::pin(Input {
            pipe: Some(stdin.compat_write()),
        }),
        output: Box::pin(stdout.compat()),
        error: Box::pin(stderr.compat()),
        control: Arc::new(Control {
            reservation,
            target,
            exit: rx,
        }),
        evidence,
    })
}

/// A process whose program never ran: `wait` settles at once with `code`
/// (126 or 127), the output is empty, the error stream carries `message`,
/// input is discarded; the reservation is released.
pub fn launch_failed(
    reservation: Reservation,
    code: u8,
    message: String,
    evidence: SandboxProcessEvidence,
) -> SandboxProcess {
    use std::os::unix::process::ExitStatusExt as _;
    reservation.release();
    let (_tx, rx) = tokio::sync::watch::channel(Some(std::process::ExitStatus::from_raw(
        i32::from(code) << 8,
    )));
    SandboxProcess {
        input: Box::pin(futures_util::io::sink()),
        output: Box::pin(futures_util::io::empty()),
        error: Box::pin(futures_util::io::Cursor::new(message.into_bytes())),
        control: Arc::new(Control {
            reservation,
            target: Signaller::None,
            exit: rx,
        }),
        evidence,
    }
}
