//! openProcess over a streaming exec ([`crate::daemon::exec_streaming`]).
//!
//! The provider keeps at most one live process per instance: the
//! reservation is taken before the exec starts and released when the
//! process settles its exit or is destroyed. No idle timeout and no output
//! ceiling are imposed; stdout is lossless with backpressure, stderr is
//! bounded and best effort (diagnostic).

use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    ControlSignal, FailureReason, ProcessControl, ProcessExit, SandboxError, SandboxProcess,
    SandboxProcessEvidence, SignalName,
};
use futures_util::{StreamExt, TryStreamExt};
use tokio_util::compat::TokioAsyncWriteCompatExt;

use crate::daemon::{self, ProcessSignal, StreamingExec};

/// Bound on a process teardown (kill, then wait for the exit).
const DESTROY_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) use checkfu_sandbox_hostfs::process::{ProcessTable, Reservation};

struct Control {
    reservation: Reservation,
    control: daemon::ProcessControl,
}

fn exit_of(exit: daemon::ProcessExit) -> Result<ProcessExit, SandboxError> {
    match exit {
        daemon::ProcessExit::Code(code) => {
            u8::try_from(code).map(ProcessExit::ExitCode).map_err(|_| {
                SandboxError::failed(
                    op::OPEN_PROCESS,
                    FailureReason::ProviderError,
                    format!("exit code {code} out of range"),
                )
            })
        }
        daemon::ProcessExit::Signaled(sig) => {
            Ok(ProcessExit::Signal(SignalName::from_number(sig.number())))
        }
        daemon::ProcessExit::Unknown => Err(SandboxError::failed(
            op::OPEN_PROCESS,
            FailureReason::ProviderError,
            "the daemon reported no exit code",
        )),
    }
}

#[async_trait]
impl ProcessControl for Control {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        let exit = self.control.wait().await;
        // Released here as well as by the watcher task in `wrap`, so an
        // open that follows a settled wait is never refused as
        // `process_already_open` because that task has not run yet.
        self.reservation.release();
        exit_of(exit)
    }

    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        let s = match signal {
            ControlSignal::Sigint => ProcessSignal::Interrupt,
            ControlSignal::Sigterm => ProcessSignal::Terminate,
            ControlSignal::Sigkill => ProcessSignal::Kill,
        };
        self.control.signal(s).map_err(|e| {
            SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                e.to_string(),
            )
        })
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        let settled = self.control.destroy(DESTROY_BOUND).await;
        self.reservation.release();
        match settled {
            Some(_) => Ok(()),
            None => Err(SandboxError::failed(
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

/// Turns a started exec into the contract's live process and arranges for
/// the reservation to be released when it exits.
pub(crate) fn wrap(
    reservation: Reservation,
    exec: StreamingExec,
    evidence: SandboxProcessEvidence,
) -> SandboxProcess {
    let StreamingExec {
        stdin,
        stdout,
        stderr,
        control,
    } = exec;
    {
        let control = control.clone();
        let reservation = reservation.clone();
        tokio::spawn(async move {
            control.wait().await;
            reservation.release();
        });
    }
    let output = stdout.map(Ok::<Vec<u8>, io::Error>).into_async_read();
    let error = stderr.map(Ok::<Vec<u8>, io::Error>).into_async_read();
    SandboxProcess {
        input: Box::pin(stdin.compat_write()),
        output: Box::pin(output),
        error: Box::pin(error),
        control: Arc::new(Control {
            reservation,
            control,
        }),
        evidence,
    }
}
