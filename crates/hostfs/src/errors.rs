//! Mapping containment and host failures onto the contract's closed error
//! vocabulary, and running blocking file work off the async executor.

use checkfu_sandbox_contained::ContainedError;
use checkfu_sandbox_contract::{FailureReason, Operation, SandboxError};

/// `e`'s message followed by each of its sources', joined by `": "`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// `operation` failed with [`FailureReason::ProviderError`] and `message`.
pub fn provider_error(operation: Operation, message: impl Into<String>) -> SandboxError {
    SandboxError::failed(operation, FailureReason::ProviderError, message)
}

/// A containment failure at `path` as the contract's failure reason
/// (outside the root, not found, not a regular file, an invalid path as an
/// invalid request; everything else is the provider's error).
pub fn contained_error(
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

/// Runs `f` on tokio's blocking pool.
///
/// # Errors
///
/// `ProviderError` of `operation` when the blocking task panicked or was
/// cancelled.
pub async fn blocking<T: Send + 'static>(
    operation: Operation,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| provider_error(operation, format!("blocking task failed: {e}")))
}
