//! The machine-readable author kit, generated in memory (DESIGN §1 "author
//! kit"; STYLE 9).
//!
//! [`generate`] produces every file of the kit — `README.md`,
//! `schema/<Type>.json` (JSON Schema 2020-12 of each boundary type, plus
//! `schema/vector.schema.json`), `protocol/<Message>.json` (JSON Schema of
//! each wire-protocol-only message shape, from
//! `checkfu_sandbox_wire::message_schemas`, `PROTOCOL.md`) and `vectors/{valid,invalid}/<name>.json`
//! (golden vectors) — deterministically, as pretty JSON with sorted keys and
//! a trailing newline. [`check`] compares a directory with it and [`write()`]
//! regenerates one. [`evaluate`] runs the check a vector names and
//! [`verify`] compares the result with the vector's recorded expectation:
//! the loop test, the CLI and partners' reference all use this one path.
//!
//! # Vector format
//!
//! ```json
//! {
//!   "revision": "checkfu.sandbox/v1",
//!   "name": "instance-identity-expires-at",
//!   "description": "...",
//!   "check": "instance_identity",
//!   "input": { ... },
//!   "expect": {"outcome": "refused", "field": "expires_at",
//!              "error": {"_tag": "SandboxProtocolInvalid", "operation": "instance_identity",
//!                        "field": "expires_at", "expected": "...", "actual": "..."}},
//!   "schema_verdict": "rejects"
//! }
//! ```
//!
//! `check` is one of `decode:<Type>` (input: the document),
//! `validate:<Type>` (input: `{"request": <document>, ...parameters}`),
//! `result:<Type>` (input: `{"request", "result"}`: a member's result and
//! the request it answers), `frames:open_process` (input:
//! `{"replay_window_bytes", "frames": [{"method", "params"}]}`),
//! `instance_identity` (`{request, expected_state, envelope, returned}`),
//! `snapshot_identity` (`{source, requested_expires_at, returned}`),
//! `clone_identity` (`{source, target_session_id, returned}`) or
//! `open_process_identity` (`{instance, request, envelope, evidence}`).
//! `expect.error` is a subset of the refusal's wire form: every member it
//! names must be equal; `expect.rule` (envelope vectors) must prefix the
//! error's `expected`. `schema_verdict` (decode and validate vectors) says
//! whether the type's JSON Schema alone accepts or rejects the document.
//! The expectations are declared by the generator from what each vector is
//! meant to test, never computed by running the checks.

mod fixtures;
mod schema;
mod vectors;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use checkfu_sandbox_contract::error::SandboxError;
use checkfu_sandbox_contract::identity::{
    check_clone, check_instance, check_process_evidence, check_snapshot,
};
use checkfu_sandbox_contract::validate;
use checkfu_sandbox_contract::wire::{check_capabilities, decode_value, WIRE_REVISION};
use checkfu_sandbox_contract::{op, Operation, WireType};

pub use schema::{boundary_type_names, schema_for, wire_type_name};

/// One generated file of the kit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KitFile {
    /// Path relative to the kit's root, `/`-separated (`schema/SandboxInstance.json`).
    pub path: String,
    /// The whole content.
    pub contents: String,
}

/// How a directory differs from the generated kit for one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftKind {
    /// The kit has the file; the directory does not.
    Missing,
    /// The directory has a file the kit does not.
    Extra,
    /// Both have it, with different contents.
    Differs,
}

/// One drifted file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KitDrift {
    /// Path relative to the kit's root, `/`-separated.
    pub path: String,
    /// How it drifted.
    pub kind: DriftKind,
}

impl fmt::Display for KitDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            DriftKind::Missing => "missing",
            DriftKind::Extra => "extra",
            DriftKind::Differs => "differs",
        };
        write!(f, "{kind}: {}", self.path)
    }
}

