//! JSON Schema 2020-12 of every boundary type, generated with schemars,
//! plus the vector format's own schema.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use checkfu_sandbox_contract::capabilities::SandboxProviderCapabilities;
use checkfu_sandbox_contract::conformance::evidence::Evidence;
use checkfu_sandbox_contract::error::{SandboxError, SandboxFailure};
use checkfu_sandbox_contract::types::*;
use checkfu_sandbox_contract::wire::{check_capabilities, decode_value, WIRE_REVISION};
use checkfu_sandbox_contract::WireType;

/// The `$id` prefix of every schema in the kit; the path names the revision.
pub(crate) const ID_BASE: &str = "https://checkfu.invalid/sandbox/v1/schema/";

type Decoder = fn(&Value) -> Result<(), checkfu_sandbox_contract::SandboxError>;

struct Boundary {
    name: &'static str,
    schema: fn() -> Value,
    decode: Decoder,
}

fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

fn decode_as<T: DeserializeOwned>(wire: WireType, value: &Value) -> Result<(), SandboxError> {
    decode_value::<T>(wire, value).map(|_| ())
}

macro_rules! boundaries {
    ($($ty:ident => $wire:ident),* $(,)?) => {
        &[$(Boundary {
            name: stringify!($ty),
            schema: schema_of::<$ty>,
            decode: |v| decode_as::<$ty>(WireType::$wire, v),
        }),*]
    };
}

/// The name a boundary type decodes under (the operation is
/// `decode_<name>`): its Rust name in snake_case without a leading
/// `Sandbox` (`SandboxCommandResult` → `command_result`), except the
/// envelope, which decodes as `capabilities` ([`checkfu_sandbox_contract::wire::decode_capabilities`]).
pub fn wire_type_name(type_name: &str) -> String {
    if type_name == "SandboxProviderCapabilities" {
        return "capabilities".into();
    }
    let base = type_name.strip_prefix("Sandbox").unwrap_or(type_name);
    let mut out = String::new();
    for (i, c) in base.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Every boundary type, by name; `decode` applies the wire decoder under
/// the operation `decode_<wire_type_name>`.
const BOUNDARIES: &[Boundary] = boundaries![
    SandboxProvisionRequest => ProvisionRequest,
    SandboxInstance => Instance,
    WriteFileRequest => WriteFileRequest,
    ActivateRequest => ActivateRequest,
    ExecuteRequest => ExecuteRequest,
    SandboxCommand => Command,
    SandboxCommandResult => CommandResult,
    ReadFileRequest => ReadFileRequest,
    SandboxFileContent => FileContent,
    ReadFilesRequest => ReadFilesRequest,
    ReadFilesResult => ReadFilesResult,
    ListDirRequest => ListDirRequest,
    ListDirResult => ListDirResult,
    ListProjectDirRequest => ListProjectDirRequest,
    ListProjectDirResult => ListProjectDirResult,
    SnapshotRequest => SnapshotRequest,
    SandboxSnapshot => Snapshot,
    CloneSnapshotRequest => CloneSnapshotRequest,
    ReleaseRequest => ReleaseRequest,
    ReleaseDisposition => ReleaseDisposition,
    ResumeRequest => ResumeRequest,
    DestroyRequest => DestroyRequest,
    DestroySnapshotRequest => DestroySnapshotRequest,
    CleanupRequest => CleanupRequest,
    CleanupResult => CleanupResult,
    SandboxProcessRequest => ProcessRequest,
    SandboxProcessEvidence => ProcessEvidence,
    ProcessExit => ProcessExit,
    ActiveWriteRequest => ActiveWriteRequest,
    ActiveWriteOutcome => ActiveWriteOutcome,
    SandboxError => Error,
    SandboxFailure => Failure,
    Evidence => Evidence,
];

fn decode_capabilities_value(value: &Value) -> Result<(), SandboxError> {
    let caps: SandboxProviderCapabilities = decode_value(WireType::Capabilities, value)?;
    check_capabilities(&caps)
}

/// The names of every boundary type the kit publishes a schema for, sorted.
pub fn boundary_type_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = BOUNDARIES.iter().map(|b| b.name).collect();
    names.push("SandboxProviderCapabilities");
    names.sort_unstable();
    names
}

/// The decoder behind `decode:<name>`: the strict wire decoder, and for
/// `SandboxProviderCapabilities` also every envelope rule (as
/// `decode_capabilities` applies them).
pub(crate) fn decoder(name: &str) -> Option<Decoder> {
    if name == "SandboxProviderCapabilities" {
        return Some(decode_capabilities_value);
    }
    BOUNDARIES.iter().find(|b| b.name == name).map(|b| b.decode)
}

