//! The golden vectors. Each starts from a valid fixture, changes one thing,
//! and declares the outcome that change must produce.

use serde::Serialize;
use serde_json::{json, Value};

use super::fixtures::*;
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

/// The wire rendering of a value, as mismatches report both values.
fn show<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

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
    v.0
}

fn decode_valid(v: &mut Vectors) {
    let caps = "SandboxProviderCapabilities";
    v.ok_decode("decode-capabilities-minimal", "The spec's minimum provider: hosted, one tier, none network, ZDR only, no snapshots, no mounts.", caps, j(&caps_minimal()));
    v.ok_decode(
        "decode-capabilities-full",
        "Every optional capability claimed consistently; max_mounts at its bound of 64.",
        caps,
        j(&caps_full()),
    );
    let mut defaults = j(&caps_minimal());
    for key in [
        "snapshot_clone",
        "snapshot_custody",
        "list_dir",
        "physically_contained_file_read",
        "active_mount_write",
        "egress_certification",
    ] {
        defaults = remove(defaults, &format!("/{key}"));
    }
    v.ok_decode(
        "decode-capabilities-optional-absent",
        "Every optional envelope member absent: each takes its weakest default.",
        caps,
        defaults,
    );
    v.ok_decode(
        "decode-provision-request",
        "A provision request with an allowlist profile and two mounts.",
        "SandboxProvisionRequest",
        j(&provision_request()),
    );
    let none_policy = set(
        j(&provision_request()),
        "/profile/network_policy",
        json!({"mode": "none"}),
    );
    v.ok_decode(
        "decode-provision-request-network-none",
        "A profile whose network policy is the unit mode none.",
        "SandboxProvisionRequest",
        none_policy,
    );
    v.ok_decode(
        "decode-instance-provisioning",
        "An instance as provision returns it.",
        "SandboxInstance",
        j(&instance(InstanceState::Provisioning)),
    );
    v.ok_decode(
        "decode-instance-active",
        "An instance as activate and resume return it.",
        "SandboxInstance",
        j(&instance(InstanceState::Active)),
    );
    v.ok_decode(
        "decode-write-file-request",
        "Bytes travel as standard padded base64.",
        "WriteFileRequest",
        j(&WriteFileRequest {
            instance_id: "inst-1".into(),
            path: "/mnt/session/outputs/a.txt".into(),
            content_base64: Bytes::from("hi"),
        }),
    );
    v.ok_decode(
        "decode-activate-request",
        "activate names the instance only.",
        "ActivateRequest",
        json!({"instance_id": "inst-1"}),
    );
    v.ok_decode(
        "decode-execute-request",
        "An execute request with stdin, environment and bounds.",
        "ExecuteRequest",
        j(&ExecuteRequest {
            instance_id: "inst-1".into(),
            command: command(),
        }),
    );
    let minimal_command = json!({"executable": "true", "working_directory": "/", "timeout_seconds": 1, "output_limit_bytes": 0});
    v.ok_decode(
        "decode-command-optional-absent",
        "arguments, environment and stdin_base64 may be absent.",
        "SandboxCommand",
        minimal_command,
    );
    let result = |exit: Value| json!({"exit": exit, "stdout_base64": "b3V0", "stderr_base64": "", "started_at": "2026-11-30T07:50:00.000Z", "finished_at": "2026-11-30T07:50:01.250Z"});
    v.ok_decode(
        "decode-command-result-exit-code",
        "A settlement with exactly one cause: an exit code.",
        "SandboxCommandResult",
        result(json!({"exit_code": 3})),
    );
    v.ok_decode(
        "decode-command-result-signal",
        "A settlement with exactly one cause: a signal.",
        "SandboxCommandResult",
        result(json!({"signal": "SIGKILL"})),
    );
    v.ok_decode(
        "decode-command-result-timed-out",
        "A settlement with exactly one cause: the timeout.",
        "SandboxCommandResult",
        result(json!({"timed_out": true})),
    );
    v.ok_decode("decode-read-file-request", "readFile carries its allowed_root.", "ReadFileRequest", json!({"instance_id": "inst-1", "path": "/workspace/project/a", "allowed_root": "/workspace/project", "maximum_bytes": 1024}));
    v.ok_decode(
        "decode-file-content",
        "readFile's result.",
        "SandboxFileContent",
        json!({"path": "/workspace/project/a", "content_base64": "aGVsbG8="}),
    );
    v.ok_decode(
        "decode-read-files-request",
        "A readFiles group whose aggregate is exactly the sum.",
        "ReadFilesRequest",
        j(&read_files_request(3, 100)),
    );
    let outcomes = json!({"files": [
        {"outcome": "read", "path": "/p/a", "content_base64": "YQ=="},
        {"outcome": "not_found", "path": "/p/b"},
        {"outcome": "too_large", "path": "/p/c", "size_bytes": 99},
        {"outcome": "outside_root", "path": "/p/d"},
        {"outcome": "not_regular_file", "path": "/p/e"}
    ]});
    v.ok_decode(
        "decode-read-files-result-every-outcome",
        "Each member of the closed per-file union.",
        "ReadFilesResult",
        outcomes,
    );
    v.ok_decode(
        "decode-list-dir-request",
        "listDir at its entry bound.",
        "ListDirRequest",
        json!({"instance_id": "inst-1", "root": "/workspace/project", "max_entries": 100000}),
    );
    v.ok_decode("decode-list-dir-result", "Regular files with size and SHA-256.", "ListDirResult", json!({"entries": [{"path": "/workspace/project/a", "size_bytes": 5, "sha256": digest('3')}]}));
    v.ok_decode(
        "decode-list-project-dir-request",
        "listProjectDir.",
        "ListProjectDirRequest",
        json!({"instance_id": "inst-1", "root": "/workspace/project", "max_entries": 10}),
    );
    let kinds = json!({"complete": true, "entries": [
        {"path": "/p/a", "kind": "regular", "size_bytes": 5, "sha256": digest('3')},
        {"path": "/p/l", "kind": "symlink", "target": "../etc/passwd"},
        {"path": "/p/m", "kind": "submodule"},
        {"path": "/p/d", "kind": "device"},
        {"path": "/p/s", "kind": "socket"},
        {"path": "/p/f", "kind": "fifo"},
        {"path": "/p/o", "kind": "other"}
    ]});
    v.ok_decode(
        "decode-list-project-dir-result-every-kind",
        "Every leaf kind named, special files included.",
        "ListProjectDirResult",
        kinds,
    );
    v.ok_decode(
        "decode-snapshot-request",
        "snapshot with its retention deadline.",
        "SnapshotRequest",
        json!({"instance_id": "inst-1", "expires_at": snapshot_expiry()}),
    );
    v.ok_decode(
        "decode-snapshot-request-leap-day",
        "29 February of a leap year is a real date.",
        "SnapshotRequest",
        json!({"instance_id": "inst-1", "expires_at": "2028-02-29T23:59:59.999Z"}),
    );
    v.ok_decode(
        "decode-snapshot",
        "A snapshot reference.",
        "SandboxSnapshot",
        j(&snapshot()),
    );
    v.ok_decode(
        "decode-clone-snapshot-request",
        "cloneSnapshot names the source and the target Session.",
        "CloneSnapshotRequest",
        json!({"source": snapshot(), "target_session_id": "sess-2"}),
    );
    v.ok_decode(
        "decode-release-request-durable",
        "Durable release with the snapshot deadline.",
        "ReleaseRequest",
        json!({"instance_id": "inst-1", "snapshot_expires_at": snapshot_expiry()}),
    );
    v.ok_decode(
        "decode-release-request-zdr",
        "ZDR release: no snapshot deadline.",
        "ReleaseRequest",
        json!({"instance_id": "inst-1"}),
    );
    v.ok_decode(
        "decode-release-disposition-released",
        "Durable release settles a snapshot.",
        "ReleaseDisposition",
        json!({"disposition": "released", "snapshot": snapshot()}),
    );
    v.ok_decode(
        "decode-release-disposition-destroyed",
        "ZDR release destroys every trace.",
        "ReleaseDisposition",
        json!({"disposition": "destroyed"}),
    );
    v.ok_decode(
        "decode-resume-request",
        "resume: the identity to echo and the snapshot.",
        "ResumeRequest",
        json!({"request": provision_request(), "snapshot": snapshot()}),
    );
    v.ok_decode(
        "decode-destroy-request",
        "destroy.",
        "DestroyRequest",
        json!({"instance_id": "inst-1"}),
    );
    v.ok_decode(
        "decode-destroy-snapshot-request",
        "destroySnapshot.",
        "DestroySnapshotRequest",
        json!({"snapshot_id": "snap-1"}),
    );
    v.ok_decode("decode-cleanup-request", "cleanup with pins.", "CleanupRequest", json!({"now": "2026-11-30T09:00:00.000Z", "orphaned_before": "2026-11-30T08:00:00.000Z", "pinned_snapshots": ["snap-1"]}));
    v.ok_decode(
        "decode-cleanup-result",
        "Two id arrays.",
        "CleanupResult",
        json!({"instances": ["inst-1"], "snapshots": []}),
    );
    v.ok_decode(
        "decode-process-request",
        "openProcess: no stdin, timeout or output limit.",
        "SandboxProcessRequest",
        j(&process_request()),
    );
    v.ok_decode(
        "decode-process-evidence",
        "Process evidence.",
        "SandboxProcessEvidence",
        j(&evidence()),
    );
    v.ok_decode(
        "decode-process-exit-code",
        "A process exit: a code.",
        "ProcessExit",
        json!({"exit_code": 0}),
    );
    v.ok_decode(
        "decode-process-exit-signal",
        "A process exit: a signal.",
        "ProcessExit",
        json!({"signal": "SIGTERM"}),
    );
    v.ok_decode("decode-active-write-request", "A beginActiveWrite batch.", "ActiveWriteRequest", json!({"instance_id": "inst-1", "transaction_id": "tx-1", "files": [{"path": "/workspace/project/a", "content_base64": "YQ=="}]}));
    v.ok_decode("decode-active-write-outcome-committed", "A committed transaction.", "ActiveWriteOutcome", json!({"outcome": "committed", "transaction_id": "tx-1", "mount_path": "/workspace/project", "published": ["/workspace/project/a"]}));
    v.ok_decode("decode-active-write-outcome-rolled-back", "A rolled-back transaction.", "ActiveWriteOutcome", json!({"outcome": "rolled_back", "transaction_id": "tx-1", "reason": "paused workload did not settle"}));
    v.ok_decode(
        "decode-error-lifecycle-conflict",
        "A tagged error.",
        "SandboxError",
        j(&SandboxError::conflict(
            "open_process",
            "active",
            "process_already_open",
        )),
    );
    v.ok_decode("decode-error-capability-unavailable", "The detail may be absent.", "SandboxError", json!({"_tag": "SandboxCapabilityUnavailable", "requirement": "physically_contained_file_read"}));
    v.ok_decode(
        "decode-error-protocol-invalid",
        "A protocol error names the field and both values.",
        "SandboxError",
        j(&SandboxError::protocol(
            "instance_identity",
            "expires_at",
            "\"2026-11-30T08:30:00.000Z\"",
            "\"2026-11-30T09:30:00.000Z\"",
        )),
    );
    let failure = SandboxFailure::from(SandboxError::protocol(
        "snapshot_identity",
        "expires_at",
        "a",
        "b",
    ))
    .then(SandboxError::failed(
        "snapshot_rollback",
        FailureReason::TimedOut,
        "30 s",
    ));
    v.ok_decode(
        "decode-failure-combined",
        "A rejection combined with a rollback that timed out, in order.",
        "SandboxFailure",
        j(&failure),
    );
    v.ok_decode("decode-error-file-too-large", "A file over its bound.", "SandboxError", json!({"_tag": "SandboxFileTooLarge", "path": "/p/a", "limit_bytes": 16777216, "actual_bytes": 16777217}));
}