/// Renders a JSON value as the kit stores it: pretty, object keys sorted at
/// every level (independent of serde_json's `preserve_order`), and a
/// trailing newline.
pub fn render(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(&sorted(value)).unwrap_or_default();
    text.push('\n');
    text
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let ordered: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, sorted(v))).collect();
            let mut out = Map::new();
            for (k, v) in ordered {
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Every file of the kit, sorted by path.
pub fn generate() -> Vec<KitFile> {
    let mut files = vec![KitFile {
        path: "README.md".into(),
        contents: include_str!("README.md").to_owned(),
    }];
    for (name, schema) in schema::all() {
        files.push(KitFile {
            path: format!("schema/{name}.json"),
            contents: render(&schema),
        });
    }
    for (name, schema) in checkfu_sandbox_wire::message_schemas() {
        files.push(KitFile {
            path: format!("protocol/{name}.json"),
            contents: render(&schema),
        });
    }
    for vector in vectors::all() {
        let dir = if vector.valid { "valid" } else { "invalid" };
        files.push(KitFile {
            path: format!("vectors/{dir}/{}.json", vector.name),
            contents: render(&vector.to_json()),
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            list_files(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
    Ok(())
}

/// Compares `dir` with the generated kit.
///
/// # Errors
/// Every drifted file, sorted by path: a generated file absent from `dir`
/// (`Missing`), a `.json` file under `protocol/`, `schema/` or `vectors/` the kit does
/// not generate (`Extra`), or one
/// whose bytes differ (`Differs`). An unreadable `dir` reports every file
/// as missing.
pub fn check(dir: &Path) -> Result<(), Vec<KitDrift>> {
    let generated = generate();
    let mut present = Vec::new();
    // An absent or unreadable directory leaves `present` short; every
    // generated file then reports as missing.
    let _ = list_files(dir, dir, &mut present);
    let mut drift = Vec::new();
    for file in &generated {
        match std::fs::read(dir.join(&file.path)) {
            Err(_) => drift.push(KitDrift {
                path: file.path.clone(),
                kind: DriftKind::Missing,
            }),
            Ok(bytes) if bytes != file.contents.as_bytes() => drift.push(KitDrift {
                path: file.path.clone(),
                kind: DriftKind::Differs,
            }),
            Ok(_) => {}
        }
    }
    for path in present {
        if kit_owned(&path) && !generated.iter().any(|f| f.path == path) {
            drift.push(KitDrift {
                path,
                kind: DriftKind::Extra,
            });
        }
    }
    drift.sort_by(|a, b| a.path.cmp(&b.path));
    if drift.is_empty() {
        Ok(())
    } else {
        Err(drift)
    }
}

/// The subdirectories the kit owns: stale `.json` files under them are
/// removed by [`write`] and reported by [`check`].
const OWNED_DIRS: [&str; 3] = ["protocol/", "schema/", "vectors/"];

/// The file whose presence marks a directory as an author kit.
const KIT_MARKER: &str = "schema/vector.schema.json";

fn kit_owned(path: &str) -> bool {
    OWNED_DIRS.iter().any(|d| path.starts_with(d)) && path.ends_with(".json")
}

/// Writes the generated kit into `dir` (created when absent) and removes
/// stale `.json` files under its `protocol/`, `schema/` and `vectors/`, so that
/// afterwards [`check`] passes. Nothing else in `dir` is touched.
///
/// # Errors
/// `InvalidInput` when `dir` is a non-empty directory that is not an author
/// kit (no `schema/vector.schema.json`): writing there could mix the kit
/// with unrelated files. Otherwise the first I/O error.
pub fn write(dir: &Path) -> std::io::Result<()> {
    let generated = generate();
    let non_empty = std::fs::read_dir(dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if non_empty && !dir.join(KIT_MARKER).exists() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is a non-empty directory that is not an author kit (no {KIT_MARKER}); \
                 choose an empty or new directory",
                dir.display()
            ),
        ));
    }
    std::fs::create_dir_all(dir)?;
    let mut present = Vec::new();
    list_files(dir, dir, &mut present)?;
    for path in present {
        if kit_owned(&path) && !generated.iter().any(|f| f.path == path) {
            std::fs::remove_file(dir.join(&path))?;
        }
    }
    for file in &generated {
        let target = dir.join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::read(&target).ok().as_deref() != Some(file.contents.as_bytes()) {
            std::fs::write(&target, &file.contents)?;
        }
    }
    Ok(())
}

/// What running a vector's check produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The input passed the check.
    Accepted,
    /// The input was refused.
    Refused {
        /// The offending field path (for a protocol error, its `field`).
        field: String,
        /// The refusal as the runtime reports it.
        error: SandboxError,
    },
}

/// A vector that cannot be run: malformed, of another revision, or naming
/// an unknown check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed vector: {0}")]
pub struct VectorError(pub String);

fn member<'a>(value: &'a Value, key: &str) -> Result<&'a Value, VectorError> {
    value
        .get(key)
        .ok_or_else(|| VectorError(format!("missing member {key:?}")))
}

