//! The request bounds of cleanup, writeFile and beginActiveWrite (`validate:<Request>`).

use super::*;

pub(super) fn validate_other(v: &mut Vectors) {
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
        "validate-cleanup-pin-empty",
        "An empty pinned snapshot id pins nothing and is refused.",
        ty,
        json!({"request": {"now": now, "orphaned_before": before, "pinned_snapshots": ["snap-1", ""]}}),
        "cleanup",
        "pinned_snapshots[1]",
        "accepts",
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
    v.ok_validate("validate-write-file-mode-0777", "The largest permission bits, 0o777 (511).", ty, json!({"request": {"instance_id": "inst-1", "path": "/workspace/project/run.sh", "content_base64": "YQ==", "mode": 511}}));
    let dir = |content: &str, mode: u32| json!({"request": {"instance_id": "inst-1", "path": "/workspace/project/private", "content_base64": content, "kind": "directory", "mode": mode}});
    v.ok_validate(
        "validate-write-file-directory",
        "A directory with empty content and bits 0o700 (448).",
        ty,
        dir("", 0o700),
    );
    v.bad_validate(
        "validate-write-file-directory-with-content",
        "A directory write carrying content: a directory has no bytes.",
        ty,
        dir("YQ==", 0o755),
        "write_file",
        "content_base64",
        "accepts",
    );
    v.bad_validate(
        "validate-write-file-directory-mode-over-0777",
        "A directory with bits 0o1777 (1023): the sticky bit is not part of writeFile.",
        ty,
        dir("", 0o1777),
        "write_file",
        "mode",
        "rejects",
    );
    v.bad_validate("validate-write-file-mode-over-0777", "Permission bits 0o1000 (512): set-id and sticky bits are not part of writeFile.", ty, json!({"request": {"instance_id": "inst-1", "path": "/workspace/project/run.sh", "content_base64": "YQ==", "mode": 512}}), "write_file", "mode", "rejects");

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
