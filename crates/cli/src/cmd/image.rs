//! `--provider-image NAME@sha256:<hex>`: a provider shipped as a local OCI
//! image, started by the local Docker daemon with the wire on its stdio
//! (`docker run -i --rm --pull never`). Nothing is pulled: an image the
//! daemon does not hold is refused.

use super::fail::Failure;

/// The 64 lowercase hex digits after `@sha256:` in `reference`, or `None`
/// when it is not pinned by a digest.
pub fn pinned_hex(reference: &str) -> Option<&str> {
    let (_, hex) = reference.rsplit_once("@sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

/// The local image id (`sha256:<hex>`) `reference` names: the image whose
/// id is the pinned digest, else the image whose repository digest it is.
///
/// # Errors
/// 125 when the daemon holds no such image (it is never pulled) or the
/// `docker` command cannot run.
pub fn local_id(reference: &str) -> Result<String, Failure> {
    let hex = pinned_hex(reference).ok_or_else(|| {
        Failure::usage(format!(
            "--provider-image: expected NAME@sha256:<64 hex>, actual {reference:?}"
        ))
    })?;
    for candidate in [format!("sha256:{hex}"), reference.to_owned()] {
        let out = std::process::Command::new("docker")
            .args(["image", "inspect", "--format", "{{.Id}}", &candidate])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map_err(|e| Failure::checkfu(format!("--provider-image: docker: {e}")))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned());
        }
    }
    Err(Failure::checkfu(format!(
        "--provider-image: expected an image the local daemon holds, actual none for {reference:?} \
(images are never pulled)"
    )))
}

/// `docker run -i --rm --pull never --label checkfu.sandbox.provider-image=1
/// <id>`, in its own process group: the provider's stdin and stdout are the
/// wire; when the connection ends its stdin closes and the container exits
/// and is removed.
pub fn command(id: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("docker");
    c.args([
        "run",
        "-i",
        "--rm",
        "--pull",
        "never",
        "--log-driver",
        "none",
        "--label",
        "checkfu.sandbox.provider-image=1",
        id,
    ])
    .process_group(0);
    c
}
