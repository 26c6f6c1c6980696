//! Pure request validators: the bounds of the spec's Bounds table that a
//! decoder cannot see, and the textual path admission of DESIGN D8.
//!
//! The runtime calls these before it calls a provider; the author kit's
//! `validate:<Type>` vectors exercise them without a runtime. Each function
//! reports every violation it finds, in field order, each with its field
//! path (relative to the validated value) and both values (STYLE 7); an
//! empty list means the request is admitted.
//!
//! Rendering: `expected` is a short description; `actual` is the offending
//! value as compact JSON, or a count (`257`) or a size (`65537 bytes`).

use std::collections::BTreeMap;

use crate::bounds::{
    is_valid_environment_key, MAX_ACTIVE_WRITE_AGGREGATE_BYTES, MAX_ACTIVE_WRITE_FILES,
    MAX_ARGUMENTS, MAX_ARGUMENT_BYTES, MAX_FILE_BYTES, MAX_LIST_ENTRIES, MAX_MOUNTS,
    MAX_OUTPUT_LIMIT_BYTES, MAX_PINNED_SNAPSHOTS, MAX_READ_FILES_AGGREGATE_BYTES,
    MAX_READ_FILES_COUNT, MAX_READ_FILE_BYTES, MAX_STDIN_BYTES, RESERVED_ROOTS,
};
use crate::error::{Requirement, SandboxError};
use crate::mismatch::Mismatch;
use crate::types::{
    ActiveWriteRequest, CleanupRequest, ListDirRequest, ListProjectDirRequest, ReadFileRequest,
    ReadFilesRequest, SandboxCommand, SandboxMount, SandboxProcessRequest, WriteFileRequest,
};

use crate::mismatch::show;
use serde::Serialize;

/// Why `path` is not an absolute, normalized sandbox path, or `None` when
/// it is one. Paths are bytes ([`crate::SandboxPath`]); text works too.
///
/// Normalized means: starts with `/`, no empty, `.` or `..` component, no
/// trailing `/` (except the root `/` itself), and no NUL byte.
pub fn path_problem(path: impl AsRef<[u8]>) -> Option<&'static str> {
    let path = path.as_ref();
    if path.contains(&0) {
        return Some("a path without NUL");
    }
    if !path.starts_with(b"/") {
        return Some("an absolute path");
    }
    if path == b"/" {
        return None;
    }
    if path.ends_with(b"/") {
        return Some("a path without a trailing /");
    }
    for component in path[1..].split(|b| *b == b'/') {
        match component {
            b"" => return Some("a path without empty components"),
            b"." | b".." => return Some("a path without . or .. components"),
            _ => {}
        }
    }
    None
}

/// True when `path` is absolute and normalized (see [`path_problem`]).
pub fn is_normalized_absolute_path(path: impl AsRef<[u8]>) -> bool {
    path_problem(path).is_none()
}

/// True when normalized `path` is `root` or lies under it, compared by
/// whole components (`/data2` is not under `/data`).
pub fn is_within(path: impl AsRef<[u8]>, root: impl AsRef<[u8]>) -> bool {
    let (path, root) = (path.as_ref(), root.as_ref());
    if root == b"/" {
        return path.starts_with(b"/");
    }
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with(b"/"))
}

/// True when either path is the other or lies under it.
pub fn overlaps(a: impl AsRef<[u8]>, b: impl AsRef<[u8]>) -> bool {
    let (a, b) = (a.as_ref(), b.as_ref());
    is_within(a, b) || is_within(b, a)
}

fn check_path<P: AsRef<[u8]> + Serialize + ?Sized>(
    out: &mut Vec<Mismatch>,
    field: &str,
    path: &P,
) -> bool {
    match path_problem(path) {
        Some(expected) => {
            out.push(Mismatch::new(field, expected, show(path)));
            false
        }
        None => true,
    }
}

