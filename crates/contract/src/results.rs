//! Result-level checks: what the runtime refuses in a provider's answer
//! after the call (spec "The operations", "Runtime rejects"; "Optional
//! capabilities: absent versus wrong"). Pure functions shared by the
//! runtime and the author kit's `result:` vectors, so a provider author can
//! test these rules without the runtime. Each returns the first violation
//! as a [`Mismatch`]; the runtime reports it as `SandboxProtocolInvalid`
//! naming the member.

use std::collections::BTreeSet;

use crate::bounds::MAX_FILE_BYTES;
use crate::mismatch::Mismatch;
use crate::path::SandboxPath;
use crate::timestamp::Timestamp;
use crate::types::*;
use crate::validate::{is_normalized_absolute_path, is_within};

/// A readFiles group's result against its request's `files` and
/// `aggregate_maximum_bytes`: the closed per-file union, exactly one
/// outcome per member, in request order (each naming its member's path); a
/// `too_large` outcome only over the member's `maximum_bytes`; read content
/// within the member's budget and, summed without overflow, within the
/// aggregate. Operation: `read_files`.
pub fn read_files_result(
    group: &[ReadFilesEntry],
    aggregate_maximum_bytes: u64,
    got: &[ReadFileOutcome],
) -> Option<Mismatch> {
    if got.len() != group.len() {
        return Some(Mismatch::new(
            "files",
            format!("{} outcomes", group.len()),
            format!("{} outcomes", got.len()),
        ));
    }
    let mut total: u64 = 0;
    for (i, (want, outcome)) in group.iter().zip(got).enumerate() {
        if *outcome.path() != want.path {
            return Some(Mismatch::new(
                format!("files[{i}].path"),
                want.path.display(),
                outcome.path().display(),
            ));
        }
        if let ReadFileOutcome::TooLarge { size_bytes, .. } = outcome {
            if *size_bytes <= want.maximum_bytes {
                return Some(Mismatch::new(
                    format!("files[{i}].size_bytes"),
                    format!("more than maximum_bytes {}", want.maximum_bytes),
                    size_bytes.to_string(),
                ));
            }
        }
        if let ReadFileOutcome::Read { content_base64, .. } = outcome {
            let len = content_base64.len() as u64;
            if len > want.maximum_bytes {
                return Some(Mismatch::new(
                    format!("files[{i}].content_base64"),
                    format!("at most {} bytes", want.maximum_bytes),
                    format!("{len} bytes"),
                ));
            }
            total = match total.checked_add(len) {
                Some(t) if t <= aggregate_maximum_bytes => t,
                _ => {
                    return Some(Mismatch::new(
                        "files",
                        format!("an aggregate of at most {aggregate_maximum_bytes} bytes"),
                        "more",
                    ))
                }
            };
        }
    }
    None
}

/// A listing's paths (listDir or listProjectDir): each normalized and
/// strictly below `root`, none repeated, at most `max_entries` of them.
pub fn listing<'a>(
    root: &str,
    max_entries: u32,
    paths: impl Iterator<Item = &'a SandboxPath>,
) -> Option<Mismatch> {
    let mut seen = BTreeSet::new();
    let mut count: u64 = 0;
    for (i, p) in paths.enumerate() {
        count += 1;
        if !is_normalized_absolute_path(p) || !is_within(p, root) || p.as_bytes() == root.as_bytes()
        {
            return Some(Mismatch::new(
                format!("entries[{i}].path"),
                format!("a normalized path below {root}"),
                p.display(),
            ));
        }
        if !seen.insert(p) {
            return Some(Mismatch::new(
                format!("entries[{i}].path"),
                "each path once",
                p.display(),
            ));
        }
    }
    (count > u64::from(max_entries)).then(|| {
        Mismatch::new(
            "entries",
            format!("at most {max_entries} entries"),
            format!("{count} entries"),
        )
    })
}

/// A listDir result for its request's `root` and `max_entries`:
/// [`listing`], every entry a member can read (at most 16 MiB) carries its
/// SHA-256, and every `mode` given is at most `0o777`. Operation:
/// `list_dir`.
pub fn list_dir_result(root: &str, max_entries: u32, result: &ListDirResult) -> Option<Mismatch> {
    if let Some(m) = listing(root, max_entries, result.entries.iter().map(|e| &e.path)) {
        return Some(m);
    }
    for (i, e) in result.entries.iter().enumerate() {
        if e.sha256.is_none() && e.size_bytes <= MAX_FILE_BYTES {
            return Some(Mismatch::new(
                format!("entries[{i}].sha256"),
                format!("a digest for a file of at most {MAX_FILE_BYTES} bytes"),
                format!("absent for {} ({} bytes)", e.path, e.size_bytes),
            ));
        }
        if let Some(mode) = e.mode.filter(|m| *m > crate::types::MAX_FILE_MODE) {
            return Some(Mismatch::new(
                format!("entries[{i}].mode"),
                "permission bits of at most 0o777 (511)",
                format!("{mode} (0o{mode:o})"),
            ));
        }
    }
    None
}

/// A listProjectDir result for its request's `root` and `max_entries`:
/// `complete: true` (silently dropping a leaf is the failure this member
/// exists to prevent), then [`listing`]. Operation: `list_project_dir`.
pub fn list_project_dir_result(
    root: &str,
    max_entries: u32,
    result: &ListProjectDirResult,
) -> Option<Mismatch> {
    if !result.complete {
        return Some(Mismatch::new("complete", "true", "false"));
    }
    listing(root, max_entries, result.entries.iter().map(|e| &e.path))
}

/// A release disposition against the request's `snapshot_expires_at`:
/// `released` (with its snapshot) exactly when the request carried one (a
/// durable profile), `destroyed` exactly when it did not (ephemeral_zdr).
/// The settled snapshot's own identity is `snapshot_identity`'s.
/// Operation: `release`.
pub fn release_disposition(
    snapshot_expires_at: Option<&Timestamp>,
    disposition: &ReleaseDisposition,
) -> Option<Mismatch> {
    match (disposition, snapshot_expires_at) {
        (ReleaseDisposition::Released { .. }, None) => Some(Mismatch::new(
            "disposition",
            "destroyed (ephemeral_zdr)",
            "released",
        )),
        (ReleaseDisposition::Destroyed, Some(_)) => Some(Mismatch::new(
            "disposition",
            "released (durable)",
            "destroyed",
        )),
        _ => None,
    }
}

/// An execute settlement against its command's `output_limit_bytes`:
/// stdout and stderr each at most that many bytes, and `finished_at` not
/// before `started_at` (two exit causes or none are refused by the
/// decoder). Operation: `execute`.
pub fn command_result(output_limit_bytes: u64, result: &SandboxCommandResult) -> Option<Mismatch> {
    let limit = output_limit_bytes;
    for (field, len) in [
        ("stdout_base64", result.stdout_base64.len()),
        ("stderr_base64", result.stderr_base64.len()),
    ] {
        if len as u64 > limit {
            return Some(Mismatch::new(
                field,
                format!("at most {limit} bytes"),
                format!("{len} bytes"),
            ));
        }
    }
    (result.finished_at < result.started_at).then(|| {
        Mismatch::new(
            "finished_at",
            format!("at or after started_at {}", result.started_at),
            result.finished_at.to_string(),
        )
    })
}