fn envelope_invalid(v: &mut Vectors) {
    let min = || j(&caps_minimal());
    let full = || j(&caps_full());
    v.bad_envelope(
        "envelope-snapshot-clone-requires-snapshots",
        "snapshot_clone: true while snapshots is false: a clone source is a snapshot you produced.",
        set(min(), "/snapshot_clone", json!(true)),
        "snapshot_clone",
        EnvelopeRule::SnapshotCloneRequiresSnapshots,
        "accepts",
    );
    v.bad_envelope(
        "envelope-durable-requires-snapshots",
        "durable retention while snapshots is false.",
        set(
            min(),
            "/retention_modes",
            json!(["ephemeral_zdr", "durable"]),
        ),
        "retention_modes",
        EnvelopeRule::DurableRequiresSnapshots,
        "accepts",
    );
    v.bad_envelope(
        "envelope-provider-custody-requires-snapshots",
        "snapshot_custody: provider while snapshots is false.",
        set(min(), "/snapshot_custody", json!("provider")),
        "snapshot_custody",
        EnvelopeRule::ProviderCustodyRequiresSnapshots,
        "accepts",
    );
    v.bad_envelope(
        "envelope-allowlist-requires-egress-certification",
        "allowlist offered with egress_certification absent (unsupported).",
        remove(
            set(min(), "/network_modes", json!(["none", "allowlist"])),
            "/egress_certification",
        ),
        "egress_certification",
        EnvelopeRule::AllowlistRequiresEgressCertification,
        "accepts",
    );
    v.bad_envelope(
        "envelope-active-mount-write-requires-mounts",
        "active_mount_write: true with max_mounts 0.",
        set(min(), "/active_mount_write", json!(true)),
        "active_mount_write",
        EnvelopeRule::ActiveMountWriteRequiresMounts,
        "accepts",
    );
    v.bad_envelope(
        "envelope-max-mounts-over-bound",
        "max_mounts 65, one over the bound of 64.",
        set(full(), "/max_mounts", json!(65)),
        "max_mounts",
        EnvelopeRule::MaxMountsBound,
        "rejects",
    );
    v.bad_decode(
        "envelope-max-mounts-not-a-byte",
        "max_mounts 256 does not even decode.",
        "SandboxProviderCapabilities",
        set(full(), "/max_mounts", json!(256)),
        "max_mounts",
        "rejects",
    );
    for list in ["tiers", "platforms", "network_modes", "retention_modes"] {
        let name = format!("envelope-non-empty-{}", list.replace('_', "-"));
        v.bad_envelope(
            &name,
            &format!("{list} is empty."),
            set(full(), &format!("/{list}"), json!([])),
            list,
            EnvelopeRule::NonEmpty,
            "rejects",
        );
    }
    let dupes = [
        ("tiers", json!(["container", "container"])),
        (
            "platforms",
            json!([{"os": "linux", "architecture": "amd64"}, {"os": "linux", "architecture": "amd64"}]),
        ),
        ("network_modes", json!(["none", "none"])),
        ("retention_modes", json!(["ephemeral_zdr", "ephemeral_zdr"])),
        ("package_managers", json!(["apt", "pip", "apt"])),
    ];
    for (list, value) in dupes {
        let name = format!("envelope-no-duplicates-{}", list.replace('_', "-"));
        v.bad_envelope(
            &name,
            &format!("{list} repeats a member."),
            set(min(), &format!("/{list}"), value),
            list,
            EnvelopeRule::NoDuplicates,
            "rejects",
        );
    }
    for field in ["provider_revision", "materialization_revision"] {
        let name = format!("envelope-empty-{}", field.replace('_', "-"));
        v.bad_envelope(
            &name,
            &format!("{field} is empty; instances must echo it."),
            set(min(), &format!("/{field}"), json!("")),
            field,
            EnvelopeRule::RevisionNonEmpty,
            "rejects",
        );
    }
    v.bad_decode(
        "envelope-unknown-field",
        "An envelope member the revision does not define.",
        "SandboxProviderCapabilities",
        set(min(), "/gpu", json!(true)),
        "gpu",
        "rejects",
    );
    v.bad_decode(
        "envelope-unknown-enforcement-axis",
        "A tenth enforcement axis, nested.",
        "SandboxProviderCapabilities",
        set(min(), "/enforcement/gpu", json!("not_enforced")),
        "enforcement.gpu",
        "rejects",
    );
    v.bad_decode(
        "envelope-missing-enforcement-axis",
        "An enforcement axis absent: all nine are required.",
        "SandboxProviderCapabilities",
        remove(min(), "/enforcement/privilege"),
        "enforcement.privilege",
        "rejects",
    );
    v.bad_decode(
        "envelope-unknown-egress-grade",
        "egress_certification outside its closed set.",
        "SandboxProviderCapabilities",
        set(min(), "/egress_certification", json!("best_effort")),
        "egress_certification",
        "rejects",
    );
}

