//! The golden vectors. Each starts from a valid fixture, changes one thing,
//! and declares the outcome that change must produce.

mod command;
mod decode_invalid;
mod decode_valid;
mod envelope;
mod frames;
mod instance;
mod mounts;
mod other_requests;
mod paths;
mod process;
mod reads;
mod results;
mod snapshot;

use serde::Serialize;
use serde_json::{json, Value};

use crate::fixtures::*;
use checkfu_sandbox_contract::bounds::{
    MAX_ARGUMENTS, MAX_ARGUMENT_BYTES, MAX_LIST_ENTRIES, MAX_OUTPUT_LIMIT_BYTES,
    MAX_PINNED_SNAPSHOTS, MAX_READ_FILES_COUNT, MAX_READ_FILE_BYTES, MIB, RESERVED_ROOTS,
};
use checkfu_sandbox_contract::capabilities::*;
use checkfu_sandbox_contract::envelope::EnvelopeRule;
use checkfu_sandbox_contract::error::{FailureReason, SandboxError, SandboxFailure};
use checkfu_sandbox_contract::types::*;
use checkfu_sandbox_contract::wire::WIRE_REVISION;
use checkfu_sandbox_contract::Bytes;

// One module per generator: each group of members its vectors test.
use command::validate_command;
use decode_invalid::decode_invalid;
use decode_valid::decode_valid;
use envelope::envelope_invalid;
use frames::open_process_frames;
use instance::instance_identity;
use mounts::validate_mounts;
use other_requests::validate_other;
use process::process_identity;
use reads::validate_reads;
use results::result_checks;
use snapshot::{clone_identity, snapshot_identity};

/// The request types with a `validate:<Type>` check.
pub(crate) const VALIDATED_TYPES: &[&str] = &[
    "ActiveWriteRequest",
    "CleanupRequest",
    "ListDirRequest",
    "ListProjectDirRequest",
    "ReadFileRequest",
    "ReadFilesRequest",
    "SandboxCommand",
    "SandboxProcessRequest",
    "SandboxProvisionRequest",
    "WriteFileRequest",
];

/// The result types with a `result:<Type>` check.
pub(crate) const RESULT_TYPES: &[&str] = &[
    "ListDirResult",
    "ListProjectDirResult",
    "ReadFilesResult",
    "ReleaseDisposition",
    "SandboxCommandResult",
];

/// One vector before rendering.
pub(crate) struct Vector {
    pub(crate) valid: bool,
    pub(crate) name: String,
    description: String,
    check: String,
    input: Value,
    expect: Value,
    schema_verdict: Option<&'static str>,
}

impl Vector {
    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({
            "revision": WIRE_REVISION,
            "name": self.name,
            "description": self.description,
            "check": self.check,
            "input": self.input,
            "expect": self.expect,
        });
        if let Some(verdict) = self.schema_verdict {
            v["schema_verdict"] = json!(verdict);
        }
        v
    }
}

fn j<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

// The wire rendering of a value, as mismatches report both values.
use checkfu_sandbox_contract::show;

/// `decode_<wire type name>` (see [`super::wire_type_name`]).
fn decode_operation(type_name: &str) -> String {
    format!("decode_{}", super::wire_type_name(type_name))
}

/// Sets the member at a JSON pointer (`/a/0/b`), creating object members.
fn set(mut v: Value, pointer: &str, new: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    match v.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(key.to_owned(), new);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = key.parse::<usize>() {
                items[i] = new;
            }
        }
        _ => unreachable!("fixture pointer {pointer}"),
    }
    v
}

fn remove(mut v: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    if let Some(Value::Object(map)) = v.pointer_mut(parent) {
        map.remove(key);
    }
    v
}

#[derive(Default)]
struct Vectors(Vec<Vector>);

impl Vectors {
    #[allow(clippy::too_many_arguments)] // one vector's declared facts, named at each call
    fn push(
        &mut self,
        valid: bool,
        name: &str,
        description: &str,
        check: String,
        input: Value,
        expect: Value,
        verdict: Option<&'static str>,
    ) {
        self.0.push(Vector {
            valid,
            name: name.into(),
            description: description.into(),
            check,
            input,
            expect,
            schema_verdict: verdict,
        });
    }

    fn ok_decode(&mut self, name: &str, description: &str, ty: &str, input: Value) {
        self.push(
            true,
            name,
            description,
            format!("decode:{ty}"),
            input,
            json!({"outcome": "accepted"}),
            Some("accepts"),
        );
    }

    /// A document the decoder must refuse, naming `field`.
    fn bad_decode(
        &mut self,
        name: &str,
        description: &str,
        ty: &str,
        input: Value,
        field: &str,
        verdict: &'static str,
    ) {
        let expect = json!({
            "outcome": "refused",
            "field": field,
            "error": {"_tag": "SandboxProtocolInvalid", "operation": decode_operation(ty), "field": field},
        });
        self.push(
            false,
            name,
            description,
            format!("decode:{ty}"),
            input,
            expect,
            Some(verdict),
        );
    }

