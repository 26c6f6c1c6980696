//! [`Mismatch`]: one field that disagrees with a rule, the unit every
//! identity check, request bound and envelope rule reports.

use crate::error::SandboxError;

/// One field that disagrees: its path and both values, rendered as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Field path, e.g. `materialization.image_digest`.
    pub field: String,
    /// What the check expected.
    pub expected: String,
    /// What it got.
    pub actual: String,
}

impl Mismatch {
    /// A mismatch from its parts.
    pub fn new(
        field: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        Mismatch {
            field: field.into(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }

    /// This mismatch as `SandboxProtocolInvalid` under `operation`.
    pub fn into_error(self, operation: &str) -> SandboxError {
        SandboxError::protocol(operation, self.field, self.expected, self.actual)
    }
}