fn refused(error: SandboxError) -> Outcome {
    let field = match &error {
        SandboxError::SandboxProtocolInvalid { field, .. } => field.clone(),
        SandboxError::SandboxOperationFailed {
            field: Some(field), ..
        } => field.clone(),
        _ => String::new(),
    };
    Outcome::Refused { field, error }
}

fn first(
    mismatches: Vec<checkfu_sandbox_contract::Mismatch>,
    to_error: impl FnOnce(checkfu_sandbox_contract::Mismatch) -> SandboxError,
) -> Outcome {
    match mismatches.into_iter().next() {
        None => Outcome::Accepted,
        Some(m) => {
            let field = m.field.clone();
            Outcome::Refused {
                field,
                error: to_error(m),
            }
        }
    }
}

/// Decodes one part of a vector's input; a decode failure is the outcome.
macro_rules! part {
    ($input:expr, $key:literal, $ty:ty, $wire:ident) => {
        match decode_value::<$ty>(WireType::$wire, member($input, $key)?) {
            Ok(v) => v,
            Err(e) => return Ok(refused(e)),
        }
    };
}

/// Runs the check a vector names on its input.
///
/// # Errors
/// [`VectorError`] when the vector is not an object of this revision with
/// a known `check` and the input members that check needs.
pub fn evaluate(vector: &Value) -> Result<Outcome, VectorError> {
    let revision = member(vector, "revision")?;
    if revision != WIRE_REVISION {
        return Err(VectorError(format!(
            "revision {revision}, expected {WIRE_REVISION:?}"
        )));
    }
    let check = member(vector, "check")?
        .as_str()
        .ok_or_else(|| VectorError("check is not a string".into()))?;
    let input = member(vector, "input")?;
    use checkfu_sandbox_contract::capabilities::SandboxProviderCapabilities as Caps;
    use checkfu_sandbox_contract::types::*;
    if let Some(type_name) = check.strip_prefix("decode:") {
        let decode = schema::decoder(type_name)
            .ok_or_else(|| VectorError(format!("unknown type {type_name:?}")))?;
        return Ok(match decode(input) {
            Ok(()) => Outcome::Accepted,
            Err(e) => refused(e),
        });
    }
    if let Some(type_name) = check.strip_prefix("validate:") {
        let outcome = match type_name {
            "SandboxCommand" => {
                let command = part!(input, "request", SandboxCommand, Command);
                let max = member(input, "max_duration_seconds")?
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| VectorError("max_duration_seconds is not a u32".into()))?;
                first(validate::command(&command, max), |m| {
                    validate::invalid_request(op::EXECUTE, m)
                })
            }
            "SandboxProcessRequest" => {
                let r = part!(input, "request", SandboxProcessRequest, ProcessRequest);
                first(validate::process_request(&r), |m| {
                    validate::invalid_request(op::OPEN_PROCESS, m)
                })
            }
            "ReadFileRequest" => {
                let r = part!(input, "request", ReadFileRequest, ReadFileRequest);
                first(validate::read_file_request(&r), |m| {
                    validate::invalid_request(op::READ_FILE, m)
                })
            }
            "ReadFilesRequest" => {
                let r = part!(input, "request", ReadFilesRequest, ReadFilesRequest);
                first(validate::read_files_request(&r), |m| {
                    validate::invalid_request(op::READ_FILES, m)
                })
            }
            "ListDirRequest" => {
                let r = part!(input, "request", ListDirRequest, ListDirRequest);
                first(validate::list_dir_request(&r), |m| {
                    validate::invalid_request(op::LIST_DIR, m)
                })
            }
            "ListProjectDirRequest" => {
                let r = part!(
                    input,
                    "request",
                    ListProjectDirRequest,
                    ListProjectDirRequest
                );
                first(validate::list_project_dir_request(&r), |m| {
                    validate::invalid_request(op::LIST_PROJECT_DIR, m)
                })
            }
            "CleanupRequest" => {
                let r = part!(input, "request", CleanupRequest, CleanupRequest);
                first(validate::cleanup_request(&r), |m| {
                    validate::invalid_request(op::CLEANUP, m)
                })
            }
            "WriteFileRequest" => {
                let r = part!(input, "request", WriteFileRequest, WriteFileRequest);
                first(validate::write_file_request(&r), |m| {
                    validate::invalid_request(op::WRITE_FILE, m)
                })
            }
            "ActiveWriteRequest" => {
                let r = part!(input, "request", ActiveWriteRequest, ActiveWriteRequest);
                first(validate::active_write_request(&r), |m| {
                    validate::invalid_request(op::BEGIN_ACTIVE_WRITE, m)
                })
            }
            "SandboxProvisionRequest" => {
                let r = part!(input, "request", SandboxProvisionRequest, ProvisionRequest);
                let max = member(input, "max_mounts")?
                    .as_u64()
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(|| VectorError("max_mounts is not a u8".into()))?;
                first(validate::mounts(&r.mounts, max), |m| {
                    validate::mounts_unavailable(&m)
                })
            }
            other => return Err(VectorError(format!("no validator for {other:?}"))),
        };
        return Ok(outcome);
    }
    if check == FRAMES_CHECK {
        return open_process_frames(input);
    }
    if let Some(type_name) = check.strip_prefix("result:") {
        use checkfu_sandbox_contract::results;
        let protocol = |operation: Operation, m: Option<checkfu_sandbox_contract::Mismatch>| match m
        {
            None => Outcome::Accepted,
            Some(m) => refused(m.into_error(operation)),
        };
        let outcome = match type_name {
            "ReadFilesResult" => {
                let r = part!(input, "request", ReadFilesRequest, ReadFilesRequest);
                let got = part!(input, "result", ReadFilesResult, ReadFilesResult);
                protocol(
                    op::READ_FILES,
                    results::read_files_result(&r.files, r.aggregate_maximum_bytes, &got.files),
                )
            }
            "ListDirResult" => {
                let r = part!(input, "request", ListDirRequest, ListDirRequest);
                let got = part!(input, "result", ListDirResult, ListDirResult);
                protocol(
                    op::LIST_DIR,
                    results::list_dir_result(&r.root, r.max_entries, &got),
                )
            }
            "ListProjectDirResult" => {
                let r = part!(
                    input,
                    "request",
                    ListProjectDirRequest,
                    ListProjectDirRequest
                );
                let got = part!(input, "result", ListProjectDirResult, ListProjectDirResult);
                protocol(
                    op::LIST_PROJECT_DIR,
                    results::list_project_dir_result(&r.root, r.max_entries, &got),
                )
            }
            "ReleaseDisposition" => {
                let r = part!(input, "request", ReleaseRequest, ReleaseRequest);
                let got = part!(input, "result", ReleaseDisposition, ReleaseDisposition);
                protocol(
                    op::RELEASE,
                    results::release_disposition(r.snapshot_expires_at.as_ref(), &got),
                )
            }
            "SandboxCommandResult" => {
                let r = part!(input, "request", ExecuteRequest, ExecuteRequest);
                let got = part!(input, "result", SandboxCommandResult, CommandResult);
                protocol(
                    op::EXECUTE,
                    results::command_result(r.command.output_limit_bytes, &got),
                )
            }
            other => return Err(VectorError(format!("no result check for {other:?}"))),
        };
        return Ok(outcome);
    }
    let outcome = match check {
        "instance_identity" => {
            let request = part!(input, "request", SandboxProvisionRequest, ProvisionRequest);
            let state = part!(input, "expected_state", InstanceState, InstanceState);
            let envelope = part!(input, "envelope", Caps, Capabilities);
            if let Err(e) = check_capabilities(&envelope) {
                return Ok(refused(e));
            }
            let returned = part!(input, "returned", SandboxInstance, Instance);
            first(check_instance(&request, state, &envelope, &returned), |m| {
                m.into_error(Operation::InstanceIdentity)
            })
        }
        "snapshot_identity" => {
            let source = part!(input, "source", SandboxInstance, Instance);
            let expires = part!(
                input,
                "requested_expires_at",
                checkfu_sandbox_contract::Timestamp,
                Timestamp
            );
            let returned = part!(input, "returned", SandboxSnapshot, Snapshot);
            first(check_snapshot(&source, &expires, &returned), |m| {
                m.into_error(Operation::SnapshotIdentity)
            })
        }
        "clone_identity" => {
            let source = part!(input, "source", SandboxSnapshot, Snapshot);
            let target = member(input, "target_session_id")?
                .as_str()
                .ok_or_else(|| VectorError("target_session_id is not a string".into()))?;
            let returned = part!(input, "returned", SandboxSnapshot, Snapshot);
            first(check_clone(&source, target, &returned), |m| {
                m.into_error(Operation::CloneIdentity)
            })
        }
        "open_process_identity" => {
            let instance = part!(input, "instance", SandboxInstance, Instance);
            let request = part!(input, "request", SandboxProcessRequest, ProcessRequest);
            let envelope = part!(input, "envelope", Caps, Capabilities);
            if let Err(e) = check_capabilities(&envelope) {
                return Ok(refused(e));
            }
            let evidence = part!(input, "evidence", SandboxProcessEvidence, ProcessEvidence);
            first(
                check_process_evidence(&instance, &request, &envelope, &evidence),
                |m| m.into_error(Operation::OpenProcessIdentity),
            )
        }
        other => return Err(VectorError(format!("unknown check {other:?}"))),
    };
    Ok(outcome)
}