fn decode_invalid(v: &mut Vectors) {
    // Timestamps: canonical UTC YYYY-MM-DDTHH:MM:SS.mmmZ only.
    let stamps = [
        (
            "offset",
            "2026-11-30T07:30:00.000+00:00",
            "A zero offset instead of Z.",
        ),
        (
            "negative-offset",
            "2026-11-30T02:30:00.000-05:00",
            "A non-UTC offset.",
        ),
        (
            "missing-fraction",
            "2026-11-30T07:30:00Z",
            "No fraction digits.",
        ),
        (
            "short-fraction",
            "2026-11-30T07:30:00.12Z",
            "Two fraction digits.",
        ),
        (
            "long-fraction",
            "2026-11-30T07:30:00.1234Z",
            "Four fraction digits.",
        ),
        (
            "lower-case-z",
            "2026-11-30T07:30:00.000z",
            "A lower-case z.",
        ),
        (
            "leap-second",
            "2026-12-31T23:59:60.000Z",
            "A leap second :60.",
        ),
        (
            "february-30",
            "2026-02-30T00:00:00.000Z",
            "30 February does not exist.",
        ),
        (
            "february-29-common-year",
            "2027-02-29T00:00:00.000Z",
            "2027 is not a leap year.",
        ),
        ("hour-24", "2026-11-30T24:00:00.000Z", "Hour 24."),
        (
            "space-separator",
            "2026-11-30 07:30:00.000Z",
            "A space instead of T.",
        ),
    ];
    for (slug, text, description) in stamps {
        v.bad_decode(
            &format!("timestamp-{slug}"),
            description,
            "SnapshotRequest",
            json!({"instance_id": "inst-1", "expires_at": text}),
            "expires_at",
            "rejects",
        );
    }
    let result = j(&SandboxCommandResult {
        exit: ExitCause::ExitCode(0),
        stdout_base64: Bytes::default(),
        stderr_base64: Bytes::default(),
        started_at: ts("2026-11-30T07:50:00.000Z"),
        finished_at: ts("2026-11-30T07:50:01.000Z"),
    });
    v.bad_decode(
        "timestamp-nested-lower-case-z",
        "A non-canonical started_at inside a command result.",
        "SandboxCommandResult",
        set(
            result.clone(),
            "/started_at",
            json!("2026-11-30t07:50:00.000z"),
        ),
        "started_at",
        "rejects",
    );

    // Digests: ^sha256:[0-9a-f]{64}$.
    let entry = |d: String| json!({"entries": [{"path": "/p/a", "size_bytes": 1, "sha256": d}]});
    let digests = [
        (
            "upper-case",
            format!("sha256:{}", hex('A')),
            "Upper-case hex.",
        ),
        (
            "short",
            format!("sha256:{}", &hex('a')[1..]),
            "63 hex digits.",
        ),
        ("long", format!("sha256:{}0", hex('a')), "65 hex digits."),
        (
            "wrong-algorithm",
            format!("sha512:{}", hex('a')),
            "Another algorithm.",
        ),
        ("no-prefix", hex('a'), "No sha256: prefix."),
    ];
    for (slug, d, description) in digests {
        v.bad_decode(
            &format!("digest-{slug}"),
            description,
            "ListDirResult",
            entry(d),
            "entries[0].sha256",
            "rejects",
        );
    }
    let req = || j(&provision_request());
    v.bad_decode(
        "digest-nested-profile-digest",
        "An upper-case profile_digest inside the profile.",
        "SandboxProvisionRequest",
        set(
            req(),
            "/profile/profile_digest",
            json!(format!("sha256:{}", hex('B'))),
        ),
        "profile.profile_digest",
        "rejects",
    );
    v.bad_decode(
        "image-reference-tag",
        "root_image by tag rather than pinned by digest.",
        "SandboxProvisionRequest",
        set(req(), "/root_image", json!("busybox:latest")),
        "root_image",
        "rejects",
    );
    v.bad_decode(
        "image-reference-upper-case-name",
        "An upper-case repository name.",
        "SandboxProvisionRequest",
        set(
            req(),
            "/root_image",
            json!(ROOT_IMAGE.replace("checkfu", "Checkfu")),
        ),
        "root_image",
        "rejects",
    );

    // Exit settlements: exactly one cause.
    let exits = [
        (
            "exit-two-causes",
            json!({"exit_code": 1, "signal": "SIGKILL"}),
            "exit",
            "An exit code and a signal.",
        ),
        (
            "exit-three-causes",
            json!({"exit_code": 1, "signal": "SIGKILL", "timed_out": true}),
            "exit",
            "All three causes.",
        ),
        ("exit-no-cause", json!({}), "exit", "No cause at all."),
        (
            "exit-code-and-timeout",
            json!({"exit_code": 0, "timed_out": true}),
            "exit",
            "An exit code and the timeout.",
        ),
        (
            "exit-timed-out-false",
            json!({"timed_out": false}),
            "exit",
            "timed_out is true or absent, never false.",
        ),
        (
            "exit-code-over-255",
            json!({"exit_code": 256}),
            "exit.exit_code",
            "An exit code outside 0..=255.",
        ),
        (
            "exit-code-negative",
            json!({"exit_code": -1}),
            "exit.exit_code",
            "A negative exit code.",
        ),
        (
            "exit-unknown-signal",
            json!({"signal": "SIGWINCH"}),
            "exit.signal",
            "A signal name outside the vocabulary.",
        ),
        (
            "exit-unknown-member",
            json!({"exit_code": 0, "core_dumped": true}),
            "exit.core_dumped",
            "An unknown member inside exit.",
        ),
    ];
    for (name, exit, field, description) in exits {
        v.bad_decode(
            name,
            description,
            "SandboxCommandResult",
            set(result.clone(), "/exit", exit),
            field,
            "rejects",
        );
    }
    v.bad_decode(
        "process-exit-two-causes",
        "A process exit with a code and a signal.",
        "ProcessExit",
        json!({"exit_code": 0, "signal": "SIGTERM"}),
        ".",
        "rejects",
    );
    v.bad_decode(
        "process-exit-no-cause",
        "A process exit with neither.",
        "ProcessExit",
        json!({}),
        ".",
        "rejects",
    );

    // Unknown members, top-level and nested.
    let inst = || j(&instance(InstanceState::Active));
    v.bad_decode(
        "unknown-field-top-level",
        "An unknown top-level member.",
        "ActivateRequest",
        json!({"instance_id": "inst-1", "force": true}),
        "force",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-instance",
        "An unknown member on an instance.",
        "SandboxInstance",
        set(inst(), "/hostname", json!("box")),
        "hostname",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-materialization",
        "An unknown member inside materialization.",
        "SandboxInstance",
        set(inst(), "/materialization/image_size_bytes", json!(1)),
        "materialization.image_size_bytes",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-profile-resources",
        "An unknown member two levels down.",
        "SandboxProvisionRequest",
        set(req(), "/profile/resources/gpus", json!(1)),
        "profile.resources.gpus",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-command",
        "An unknown member inside an execute command.",
        "ExecuteRequest",
        set(
            j(&ExecuteRequest {
                instance_id: "inst-1".into(),
                command: command(),
            }),
            "/command/shell",
            json!(true),
        ),
        "command.shell",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-network-policy-none",
        "An unknown member beside the unit network mode none.",
        "SandboxProvisionRequest",
        set(
            req(),
            "/profile/network_policy",
            json!({"mode": "none", "destinations": []}),
        ),
        "profile.network_policy.destinations",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-release-destroyed",
        "An unknown member beside the unit disposition destroyed.",
        "ReleaseDisposition",
        json!({"disposition": "destroyed", "snapshot": snapshot()}),
        "snapshot",
        "rejects",
    );
    v.bad_decode(
        "unknown-field-project-entry-fifo",
        "An unknown member on a special-file leaf (a flattened kind).",
        "ListProjectDirResult",
        json!({"complete": true, "entries": [{"path": "/p/f", "kind": "fifo", "mode": 420}]}),
        "entries[0].mode",
        "rejects",
    );
    v.bad_decode("unknown-field-project-entry-regular", "An unknown member on a regular-file leaf.", "ListProjectDirResult", json!({"complete": true, "entries": [{"path": "/p/a", "kind": "regular", "size_bytes": 1, "sha256": digest('3'), "mode": 420}]}), "entries[0].mode", "rejects");
    v.bad_decode(
        "unknown-field-read-files-outcome",
        "An unknown member on a per-file outcome.",
        "ReadFilesResult",
        json!({"files": [{"outcome": "not_found", "path": "/p/b", "errno": 2}]}),
        "files[0].errno",
        "rejects",
    );
    v.bad_decode("unknown-field-clone-source", "An unknown member inside the clone's source snapshot.", "CloneSnapshotRequest", json!({"source": set(j(&snapshot()), "/region", json!("eu")), "target_session_id": "sess-2"}), "source.region", "rejects");
    v.bad_decode(
        "unknown-field-error",
        "An unknown member on a tagged error.",
        "SandboxError",
        json!({"_tag": "SandboxInstanceNotFound", "instance_id": "inst-1", "hint": "gone"}),
        "hint",
        "rejects",
    );
    v.bad_decode("unknown-field-failure-cause", "An unknown member inside a combined failure's cause.", "SandboxFailure", json!({"causes": [{"_tag": "SandboxSnapshotNotFound", "snapshot_id": "snap-1", "hint": "gone"}]}), "causes[0].hint", "rejects");

    // Other shapes.
    v.bad_decode(
        "instance-unknown-state",
        "A state outside provisioning and active.",
        "SandboxInstance",
        set(inst(), "/state", json!("running")),
        "state",
        "rejects",
    );
    v.bad_decode(
        "instance-missing-expires-at",
        "A required member absent.",
        "SandboxInstance",
        remove(inst(), "/expires_at"),
        "expires_at",
        "rejects",
    );
    v.bad_decode(
        "instance-null-provider",
        "null for a required string.",
        "SandboxInstance",
        set(inst(), "/provider", Value::Null),
        "provider",
        "rejects",
    );
    v.bad_decode(
        "instance-negative-lease-epoch",
        "A negative lease epoch.",
        "SandboxInstance",
        set(inst(), "/lease_epoch", json!(-1)),
        "lease_epoch",
        "rejects",
    );
    v.bad_decode(
        "base64-unpadded",
        "Base64 without its padding.",
        "SandboxFileContent",
        json!({"path": "/p/a", "content_base64": "aGVsbG8"}),
        "content_base64",
        "rejects",
    );
    v.bad_decode(
        "base64-url-alphabet",
        "The URL-safe alphabet instead of the standard one.",
        "SandboxFileContent",
        json!({"path": "/p/a", "content_base64": "-_-_"}),
        "content_base64",
        "rejects",
    );
    v.bad_decode(
        "error-unknown-requirement",
        "A requirement outside the closed vocabulary.",
        "SandboxError",
        json!({"_tag": "SandboxCapabilityUnavailable", "requirement": "gpu"}),
        "requirement",
        "rejects",
    );
    v.bad_decode(
        "error-unknown-failure-reason",
        "A failure reason outside the closed set.",
        "SandboxError",
        json!({"_tag": "SandboxOperationFailed", "operation": "execute", "reason": "oops"}),
        "reason",
        "rejects",
    );
    v.bad_decode(
        "destination-port-over-u16",
        "An allowlist port over 65535.",
        "SandboxProvisionRequest",
        set(
            req(),
            "/profile/network_policy/destinations/0/port",
            json!(70000),
        ),
        "profile.network_policy.destinations[0].port",
        "rejects",
    );
}

