//! The request bounds of readFile, readFiles, listDir and listProjectDir (`validate:<Request>`).

use super::*;

pub(super) fn validate_reads(v: &mut Vectors) {
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
