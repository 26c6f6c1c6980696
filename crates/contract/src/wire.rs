//! The strict wire codec, revision `checkfu.sandbox/v1` (DESIGN D3).
//!
//! Wire form:
//! - one JSON object per request or result, snake_case field names as the
//!   spec spells them, unknown fields refused everywhere;
//! - closed enums are snake_case strings (signal names are `SIGTERM` etc.);
//! - byte content is standard padded base64 in fields ending `_base64`;
//! - timestamps are exactly `YYYY-MM-DDTHH:MM:SS.mmmZ`, digests
//!   `sha256:<64 lower-case hex>`, images `name@sha256:<hex>`;
//! - optional fields are absent rather than `null` when they carry nothing;
//! - errors are objects tagged by `_tag` (see [`crate::SandboxError`]);
//! - documents over [`MAX_WIRE_DOCUMENT_BYTES`] are refused before parsing.
//!
//! Enums documented as closed never grow within a revision; a new member
//! means a new revision literal, reviewed explicitly.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::bounds::MAX_WIRE_DOCUMENT_BYTES;
use crate::capabilities::SandboxProviderCapabilities;
use crate::error::SandboxError;
use crate::mismatch::{excerpt, Mismatch};
use crate::operation::{Operation, WireType};

/// The wire revision literal. Changing it is a compatibility decision that
/// a golden test pins.
pub const WIRE_REVISION: &str = "checkfu.sandbox/v1";

/// Decodes `bytes` as `T`, strictly.
///
/// `wire_type` names the decoded type in the error's operation
/// (`decode_<wire_type>`).
///
/// # Errors
/// `SandboxProtocolInvalid{operation: decode_<wire_type>, field, expected,
/// actual}` where `field` is the JSON path of the first offending value
/// (`.` for the document itself), `expected` says what was acceptable and
/// `actual` renders the offending value (see [`excerpt`]).
pub fn decode<T: DeserializeOwned>(wire_type: WireType, bytes: &[u8]) -> Result<T, SandboxError> {
    let operation = Operation::Decode(wire_type);
    if bytes.len() > MAX_WIRE_DOCUMENT_BYTES {
        return Err(SandboxError::protocol(
            operation,
            ".",
            format!("a document of at most {MAX_WIRE_DOCUMENT_BYTES} bytes"),
            format!("{} bytes", bytes.len()),
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| SandboxError::protocol(operation, ".", "well-formed JSON", e.to_string()))?;
    decode_value(wire_type, &value)
}

/// What a decode error expected of a required member that is absent (its
/// `actual` is then `absent`).
pub const MISSING_MEMBER_EXPECTED: &str = "present (a required field)";

/// Decodes an already parsed JSON value as `T`, strictly. Same errors as
/// [`decode`].
pub fn decode_value<T: DeserializeOwned>(
    wire_type: WireType,
    value: &serde_json::Value,
) -> Result<T, SandboxError> {
    decode_fields(value).map_err(|m| m.into_error(Operation::Decode(wire_type)))
}

/// Decodes an already parsed JSON value as `T`, strictly, for a document
/// that is not one of the contract's [`WireType`]s (a wire protocol frame):
/// the same rules as [`decode_value`].
///
/// # Errors
/// The first offending field as a [`Mismatch`] (field path, what was
/// acceptable, the offending value), as [`decode`] reports it.
pub fn decode_fields<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, Mismatch> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let mut message = e.inner().to_string();
        let mut path = e.path().to_string();
        let mut actual = lookup(value, e.path())
            .map(render)
            .unwrap_or_else(|| "absent".into());
        // serde reports a missing member, and an unknown one behind
        // `#[serde(flatten)]`, at the parent object: name the member itself.
        if let Some((name, present)) = member_named_by(&message) {
            let parent = lookup(value, e.path());
            let member = parent.and_then(|p| p.get(name));
            if !path.ends_with(name) && member.is_some() == present {
                actual = member.map(render).unwrap_or_else(|| "absent".into());
                path = if path == "." {
                    name.to_owned()
                } else {
                    format!("{path}.{name}")
                };
            }
            // What a missing member lacked is its presence, not serde's
            // "missing field" wording.
            if !present {
                message = MISSING_MEMBER_EXPECTED.to_owned();
            }
        }
        // Inside an internally tagged enum serde buffers the content and the
        // path stops at the enum: find the offending leaf by its value.
        if let Some(literal) = offending_literal(&message) {
            if let Some(at) = lookup(value, e.path()) {
                let mut found = Vec::new();
                find_leaf(at, &literal, String::new(), &mut found);
                if let [rel] = found.as_slice() {
                    if !rel.is_empty() {
                        path = join_path(&path, rel);
                        actual = render(&literal);
                    }
                }
            }
        }
        Mismatch::new(path, message, actual)
    })
}