    /// An envelope that breaks `rule` at `field`.
    fn bad_envelope(
        &mut self,
        name: &str,
        description: &str,
        input: Value,
        field: &str,
        rule: EnvelopeRule,
        verdict: &'static str,
    ) {
        let expect = json!({
            "outcome": "refused",
            "field": field,
            "rule": rule.as_str(),
            "error": {"_tag": "SandboxProtocolInvalid", "operation": "decode_capabilities", "field": field},
        });
        self.push(
            false,
            name,
            description,
            "decode:SandboxProviderCapabilities".into(),
            input,
            expect,
            Some(verdict),
        );
    }

    fn ok_validate(&mut self, name: &str, description: &str, ty: &str, input: Value) {
        self.push(
            true,
            name,
            description,
            format!("validate:{ty}"),
            input,
            json!({"outcome": "accepted"}),
            Some("accepts"),
        );
    }

    /// A request the runtime refuses as `invalid_request` at `field`.
    #[allow(clippy::too_many_arguments)] // one vector's declared facts, named at each call
    fn bad_validate(
        &mut self,
        name: &str,
        description: &str,
        ty: &str,
        input: Value,
        operation: &str,
        field: &str,
        verdict: &'static str,
    ) {
        let expect = json!({
            "outcome": "refused",
            "field": field,
            "error": {"_tag": "SandboxOperationFailed", "operation": operation, "reason": "invalid_request", "field": field},
        });
        self.push(
            false,
            name,
            description,
            format!("validate:{ty}"),
            input,
            expect,
            Some(verdict),
        );
    }

    /// A mount plan refused as `SandboxCapabilityUnavailable{mounts}` at `field`.
    fn bad_mounts(
        &mut self,
        name: &str,
        description: &str,
        mounts: Value,
        max_mounts: u8,
        field: &str,
        verdict: &'static str,
    ) {
        let request = set(j(&provision_request()), "/mounts", mounts);
        let expect = json!({
            "outcome": "refused",
            "field": field,
            "error": {"_tag": "SandboxCapabilityUnavailable", "requirement": "mounts"},
        });
        self.push(
            false,
            name,
            description,
            "validate:SandboxProvisionRequest".into(),
            json!({"request": request, "max_mounts": max_mounts}),
            expect,
            Some(verdict),
        );
    }

    fn ok_result(&mut self, name: &str, description: &str, ty: &str, input: Value) {
        self.push(
            true,
            name,
            description,
            format!("result:{ty}"),
            input,
            json!({"outcome": "accepted"}),
            None,
        );
    }

    /// A result the runtime refuses as `SandboxProtocolInvalid{operation}`
    /// at `field`, with both values.
    #[allow(clippy::too_many_arguments)] // one vector's declared facts, named at each call
    fn bad_result(
        &mut self,
        name: &str,
        description: &str,
        ty: &str,
        input: Value,
        operation: &str,
        field: &str,
        expected: &str,
        actual: &str,
    ) {
        let expect = json!({
            "outcome": "refused",
            "field": field,
            "error": {"_tag": "SandboxProtocolInvalid", "operation": operation, "field": field, "expected": expected, "actual": actual},
        });
        self.push(
            false,
            name,
            description,
            format!("result:{ty}"),
            input,
            expect,
            None,
        );
    }

    fn ok_identity(&mut self, name: &str, description: &str, check: &str, input: Value) {
        self.push(
            true,
            name,
            description,
            check.into(),
            input,
            json!({"outcome": "accepted"}),
            None,
        );
    }

    /// An identity refusal at `field` with both values (`expected` omitted
    /// where the check states a rule rather than a value).
    #[allow(clippy::too_many_arguments)] // one vector's declared facts, named at each call
    fn bad_identity(
        &mut self,
        name: &str,
        description: &str,
        check: &str,
        input: Value,
        field: &str,
        expected: Option<String>,
        actual: String,
    ) {
        let mut error = json!({"_tag": "SandboxProtocolInvalid", "operation": check, "field": field, "actual": actual});
        if let Some(e) = expected {
            error["expected"] = json!(e);
        }
        let expect = json!({"outcome": "refused", "field": field, "error": error});
        self.push(false, name, description, check.into(), input, expect, None);
    }
}

/// Every vector, valid and invalid.
pub(crate) fn all() -> Vec<Vector> {
    let mut v = Vectors::default();
    decode_valid(&mut v);
    envelope_invalid(&mut v);
    decode_invalid(&mut v);
    instance_identity(&mut v);
    snapshot_identity(&mut v);
    clone_identity(&mut v);
    process_identity(&mut v);
    validate_command(&mut v);
    validate_reads(&mut v);
    validate_other(&mut v);
    validate_mounts(&mut v);
    paths::byte_paths(&mut v);
    result_checks(&mut v);
    open_process_frames(&mut v);
    v.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_meet_the_brief() {
        let all = all();
        let valid = all.iter().filter(|v| v.valid).count();
        assert!(valid >= 20, "{valid} valid vectors");
        assert!(
            all.len() - valid >= 60,
            "{} invalid vectors",
            all.len() - valid
        );
        let mut names: Vec<&str> = all.iter().map(|v| v.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "vector names are unique");
    }

    #[test]
    fn decode_operation_names() {
        assert_eq!(decode_operation("SandboxInstance"), "decode_instance");
        assert_eq!(
            decode_operation("SandboxProviderCapabilities"),
            "decode_capabilities"
        );
    }
}
