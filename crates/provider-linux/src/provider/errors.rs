//! Mapping containment and host failures onto the contract's closed
//! error vocabulary.

use checkfu_sandbox_contained::ContainedError;
use checkfu_sandbox_contract::*;

pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

pub(super) fn provider_error(operation: Operation, message: impl Into<String>) -> SandboxError {
    SandboxError::failed(operation, FailureReason::ProviderError, message)
}

pub(super) fn contained_error(
    operation: Operation,
    path: impl std::fmt::Display,
    e: ContainedError,
) -> SandboxError {
    let reason = match &e {
        ContainedError::OutsideRoot { .. } => FailureReason::OutsideRoot,
        ContainedError::NotFound { .. } => FailureReason::NotFound,
        ContainedError::NotRegularFile { .. } => FailureReason::NotRegularFile,
        ContainedError::InvalidPath { .. } => FailureReason::InvalidRequest,
        ContainedError::TooLarge { .. }
        | ContainedError::TooManyEntries { .. }
        | ContainedError::Io { .. } => FailureReason::ProviderError,
    };
    SandboxError::failed(operation, reason, format!("{path}: {}", chain(&e)))
}

pub(super) async fn blocking<T: Send + 'static>(
    operation: Operation,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| provider_error(operation, format!("blocking task failed: {e}")))
}
