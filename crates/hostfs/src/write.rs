//! writeFile into the host directory behind an instance's mount or output
//! tree, through [`checkfu_sandbox_contained`] (never through a link).

use checkfu_sandbox_contained as contained;
use checkfu_sandbox_contract::bounds::MAX_FILE_BYTES;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::errors::{blocking, contained_error};
use crate::store::{self, Home, Layout};

/// writeFile of `request` into the instance whose provision request is
/// `instance_request` and whose state is `state`: while provisioning any
/// mount or the output tree, once active the output tree only. A file is
/// replaced whole; a directory (`kind: "directory"`) is created or kept.
/// Either is owned by [`store::owner_of`] its home and gets exactly the
/// request's mode (absent: `0o644` for a file, `0o755` for a directory).
///
/// # Errors
///
/// `SandboxFileTooLarge` over [`MAX_FILE_BYTES`]; `PathNotAdmitted` outside
/// every mount and the output tree; `SandboxConflict` for a mount of an
/// active instance; `InvalidRequest` naming `path` (not below its root),
/// `mode` (over 0o777) or `content_base64` (not empty for a directory);
/// the containment failure of the write (`not_regular_file` for a
/// directory where a file is, or a file where a directory is).
pub async fn write_file(
    layout: &Layout,
    instance_request: &SandboxProvisionRequest,
    state: InstanceState,
    request: WriteFileRequest,
) -> Result<(), SandboxError> {
    const OP: Operation = op::WRITE_FILE;
    if request.content_base64.len() as u64 > MAX_FILE_BYTES {
        return Err(SandboxError::SandboxFileTooLarge {
            path: request.path.display(),
            limit_bytes: MAX_FILE_BYTES,
            actual_bytes: request.content_base64.len() as u64,
        });
    }
    let Some((home, root)) = store::home_of(instance_request, &request.path) else {
        return Err(SandboxError::failed(
            OP,
            FailureReason::PathNotAdmitted,
            format!(
                "{} is outside every mount and the output tree",
                request.path
            ),
        ));
    };
    if state == InstanceState::Active && home != Home::Output {
        return Err(SandboxError::conflict(
            OP,
            "provisioning",
            ConflictActual::Active,
        ));
    }
    let Some(rel) = store::relative_to(&request.path, root) else {
        return Err(SandboxError::invalid_request(
            OP,
            "path",
            "a normalized file path below its root",
            &request.path,
        ));
    };
    let host = layout.home_dir(&request.instance_id, home);
    let owner = store::owner_of(instance_request, home);
    let path = request.path.clone();
    let mode = request.effective_mode();
    if mode > MAX_FILE_MODE {
        return Err(SandboxError::invalid_request(
            OP,
            "mode",
            "permission bits of at most 0o777",
            format!("0o{mode:o}"),
        ));
    }
    let kind = request.effective_kind();
    if kind == WriteKind::Directory && !request.content_base64.is_empty() {
        return Err(SandboxError::invalid_request(
            OP,
            "content_base64",
            "empty content for kind directory",
            format!("{} bytes", request.content_base64.len()),
        ));
    }
    let content = request.content_base64.0;
    blocking(OP, move || {
        contained::open_root(&host).and_then(|root| {
            let root = std::os::fd::AsFd::as_fd(&root);
            match kind {
                WriteKind::File => {
                    contained::replace_beneath_mode(root, &rel, &content, owner, mode)
                }
                WriteKind::Directory => contained::create_dir_beneath_mode(root, &rel, owner, mode),
            }
        })
    })
    .await?
    .map_err(|e| contained_error(OP, &path, e))
}