fn identity_input(returned: &SandboxInstance, state: InstanceState) -> Value {
    json!({"request": provision_request(), "expected_state": state, "envelope": caps_full(), "returned": returned})
}

fn instance_identity(v: &mut Vectors) {
    let check = "instance_identity";
    v.ok_identity(
        "instance-identity-provisioning",
        "An instance that echoes the request after provision.",
        check,
        identity_input(
            &instance(InstanceState::Provisioning),
            InstanceState::Provisioning,
        ),
    );
    v.ok_identity(
        "instance-identity-active",
        "An instance that echoes the request after activate.",
        check,
        identity_input(&instance(InstanceState::Active), InstanceState::Active),
    );
    let base = instance(InstanceState::Provisioning);
    let r = provision_request();
    let caps = caps_full();
    let mut case = |field: &str,
                    description: &str,
                    expected: String,
                    actual: String,
                    change: &dyn Fn(&mut SandboxInstance)| {
        let mut returned = base.clone();
        change(&mut returned);
        let name = format!("instance-identity-{}", field.replace(['.', '_'], "-"));
        v.bad_identity(
            &name,
            description,
            check,
            identity_input(&returned, InstanceState::Provisioning),
            field,
            Some(expected),
            actual,
        );
    };
    case(
        "provider",
        "Another provider id.",
        show(&r.provider),
        show(&"docker"),
        &|i| i.provider = "docker".into(),
    );
    case(
        "placement",
        "Another placement.",
        show(&r.placement),
        show(&Placement::Hosted),
        &|i| i.placement = Placement::Hosted,
    );
    case(
        "state",
        "active straight after provision.",
        show(&InstanceState::Provisioning),
        show(&InstanceState::Active),
        &|i| i.state = InstanceState::Active,
    );
    case(
        "workspace_id",
        "Another Workspace.",
        show(&r.workspace_id),
        show(&"ws-2"),
        &|i| i.workspace_id = "ws-2".into(),
    );
    case(
        "session_id",
        "Another Session.",
        show(&r.session_id),
        show(&"sess-9"),
        &|i| i.session_id = "sess-9".into(),
    );
    case(
        "run_id",
        "Another Run.",
        show(&r.run_id),
        show(&"run-2"),
        &|i| i.run_id = "run-2".into(),
    );
    case(
        "attempt_id",
        "Another attempt.",
        show(&r.attempt_id),
        show(&"att-2"),
        &|i| i.attempt_id = "att-2".into(),
    );
    case(
        "lease_id",
        "Another lease.",
        show(&r.lease_id),
        show(&"lease-2"),
        &|i| i.lease_id = "lease-2".into(),
    );
    case(
        "lease_epoch",
        "A stale lease epoch (fencing token).",
        show(&r.lease_epoch),
        show(&6u64),
        &|i| i.lease_epoch = 6,
    );
    case(
        "target",
        "Another tier.",
        show(&r.target),
        show(&Tier::Microvm),
        &|i| i.target = Tier::Microvm,
    );
    let mut other_profile = r.profile.clone();
    other_profile.profile_version = 4;
    let op = other_profile.clone();
    case(
        "profile",
        "The profile echoed with another version.",
        show(&r.profile),
        show(&other_profile),
        &move |i| i.profile = op.clone(),
    );
    let arm = Platform {
        os: Os::Linux,
        architecture: Architecture::Arm64,
    };
    case(
        "platform",
        "Another architecture.",
        show(&r.platform),
        show(&arm),
        &move |i| i.platform = arm,
    );
    let other_image = checkfu_sandbox_contract::digest::ImageReference::parse(&format!(
        "checkfu-fixture@sha256:{}",
        hex('9')
    ))
    .unwrap_or_else(|_| unreachable!());
    let oi = other_image.clone();
    case(
        "root_image",
        "Another pinned image; materialization still names the requested one.",
        show(&r.root_image),
        show(&other_image),
        &move |i| i.root_image = oi.clone(),
    );
    let mut fewer = r.mounts.clone();
    fewer.pop();
    let fm = fewer.clone();
    case(
        "mounts",
        "A declared mount missing.",
        show(&r.mounts),
        show(&fewer),
        &move |i| i.mounts = fm.clone(),
    );
    case(
        "output_path",
        "Any output path but /mnt/session/outputs.",
        show(&"/mnt/session/outputs"),
        show(&"/outputs"),
        &|i| i.output_path = "/outputs".into(),
    );
    let platform_expiry = ts("2026-11-30T09:30:00.000Z");
    case(
        "expires_at",
        "The platform's own deadline instead of the requested expires_at.",
        show(&r.expires_at),
        show(&platform_expiry),
        &move |i| i.expires_at = platform_expiry,
    );
    case(
        "materialization.profile_digest",
        "A profile digest other than the profile's derived image digest.",
        show(&r.profile.profile_digest),
        show(&digest('8')),
        &|i| i.materialization.profile_digest = digest('8'),
    );
    let oi2 = other_image.clone();
    case(
        "materialization.image_reference",
        "An image reference other than root_image.",
        show(&r.root_image),
        show(&other_image),
        &move |i| i.materialization.image_reference = oi2.clone(),
    );
    case(
        "materialization.image_digest",
        "The image store's digest instead of root_image's digest suffix.",
        show(&r.root_image.digest()),
        show(&digest('7')),
        &|i| i.materialization.image_digest = digest('7'),
    );
    case(
        "materialization.provider_revision",
        "A provider revision other than the envelope's.",
        show(&caps.provider_revision),
        show(&"memory-2"),
        &|i| i.materialization.provider_revision = "memory-2".into(),
    );
    case(
        "materialization.materialization_revision",
        "A materialization revision other than the envelope's.",
        show(&caps.materialization_revision),
        show(&"mat-0"),
        &|i| i.materialization.materialization_revision = "mat-0".into(),
    );
    let mut empty = base.clone();
    empty.instance_id = String::new();
    v.bad_identity(
        "instance-identity-empty-instance-id",
        "An instance without an id.",
        check,
        identity_input(&empty, InstanceState::Provisioning),
        "instance_id",
        None,
        show(&""),
    );
}