fn check_under_root<P: AsRef<[u8]> + Serialize + ?Sized>(
    out: &mut Vec<Mismatch>,
    field: &str,
    path: &P,
    root: &str,
) {
    if check_path(out, field, path) && !is_within(path.as_ref(), root) {
        out.push(Mismatch::new(
            field,
            format!("a path inside allowed_root {}", show(root)),
            show(path),
        ));
    }
}

fn check_argv(
    out: &mut Vec<Mismatch>,
    executable: &str,
    arguments: &[String],
    working_directory: &str,
    environment: &BTreeMap<String, String>,
) {
    if executable.is_empty() || executable.contains('\0') {
        out.push(Mismatch::new(
            "executable",
            "a non-empty executable without NUL",
            show(executable),
        ));
    }
    if arguments.len() > MAX_ARGUMENTS {
        out.push(Mismatch::new(
            "arguments",
            format!("at most {MAX_ARGUMENTS} arguments"),
            arguments.len().to_string(),
        ));
    }
    for (i, argument) in arguments.iter().enumerate() {
        let field = format!("arguments[{i}]");
        if argument.len() > MAX_ARGUMENT_BYTES {
            out.push(Mismatch::new(
                &field,
                format!("at most {MAX_ARGUMENT_BYTES} bytes"),
                format!("{} bytes", argument.len()),
            ));
        }
        if argument.contains('\0') {
            out.push(Mismatch::new(
                &field,
                "an argument without NUL",
                show(argument),
            ));
        }
    }
    check_path(out, "working_directory", working_directory);
    for (key, value) in environment {
        let field = format!("environment[{}]", show(key));
        if !is_valid_environment_key(key) {
            out.push(Mismatch::new(
                &field,
                "a key matching ^[A-Za-z_][A-Za-z0-9_]*$",
                show(key),
            ));
        }
        if value.contains('\0') {
            out.push(Mismatch::new(&field, "a value without NUL", show(value)));
        }
    }
}

/// An execute command against the profile's `max_duration_seconds`:
/// arguments (at most 256, each at most 65,536 bytes, no NUL), a non-empty
/// executable, a normalized working directory, environment keys, stdin of
/// at most 16 MiB, `timeout_seconds` in `1..=max_duration_seconds`, and
/// `output_limit_bytes` of at most 16 MiB.
pub fn command(command: &SandboxCommand, max_duration_seconds: u32) -> Vec<Mismatch> {
    let mut out = Vec::new();
    check_argv(
        &mut out,
        &command.executable,
        &command.arguments,
        &command.working_directory,
        &command.environment,
    );
    if let Some(stdin) = &command.stdin_base64 {
        if stdin.len() as u64 > MAX_STDIN_BYTES {
            out.push(Mismatch::new(
                "stdin_base64",
                format!("at most {MAX_STDIN_BYTES} bytes"),
                format!("{} bytes", stdin.len()),
            ));
        }
    }
    if command.timeout_seconds == 0 || command.timeout_seconds > max_duration_seconds {
        out.push(Mismatch::new(
            "timeout_seconds",
            format!("1..={max_duration_seconds} (the profile's max_duration_seconds)"),
            command.timeout_seconds.to_string(),
        ));
    }
    if command.output_limit_bytes > MAX_OUTPUT_LIMIT_BYTES {
        out.push(Mismatch::new(
            "output_limit_bytes",
            format!("at most {MAX_OUTPUT_LIMIT_BYTES}"),
            command.output_limit_bytes.to_string(),
        ));
    }
    out
}

/// An openProcess request: the same argv, working directory and
/// environment rules as [`command`]; it has no timeout or output limit.
pub fn process_request(request: &SandboxProcessRequest) -> Vec<Mismatch> {
    let mut out = Vec::new();
    check_argv(
        &mut out,
        &request.executable,
        &request.arguments,
        &request.working_directory,
        &request.environment,
    );
    out
}