/// Encodes `value` as compact JSON bytes.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing our own boundary types cannot fail: every map key is a string.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Decodes an envelope and applies every cross-field rule.
///
/// # Errors
/// A decode error as [`decode`], or `SandboxProtocolInvalid{operation:
/// decode_capabilities, field, expected, actual}` for the first broken rule,
/// where `expected` starts with the rule's name (for example
/// `snapshot_clone_requires_snapshots: false while snapshots is false`).
pub fn decode_capabilities(bytes: &[u8]) -> Result<SandboxProviderCapabilities, SandboxError> {
    let caps: SandboxProviderCapabilities = decode(WireType::Capabilities, bytes)?;
    check_capabilities(&caps)?;
    Ok(caps)
}

/// Applies the envelope's cross-field rules to a decoded envelope.
///
/// # Errors
/// The first broken rule as in [`decode_capabilities`].
pub fn check_capabilities(caps: &SandboxProviderCapabilities) -> Result<(), SandboxError> {
    match caps.violations().into_iter().next() {
        None => Ok(()),
        Some(v) => Err(SandboxError::protocol(
            Operation::Decode(WireType::Capabilities),
            v.mismatch.field,
            format!("{}: {}", v.rule.as_str(), v.mismatch.expected),
            v.mismatch.actual,
        )),
    }
}

/// The member named by serde's "unknown field `name`" (present) or
/// "missing field `name`" (absent) message.
fn member_named_by(message: &str) -> Option<(&str, bool)> {
    let (rest, present) = if let Some(rest) = message.strip_prefix("unknown field `") {
        (rest, true)
    } else {
        (message.strip_prefix("missing field `")?, false)
    };
    rest.split('`').next().map(|name| (name, present))
}

/// The offending value quoted in a serde or contract error message:
/// ``unknown variant `x` ``, ``integer `n` ``, `invalid type: string "x"`
/// or `actual "x"`.
fn offending_literal(message: &str) -> Option<serde_json::Value> {
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        return rest
            .split('`')
            .next()
            .map(|s| serde_json::Value::String(s.into()));
    }
    if let Some(i) = message.find("integer `") {
        let text = message[i + 9..].split('`').next()?;
        return serde_json::from_str::<serde_json::Number>(text)
            .ok()
            .map(serde_json::Value::Number);
    }
    let start = message
        .find("invalid type: string \"")
        .map(|i| i + 21)
        .or_else(|| message.find("actual \"").map(|i| i + 7))?;
    serde_json::Deserializer::from_str(&message[start..])
        .into_iter::<String>()
        .next()?
        .ok()
        .map(serde_json::Value::String)
}

/// Collects the relative paths of every leaf under `at` equal to `target`.
fn find_leaf(
    at: &serde_json::Value,
    target: &serde_json::Value,
    here: String,
    out: &mut Vec<String>,
) {
    match at {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                find_leaf(v, target, join_path(&here, k), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                find_leaf(v, target, format!("{here}[{i}]"), out);
            }
        }
        leaf if leaf == target => out.push(here),
        _ => {}
    }
}

/// `base` extended by `rel` in serde_path_to_error's notation.
fn join_path(base: &str, rel: &str) -> String {
    if base.is_empty() || base == "." {
        rel.to_owned()
    } else if rel.starts_with('[') {
        format!("{base}{rel}")
    } else {
        format!("{base}.{rel}")
    }
}

fn lookup<'a>(
    root: &'a serde_json::Value,
    path: &serde_path_to_error::Path,
) -> Option<&'a serde_json::Value> {
    use serde_path_to_error::Segment;
    let mut cur = root;
    for seg in path.iter() {
        cur = match seg {
            Segment::Seq { index } => cur.get(*index)?,
            Segment::Map { key } => cur.get(key.as_str())?,
            Segment::Enum { .. } => cur,
            Segment::Unknown => return Some(cur),
        };
    }
    Some(cur)
}

fn render(v: &serde_json::Value) -> String {
    excerpt(&v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_literal_is_pinned() {
        assert_eq!(WIRE_REVISION, "checkfu.sandbox/v1");
    }

    #[test]
    fn empty_causes_are_refused_at_decode_naming_the_field() {
        let refused = decode::<crate::SandboxFailure>(WireType::Failure, br#"{"causes": []}"#);
        assert_eq!(
            refused,
            Err(SandboxError::protocol(
                Operation::Decode(WireType::Failure),
                "causes",
                "invalid length 0, expected at least one cause",
                "[]"
            ))
        );
    }

    #[test]
    fn a_combined_failure_round_trips_in_order() {
        let f = crate::SandboxFailure::new(
            SandboxError::protocol(Operation::InstanceIdentity, "expires_at", "a", "b"),
            [SandboxError::failed(
                Operation::Rollback(crate::Member::Provision),
                crate::FailureReason::TimedOut,
                "30 s",
            )],
        );
        let wire = serde_json::to_value(&f).unwrap();
        assert_eq!(wire["causes"].as_array().map(Vec::len), Some(2));
        assert_eq!(wire["causes"][1]["_tag"], "SandboxOperationFailed");
        assert_eq!(
            decode_value::<crate::SandboxFailure>(WireType::Failure, &wire),
            Ok(f)
        );
    }
}
