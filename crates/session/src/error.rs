//! How a session fails.

use checkfu_sandbox_contract::{SandboxError, SandboxFailure};

/// A session's failure. Every variant but [`SessionError::Cancelled`] is
/// reported after the instance (if any) was destroyed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    /// The runtime or the provider refused or failed: closed errors in
    /// order.
    #[error("{0}")]
    Sandbox(SandboxFailure),
    /// A closed failure about one input of the plan, which `input` names
    /// as the caller gave it (e.g. `--mount ./data:/data`).
    #[error("{failure}: {input}")]
    Input {
        /// The input as given.
        input: String,
        /// Why it was refused.
        failure: SandboxFailure,
    },
    /// A failure on the host side (the output folder, a prompt file, a
    /// task), as one line.
    #[error("{0}")]
    Host(String),
    /// The cancellation token fired; in-flight calls settled and the
    /// instance was destroyed.
    #[error("cancelled")]
    Cancelled,
}

impl From<SandboxFailure> for SessionError {
    fn from(f: SandboxFailure) -> Self {
        SessionError::Sandbox(f)
    }
}

impl From<SandboxError> for SessionError {
    fn from(e: SandboxError) -> Self {
        SessionError::Sandbox(e.into())
    }
}

impl SessionError {
    /// A closed failure about the input `input`.
    pub fn input(input: impl Into<String>, failure: impl Into<SandboxFailure>) -> Self {
        SessionError::Input {
            input: input.into(),
            failure: failure.into(),
        }
    }
}