/// A readFile request: `maximum_bytes` at most 16 MiB, a normalized
/// `allowed_root`, and a normalized `path` inside it.
pub fn read_file_request(request: &ReadFileRequest) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let root_ok = check_path(&mut out, "allowed_root", &request.allowed_root);
    if root_ok {
        check_under_root(&mut out, "path", &request.path, &request.allowed_root);
    } else {
        check_path(&mut out, "path", &request.path);
    }
    if request.maximum_bytes > MAX_READ_FILE_BYTES {
        out.push(Mismatch::new(
            "maximum_bytes",
            format!("at most {MAX_READ_FILE_BYTES}"),
            request.maximum_bytes.to_string(),
        ));
    }
    out
}

/// A readFiles request: at most 1,024 members; `aggregate_maximum_bytes`
/// exactly the overflow-free sum of the members' `maximum_bytes` and at
/// most 128 MiB; each member's `maximum_bytes` at most 16 MiB and its path
/// normalized inside the normalized `allowed_root`.
pub fn read_files_request(request: &ReadFilesRequest) -> Vec<Mismatch> {
    let mut out = Vec::new();
    if request.files.len() > MAX_READ_FILES_COUNT {
        out.push(Mismatch::new(
            "files",
            format!("at most {MAX_READ_FILES_COUNT} files"),
            request.files.len().to_string(),
        ));
    }
    let sum = request
        .files
        .iter()
        .try_fold(0u64, |acc, f| acc.checked_add(f.maximum_bytes));
    match sum {
        None => out.push(Mismatch::new(
            "aggregate_maximum_bytes",
            "the sum of the members' maximum_bytes, which overflows",
            request.aggregate_maximum_bytes.to_string(),
        )),
        Some(sum) if sum != request.aggregate_maximum_bytes => out.push(Mismatch::new(
            "aggregate_maximum_bytes",
            format!("exactly {sum}, the sum of the members' maximum_bytes"),
            request.aggregate_maximum_bytes.to_string(),
        )),
        Some(_) => {}
    }
    if request.aggregate_maximum_bytes > MAX_READ_FILES_AGGREGATE_BYTES {
        out.push(Mismatch::new(
            "aggregate_maximum_bytes",
            format!("at most {MAX_READ_FILES_AGGREGATE_BYTES}"),
            request.aggregate_maximum_bytes.to_string(),
        ));
    }
    let root_ok = check_path(&mut out, "allowed_root", &request.allowed_root);
    for (i, file) in request.files.iter().enumerate() {
        let field = format!("files[{i}].path");
        if root_ok {
            check_under_root(&mut out, &field, &file.path, &request.allowed_root);
        } else {
            check_path(&mut out, &field, &file.path);
        }
        if file.maximum_bytes > MAX_READ_FILE_BYTES {
            out.push(Mismatch::new(
                format!("files[{i}].maximum_bytes"),
                format!("at most {MAX_READ_FILE_BYTES}"),
                file.maximum_bytes.to_string(),
            ));
        }
    }
    out
}

/// A listing request (listDir or listProjectDir): a normalized `root` and
/// `max_entries` in `1..=100,000`.
pub fn list_request(root: &str, max_entries: u32) -> Vec<Mismatch> {
    let mut out = Vec::new();
    check_path(&mut out, "root", root);
    if max_entries == 0 || max_entries > MAX_LIST_ENTRIES {
        out.push(Mismatch::new(
            "max_entries",
            format!("1..={MAX_LIST_ENTRIES}"),
            max_entries.to_string(),
        ));
    }
    out
}

/// A listDir request; see [`list_request`].
pub fn list_dir_request(request: &ListDirRequest) -> Vec<Mismatch> {
    list_request(&request.root, request.max_entries)
}

/// A listProjectDir request; see [`list_request`].
pub fn list_project_dir_request(request: &ListProjectDirRequest) -> Vec<Mismatch> {
    list_request(&request.root, request.max_entries)
}

