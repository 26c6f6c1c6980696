//! A validated live process (spec "openProcess").

use checkfu_sandbox_contract::{Operation, ProcessStep};
use std::pin::Pin;
use std::sync::Arc;

use checkfu_sandbox_contract::{
    ControlSignal, ProcessControl, ProcessExit, SandboxError, SandboxProcess,
    SandboxProcessEvidence,
};
use futures_io::{AsyncRead, AsyncWrite};
use tokio::sync::OnceCell;

use crate::checks::Verdicts;

/// A process whose evidence the runtime accepted. `wait` settles once and
/// can be read again; `destroy` is idempotent.
pub struct Process {
    /// The child's standard input; closing it is the half-close.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    /// The child's standard output.
    pub output: Pin<Box<dyn AsyncRead + Send>>,
    /// The child's standard error (diagnostic, best effort).
    pub error: Pin<Box<dyn AsyncRead + Send>>,
    /// Control shared with [`ProcessHandle`]s.
    pub handle: ProcessHandle,
    /// The accepted evidence.
    pub evidence: SandboxProcessEvidence,
}

/// Wait, signal and destroy for a process; clones share one settlement.
#[derive(Clone)]
pub struct ProcessHandle {
    control: Arc<dyn ProcessControl>,
    exit: Arc<OnceCell<Result<ProcessExit, SandboxError>>>,
    verdicts: Verdicts,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("evidence", &self.evidence)
            .finish_non_exhaustive()
    }
}

impl Process {
    pub(crate) fn new(p: SandboxProcess, verdicts: Verdicts) -> Self {
        Process {
            input: p.input,
            output: p.output,
            error: p.error,
            handle: ProcessHandle {
                control: p.control,
                exit: Arc::new(OnceCell::new()),
                verdicts,
            },
            evidence: p.evidence,
        }
    }
}

impl ProcessHandle {
    /// The exit, settled once and re-readable.
    ///
    /// # Errors
    /// The provider's error, cached like an exit.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped wait leaves the settlement to the next caller.
    pub async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        self.exit
            .get_or_init(|| async {
                self.control.wait().await.map_err(|e| {
                    self.verdicts
                        .admit(Operation::Process(ProcessStep::Wait), e)
                })
            })
            .await
            .clone()
    }

    /// Delivers one control signal.
    ///
    /// # Errors
    /// The provider's error.
    pub async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        self.control.signal(signal).await.map_err(|e| {
            self.verdicts
                .admit(Operation::Process(ProcessStep::Signal), e)
        })
    }

    /// Idempotent teardown.
    ///
    /// # Errors
    /// The provider's error.
    pub async fn destroy(&self) -> Result<(), SandboxError> {
        self.control.destroy().await.map_err(|e| {
            self.verdicts
                .admit(Operation::Process(ProcessStep::Destroy), e)
        })
    }
}
