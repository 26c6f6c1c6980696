//! Paths as bytes (decision 021): a path that is not UTF-8
//! travels as `{"bytes_base64": ...}`; the object form of valid UTF-8, bad
//! base64 and extra members are refused; the byte form is admitted by the
//! same path rules as text.

use serde_json::json;

use super::Vectors;

/// `/mnt/session/outputs/bad-\xff`.
const BAD_OUTPUT: &str = "L21udC9zZXNzaW9uL291dHB1dHMvYmFkLf8=";
/// `/mnt/session/outputs/a.txt` (valid UTF-8).
const UTF8_OUTPUT: &str = "L21udC9zZXNzaW9uL291dHB1dHMvYS50eHQ=";
/// `/workspace/project/caf\xe9` (Latin-1, not UTF-8).
const LATIN1: &str = "L3dvcmtzcGFjZS9wcm9qZWN0L2NhZuk=";
/// `/workspace/project/\xff\x00`.
const WITH_NUL: &str = "L3dvcmtzcGFjZS9wcm9qZWN0L/8A";
/// `/workspace/project/\xff/../x`.
const DOT_DOT: &str = "L3dvcmtzcGFjZS9wcm9qZWN0L/8vLi4veA==";

pub(super) fn byte_paths(v: &mut Vectors) {
    let digest = format!("sha256:{}", "3".repeat(64));
    let listing = |path: serde_json::Value| json!({"entries": [{"path": path, "size_bytes": 5, "sha256": digest}]});
    v.ok_decode(
        "decode-list-dir-result-bytes-path",
        "A listed file whose name is not UTF-8 (bad-\\xff): its path as bytes_base64.",
        "ListDirResult",
        listing(json!({"bytes_base64": BAD_OUTPUT})),
    );
    v.ok_decode(
        "decode-list-project-dir-result-bytes-paths",
        "A symlink whose path and target are not UTF-8.",
        "ListProjectDirResult",
        json!({"entries": [{"path": {"bytes_base64": LATIN1}, "kind": "symlink", "target": {"bytes_base64": LATIN1}}], "complete": true}),
    );
    v.ok_decode(
        "decode-read-files-request-bytes-path",
        "A readFiles member named by bytes, as the listing gave it.",
        "ReadFilesRequest",
        json!({"instance_id": "inst-1", "allowed_root": "/mnt/session/outputs", "files": [{"path": {"bytes_base64": BAD_OUTPUT}, "maximum_bytes": 5}], "aggregate_maximum_bytes": 5}),
    );
    v.ok_decode(
        "decode-read-files-result-bytes-path",
        "A readFiles outcome echoing a member path given as bytes.",
        "ReadFilesResult",
        json!({"files": [{"outcome": "read", "path": {"bytes_base64": BAD_OUTPUT}, "content_base64": "YmFkCg=="}]}),
    );
    v.ok_decode(
        "decode-write-file-request-bytes-path",
        "Staging a host file whose name is not UTF-8.",
        "WriteFileRequest",
        json!({"instance_id": "inst-1", "path": {"bytes_base64": LATIN1}, "content_base64": "YQ=="}),
    );
    v.bad_decode(
        "path-bytes-form-of-utf8",
        "The object form of a path that is valid UTF-8: it travels as a string (one form per path).",
        "ListDirResult",
        listing(json!({"bytes_base64": UTF8_OUTPUT})),
        "entries[0].path",
        // A JSON Schema cannot tell whether base64 holds valid UTF-8.
        "accepts",
    );
    v.bad_decode(
        "path-bytes-bad-base64",
        "bytes_base64 that is not standard padded base64.",
        "ListDirResult",
        listing(json!({"bytes_base64": "L21udC9iYWQt/w"})),
        "entries[0].path",
        "rejects",
    );
    v.bad_decode(
        "path-bytes-extra-member",
        "A path object with a member besides bytes_base64.",
        "ListDirResult",
        listing(json!({"bytes_base64": BAD_OUTPUT, "encoding": "latin1"})),
        "entries[0].path.encoding",
        "rejects",
    );
    v.bad_decode(
        "path-bytes-number",
        "A path that is neither a string nor a bytes object.",
        "ReadFileRequest",
        json!({"instance_id": "inst-1", "path": 7, "allowed_root": "/workspace/project", "maximum_bytes": 1}),
        "path",
        "rejects",
    );
    let rf = |path: &str| json!({"request": {"instance_id": "inst-1", "path": {"bytes_base64": path}, "allowed_root": "/workspace/project", "maximum_bytes": 1}});
    v.ok_validate(
        "validate-read-file-bytes-path",
        "A path that is not UTF-8, inside allowed_root: admitted like text.",
        "ReadFileRequest",
        rf(LATIN1),
    );
    v.bad_validate(
        "validate-read-file-bytes-path-nul",
        "A byte path holding NUL.",
        "ReadFileRequest",
        rf(WITH_NUL),
        "read_file",
        "path",
        // Path rules are the runtime's; the schema sees a well-formed object.
        "accepts",
    );
    v.bad_validate(
        "validate-read-file-bytes-path-dot-dot",
        "A byte path with a `..` component.",
        "ReadFileRequest",
        rf(DOT_DOT),
        "read_file",
        "path",
        // Path rules are the runtime's; the schema sees a well-formed object.
        "accepts",
    );
}