/// A cleanup request: `orphaned_before` not after `now`, at most 1,024
/// pinned snapshots, none of them empty.
pub fn cleanup_request(request: &CleanupRequest) -> Vec<Mismatch> {
    let mut out = Vec::new();
    if request.orphaned_before > request.now {
        out.push(Mismatch::new(
            "orphaned_before",
            format!("not after now {}", show(&request.now)),
            show(&request.orphaned_before),
        ));
    }
    if request.pinned_snapshots.len() > MAX_PINNED_SNAPSHOTS {
        out.push(Mismatch::new(
            "pinned_snapshots",
            format!("at most {MAX_PINNED_SNAPSHOTS} snapshot ids"),
            request.pinned_snapshots.len().to_string(),
        ));
    }
    for (i, id) in request.pinned_snapshots.iter().enumerate() {
        if id.is_empty() {
            out.push(Mismatch::new(
                format!("pinned_snapshots[{i}]"),
                "a non-empty snapshot id",
                show(id),
            ));
        }
    }
    out
}

/// A mount plan against the envelope's `max_mounts` (DESIGN D8): at most
/// `min(max_mounts, 64)` mounts; each path normalized, overlapping no
/// reserved root in either direction (a mount at or under `/tmp`, or at
/// `/` or `/mnt` above `/mnt/session/outputs`), and not declared twice.
/// Fields are `mounts` and `mounts[i].path`.
pub fn mounts(mounts: &[SandboxMount], max_mounts: u8) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let limit = max_mounts.min(MAX_MOUNTS);
    if mounts.len() > usize::from(limit) {
        out.push(Mismatch::new(
            "mounts",
            format!("at most {limit} mounts"),
            mounts.len().to_string(),
        ));
    }
    for (i, mount) in mounts.iter().enumerate() {
        let field = format!("mounts[{i}].path");
        if !check_path(&mut out, &field, &mount.path) {
            continue;
        }
        if let Some(root) = RESERVED_ROOTS.iter().find(|r| overlaps(&mount.path, r)) {
            out.push(Mismatch::new(
                &field,
                format!("a path that does not overlap the reserved root {root}"),
                show(&mount.path),
            ));
        }
        if let Some(first) = mounts[..i].iter().position(|m| m.path == mount.path) {
            out.push(Mismatch::new(
                &field,
                format!("a path not already declared by mounts[{first}]"),
                show(&mount.path),
            ));
        }
    }
    out
}

/// A writeFile request: a normalized path, content of at most 16 MiB,
/// permission bits (when given) of at most `0o777`, and no content for a
/// directory (`kind: "directory"`).
/// (Whether the path is under a declared mount or the output tree depends
/// on the instance's state and is the runtime's admission.)
pub fn write_file_request(request: &WriteFileRequest) -> Vec<Mismatch> {
    let mut out = Vec::new();
    check_path(&mut out, "path", &request.path);
    if request.content_base64.len() as u64 > MAX_FILE_BYTES {
        out.push(Mismatch::new(
            "content_base64",
            format!("at most {MAX_FILE_BYTES} bytes"),
            format!("{} bytes", request.content_base64.len()),
        ));
    }
    if let Some(mode) = request.mode {
        if mode > crate::types::MAX_FILE_MODE {
            out.push(Mismatch::new(
                "mode",
                format!(
                    "permission bits of at most 0o777 ({})",
                    crate::types::MAX_FILE_MODE
                ),
                format!("{mode} (0o{mode:o})"),
            ));
        }
    }
    if request.effective_kind() == crate::types::WriteKind::Directory
        && !request.content_base64.is_empty()
    {
        out.push(Mismatch::new(
            "content_base64",
            "empty content for kind directory",
            format!("{} bytes", request.content_base64.len()),
        ));
    }
    out
}

