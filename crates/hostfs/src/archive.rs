//! Snapshot archives of host directories: a tar writer that walks by
//! descriptor ([`checkfu_sandbox_contained::walk`]) and an extractor that
//! never writes through a link.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};

use checkfu_sandbox_contained::{self as contained, ContainedError, WalkEntry};
use rustix::fs::{Mode, OFlags};

/// Failure to write or extract a snapshot archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A contained host-directory operation failed.
    #[error(transparent)]
    Contained(#[from] ContainedError),
    /// An archive entry was refused during extraction.
    #[error("archive entry {path:?} refused: {reason}")]
    Refused {
        /// Entry path as stored.
        path: PathBuf,
        /// Which rule it broke.
        reason: String,
    },
    /// A local i/o operation failed.
    #[error("i/o failure: {context}")]
    Io {
        /// What was being done.
        context: String,
        /// Underlying failure.
        #[source]
        source: io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> ArchiveError {
    let context = context.into();
    move |source| ArchiveError::Io { context, source }
}

fn errno_err(context: impl Into<String>) -> impl FnOnce(rustix::io::Errno) -> ArchiveError {
    let context = context.into();
    move |e| ArchiveError::Io {
        context,
        source: io::Error::from(e),
    }
}

/// What [`archive_dir`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveSummary {
    /// Entries written (directories, files, symlinks).
    pub entries: usize,
    /// FIFOs, sockets and device nodes left out.
    pub skipped: Vec<PathBuf>,
}

/// Writes an uncompressed tar of everything under the directory `root` to
/// `out`, walking by file descriptor ([`contained::walk`]): symlinks are
/// stored as symlinks and never followed, special files are skipped.
/// Entries carry mode bits, mtime 0 and owner 0:0 (ownership is not part
/// of a snapshot).
///
/// # Errors
///
/// [`ArchiveError::Contained`] from the walk (including more than
/// `max_entries` entries, or a file that changed size while archived),
/// [`ArchiveError::Io`] for write failures.
pub fn archive_dir<W: Write>(
    root: &Path,
    max_entries: usize,
    out: W,
) -> Result<(W, ArchiveSummary), ArchiveError> {
    let root_fd = contained::open_root(root)?;
    let mut builder = tar::Builder::new(out);
    builder.mode(tar::HeaderMode::Deterministic);
    let mut summary = ArchiveSummary::default();
    let mut write_err: Option<io::Error> = None;
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h
    };
    let res = contained::walk(root_fd.as_fd(), max_entries, &mut |entry| {
        let r = match entry {
            WalkEntry::Directory { path, mode, .. } => {
                let mut h = header(tar::EntryType::Directory, mode, 0);
                builder.append_data(&mut h, path, io::empty())
            }
            WalkEntry::RegularFile {
                path,
                mode,
                size_bytes,
                file,
            } => {
                let mut h = header(tar::EntryType::Regular, mode, size_bytes);
                let mut counted = CountingReader {
                    inner: file.take(size_bytes),
                    n: 0,
                };
                let r = builder.append_data(&mut h, path, &mut counted);
                if r.is_ok() && counted.n != size_bytes {
                    return Err(ContainedError::Io {
                        path: path.to_path_buf(),
                        source: io::Error::other("file shrank while being archived"),
                    });
                }
                r
            }
            WalkEntry::Symlink { path, target } => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                builder.append_link(&mut h, path, target)
            }
            WalkEntry::Special { path, .. } => {
                summary.skipped.push(path.to_path_buf());
                return Ok(());
            }
        };
        match r {
            Ok(()) => {
                summary.entries += 1;
                Ok(())
            }
            Err(e) => {
                write_err = Some(e);
                Err(ContainedError::Io {
                    path: PathBuf::from("<archive>"),
                    source: io::Error::other("archive write failed"),
                })
            }
        }
    });
    if let Some(e) = write_err {
        return Err(ArchiveError::Io {
            context: "writing archive".into(),
            source: e,
        });
    }
    res?;
    let out = builder.into_inner().map_err(io_err("finishing archive"))?;
    Ok((out, summary))
}

