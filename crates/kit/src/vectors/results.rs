//! Result-level failures (`result:<Type>`): a member's answer checked
//! against the request it answers — readFiles' union, count, order and
//! budgets; a listing's completeness, bound, paths and digests; release's
//! disposition; execute's output limits and interval.

use super::*;

const ROOT: &str = "/workspace/project";

fn p(name: &str) -> String {
    format!("{ROOT}/{name}")
}

fn b64(bytes: &[u8]) -> Value {
    j(&Bytes(bytes.to_vec()))
}

pub(super) fn result_checks(v: &mut Vectors) {
    read_files(v);
    listings(v);
    release(v);
    execute(v);
}

fn read_files(v: &mut Vectors) {
    let ty = "ReadFilesResult";
    let request = json!({
        "instance_id": "inst-1",
        "allowed_root": ROOT,
        "files": [
            {"path": p("a"), "maximum_bytes": 4},
            {"path": p("b"), "maximum_bytes": 4},
            {"path": p("c"), "maximum_bytes": 4},
        ],
        "aggregate_maximum_bytes": 12,
    });
    let read = |name: &str, bytes: &[u8]| json!({"outcome": "read", "path": p(name), "content_base64": b64(bytes)});
    let honest = || {
        vec![
            read("a", b"abcd"),
            json!({"outcome": "not_found", "path": p("b")}),
            json!({"outcome": "too_large", "path": p("c"), "size_bytes": 5}),
        ]
    };
    let input = |files: Vec<Value>| json!({"request": request, "result": {"files": files}});
    v.ok_result(
        "result-read-files-honest",
        "One outcome per member, in request order, each within its member's budget; too_large only over maximum_bytes.",
        ty,
        input(honest()),
    );
    let mut short = honest();
    short.pop();
    v.bad_result(
        "result-read-files-short",
        "Two outcomes for three members: a member silently dropped.",
        ty,
        input(short),
        "read_files",
        "files",
        "3 outcomes",
        "2 outcomes",
    );
    let mut long = honest();
    long.push(json!({"outcome": "not_found", "path": p("d")}));
    v.bad_result(
        "result-read-files-long",
        "Four outcomes for three members.",
        ty,
        input(long),
        "read_files",
        "files",
        "3 outcomes",
        "4 outcomes",
    );
    let mut swapped = honest();
    swapped.swap(0, 1);
    v.bad_result(
        "result-read-files-out-of-order",
        "The first two outcomes swapped: outcomes come back in request order.",
        ty,
        input(swapped),
        "read_files",
        "files[0].path",
        &p("a"),
        &p("b"),
    );
    let mut over = honest();
    over[0] = read("a", b"abcde");
    v.bad_result(
        "result-read-files-member-over-budget",
        "Five bytes read for a member whose maximum_bytes is 4.",
        ty,
        input(over),
        "read_files",
        "files[0].content_base64",
        "at most 4 bytes",
        "5 bytes",
    );
    let mut small = honest();
    small[2] = json!({"outcome": "too_large", "path": p("c"), "size_bytes": 4});
    v.bad_result(
        "result-read-files-too-large-within-budget",
        "too_large for a file of exactly maximum_bytes, which fits.",
        ty,
        input(small),
        "read_files",
        "files[2].size_bytes",
        "more than maximum_bytes 4",
        "4",
    );
    let mut unknown = honest();
    unknown[1] = json!({"outcome": "permission_denied", "path": p("b")});
    v.push(
        false,
        "result-read-files-outside-the-union",
        "An outcome outside the closed per-file union fails the whole batch.",
        format!("result:{ty}"),
        input(unknown),
        json!({
            "outcome": "refused",
            "field": "files[1].outcome",
            "error": {"_tag": "SandboxProtocolInvalid", "operation": "decode_read_files_result", "field": "files[1].outcome", "actual": "\"permission_denied\""},
        }),
        None,
    );
}