/// A beginActiveWrite batch: a non-empty transaction id, at most 1,024
/// files of at most 16 MiB each and 128 MiB in all, normalized paths, no
/// path repeated or an ancestor of another.
pub fn active_write_request(request: &ActiveWriteRequest) -> Vec<Mismatch> {
    let mut out = Vec::new();
    if request.transaction_id.is_empty() {
        out.push(Mismatch::new(
            "transaction_id",
            "a non-empty transaction id",
            show(&request.transaction_id),
        ));
    }
    if request.files.len() > MAX_ACTIVE_WRITE_FILES {
        out.push(Mismatch::new(
            "files",
            format!("at most {MAX_ACTIVE_WRITE_FILES} files"),
            request.files.len().to_string(),
        ));
    }
    let total = request.files.iter().fold(0u64, |acc, f| {
        acc.saturating_add(f.content_base64.len() as u64)
    });
    if total > MAX_ACTIVE_WRITE_AGGREGATE_BYTES {
        out.push(Mismatch::new(
            "files",
            format!("at most {MAX_ACTIVE_WRITE_AGGREGATE_BYTES} bytes in all"),
            format!("{total} bytes"),
        ));
    }
    for (i, file) in request.files.iter().enumerate() {
        let field = format!("files[{i}].path");
        if !check_path(&mut out, &field, &file.path) {
            continue;
        }
        if let Some(j) = request.files[..i]
            .iter()
            .position(|f| overlaps(&f.path, &file.path))
        {
            out.push(Mismatch::new(
                &field,
                format!("a path that neither repeats nor nests with files[{j}].path"),
                show(&file.path),
            ));
        }
        if file.content_base64.len() as u64 > MAX_FILE_BYTES {
            out.push(Mismatch::new(
                format!("files[{i}].content_base64"),
                format!("at most {MAX_FILE_BYTES} bytes"),
                format!("{} bytes", file.content_base64.len()),
            ));
        }
    }
    out
}

/// A refused request as `SandboxOperationFailed{operation, reason:
/// invalid_request, field, expected, actual}`, from its first mismatch.
pub fn invalid_request(operation: crate::operation::Operation, mismatch: Mismatch) -> SandboxError {
    SandboxError::invalid_request(
        operation,
        mismatch.field,
        mismatch.expected,
        mismatch.actual,
    )
}

/// A refused mount plan as `SandboxCapabilityUnavailable{requirement:
/// mounts}` (spec "Paths, mounts"), the detail naming the field and both
/// values as `<field>: expected <expected>, actual <actual>`.
pub fn mounts_unavailable(mismatch: &Mismatch) -> SandboxError {
    SandboxError::unavailable(
        Requirement::Mounts,
        format!(
            "{}: expected {}, actual {}",
            mismatch.field, mismatch.expected, mismatch.actual
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MountAccess;

    #[test]
    fn path_shapes() {
        for ok in ["/", "/a", "/a/b", "/a/.b", "/a/..b", "/a/b..."] {
            assert!(is_normalized_absolute_path(ok), "{ok}");
        }
        for bad in [
            "", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/.", "/a\0",
        ] {
            assert!(!is_normalized_absolute_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn containment_is_by_component() {
        assert!(is_within("/data/x", "/data"));
        assert!(is_within("/data", "/data"));
        assert!(!is_within("/data2", "/data"));
        assert!(is_within("/anything", "/"));
        assert!(overlaps("/mnt", "/mnt/session/outputs"));
        assert!(!overlaps("/mnt/session/out", "/mnt/session/outputs"));
    }

    #[test]
    fn mount_plan_reports_every_violation() {
        let m = |p: &str| SandboxMount {
            path: p.into(),
            access: MountAccess::ReadOnly,
        };
        let found = mounts(&[m("/tmp/x"), m("/data"), m("/data"), m("/")], 3);
        let fields: Vec<&str> = found.iter().map(|m| m.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "mounts",
                "mounts[0].path",
                "mounts[2].path",
                "mounts[3].path"
            ]
        );
    }
}
