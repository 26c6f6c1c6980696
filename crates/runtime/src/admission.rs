//! Textual admission of paths before a provider is called (spec "Paths,
//! mounts, and what the Runner admits first"; DESIGN D8). Physical
//! containment is the provider's job; this module decides which root a
//! path belongs to and whether the caller may touch it at all.

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::op;
use checkfu_sandbox_contract::validate;
use checkfu_sandbox_contract::Operation;
use checkfu_sandbox_contract::{MountAccess, SandboxError, SandboxMount};

/// True when `path` is absolute and normalized: starts with `/`, no empty,
/// `.` or `..` components, no NUL, no trailing `/` (except `/` itself).
/// The contract's rule, shared with the author kit's vectors.
pub fn is_normalized(path: impl AsRef<[u8]>) -> bool {
    validate::is_normalized_absolute_path(path)
}

/// True when `path` is `root` or lies beneath it (component-wise).
pub use checkfu_sandbox_contract::validate::is_within;

/// Where an admitted path lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathHome {
    /// The fixed output tree.
    Output,
    /// The deepest declared mount containing the path.
    Mount(SandboxMount),
}

impl PathHome {
    /// The root a read of this path must stay inside.
    pub fn allowed_root(&self) -> &str {
        match self {
            PathHome::Output => OUTPUT_PATH,
            PathHome::Mount(m) => &m.path,
        }
    }
}

/// Resolves `path` to the output tree or the deepest declared mount.
///
/// # Errors
/// `SandboxOperationFailed{operation, reason: invalid_request}` naming
/// `field` when the path is not normalized;
/// `SandboxOperationFailed{reason: path_not_admitted}` when it lies outside
/// every mount and the output tree.
pub fn home_of(
    operation: Operation,
    field: &str,
    path: impl AsRef<[u8]>,
    mounts: &[SandboxMount],
) -> Result<PathHome, SandboxError> {
    let path = checkfu_sandbox_contract::SandboxPath::from(path.as_ref());
    let path = &path;
    if !is_normalized(path) {
        return Err(SandboxError::invalid_request(
            operation,
            field,
            "an absolute normalized path (no empty, '.' or '..' components, no NUL, no trailing '/')",
            checkfu_sandbox_contract::show(path),
        ));
    }
    if is_within(path, OUTPUT_PATH) {
        return Ok(PathHome::Output);
    }
    mounts
        .iter()
        .filter(|m| is_within(path, &m.path))
        .max_by_key(|m| m.path.len())
        .map(|m| PathHome::Mount(m.clone()))
        .ok_or_else(|| SandboxError::SandboxOperationFailed {
            operation,
            reason: checkfu_sandbox_contract::FailureReason::PathNotAdmitted,
            message: format!("{path} is outside every declared mount and {OUTPUT_PATH}"),
            field: Some(field.into()),
            expected: Some(format!("a path under {OUTPUT_PATH} or a declared mount")),
            actual: Some(path.into()),
        })
}

/// The deepest read-write mount owning every path of a batch; a nested
/// read-only mount or different owners refuse the batch.
///
/// # Errors
/// `SandboxOperationFailed{operation: begin_active_write, reason:
/// path_not_admitted | read_only | invalid_request}` naming the path.
pub fn owning_rw_mount(
    paths: &[&str],
    mounts: &[SandboxMount],
) -> Result<SandboxMount, SandboxError> {
    const OP: Operation = op::BEGIN_ACTIVE_WRITE;
    let mut owner: Option<SandboxMount> = None;
    for (i, path) in paths.iter().enumerate() {
        let field = format!("files[{i}].path");
        let home = home_of(OP, &field, path, mounts)?;
        let mount = match home {
            PathHome::Output => {
                return Err(SandboxError::SandboxOperationFailed {
                    operation: OP,
                    reason: checkfu_sandbox_contract::FailureReason::PathNotAdmitted,
                    message: "the output tree is written through writeFile, not beginActiveWrite"
                        .into(),
                    field: Some(field),
                    expected: Some("a path inside a read-write mount".into()),
                    actual: Some((*path).into()),
                })
            }
            PathHome::Mount(m) => m,
        };
        if mount.access != MountAccess::ReadWrite {
            return Err(SandboxError::SandboxOperationFailed {
                operation: OP,
                reason: checkfu_sandbox_contract::FailureReason::ReadOnly,
                message: format!("the deepest mount owning {path} is read-only"),
                field: Some(field),
                expected: Some("a path whose deepest mount is read-write".into()),
                actual: Some(format!("{path} in read-only mount {}", mount.path)),
            });
        }
        if *path == mount.path {
            return Err(SandboxError::invalid_request(
                OP,
                field,
                "a file path strictly inside the mount",
                format!("the mount root {path}"),
            ));
        }
        match &owner {
            None => owner = Some(mount),
            Some(o) if o.path == mount.path => {}
            Some(o) => {
                return Err(SandboxError::invalid_request(
                    OP,
                    field,
                    format!("a path owned by the batch's mount {}", o.path),
                    format!("{path} owned by {}", mount.path),
                ))
            }
        }
    }
    owner.ok_or_else(|| SandboxError::invalid_request(OP, "files", "at least one file", "none"))
}

/// The first pair where one path is an ancestor of (or equal to) another.
pub fn ancestor_conflict<'a>(paths: &[&'a str]) -> Option<(&'a str, &'a str)> {
    for (i, a) in paths.iter().enumerate() {
        for b in paths.iter().skip(i + 1) {
            if is_within(a, b) || is_within(b, a) {
                return Some((a, b));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(path: &str, access: MountAccess) -> SandboxMount {
        SandboxMount {
            path: path.into(),
            access,
        }
    }

    #[test]
    fn normalization() {
        for ok in ["/", "/a", "/a/b", "/mnt/session/outputs/x"] {
            assert!(is_normalized(ok), "{ok}");
        }
        for bad in ["", "a", "/a/", "/a//b", "/a/./b", "/a/../b", "/..", "/a\0b"] {
            assert!(!is_normalized(bad), "{bad:?}");
        }
    }

    #[test]
    fn within_is_component_wise() {
        assert!(is_within("/data/x", "/data"));
        assert!(is_within("/data", "/data"));
        assert!(!is_within("/database", "/data"));
    }

    #[test]
    fn deepest_mount_wins() {
        let mounts = [
            mount("/w", MountAccess::ReadWrite),
            mount("/w/ro", MountAccess::ReadOnly),
        ];
        assert_eq!(
            home_of(op::EXECUTE, "path", "/w/ro/f", &mounts)
                .unwrap()
                .allowed_root(),
            "/w/ro"
        );
        assert_eq!(
            home_of(op::EXECUTE, "path", "/w/f", &mounts)
                .unwrap()
                .allowed_root(),
            "/w"
        );
        assert_eq!(
            home_of(op::EXECUTE, "path", "/mnt/session/outputs/y", &mounts).unwrap(),
            PathHome::Output
        );
        assert!(home_of(op::EXECUTE, "path", "/etc/passwd", &mounts).is_err());
        assert!(owning_rw_mount(&["/w/ro/f"], &mounts).is_err());
        assert_eq!(
            owning_rw_mount(&["/w/a", "/w/b/c"], &mounts).unwrap().path,
            "/w"
        );
    }

    #[test]
    fn ancestors_conflict() {
        assert_eq!(
            ancestor_conflict(&["/w/a", "/w/a/b"]),
            Some(("/w/a", "/w/a/b"))
        );
        assert_eq!(ancestor_conflict(&["/w/a", "/w/ab"]), None);
    }
}