fn listings(v: &mut Vectors) {
    let digest = j(&digest('d'));
    let entry =
        |name: &str, size: u64| json!({"path": p(name), "size_bytes": size, "sha256": digest});
    let list_request =
        |max: u32| json!({"instance_id": "inst-1", "root": ROOT, "max_entries": max});
    let ty = "ListDirResult";
    v.ok_result(
        "result-list-dir-honest",
        "Two files under the root, each with its digest, within max_entries.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [entry("a", 3), entry("b/c", 0)]}}),
    );
    v.ok_result(
        "result-list-dir-large-file-without-digest",
        "A file over 16 MiB may come without a digest: no member can read it.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [{"path": p("big"), "size_bytes": MAX_READ_FILE_BYTES + 1}]}}),
    );
    v.ok_result(
        "result-list-dir-modes",
        "Files with their permission bits (0o755, 0o600), and one without (0o644).",
        ty,
        json!({"request": list_request(3), "result": {"entries": [
            {"path": p("x.sh"), "size_bytes": 3, "sha256": digest, "mode": 0o755},
            {"path": p("secret"), "size_bytes": 3, "sha256": digest, "mode": 0o600},
            entry("plain", 3),
        ]}}),
    );
    v.bad_result(
        "result-list-dir-mode-over-0777",
        "A listed file with bits 0o4755 (2541): set-id bits are not part of a listing.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [{"path": p("x"), "size_bytes": 3, "sha256": digest, "mode": 0o4755}]}}),
        "list_dir",
        "entries[0].mode",
        "permission bits of at most 0o777 (511)",
        "2541 (0o4755)",
    );
    v.bad_result(
        "result-list-dir-over-max-entries",
        "Three entries for max_entries 2.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [entry("a", 1), entry("b", 1), entry("c", 1)]}}),
        "list_dir",
        "entries",
        "at most 2 entries",
        "3 entries",
    );
    v.bad_result(
        "result-list-dir-outside-root",
        "An entry outside the listed root.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [{"path": "/workspace/other/a", "size_bytes": 1, "sha256": digest}]}}),
        "list_dir",
        "entries[0].path",
        &format!("a normalized path below {ROOT}"),
        "/workspace/other/a",
    );
    v.bad_result(
        "result-list-dir-repeated-path",
        "The same file listed twice.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [entry("a", 1), entry("a", 1)]}}),
        "list_dir",
        "entries[1].path",
        "each path once",
        &p("a"),
    );
    v.bad_result(
        "result-list-dir-missing-digest",
        "A readable file without its SHA-256.",
        ty,
        json!({"request": list_request(2), "result": {"entries": [{"path": p("a"), "size_bytes": 3}]}}),
        "list_dir",
        "entries[0].sha256",
        &format!("a digest for a file of at most {} bytes", MAX_READ_FILE_BYTES),
        &format!("absent for {} (3 bytes)", p("a")),
    );
    let ty = "ListProjectDirResult";
    let leaves = json!([
        {"path": p("a"), "kind": "regular", "size_bytes": 3, "sha256": digest},
        {"path": p("link"), "kind": "symlink", "target": "a"},
    ]);
    v.ok_result(
        "result-list-project-dir-honest",
        "Every leaf named, special files included, marked complete.",
        ty,
        json!({"request": list_request(2), "result": {"entries": leaves, "complete": true}}),
    );
    v.bad_result(
        "result-list-project-dir-incomplete",
        "A listing not marked complete: a silently dropped leaf is the failure this member exists to prevent.",
        ty,
        json!({"request": list_request(2), "result": {"entries": leaves, "complete": false}}),
        "list_project_dir",
        "complete",
        "true",
        "false",
    );
    v.bad_result(
        "result-list-project-dir-over-max-entries",
        "Two leaves for max_entries 1.",
        ty,
        json!({"request": list_request(1), "result": {"entries": leaves, "complete": true}}),
        "list_project_dir",
        "entries",
        "at most 1 entries",
        "2 entries",
    );
}

fn release(v: &mut Vectors) {
    let ty = "ReleaseDisposition";
    let zdr = json!({"instance_id": "inst-1"});
    let durable = json!({"instance_id": "inst-1", "snapshot_expires_at": j(&snapshot_expiry())});
    let released = json!({"disposition": "released", "snapshot": j(&snapshot())});
    let destroyed = json!({"disposition": "destroyed"});
    v.ok_result(
        "result-release-zdr-destroyed",
        "An ephemeral_zdr release (no snapshot_expires_at) destroys every trace.",
        ty,
        json!({"request": zdr, "result": destroyed}),
    );
    v.ok_result(
        "result-release-durable-released",
        "A durable release settles a snapshot.",
        ty,
        json!({"request": durable, "result": released}),
    );
    v.bad_result(
        "result-release-zdr-released",
        "A released disposition for an ephemeral_zdr release: state survived that must not.",
        ty,
        json!({"request": zdr, "result": released}),
        "release",
        "disposition",
        "destroyed (ephemeral_zdr)",
        "released",
    );
    v.bad_result(
        "result-release-durable-destroyed",
        "A destroyed disposition for a durable release: the Checkpoint is gone.",
        ty,
        json!({"request": durable, "result": destroyed}),
        "release",
        "disposition",
        "released (durable)",
        "destroyed",
    );
}

fn execute(v: &mut Vectors) {
    let ty = "SandboxCommandResult";
    let mut command = command();
    command.output_limit_bytes = 4;
    let request = json!({"instance_id": "inst-1", "command": j(&command)});
    let result = |stdout: &[u8], stderr: &[u8], started: &str, finished: &str| {
        json!({
            "exit": {"exit_code": 0},
            "stdout_base64": b64(stdout),
            "stderr_base64": b64(stderr),
            "started_at": started,
            "finished_at": finished,
        })
    };
    let (t0, t1) = ("2026-11-30T07:50:00.000Z", "2026-11-30T07:50:01.250Z");
    v.ok_result(
        "result-execute-at-limit",
        "stdout and stderr of exactly output_limit_bytes each; finished after started.",
        ty,
        json!({"request": request, "result": result(b"abcd", b"efgh", t0, t1)}),
    );
    v.ok_result(
        "result-execute-instant",
        "finished_at equal to started_at is a valid interval.",
        ty,
        json!({"request": request, "result": result(b"", b"", t0, t0)}),
    );
    v.bad_result(
        "result-execute-stdout-over-limit",
        "Five bytes of stdout for output_limit_bytes 4.",
        ty,
        json!({"request": request, "result": result(b"abcde", b"", t0, t1)}),
        "execute",
        "stdout_base64",
        "at most 4 bytes",
        "5 bytes",
    );
    v.bad_result(
        "result-execute-stderr-over-limit",
        "Five bytes of stderr for output_limit_bytes 4: the limit is per stream.",
        ty,
        json!({"request": request, "result": result(b"abcd", b"abcde", t0, t1)}),
        "execute",
        "stderr_base64",
        "at most 4 bytes",
        "5 bytes",
    );
    v.bad_result(
        "result-execute-finished-before-started",
        "A non-monotonic interval.",
        ty,
        json!({"request": request, "result": result(b"", b"", t1, t0)}),
        "execute",
        "finished_at",
        &format!("at or after started_at {t1}"),
        t0,
    );
}