/// The check of a sequence of openProcess frames.
pub(crate) const FRAMES_CHECK: &str = "frames:open_process";

/// Runs a sequence of openProcess frames as the runner receives them
/// (`input`: `{"replay_window_bytes", "frames": [{"method", "params"}]}`):
/// each frame decodes strictly, and stdout and stderr are each held to the
/// wire crate's [`OutputAccount`] (no gap, the replay window, `eof` at
/// exactly the bytes received); `process/ack` frames are the runner's
/// acknowledgements. A refusal is `SandboxProtocolInvalid` naming
/// `<method>.<field>`, as the client reports it.
fn open_process_frames(input: &Value) -> Result<Outcome, VectorError> {
    use checkfu_sandbox_wire::protocol::{
        method, AckFrame, EofFrame, ExitFrame, OutputAccount, OutputFrame, ProcessFailedFrame,
        StreamName,
    };
    let window = member(input, "replay_window_bytes")?
        .as_u64()
        .ok_or_else(|| VectorError("replay_window_bytes is not a u64".into()))?;
    let frames = member(input, "frames")?
        .as_array()
        .ok_or_else(|| VectorError("frames is not an array".into()))?;
    let mut accounts = [OutputAccount::default(); 2];
    let slot = |s: StreamName| match s {
        StreamName::Stdout => 0,
        StreamName::Stderr => 1,
    };
    let violation = |m: checkfu_sandbox_contract::Mismatch| {
        Ok(refused(SandboxError::protocol(
            op::OPEN_PROCESS,
            m.field,
            m.expected,
            m.actual,
        )))
    };
    for frame in frames {
        let name = member(frame, "method")?
            .as_str()
            .ok_or_else(|| VectorError("method is not a string".into()))?;
        let params = member(frame, "params")?;
        macro_rules! decode {
            ($ty:ty) => {
                match checkfu_sandbox_contract::wire::decode_fields::<$ty>(params) {
                    Ok(f) => f,
                    Err(mut m) => {
                        m.field = format!("{name}.{}", m.field);
                        return violation(m);
                    }
                }
            };
        }
        let step = match name {
            method::PROCESS_OUTPUT => {
                let f = decode!(OutputFrame);
                accounts[slot(f.stream)]
                    .output(f.offset, f.data_base64.len(), window)
                    .map(drop)
            }
            method::PROCESS_EOF => {
                let f = decode!(EofFrame);
                accounts[slot(f.stream)].eof(f.offset)
            }
            method::PROCESS_ACK => {
                let f = decode!(AckFrame);
                accounts[slot(f.stream)].ack(f.offset);
                Ok(())
            }
            method::PROCESS_EXIT => {
                decode!(ExitFrame);
                Ok(())
            }
            method::PROCESS_FAILED => {
                decode!(ProcessFailedFrame);
                Ok(())
            }
            other => Err(checkfu_sandbox_contract::Mismatch::new(
                "method",
                "a process/* notification",
                other,
            )),
        };
        if let Err(m) = step {
            return violation(m);
        }
    }
    Ok(Outcome::Accepted)
}