fn snapshot_identity(v: &mut Vectors) {
    let check = "snapshot_identity";
    let source = instance(InstanceState::Active);
    let input = |returned: &SandboxSnapshot| json!({"source": source, "requested_expires_at": snapshot_expiry(), "returned": returned});
    v.ok_identity(
        "snapshot-identity-echo",
        "A snapshot that agrees with its source and carries the requested expires_at.",
        check,
        input(&snapshot()),
    );
    let base = snapshot();
    let mut case = |field: &str,
                    description: &str,
                    expected: String,
                    actual: String,
                    change: &dyn Fn(&mut SandboxSnapshot)| {
        let mut returned = base.clone();
        change(&mut returned);
        let name = format!("snapshot-identity-{}", field.replace('_', "-"));
        v.bad_identity(
            &name,
            description,
            check,
            input(&returned),
            field,
            Some(expected),
            actual,
        );
    };
    case(
        "provider",
        "Another provider.",
        show(&source.provider),
        show(&"docker"),
        &|s| s.provider = "docker".into(),
    );
    case(
        "placement",
        "Another placement.",
        show(&source.placement),
        show(&Placement::Hosted),
        &|s| s.placement = Placement::Hosted,
    );
    case(
        "source_instance_id",
        "Another source instance.",
        show(&source.instance_id),
        show(&"inst-2"),
        &|s| s.source_instance_id = "inst-2".into(),
    );
    case(
        "workspace_id",
        "Another Workspace.",
        show(&source.workspace_id),
        show(&"ws-2"),
        &|s| s.workspace_id = "ws-2".into(),
    );
    case(
        "session_id",
        "Another Session.",
        show(&source.session_id),
        show(&"sess-2"),
        &|s| s.session_id = "sess-2".into(),
    );
    case(
        "profile_id",
        "Another profile.",
        show(&source.profile.profile_id),
        show(&"prof-2"),
        &|s| s.profile_id = "prof-2".into(),
    );
    case(
        "profile_version",
        "Another profile version.",
        show(&source.profile.profile_version),
        show(&2u32),
        &|s| s.profile_version = 2,
    );
    case(
        "profile_digest",
        "Another profile digest.",
        show(&source.profile.profile_digest),
        show(&digest('6')),
        &|s| s.profile_digest = digest('6'),
    );
    let own = source.expires_at;
    case(
        "expires_at",
        "The instance's hard expiry substituted for the requested retention deadline.",
        show(&snapshot_expiry()),
        show(&own),
        &move |s| s.expires_at = own,
    );
    let mut empty = base.clone();
    empty.snapshot_id = String::new();
    v.bad_identity(
        "snapshot-identity-empty-snapshot-id",
        "A snapshot without an id.",
        check,
        input(&empty),
        "snapshot_id",
        None,
        show(&""),
    );
}

fn clone_identity(v: &mut Vectors) {
    let check = "clone_identity";
    let source = snapshot();
    let input = |returned: &SandboxSnapshot| json!({"source": source, "target_session_id": "sess-2", "returned": returned});
    v.ok_identity(
        "clone-identity-valid",
        "A distinct id, the target Session, the source's expiry, created after the source.",
        check,
        input(&clone_of()),
    );
    let at_source = SandboxSnapshot {
        created_at: source.created_at,
        ..clone_of()
    };
    v.ok_identity(
        "clone-identity-created-at-source",
        "created_at equal to the source's is allowed (at or after).",
        check,
        input(&at_source),
    );
    let reused = SandboxSnapshot {
        snapshot_id: source.snapshot_id.clone(),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-reused-id",
        "The clone reuses the source's snapshot id.",
        check,
        input(&reused),
        "snapshot_id",
        None,
        show(&source.snapshot_id),
    );
    let wrong_session = SandboxSnapshot {
        session_id: source.session_id.clone(),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-wrong-session",
        "The clone stays in the source's Session instead of the target.",
        check,
        input(&wrong_session),
        "session_id",
        Some(show(&"sess-2")),
        show(&source.session_id),
    );
    let moved = ts("2026-12-14T07:30:00.000Z");
    let moved_expiry = SandboxSnapshot {
        expires_at: moved,
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-moved-expiry",
        "The clone moves the source's expires_at.",
        check,
        input(&moved_expiry),
        "expires_at",
        Some(show(&source.expires_at)),
        show(&moved),
    );
    let early = ts("2026-11-30T07:44:59.999Z");
    let predates = SandboxSnapshot {
        created_at: early,
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-predates-source",
        "The clone's created_at is before the source's.",
        check,
        input(&predates),
        "created_at",
        None,
        show(&early),
    );
    let at_expiry = SandboxSnapshot {
        created_at: source.expires_at,
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-created-at-expiry",
        "The clone's created_at is not strictly before its expires_at.",
        check,
        input(&at_expiry),
        "created_at",
        None,
        show(&source.expires_at),
    );
    let other_provider = SandboxSnapshot {
        provider: "docker".into(),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-provider",
        "The clone names another provider.",
        check,
        input(&other_provider),
        "provider",
        Some(show(&source.provider)),
        show(&"docker"),
    );
    let other_digest = SandboxSnapshot {
        profile_digest: digest('5'),
        ..clone_of()
    };
    v.bad_identity(
        "clone-identity-profile-digest",
        "The clone names another profile digest.",
        check,
        input(&other_digest),
        "profile_digest",
        Some(show(&source.profile_digest)),
        show(&digest('5')),
    );
}

