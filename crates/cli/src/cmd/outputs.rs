//! Copying the output tree out of an instance into a host folder, without
//! ever writing outside that folder.
//!
//! The listing comes from listDir and the bytes from readFiles (the
//! runtime falls back to readFile per member when a provider lacks the
//! batch member); each file's bytes are checked against the listing's
//! SHA-256. On the host every path component is created or opened relative
//! to its parent's descriptor with `O_NOFOLLOW`, so a symlink already in
//! DIR (or a `..` a provider might report) can never redirect a write.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::{SandboxError, SandboxFailure};
use checkfu_sandbox_runtime::Adapter;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::fail::Failure;
use super::run::{read_listed, OUTPUT_LIST_ENTRIES};

/// Copies every regular file of `/mnt/session/outputs` into `dir` (created
/// when missing); returns how many files were written.
///
/// # Errors
/// The runtime's errors (exit 125), a relative path that is not a plain
/// sequence of names, or a host write that fails.
pub async fn copy_outputs(
    adapter: &Adapter,
    instance_id: &str,
    dir: &Path,
) -> Result<usize, Failure> {
    let listing = adapter
        .list_dir(instance_id, OUTPUT_PATH, OUTPUT_LIST_ENTRIES)
        .await?;
    let mut relative = Vec::with_capacity(listing.entries.len());
    for entry in &listing.entries {
        relative.push(relative_components(&entry.path)?);
    }
    let contents = read_listed(adapter, instance_id, &listing.entries).await?;
    let dir = dir.to_path_buf();
    let count = contents.len();
    tokio::task::spawn_blocking(move || -> Result<(), Failure> {
        std::fs::create_dir_all(&dir).map_err(|e| {
            Failure::checkfu(format!("--outputs {}: cannot create: {e}", dir.display()))
        })?;
        let root = rustix::fs::open(
            &dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Failure::checkfu(format!("--outputs {}: cannot open: {e}", dir.display())))?;
        for (components, bytes) in relative.iter().zip(contents) {
            write_beneath(&root, components, &bytes).map_err(|e| {
                Failure::checkfu(format!(
                    "--outputs {}: cannot write {}: {e}",
                    dir.display(),
                    components.join("/")
                ))
            })?;
        }
        Ok(())
    })
    .await
    .map_err(|e| Failure::checkfu(format!("output copy task failed: {e}")))??;
    Ok(count)
}

/// The components of `path` below the output tree: each a plain name (not
/// empty, `.` or `..`).
fn relative_components(path: &str) -> Result<Vec<String>, SandboxFailure> {
    let refuse = || -> SandboxFailure {
        SandboxError::protocol(
            "copy_outputs",
            "entries.path",
            format!("a path of plain names below {OUTPUT_PATH}"),
            path,
        )
        .into()
    };
    let rest = path
        .strip_prefix(OUTPUT_PATH)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(refuse)?;
    let parts: Vec<String> = rest.split('/').map(str::to_owned).collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\0'))
    {
        return Err(refuse());
    }
    Ok(parts)
}

/// Writes `bytes` at `components` beneath `root`, creating directories,
/// following no symlink.
fn write_beneath(root: &OwnedFd, components: &[String], bytes: &[u8]) -> Result<(), Errno> {
    let Some((file, dirs)) = components.split_last() else {
        return Err(Errno::INVAL);
    };
    let mut current: Option<OwnedFd> = None;
    for name in dirs {
        let parent = current.as_ref().unwrap_or(root);
        match rustix::fs::mkdirat(parent.as_fd(), name.as_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        let next = rustix::fs::openat(
            parent.as_fd(),
            name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        current = Some(next);
    }
    let parent = current.as_ref().unwrap_or(root);
    let fd = rustix::fs::openat(
        parent.as_fd(),
        file.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut written = 0;
    while written < bytes.len() {
        written += rustix::io::write(&fd, &bytes[written..])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_below_the_output_tree() {
        assert_eq!(
            relative_components("/mnt/session/outputs/a/b").unwrap(),
            vec!["a", "b"]
        );
        for bad in [
            "/mnt/session/outputs",
            "/mnt/session/outputs/../x",
            "/mnt/session/outputsx/y",
            "/mnt/session/outputs//y",
            "/etc/passwd",
        ] {
            assert!(relative_components(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_symlink_in_the_destination_is_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dest.path().join("link")).unwrap();
        let root = rustix::fs::open(
            dest.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let err = write_beneath(&root, &["link".into(), "x".into()], b"data").unwrap_err();
        assert!(matches!(err, Errno::LOOP | Errno::NOTDIR), "{err:?}");
        std::os::unix::fs::symlink(outside.path().join("f"), dest.path().join("f")).unwrap();
        assert!(write_beneath(&root, &["f".into()], b"data").is_err());
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        write_beneath(&root, &["d".into(), "e".into()], b"ok").unwrap();
        assert_eq!(std::fs::read(dest.path().join("d/e")).unwrap(), b"ok");
    }
}