/// The published schema of a boundary type (or `vector` for the vector
/// format), exactly as the kit stores it.
pub fn schema_for(name: &str) -> Option<Value> {
    if name == "vector" {
        return Some(vector_schema());
    }
    let raw = if name == "SandboxProviderCapabilities" {
        schema_of::<SandboxProviderCapabilities>()
    } else {
        (BOUNDARIES.iter().find(|b| b.name == name)?.schema)()
    };
    Some(finish(name, raw))
}

fn finish(name: &str, mut schema: Value) -> Value {
    if let Value::Object(map) = &mut schema {
        map.insert("$id".into(), json!(format!("{ID_BASE}{name}.json")));
        map.insert("title".into(), json!(name));
        map.insert("x-checkfu-revision".into(), json!(WIRE_REVISION));
        map.insert(
            "$comment".into(),
            json!(format!(
                "Generated from the Rust type {name} of checkfu-sandbox-contract, wire revision {WIRE_REVISION}. Do not edit; regenerate with `checkfu sandbox schema`."
            )),
        );
    }
    schema
}

/// `(file stem, schema)` for every schema file, sorted by stem.
pub(crate) fn all() -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = boundary_type_names()
        .into_iter()
        .filter_map(|n| schema_for(n).map(|s| (n.to_owned(), s)))
        .collect();
    out.push(("vector.schema".into(), vector_schema()));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn vector_schema() -> Value {
    let checks = {
        let mut alternatives: Vec<String> = boundary_type_names()
            .iter()
            .map(|n| format!("decode:{n}"))
            .collect();
        for n in crate::vectors::VALIDATED_TYPES {
            alternatives.push(format!("validate:{n}"));
        }
        for n in crate::vectors::RESULT_TYPES {
            alternatives.push(format!("result:{n}"));
        }
        alternatives.push(crate::FRAMES_CHECK.into());
        alternatives.extend(
            [
                "instance_identity",
                "snapshot_identity",
                "clone_identity",
                "open_process_identity",
            ]
            .map(String::from),
        );
        alternatives
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("{ID_BASE}vector.schema.json"),
        "title": "Vector",
        "description": "One golden vector of the sandbox-provider author kit: a check, its input, and the outcome the check must produce.",
        "x-checkfu-revision": WIRE_REVISION,
        "$comment": format!("Generated by checkfu-sandbox-contract, wire revision {WIRE_REVISION}. Do not edit; regenerate with `checkfu sandbox schema`."),
        "type": "object",
        "additionalProperties": false,
        "required": ["revision", "name", "description", "check", "input", "expect"],
        "properties": {
            "revision": {"const": WIRE_REVISION, "description": "The wire revision literal; a vector of another revision is not run."},
            "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$", "description": "The file stem."},
            "description": {"type": "string", "description": "What the vector tests and why the outcome follows."},
            "check": {"enum": checks, "description": "decode:<Type>: input is the document. validate:<Type>: input is {request, ...parameters}. result:<Type>: input is {request, result}, the request the result answers. frames:open_process: {replay_window_bytes, frames: [{method, params}]}, the frames a runner receives (and its process/ack). instance_identity: {request, expected_state, envelope, returned}. snapshot_identity: {source, requested_expires_at, returned}. clone_identity: {source, target_session_id, returned}. open_process_identity: {instance, request, envelope, evidence}."},
            "input": {"description": "The check's input."},
            "expect": {
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["outcome"],
                        "properties": {"outcome": {"const": "accepted"}}
                    },
                    {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["outcome", "field", "error"],
                        "properties": {
                            "outcome": {"const": "refused"},
                            "field": {"type": "string", "description": "The offending field path."},
                            "error": {
                                "type": "object",
                                "required": ["_tag"],
                                "properties": {"_tag": {"type": "string"}},
                                "description": "A subset of the refusal's wire form (schema/SandboxError.json): every member given must be equal."
                            },
                            "rule": {"type": "string", "description": "For envelope vectors: the broken rule, which prefixes the error's expected text."}
                        }
                    }
                ]
            },
            "schema_verdict": {
                "enum": ["accepts", "rejects"],
                "description": "For decode and validate vectors: whether the type's JSON Schema alone accepts or rejects the document (input, or input.request). Cross-field and byte-length rules are beyond the schema; the decoder and validators are the authority."
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_boundary_decodes_under_its_wire_type_name() {
        for b in BOUNDARIES {
            let refused = (b.decode)(&Value::Null).unwrap_err();
            let SandboxError::SandboxProtocolInvalid { operation, .. } = refused else {
                panic!("{}: {refused}", b.name);
            };
            assert_eq!(
                operation.to_string(),
                format!("decode_{}", wire_type_name(b.name)),
                "{}",
                b.name
            );
        }
    }
}
