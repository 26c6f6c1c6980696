//! [`Mismatch`]: one field that disagrees with a rule, the unit every
//! identity check, request bound and envelope rule reports, and the one way
//! values are rendered inside wire errors' `expected` / `actual` fields
//! ([`show`], [`excerpt`]).

use std::fmt;

use serde::Serialize;

use crate::error::SandboxError;
use crate::operation::Operation;

/// The longest rendering [`excerpt`] keeps, in bytes (before the `…`).
pub const EXCERPT_BYTES: usize = 200;

/// Renders a value for an error's `expected` / `actual`: compact JSON
/// (`"a"`, `3`, `{"k":1}`).
pub fn show<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "<unrenderable>".into())
}

/// `text` cut to at most [`EXCERPT_BYTES`] bytes at a character boundary,
/// with `…` appended when cut: how a received document of any size is
/// quoted in an error.
pub fn excerpt(text: &str) -> String {
    let mut s = text.to_owned();
    if s.len() > EXCERPT_BYTES {
        let mut cut = EXCERPT_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

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
    pub fn into_error(self, operation: Operation) -> SandboxError {
        SandboxError::protocol(operation, self.field, self.expected, self.actual)
    }
}

/// `<field>: expected <expected>, actual <actual>`, as the errors say it.
impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: expected {}, actual {}",
            self.field, self.expected, self.actual
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_cuts_at_a_character_boundary() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(150);
        let cut = excerpt(&long);
        assert!(cut.ends_with('…'));
        assert_eq!(cut.len(), EXCERPT_BYTES + '…'.len_utf8());
    }

    #[test]
    fn show_is_compact_json() {
        assert_eq!(show("a"), "\"a\"");
        assert_eq!(show(&[1, 2]), "[1,2]");
    }
}