fn process_identity(v: &mut Vectors) {
    let check = "open_process_identity";
    let inst = instance(InstanceState::Active);
    let input = |instance: &SandboxInstance,
                 envelope: &SandboxProviderCapabilities,
                 evidence: &SandboxProcessEvidence| {
        json!({"instance": instance, "request": process_request(), "envelope": envelope, "evidence": evidence})
    };
    v.ok_identity(
        "open-process-identity-echo",
        "Evidence that agrees with the instance, the request and the envelope.",
        check,
        input(&inst, &caps_full(), &evidence()),
    );
    let mut case = |name: &str,
                    description: &str,
                    field: &str,
                    expected: String,
                    actual: String,
                    change: &dyn Fn(&mut SandboxProcessEvidence)| {
        let mut e = evidence();
        change(&mut e);
        v.bad_identity(
            name,
            description,
            check,
            input(&inst, &caps_full(), &e),
            field,
            Some(expected),
            actual,
        );
    };
    case(
        "open-process-identity-provider",
        "Evidence from another provider.",
        "provider",
        show(&inst.provider),
        show(&"docker"),
        &|e| e.provider = "docker".into(),
    );
    case(
        "open-process-identity-instance-id",
        "Evidence about another instance.",
        "instance_id",
        show(&inst.instance_id),
        show(&"inst-2"),
        &|e| e.instance_id = "inst-2".into(),
    );
    case(
        "open-process-identity-session-id",
        "Evidence about another Session.",
        "session_id",
        show(&inst.session_id),
        show(&"sess-2"),
        &|e| e.session_id = "sess-2".into(),
    );
    case(
        "open-process-identity-placement",
        "Evidence placement disagreeing with the instance.",
        "placement",
        show(&inst.placement),
        show(&Placement::Hosted),
        &|e| e.placement = Placement::Hosted,
    );
    case(
        "open-process-identity-tier",
        "Evidence tier disagreeing with the instance's target.",
        "tier",
        show(&inst.target),
        show(&Tier::Microvm),
        &|e| e.tier = Tier::Microvm,
    );
    case(
        "open-process-identity-network-mode",
        "Evidence network mode disagreeing with the profile's policy.",
        "network_mode",
        show(&NetworkMode::Allowlist),
        show(&NetworkMode::None),
        &|e| e.network_mode = NetworkMode::None,
    );
    case(
        "open-process-identity-executable",
        "Evidence naming another executable than the request's.",
        "executable",
        show(&"/usr/local/bin/agent"),
        show(&"/bin/sh"),
        &|e| e.executable = "/bin/sh".into(),
    );

    // Against the envelope: the instance and evidence agree, the envelope does not.
    let hosted = SandboxInstance {
        placement: Placement::Hosted,
        ..inst.clone()
    };
    let hosted_evidence = SandboxProcessEvidence {
        placement: Placement::Hosted,
        ..evidence()
    };
    v.bad_identity(
        "open-process-identity-placement-envelope",
        "Evidence placement outside the envelope's placement.",
        check,
        input(&hosted, &caps_full(), &hosted_evidence),
        "placement",
        None,
        show(&Placement::Hosted),
    );
    let microvm = SandboxInstance {
        target: Tier::Microvm,
        ..inst.clone()
    };
    let microvm_evidence = SandboxProcessEvidence {
        tier: Tier::Microvm,
        ..evidence()
    };
    let container_only = SandboxProviderCapabilities {
        tiers: vec![Tier::Container],
        ..caps_full()
    };
    v.bad_identity(
        "open-process-identity-tier-envelope",
        "Evidence tier outside the envelope's tiers.",
        check,
        input(&microvm, &container_only, &microvm_evidence),
        "tier",
        None,
        show(&Tier::Microvm),
    );
    let allowlist_only = SandboxProviderCapabilities {
        network_modes: vec![NetworkMode::None],
        ..caps_full()
    };
    v.bad_identity(
        "open-process-identity-network-mode-envelope",
        "Evidence network mode outside the envelope's network modes.",
        check,
        input(&inst, &allowlist_only, &evidence()),
        "network_mode",
        None,
        show(&NetworkMode::Allowlist),
    );
}

fn command_input(command: &SandboxCommand) -> Value {
    json!({"request": command, "max_duration_seconds": profile().max_duration_seconds})
}

fn validate_command(v: &mut Vectors) {
    let ty = "SandboxCommand";
    let ok = |v: &mut Vectors, name: &str, description: &str, c: SandboxCommand| {
        v.ok_validate(name, description, ty, command_input(&c))
    };
    let bad = |v: &mut Vectors,
               name: &str,
               description: &str,
               c: SandboxCommand,
               field: &str,
               verdict| {
        v.bad_validate(
            name,
            description,
            ty,
            command_input(&c),
            "execute",
            field,
            verdict,
        )
    };
    ok(
        v,
        "validate-command-baseline",
        "A command inside every bound.",
        command(),
    );
    ok(
        v,
        "validate-command-arguments-at-bound",
        "Exactly 256 arguments.",
        SandboxCommand {
            arguments: vec!["x".into(); MAX_ARGUMENTS],
            ..command()
        },
    );
    ok(
        v,
        "validate-command-argument-at-bound",
        "One argument of exactly 65,536 bytes.",
        SandboxCommand {
            arguments: vec!["a".repeat(MAX_ARGUMENT_BYTES)],
            ..command()
        },
    );
    ok(
        v,
        "validate-command-timeout-at-max-duration",
        "timeout_seconds equal to the profile's max_duration_seconds.",
        SandboxCommand {
            timeout_seconds: 600,
            ..command()
        },
    );
    ok(
        v,
        "validate-command-output-limit-at-bound",
        "output_limit_bytes of exactly 16 MiB.",
        SandboxCommand {
            output_limit_bytes: MAX_OUTPUT_LIMIT_BYTES,
            ..command()
        },
    );
    bad(
        v,
        "validate-command-arguments-over-bound",
        "257 arguments.",
        SandboxCommand {
            arguments: vec!["x".into(); MAX_ARGUMENTS + 1],
            ..command()
        },
        "arguments",
        "rejects",
    );
    bad(
        v,
        "validate-command-argument-over-bound",
        "One argument of 65,537 bytes.",
        SandboxCommand {
            arguments: vec!["a".repeat(MAX_ARGUMENT_BYTES + 1)],
            ..command()
        },
        "arguments[0]",
        "rejects",
    );
    bad(
        v,
        "validate-command-argument-nul",
        "An argument containing NUL.",
        SandboxCommand {
            arguments: vec!["-c".into(), "a\0b".into()],
            ..command()
        },
        "arguments[1]",
        "rejects",
    );
    let env = |key: &str| {
        let mut c = command();
        c.environment.insert(key.into(), "1".into());
        c
    };
    bad(
        v,
        "validate-command-environment-key-leading-digit",
        "An environment key starting with a digit.",
        env("1A"),
        "environment[\"1A\"]",
        "rejects",
    );
    bad(
        v,
        "validate-command-environment-key-dash",
        "An environment key with a dash.",
        env("A-B"),
        "environment[\"A-B\"]",
        "rejects",
    );
    bad(
        v,
        "validate-command-environment-key-empty",
        "An empty environment key.",
        env(""),
        "environment[\"\"]",
        "rejects",
    );
    bad(
        v,
        "validate-command-timeout-zero",
        "timeout_seconds 0.",
        SandboxCommand {
            timeout_seconds: 0,
            ..command()
        },
        "timeout_seconds",
        "rejects",
    );
    bad(v, "validate-command-timeout-over-max-duration", "timeout_seconds one over the profile's max_duration_seconds (a runtime check the schema cannot see).", SandboxCommand { timeout_seconds: 601, ..command() }, "timeout_seconds", "accepts");
    bad(
        v,
        "validate-command-output-limit-over-bound",
        "output_limit_bytes one over 16 MiB.",
        SandboxCommand {
            output_limit_bytes: MAX_OUTPUT_LIMIT_BYTES + 1,
            ..command()
        },
        "output_limit_bytes",
        "rejects",
    );
    bad(
        v,
        "validate-command-working-directory-relative",
        "A relative working directory.",
        SandboxCommand {
            working_directory: "workspace".into(),
            ..command()
        },
        "working_directory",
        "accepts",
    );
    bad(
        v,
        "validate-command-working-directory-dot-dot",
        "A working directory with a .. component.",
        SandboxCommand {
            working_directory: "/workspace/../etc".into(),
            ..command()
        },
        "working_directory",
        "accepts",
    );
    bad(
        v,
        "validate-command-executable-empty",
        "An empty executable.",
        SandboxCommand {
            executable: String::new(),
            ..command()
        },
        "executable",
        "accepts",
    );

    let pty = "SandboxProcessRequest";
    let op = "open_process";
    v.ok_validate(
        "validate-process-baseline",
        "An openProcess request inside every bound.",
        pty,
        json!({"request": process_request()}),
    );
    v.ok_validate("validate-process-arguments-at-bound", "Exactly 256 arguments.", pty, json!({"request": SandboxProcessRequest { arguments: vec!["x".into(); MAX_ARGUMENTS], ..process_request() }}));
    v.bad_validate("validate-process-arguments-over-bound", "257 arguments.", pty, json!({"request": SandboxProcessRequest { arguments: vec!["x".into(); MAX_ARGUMENTS + 1], ..process_request() }}), op, "arguments", "rejects");
    v.bad_validate("validate-process-argument-nul", "An argument containing NUL.", pty, json!({"request": SandboxProcessRequest { arguments: vec!["\0".into()], ..process_request() }}), op, "arguments[0]", "rejects");
    let mut p = process_request();
    p.environment.insert("X=Y".into(), "1".into());
    v.bad_validate(
        "validate-process-environment-key-equals",
        "An environment key containing =.",
        pty,
        json!({"request": p}),
        op,
        "environment[\"X=Y\"]",
        "rejects",
    );
    v.bad_validate("validate-process-working-directory-trailing-slash", "A working directory with a trailing slash.", pty, json!({"request": SandboxProcessRequest { working_directory: "/workspace/".into(), ..process_request() }}), op, "working_directory", "accepts");
}