struct CountingReader<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

/// What [`extract_archive`] created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractSummary {
    /// Directories created.
    pub directories: usize,
    /// Regular files created.
    pub files: usize,
    /// Symlinks created.
    pub symlinks: usize,
}

fn safe_components(path: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(PathBuf::from(n)),
            Component::CurDir => {}
            Component::ParentDir => return Err("path holds `..`".into()),
            Component::RootDir | Component::Prefix(_) => return Err("absolute path".into()),
        }
    }
    Ok(out)
}

/// Whether a relative symlink target, read from the directory at `depth`
/// components below the root, stays under the root lexically.
fn link_stays_inside(depth: usize, target: &Path) -> bool {
    let mut d = depth as i64;
    for c in target.components() {
        match c {
            Component::Normal(_) => d += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                d -= 1;
                if d < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Extracts the uncompressed tar `archive` into `dest`, which must not
/// exist yet (it is created, mode 0755).
///
/// Refused (and the partial `dest` removed): absolute entry paths, `..`
/// components, absolute symlink targets, relative targets that climb above
/// the root (lexically, then checked physically after extraction with
/// `openat2(RESOLVE_BENEATH)`), hard links, device nodes, FIFOs. Nothing is
/// written through a symlink: every parent is opened with
/// `RESOLVE_NO_SYMLINKS`, files with `O_CREAT | O_EXCL | O_NOFOLLOW`. Mode
/// bits are restored without set-uid/set-gid; owners are the caller's.
///
/// # Errors
///
/// [`ArchiveError::Refused`] for a refused entry, `Io` otherwise.
pub fn extract_archive<R: Read>(archive: R, dest: &Path) -> Result<ExtractSummary, ArchiveError> {
    extract_with(archive, dest, false)
}

/// Like [`extract_archive`], except that symlinks are restored verbatim,
/// absolute targets and targets climbing above the root included.
///
/// For restoring a workload's own tree (a snapshot of a mount), where a
/// link such as `venv/bin/python -> /usr/bin/python3` is meaningful inside
/// the sandbox. Extraction itself still never writes through a link
/// (parents are opened with `RESOLVE_NO_SYMLINKS`, files with `O_EXCL |
/// O_NOFOLLOW`), so the restored links are inert on the host as long as the
/// host only ever reads the tree through [`checkfu_sandbox_contained`].
///
/// # Errors
///
/// As [`extract_archive`], except for the symlink-target rules.
pub fn extract_archive_keeping_links<R: Read>(
    archive: R,
    dest: &Path,
) -> Result<ExtractSummary, ArchiveError> {
    extract_with(archive, dest, true)
}

fn extract_with<R: Read>(
    archive: R,
    dest: &Path,
    keep_escaping_links: bool,
) -> Result<ExtractSummary, ArchiveError> {
    std::fs::create_dir(dest).map_err(io_err(format!("creating {}", dest.display())))?;
    let res = extract_into(archive, dest, keep_escaping_links);
    if res.is_err() {
        let _ = std::fs::remove_dir_all(dest);
    }
    res
}

fn extract_into<R: Read>(
    archive: R,
    dest: &Path,
    keep_escaping_links: bool,
) -> Result<ExtractSummary, ArchiveError> {
    let dest_fd = contained::open_root(dest)?;
    let mut summary = ExtractSummary::default();
    let mut links: Vec<PathBuf> = Vec::new();
    let mut ar = tar::Archive::new(archive);
    for entry in ar.entries().map_err(io_err("reading archive"))? {
        let mut entry = entry.map_err(io_err("reading archive entry"))?;
        let raw_path = entry
            .path()
            .map_err(io_err("reading entry path"))?
            .into_owned();
        let refuse = |reason: &str| ArchiveError::Refused {
            path: raw_path.clone(),
            reason: reason.to_string(),
        };
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XHeader | tar::EntryType::XGlobalHeader
        ) {
            continue;
        }
        let comps = safe_components(&raw_path).map_err(|r| refuse(&r))?;
        let Some((name, parents)) = comps.split_last() else {
            continue; // the root itself ("./")
        };
        let parent: PathBuf = parents.iter().collect();
        let rel: PathBuf = comps.iter().collect();
        let parent_fd = contained::open_dir_beneath_nofollow(dest_fd.as_fd(), &parent)
            .map_err(|e| refuse(&format!("parent not a plain directory under the root: {e}")))?;
        let mode = entry.header().mode().map_err(io_err("reading mode"))? & 0o1777;
        match kind {
            tar::EntryType::Directory => {
                match rustix::fs::mkdirat(&parent_fd, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(errno_err(format!("mkdir {}", rel.display()))(e)),
                }
                let fd = rustix::fs::openat(
                    &parent_fd,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|_| refuse("existing entry is not a directory"))?;
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
                    .map_err(errno_err(format!("chmod {}", rel.display())))?;
                summary.directories += 1;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let fd = rustix::fs::openat(
                    &parent_fd,
                    name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(|e| refuse(&format!("cannot create file: {e}")))?;
                let mut file = std::fs::File::from(fd);
                io::copy(&mut entry, &mut file)
                    .map_err(io_err(format!("writing {}", rel.display())))?;
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))
                    .map_err(errno_err(format!("chmod {}", rel.display())))?;
                summary.files += 1;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(io_err("reading link target"))?
                    .ok_or_else(|| refuse("symlink without target"))?
                    .into_owned();
                if keep_escaping_links {
                    rustix::fs::symlinkat(&target, &parent_fd, name)
                        .map_err(|e| refuse(&format!("cannot create symlink: {e}")))?;
                    summary.symlinks += 1;
                    continue;
                }
                if target.is_absolute() {
                    return Err(refuse("absolute symlink target"));
                }
                if !link_stays_inside(parents.len(), &target) {
                    return Err(refuse("symlink target climbs above the root"));
                }
                rustix::fs::symlinkat(&target, &parent_fd, name)
                    .map_err(|e| refuse(&format!("cannot create symlink: {e}")))?;
                links.push(rel);
                summary.symlinks += 1;
            }
            tar::EntryType::Link => return Err(refuse("hard links are not extracted")),
            _ => return Err(refuse("special file")),
        }
    }
    // Physical check: no link, followed from its own place, leaves the
    // root (chains of in-root links can combine into an escape that the
    // lexical check cannot see).
    for link in links {
        match contained::resolve_beneath(dest_fd.as_fd(), &link) {
            Ok(_) | Err(ContainedError::NotFound { .. }) => {}
            Err(e) => {
                return Err(ArchiveError::Refused {
                    path: link,
                    reason: format!("symlink resolves outside the root: {e}"),
                })
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
// The tests check by path, from outside, what extraction wrote.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "checkfu-archive-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn tar_with(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data_or_target) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            match kind {
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    h.set_size(0);
                    // Bypass the builder's own path checks with raw names.
                    h.set_link_name_literal(data_or_target).unwrap();
                    let name = h.as_old_mut().name.as_mut();
                    name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_cksum();
                    b.append(&h, io::empty()).unwrap();
                }
                _ => {
                    h.set_size(data_or_target.len() as u64);
                    let name = h.as_old_mut().name.as_mut();
                    name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_cksum();
                    b.append(&h, data_or_target.as_bytes()).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn round_trip_keeps_files_links_modes() {
        let base = scratch("rt");
        let src = base.join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("a/b/f.txt"), b"content").unwrap();
        std::fs::write(src.join("x.sh"), b"#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("a/b/f.txt", src.join("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("abs-link")).unwrap();
        std::fs::create_dir(src.join("empty")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(src.join("x.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (bytes, summary) = archive_dir(&src, 1000, Vec::new()).unwrap();
        assert_eq!(summary.entries, 7);
        // The archive has the absolute link; extraction refuses it.
        let err = extract_archive(bytes.as_slice(), &base.join("dst1")).unwrap_err();
        assert!(matches!(err, ArchiveError::Refused { .. }), "{err}");
        assert!(!base.join("dst1").exists());
        std::fs::remove_file(src.join("abs-link")).unwrap();
        let (bytes, _) = archive_dir(&src, 1000, Vec::new()).unwrap();
        let s = extract_archive(bytes.as_slice(), &base.join("dst")).unwrap();
        assert_eq!((s.directories, s.files, s.symlinks), (3, 2, 1));
        let dst = base.join("dst");
        assert_eq!(std::fs::read(dst.join("link")).unwrap(), b"content");
        let m = std::fs::metadata(dst.join("x.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o755);
        assert!(dst.join("empty").is_dir());
        // Deterministic bytes for the same tree.
        let (again, _) = archive_dir(&src, 1000, Vec::new()).unwrap();
        assert_eq!(bytes, again);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn keeping_links_restores_escaping_links_without_following_them() {
        let base = scratch("keep");
        let outside = base.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let bytes = tar_with(&[
            ("abs", tar::EntryType::Symlink, "/etc/passwd"),
            ("up", tar::EntryType::Symlink, "../outside"),
            ("d", tar::EntryType::Directory, ""),
            ("d/f", tar::EntryType::Regular, "data"),
        ]);
        let dst = base.join("dst");
        let s = extract_archive_keeping_links(bytes.as_slice(), &dst).unwrap();
        assert_eq!((s.directories, s.files, s.symlinks), (1, 1, 2));
        assert_eq!(
            std::fs::read_link(dst.join("abs")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            std::fs::read_link(dst.join("up")).unwrap(),
            Path::new("../outside")
        );
        // Still never written through.
        let through = tar_with(&[
            ("up", tar::EntryType::Symlink, "../outside"),
            ("up/evil", tar::EntryType::Regular, "x"),
        ]);
        let err =
            extract_archive_keeping_links(through.as_slice(), &base.join("dst2")).unwrap_err();
        assert!(matches!(err, ArchiveError::Refused { .. }), "{err}");
        assert!(!outside.join("evil").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn extraction_refuses_escapes() {
        let base = scratch("esc");
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "dotdot",
                tar_with(&[("../evil", tar::EntryType::Regular, "x")]),
            ),
            (
                "abs",
                tar_with(&[("/tmp/evil", tar::EntryType::Regular, "x")]),
            ),
            (
                "link-abs",
                tar_with(&[("l", tar::EntryType::Symlink, "/etc")]),
            ),
            (
                "link-up",
                tar_with(&[("l", tar::EntryType::Symlink, "../x")]),
            ),
            (
                "write-through-link",
                tar_with(&[
                    ("d", tar::EntryType::Directory, ""),
                    ("l", tar::EntryType::Symlink, "d"),
                    ("l/f", tar::EntryType::Regular, "x"),
                ]),
            ),
            (
                "chain",
                tar_with(&[
                    ("sub", tar::EntryType::Directory, ""),
                    ("sub/b", tar::EntryType::Symlink, ".."),
                    ("sub/c", tar::EntryType::Symlink, "b/../x"),
                ]),
            ),
            (
                "hardlink",
                tar_with(&[("h", tar::EntryType::Link, "/etc/passwd")]),
            ),
            ("fifo", tar_with(&[("p", tar::EntryType::Fifo, "")])),
        ];
        for (name, bytes) in cases {
            let dst = base.join(name);
            let res = extract_archive(bytes.as_slice(), &dst);
            assert!(
                matches!(res, Err(ArchiveError::Refused { .. })),
                "{name}: {res:?}"
            );
            assert!(!dst.exists(), "{name}: partial tree left");
        }
        assert!(!base.parent().unwrap().join("evil").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
