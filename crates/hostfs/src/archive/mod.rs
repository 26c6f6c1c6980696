//! Snapshot archives of host directories: a tar writer that walks by
//! descriptor ([`checkfu_sandbox_contained::walk`]) and an extractor that
//! never writes through a link.
//!
//! Both are sparse-aware: a file with holes is stored as its
//! data segments only (the PAX 1.0 sparse format of GNU tar) and restored
//! with the same holes, so an archive takes what the tree allocates, not
//! its apparent size. Archives are bounded ([`write_archives`]): by entries, by
//! host bytes (checked from what the tree allocates before the first byte
//! is written, and again while writing) and by a deadline.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use checkfu_sandbox_contained::{self as contained, ContainedError, WalkEntry};
use rustix::fs::{Mode, OFlags};

mod budget;
mod sparse;
#[cfg(test)]
mod tests;

pub use budget::{
    estimate_archive_bytes, free_bytes, instant_of, snapshot_budget, snapshot_ceiling_bytes,
    write_archives, ArchiveJob, ArchiveLimits, DEFAULT_SNAPSHOT_MAX_BYTES,
    FREE_SPACE_RESERVE_BYTES, SNAPSHOT_MAX_BYTES_ENV,
};
use budget::{stop_of, Bounded, Stop};

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
    /// The archive would take more host bytes than its bound.
    #[error("archive needs {needed_bytes} bytes, limit {limit_bytes} bytes")]
    OverBudget {
        /// Bytes it needs: the estimate, or what was written plus the
        /// write that would pass the bound.
        needed_bytes: u64,
        /// The bound, in bytes.
        limit_bytes: u64,
    },
    /// The archive's deadline passed before it was written.
    #[error("archive deadline passed")]
    DeadlineExceeded,
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
    /// Files stored sparse (their holes left out).
    pub sparse_files: usize,
    /// Bytes of the archive, headers and padding included.
    pub bytes: u64,
}

/// Writes an uncompressed tar of everything under the directory `root` to
/// `out`, walking by file descriptor ([`contained::walk`]): symlinks are
/// stored as symlinks and never followed, special files are skipped.
/// Entries carry mode bits, mtime 0 and owner 0:0 (ownership is not part
/// of a snapshot), so the same tree gives the same bytes.
///
/// A regular file with holes (per `SEEK_DATA`/`SEEK_HOLE`) is stored as
/// its data segments in GNU tar's PAX 1.0 sparse format; its holes are
/// never read. Writing stops at `limits.max_bytes` bytes and at
/// `limits.deadline`.
///
/// # Errors
///
/// [`ArchiveError::Contained`] from the walk (including more than
/// `limits.max_entries` entries, or a file that shrank while archived),
/// [`ArchiveError::OverBudget`] past the byte bound,
/// [`ArchiveError::DeadlineExceeded`] past the deadline,
/// [`ArchiveError::Io`] for other write failures.
pub fn archive_dir<W: Write>(
    root: &Path,
    limits: &ArchiveLimits,
    out: W,
) -> Result<(W, ArchiveSummary), ArchiveError> {
    let root_fd = contained::open_root(root)?;
    let mut builder = tar::Builder::new(Bounded::new(out, limits));
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
    let res = contained::walk(root_fd.as_fd(), limits.max_entries, &mut |entry| {
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
                let map =
                    sparse::data_map(file, size_bytes).map_err(|source| ContainedError::Io {
                        path: path.to_path_buf(),
                        source,
                    })?;
                match map {
                    None => {
                        let whole = [(0, size_bytes)];
                        let mut h = header(tar::EntryType::Regular, mode, size_bytes);
                        let segments: &[sparse::Segment] =
                            if size_bytes == 0 { &[] } else { &whole };
                        builder.append_data(
                            &mut h,
                            path,
                            sparse::SegmentReader::new(file, segments),
                        )
                    }
                    Some(segments) => {
                        summary.sparse_files += 1;
                        sparse_entry(&mut builder, path, mode, size_bytes, file, &segments)
                    }
                }
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
    let stopped = |e: io::Error, bounded: &Bounded<W>| match stop_of(&e) {
        Some(Stop::Deadline) => ArchiveError::DeadlineExceeded,
        Some(Stop::Bytes) => ArchiveError::OverBudget {
            needed_bytes: limits.max_bytes.saturating_add(1).max(bounded.written + 1),
            limit_bytes: limits.max_bytes,
        },
        None => ArchiveError::Io {
            context: "writing archive".into(),
            source: e,
        },
    };
    if let Some(e) = write_err {
        return Err(stopped(e, builder.get_ref()));
    }
    res?;
    if let Err(e) = builder.finish() {
        return Err(stopped(e, builder.get_ref()));
    }
    let bounded = builder.into_inner().map_err(io_err("finishing archive"))?;
    summary.bytes = bounded.written;
    Ok((bounded.inner, summary))
}

/// Appends a regular file with holes as a PAX 1.0 sparse entry: a PAX
/// header with the sparse keys and the real path (`path` and
/// `GNU.sparse.name`), then a POSIX header (GNU tar reads PAX sparse keys
/// only there) named `GNUSparseFile.0/data` for readers that know no
/// sparse format, whose data is the map and the data segments.
fn sparse_entry<W: Write>(
    builder: &mut tar::Builder<W>,
    path: &Path,
    mode: u32,
    size_bytes: u64,
    file: &std::fs::File,
    segments: &[sparse::Segment],
) -> io::Result<()> {
    let block = sparse::map_block(segments);
    let data: u64 = segments.iter().map(|s| s.1).sum();
    let real = size_bytes.to_string();
    let name = path.as_os_str().as_bytes();
    builder.append_pax_extensions([
        ("path", name),
        (sparse::KEY_MAJOR, b"1".as_slice()),
        (sparse::KEY_MINOR, b"0".as_slice()),
        (sparse::KEY_NAME, name),
        (sparse::KEY_REALSIZE, real.as_bytes()),
    ])?;
    let mut h = tar::Header::new_ustar();
    h.set_path(sparse::PLACEHOLDER_NAME)?;
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(mode);
    h.set_size(block.len() as u64 + data);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_cksum();
    builder.append(
        &h,
        Read::chain(block.as_slice(), sparse::SegmentReader::new(file, segments)),
    )
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
/// A sparse entry (PAX 1.0) is restored with its holes: each data segment
/// written at its offset, then the file's length set; a map out of order,
/// overlapping, past the file's size or not matching the entry's size is
/// refused, and so are old GNU sparse (`S`) entries.
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
                let sparse = match entry.pax_extensions() {
                    Ok(Some(exts)) => {
                        let pairs: Vec<(&[u8], &[u8])> = exts
                            .filter_map(Result::ok)
                            .map(|e| (e.key_bytes(), e.value_bytes()))
                            .collect();
                        sparse::sparse_header(pairs.into_iter()).map_err(|r| refuse(&r))?
                    }
                    Ok(None) => None,
                    Err(e) => return Err(io_err("reading PAX extensions")(e)),
                };
                let wrote = match sparse {
                    None => io::copy(&mut entry, &mut file).map(|_| ()),
                    Some(h) => {
                        let size = entry.size();
                        let segments = sparse::read_map(&mut entry, size, h.real_size)
                            .map_err(|r| refuse(&r))?;
                        sparse::write_segments(&mut entry, &mut file, &segments, h.real_size)
                    }
                };
                wrote.map_err(io_err(format!("writing {}", rel.display())))?;
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
            tar::EntryType::GNUSparse => {
                return Err(refuse("old GNU sparse entries are not extracted"))
            }
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
