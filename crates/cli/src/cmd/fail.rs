//! How the CLI reports a failure: one line on stderr and an exit status.
//!
//! Exit statuses follow container tools: 2 for usage errors (a flag that
//! does not parse), 125 when checkfu or the provider failed (the line names
//! the closed error tag, the operation, the field and both values), and the
//! workload's own status otherwise (see `cmd::run`).

use std::fmt::Write as _;
use std::process::ExitCode;

use checkfu_sandbox_contract::{SandboxError, SandboxFailure};
use checkfu_sandbox_session::SessionError;

/// Exit status of a usage error.
pub const EXIT_USAGE: u8 = 2;
/// Exit status when checkfu or the provider failed.
pub const EXIT_CHECKFU: u8 = 125;
/// Exit status of a refusal: the input was read and judged, and the answer
/// is no (`sandbox add` of evidence that does not verify, or of an id that
/// is already enrolled; `sandbox remove` of an id that is not).
pub const EXIT_REFUSED: u8 = 1;

/// A failure of a command: the one line to print and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Exit status.
    pub code: u8,
    /// The message, printed after `checkfu: ` on one line.
    pub line: String,
}

impl Failure {
    /// A usage error (exit 2).
    pub fn usage(line: impl Into<String>) -> Self {
        Failure {
            code: EXIT_USAGE,
            line: line.into(),
        }
    }

    /// A checkfu or provider failure (exit 125) with a free-form line.
    pub fn checkfu(line: impl Into<String>) -> Self {
        Failure {
            code: EXIT_CHECKFU,
            line: line.into(),
        }
    }

    /// A refusal (exit 1): the input was judged and refused.
    pub fn refused(line: impl Into<String>) -> Self {
        Failure {
            code: EXIT_REFUSED,
            line: line.into(),
        }
    }

    /// A sandbox failure (exit 125), rendered with its closed tags.
    pub fn sandbox(failure: &SandboxFailure) -> Self {
        Self::checkfu(render_failure(failure))
    }

    /// A sandbox failure about one command-line input, which the line names.
    pub fn input(input: &str, failure: &SandboxFailure) -> Self {
        Self::checkfu(format!("{}: {input}", render_failure(failure)))
    }

    /// Prints the line to stderr and returns the exit status.
    pub fn report(&self) -> ExitCode {
        eprintln!("checkfu: {}", one_line(&self.line));
        ExitCode::from(self.code)
    }
}

impl From<SandboxFailure> for Failure {
    fn from(f: SandboxFailure) -> Self {
        Failure::sandbox(&f)
    }
}

impl From<SessionError> for Failure {
    /// A session's failure: 125 with its closed tags (and the input it
    /// names), or its host-side line. A cancellation is not reported
    /// through here (the signal decides the status).
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Sandbox(f) => Failure::sandbox(&f),
            SessionError::Input { input, failure } => Failure::input(&input, &failure),
            SessionError::Host(line) => Failure::checkfu(line),
            SessionError::Cancelled => Failure::checkfu("cancelled"),
        }
    }
}

impl From<SandboxError> for Failure {
    fn from(e: SandboxError) -> Self {
        Failure::sandbox(&e.into())
    }
}

/// Replaces line breaks and control characters so the message stays on one
/// line.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Every cause of `failure`, in order, joined by `; then `.
pub fn render_failure(failure: &SandboxFailure) -> String {
    failure
        .causes()
        .map(render_error)
        .collect::<Vec<_>>()
        .join("; then ")
}

/// One closed error: its tag, then its fields by name.
pub fn render_error(e: &SandboxError) -> String {
    let tag = e.tag();
    let body = match e {
        SandboxError::SandboxCapabilityUnavailable {
            requirement,
            detail,
        } => with_detail(format!("requirement {requirement}"), detail),
        SandboxError::SandboxFileTooLarge {
            path,
            limit_bytes,
            actual_bytes,
        } => format!("path {path}: limit_bytes {limit_bytes}, actual_bytes {actual_bytes}"),
        SandboxError::SandboxInstanceNotFound { instance_id } => {
            format!("instance_id {instance_id}")
        }
        SandboxError::SandboxLifecycleConflict {
            operation,
            expected,
            actual,
        } => format!("operation {operation}: expected {expected}, actual {actual}"),
        SandboxError::SandboxOperationFailed {
            operation,
            reason,
            message,
            field,
            expected,
            actual,
        } => {
            let mut s = format!("operation {operation}: reason {}", reason.as_str());
            if let Some(field) = field {
                let _ = write!(
                    s,
                    ": field {field}: expected {}, actual {}",
                    expected.as_deref().unwrap_or("?"),
                    actual.as_deref().unwrap_or("?")
                );
            }
            with_detail(s, message)
        }
        SandboxError::SandboxOutputLimitExceeded {
            stream,
            limit_bytes,
        } => format!("stream {stream}: limit_bytes {limit_bytes}"),
        SandboxError::SandboxSnapshotForbidden {
            instance_id,
            retention,
        } => format!("instance_id {instance_id}: retention {retention:?}"),
        SandboxError::SandboxSnapshotNotFound { snapshot_id } => {
            format!("snapshot_id {snapshot_id}")
        }
        SandboxError::SandboxAdapterUnavailable { adapters, invalid } => {
            let mut parts: Vec<String> = adapters
                .iter()
                .map(|a| {
                    let unmet: Vec<&str> = a.unmet.iter().map(|r| r.as_str()).collect();
                    format!("provider {} lacks {}", a.provider, unmet.join("+"))
                })
                .collect();
            if !invalid.is_empty() {
                parts.push(format!("invalid envelope: {}", invalid.join(", ")));
            }
            if parts.is_empty() {
                "no adapter registered under that id".to_owned()
            } else {
                parts.join("; ")
            }
        }
        SandboxError::SandboxAdapterAmbiguous { candidates } => {
            format!("candidates {}", candidates.join(", "))
        }
        SandboxError::SandboxProtocolInvalid {
            operation,
            field,
            expected,
            actual,
        } => format!("operation {operation}: field {field}: expected {expected}, actual {actual}"),
    };
    format!("{tag}: {body}")
}

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_sandbox_contract::{op, Member, Operation};
    use checkfu_sandbox_contract::{FailureReason, Requirement};

    #[test]
    fn renders_tag_operation_field_and_values_on_one_line() {
        let e = SandboxError::invalid_request(
            op::EXECUTE,
            "command.environment",
            "keys matching ^[A-Za-z_][A-Za-z0-9_]*$",
            "1BAD",
        );
        assert_eq!(
            render_error(&e),
            "SandboxOperationFailed: operation execute: reason invalid_request: field \
command.environment: expected keys matching ^[A-Za-z_][A-Za-z0-9_]*$, actual 1BAD"
        );
        let f = SandboxFailure::from(SandboxError::unavailable(
            Requirement::BaseImage,
            "line one\nline two",
        ))
        .then(SandboxError::failed(
            Operation::Rollback(Member::Provision),
            FailureReason::TimedOut,
            "",
        ));
        let line = one_line(&render_failure(&f));
        assert!(!line.contains('\n'));
        assert!(line.starts_with("SandboxCapabilityUnavailable: requirement base_image: "));
        assert!(line.ends_with(
            "; then SandboxOperationFailed: operation provision_rollback: reason timed_out"
        ));
    }
}