fn validate_reads(v: &mut Vectors) {
    let rf = |path: &str, root: &str, max: u64| json!({"request": {"instance_id": "inst-1", "path": path, "allowed_root": root, "maximum_bytes": max}});
    let ty = "ReadFileRequest";
    v.ok_validate(
        "validate-read-file-at-bound",
        "maximum_bytes of exactly 16 MiB.",
        ty,
        rf(
            "/workspace/project/a",
            "/workspace/project",
            MAX_READ_FILE_BYTES,
        ),
    );
    v.ok_validate(
        "validate-read-file-root-itself",
        "A path equal to allowed_root is inside it.",
        ty,
        rf("/workspace/project", "/workspace/project", 1),
    );
    v.bad_validate(
        "validate-read-file-over-bound",
        "maximum_bytes one over 16 MiB.",
        ty,
        rf(
            "/workspace/project/a",
            "/workspace/project",
            MAX_READ_FILE_BYTES + 1,
        ),
        "read_file",
        "maximum_bytes",
        "rejects",
    );
    v.bad_validate(
        "validate-read-file-outside-root",
        "A path outside allowed_root.",
        ty,
        rf("/opt/data/a", "/workspace/project", 1),
        "read_file",
        "path",
        "accepts",
    );
    v.bad_validate(
        "validate-read-file-sibling-prefix",
        "/workspace/projectile is not inside /workspace/project.",
        ty,
        rf("/workspace/projectile", "/workspace/project", 1),
        "read_file",
        "path",
        "accepts",
    );
    v.bad_validate(
        "validate-read-file-dot-dot",
        "A path escaping with .. textually.",
        ty,
        rf(
            "/workspace/project/../../etc/passwd",
            "/workspace/project",
            1,
        ),
        "read_file",
        "path",
        "accepts",
    );
    v.bad_validate(
        "validate-read-file-root-not-normalized",
        "allowed_root with a trailing slash.",
        ty,
        rf("/workspace/project/a", "/workspace/project/", 1),
        "read_file",
        "allowed_root",
        "accepts",
    );

    let ty = "ReadFilesRequest";
    let op = "read_files";
    let req = |r: ReadFilesRequest| json!({"request": r});
    v.ok_validate(
        "validate-read-files-count-at-bound",
        "Exactly 1,024 members.",
        ty,
        req(read_files_request(MAX_READ_FILES_COUNT, 1024)),
    );
    v.ok_validate(
        "validate-read-files-aggregate-at-bound",
        "Eight members of 16 MiB: an aggregate of exactly 128 MiB.",
        ty,
        req(read_files_request(8, 16 * MIB)),
    );
    v.bad_validate(
        "validate-read-files-count-over-bound",
        "1,025 members.",
        ty,
        req(read_files_request(MAX_READ_FILES_COUNT + 1, 1)),
        op,
        "files",
        "rejects",
    );
    let mut plus_one = read_files_request(3, 100);
    plus_one.aggregate_maximum_bytes += 1;
    v.bad_validate(
        "validate-read-files-aggregate-above-sum",
        "aggregate_maximum_bytes one more than the members' sum.",
        ty,
        req(plus_one),
        op,
        "aggregate_maximum_bytes",
        "accepts",
    );
    let mut minus_one = read_files_request(3, 100);
    minus_one.aggregate_maximum_bytes -= 1;
    v.bad_validate(
        "validate-read-files-aggregate-below-sum",
        "aggregate_maximum_bytes one less than the members' sum.",
        ty,
        req(minus_one),
        op,
        "aggregate_maximum_bytes",
        "accepts",
    );
    v.bad_validate(
        "validate-read-files-aggregate-over-bound",
        "Nine members of 16 MiB: an exact aggregate over 128 MiB.",
        ty,
        req(read_files_request(9, 16 * MIB)),
        op,
        "aggregate_maximum_bytes",
        "rejects",
    );
    let mut overflow = read_files_request(2, 0);
    overflow.files[0].maximum_bytes = u64::MAX;
    overflow.files[1].maximum_bytes = 1;
    overflow.aggregate_maximum_bytes = 0;
    v.bad_validate(
        "validate-read-files-sum-overflows",
        "Members whose sum overflows 64 bits (0 is the wrapped sum).",
        ty,
        req(overflow),
        op,
        "aggregate_maximum_bytes",
        "rejects",
    );
    let mut member_over = read_files_request(1, MAX_READ_FILE_BYTES + 1);
    member_over.aggregate_maximum_bytes = MAX_READ_FILE_BYTES + 1;
    v.bad_validate(
        "validate-read-files-member-over-bound",
        "One member's maximum_bytes one over 16 MiB.",
        ty,
        req(member_over),
        op,
        "files[0].maximum_bytes",
        "rejects",
    );
    let mut outside = read_files_request(2, 10);
    outside.files[1].path = "/opt/data/x".into();
    v.bad_validate(
        "validate-read-files-member-outside-root",
        "A member outside the group's allowed_root.",
        ty,
        req(outside),
        op,
        "files[1].path",
        "accepts",
    );

    let list = |max: u32| json!({"request": {"instance_id": "inst-1", "root": "/workspace/project", "max_entries": max}});
    v.ok_validate(
        "validate-list-dir-at-bound",
        "max_entries of exactly 100,000.",
        "ListDirRequest",
        list(MAX_LIST_ENTRIES),
    );
    v.bad_validate(
        "validate-list-dir-over-bound",
        "max_entries of 100,001.",
        "ListDirRequest",
        list(MAX_LIST_ENTRIES + 1),
        "list_dir",
        "max_entries",
        "rejects",
    );
    v.bad_validate(
        "validate-list-dir-zero",
        "max_entries of 0.",
        "ListDirRequest",
        list(0),
        "list_dir",
        "max_entries",
        "rejects",
    );
    v.bad_validate(
        "validate-list-dir-root-relative",
        "A relative root.",
        "ListDirRequest",
        json!({"request": {"instance_id": "inst-1", "root": "project", "max_entries": 1}}),
        "list_dir",
        "root",
        "accepts",
    );
    v.ok_validate(
        "validate-list-project-dir-at-bound",
        "max_entries of exactly 100,000.",
        "ListProjectDirRequest",
        list(MAX_LIST_ENTRIES),
    );
    v.bad_validate(
        "validate-list-project-dir-over-bound",
        "max_entries of 100,001.",
        "ListProjectDirRequest",
        list(MAX_LIST_ENTRIES + 1),
        "list_project_dir",
        "max_entries",
        "rejects",
    );
}

