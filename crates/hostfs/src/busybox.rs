//! Finding a static busybox for the fixture image: the given path when it
//! exists, else the binary from Debian's `busybox-static` package, fetched
//! with `apt-get download` into a cache directory and unpacked with
//! `dpkg-deb` (no registry, no network beyond Debian's package mirror).

use std::path::{Path, PathBuf};

/// No usable busybox at the given path, and fetching the package failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot use busybox at {path:?}: {reason}")]
pub struct BusyboxError {
    /// Path given.
    pub path: PathBuf,
    /// What the fetch tried, with the command that installs the package by
    /// hand.
    pub reason: String,
}

/// The Debian package that ships a static busybox.
pub const BUSYBOX_PACKAGE: &str = "busybox-static";

/// The cache directory for the unpacked package:
/// `$CHECKFU_CACHE_DIR`, else `$XDG_CACHE_HOME/checkfu`, else
/// `$HOME/.cache/checkfu`, else the system temp dir.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CHECKFU_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("checkfu");
    }
    if let Some(home) = std::env::var_os("HOME") {
        return PathBuf::from(home).join(".cache").join("checkfu");
    }
    std::env::temp_dir().join("checkfu-cache")
}

async fn run(program: &str, args: &[&str], dir: &Path) -> Result<(), String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `preferred` when it exists; otherwise the busybox of the
/// `busybox-static` package, downloaded and unpacked once into
/// the cache directory (`$CHECKFU_CACHE_DIR`, else `$XDG_CACHE_HOME/checkfu`,
/// else `$HOME/.cache/checkfu`; reported through `progress`).
///
/// # Errors
/// [`BusyboxError`] naming `preferred` and what the fetch tried,
/// with the command that installs the package by hand.
// The busybox path and the package cache are the operator's host files,
// not a sandbox tree.
#[allow(clippy::disallowed_methods)]
pub async fn locate_busybox(
    preferred: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PathBuf, BusyboxError> {
    if preferred.exists() {
        return Ok(preferred.to_path_buf());
    }
    let dir = cache_dir().join(BUSYBOX_PACKAGE);
    let unpacked = dir.join("root").join("bin").join("busybox");
    if unpacked.exists() {
        return Ok(unpacked);
    }
    let fail = |reason: String| BusyboxError {
        path: preferred.to_path_buf(),
        reason: format!(
            "{reason}; install it with `apt-get install {BUSYBOX_PACKAGE}` or pass its path"
        ),
    };
    progress(&format!(
        "{} not found; fetching Debian's {BUSYBOX_PACKAGE} into {}",
        preferred.display(),
        dir.display()
    ));
    let download = dir.join("download");
    tokio::fs::create_dir_all(&download)
        .await
        .map_err(|e| fail(e.to_string()))?;
    if run("apt-get", &["download", BUSYBOX_PACKAGE], &download)
        .await
        .is_err()
    {
        progress("refreshing the package lists (apt-get update)");
        run("apt-get", &["update", "-qq"], &download)
            .await
            .map_err(fail)?;
        run("apt-get", &["download", BUSYBOX_PACKAGE], &download)
            .await
            .map_err(fail)?;
    }
    let mut debs = Vec::new();
    let mut entries = tokio::fs::read_dir(&download)
        .await
        .map_err(|e| fail(e.to_string()))?;
    while let Some(entry) = entries
        .next_entry()
        .await
        .map_err(|e| fail(e.to_string()))?
    {
        if entry.path().extension().is_some_and(|e| e == "deb") {
            debs.push(entry.path());
        }
    }
    debs.sort();
    let deb = debs
        .pop()
        .ok_or_else(|| fail("apt-get download left no .deb".into()))?;
    let staging = dir.join(format!("root.partial-{}", std::process::id()));
    let _ = tokio::fs::remove_dir_all(&staging).await;
    let deb_text = deb.to_string_lossy().into_owned();
    let staging_text = staging.to_string_lossy().into_owned();
    run("dpkg-deb", &["-x", &deb_text, &staging_text], &dir)
        .await
        .map_err(fail)?;
    let root = dir.join("root");
    if tokio::fs::rename(&staging, &root).await.is_err() {
        // Another process unpacked it first; ours is not needed.
        let _ = tokio::fs::remove_dir_all(&staging).await;
    }
    if unpacked.exists() {
        Ok(unpacked)
    } else {
        Err(fail(format!("{} has no bin/busybox", deb.display())))
    }
}
