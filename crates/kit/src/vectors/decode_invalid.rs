//! Documents the strict decoder refuses (`decode:<Type>`), naming the offending field.

use super::*;

pub(super) fn decode_invalid(v: &mut Vectors) {
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
    v.bad_decode("empty-failure-causes", "A combined failure with no cause: a failure has at least one (a rule the schema does not state).", "SandboxFailure", json!({"causes": []}), "causes", "accepts");
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
    let write = |mode: Value| json!({"instance_id": "inst-1", "path": "/workspace/project/run.sh", "content_base64": "YQ==", "mode": mode});
    v.bad_decode(
        "write-file-mode-string",
        "Permission bits as an octal string instead of a JSON integer.",
        "WriteFileRequest",
        write(json!("0755")),
        "mode",
        "rejects",
    );
    v.bad_decode(
        "write-file-mode-fraction",
        "Permission bits that are not an integer.",
        "WriteFileRequest",
        write(json!(420.5)),
        "mode",
        "rejects",
    );
    v.bad_decode(
        "write-file-mode-negative",
        "Negative permission bits.",
        "WriteFileRequest",
        write(json!(-1)),
        "mode",
        "rejects",
    );
    let write_kind = |kind: Value| json!({"instance_id": "inst-1", "path": "/workspace/project/d", "content_base64": "", "kind": kind});
    v.bad_decode(
        "write-file-kind-unknown",
        "A kind outside the closed set file, directory.",
        "WriteFileRequest",
        write_kind(json!("symlink")),
        "kind",
        "rejects",
    );
    v.bad_decode(
        "write-file-kind-number",
        "A kind that is not a string.",
        "WriteFileRequest",
        write_kind(json!(1)),
        "kind",
        "rejects",
    );
    let listed = |mode: Value| json!({"entries": [{"path": "/mnt/session/outputs/x.sh", "size_bytes": 1, "sha256": format!("sha256:{}", "3".repeat(64)), "mode": mode}]});
    v.bad_decode(
        "list-dir-entry-mode-string",
        "A listed file's permission bits as an octal string instead of a JSON integer.",
        "ListDirResult",
        listed(json!("0755")),
        "entries[0].mode",
        "rejects",
    );
    v.bad_decode(
        "list-dir-entry-mode-negative",
        "Negative permission bits on a listed file.",
        "ListDirResult",
        listed(json!(-1)),
        "entries[0].mode",
        "rejects",
    );
}