/// One member of a vector's `expect` that the outcome disagrees with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{member}: expected {expected}, actual {actual}")]
pub struct ExpectationMismatch {
    /// The member of `expect`: `field`, `error.<key>` or `rule`.
    pub member: String,
    /// What the vector expects, as written in it.
    pub expected: String,
    /// What the check produced.
    pub actual: String,
}

/// How a vector's outcome disagrees with its `expect` (or why it could not
/// be run).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    /// The vector is malformed ([`evaluate`]'s error, or no `expect`).
    #[error(transparent)]
    Malformed(#[from] VectorError),
    /// `expect.outcome` is `accepted` but the check refused the input.
    #[error("expected accepted, got refused: {}: {refusal}", refusal.tag())]
    UnexpectedRefusal {
        /// The refusal the check produced.
        refusal: SandboxError,
    },
    /// `expect.outcome` is `refused` but the check accepted the input.
    #[error("expected refused, got accepted")]
    UnexpectedAcceptance,
    /// Both refused, but the refusal differs from `expect` in the listed
    /// members.
    #[error("{} (error: {wire})", mismatches.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    RefusalMismatch {
        /// Every disagreeing member, in `field`, `error.*`, `rule` order.
        mismatches: Vec<ExpectationMismatch>,
        /// The refusal as it goes on the wire.
        wire: Value,
    },
    /// `expect.outcome` is missing or neither `accepted` nor `refused`.
    #[error("expect.outcome is {outcome:?}, not accepted or refused")]
    UnknownOutcome {
        /// The value found, if it is a string.
        outcome: Option<String>,
    },
}

