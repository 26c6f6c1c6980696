//! Valid documents of every boundary type (`decode:<Type>`, accepted).

use super::*;
use checkfu_sandbox_contract::{op, ConflictActual, Member, Operation};

pub(super) fn decode_valid(v: &mut Vectors) {
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
            mode: None,
            kind: None,
        }),
    );
    v.ok_decode(
        "decode-write-file-request-mode",
        "Permission bits as a JSON integer: 493 is 0o755 (absent means 0o644).",
        "WriteFileRequest",
        json!({"instance_id": "inst-1", "path": "/workspace/project/run.sh", "content_base64": "YQ==", "mode": 493}),
    );
    v.ok_decode(
        "decode-write-file-request-directory",
        "A directory write: kind directory, empty content, its permission bits (448 is 0o700; absent means 0o755).",
        "WriteFileRequest",
        json!({"instance_id": "inst-1", "path": "/workspace/project/private", "content_base64": "", "kind": "directory", "mode": 448}),
    );
    v.ok_decode(
        "decode-write-file-request-kind-file",
        "kind file stated: the same as kind absent.",
        "WriteFileRequest",
        json!({"instance_id": "inst-1", "path": "/workspace/project/a", "content_base64": "YQ==", "kind": "file"}),
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
        "decode-list-dir-result-mode",
        "A listed file's permission bits (493 is 0o755); absent means 0o644.",
        "ListDirResult",
        json!({"entries": [{"path": "/mnt/session/outputs/x.sh", "size_bytes": 5, "sha256": digest('3'), "mode": 493}]}),
    );
    v.ok_decode(
        "decode-list-dir-result-large-unhashed",
        "A file over 16 MiB listed without a digest: its body is never read.",
        "ListDirResult",
        json!({"entries": [{"path": "/mnt/session/outputs/s", "size_bytes": 25_769_803_776u64}]}),
    );
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
    v.ok_decode("decode-active-write-outcome-indeterminate", "A dispatched transaction whose end the provider cannot tell (valid only after the dispatch marker).", "ActiveWriteOutcome", json!({"outcome": "indeterminate", "transaction_id": "tx-1", "reason": "the daemon did not answer the unpause"}));
    v.ok_decode(
        "decode-error-lifecycle-conflict",
        "A tagged error.",
        "SandboxError",
        j(&SandboxError::conflict(
            op::OPEN_PROCESS,
            "active",
            ConflictActual::ProcessAlreadyOpen,
        )),
    );
    v.ok_decode("decode-error-capability-unavailable", "The detail may be absent.", "SandboxError", json!({"_tag": "SandboxCapabilityUnavailable", "requirement": "physically_contained_file_read"}));
    v.ok_decode(
        "decode-error-protocol-invalid",
        "A protocol error names the field and both values.",
        "SandboxError",
        j(&SandboxError::protocol(
            Operation::InstanceIdentity,
            "expires_at",
            "\"2026-11-30T08:30:00.000Z\"",
            "\"2026-11-30T09:30:00.000Z\"",
        )),
    );
    let failure = SandboxFailure::from(SandboxError::protocol(
        Operation::SnapshotIdentity,
        "expires_at",
        "a",
        "b",
    ))
    .then(SandboxError::failed(
        Operation::Rollback(Member::Snapshot),
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