fn validate_other(v: &mut Vectors) {
    let ty = "CleanupRequest";
    let cleanup = |pins: usize, now: &str, before: &str| {
        let pinned: Vec<String> = (0..pins).map(|i| format!("snap-{i}")).collect();
        json!({"request": {"now": now, "orphaned_before": before, "pinned_snapshots": pinned}})
    };
    let now = "2026-11-30T09:00:00.000Z";
    let before = "2026-11-30T08:00:00.000Z";
    v.ok_validate(
        "validate-cleanup-pins-at-bound",
        "Exactly 1,024 pinned snapshots.",
        ty,
        cleanup(MAX_PINNED_SNAPSHOTS, now, before),
    );
    v.ok_validate(
        "validate-cleanup-cutoff-equals-now",
        "orphaned_before equal to now.",
        ty,
        cleanup(0, now, now),
    );
    v.bad_validate(
        "validate-cleanup-pins-over-bound",
        "1,025 pinned snapshots.",
        ty,
        cleanup(MAX_PINNED_SNAPSHOTS + 1, now, before),
        "cleanup",
        "pinned_snapshots",
        "rejects",
    );
    v.bad_validate(
        "validate-cleanup-cutoff-after-now",
        "orphaned_before one millisecond after now.",
        ty,
        cleanup(0, now, "2026-11-30T09:00:00.001Z"),
        "cleanup",
        "orphaned_before",
        "accepts",
    );

    let ty = "WriteFileRequest";
    v.ok_validate("validate-write-file-baseline", "A normalized path and small content.", ty, json!({"request": {"instance_id": "inst-1", "path": "/mnt/session/outputs/a", "content_base64": "YQ=="}}));
    v.bad_validate("validate-write-file-empty-component", "A path with an empty component.", ty, json!({"request": {"instance_id": "inst-1", "path": "/mnt/session//outputs/a", "content_base64": "YQ=="}}), "write_file", "path", "accepts");

    let ty = "ActiveWriteRequest";
    let batch = |tx: &str, paths: &[&str]| {
        let files: Vec<Value> = paths
            .iter()
            .map(|p| json!({"path": p, "content_base64": "YQ=="}))
            .collect();
        json!({"request": {"instance_id": "inst-1", "transaction_id": tx, "files": files}})
    };
    v.ok_validate(
        "validate-active-write-baseline",
        "Two sibling files in one mount.",
        ty,
        batch("tx-1", &["/workspace/project/a", "/workspace/project/b"]),
    );
    v.bad_validate(
        "validate-active-write-nested-paths",
        "One target is an ancestor of another.",
        ty,
        batch("tx-1", &["/workspace/project/a", "/workspace/project/a/b"]),
        "begin_active_write",
        "files[1].path",
        "accepts",
    );
    v.bad_validate(
        "validate-active-write-empty-transaction",
        "An empty transaction id.",
        ty,
        batch("", &["/workspace/project/a"]),
        "begin_active_write",
        "transaction_id",
        "accepts",
    );
}

fn validate_mounts(v: &mut Vectors) {
    let ty = "SandboxProvisionRequest";
    let m = |paths: &[&str]| -> Value {
        Value::Array(
            paths
                .iter()
                .map(|p| json!({"path": p, "access": "read_only"}))
                .collect(),
        )
    };
    let plan = |mounts: Value, max: u8| json!({"request": set(j(&provision_request()), "/mounts", mounts), "max_mounts": max});
    let sixty_four: Vec<String> = (0..64).map(|i| format!("/data/m{i}")).collect();
    let refs: Vec<&str> = sixty_four.iter().map(String::as_str).collect();
    v.ok_validate(
        "validate-mounts-at-bound",
        "Exactly 64 mounts with max_mounts 64.",
        ty,
        plan(m(&refs), 64),
    );
    v.ok_validate(
        "validate-mounts-nested-and-near-reserved",
        "A nested mount and paths that only share a prefix with reserved roots.",
        ty,
        plan(
            m(&[
                "/data",
                "/data/sub",
                "/home/checkfu2",
                "/tmpfiles",
                "/mnt/session/out",
            ]),
            64,
        ),
    );
    v.ok_validate(
        "validate-mounts-none",
        "No mounts on a provider with max_mounts 0.",
        ty,
        plan(m(&[]), 0),
    );
    let sixty_five: Vec<String> = (0..65).map(|i| format!("/data/m{i}")).collect();
    let refs: Vec<&str> = sixty_five.iter().map(String::as_str).collect();
    v.bad_mounts(
        "validate-mounts-over-bound",
        "65 mounts: one over the contract's 64 even when the envelope claims more.",
        m(&refs),
        64,
        "mounts",
        "rejects",
    );
    v.bad_mounts(
        "validate-mounts-over-envelope",
        "Three mounts on a provider with max_mounts 2.",
        m(&["/a", "/b", "/c"]),
        2,
        "mounts",
        "accepts",
    );
    v.bad_mounts(
        "validate-mounts-any-on-zero",
        "One mount on a provider with max_mounts 0.",
        m(&["/a"]),
        0,
        "mounts",
        "accepts",
    );
    for root in RESERVED_ROOTS {
        let slug = root
            .trim_start_matches('/')
            .replace(['/', '.'], "-")
            .replace("--", "-");
        v.bad_mounts(
            &format!("validate-mounts-reserved-{slug}"),
            &format!("A mount at the reserved root {root}."),
            m(&["/data", root]),
            64,
            "mounts[1].path",
            "accepts",
        );
    }
    let under = [
        ("tmp-cache", "/tmp/cache"),
        ("proc-self", "/proc/self"),
        ("outputs-sub", "/mnt/session/outputs/x"),
        ("control-sub", "/workspace/.checkfu/state"),
    ];
    for (slug, path) in under {
        v.bad_mounts(
            &format!("validate-mounts-under-reserved-{slug}"),
            &format!("{path} lies under a reserved root."),
            m(&[path]),
            64,
            "mounts[0].path",
            "accepts",
        );
    }
    let above = [
        ("root", "/"),
        ("mnt", "/mnt"),
        ("mnt-session", "/mnt/session"),
        ("workspace", "/workspace"),
        ("home", "/home"),
    ];
    for (slug, path) in above {
        v.bad_mounts(
            &format!("validate-mounts-above-reserved-{slug}"),
            &format!("{path} contains a reserved root."),
            m(&[path]),
            64,
            "mounts[0].path",
            "accepts",
        );
    }
    v.bad_mounts("validate-mounts-duplicate", "The same path declared twice, with different access.", json!([{"path": "/data", "access": "read_only"}, {"path": "/data", "access": "read_write"}]), 64, "mounts[1].path", "accepts");
    let shapes = [
        ("relative", "data"),
        ("trailing-slash", "/data/"),
        ("dot-dot", "/data/../etc"),
        ("dot", "/data/./x"),
        ("empty-component", "/data//x"),
        ("nul", "/data\0x"),
    ];
    for (slug, path) in shapes {
        v.bad_mounts(
            &format!("validate-mounts-path-{slug}"),
            &format!("A mount path that is not normalized ({slug})."),
            m(&[path]),
            64,
            "mounts[0].path",
            "accepts",
        );
    }
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