/// Runs a vector and compares the outcome with its `expect`.
///
/// # Errors
/// [`VerifyError`]: the disagreement, or [`VerifyError::Malformed`].
pub fn verify(vector: &Value) -> Result<(), VerifyError> {
    let outcome = evaluate(vector)?;
    let expect = member(vector, "expect")?;
    let wanted = expect.get("outcome").and_then(Value::as_str);
    match (wanted, outcome) {
        (Some("accepted"), Outcome::Accepted) => Ok(()),
        (Some("accepted"), Outcome::Refused { error, .. }) => {
            Err(VerifyError::UnexpectedRefusal { refusal: error })
        }
        (Some("refused"), Outcome::Accepted) => Err(VerifyError::UnexpectedAcceptance),
        (Some("refused"), Outcome::Refused { field, error }) => {
            let mut mismatches = Vec::new();
            if let Some(f) = expect.get("field").and_then(Value::as_str) {
                if f != field {
                    mismatches.push(ExpectationMismatch {
                        member: "field".into(),
                        expected: format!("{f:?}"),
                        actual: format!("{field:?}"),
                    });
                }
            }
            let wire = serde_json::to_value(&error).unwrap_or(Value::Null);
            if let Some(Value::Object(subset)) = expect.get("error") {
                for (k, v) in subset {
                    let actual = wire.get(k).unwrap_or(&Value::Null);
                    if actual != v {
                        mismatches.push(ExpectationMismatch {
                            member: format!("error.{k}"),
                            expected: v.to_string(),
                            actual: actual.to_string(),
                        });
                    }
                }
            }
            if let Some(rule) = expect.get("rule").and_then(Value::as_str) {
                let text = wire.get("expected").and_then(Value::as_str).unwrap_or("");
                if !text.starts_with(&format!("{rule}: ")) {
                    mismatches.push(ExpectationMismatch {
                        member: "rule".into(),
                        expected: format!("{rule:?}"),
                        actual: format!("expected text {text:?}"),
                    });
                }
            }
            if mismatches.is_empty() {
                Ok(())
            } else {
                Err(VerifyError::RefusalMismatch { mismatches, wire })
            }
        }
        (other, _) => Err(VerifyError::UnknownOutcome {
            outcome: other.map(str::to_owned),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_sorted_and_unique() {
        let a = generate();
        assert_eq!(a, generate());
        let paths: Vec<&str> = a.iter().map(|f| f.path.as_str()).collect();
        let mut sorted_paths = paths.clone();
        sorted_paths.sort();
        sorted_paths.dedup();
        assert_eq!(paths, sorted_paths);
        assert!(a.iter().all(|f| f.contents.ends_with('\n')));
    }

    #[test]
    fn every_vector_verifies() {
        let failures: Vec<String> = vectors::all()
            .iter()
            .filter_map(|v| {
                verify(&v.to_json())
                    .err()
                    .map(|e| format!("{}: {e}", v.name))
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
