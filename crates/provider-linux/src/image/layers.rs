//! Files of the image store: atomic writes, and layers unpacked over a
//! root file system with their whiteouts applied, never leaving it.

use super::*;

// Existence checks of the provider's own store files.
#[allow(clippy::disallowed_methods)]
pub(super) fn path_exists(p: &Path) -> bool {
    p.exists()
}

pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let res = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res.map_err(io_at(path))
}

/// Unpacks one layer over `dest`, applying whiteouts; owners and modes are
/// kept. Entries are unpacked with `tar`'s `unpack_in`, which refuses paths
/// that leave `dest`.
pub(super) fn apply_layer(bytes: &[u8], dest: &Path) -> Result<(), ImageError> {
    let mut ar = tar::Archive::new(bytes);
    ar.set_preserve_permissions(true);
    ar.set_preserve_ownerships(true);
    ar.set_unpack_xattrs(false);
    ar.set_overwrite(true);
    for entry in ar.entries().map_err(io_at(dest))? {
        let mut entry = entry.map_err(io_at(dest))?;
        let path = entry.path().map_err(io_at(dest))?.into_owned();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(hidden) = name.strip_prefix(".wh.") {
            let Some(parent) = safe_join(dest, path.parent().unwrap_or(Path::new(""))) else {
                continue;
            };
            let parent_fd = match checkfu_sandbox_contained::open_root(&parent) {
                Ok(fd) => fd,
                Err(_) => continue,
            };
            if hidden == ".wh..opq" {
                // Opaque directory: drop what lower layers put there.
                clear_dir(parent_fd.as_fd());
            } else {
                remove_at(parent_fd.as_fd(), hidden);
            }
            continue;
        }
        entry.unpack_in(dest).map_err(io_at(&dest.join(&path)))?;
    }
    Ok(())
}

fn safe_join(dest: &Path, rel: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = dest.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

fn remove_at(dir: std::os::fd::BorrowedFd<'_>, name: &str) {
    use rustix::fs::{AtFlags, Mode, OFlags};
    if rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok() {
        return;
    }
    if let Ok(sub) = rustix::fs::openat(
        dir,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    ) {
        clear_dir(sub.as_fd());
    }
    let _ = rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR);
}

fn clear_dir(dir: std::os::fd::BorrowedFd<'_>) {
    let Ok(d) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let names: Vec<String> = d
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_owned))
        .filter(|n| n != "." && n != "..")
        .collect();
    for n in names {
        remove_at(dir, &n);
    }
}
